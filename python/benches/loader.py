"""The Python package's "done when" figures, measured in one run on one dataset.

    python benches/loader.py DATASET_DIR [--h5ad FILE] [--workers 2] [--batch-size 256]

DATASET_DIR: e.g. written by `deltacells demo --cells 50000 --out DIR`. Prints
cells/s for: a full scan through Python (`iter_tiles`, scipy CSR) with 1
engine thread and with every core; the same matrix as an uncompressed h5ad
read in row blocks through anndata's backed mode (written next to the dataset
unless --h5ad names one); uniformly random batches read both ways;
`Dataset.batches` as plain CSR arrays (the engine's batches, no torch); a DataLoader
over CellDataset with N workers and in-process; what handing batches of
that size from N worker processes costs alone (a dataset yielding ready
batches); and peak resident memory of an epoch
in-process against the engine's cache bound. Compare `deltacells bench DIR
--threads 1` (full scan, 1 thread) from the same run.
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

import deltacells


def rate(cells, seconds):
    return f"{cells / seconds:12.0f} cells/s ({seconds:.2f} s)"


def best(reps, f):
    f()  # warm: imports, page cache, the engine's threads
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def scan(ds):
    nnz = 0
    for X in ds.iter_tiles():
        nnz += X.nnz
    return nnz


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--h5ad")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cache-mb", type=int, default=512)
    ap.add_argument("--random-batches", type=int, default=50)
    ap.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_only:
        return memory(args)

    ds1 = deltacells.open(args.dir, threads=1)
    n = ds1.n_obs
    print(f"dataset: {n} cells x {ds1.n_vars} genes, {ds1.n_tiles} tiles")
    print("python full scan, 1 engine thread:  ", rate(n, best(args.reps, lambda: scan(ds1))))
    dsn = deltacells.open(args.dir)
    print(f"python full scan, {dsn.engine['threads']} engine threads: ",
          rate(n, best(args.reps, lambda: scan(dsn))))

    h5ad = args.h5ad or os.path.join(os.path.dirname(os.path.abspath(args.dir)),
                                     os.path.basename(os.path.abspath(args.dir)) + ".h5ad")
    import anndata as ad

    if not os.path.exists(h5ad):
        ad.AnnData(X=dsn.read(slice(None), dtype="float32")).write_h5ad(h5ad)
    backed = ad.read_h5ad(h5ad, backed="r")
    block = int(dsn.tile_limits[1]) if dsn.n_tiles > 1 else n

    def anndata_scan():
        for a in range(0, n, block):
            backed.X[a:a + block]

    print("anndata backed h5ad, row blocks:    ", rate(n, best(args.reps, anndata_scan)))

    # Uniformly random batches: the same cells both ways (sorted: h5py
    # indexes in increasing order). Each side first reads other random
    # batches, so both measure a warm reader (page cache, open file, the
    # engine's tile cache), as a long-running loader is.
    rng = np.random.default_rng(7)

    def draw():
        return [np.sort(rng.choice(n, args.batch_size, replace=False))
                for _ in range(args.random_batches)]

    warm_batches, random_batches = draw(), draw()
    cells = len(random_batches) * args.batch_size
    dsr = deltacells.open(args.dir)

    def timed(read):
        for idx in warm_batches:
            read(idx)
        t = time.perf_counter()
        for idx in random_batches:
            read(idx)
        return time.perf_counter() - t

    print(f"random {args.batch_size}-cell batches, anndata backed:  ",
          rate(cells, timed(lambda idx: backed.X[idx])))
    print(f"random {args.batch_size}-cell batches, deltacells:      ",
          rate(cells, timed(dsr.read)))
    backed.file.close()

    import torch
    from torch.utils.data import DataLoader

    from deltacells.torch import CellDataset

    def raw_batches():
        for _ in dsn.batches(batch_size=args.batch_size, cache_bytes=args.cache_mb << 20,
                             format="arrays"):
            pass

    print("Dataset.batches, CSR arrays (no torch):", rate(n, best(args.reps, raw_batches)))
    cd = CellDataset(args.dir, batch_size=args.batch_size, seed=0, cache_bytes=args.cache_mb << 20)

    def loader():
        for _ in DataLoader(cd, batch_size=None, num_workers=args.workers):
            pass

    print(f"DataLoader, {args.workers} workers:             ", rate(n, best(args.reps, loader)))

    def in_process():
        for _ in DataLoader(cd, batch_size=None, num_workers=0):
            pass

    print("DataLoader, in-process (num_workers=0):", rate(n, best(args.reps, in_process)))

    # What moving batches of this size from worker processes costs by itself:
    # a dataset that yields one ready batch (same shapes) over and over.
    sample = next(iter(cd))
    n_batches = len(cd)

    class Ready(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
            for _ in range(worker, n_batches, workers):
                yield {"X": sample["X"].clone(), "cells": sample["cells"].clone()}

    def floor():
        for _ in DataLoader(Ready(), batch_size=None, num_workers=args.workers):
            pass

    print(f"hand-off floor, {args.workers} workers (ready batches):", rate(n, best(args.reps, floor)))

    # Memory in a fresh process, so the scans above do not set its peak.
    subprocess.run([sys.executable, __file__, args.dir, "--memory-only",
                    "--batch-size", str(args.batch_size), "--cache-mb", str(args.cache_mb)],
                   check=True)


def rss_mib():
    """(resident now, peak since the last reset) in MiB, from /proc."""
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def memory(args):
    """Peak RSS of one in-process epoch over the RSS before it. The peak is
    reset first (`/proc/self/clear_refs`): `ru_maxrss` would carry the
    parent's peak, which Linux keeps across the `exec` of this process."""
    from deltacells.torch import CellDataset

    ds = CellDataset(args.dir, batch_size=args.batch_size, seed=1, prefetch=2,
                     cache_bytes=args.cache_mb << 20)
    len(ds)  # opens the dataset
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before, _ = rss_mib()
    largest = 0
    for b in ds:
        largest = max(largest, b["X"].values().numel() * 8 + b["cells"].numel() * 8)
    _, peak = rss_mib()
    print(f"in-process epoch: peak RSS {peak:.0f} MiB, {peak - before:.0f} MiB "
          f"over the {before:.0f} MiB before it; cache bound {args.cache_mb} MiB; "
          f"largest batch {largest / 2**20:.1f} MiB (in flight: 2 prefetched, 1 in the "
          f"channel, 1 with the caller)")


if __name__ == "__main__":
    main()

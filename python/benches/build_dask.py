"""deltacells.build on a Dask cluster of 1 and then 2 worker processes: the
throughput ratio and each worker's peak resident memory.

    python benches/build_dask.py [--cells 100000] [--genes 20000] [--nnz 500]
                                 [--tiles-per-task 2] [--dir DIR]

Writes two h5ad inputs with anndata (`--cells` cells each, `--nnz` nonzeros
per cell on average, gene popularity skewed as in real data; the second input
has a shifted, reversed gene set, so the union is bigger than either), then
builds them into one dataset on a `distributed.LocalCluster` of one worker
process and of two (one thread each, 127.0.0.1), checks both outputs hold the
same bytes, and prints cells/s of each build, the ratio, and for every worker
process its peak RSS and the share of the build's time it spent on a CPU
(Linux; well under 100% means the machine had no free core for it). Needs the
package built with the `hdf5` feature and `pip install "deltacells[dask]"`.
"""

import argparse
import os
import pathlib
import shutil
import tempfile
import time

import numpy as np


def peak_rss_mib():
    """This process's peak resident memory (run on each worker): Linux's
    VmHWM, the high-water mark of this address space. Not `ru_maxrss`, which
    a spawned worker inherits from the process it was forked from."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def cpu_seconds():
    """CPU time this process has used (run on each worker)."""
    t = os.times()
    return t.user + t.system


def write_input(path, n_cells, genes, nnz, seed):
    import anndata as ad
    import pandas as pd
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    # Gene popularity falls off as in real counts: a few genes in most cells.
    weight = 1.0 / np.arange(1, len(genes) + 1) ** 0.8
    cdf = np.cumsum(weight / weight.sum())
    blocks = []
    for start in range(0, n_cells, 10_000):
        n = min(10_000, n_cells - start)
        rows = np.repeat(np.arange(n), nnz)
        cols = np.minimum(np.searchsorted(cdf, rng.random(n * nnz)), len(genes) - 1)
        values = rng.geometric(0.4, size=n * nnz).astype(np.float32)
        block = sp.csr_matrix((values, (rows, cols)), shape=(n, len(genes)))
        block.sum_duplicates()
        blocks.append(block)
    X = sp.vstack(blocks, format="csr")
    obs = pd.DataFrame({"cell_type": pd.Categorical(rng.choice(["T", "B", "NK", "Mono"], n_cells))},
                       index=[f"{path.stem}-{i}" for i in range(n_cells)])
    ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=genes)).write_h5ad(path)
    return X.nnz


def run(inputs, out, n_workers, tiles_per_task):
    import distributed

    import deltacells

    with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        before = client.run(cpu_seconds)
        start = time.perf_counter()
        summary = deltacells.build(inputs, out, client=client, tiles_per_task=tiles_per_task)
        seconds = time.perf_counter() - start
        after = client.run(cpu_seconds)
        busy = [(after[w] - before[w]) / seconds for w in sorted(after)]
        rss = [client.run(peak_rss_mib)[w] for w in sorted(after)]
    return summary, seconds, rss, busy


def tree(root):
    root = pathlib.Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=100_000, help="cells per input")
    parser.add_argument("--genes", type=int, default=20_000, help="genes per input")
    parser.add_argument("--nnz", type=int, default=500, help="nonzeros per cell (about)")
    parser.add_argument("--tiles-per-task", type=int, default=2,
                        help="tiles per write task (enough tasks to share among the workers)")
    parser.add_argument("--dir", help="where inputs and outputs go (default: a temporary directory)")
    args = parser.parse_args()
    work = pathlib.Path(args.dir or tempfile.mkdtemp(prefix="deltacells-build-"))
    work.mkdir(parents=True, exist_ok=True)
    shift = args.genes // 10
    names = [f"G{g}" for g in range(args.genes + shift)]
    inputs, nnz = [], 0
    for i, genes in enumerate([names[:args.genes], names[shift:][::-1]]):
        path = work / f"input_{i}.h5ad"
        if not path.exists():
            t = time.perf_counter()
            write_input(path, args.cells, genes, args.nnz, seed=i)
            print(f"wrote {path} in {time.perf_counter() - t:.1f} s")
        inputs.append(str(path))
    rates, outputs = {}, {}
    for n_workers in (1, 2):
        out = work / f"out_{n_workers}"
        shutil.rmtree(out, ignore_errors=True)
        summary, seconds, rss, busy = run(inputs, str(out), n_workers, args.tiles_per_task)
        rates[n_workers] = summary.n_obs / seconds
        outputs[n_workers] = out
        print(f"{n_workers} worker(s): {summary.n_obs} cells x {summary.n_vars} genes, "
              f"{summary.tasks} tasks, {summary.tile_bytes / 2**20:.1f} MiB of tiles in "
              f"{seconds:.1f} s = {rates[n_workers]:.0f} cells/s; "
              f"peak RSS per worker: {', '.join(f'{r:.0f} MiB' for r in rss)}; "
              f"CPU busy per worker: {', '.join(f'{b:.0%}' for b in busy)}")
    same = tree(outputs[1]) == tree(outputs[2])
    print(f"2 workers / 1 worker: {rates[2] / rates[1]:.2f}x; outputs byte-identical: {same}")


if __name__ == "__main__":
    main()

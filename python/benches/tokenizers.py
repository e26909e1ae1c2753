"""The fused tokenizers against per-cell numpy tokenizers of the same
semantics, written as a user would write them, both reading the same dataset.

    python benches/tokenizers.py [--cells 20000] [--genes 20000] [--nnz 1900]
                               [--batch 256] [--dir DIR]

Writes a synthetic dataset (`--nnz` nonzero genes per cell on average, gene
popularity skewed, Geneformer-style medians per gene), then times, batch
after batch over every cell: `ds.read(cells, tokenizer=...)` for Geneformer
(2,048 tokens, special tokens) and scGPT (51 bins, 1,200 tokens), and the
same batches read as CSR (`ds.read(cells)`) and tokenized cell by cell in
numpy (`np.argsort` over median-scaled values, ties by token id;
`np.digitize(x, np.quantile(x, np.linspace(0, 1, 50)))`, long cells sampled
with `np.random.choice`). Prints cells/s of each and the fused rate as a
multiple of numpy's.
"""

import argparse
import pathlib
import tempfile
import time

import numpy as np
import pandas as pd
import scipy.sparse as sp

import deltacells
from deltacells.tokenize import Geneformer, ScGPT


def synthetic(n_cells, n_genes, nnz, seed=0):
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, n_genes + 1) ** 0.6
    popularity /= popularity.sum()
    rows = []
    block = 1000
    for start in range(0, n_cells, block):
        n = min(block, n_cells - start)
        k = rng.poisson(nnz, size=n).clip(1, n_genes)
        indptr = np.r_[0, np.cumsum(k)]
        indices = np.concatenate([np.sort(rng.choice(n_genes, size=c, replace=False, p=popularity))
                                  for c in k])
        data = rng.geometric(0.3, size=indptr[-1]).astype(np.float32)
        rows.append(sp.csr_matrix((data, indices, indptr), shape=(n, n_genes)))
    return sp.vstack(rows).tocsr()


def geneformer_numpy(X, token_of, median_of, max_len, cls, eos, pad):
    """Per cell: values over genes with a token and a median, argsort."""
    out = np.full((X.shape[0], max_len), pad, np.int32)
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        genes, counts = X.indices[a:b], X.data[a:b].astype(np.float64)
        tok, med = token_of[genes], median_of[genes]
        keep = (tok >= 0) & (med > 0)
        v = counts[keep] / counts.sum() * 10_000 / med[keep]
        t = tok[keep]
        order = np.lexsort((t, -v))[:max_len - 2]
        out[i, 0] = cls
        out[i, 1:1 + len(order)] = t[order]
        out[i, 1 + len(order)] = eos
    return out


def scgpt_numpy(X, token_of, n_bins, max_len, cls, pad, rng):
    """Per cell: bins over the vocabulary genes, sampled when too many."""
    ids = np.full((X.shape[0], max_len), pad, np.int32)
    values = np.full((X.shape[0], max_len), -2.0, np.float32)
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        tok = token_of[X.indices[a:b]]
        keep = tok >= 0
        x, t = X.data[a:b][keep].astype(np.float64), tok[keep]
        bins = np.digitize(x, np.quantile(x, np.linspace(0, 1, n_bins - 1)))
        if len(t) > max_len - 1:
            pick = np.sort(rng.choice(len(t), max_len - 1, replace=False))
            t, bins = t[pick], bins[pick]
        ids[i, 0], values[i, 0] = cls, 0
        ids[i, 1:1 + len(t)], values[i, 1:1 + len(t)] = t, bins
    return ids, values


def rate(n_cells, batch, step):
    start = time.perf_counter()
    for a in range(0, n_cells, batch):
        step(range(a, min(a + batch, n_cells)))
    return n_cells / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, default=20_000)
    p.add_argument("--genes", type=int, default=20_000)
    p.add_argument("--nnz", type=int, default=1900)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        out = pathlib.Path(tmp) / "ds"
        var = pd.DataFrame(index=[f"gene{g}" for g in range(args.genes)])
        deltacells.write(synthetic(args.cells, args.genes, args.nnz), out, var=var)
        ds = deltacells.open(out)
        names = list(ds.var_names)
        rng = np.random.default_rng(1)
        tokens = {n: i + 3 for i, n in enumerate(names) if i % 10 != 9}
        medians = {n: float(m) for n, m in zip(names, rng.uniform(0.5, 20, len(names)))}
        specials = {"<pad>": 0, "<cls>": 1, "<eos>": 2}
        token_of = np.array([tokens.get(n, -1) for n in names], np.int64)
        median_of = np.array([medians[n] for n in names], np.float64)
        geneformer = Geneformer({**tokens, **specials}, medians, special_tokens=True)
        scgpt = ScGPT({**tokens, **specials})
        n, b = args.cells, args.batch
        ds.read(range(min(n, b)), tokenizer=geneformer)  # warm the cache and the table
        rows = {
            "CSR read": rate(n, b, lambda c: ds.read(c)),
            "Geneformer fused": rate(n, b, lambda c: ds.read(c, tokenizer=geneformer)),
            "Geneformer numpy": rate(n, b, lambda c: geneformer_numpy(
                ds.read(c), token_of, median_of, 2048, 1, 2, 0)),
            "scGPT fused": rate(n, b, lambda c: ds.read(c, tokenizer=scgpt)),
            "scGPT numpy": rate(n, b, lambda c: scgpt_numpy(ds.read(c), token_of, 51, 1200, 1, 0,
                                                            rng)),
        }
        for name, r in rows.items():
            print(f"{name:18s} {r:10.0f} cells/s")
        for model in ("Geneformer", "scGPT"):
            multiple = rows[f"{model} fused"] / rows[f"{model} numpy"]
            print(f"{model}: fused is {multiple:.1f}x the per-cell numpy tokenizer")


if __name__ == "__main__":
    main()

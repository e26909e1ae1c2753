"""Shared fixtures: the golden datasets and small synthetic count matrices."""

import json
import pathlib

import anndata
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import deltacells

# python/tests -> repository root -> ../shared/testdata (where CI lays it too).
TESTDATA = pathlib.Path(__file__).resolve().parents[2] / ".." / "shared" / "testdata"
GOLDEN = TESTDATA / "deltacells" / "datasets"


def golden_index():
    return json.loads((GOLDEN / "index.json").read_text())


def counts(n_obs, n_vars, density=0.05, seed=0, dtype=np.float32):
    """A random count matrix with a few large values (above 65535)."""
    rng = np.random.default_rng(seed)
    m = sp.random(n_obs, n_vars, density=density, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.geometric(0.3, size=k)).astype(dtype)
    if m.nnz:
        m.data[rng.integers(0, m.nnz, size=max(1, m.nnz // 1000))] = 70_000
    return m


def loader_order(batches, workers):
    """A rank's batches as a loader with `workers` workers delivers them:
    split into contiguous spans (longer spans first), one batch from each
    span in turn."""
    base, extra = divmod(len(batches), workers)
    spans, at = [], 0
    for w in range(workers):
        n = base + (w < extra)
        spans.append(list(batches[at:at + n]))
        at += n
    out = []
    while any(spans):
        for span in spans:
            if span:
                out.append(span.pop(0))
    return out


@pytest.fixture(scope="session")
def small(tmp_path_factory):
    """A written dataset of 1,000 cells x 300 genes with obs and var, and its source."""
    X = counts(1000, 300, seed=1)
    rng = np.random.default_rng(2)
    obs = pd.DataFrame({
        "cell_type": pd.Categorical(rng.choice(["T", "B", "NK"], size=1000)),
        "n_counts": np.asarray(X.sum(axis=1)).ravel().astype(np.int64),
        "score": rng.random(1000),
        "passed": rng.random(1000) > 0.2,
    })
    var = pd.DataFrame({"kind": pd.Categorical(["gene"] * 290 + ["spike"] * 10)},
                       index=pd.Index([f"G{i}" for i in range(300)], name="gene_ids"))
    out = tmp_path_factory.mktemp("small") / "ds"
    deltacells.write(X, out, obs=obs, var=var, tile_size=128, level=3)
    return out, X, obs, var


N_CELLS = (300, 200, 150)


def member_frames(rng):
    """Three members: gene subsets in different orders, different obs columns
    and categories, distinct cell names."""
    genes_a = [f"G{i}" for i in range(60)]
    genes_b = [f"G{i}" for i in rng.permutation(np.arange(20, 80))] + ["H0", "H1"]
    genes_c = [f"G{i}" for i in rng.permutation(np.arange(0, 90, 3))]
    genes = (genes_a, genes_b, genes_c)
    obs = (
        pd.DataFrame({
            "cell_type": pd.Categorical(rng.choice(["T", "B"], size=N_CELLS[0])),
            "score": rng.random(N_CELLS[0]),
        }),
        pd.DataFrame({
            "cell_type": pd.Categorical(rng.choice(["B", "NK", "c10", "c2"], size=N_CELLS[1])),
            "n": rng.integers(0, 100, size=N_CELLS[1]).astype(np.int64),
            "donor": rng.choice(["d1", "d2"], size=N_CELLS[1]).astype(object),
        }),
        pd.DataFrame({
            "score": rng.random(N_CELLS[2]),
            "n": rng.integers(0, 100, size=N_CELLS[2]).astype(np.int32),
        }),
    )
    for prefix, frame in zip("abc", obs):
        frame.index = pd.Index([f"{prefix}{i}" for i in range(len(frame))], name="cell")
    return genes, obs


@pytest.fixture(scope="session")
def corpus_members(tmp_path_factory):
    """The members' locations, written with `deltacells.write`."""
    rng = np.random.default_rng(11)
    genes, obs = member_frames(rng)
    root = tmp_path_factory.mktemp("corpus")
    paths = []
    for i, (g, o) in enumerate(zip(genes, obs)):
        X = counts(len(o), len(g), density=0.1, seed=20 + i)
        var = pd.DataFrame({"gene_ids": [f"ENS{name}" for name in g]},
                           index=pd.Index(g, name="gene"))
        path = root / f"part_{'abc'[i]}.dc"
        deltacells.write(X, path, obs=o, var=var, tile_size=64, level=3)
        paths.append(path)
    return paths


def concat(paths, join="outer"):
    """The members read back one by one and concatenated as anndata does,
    with the source column."""
    adatas = [deltacells.open(p).to_anndata(dtype="int32") for p in paths]
    keys = [p.stem for p in paths]
    return anndata.concat(adatas, join=join, label="dataset_id", keys=keys)


def aligned(adata, var_names):
    """`adata.X` as a dense int array with columns in `var_names` order."""
    X = adata.X.toarray() if sp.issparse(adata.X) else np.asarray(adata.X)
    at = {name: j for j, name in enumerate(adata.var_names)}
    out = np.zeros((adata.n_obs, len(var_names)), dtype=np.int64)
    for j, name in enumerate(var_names):
        if name in at:
            out[:, j] = X[:, at[name]]
    return out


# The special tokens of the tokenizer tests' dictionaries.
PAD, CLS, EOS = 0, 1, 2


def geneformer_numpy(X, names, tokens, medians, max_len, special, totals=None):
    """Geneformer's rank-value tokens of the rows of `X` (columns `names`),
    one cell at a time with `np.lexsort`; each cell's total is its row's sum,
    or `totals[i]` (a corpus member's cell, whose total counts genes that
    the columns leave out)."""
    ids = np.full((X.shape[0], max_len), PAD, np.int32)
    for i in range(X.shape[0]):
        row = X.getrow(i)
        total = row.data.astype(np.float64).sum() if totals is None else float(totals[i])
        keep = [(names[g], c) for g, c in zip(row.indices, row.data)
                if names[g] in tokens and names[g] in medians]
        tok = np.array([tokens[k] for k, _ in keep], np.int64)
        v = np.array([c / total * 10_000 / medians[k] for k, c in keep], np.float64)
        order = np.lexsort((tok, -v))  # by -v, then token
        picked = list(tok[order][:max_len - 2 if special else max_len])
        if special:
            picked = [CLS] + picked + [EOS]
        ids[i, :len(picked)] = picked
    return ids


def scgpt_numpy(X, names, tokens, n_bins, max_len, normalize=None, log1p=False, totals=None):
    """scGPT's tokens and binned values of the rows of `X` (columns `names`),
    one cell at a time with `np.quantile` and `np.digitize`, the genes in
    column order (a cell of more than `max_len - 1` genes is cut, where the
    tokenizer samples them); `totals` as in `geneformer_numpy`."""
    ids = np.full((X.shape[0], max_len), PAD, np.int32)
    values = np.full((X.shape[0], max_len), -2.0, np.float32)
    for i in range(X.shape[0]):
        row = X.getrow(i)
        total = row.data.astype(np.float64).sum() if totals is None else float(totals[i])
        keep = [(tokens[names[g]], c) for g, c in zip(row.indices, row.data) if names[g] in tokens]
        ids[i, 0], values[i, 0] = CLS, 0
        if not keep:
            continue
        tok = np.array([t for t, _ in keep])
        x = np.array([c for _, c in keep], np.float64)
        if normalize is not None:
            x = x / total * normalize
        if log1p:
            x = np.log1p(x)
        bins = np.digitize(x, np.quantile(x, np.linspace(0, 1, n_bins - 1)))
        n = min(len(tok), max_len - 1)
        ids[i, 1:1 + n], values[i, 1:1 + n] = tok[:n], bins[:n]
    return ids, values


def differently_named(tmp_path, sizes, seed):
    """Datasets of `sizes` cells over the same genes whose cell ids live in
    different obs columns (`barcode`, as a 10x folder's; `cell_id`, as an
    h5ad's) and, for the last, in none: their locations."""
    rng = np.random.default_rng(seed)
    indexes = [pd.Index([f"AAAC-{i}" for i in range(sizes[0])], name="barcode"),
               pd.Index([f"cell-{i}" for i in range(sizes[1])], name="cell_id"),
               pd.RangeIndex(sizes[2])]
    paths = []
    for k, index in enumerate(indexes):
        obs = pd.DataFrame({"score": rng.random(len(index))}, index=index)
        X = rng.poisson(0.5, size=(len(index), 6)).astype(np.int32)
        var = pd.DataFrame(index=[f"G{g}" for g in range(6)])
        paths.append(tmp_path / f"m{k}.dc")
        deltacells.write(X, paths[-1], obs=obs, var=var, tile_size=4, level=1)
    return paths

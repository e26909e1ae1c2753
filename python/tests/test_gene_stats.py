"""deltacells.gene_stats against numpy over the matrix the dataset was written from."""

import numpy as np
import pandas as pd
import pytest

import deltacells
from deltacells.errors import InputError


def numpy_stats(X, totals=None):
    """Every column of gene_stats, computed with numpy from a matrix (each
    cell normalized by `totals`, by default its row sum)."""
    D = X.toarray().astype(np.float64) if hasattr(X, "toarray") else np.asarray(X, dtype=np.float64)
    totals = D.sum(axis=1, keepdims=True) if totals is None else totals
    with np.errstate(invalid="ignore", divide="ignore"):
        N = np.where(D > 0, (D / totals) * 10_000.0, 0.0)
    medians = []
    for g in range(D.shape[1]):
        nz = np.sort(N[:, g][N[:, g] > 0])
        medians.append(nz[(len(nz) - 1) // 2] if len(nz) else np.nan)
    return pd.DataFrame({
        "n_cells": (D > 0).sum(axis=0), "sum": D.sum(axis=0).astype(np.uint64),
        "mean": D.mean(axis=0), "var": D.var(axis=0),
        "norm_mean": N.mean(axis=0), "norm_var": N.var(axis=0), "lower_median": medians,
    })


def assert_stats_equal(got, want):
    """`got` (gene_stats) equal to `want` (numpy_stats, in got's gene order)."""
    np.testing.assert_array_equal(got["n_cells"].to_numpy(), want["n_cells"].to_numpy())
    np.testing.assert_array_equal(got["sum"].to_numpy(), want["sum"].to_numpy())
    for column in ["mean", "var", "norm_mean", "norm_var"]:
        np.testing.assert_allclose(got[column].to_numpy(), want[column].to_numpy(), rtol=1e-12, atol=0,
                                   err_msg=column)
    lower = want["lower_median"].to_numpy()
    expressed = ~np.isnan(lower)
    assert np.array_equal(np.isnan(got["norm_median"].to_numpy()), ~expressed)
    err = np.abs(got["norm_median"].to_numpy()[expressed] - lower[expressed])
    assert np.all(err <= 0.01 * lower[expressed] * (1 + 1e-12))


def test_gene_stats_match_numpy(small):
    path, X, _, var = small
    got = deltacells.gene_stats(path)
    # The writer sorted the genes by decreasing totals: compare gene by gene.
    want = numpy_stats(X).set_index(var.index).loc[got.index]
    assert list(got.columns) == ["n_cells", "sum", "mean", "var", "norm_mean", "norm_var", "norm_median"]
    assert sorted(got.index) == sorted(var.index) and got.index.name == "gene"
    assert list(got.index) == list(deltacells.open(path).var_names)
    assert_stats_equal(got, want)


def test_gene_stats_of_an_open_dataset_keyed_by_a_var_column(small):
    path, _, _, var = small
    ds = deltacells.open(path)
    by_names = deltacells.gene_stats(ds)
    by_key = deltacells.gene_stats(ds, gene_key="gene_ids")
    assert by_key.index.name == "gene_ids" and list(by_key.index) == list(ds.var_names)
    pd.testing.assert_frame_equal(by_names.reset_index(drop=True), by_key.reset_index(drop=True))
    with pytest.raises(InputError, match="no_such"):
        deltacells.gene_stats(ds, gene_key="no_such")
    # A raw TypeError before.
    for tiles in (0, 2.5, "2"):
        with pytest.raises(InputError, match="tiles_per_task"):
            deltacells.gene_stats(ds, tiles_per_task=tiles)


def test_shares_computed_on_dask_workers_merge_into_the_same_figures(small):
    import distributed
    path, _, _, _ = small
    whole = deltacells.gene_stats(path)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        for tiles in [1, 3]:
            pd.testing.assert_frame_equal(deltacells.gene_stats(path, client=client, tiles_per_task=tiles),
                                          whole, check_exact=True)
    with pytest.raises(InputError, match="not gene statistics"):
        deltacells._deltacells.gene_stats(deltacells.open(path)._h, None, [b"garbage"])


def test_a_corpus_is_its_members_statistics_in_its_vocabulary(tmp_path):
    """Over a corpus's vocabulary, each cell normalized by its total over all
    of its member's genes (the intersection drops genes those totals still
    count), a member without a gene counting zeros; the same from a corpus
    file and from shares computed on Dask workers."""
    import distributed
    from conftest import counts

    names = ([f"G{i}" for i in range(40)], [f"G{i}" for i in range(20, 60)] + ["H0"])
    paths = []
    for i, genes in enumerate(names):
        X = counts(150, len(genes), density=0.2, seed=40 + i)
        path = tmp_path / f"m{i}.dc"
        deltacells.write(X, path, var=pd.DataFrame(index=pd.Index(genes, name="gene")), tile_size=32)
        paths.append(path)
    members = [deltacells.open(p) for p in paths]
    for space in ["union", "intersection"]:
        corpus = deltacells.Corpus(paths, genes=space)
        got = deltacells.gene_stats(corpus)
        vocab = list(corpus.var_names)
        assert list(got.index) == vocab and got.index.name == "gene"
        rows, totals = [], []
        for ds in members:
            D = np.asarray(ds.read(format="numpy", dtype="int32"), dtype=np.float64)
            at = {name: j for j, name in enumerate(ds.var_names)}
            rows.append(np.stack([D[:, at[n]] if n in at else np.zeros(len(D)) for n in vocab], axis=1))
            totals.append(D.sum(axis=1, keepdims=True))
        assert_stats_equal(got, numpy_stats(np.vstack(rows), np.vstack(totals)))
        corpus.save(tmp_path / f"{space}.json")
        pd.testing.assert_frame_equal(deltacells.gene_stats(tmp_path / f"{space}.json"), got,
                                      check_exact=True)
        with pytest.raises(InputError, match="keyed"):
            deltacells.gene_stats(corpus, gene_key="gene_ids")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        pd.testing.assert_frame_equal(deltacells.gene_stats(corpus, client=client, tiles_per_task=2),
                                      got, check_exact=True)

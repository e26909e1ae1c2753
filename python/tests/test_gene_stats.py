"""deltacells.gene_stats against numpy over the matrix the dataset was written from."""

import numpy as np
import pandas as pd
import pytest

import deltacells
from deltacells.errors import InputError


def numpy_stats(X):
    """Every column of gene_stats, computed with numpy from a dense matrix."""
    D = X.toarray().astype(np.float64)
    totals = D.sum(axis=1, keepdims=True)
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


def test_gene_stats_match_numpy(small):
    path, X, _, var = small
    got = deltacells.gene_stats(path)
    # The writer sorted the genes by decreasing totals: compare gene by gene.
    want = numpy_stats(X).set_index(var.index).loc[got.index]
    assert list(got.columns) == ["n_cells", "sum", "mean", "var", "norm_mean", "norm_var", "norm_median"]
    assert sorted(got.index) == sorted(var.index) and got.index.name == "gene"
    assert list(got.index) == list(deltacells.open(path).var_names)
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


def test_gene_stats_of_an_open_dataset_keyed_by_a_var_column(small):
    path, _, _, var = small
    ds = deltacells.open(path)
    by_names = deltacells.gene_stats(ds)
    by_key = deltacells.gene_stats(ds, gene_key="gene_ids")
    assert by_key.index.name == "gene_ids" and list(by_key.index) == list(ds.var_names)
    pd.testing.assert_frame_equal(by_names.reset_index(drop=True), by_key.reset_index(drop=True))
    with pytest.raises(InputError, match="no_such"):
        deltacells.gene_stats(ds, gene_key="no_such")


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

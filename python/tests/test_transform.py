"""Normalized and log1p reads against scanpy's normalize_total + log1p, and
gene vocabularies whose missing names read as zero columns."""

import numpy as np
import pytest
import scipy.sparse as sp

import deltacells
from deltacells.errors import InputError


def scanpy_reference(X, var, var_names, target_sum, log):
    """scanpy's normalize_total (and log1p) over the whole matrix, in float64,
    with the columns in the dataset's order."""
    import anndata
    import scanpy as sc

    adata = anndata.AnnData(X=sp.csr_matrix(X, dtype=np.float64), var=var[[]].copy())
    sc.pp.normalize_total(adata, target_sum=target_sum)
    if log:
        sc.pp.log1p(adata)
    return adata[:, list(var_names)].X.toarray()


def assert_close(got, want):
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("target_sum,log", [(1e4, True), (1e4, False), (123.0, True)])
def test_every_gene_matches_scanpy(small, target_sum, log):
    path, X, _, var = small
    ds = deltacells.open(path)
    want = scanpy_reference(X, var, ds.var_names, target_sum, log)
    assert_close(ds.read(normalize=target_sum, log1p=log, format="numpy"), want)
    csr = ds.read(normalize=target_sum, log1p=log)
    assert isinstance(csr, sp.csr_matrix)
    assert_close(csr.toarray(), want)
    cells = [999, 3, 3, 500]
    assert_close(ds.read(cells, normalize=target_sum, log1p=log, format="numpy"), want[cells])


def test_log1p_alone_matches_scanpy(small):
    import anndata
    import scanpy as sc

    path, X, _, var = small
    ds = deltacells.open(path)
    adata = anndata.AnnData(X=sp.csr_matrix(X, dtype=np.float64), var=var[[]].copy())
    sc.pp.log1p(adata)
    assert_close(ds.read(slice(0, 200), log1p=True, format="numpy"),
                 adata[:200, list(ds.var_names)].X.toarray())


def test_a_vocabulary_is_normalized_by_the_whole_cell_and_missing_names_are_zero(small):
    path, X, _, var = small
    ds = deltacells.open(path)
    full = scanpy_reference(X, var, ds.var_names, 1e4, True)
    column = {name: j for j, name in enumerate(ds.var_names)}
    vocab = ["G250", "NOT_A_GENE", "G3", "G120", "ALSO_MISSING"]
    want = np.zeros((X.shape[0], len(vocab)))
    for k, name in enumerate(vocab):
        if name in column:
            want[:, k] = full[:, column[name]]
    for fmt in ["numpy", "csr_array"]:
        got = ds.read(genes=vocab, missing="zero", normalize=1e4, log1p=True, format=fmt)
        assert_close(got if fmt == "numpy" else got.toarray(), want)
    # Raw counts over the vocabulary: the missing columns are zero too.
    raw = ds.read(genes=vocab, missing="zero", dtype="int32", format="numpy")
    assert raw.dtype == np.int32 and not raw[:, [1, 4]].any()
    assert np.array_equal(raw[:, 2], X[:, 3].toarray().ravel().astype(np.int32))
    # A selection of present genes with missing="error" (the default) agrees.
    present = ["G250", "G3"]
    assert_close(ds.read(genes=present, normalize=1e4, log1p=True, format="numpy"), want[:, [0, 2]])


def test_bad_requests_raise(small):
    path, _, _, _ = small
    ds = deltacells.open(path)
    with pytest.raises(InputError, match="NOT_A_GENE"):
        ds.read(genes=["G1", "NOT_A_GENE"], normalize=1e4)
    with pytest.raises(InputError, match="missing"):
        ds.read(genes=["G1"], missing="ignore")
    with pytest.raises(InputError, match="float32"):
        ds.read(normalize=1e4, dtype="int32")
    # A target sum is a positive finite number, never text parsed as one.
    for bad in [-1.0, 0, float("nan"), "1e4", True]:
        with pytest.raises(InputError, match="normalize must be a positive finite number"):
            ds.read(normalize=bad)
    with pytest.raises(InputError, match="twice"):
        ds.read(genes=["G1", "G1"], missing="zero")
    # A negative index counts from the end, never taken for a missing name's
    # zeros.
    last = ds.n_vars - 1
    for missing in ["error", "zero"]:
        got = ds.read(genes=[2, -1], normalize=1e4, missing=missing)
        assert (got != ds.read(genes=[2, last], normalize=1e4)).nnz == 0

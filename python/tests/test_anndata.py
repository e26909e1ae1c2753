"""`Dataset.to_anndata`: equal to independent readings of the golden datasets
and of datasets written from known matrices (anndata's own indexing as the
reference), and stored by `write_h5ad` and read back by `read_h5ad` unchanged."""

import json
import sys

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import deltacells
from conftest import GOLDEN, counts, golden_index

ad = pytest.importorskip("anndata")


def expected_matrix(entry):
    z = np.load(GOLDEN / entry["expected"])
    shape = tuple(int(d) for d in z["shape"])
    return sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=shape)


def assert_same(got, want):
    """Two AnnData objects hold the same X (type, dtype, values), obs and var."""
    assert type(got.X) is type(want.X)
    assert got.X.dtype == want.X.dtype and got.shape == want.shape
    if sp.issparse(want.X):
        assert (got.X != want.X).nnz == 0
    else:
        np.testing.assert_array_equal(got.X, want.X)
    pd.testing.assert_frame_equal(got.obs, want.obs)
    pd.testing.assert_frame_equal(got.var, want.var)


def h5ad_round_trip(adata, path):
    """`adata` written by `write_h5ad` and read back (as a sparse array when
    it was one). anndata turns string columns with repeated values into
    categoricals as it writes, in the object it writes too, so the two are
    compared after the write."""
    adata.write_h5ad(path)
    with ad.settings.override(use_sparse_array_on_read=isinstance(adata.X, sp.sparray)):
        return ad.read_h5ad(path)


@pytest.mark.parametrize("entry", golden_index(), ids=lambda e: e["name"])
def test_golden_datasets_equal_their_expected_values(entry, tmp_path):
    ds = deltacells.open(GOLDEN / entry["dir"])
    adata = ds.to_anndata(dtype="int32")
    want = expected_matrix(entry)
    assert isinstance(adata.X, sp.csr_matrix) and adata.X.dtype == np.int32
    assert (adata.X != want).nnz == 0
    # var_names from the side file itself; obs_names as anndata names cells
    # when the dataset records no obs index.
    names = (GOLDEN / entry["dir"] / "var_names.txt").read_text().splitlines()
    assert list(adata.var_names) == names
    assert list(adata.obs_names) == [str(i) for i in range(entry["n_cells"])]
    if entry["expected_obs"]:
        rows = [json.loads(line)
                for line in (GOLDEN / entry["expected_obs"]).read_text().splitlines()]
        assert list(adata.obs.columns) == list(rows[0])
        for name in adata.obs.columns:
            got = adata.obs[name].tolist()
            want_col = [r[name] for r in rows]
            for g, w in zip(got, want_col):
                if w is None:
                    assert g is None or pd.isna(g), (name, g)
                elif isinstance(w, float):
                    assert g == pytest.approx(w, rel=1e-6), name
                else:
                    assert g == w, (name, g, w)
        # Nothing of pandas' nullable float type, which write_h5ad refuses.
        assert not any(isinstance(t, (pd.Float64Dtype, pd.Float32Dtype))
                       for t in adata.obs.dtypes)
    else:
        assert adata.obs.shape == (entry["n_cells"], 0)
    back = h5ad_round_trip(adata, tmp_path / "golden.h5ad")
    assert_same(back, adata)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A known AnnData with every kind of obs and var column (missing values
    in each), written as a dataset (genes sorted by total, the default)."""
    X = counts(400, 60, seed=21)
    rng = np.random.default_rng(22)
    n = 400
    missing = rng.random(n) < 0.1
    obs = pd.DataFrame({
        "cell_type": pd.Categorical(np.where(missing, None, rng.choice(["T", "B", "NK"], n)),
                                    categories=["T", "B", "NK"]),
        "donor": np.where(rng.random(n) < 0.2, None, rng.choice(["d1", "d2"], n)).astype(object),
        "n_counts": np.asarray(X.sum(axis=1)).ravel().astype(np.int64),
        "age": pd.array(np.where(missing, None, rng.integers(20, 90, n)), dtype="Int32"),
        "score": np.where(missing, np.nan, rng.random(n)),
        "score32": rng.random(n).astype(np.float32),
        "passed": rng.random(n) > 0.3,
        "flag": pd.array(np.where(missing, None, rng.random(n) > 0.5), dtype="boolean"),
        "depth": rng.integers(0, 60000, n).astype(np.uint16),
    }, index=pd.Index([f"cell{i:04d}" for i in range(n)], name="barcode"))
    g = 60
    gone = rng.random(g) < 0.2
    var = pd.DataFrame({
        "symbol": [f"S{j}" for j in range(g)],
        "kind": pd.Categorical(["gene"] * 55 + ["mt"] * 5),
        # What scanpy's highly_variable_genes and calculate_qc_metrics add.
        "highly_variable": rng.random(g) > 0.7,
        "means": np.where(gone, np.nan, rng.random(g)),
        "n_cells_by_counts": np.asarray((X > 0).sum(axis=0)).ravel().astype(np.int64),
        "dispersions": rng.random(g).astype(np.float32),
        "rank": pd.array(np.where(gone, None, rng.integers(0, 9, g)), dtype="Int32"),
        "mt": pd.array(np.where(gone, None, rng.random(g) > 0.9), dtype="boolean"),
        "level": pd.Categorical(rng.choice(["low", "high"], g),
                                categories=["low", "mid", "high"], ordered=True),
        "note": np.where(gone, None, [f"n{j}" for j in range(g)]).astype(object),
        "width": rng.integers(0, 60000, g).astype(np.uint16),
        # No categories at all (strings, as every category reads back).
        "unset": pd.Categorical([None] * g, categories=pd.Index([], dtype=object)),
    }, index=pd.Index([f"ENSG{j:05d}" for j in range(g)], name="gene_ids"))
    adata = ad.AnnData(X=X.astype(np.int32), obs=obs, var=var)
    out = tmp_path_factory.mktemp("anndata") / "ds"
    deltacells.write(adata, out, tile_size=64, level=1)
    return out, adata


def reference(adata, gene_order, cells=None, genes=None):
    """What the dataset should give, by pandas' and scipy's indexing of the
    source: columns in the dataset's order, float32 X. (anndata's own
    subsetting would also drop categories no selected cell uses, where a
    dataset keeps each column's whole vocabulary.)"""
    X, obs, var = adata.X[:, gene_order], adata.obs, adata.var.iloc[gene_order]
    if cells is not None:
        X, obs = X[cells], obs.iloc[cells]
    if genes is not None:
        at = var.index.get_indexer(genes)
        X, var = X[:, at], var.iloc[at]
    return ad.AnnData(X=sp.csr_matrix(X, dtype=np.float32), obs=obs.copy(), var=var.copy())


def test_to_anndata_equals_the_source_in_stored_column_order(source, tmp_path):
    path, adata = source
    ds = deltacells.open(path)
    got = ds.to_anndata()
    assert_same(got, reference(adata, ds.gene_order))
    assert got.obs_names.name == "barcode"
    # The stored order is one argsort away from the source's.
    by_source = ds.to_anndata(genes=np.argsort(ds.gene_order), dtype="int32")
    assert (by_source.X != adata.X).nnz == 0
    assert by_source.var.equals(adata.var)
    back = h5ad_round_trip(got, tmp_path / "all.h5ad")
    assert_same(back, got)


# The selection repeats a cell, as reads may: its name then repeats too.
@pytest.mark.filterwarnings("ignore:Observation names are not unique")
@pytest.mark.parametrize("fmt, kind", [("csr_matrix", sp.csr_matrix), ("csr_array", sp.csr_array),
                                       ("numpy", np.ndarray)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_some_cells_genes_and_columns_in_every_format(source, tmp_path, fmt, kind, dtype):
    path, adata = source
    ds = deltacells.open(path)
    cells = [17, 3, 399, 3, 200]
    genes = [ds.var_names[j] for j in (5, 0, 41)]
    columns = ["score", "cell_type", "flag", "donor", "age"]
    got = ds.to_anndata(cells=cells, genes=genes, obs_columns=columns, dtype=dtype, format=fmt)
    assert type(got.X) is kind and got.X.dtype == np.dtype(dtype)
    want = reference(adata, ds.gene_order, cells, genes)
    X = got.X.toarray() if sp.issparse(got.X) else got.X
    np.testing.assert_array_equal(X, want.X.toarray().astype(dtype))
    pd.testing.assert_frame_equal(got.obs, want.obs[columns])
    pd.testing.assert_frame_equal(got.var, want.var)
    # Unique cells, so that anndata's writer takes the names as they are.
    unique = ds.to_anndata(cells=slice(10, 300, 7), obs_columns=columns, dtype=dtype, format=fmt)
    back = h5ad_round_trip(unique, tmp_path / "part.h5ad")
    assert type(back.X) is kind
    assert_same(back, unique)


def test_obs_and_var_properties_are_the_frames_of_to_anndata(source):
    path, adata = source
    ds = deltacells.open(path)
    want = reference(adata, ds.gene_order)
    pd.testing.assert_frame_equal(ds.obs, want.obs)
    pd.testing.assert_frame_equal(ds.var, want.var)
    assert ds.obs_names.equals(adata.obs_names) and ds.var_names.equals(want.var_names)
    assert ds.obs is ds.obs  # loaded once
    # Some columns of some cells, indexed by those cells' names.
    part = ds.read_obs(["age", "donor"], cells=np.array([9, 2, 9]))
    pd.testing.assert_frame_equal(part, adata.obs.iloc[[9, 2, 9]][["age", "donor"]])
    # The column holding the cell ids can be asked for by name.
    ids = ds.read_obs("barcode", cells=range(3))
    assert ids["barcode"].tolist() == ["cell0000", "cell0001", "cell0002"]


def test_a_dataset_without_obs_or_var_names_is_named_as_anndata_names_it(tmp_path):
    X = counts(30, 12, seed=23)
    deltacells.write(X, tmp_path / "bare", tile_size=8, level=1, sort_genes=False)
    ds = deltacells.open(tmp_path / "bare")
    plain = ad.AnnData(X=X)
    assert ds.obs_names.equals(plain.obs_names) and ds.var_names.equals(plain.var_names)
    got = ds.to_anndata()
    assert_same(got, plain)
    assert ds.obs_columns == [] and ds.obs.shape == (30, 0)
    # Genes by name are the names var_names gives.
    assert (ds.read(slice(None), genes=["3", "0"]) != X[:, [3, 0]]).nnz == 0


def test_an_unnamed_obs_index_comes_back_unnamed(tmp_path):
    X = counts(20, 5, seed=24)
    adata = ad.AnnData(X=X, obs=pd.DataFrame(index=[f"c{i}" for i in range(20)]))
    deltacells.write(adata, tmp_path / "ds", tile_size=8, level=1)
    ds = deltacells.open(tmp_path / "ds")
    assert ds.obs_names.equals(adata.obs_names) and ds.obs_names.name is None
    assert ds.obs_columns == []


def test_to_anndata_without_anndata_says_how_to_install_it(source, monkeypatch):
    path, _ = source
    ds = deltacells.open(path)
    monkeypatch.setitem(sys.modules, "anndata", None)
    with pytest.raises(ImportError, match=r"deltacells\[anndata\]"):
        ds.to_anndata()
    with pytest.raises(deltacells.InputError, match="format"):
        ds.to_anndata(format="torch")

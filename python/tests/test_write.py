"""Round trips through deltacells.write: scipy, dense, AnnData (in memory and
backed; X, raw.X and layers), obs and var; bad input refused cleanly."""

import os
import shutil
import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import deltacells
from conftest import counts


def refused(out, match, X, **kwargs):
    """`write(X, out, **kwargs)` raises an InputError matching `match` and
    leaves nothing at `out`."""
    with pytest.raises(deltacells.InputError, match=match):
        deltacells.write(X, out, **kwargs)
    assert not out.exists()


def read_back(path, X):
    """The dataset's matrix with columns back in source order."""
    ds = deltacells.open(path)
    got = ds.read(slice(None), dtype="int32")
    if ds.gene_order is not None:
        inverse = np.empty_like(ds.gene_order)
        inverse[ds.gene_order] = np.arange(len(inverse))
        got = got[:, inverse]
    assert got.shape == X.shape
    return ds, got


@pytest.mark.parametrize("kind", ["csr", "csc", "coo", "dense", "csr_array"])
@pytest.mark.parametrize("sort_genes", [True, False])
def test_scipy_and_dense_round_trip(tmp_path, kind, sort_genes):
    X = counts(300, 120, seed=3, dtype=np.float64)
    source = {"csr": X, "csc": X.tocsc(), "coo": X.tocoo(), "dense": X.toarray(),
              "csr_array": sp.csr_array(X)}[kind]
    out = tmp_path / "ds"
    info = deltacells.write(source, out, tile_size=64, level=1, sort_genes=sort_genes,
                            block_rows=50)
    assert info["cells"] == 300 and info["tiles"] == 5
    ds, got = read_back(out, X)
    assert (got != X).nnz == 0
    assert (ds.gene_order is not None) == sort_genes
    assert ds.verify()["nonzeros"] == X.nnz


def test_obs_and_var_round_trip(tmp_path):
    X = counts(200, 50, seed=4)
    obs = pd.DataFrame({
        "cell_type": pd.Categorical(["a", "b", None, "c"] * 50, categories=["c", "b", "a"]),
        "label": ["x", None, "zz", ""] * 50,
        "age": pd.array([1, None, 3, 4] * 50, dtype="Int16"),
        "score": np.linspace(0, 1, 200),
        "ok": [True, False] * 100,
        "maybe": pd.array([True, None, False, True] * 50, dtype="boolean"),
    }, index=pd.Index([f"cell{i}" for i in range(200)], name="barcode"))
    var = pd.DataFrame({"symbol": [f"S{i}" for i in range(50)],
                        "type": pd.Categorical(["gene"] * 45 + ["mt"] * 5)},
                       index=pd.Index([f"ENSG{i:05d}" for i in range(50)], name="gene_ids"))
    out = tmp_path / "ds"
    deltacells.write(X, out, obs=obs, var=var, tile_size=64, level=1)
    ds = deltacells.open(out)
    back = ds.obs
    assert ds.obs_columns == list(obs.columns) == list(back.columns)
    assert ds.metadata == {"obs_index": "barcode"}
    assert back.index.equals(obs.index) and back.index.name == "barcode"
    assert ds.obs_names.equals(obs.index)
    ct = back["cell_type"]
    assert list(ct.cat.categories) == ["c", "b", "a"]
    assert ct.isna().tolist() == obs["cell_type"].isna().tolist()
    assert ct.dropna().tolist() == obs["cell_type"].dropna().tolist()
    assert back["label"].tolist() == obs["label"].tolist()
    assert back["age"].isna().tolist() == obs["age"].isna().tolist()
    assert back["age"].dropna().tolist() == obs["age"].dropna().tolist()
    np.testing.assert_allclose(back["score"].to_numpy(), obs["score"].to_numpy())
    assert back["ok"].tolist() == obs["ok"].tolist()
    assert back["maybe"].isna().tolist() == obs["maybe"].isna().tolist()
    # Var follows the dataset's column order.
    v = ds.var
    order = ds.gene_order
    assert list(v.index) == [var.index[g] for g in order] == list(ds.var_names)
    assert v.index.name == "gene_ids"
    assert list(v["symbol"]) == [var["symbol"].iloc[g] for g in order]
    assert isinstance(v["type"].dtype, pd.CategoricalDtype)
    assert list(v["type"].astype(str)) == [str(var["type"].iloc[g]) for g in order]


def anndata_source():
    ad = pytest.importorskip("anndata")
    X = counts(250, 80, seed=5)
    obs = pd.DataFrame({"cell_type": pd.Categorical(["T", "B"] * 125)},
                       index=[f"c{i}" for i in range(250)])
    var = pd.DataFrame(index=[f"g{i}" for i in range(80)])
    adata = ad.AnnData(X=X.copy(), obs=obs, var=var)
    adata.layers["counts_csc"] = sp.csc_matrix(X * 2)
    adata.layers["dense"] = (X * 3).toarray()
    adata.raw = ad.AnnData(X=X * 4, obs=obs, var=var)
    return ad, adata, X


@pytest.mark.parametrize("source", ["X", "raw", "counts_csc", "dense"])
def test_anndata_in_memory_round_trip(tmp_path, source):
    _, adata, X = anndata_source()
    factor = {"X": 1, "raw": 4, "counts_csc": 2, "dense": 3}[source]
    kwargs = {"X": {}, "raw": {"raw": True}}.get(source, {"layer": source})
    out = tmp_path / "ds"
    deltacells.write(adata, out, tile_size=100, level=1, **kwargs)
    ds, got = read_back(out, X)
    assert (got != X * factor).nnz == 0
    assert ds.read_obs(["cell_type"])["cell_type"].tolist() == adata.obs["cell_type"].tolist()
    assert ds.obs_names.equals(adata.obs_names) and ds.obs_names.name is None
    assert sorted(ds.var_names) == sorted(adata.var_names)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_backed_h5ad_round_trip(tmp_path, fmt):
    ad, adata, X = anndata_source()
    del adata.layers["dense"]
    del adata.layers["counts_csc"]
    adata.raw = None
    if fmt == "csc":
        adata.X = sp.csc_matrix(adata.X)
    h5 = tmp_path / "a.h5ad"
    adata.write_h5ad(h5)
    backed = ad.read_h5ad(h5, backed="r")
    out = tmp_path / "ds"
    deltacells.write(backed, out, tile_size=64, level=1, block_rows=40)
    backed.file.close()
    _, got = read_back(out, X)
    assert (got != X).nnz == 0


@pytest.mark.parametrize("bad, where", [(-1.0, "X[7, 3]"), (2.5, "X[7, 3]"), (np.nan, "X[7, 3]")])
def test_non_counts_raise_value_error_and_leave_nothing(tmp_path, bad, where):
    X = counts(100, 10, seed=6, dtype=np.float64).tolil()
    X[7, 3] = bad
    X[90, 1] = -4
    out = tmp_path / "ds"
    for sort_genes in (True, False):
        with pytest.raises(ValueError, match=re.escape(where)):
            deltacells.write(X.tocsr(), out, tile_size=16, level=1, sort_genes=sort_genes)
        assert not out.exists()
        assert [p.name for p in tmp_path.iterdir()] == []


def test_existing_dataset_is_not_overwritten(tmp_path):
    X = counts(20, 10, seed=7)
    out = tmp_path / "ds"
    deltacells.write(X, out, level=1)
    with pytest.raises(deltacells.InputError, match="not an empty directory"):
        deltacells.write(X, out, level=1)
    assert deltacells.open(out).n_obs == 20


def test_a_cell_id_column_is_a_column_unless_an_old_conversion_left_it_as_the_index(tmp_path):
    import json

    import anndata as ad

    X = counts(30, 10, seed=8)
    obs = pd.DataFrame({"cell_id": [f"c{i}" for i in range(30)], "n": np.arange(30)})
    deltacells.write(X, tmp_path / "ds", obs=obs, level=1)
    ds = deltacells.open(tmp_path / "ds")
    assert ds.metadata == {"obs_index": None}
    got, want = ds.to_anndata(), ad.AnnData(X, obs=obs)
    pd.testing.assert_index_equal(got.obs_names, want.obs_names)
    pd.testing.assert_frame_equal(got.obs, want.obs)
    # A dataset whose metadata predates `obs_index`, as convert wrote an h5ad's
    # obs index as `cell_id`, still names its cells by it.
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    manifest["metadata"] = {}
    (tmp_path / "ds" / "manifest.json").write_text(json.dumps(manifest))
    old = deltacells.open(tmp_path / "ds")
    assert list(old.obs_names) == obs["cell_id"].tolist() and old.obs_columns == ["n"]


@pytest.mark.parametrize("index", [pd.RangeIndex(10, 40), pd.RangeIndex(0, 60, 2),
                                   pd.RangeIndex(29, -1, -1)])
def test_a_range_obs_index_other_than_0_1_2_is_kept(tmp_path, index):
    import anndata as ad

    X = counts(30, 10, seed=8)
    obs = pd.DataFrame({"n": np.arange(30)}, index=index)
    deltacells.write(X, tmp_path / "ds", obs=obs, level=1)
    got = deltacells.open(tmp_path / "ds").to_anndata()
    # anndata names the cells of such an obs by its index, as strings.
    want = ad.AnnData(X, obs=obs)
    pd.testing.assert_index_equal(got.obs_names, want.obs_names)
    pd.testing.assert_frame_equal(got.obs, want.obs)


def test_an_obs_index_named_as_a_column_comes_back_only_when_they_agree(tmp_path):
    import anndata as ad

    X = counts(30, 10, seed=8)
    ids = [f"cell{i}" for i in range(30)]
    # `set_index("barcode", drop=False)`: the column is the index.
    obs = pd.DataFrame({"barcode": ids, "n": np.arange(30)}).set_index("barcode", drop=False)
    deltacells.write(X, tmp_path / "same", obs=obs, level=1)
    ds = deltacells.open(tmp_path / "same")
    assert list(ds.obs_names) == ids and ds.obs_names.name == "barcode"
    # Stored once, it is both the index and a column again, as in anndata.
    assert ds.obs_columns == ["barcode", "n"]
    pd.testing.assert_frame_equal(ds.obs, obs)
    pd.testing.assert_frame_equal(ds.to_anndata().obs, ad.AnnData(X, obs=obs).obs)
    assert ds.read_obs("barcode", cells=[3, 1])["barcode"].tolist() == ["cell3", "cell1"]
    # A column of other values under the index's name would lose one of them.
    other = obs.assign(barcode=[f"x{i}" for i in range(30)])
    refused(tmp_path / "other", "rename one", X, obs=other, level=1)


def test_a_killed_writes_temporary_directory_is_removed_by_the_next_write(tmp_path):
    import subprocess

    # A write killed before it could clean up left `.ds.partial-<pid>` (its
    # tiles) beside the dataset forever; a live writer's stays.
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f".ds.partial-{gone.pid}"
    alive = tmp_path / f".ds.partial-{os.getppid()}"
    for d in (dead, alive):
        (d / "tiles").mkdir(parents=True)
    deltacells.write(counts(6, 4, seed=2), tmp_path / "ds", level=1)
    assert not dead.exists() and alive.exists()


def test_tables_and_paths_of_the_wrong_kind_are_input_errors(tmp_path):
    # AttributeError, TypeError or scipy's ValueError before.
    X = counts(6, 4, seed=3)
    refused(tmp_path / "dict", "obs must be a pandas DataFrame", X, obs={"a": list(range(6))})
    refused(tmp_path / "series", "obs must be a pandas DataFrame", X, obs=pd.Series(range(6)))
    refused(tmp_path / "list", "var must be a pandas DataFrame", X, var=list("ABCD"))
    with pytest.raises(deltacells.InputError, match="out_dir"):
        deltacells.write(X, None)
    # Big-endian counts (as an HDF5 or FITS file may hold them) are counts.
    dense = X.toarray().astype(">i4")
    deltacells.write(dense, tmp_path / "big", level=1, sort_genes=False)
    np.testing.assert_array_equal(deltacells.open(tmp_path / "big").read(format="numpy"),
                                  dense.astype(np.float32))
    # 2^31 stored as float32 (what 2^31 - 1 rounds to) is named with its gene.
    big = np.zeros((2, 3), dtype=np.float32)
    big[1, 2] = 2**31 - 1
    refused(tmp_path / "f32", r"X\[1, 2\]", big)


def test_an_obs_index_that_is_also_a_column_of_numbers_names_the_cells(tmp_path):
    # `set_index("n", drop=False)` on integers: anndata names the cells "10",
    # "20", ...; they had read back as "0", "1", ... (only a text column was
    # taken as the index).
    import anndata as ad

    X = counts(30, 10, seed=8)
    obs = pd.DataFrame({"n": np.arange(30) * 10, "v": np.arange(30.0)}).set_index("n", drop=False)
    want = ad.AnnData(X, obs=obs)
    deltacells.write(want, tmp_path / "ds", level=1)
    ds = deltacells.open(tmp_path / "ds")
    pd.testing.assert_index_equal(ds.obs_names, want.obs_names)
    pd.testing.assert_frame_equal(ds.to_anndata().obs, want.obs)
    assert list(ds.read_obs("n", cells=[2, 1]).index) == ["20", "10"]


def test_a_var_index_named_as_a_column_is_stored_once_when_they_agree(tmp_path):
    X = counts(30, 10, seed=8)
    ids = [f"ENSG{i}" for i in range(10)]
    var = pd.DataFrame({"gene_ids": ids, "symbol": [f"S{i}" for i in range(10)]}).set_index(
        "gene_ids", drop=False)
    deltacells.write(X, tmp_path / "same", var=var, level=1, sort_genes=False)
    ds = deltacells.open(tmp_path / "same")
    assert list(ds.var_names) == ids and ds.var.index.name == "gene_ids"
    # Stored once, it is both the index and a column again, as in anndata
    # (the column had been lost).
    pd.testing.assert_frame_equal(ds.var, var)
    other = var.assign(gene_ids=[f"x{i}" for i in range(10)])
    refused(tmp_path / "other", "rename one", X, var=other, level=1)
    # A column of numbers or categories as the index keeps its type as a
    # column; the index (its values as text) is then unnamed.
    for column in [np.arange(10) * 10, pd.Categorical(ids)]:
        typed = pd.DataFrame({"key": column, "symbol": var["symbol"].to_numpy()}).set_index(
            "key", drop=False)
        deltacells.write(X, tmp_path / "typed", var=typed, level=1, sort_genes=False)
        back = deltacells.open(tmp_path / "typed").var
        assert back.index.name is None and list(back.index) == [str(v) for v in typed.index]
        pd.testing.assert_frame_equal(back, typed.set_axis(back.index))
        shutil.rmtree(tmp_path / "typed")


def test_a_sparse_obs_column_reads_back_as_its_dense_values(tmp_path):
    X = counts(30, 10, seed=9)
    dense = pd.DataFrame({"f": np.where(np.arange(30) % 4 == 0, np.nan, np.arange(30.0)),
                          "n": np.where(np.arange(30) % 3 == 0, 0, np.arange(30)),
                          "b": np.arange(30) % 5 == 0})
    sparse = dense.apply(lambda c: pd.arrays.SparseArray(c))
    deltacells.write(X, tmp_path / "ds", obs=sparse, level=1)
    pd.testing.assert_frame_equal(deltacells.open(tmp_path / "ds").obs,
                                  dense.set_axis(dense.index.astype(str)))


def test_ordered_categories_read_back_ordered_in_obs_and_batches(tmp_path):
    # The order was dropped: a grade compared as unordered strings.
    X = counts(30, 10, seed=9)
    obs = pd.DataFrame({
        "grade": pd.Categorical(np.array(["low", "mid", "high"])[np.arange(30) % 3],
                                categories=["low", "mid", "high"], ordered=True),
        "kind": pd.Categorical(np.array(["a", "b"])[np.arange(30) % 2]),
    })
    deltacells.write(X, tmp_path / "ds", obs=obs, level=1)
    ds = deltacells.open(tmp_path / "ds")
    pd.testing.assert_frame_equal(ds.obs, obs.set_axis(obs.index.astype(str)))
    assert ds.read_obs("grade", cells=[2, 0]).grade.max() == "high"
    for b in ds.batches(batch_size=16, obs_columns=["grade", "kind"]):
        assert b.obs["grade"].ordered and not b.obs["kind"].ordered
    # A build of several inputs records each input's ordered columns under
    # `sources`; the order had been dropped there (anndata.concat keeps it).
    var = pd.DataFrame(index=[f"g{j}" for j in range(10)])
    for name, rows in (("first", slice(0, 10)), ("rest", slice(10, 30))):
        deltacells.write(X[rows], tmp_path / name, obs=obs[rows], var=var, level=1)
    deltacells.build([tmp_path / "first", tmp_path / "rest"], tmp_path / "both", workers=1)
    both = deltacells.open(tmp_path / "both")
    assert both.obs["grade"].cat.ordered and not both.obs["kind"].cat.ordered
    # Ordered in one input only: no order of the other's categories.
    plain = obs[10:].assign(grade=obs["grade"][10:].cat.as_unordered())
    deltacells.write(X[10:], tmp_path / "plain", obs=plain, var=var, level=1)
    deltacells.build([tmp_path / "first", tmp_path / "plain"], tmp_path / "mixed", workers=1)
    assert not deltacells.open(tmp_path / "mixed").obs["grade"].cat.ordered


@pytest.mark.parametrize("obs, var, what", [
    (pd.DataFrame({"s": ["a\ud800b"] + ["x"] * 29}), None, "obs column 's'"),
    (pd.DataFrame({"c": pd.Categorical(["a\ud800b"] + ["x"] * 29)}), None, "obs column 'c'"),
    (pd.DataFrame({"n": np.arange(30)}, index=pd.Index([f"c{i}\udcff" for i in range(30)],
                                                       name="bc")), None, "obs column 'bc'"),
    (None, pd.DataFrame({"sym": ["a\ud800b"] + ["x"] * 9}), "var column 'sym'"),
    (None, pd.DataFrame(index=[f"g{i}\udcff" for i in range(10)]), "the var index"),
])
def test_text_utf8_cannot_hold_is_refused_naming_its_column(tmp_path, obs, var, what):
    refused(tmp_path / "ds", re.escape(what) + ".*UTF-8", counts(30, 10, seed=9), obs=obs,
            var=var, level=1)


@pytest.mark.parametrize("X, got", [
    (np.ones(30), "ndarray of shape (30,)"), (np.ones((30, 10, 2)), "ndarray of shape (30, 10, 2)"),
    ([[1, 2], [3, 4]], "list"), (np.ones((30, 10), dtype=object), "dtype object"),
    (sp.csr_matrix(np.ones((30, 10), dtype=complex)), "dtype complex128"),
])
def test_a_matrix_write_cannot_take_is_refused_saying_what_it_takes(tmp_path, X, got):
    with pytest.raises(deltacells.InputError, match=r"X must be a 2-D matrix.*scipy sparse.*numpy"
                       r".*AnnData.*not a .*" + re.escape(got)):
        deltacells.write(X, tmp_path / "ds", level=1)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind, dtype", [
    (kind, dtype) for kind in ("csr", "dense")
    for dtype in (np.int8, np.uint8, np.int16, np.float16, np.bool_)
    if (kind, dtype) != ("csr", np.float16)  # scipy holds no float16
])
def test_small_value_dtypes_are_written_as_their_counts(tmp_path, kind, dtype):
    values = counts(60, 20, seed=10, dtype=np.float64)
    # Counts every dtype holds exactly; a binarized matrix's True counts 1.
    values.data = np.ones_like(values.data) if dtype is np.bool_ else np.minimum(values.data, 100)
    X = values.toarray().astype(dtype)
    deltacells.write(sp.csr_matrix(X) if kind == "csr" else X, tmp_path / "ds", level=1,
                     tile_size=16)
    _, got = read_back(tmp_path / "ds", values)
    np.testing.assert_array_equal(got.toarray(), values.toarray())


def test_an_out_dir_that_cannot_be_made_is_a_storage_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(deltacells.StorageError, match="cannot create") as raised:
        deltacells.write(counts(30, 10, seed=9), tmp_path / "file" / "sub" / "ds", level=1)
    assert isinstance(raised.value, OSError) and raised.value.errno is not None
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_level_is_a_zstd_level_the_manifest_records(tmp_path):
    import json

    X = counts(30, 10, seed=9)
    # zstd's fast modes and its strongest level are levels like any other.
    for level in (-5, 22):
        deltacells.write(X, tmp_path / str(level), level=level)
        manifest = json.loads((tmp_path / str(level) / "manifest.json").read_text())
        assert manifest["zstd_level"] == level
        assert (read_back(tmp_path / str(level), X)[1] != X).nnz == 0
    # zstd would clamp these to another level than the manifest records.
    for level in (23, 99, -(1 << 17) - 1, "19", 2.5, True):
        refused(tmp_path / "bad", "level", X, level=level)


def test_a_url_is_refused_not_taken_for_a_local_folder(tmp_path, monkeypatch):
    # os.path took "s3://bucket/x" for a folder "s3:" under the working
    # directory: the call reported success and nothing reached the bucket.
    monkeypatch.chdir(tmp_path)
    for url in ("s3://bucket/x", "gs://bucket/x", "file:///tmp/x"):
        with pytest.raises(deltacells.InputError, match="local directory"):
            deltacells.write(counts(30, 10, seed=9), url)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kwargs, match", [
    ({"obs": pd.DataFrame(np.zeros((30, 2)), columns=["a", "a"])}, "more than one column named 'a'"),
    ({"var": pd.DataFrame(np.zeros((10, 2)), columns=["k", "k"])}, "more than one column named 'k'"),
    ({"obs": pd.DataFrame({"z": np.ones(30, dtype=complex)})}, "unsupported numeric dtype"),
    ({"tile_size": 0}, "tile_size"), ({"n_chunks": 0}, "n_chunks"), ({"block_rows": -1}, "block_rows"),
])
def test_bad_settings_and_columns_are_input_errors(tmp_path, kwargs, match):
    refused(tmp_path / "ds", match, counts(30, 10, seed=9), level=1, **kwargs)

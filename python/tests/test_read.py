"""Reading through Python: golden data, selections, zero copy, obs/var, errors."""

import gc
import json
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

import deltacells
from conftest import GOLDEN, golden_index


def expected(entry):
    z = np.load(GOLDEN / entry["expected"])
    shape = tuple(int(d) for d in z["shape"])
    return sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=shape), z


@pytest.mark.parametrize("entry", golden_index(), ids=lambda e: e["name"])
def test_golden_datasets_read_exactly(entry):
    want, z = expected(entry)
    ds = deltacells.open(GOLDEN / entry["dir"])
    assert ds.shape == (entry["n_cells"], entry["n_genes"]) == want.shape
    report = ds.verify()
    assert (report["cells"], report["nonzeros"]) == (entry["n_cells"], entry["nnz"])

    got = ds.read(slice(None), dtype="int32")
    assert got.dtype == np.int32 and got.shape == want.shape
    assert (got != want).nnz == 0
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)

    # Any cells, order kept, duplicates allowed; float32 values equal the counts.
    cells = np.r_[np.arange(ds.n_obs)[::-7], 0, 0]
    rows = ds.read(cells)
    assert rows.dtype == np.float32
    assert (rows != want[cells].astype(np.float32)).nnz == 0
    # Tiles in order cover the matrix.
    tiles = list(ds.iter_tiles(dtype=np.int32))
    assert len(tiles) == ds.n_tiles
    assert (sp.vstack(tiles).tocsr() != want).nnz == 0
    if "gene_order" in z:
        np.testing.assert_array_equal(ds.gene_order, z["gene_order"])


def test_golden_obs_matches_the_expected_values():
    entry = next(e for e in golden_index() if e["expected_obs"])
    ds = deltacells.open(GOLDEN / entry["dir"])
    rows = [json.loads(line) for line in (GOLDEN / entry["expected_obs"]).read_text().splitlines()]
    obs = ds.obs
    assert list(obs.columns) == ds.obs_columns == list(rows[0].keys())
    assert len(obs) == ds.n_obs == len(rows)
    import pandas as pd

    for name in obs.columns:
        col = obs[name]
        for i in range(0, len(rows), 13):
            want, got = rows[i][name], col.iloc[i]
            if want is None:
                assert pd.isna(got), (name, i, got)
            elif isinstance(want, float):
                assert got == pytest.approx(want, rel=1e-6), (name, i)
            else:
                assert got == want, (name, i, got, want)
    assert isinstance(obs["cell_type"].dtype, pd.CategoricalDtype)
    # Some cells, in the order asked.
    part = ds.read_obs(["cell_type", "age"], cells=[5, 600, 1])
    assert list(part.index) == ["5", "600", "1"]
    assert list(part["age"]) == [rows[c]["age"] for c in (5, 600, 1)]
    assert list(part["cell_type"]) == [rows[c]["cell_type"] for c in (5, 600, 1)]


def test_golden_var_reads_back_as_a_frame():
    ds = deltacells.open(GOLDEN / "small_obs")
    var = ds.var
    assert len(var) == ds.n_vars
    assert var.index.equals(ds.var_names)


def test_a_10x_folder_keeps_its_gene_ids_beside_the_symbols_as_scanpy_reads_it(tmp_path):
    import pandas as pd

    folder = tmp_path / "10x"
    folder.mkdir()
    (folder / "matrix.mtx").write_text("%%MatrixMarket matrix coordinate integer general\n"
                                       "3 2 4\n1 1 3\n2 1 1\n2 2 5\n3 2 2\n")
    (folder / "features.tsv").write_text("ENSG01\tCD3E\tGene Expression\n"
                                         "ENSG02\tMS4A1\tGene Expression\n"
                                         "ERCC-1\tERCC-1\tSpike-in\n")
    (folder / "barcodes.tsv").write_text("AAAC-1\nAAAG-1\n")
    deltacells.build([folder], tmp_path / "ds", workers=1)
    ds = deltacells.open(tmp_path / "ds")
    # What scanpy's read_10x_mtx gives: symbols as var_names, the ids a column.
    features = pd.read_csv(folder / "features.tsv", sep="\t", header=None)
    want = pd.DataFrame({"gene_ids": features[0].to_numpy(dtype=object),
                         "feature_types": features[2].to_numpy(dtype=object)},
                        index=pd.Index(features[1].to_numpy(dtype=object)))
    want = want.loc[ds.var_names]
    for var in (ds.var, ds.to_anndata().var):
        assert var.index.name is None and list(var)[0] == "gene_ids"
        pd.testing.assert_frame_equal(var[list(want)].astype(object), want)


def test_selections_keep_order_and_select_genes(small):
    path, X, _, var = small
    ds = deltacells.open(path)
    order = ds.gene_order
    Xo = X[:, order]  # the dataset's columns are the source's sorted by total
    assert list(ds.var_names) == [var.index[g] for g in order]
    assert (ds[0:1000] != Xo).nnz == 0
    assert (ds[10:20] != Xo[10:20]).nnz == 0
    assert (ds[::3] != Xo[::3]).nnz == 0
    assert (ds[range(5, 50, 5)] != Xo[5:50:5]).nnz == 0
    assert ds[7].shape == (1, 300)
    mask = np.zeros(1000, dtype=bool)
    mask[[3, 999]] = True
    assert (ds[mask] != Xo[[3, 999]]).nnz == 0
    # Genes by index and by name, in the order given.
    names = [ds.var_names[j] for j in (4, 0, 250)]
    by_name = ds.read([9, 2, 9], genes=names)
    by_index = ds[[9, 2, 9], [4, 0, 250]]
    assert (by_name != Xo[[9, 2, 9]][:, [4, 0, 250]]).nnz == 0
    assert (by_index != by_name).nnz == 0
    # Negative ids and indices count from the end, as numpy's do, in every
    # form a selection takes; a boolean gene mask selects in column order.
    assert (ds[[-1, 0, -1000]] != Xo[[999, 0, 0]]).nnz == 0
    assert (ds[range(-3, 0)] != Xo[997:1000]).nnz == 0
    assert (ds[-2, [-1, 3]] != Xo[[998]][:, [299, 3]]).nnz == 0
    assert (ds.read_obs(["score"], cells=[-1]).to_numpy() == ds.read_obs(["score"], cells=[999]).to_numpy()).all()
    hvg = np.zeros(300, dtype=bool)
    hvg[[250, 4]] = True
    assert (ds.read([5], genes=hvg) != Xo[[5]][:, [4, 250]]).nnz == 0
    assert (ds.read([5], genes=hvg.tolist()) != Xo[[5]][:, [4, 250]]).nnz == 0
    for bad in ([1000], [-1001], range(-1001, 0), np.array([2**63], dtype=np.uint64)):
        with pytest.raises(deltacells.InputError, match="outside"):
            ds.read(bad)
    with pytest.raises(deltacells.InputError, match="outside"):
        ds.read([0], genes=[-301])
    with pytest.raises(deltacells.InputError, match="boolean gene mask"):
        ds.read([0], genes=hvg[:10])
    dense = ds.read([1, 0], genes=[4, 0], format="numpy", dtype="int32")
    np.testing.assert_array_equal(dense, Xo[[1, 0]][:, [4, 0]].toarray())
    t = ds.read([1, 0, 5], format="torch")
    import torch

    assert ds.read([1], format="torch", dtype=torch.int32).values().dtype == torch.int32
    np.testing.assert_array_equal(t.to_dense().numpy(), Xo[[1, 0, 5]].toarray())


def test_arrays_are_the_rust_buffers_and_outlive_the_dataset(small):
    path, X, _, _ = small
    ds = deltacells.open(path)
    m = ds.read(slice(0, 500))
    # No copy: scipy keeps the arrays numpy got from Rust, whose base is the
    # Rust-owned allocation: a recycled buffer on loan for range reads, a
    # buffer numpy owns outright for cell lists.
    picked = ds.read([3, 1, 2])
    for a, owner in ((m.data, "Lease"), (m.indices, "Lease"),
                     (picked.data, "PySliceContainer"), (picked.indices, "PySliceContainer")):
        assert not a.flags.owndata
        root = a
        while isinstance(root.base, np.ndarray):
            root = root.base
        # The array numpy made over the Rust allocation, and scipy's view of
        # it starts at the same address.
        assert type(root.base).__name__ == owner, type(root.base)
        assert a.__array_interface__["data"][0] == root.__array_interface__["data"][0]
    t = ds.read(slice(0, 500), format="torch")
    values = t.values()
    assert values.data_ptr() == t.values().data_ptr()
    np.testing.assert_array_equal(values.numpy(), m.data)
    del ds
    gc.collect()
    # Still valid: the same nonzeros as the source rows (columns are permuted).
    assert m.nnz == X[:500].nnz
    np.testing.assert_array_equal(np.sort(m.data), np.sort(X[:500].data))


def test_recycled_buffers_are_reused_only_once_released(small):
    path, X, _, _ = small
    ds = deltacells.open(path)
    held = [ds.read(slice(i, i + 200)) for i in range(0, 1000, 200)]
    # More reads than the pool keeps, each while the earlier ones are alive:
    # none may write into a buffer an earlier result still uses.
    for i, m in enumerate(held):
        assert m.nnz > 0 and (m != X[i * 200:(i + 1) * 200][:, ds.gene_order]).nnz == 0
    address = held[-1].data.__array_interface__["data"][0]
    del m, held  # the last result released first: the pool keeps what comes back first
    gc.collect()
    # Released buffers come back: a scan cycles through warm memory. (The
    # same rows as the last read, so its buffer is large enough as it is.)
    again = [ds.read(slice(800, 1000)) for _ in range(4)]
    addresses = {r.data.__array_interface__["data"][0] for r in again}
    assert address in addresses
    for r in again:
        assert (r != X[800:1000][:, ds.gene_order]).nnz == 0


def test_errors_are_typed_exceptions(small, tmp_path):
    path, _, _, _ = small
    with pytest.raises(deltacells.StorageError):
        deltacells.open(tmp_path / "nope")
    ds = deltacells.open(path)
    with pytest.raises(deltacells.InputError, match="outside"):
        ds.read([1000])
    with pytest.raises(deltacells.InputError, match="outside"):
        ds.read([-1001])
    for options in [{"threads": -1}, {"threads": 0}, {"cache_bytes": -1}]:
        with pytest.raises(deltacells.InputError, match=next(iter(options))):
            deltacells.open(path, **options)
        with pytest.raises(deltacells.InputError, match=next(iter(options))):
            deltacells.Corpus([path], **options)
    with pytest.raises(deltacells.InputError, match="no gene named"):
        ds.read([0], genes=["nope"])
    # What numpy or Python refused with TypeError or ValueError.
    for call in [lambda: ds.read([0], genes=1.5), lambda: ds.read([0], genes=np.bool_(True)),
                 lambda: ds[:, ...], lambda: ds[::0], lambda: ds[:, ::0],
                 lambda: list(ds.iter_tiles(prefetch="2"))]:
        with pytest.raises(deltacells.InputError):
            call()
    with pytest.raises(deltacells.InputError):
        ds.read([0], dtype="float64")
    with pytest.raises(deltacells.InputError, match="no obs column"):
        ds.read_obs(["nope"])
    # Ranges past 2^63 ids: refused by their ends (len() of one overflows).
    for cells in [range(0, 10**20), range(-10**20, 2), range(2, -10**20, -1)]:
        with pytest.raises(deltacells.InputError, match="is outside"):
            ds.read(cells)
    # A column asked for twice is refused alike by every call taking columns
    # (a DataFrame built from a dict would have kept it once).
    column = ds.obs_columns[0]
    for call in [lambda: ds.read_obs([column, column]),
                 lambda: ds.batches(batch_size=4, obs_columns=[column, column]),
                 lambda: ds.batches(batch_size=4, balance=[column, column])]:
        with pytest.raises(deltacells.InputError, match=f"obs column '{column}' twice"):
            call()
    # A mistyped thread count is refused before any thread starts.
    with pytest.raises(deltacells.DeltacellsError, match="at most"):
        deltacells.open(path, threads=10**6)
    # A damaged tile is a FormatError naming the tile; the process survives.
    bad = tmp_path / "bad"
    shutil.copytree(path, bad)
    tile = sorted((bad / "tiles").iterdir())[1]
    raw = bytearray(tile.read_bytes())
    raw[200] ^= 0xFF
    tile.write_bytes(bytes(raw))
    broken = deltacells.open(bad)
    with pytest.raises(deltacells.FormatError, match="tile 1"):
        broken.read(slice(None))
    with pytest.raises(deltacells.FormatError):
        broken.verify()
    assert broken.read(slice(0, 10)).shape == (10, 300)
    (bad / "manifest.json").unlink()
    with pytest.raises(deltacells.FormatError, match="manifest"):
        deltacells.open(bad)


def test_reads_release_the_gil_for_other_threads(small):
    import threading

    path, X, _, _ = small
    ds = deltacells.open(path)
    results = [None] * 4

    def work(i):
        results[i] = ds.read(np.arange(i, 1000, 4))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        assert r.shape == (len(range(i, 1000, 4)), 300)
    assert sum(r.nnz for r in results) == X.nnz


def test_pickled_dataset_reopens(small):
    import pickle

    path, _, _, _ = small
    ds = deltacells.open(path)
    again = pickle.loads(pickle.dumps(ds))
    assert (again[0:50] != ds[0:50]).nnz == 0


_INHERITED = None


def test_a_forked_child_reopens_instead_of_hanging(small):
    import multiprocessing as mp

    global _INHERITED
    path, X, _, _ = small
    ds = deltacells.open(path)
    ds.read(slice(0, 100))  # the parent's pool is running
    _INHERITED = ds
    with mp.get_context("fork").Pool(1) as pool:
        nnz, raw_error = pool.apply(_child_read)
    assert nnz == X.nnz
    # The bare engine handle refuses to run in the child rather than hang.
    assert raw_error == "DeltacellsError"


def _child_read():
    raw = _INHERITED._handle
    try:
        raw.read_range(0, 10)
        raw_error = None
    except deltacells.DeltacellsError as e:
        raw_error = type(e).__name__
    return _INHERITED.read(slice(None)).nnz, raw_error

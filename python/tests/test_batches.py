"""`Dataset.batches`: training batches without torch, in every format, spans
of an epoch, rank shares, obs with each batch, bad settings refused."""

import gc
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import deltacells
from conftest import loader_order


def cells_of(batches):
    return [b.cells.tolist() for b in batches]


def test_an_epoch_covers_every_cell_once_in_rows_equal_to_reads(small):
    path, X, _, _ = small
    ds = deltacells.open(path)
    dense = ds.read(slice(None), format="numpy")
    batches = ds.batches(batch_size=64, seed=3)
    got = list(batches)
    assert len(got) == len(batches) == 16
    assert [b.position for b in got] == list(range(16))
    assert sorted(c for b in got for c in b.cells) == list(range(1000))
    for position, cells, rows, obs in got:
        assert isinstance(rows, sp.csr_matrix) and rows.dtype == np.float32
        assert rows.shape == (len(cells), ds.n_vars) and obs == {}
        np.testing.assert_array_equal(rows.toarray(), dense[cells])
    # The order depends on (seed, epoch) alone.
    assert cells_of(ds.batches(batch_size=64, seed=3)) == cells_of(got)
    assert cells_of(ds.batches(batch_size=64, seed=3, epoch=1)) != cells_of(got)
    assert cells_of(ds.batches(batch_size=64, seed=4)) != cells_of(got)
    assert [c for b in ds.batches(batch_size=64, shuffle="none") for c in b.cells] == \
        list(range(1000))
    random = [c for b in ds.batches(batch_size=64, shuffle="random") for c in b.cells]
    assert sorted(random) == list(range(1000)) and random != list(range(1000))


@pytest.mark.parametrize("fmt", ["csr_matrix", "csr_array", "arrays", "numpy"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_every_format_and_dtype_holds_the_same_rows(small, fmt, dtype):
    path, _, _, _ = small
    ds = deltacells.open(path)
    genes = [ds.var_names[j] for j in (7, 2, 250)]
    for cols in (None, genes):
        want = ds.read(slice(None), genes=cols, format="numpy", dtype=dtype)
        # Counts past uint16 come back exactly.
        assert cols is not None or want.max() == 70_000
        for b in ds.batches(batch_size=100, seed=1, genes=cols, format=fmt, dtype=dtype):
            if fmt == "arrays":
                assert isinstance(b.X, deltacells.CsrArrays)
                rows = sp.csr_matrix((b.X.data, b.X.indices, b.X.indptr), shape=b.X.shape)
                rows = rows.toarray()
            elif fmt == "numpy":
                assert isinstance(b.X, np.ndarray)
                rows = b.X
            else:
                assert type(b.X) is {"csr_matrix": sp.csr_matrix, "csr_array": sp.csr_array}[fmt]
                rows = b.X.toarray()
            assert rows.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(rows, want[b.cells])


def test_spans_of_an_epoch_are_its_batches_from_there(small):
    ds = deltacells.open(small[0])
    batches = ds.batches(batch_size=70, seed=9, window_tiles=2)
    full = cells_of(batches)
    n = len(full)
    part = batches[3:7]
    assert len(part) == 4 and [b.position for b in part] == [3, 4, 5, 6]
    assert cells_of(part) == full[3:7]
    assert cells_of(part[1:]) == full[4:7]
    assert cells_of(batches[n - 2:]) == full[-2:] and len(batches[n:]) == 0
    assert batches[-1].cells.tolist() == full[-1] and batches[5].position == 5
    with pytest.raises(IndexError):
        batches[n]
    with pytest.raises(deltacells.InputError, match="step"):
        batches[::2]


def test_worker_spans_are_contiguous_and_resume_anywhere_in_loader_order(small):
    ds = deltacells.open(small[0])
    for batch_size in sorted({-(-1000 // t) for t in range(1, 41)}):
        batches = ds.batches(batch_size=batch_size)
        total = len(batches)
        for workers in range(1, 6):
            order = loader_order(list(range(total)), workers)
            for position in range(total + 1):
                # Each worker yields one contiguous run of the rank's batches,
                # and the loader's turns give the rest of the order exactly.
                runs = [list(batches.for_worker(w, workers, position).span)
                        for w in range(workers)]
                got = []
                while any(runs):
                    for run in runs:
                        if run:
                            got.append(run.pop(0))
                assert got == order[position:], (total, workers, position)
    with pytest.raises(deltacells.InputError, match="whole epoch"):
        batches[1:].for_worker(0, 2)


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_take_contiguous_shares_with_equal_batch_counts(small, world):
    ds = deltacells.open(small[0])
    whole = [c for b in ds.batches(batch_size=50, seed=8) for c in b.cells]
    shares = [cells_of(ds.batches(batch_size=50, seed=8, rank=r, world_size=world))
              for r in range(world)]
    assert len({len(s) for s in shares}) == 1
    assert [c for s in shares for b in s for c in b] == whole


@pytest.mark.parametrize("world", [1, 3])
def test_delivered_positions_are_left_out_and_the_rest_shared_in_epoch_order(small, world):
    ds = deltacells.open(small[0])
    whole = [c for b in ds.batches(batch_size=50, seed=8) for c in b.cells]
    delivered = [(0, 100), (100, 130), (400, 401), (990, 1000)]
    rest = [np.delete(whole, np.r_[0:130, 400, 990:1000]).tolist()]
    shares = [cells_of(ds.batches(batch_size=50, seed=8, rank=r, world_size=world,
                                  delivered=delivered)) for r in range(world)]
    # 859 cells left: as an epoch of that many, equal batch counts per rank.
    assert [len(s) for s in shares] == [len(ds.batches(batch_size=50, rank=r, world_size=world,
                                                       delivered=delivered))
                                        for r in range(world)]
    assert len({len(s) for s in shares}) == 1
    assert [[c for s in shares for b in s for c in b]] == rest
    with pytest.raises(deltacells.InputError, match="sorted and disjoint"):
        list(ds.batches(delivered=[(5, 10), (0, 3)]))
    with pytest.raises(deltacells.InputError, match="outside the epoch"):
        len(ds.batches(delivered=[(5, 1001)]))


def test_obs_columns_come_with_each_batch(small):
    path, _, obs, _ = small
    ds = deltacells.open(path)
    columns = ["cell_type", "n_counts", "score", "passed"]
    for b in ds.batches(batch_size=128, seed=2, obs_columns=columns):
        frame = pd.DataFrame(b.obs, index=ds.obs_names[b.cells])
        pd.testing.assert_frame_equal(frame, ds.read_obs(columns, cells=b.cells))
        assert frame["cell_type"].tolist() == obs["cell_type"].iloc[b.cells].tolist()


def test_obs_columns_none_means_every_column_as_in_read_obs(small):
    from deltacells.torch import CellDataset

    path = small[0]
    ds = deltacells.open(path)
    for b in ds.batches(batch_size=400, seed=2, obs_columns=None):
        frame = pd.DataFrame(b.obs, index=ds.obs_names[b.cells])
        pd.testing.assert_frame_equal(frame, ds.read_obs(None, cells=b.cells))
        assert list(frame) == list(ds.to_anndata(obs_columns=None).obs)
    first = next(iter(CellDataset(path, batch_size=400, obs_columns=None)))
    assert set(ds.obs_columns) <= set(first)
    for bad in (5, [1], [None]):
        with pytest.raises(deltacells.InputError, match="obs_columns must be"):
            ds.batches(obs_columns=bad)
        with pytest.raises(deltacells.InputError, match="obs_columns must be"):
            CellDataset(path, obs_columns=bad)
        with pytest.raises(deltacells.InputError, match="columns must be"):
            ds.read_obs(bad)


def test_bad_settings_are_input_errors(small):
    from deltacells.torch import CellDataset

    ds = deltacells.open(small[0])
    for kwargs, match in [({"shuffle": "sorted"}, "shuffle"), ({"format": "scipy"}, "format"),
                          ({"dtype": "float64"}, "dtype"), ({"batch_size": 0}, "batch_size"),
                          ({"rank": 2, "world_size": 2}, "rank"), ({"seed": -1}, "seed"),
                          ({"seed": 2**64}, "seed"), ({"epoch": -1}, "epoch"),
                          ({"window_tiles": 0}, "window_tiles"), ({"prefetch": -1}, "prefetch"),
                          ({"cache_bytes": -1}, "cache_bytes"), ({"balance": []}, "no obs column")]:
        with pytest.raises(deltacells.InputError, match=match):
            ds.batches(**kwargs)
        if set(kwargs) & {"seed", "window_tiles", "prefetch", "cache_bytes"}:
            with pytest.raises(deltacells.InputError, match=match):
                CellDataset(small[0], **kwargs)
    # The largest seed the order takes is a seed like any other.
    assert len(list(ds.batches(seed=2**64 - 1))) == len(list(ds.batches(seed=0)))
    with pytest.raises(deltacells.InputError, match="epoch"):
        CellDataset(small[0]).set_epoch(-1)
    with pytest.raises(deltacells.InputError, match="no obs column"):
        list(ds.batches(obs_columns=["nope"]))


def test_batches_need_no_torch(small):
    """In a process where torch cannot be imported at all."""
    script = """
import sys
sys.modules["torch"] = None  # import torch now raises ImportError
import numpy as np
import deltacells
ds = deltacells.open(sys.argv[1])
dense = ds.read(slice(None), format="numpy")
seen = []
for fmt in ("csr_matrix", "csr_array", "arrays", "numpy"):
    for b in ds.batches(batch_size=300, seed=5, format=fmt, obs_columns=["cell_type"]):
        rows = b.X if fmt == "numpy" else b.X.toarray() if fmt != "arrays" else None
        if rows is not None:
            assert (rows == dense[b.cells]).all()
        seen.extend(b.cells.tolist())
assert sorted(seen) == sorted(list(range(ds.n_obs)) * 4)
print("ok")
"""
    # -I: the installed package, not the source directory beside the tests.
    out = subprocess.run([sys.executable, "-I", "-c", script, str(small[0])],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_a_next_epoch_made_ahead_holds_the_batches_a_fresh_call_gives(small):
    path = small[0]
    ds, fresh = deltacells.open(path), deltacells.open(path)

    def epoch(d, e, **settings):
        batches = d.batches(batch_size=64, seed=3, epoch=e, window_tiles=2, **settings)
        return [(b.cells.tolist(), b.X.toarray()) for b in batches]

    # Each epoch after the first starts with the window the one before
    # built ahead; every epoch is the one a dataset without it gives.
    for e in range(3):
        got, want = epoch(ds, e, next_epoch_ahead=True), epoch(fresh, e)
        assert [c for c, _ in got] == [c for c, _ in want]
        for (_, rows), (_, expected) in zip(got, want):
            np.testing.assert_array_equal(rows, expected)
    # A call with other settings drops it and makes its own batches.
    assert cells_of(ds.batches(batch_size=64, seed=5, epoch=3)) == \
        cells_of(fresh.batches(batch_size=64, seed=5, epoch=3))


@pytest.mark.parametrize("fmt", ["arrays", "csr_matrix", "csr_array", "torch"])
def test_an_empty_batch_holds_no_entries_after_batches_of_the_same_dataset(tmp_path, fmt):
    """A rank of more ranks than cells gets an empty batch; in buffers other
    batches of the dataset had given back, it had kept their entries beside
    an indptr of [0] (a (0, 5) torch tensor of nnz 2, a raw ValueError from
    scipy)."""
    if fmt == "torch":
        pytest.importorskip("torch")
    X = np.array([[0, 10, 9, 0, 0], [4, 0, 0, 2, 0], [1, 1, 1, 1, 1]], dtype=np.int32)
    path = tmp_path / "three"
    deltacells.write(sp.csr_matrix(X), path, tile_size=1, level=1, sort_genes=False)
    ds = deltacells.open(path)
    seen = []
    for rank in range(4):
        for batch in ds.batches(8, rank=rank, world_size=4, format=fmt):
            B = batch.X
            if fmt == "torch":
                B = sp.csr_matrix((B.values().numpy(), B.col_indices().numpy(),
                                   B.crow_indices().numpy()), shape=tuple(B.shape))
            elif fmt == "arrays":
                assert len(B.indices) == len(B.data) == B.indptr[-1], rank
                B = sp.csr_matrix((B.data, B.indices, B.indptr), shape=(len(batch.cells), 5))
            assert B.nnz == B.indptr[-1], rank
            np.testing.assert_array_equal(B.toarray(), X[batch.cells])
            seen.append(len(batch.cells))
    assert sorted(seen) == [0, 1, 1, 1]


def test_a_forked_child_drops_what_its_parent_opened_without_its_threads(small):
    """A child forked while the parent reads batches (a DataLoader worker, a
    multiprocessing child) inherits the dataset and the iterator, but none of
    their threads (the decode pool, the I/O and prefetch threads), whose
    stacks and descriptors the child's own threads then reuse: dropping them
    there, as its garbage collector may, must not act on those threads. The
    child, which reads batches of its own first, exits normally, where a
    detach of an inherited worker crashed it."""
    ds = deltacells.open(small[0])
    it = iter(ds.batches(50, seed=1, prefetch=2))
    next(it)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            own = deltacells.open(small[0])
            assert sum(b.cells.size for b in own.batches(50, seed=2)) == own.n_obs
            del it
            ds._handle = None  # what `Dataset` keeps for a child's life, dropped
            del ds
            gc.collect()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 120
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the child did not finish dropping its inherited dataset")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert next(it).cells.size == 50  # the parent's iterator goes on

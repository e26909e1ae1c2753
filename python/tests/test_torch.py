"""The PyTorch loader: real DataLoaders with workers (fork and spawn),
simulated DDP worlds, epochs, determinism, resuming, an open Dataset as the
source. (Real distributed runs are in test_distributed.py.)"""

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import deltacells  # noqa: E402
from deltacells.errors import InputError  # noqa: E402
from conftest import loader_order  # noqa: E402
from deltacells.torch import CellDataset  # noqa: E402


def cells_of(batches):
    return [b["cells"].tolist() for b in batches]


def source_rows(small):
    path, X, obs, _ = small
    ds = deltacells.open(path)
    return ds.read(slice(None)).toarray(), obs


def check_rows(batches, dense):
    for b in batches:
        np.testing.assert_array_equal(b["X"].to_dense().numpy(), dense[b["cells"].numpy()])


def test_in_process_epoch_is_complete_deterministic_and_varies_by_epoch(small):
    path = small[0]
    dense, _ = source_rows(small)
    ds = CellDataset(path, batch_size=64, seed=3)
    first = list(ds)
    check_rows(first, dense)
    seen = sorted(c for b in cells_of(first) for c in b)
    assert seen == list(range(1000))
    assert len(first) == len(ds) == 16
    assert cells_of(list(CellDataset(path, batch_size=64, seed=3))) == cells_of(first)
    ds.set_epoch(1)
    second = cells_of(list(ds))
    assert second != cells_of(first)
    assert sorted(c for b in second for c in b) == list(range(1000))
    assert cells_of(list(CellDataset(path, batch_size=64, seed=4))) != cells_of(first)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers_give_the_ranks_batches_in_loader_order(small, context):
    path = small[0]
    dense, _ = source_rows(small)
    want = loader_order(cells_of(list(CellDataset(path, batch_size=64, seed=3,
                                                  shuffle="random"))), 2)
    ds = CellDataset(path, batch_size=64, seed=3, shuffle="random")
    # The parent has used its engine before the workers start (the fork hazard).
    assert len(ds) == 16 and ds._open(1).read([0]).shape == (1, 300)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=context)
    got = list(loader)
    assert cells_of(got) == want
    check_rows(got, dense)
    assert list(range(1000)) == sorted(c for b in cells_of(got) for c in b)


def test_batches_built_in_handed_back_buffers_never_overwrite_live_ones(small):
    import gc

    path = small[0]
    dense, _ = source_rows(small)
    want = cells_of(list(CellDataset(path, batch_size=64, seed=6, window_tiles=1)))
    # Keep every other batch alive and drop the rest as the epoch goes: the
    # dropped ones' buffers go back to the iterator and later batches are
    # built in them, never in a batch still held.
    ds = CellDataset(path, batch_size=64, seed=6, window_tiles=1, prefetch=1)
    kept, seen = [], []
    for i, b in enumerate(ds):
        seen.append(b["cells"].tolist())
        if i % 2 == 0:
            kept.append(b)
        del b
        gc.collect()
    assert seen == want
    check_rows(kept, dense)
    # The next epoch starts in the buffers this one gave back, and leaves
    # the batches still held alone.
    ds.set_epoch(1)
    later = []
    for i, b in enumerate(ds):
        later.append(b)
        if i % 3 == 0:
            later.pop()
        gc.collect()
    check_rows(kept, dense)
    check_rows(later, dense)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_simulated_world_splits_cells_with_equal_batch_counts(small, world, drop_last):
    path = small[0]
    per_rank = []
    for rank in range(world):
        ds = CellDataset(path, batch_size=50, seed=8, rank=rank, world_size=world,
                         drop_last=drop_last)
        batches = cells_of(list(ds))
        assert len(batches) == len(ds)
        per_rank.append(batches)
    assert len({len(b) for b in per_rank}) == 1, [len(b) for b in per_rank]
    every = [c for batches in per_rank for b in batches for c in b]
    assert len(every) == len(set(every))
    if drop_last:
        assert all(len(b) == 50 for batches in per_rank for b in batches)
        assert len(every) == (1000 // (50 * world)) * 50 * world
    else:
        assert sorted(every) == list(range(1000))


def test_simulated_rank_with_workers_matches_in_process(small):
    path = small[0]
    in_process = cells_of(list(CellDataset(path, batch_size=40, seed=2, rank=1, world_size=3)))
    for workers in (2, 3):
        ds = CellDataset(path, batch_size=40, seed=2, rank=1, world_size=3)
        got = cells_of(DataLoader(ds, batch_size=None, num_workers=workers,
                                  multiprocessing_context="fork"))
        assert got == loader_order(in_process, workers)


def test_resume_from_state_dict_gives_the_rest_of_the_epoch(small):
    path = small[0]
    full = cells_of(list(CellDataset(path, batch_size=64, seed=5)))
    ds = CellDataset(path, batch_size=64, seed=5)
    ds.set_epoch(0)
    it = iter(ds)
    taken = [next(it)["cells"].tolist() for _ in range(5)]
    state = ds.state_dict()
    assert state["next_batch"] == 5 and taken == full[:5]
    resumed = CellDataset(path, batch_size=64, seed=0)
    resumed.load_state_dict(state)
    assert cells_of(list(resumed)) == full[5:]
    # With loader workers the loop says how many batches it took, and how
    # many workers delivered them.
    delivered = loader_order(full, 2)
    ds = CellDataset(path, batch_size=64, seed=5)
    loader = iter(DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork"))
    taken = [next(loader)["cells"].tolist() for _ in range(7)]
    del loader
    with pytest.raises(InputError, match="num_workers"):
        ds.state_dict(consumed=7)
    state = ds.state_dict(consumed=7, num_workers=2)
    assert taken == delivered[:7]
    resumed = CellDataset(path, batch_size=64)
    resumed.load_state_dict(state)
    # Iterated without workers, the job has another shape: the rest of the
    # epoch is cut anew, and brings exactly the cells not yet delivered.
    rest = cells_of(list(resumed))
    assert rest != delivered[7:]
    assert sorted(c for b in taken + rest for c in b) == list(range(1000))
    # With the state's two workers the stopped job goes on exactly.
    loader = iter(DataLoader(resumed, batch_size=None, num_workers=2,
                             multiprocessing_context="spawn"))
    more = [next(loader)["cells"].tolist() for _ in range(3)]
    del loader
    assert more == delivered[7:10]
    # A resumed pass resumes again, counting from where it started.
    again = CellDataset(path, batch_size=64)
    again.load_state_dict(resumed.state_dict(consumed=3, num_workers=2))
    rest = cells_of(DataLoader(again, batch_size=None, num_workers=2,
                               multiprocessing_context="fork"))
    assert rest == delivered[10:]


def test_set_epoch_after_loading_a_state_keeps_its_resume(small):
    """The usual loop loads the state, then calls set_epoch before the epoch:
    the epoch the state resumes goes on, every cell once; another starts."""
    path = small[0]
    ds = CellDataset(path, batch_size=64, seed=3)
    ds.set_epoch(2)
    it = iter(ds)
    first = [c for _ in range(4) for c in next(it)["cells"].tolist()]
    state = ds.state_dict()
    resumed = CellDataset(path, batch_size=64, seed=3)
    resumed.load_state_dict(state)
    resumed.set_epoch(state["epoch"])
    rest = [c for b in resumed for c in b["cells"].tolist()]
    assert sorted(first + rest) == list(range(1000))
    other = CellDataset(path, batch_size=64, seed=3)
    other.load_state_dict(state)
    other.set_epoch(3)
    assert len([c for b in other for c in b["cells"].tolist()]) == 1000


def test_a_state_of_other_cells_of_the_same_count_is_refused(small):
    path = small[0]
    taken = CellDataset(path, batch_size=32, cells=np.arange(100), seed=1)
    next(iter(taken))
    state = taken.state_dict()
    for other in [dict(cells=np.arange(100, 200)), dict(cells=np.arange(100), balance="cell_type",
                                                        samples_per_epoch=100)]:
        with pytest.raises(InputError, match="another selection"):
            CellDataset(path, batch_size=32, seed=1, **other).load_state_dict(state)
    # The same subset, given in another order or as a mask, resumes.
    mask = np.zeros(1000, dtype=bool)
    mask[:100] = True
    for same in [np.arange(99, -1, -1), mask]:
        resumed = CellDataset(path, batch_size=32, cells=same, seed=1)
        resumed.load_state_dict(state)
        assert sum(len(b["cells"]) for b in resumed) == 68
    # Transformed batches hold float32: int32 is refused when the dataset is made.
    for kwargs in [dict(normalize=1e4), dict(log1p=True)]:
        with pytest.raises(InputError, match="float32"):
            CellDataset(path, dtype="int32", **kwargs)


def test_a_boolean_series_selects_the_cells_its_index_names(small):
    """A mask made from a sorted or filtered obs frame is lined up by its
    index with the cell names, as pandas lines it up; a default index is
    taken by position, and an index of other labels is refused."""
    path, _, obs, _ = small
    ds = deltacells.open(path)
    names = ds.obs_names
    frame = obs.set_axis(names).sort_values("score")
    mask = frame["cell_type"] == "T"
    want = np.flatnonzero((obs["cell_type"] == "T").to_numpy()).tolist()
    got = sorted(c for b in CellDataset(ds, cells=mask, batch_size=100)
                 for c in b["cells"].tolist())
    assert got == want
    X = ds.read(slice(None), format="csr_matrix")
    assert (ds.read(mask, format="csr_matrix") != X[want]).nnz == 0
    by_position = pd.Series((obs["cell_type"] == "T").to_numpy())
    assert (ds.read(by_position, format="csr_matrix") != X[want]).nnz == 0
    with pytest.raises(InputError, match="its index"):
        ds.read(pd.Series(True, index=[f"x{i}" for i in range(1000)]))
    with pytest.raises(InputError, match="missing values"):
        ds.read(pd.Series([True, None] * 500, index=names, dtype="boolean"))
    # Genes alike, by the var names.
    genes = pd.Series(np.arange(300) % 7 == 0, index=ds.var_names)[::-1]
    assert (ds.read(slice(0, 50), genes=genes, format="csr_matrix")
            != X[:50, np.flatnonzero(genes.reindex(ds.var_names).to_numpy())]).nnz == 0


def test_two_ranks_with_two_workers_resume_on_three_ranks_with_one_worker(small):
    path = small[0]
    dense, _ = source_rows(small)
    taken, states = [], []
    for rank in range(2):
        ds = CellDataset(path, batch_size=40, seed=7, rank=rank, world_size=2)
        loader = iter(DataLoader(ds, batch_size=None, num_workers=2,
                                 multiprocessing_context="fork"))
        taken += [next(loader) for _ in range(5)]
        del loader
        states.append(ds.state_dict(consumed=5, num_workers=2))
    # Each rank's state describes the whole job: only the rank differs.
    assert states[1] == {**states[0], "world": [1, 2]}
    assert states[0]["delivered_before"] == [] and states[0]["next_batch"] == 5
    # Every new rank loads rank 0's state.
    rest, lengths = [], []
    for rank in range(3):
        ds = CellDataset(path, batch_size=40, rank=rank, world_size=3)
        ds.load_state_dict(states[0])
        got = list(DataLoader(ds, batch_size=None, num_workers=1,
                              multiprocessing_context="spawn" if rank == 0 else "fork"))
        lengths.append(len(got))
        rest += got
    assert len(set(lengths)) == 1, lengths
    check_rows(taken + rest, dense)
    every = [c for b in cells_of(taken + rest) for c in b]
    assert sorted(every) == list(range(1000))
    # A state taken once the epoch was all delivered resumes at the next
    # epoch's start, on any shape (not an empty pass, nor an empty batch on
    # each rank).
    finished = ds.state_dict(consumed=lengths[-1], num_workers=1)
    for rank in range(2):
        again = CellDataset(path, batch_size=40, rank=rank, world_size=2)
        again.load_state_dict(finished)
        assert again.epoch == finished["epoch"] + 1
        fresh = CellDataset(path, batch_size=40, seed=7, rank=rank, world_size=2)
        fresh.set_epoch(finished["epoch"] + 1)
        assert cells_of(again) == cells_of(fresh)


def test_resumes_compose_and_one_of_the_same_shape_goes_on_exactly(small):
    path = small[0]

    def job(rank, world, state=None, drop_last=False):
        ds = CellDataset(path, batch_size=30, seed=2, rank=rank, world_size=world,
                         drop_last=drop_last)
        if state is not None:
            ds.load_state_dict(state)
        return ds

    # 2 ranks x 2 loader workers take 4 batches each.
    delivered = []
    for rank in range(2):
        ds = job(rank, 2)
        loader = iter(DataLoader(ds, batch_size=None, num_workers=2,
                                 multiprocessing_context="fork"))
        delivered += [next(loader)["cells"].tolist() for _ in range(4)]
        del loader
        if rank == 0:
            first = ds.state_dict(consumed=4, num_workers=2)
    # 3 ranks iterating in process take 2 each, of the batches they would
    # give uninterrupted.
    whole = [cells_of(list(job(rank, 3, first))) for rank in range(3)]
    for rank in range(3):
        ds = job(rank, 3, first)
        it = iter(ds)
        delivered += [next(it)["cells"].tolist() for _ in range(2)]
        if rank == 0:
            second = ds.state_dict()
    assert second["next_batch"] == 2 and second["delivered_before"] != []
    # The same shape again goes on with exactly the batches that job had left.
    for rank in range(3):
        ds = job(rank, 3, second)
        it = iter(ds)
        batch = next(it)["cells"].tolist()
        assert batch == whole[rank][2]
        delivered.append(batch)
        if rank == 0:
            third = ds.state_dict()
    assert third["next_batch"] == 3
    assert third["delivered_before"] == second["delivered_before"]
    # One rank with 3 workers and drop_last finishes the epoch.
    last = cells_of(DataLoader(job(0, 1, third, drop_last=True), batch_size=None,
                               num_workers=3, multiprocessing_context="fork"))
    assert last and all(len(b) == 30 for b in last)
    every = [c for b in delivered + last for c in b]
    assert len(every) == len(set(every))
    assert 1000 - 30 < len(every) <= 1000


def test_states_of_another_order_or_size_and_malformed_ones_are_refused(small):
    path = small[0]
    ds = CellDataset(path, batch_size=50, seed=1)
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    for change, message in [({"batch_size": 40}, "batch_size"),
                            ({"shuffle": "random"}, "shuffle"),
                            ({"epoch_cells": 999}, "999 cells"),
                            ({"delivered_before": [[5, 3]]}, "empty or reversed"),
                            ({"delivered_before": [[0, 10], [5, 20]]}, "sorted and disjoint"),
                            ({"delivered_before": [[990, 1001]]}, "outside the epoch"),
                            ({"next_batch": 21}, "21 batches per rank"),
                            ({"next_batch": None}, "not a CellDataset state"),
                            ({"world": 3}, "not a CellDataset state"),
                            ({"seed": -1}, "seed")]:
        resumed = CellDataset(path, batch_size=50)
        with pytest.raises(InputError, match=message):
            resumed.load_state_dict({**state, **change})
        # Nothing of the refused state was taken.
        assert resumed.seed == 0 and resumed._resume is None
    for malformed in [None, {}, [], {k: v for k, v in state.items() if k != "epoch"}]:
        resumed = CellDataset(path, batch_size=50)
        with pytest.raises(InputError, match="not a CellDataset state"):
            resumed.load_state_dict(malformed)
        # Nothing of the refused state was taken.
        assert resumed.seed == 0 and resumed._resume is None


def test_dense_output_gene_subset_and_obs_labels(small):
    path, X, obs, _ = small
    src = deltacells.open(path)
    names = [src.var_names[j] for j in (5, 1, 200)]
    dense = src.read(slice(None), genes=names, format="numpy")
    ds = CellDataset(path, batch_size=100, seed=1, output="dense", genes=names,
                     obs_columns=["cell_type", "n_counts", "passed"])
    cats = ds.categories("cell_type")
    codes = obs["cell_type"].cat.codes.to_numpy()
    for b in DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork"):
        cells = b["cells"].numpy()
        assert b["X"].dtype == torch.float32 and b["X"].shape == (len(cells), 3)
        np.testing.assert_array_equal(b["X"].numpy(), dense[cells])
        assert [cats[c] for c in b["cell_type"].tolist()] == \
            [obs["cell_type"].cat.categories[c] for c in codes[cells]]
        np.testing.assert_array_equal(b["n_counts"].numpy(), obs["n_counts"].to_numpy()[cells])
        np.testing.assert_array_equal(b["passed"].numpy(), obs["passed"].to_numpy()[cells])


def test_nullable_obs_labels_keep_their_dtype_and_values_in_every_batch(tmp_path):
    import pandas as pd
    import scipy.sparse as sp

    big = 2**62 + 1  # beyond float64's integers
    obs = pd.DataFrame({
        "i32": pd.array([1, 16777217, None, 4, 5, 16777219], dtype="Int32"),
        "i64": pd.array([big, None, 3, 4, 5, big + 2], dtype="Int64"),
        "flag": pd.array([True, False, None, True, False, False], dtype="boolean"),
        "score": [1.5, np.nan, 3.0, 4.0, 5.0, 6.0],
    })
    deltacells.write(sp.csr_matrix(np.ones((6, 2), dtype=np.float32)), tmp_path / "ds", obs=obs)
    ds = CellDataset(tmp_path / "ds", batch_size=2, shuffle="none", obs_columns=list(obs))
    batches = list(ds)
    # Batches 0 and 1 miss values, batch 2 misses none: every batch is alike.
    assert [b["cells"].tolist() for b in batches] == [[0, 1], [2, 3], [4, 5]]
    for b in batches:
        cells = b["cells"].numpy()
        assert set(b) == {"X", "cells", "i32", "i32_missing", "i64", "i64_missing", "flag",
                          "flag_missing", "score"}
        assert (b["i32"].dtype, b["i64"].dtype, b["flag"].dtype, b["score"].dtype) == \
            (torch.int32, torch.int64, torch.bool, torch.float64)
        for name in ("i32", "i64", "flag"):
            source = obs[name].iloc[cells]
            missing = b[f"{name}_missing"].numpy()
            np.testing.assert_array_equal(missing, source.isna().to_numpy())
            assert b[name].numpy()[~missing].tolist() == source.dropna().tolist()
        np.testing.assert_array_equal(b["score"].numpy(), obs["score"].to_numpy()[cells])


def test_an_obs_column_cannot_shadow_a_batch_entry(tmp_path):
    import pandas as pd
    import scipy.sparse as sp

    obs = pd.DataFrame({"n": [1, 2], "n_missing": [0.5, 1.5]})
    deltacells.write(sp.csr_matrix(np.ones((2, 2), dtype=np.float32)), tmp_path / "ds", obs=obs)
    with pytest.raises(InputError, match="'n_missing'"):
        list(CellDataset(tmp_path / "ds", batch_size=2, obs_columns=["n", "n_missing"]))
    # An obs column named as the cell ids does not replace them.
    deltacells.write(sp.csr_matrix(np.ones((2, 2), dtype=np.float32)), tmp_path / "c",
                     obs=pd.DataFrame({"cells": ["a", "b"]}))
    with pytest.raises(InputError, match="'cells'"):
        list(CellDataset(tmp_path / "c", batch_size=2, obs_columns=["cells"]))


@pytest.mark.parametrize("context", [None, "fork", "spawn"])
def test_an_open_dataset_serves_like_its_location(small, context):
    path = small[0]
    dense, _ = source_rows(small)
    opened = deltacells.open(path, threads=1)
    want = cells_of(list(CellDataset(path, batch_size=64, seed=7)))
    ds = CellDataset(opened, batch_size=64, seed=7)
    assert ds.location == opened.location
    if context is None:
        got = list(ds)
        # In the process that opened it, the open dataset itself serves.
        assert ds._open(1) is opened
        assert cells_of(got) == want
    else:
        # Workers open the location themselves.
        got = list(DataLoader(ds, batch_size=None, num_workers=2,
                              multiprocessing_context=context))
        assert cells_of(got) == loader_order(want, 2)
    check_rows(got, dense)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_batches_are_those_of_dataset_batches_with_the_same_settings(small, dtype):
    path, _, obs, _ = small
    src = deltacells.open(path)
    settings = dict(batch_size=90, seed=4, shuffle="random", drop_last=True,
                    obs_columns=["cell_type", "score"], dtype=dtype)
    plain = list(src.batches(**settings))
    ds = CellDataset(path, **settings)
    ds.set_epoch(0)
    got = list(ds)
    assert [b["cells"].tolist() for b in got] == [b.cells.tolist() for b in plain]
    for t, b in zip(got, plain):
        assert t["X"].dtype == getattr(torch, dtype)
        np.testing.assert_array_equal(t["X"].to_dense().numpy(), b.X.toarray())
        np.testing.assert_array_equal(t["cell_type"].numpy(), b.obs["cell_type"].codes)
        np.testing.assert_array_equal(t["score"].numpy(), b.obs["score"])


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_persistent_workers_follow_set_epoch_and_refuse_a_late_state(small, context):
    """Persistent DataLoader workers keep the CellDataset they started with:
    set_epoch reaches them (each epoch had been epoch 0 again), and a state
    loaded after they started is refused rather than silently not resumed."""
    path = small[0]
    ds = deltacells.open(path)
    want = [loader_order([b.cells.tolist() for b in ds.batches(100, shuffle="random", seed=1,
                                                                 epoch=e)], 2)
            for e in range(3)]
    cd = CellDataset(path, batch_size=100, shuffle="random", seed=1)
    loader = DataLoader(cd, batch_size=None, num_workers=2, persistent_workers=True,
                        multiprocessing_context=context)
    for epoch in range(3):
        cd.set_epoch(epoch)
        assert cells_of(loader) == want[epoch], epoch
    state = cd.state_dict(consumed=3, num_workers=2)
    cd.load_state_dict(state)
    with pytest.raises(InputError, match="persistent workers"):
        list(loader)
    # Loaded before a loader's workers start, the state is taken.
    fresh = CellDataset(path, batch_size=100, shuffle="random", seed=1)
    fresh.load_state_dict(state)
    rest = cells_of(DataLoader(fresh, batch_size=None, num_workers=2, persistent_workers=True,
                               multiprocessing_context=context))
    assert rest == want[2][3:]


def test_settings_out_of_range_are_input_errors(small):
    """Values the engine cannot hold are InputErrors naming them, not the
    binding's OverflowError or ValueError."""
    path = small[0]
    ds = deltacells.open(path)
    for call in [lambda: ds.batches(2, weights=["a"] * ds.n_obs),
                 lambda: list(ds.batches(2, rank=0, world_size=2**64)),
                 lambda: ds.batches(2, delivered=["ab"]),
                 lambda: list(ds.batches(2, delivered=[(-1, 2)])),
                 lambda: ds.batches(2).for_worker(0, 2, delivered=-1),
                 lambda: CellDataset(path, batch_size=2).state_dict(consumed=-1, num_workers=1)]:
        with pytest.raises(InputError):
            call()
    cd = CellDataset(path, batch_size=50)
    state = cd.state_dict()
    for change in [{"next_batch": -1}, {"world": [0, -1]}, {"delivered_before": [[-2, 1]]}]:
        with pytest.raises(InputError):
            CellDataset(path, batch_size=50).load_state_dict({**state, **change})
    # All batches made ahead at most, and the epoch after the last one a
    # u64 numbers is not made ahead.
    assert len(list(ds.batches(100, prefetch=2**64 - 1))) == 10
    last = CellDataset(path, batch_size=500)
    last.set_epoch(2**64 - 1)
    assert sorted(c for b in cells_of(last) for c in b) == list(range(1000))


def test_an_epoch_set_after_the_workers_started_is_never_served_in_part(small):
    """set_epoch after the loader's iterator exists (Lightning restarting
    from a checkpoint creates it before on_train_epoch_start) reaches the
    workers that start after it and not those already running: a pass of
    two epochs' cells. Either every worker serves the new epoch or the pass
    fails naming the fix; never a mix."""
    path = small[0]
    ds = deltacells.open(path)
    want = sorted(c for b in ds.batches(50, seed=1, epoch=2) for c in b.cells.tolist())
    outcomes = set()
    for _ in range(4):
        cd = CellDataset(path, batch_size=50, seed=1)
        it = iter(DataLoader(cd, batch_size=None, num_workers=2))
        cd.set_epoch(2)
        try:
            got = sorted(c for b in it for c in b["cells"].tolist())
        except InputError as e:
            assert "before iterating the loader" in str(e)
            outcomes.add("refused")
        else:
            assert got == want
            outcomes.add("served")
    assert outcomes


def test_a_state_taken_at_the_end_of_its_epoch_resumes_at_the_next_one(small):
    """A checkpoint at an epoch's end: the loaded state starts the next
    epoch, so a loader iterated before set_epoch (as Lightning does when it
    restarts) serves that epoch whole, on every worker."""
    path = small[0]
    ds = deltacells.open(path)
    want = loader_order([b.cells.tolist() for b in ds.batches(50, seed=1, epoch=2)], 2)
    done = CellDataset(path, batch_size=50, seed=1)
    done.set_epoch(1)
    state = done.state_dict(consumed=len(done), num_workers=2)
    for persistent in [False, True]:
        cd = CellDataset(path, batch_size=50, seed=1)
        cd.load_state_dict(state)
        assert cd.epoch == 2
        it = iter(DataLoader(cd, batch_size=None, num_workers=2, persistent_workers=persistent))
        cd.set_epoch(2)
        assert cells_of(it) == want

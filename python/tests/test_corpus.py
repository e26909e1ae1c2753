"""`deltacells.Corpus`: datasets with different genes and obs read as one,
checked against `anndata.concat(..., join="outer")` of the members read back
one by one, aligned by var names."""

import pickle
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import N_CELLS, aligned, concat, differently_named, loader_order

import deltacells
from deltacells.errors import DeltacellsError, InputError


@pytest.fixture(scope="module")
def union(corpus_members):
    corpus = deltacells.Corpus(corpus_members)
    want = concat(corpus_members)
    return corpus, want, aligned(want, list(corpus.var_names))


def test_the_shape_and_vocabulary_are_the_members_union(corpus_members, union):
    corpus, want, _ = union
    assert corpus.n_obs == sum(N_CELLS) == want.n_obs
    assert sorted(corpus.var_names) == sorted(want.var_names)
    # The union in the order first seen, member by member.
    seen = []
    for p in corpus_members:
        for name in deltacells.open(p).var_names:
            if name not in seen:
                seen.append(name)
    assert list(corpus.var_names) == seen
    assert [m["name"] for m in corpus.members] == [p.stem for p in corpus_members]
    assert [m["n_obs"] for m in corpus.members] == list(N_CELLS)
    assert corpus.tile_limits[-1] == corpus.n_obs
    assert corpus.n_tiles == sum(deltacells.open(p).n_tiles for p in corpus_members)


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_csr_and_dense_reads_equal_the_outer_concat(union, dtype):
    corpus, _, dense = union
    X = corpus.read(dtype=dtype)
    assert X.shape == dense.shape and X.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(X.toarray(), dense)
    np.testing.assert_array_equal(corpus.read(format="numpy", dtype=dtype), dense)


def test_ranges_and_random_ids_read_their_rows(union):
    corpus, _, dense = union
    for start, stop in [(0, 1), (250, 420), (299, 301), (490, 650), (0, 650), (640, 650)]:
        np.testing.assert_array_equal(corpus[start:stop].toarray(), dense[start:stop])
    rng = np.random.default_rng(3)
    ids = rng.integers(0, corpus.n_obs, size=400)
    ids[:5] = [649, 0, 300, 299, 0]  # member edges, duplicates
    np.testing.assert_array_equal(corpus.read(ids, dtype="int32").toarray(), dense[ids])
    np.testing.assert_array_equal(corpus.read(ids, format="numpy"), dense[ids])
    mask = rng.random(corpus.n_obs) < 0.3
    np.testing.assert_array_equal(corpus.read(mask).toarray(), dense[mask])


def test_gene_selections_by_name_follow_the_vocabulary(union):
    corpus, _, dense = union
    names = ["H1", "G0", "G87", "G30"]
    cols = [list(corpus.var_names).index(n) for n in names]
    np.testing.assert_array_equal(corpus.read(slice(100, 500), genes=names).toarray(),
                                  dense[100:500][:, cols])
    np.testing.assert_array_equal(corpus.read([5, 640, 310], genes=cols, format="numpy"),
                                  dense[[5, 640, 310]][:, cols])


def test_iter_tiles_covers_every_member_in_order(union):
    corpus, _, dense = union
    rows = [t.toarray() for t in corpus.iter_tiles(dtype="int32")]
    assert len(rows) == corpus.n_tiles
    np.testing.assert_array_equal(np.vstack(rows), dense)


def test_obs_is_the_unified_obs_with_the_source_column(union):
    corpus, want, _ = union
    obs = corpus.obs
    assert list(obs.index) == list(want.obs_names)
    assert set(obs.columns) == set(want.obs.columns)
    assert list(obs.columns)[-1] == "dataset_id"
    for name in want.obs.columns:
        got, exp = obs[name], want.obs[name]
        if isinstance(exp.dtype, pd.CategoricalDtype):
            assert isinstance(got.dtype, pd.CategoricalDtype), name
            assert list(got.cat.categories) == list(exp.cat.categories), name
            assert list(got.astype(object).fillna("<na>")) == \
                list(exp.astype(object).fillna("<na>")), name
        elif exp.dtype == object:
            assert list(got.fillna("<na>")) == list(exp.fillna("<na>")), name
        else:
            np.testing.assert_array_equal(got.to_numpy(dtype=float, na_value=np.nan),
                                          exp.to_numpy(dtype=float, na_value=np.nan),
                                          err_msg=name)
    # Some cells, in any order.
    ids = [640, 3, 305, 3]
    part = corpus.read_obs(["cell_type", "dataset_id"], cells=ids)
    assert list(part.index) == [want.obs_names[i] for i in ids]
    assert list(part["dataset_id"]) == [want.obs["dataset_id"].iloc[i] for i in ids]


def test_to_anndata_equals_the_concat(union):
    corpus, want, dense = union
    adata = corpus.to_anndata(dtype="int32")
    np.testing.assert_array_equal(adata.X.toarray(), dense)
    assert list(adata.obs_names) == list(want.obs_names)
    assert list(adata.var_names) == list(corpus.var_names)


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_one_epoch_of_batches_gives_every_cell_once_in_equal_shares(union, world_size):
    corpus, want, dense = union
    seen, lengths = [], []
    for rank in range(world_size):
        batches = corpus.batches(64, seed=5, rank=rank, world_size=world_size, dtype="int32",
                                 obs_columns=["cell_type", "dataset_id"], window_tiles=2)
        got = list(batches)
        lengths.append(len(got))
        assert len(got) == len(batches)
        for b in got:
            np.testing.assert_array_equal(b.X.toarray(), dense[b.cells])
            codes = want.obs["dataset_id"].to_numpy()[b.cells]
            assert list(b.obs["dataset_id"]) == list(codes)
            seen.extend(b.cells.tolist())
    assert len(set(lengths)) == 1
    assert sorted(seen) == list(range(corpus.n_obs))


def test_block_shuffle_mixes_members(union):
    corpus, _, dense = union
    batches = list(corpus.batches(50, seed=9, format="numpy"))
    first = sorted(c for b in batches for c in b.cells)
    assert first == list(range(corpus.n_obs))
    # Cells of several members come in the first half of the epoch.
    half = np.concatenate([b.cells for b in batches[:len(batches) // 2]])
    assert len({np.searchsorted([300, 500], c, side="right") for c in half}) > 1
    for b in batches:
        np.testing.assert_array_equal(b.X, dense[b.cells])


def test_intersection_and_listed_genes(corpus_members):
    inner = deltacells.Corpus(corpus_members, genes="intersection")
    want = concat(corpus_members, join="inner")
    assert sorted(inner.var_names) == sorted(want.var_names)
    np.testing.assert_array_equal(inner.read(dtype="int32").toarray(),
                                  aligned(want, list(inner.var_names)))
    listed = ["G3", "NOPE", "H0", "G59"]
    corpus = deltacells.Corpus(corpus_members, genes=listed)
    assert list(corpus.var_names) == listed
    np.testing.assert_array_equal(corpus.read(format="numpy", dtype="int32"),
                                  aligned(concat(corpus_members), listed))


def test_genes_matched_by_a_var_column(corpus_members, union):
    corpus, _, dense = union
    by_id = deltacells.Corpus(corpus_members, gene_key="gene_ids")
    assert list(by_id.var_names) == [f"ENS{n}" for n in corpus.var_names]
    assert by_id.gene_key == "gene_ids"
    np.testing.assert_array_equal(by_id.read(dtype="int32").toarray(), dense)


def test_a_saved_corpus_opens_as_the_same_corpus(corpus_members, union, tmp_path):
    corpus, _, dense = union
    path = corpus_members[0].parent / "all.json"
    corpus.save(path)
    opened = deltacells.open(path)
    assert isinstance(opened, deltacells.Corpus)
    assert opened.location == str(path)
    assert opened.locations == corpus.locations
    assert list(opened.var_names) == list(corpus.var_names)
    np.testing.assert_array_equal(opened.read(dtype="int32").toarray(), dense)
    # A pickled corpus reopens the same members.
    again = pickle.loads(pickle.dumps(opened))
    np.testing.assert_array_equal(again.read(slice(280, 330), dtype="int32").toarray(),
                                  dense[280:330])
    assert again.source_column == "dataset_id" and again.genes == "union"


def test_a_corpus_named_by_relative_paths_reopens_in_any_working_directory(
        corpus_members, union, tmp_path, monkeypatch):
    """As a Dask worker started elsewhere unpickles it: the members were
    looked for relative to the unpickling process's working directory."""
    corpus, _, dense = union
    root = corpus_members[0].parent
    monkeypatch.chdir(root)
    by_name = deltacells.Corpus([p.name for p in corpus_members])
    corpus.save(root / "relative.json")
    monkeypatch.chdir(root.parent)
    from_file = deltacells.open(f"{root.name}/relative.json")
    states = [pickle.dumps(by_name), pickle.dumps(from_file)]
    monkeypatch.chdir(tmp_path)
    for state in states:
        again = pickle.loads(state)
        np.testing.assert_array_equal(again.read(dtype="int32").toarray(), dense)


def test_cell_dataset_over_a_corpus_in_two_workers(union):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from deltacells.torch import CellDataset

    corpus, _, dense = union
    ds = CellDataset(corpus, batch_size=40, seed=2, output="dense", dtype="int32",
                     obs_columns=["dataset_id"])
    want = [b.cells.tolist() for b in corpus.batches(40, seed=2)]
    got = list(DataLoader(ds, batch_size=None, num_workers=2))
    assert [b["cells"].tolist() for b in got] == loader_order(want, 2)
    assert sorted(c for b in got for c in b["cells"].tolist()) == list(range(corpus.n_obs))
    for b in got:
        np.testing.assert_array_equal(b["X"].numpy(), dense[b["cells"].numpy()])
        assert isinstance(b["dataset_id"], torch.Tensor)


def test_bad_corpora_are_refused_with_the_member_named(corpus_members, tmp_path):
    missing = tmp_path / "nowhere.dc"
    with pytest.raises(DeltacellsError, match="nowhere"):
        deltacells.Corpus([corpus_members[0], missing])
    with pytest.raises(InputError, match="genes"):
        deltacells.Corpus(corpus_members, genes="everything")
    with pytest.raises(InputError):
        deltacells.Corpus(str(corpus_members[0]))
    with pytest.raises(DeltacellsError, match="part_a"):
        deltacells.Corpus(corpus_members, gene_key="no_such_column")
    with pytest.raises(DeltacellsError):
        deltacells.Corpus([corpus_members[0], corpus_members[1]], genes=["H0", "H0"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "deltacells-corpus", "version": 1, "members": []}')
    with pytest.raises(DeltacellsError, match="bad.json"):
        deltacells.open(bad)


@pytest.mark.parametrize("join", ["outer", "inner"])
def test_normalized_reads_and_batches_divide_by_each_members_totals(corpus_members, join):
    """normalize_total + log1p of a corpus, as scanpy gives it on each member
    before the concat: each cell divided by its total over all of its
    member's genes, whichever genes the vocabulary or the selection keeps;
    a name no member has reads as zeros with missing="zero"."""
    corpus = deltacells.Corpus(corpus_members, genes="union" if join == "outer" else "intersection")
    adatas = [deltacells.open(p).to_anndata(dtype="int32") for p in corpus_members]
    totals = np.concatenate([np.asarray(a.X.sum(axis=1), dtype=np.float64).ravel() for a in adatas])
    X = aligned(concat(corpus_members, join=join), list(corpus.var_names)).astype(np.float64)
    # A cell of total 0 stays 0, as scanpy leaves it.
    scaled = np.divide(X, totals[:, None], out=np.zeros_like(X), where=totals[:, None] > 0)
    want_all = np.log1p(scaled * 1e4)
    picked = [name for name in corpus.var_names if name.endswith("1")][:4] + ["NOPE"]
    want = np.zeros((corpus.n_obs, len(picked)))
    at = {name: j for j, name in enumerate(corpus.var_names)}
    for k, name in enumerate(picked):
        if name in at:
            want[:, k] = want_all[:, at[name]]
    cells = np.arange(corpus.n_obs)[::-7]
    got = corpus.read(cells, genes=picked, missing="zero", normalize=1e4, log1p=True, format="numpy")
    np.testing.assert_allclose(got, want[cells], rtol=1e-6, atol=0)
    every = corpus.read(cells, normalize=1e4, log1p=True, format="csr_array").toarray()
    np.testing.assert_allclose(every, want_all[cells], rtol=1e-6, atol=0)
    rows = []
    for batch in corpus.batches(batch_size=64, shuffle="none", genes=picked, missing="zero",
                                normalize=1e4, log1p=True, format="numpy"):
        rows.append(np.asarray(batch.X))
    np.testing.assert_allclose(np.vstack(rows), want, rtol=1e-6, atol=0)


def test_members_keeping_cell_ids_in_different_columns_keep_their_names(tmp_path):
    """A corpus keeps each member's obs names, as `anndata.concat` does, where
    the members keep them in different obs columns or not at all."""
    paths = differently_named(tmp_path, (30, 20, 25), seed=5)
    corpus = deltacells.Corpus(paths)
    want = concat(paths)
    assert list(want.obs_names[:3]) == ["AAAC-0", "AAAC-1", "AAAC-2"]
    assert list(corpus.obs_names) == list(want.obs_names)
    assert list(corpus.obs.index) == list(want.obs_names)
    assert list(corpus.to_anndata().obs_names) == list(want.obs_names)
    ids = [74, 31, 0, 50, 29]
    assert list(corpus.read_obs("score", cells=ids).index) == [want.obs_names[i] for i in ids]
    # Each member's column of cell ids is its obs_names, not an obs column,
    # as anndata.concat leaves them.
    assert corpus.obs_columns == list(want.obs.columns)
    assert list(corpus.obs.columns) == list(want.obs.columns)
    # Members that all keep none: positions in the corpus, unique.
    shutil.copytree(paths[2], tmp_path / "copy.dc")
    plain = deltacells.Corpus([paths[2], tmp_path / "copy.dc"])
    assert list(plain.obs_names) == [str(i) for i in range(50)]


def test_an_index_that_is_a_column_of_one_member_is_a_column_of_the_corpus(tmp_path):
    """A member written with `set_index("bc", drop=False)` beside one whose
    index `bc` is no column: `anndata.concat` keeps `bc` as a column (the
    corpus and a build of both had hidden it); the other member's cells give
    their ids there."""
    import anndata as ad

    paths = []
    for name, drop in (("kept", False), ("index", True)):
        obs = pd.DataFrame({"bc": [f"{name}{i}" for i in range(6)], "v": np.arange(6)})
        X = np.arange(12, dtype=np.int32).reshape(6, 2) + 1
        a = ad.AnnData(X, obs=obs.set_index("bc", drop=drop),
                       var=pd.DataFrame(index=["A", "B"]))
        deltacells.write(a, tmp_path / name, level=1)
        paths.append(tmp_path / name)
    ids = [f"kept{i}" for i in range(6)] + [f"index{i}" for i in range(6)]
    deltacells.build(paths, tmp_path / "built", workers=1)
    for ds in (deltacells.Corpus(paths), deltacells.open(tmp_path / "built")):
        assert "bc" in ds.obs_columns
        assert list(ds.obs_names) == ids
        assert ds.obs["bc"].tolist() == ids

"""Model-ready batches: subsets (a pandas query on obs), weighted and balanced
draws (frequencies checked against the weights in numpy), normalized batches
against scanpy, tokenized batches against tokenized reads of the same cells,
all through `Dataset.batches` and `CellDataset` (real DataLoader workers)."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import deltacells
from deltacells.errors import InputError
from deltacells.tokenize import Geneformer, ScGPT


def epoch(ds, world=1, **options):
    """Every batch of every rank: the cells, the batches and each rank's count."""
    cells, batches, counts = [], [], []
    for rank in range(world):
        it = ds.batches(64, rank=rank, world_size=world, **options)
        got = list(it)
        counts.append(len(got))
        batches += got
        cells += [c for b in got for c in b.cells.tolist()]
    return np.array(cells, dtype=np.int64), batches, counts


def test_a_subset_from_an_obs_query_serves_its_cells_once_on_every_rank(small):
    path, _, obs, _ = small
    ds = deltacells.open(path)
    mask = (obs["cell_type"] == "NK") & (obs["score"] > 0.3)
    want = np.flatnonzero(mask.to_numpy())
    for shuffle in ["block", "random", "none"]:
        for cells in [mask, want[::-1], mask.to_numpy()]:
            got, batches, counts = epoch(ds, world=3, cells=cells, shuffle=shuffle)
            assert len(set(counts)) == 1
            assert sorted(got.tolist()) == want.tolist()
            for b in batches:
                assert (b.X != ds.read(b.cells)).nnz == 0
    # More batches asked ahead than there are is no more than all of them.
    ahead = [b.cells.tolist() for b in ds.batches(64, cells=want, prefetch=2**60)]
    assert ahead == [b.cells.tolist() for b in ds.batches(64, cells=want)]
    # An empty subset has no batches on any rank (not an empty batch each).
    for rank in range(2):
        assert list(ds.batches(64, cells=[], rank=rank, world_size=2)) == []


def test_weighted_and_balanced_draws_follow_their_probabilities(small):
    path, _, obs, _ = small
    ds = deltacells.open(path)
    weights = np.zeros(ds.n_obs)
    weights[[3, 400, 999]] = [1.0, 2.0, 5.0]
    samples = 16_000
    for shuffle in ["block", "random"]:
        got, _, counts = epoch(ds, world=2, weights=weights, samples_per_epoch=samples,
                               shuffle=shuffle, seed=4)
        assert len(got) == samples and len(set(counts)) == 1
        freq = pd.Series(got).value_counts()
        assert set(freq.index) == {3, 400, 999}
        for cell, w in [(3, 1.0), (400, 2.0), (999, 5.0)]:
            p = w / 8.0
            sd = np.sqrt(samples * p * (1 - p))
            assert abs(freq[cell] - samples * p) < 4 * sd, (shuffle, cell, freq[cell])
        again, _, _ = epoch(ds, world=2, weights=weights, samples_per_epoch=samples,
                            shuffle=shuffle, seed=4)
        assert (again == got).all()
    # Balanced classes: T, B and NK come equally often whatever their sizes
    # (a subset makes them unequal: most NK cells are left out).
    keep = np.flatnonzero((obs["cell_type"] != "NK").to_numpy() | (obs["score"] > 0.9).to_numpy())
    got, _, _ = epoch(ds, balance="cell_type", cells=keep, samples_per_epoch=9000)
    assert np.isin(got, keep).all()
    classes = obs["cell_type"].to_numpy()[got]
    for name in ["T", "B", "NK"]:
        n = (classes == name).sum()
        assert abs(n - 3000) < 4 * np.sqrt(9000 * (1 / 3) * (2 / 3)), (name, n)


def test_normalized_batches_match_scanpy(small):
    """Every gene, a selection, and a vocabulary naming genes the dataset
    lacks (missing="zero": columns of zeros), CSR and dense."""
    import anndata as ad
    import scanpy as sc

    path, _, _, _ = small
    ds = deltacells.open(path)
    # The counts in the dataset's column order (var_names).
    stored = ds.read(slice(None), dtype=np.int32)
    names = list(ds.var_names)
    genes = ["G5", "G250", "G17", "G299"]
    vocabulary = ["NOPE", "G17", "G5", "NOT_A_GENE", "G0"]
    for format, picked, missing in [("csr_matrix", None, "error"), ("numpy", genes, "error"),
                                    ("numpy", vocabulary, "zero"),
                                    ("csr_matrix", vocabulary, "zero")]:
        for b in ds.batches(100, normalize=1e4, log1p=True, format=format, genes=picked,
                            missing=missing):
            a = ad.AnnData(stored[b.cells].astype(np.float64))
            sc.pp.normalize_total(a, target_sum=1e4)
            sc.pp.log1p(a)
            want = a.X.toarray()
            if picked is not None:
                want = np.column_stack([want[:, names.index(g)] if g in names
                                        else np.zeros(len(b.cells)) for g in picked])
            got = b.X if format == "numpy" else b.X.toarray()
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    # Counts over a vocabulary, and the names the default refuses.
    for b in ds.batches(300, genes=vocabulary, missing="zero", dtype=np.int32, shuffle="none"):
        want = np.column_stack([stored[b.cells][:, [names.index(g)]].toarray().ravel()
                                if g in names else np.zeros(len(b.cells)) for g in vocabulary])
        np.testing.assert_array_equal(b.X.toarray(), want)
    with pytest.raises(InputError, match="NOPE"):
        ds.batches(genes=vocabulary)
    with pytest.raises(InputError, match="missing"):
        ds.batches(genes=vocabulary, missing="skip")
    # A negative index counts from the end, never a missing name's zeros.
    last = ds.n_vars - 1
    for b in ds.batches(300, genes=[3, -1], missing="zero", dtype=np.int32, shuffle="none"):
        np.testing.assert_array_equal(b.X.toarray(), stored[b.cells][:, [3, last]].toarray())


def test_tokenized_batches_are_the_tokenized_reads_of_their_cells(small):
    path, _, _, _ = small
    ds = deltacells.open(path)
    names = list(ds.var_names)
    tokens = {n: g + 3 for g, n in enumerate(names)} | {"<pad>": 0, "<cls>": 1, "<eos>": 2}
    medians = deltacells.gene_stats(path)["norm_median"].dropna().to_dict()
    geneformer = Geneformer(tokens, medians, max_len=64, special_tokens=True)
    for tokenizer, reader in [(geneformer, geneformer),
                              (ScGPT(tokens, max_len=20), ScGPT(tokens, max_len=20, seed=3,
                                                                 epoch=2))]:
        seen = 0
        for b in ds.batches(100, tokenizer=tokenizer, seed=3, epoch=2):
            want = ds.read(b.cells, tokenizer=reader)
            assert set(b.X) == set(want)
            for k in want:
                np.testing.assert_array_equal(b.X[k], want[k])
            seen += len(b.cells)
        assert seen == ds.n_obs
    with pytest.raises(InputError):
        ds.batches(tokenizer=geneformer, genes=["G1"])
    with pytest.raises(InputError):
        ds.batches(tokenizer=geneformer, normalize=1e4)


def test_cell_datasets_take_every_setting_through_spawned_workers(small):
    import torch

    from deltacells.torch import CellDataset

    path, _, obs, _ = small
    names = list(deltacells.open(path).var_names)
    tokens = {n: g + 3 for g, n in enumerate(names)} | {"<pad>": 0, "<cls>": 1, "<eos>": 2}
    subset = np.flatnonzero((obs["cell_type"] == "B").to_numpy())
    data = CellDataset(path, batch_size=32, cells=subset, tokenizer=ScGPT(tokens, max_len=16))
    loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=2,
                                         multiprocessing_context="spawn")
    cells = []
    for batch in loader:
        assert batch["input_ids"].shape[1] == 16 and batch["values"].dtype == torch.float32
        assert "X" not in batch
        cells += batch["cells"].tolist()
    assert sorted(cells) == subset.tolist()
    assert len(data) == -(-len(subset) // 32)
    balanced = CellDataset(path, batch_size=50, balance=["cell_type"], samples_per_epoch=600,
                           normalize=1e4, log1p=True, output="dense", genes=["G3", "NOPE", "G1"],
                           missing="zero")
    loader = torch.utils.data.DataLoader(balanced, batch_size=None, num_workers=2,
                                         multiprocessing_context="spawn")
    rows = [b["X"] for b in loader]
    assert sum(r.shape[0] for r in rows) == 600 and rows[0].dtype == torch.float32
    assert all(r.shape[1] == 3 and not r[:, 1].any() for r in rows)
    with pytest.raises(InputError, match="missing"):
        CellDataset(path, genes=["G3"], missing="skip")


def test_bad_sampling_settings_are_refused_before_any_batch(small):
    pytest.importorskip("torch")
    from deltacells.torch import CellDataset

    path, _, _, _ = small
    ds = deltacells.open(path)
    n = ds.n_obs
    # Refused by batches, and by CellDataset when it is made: none of these
    # needs the dataset to be found wrong.
    refused_when_made = [
        (dict(weights=np.full(n, -1.0)), "finite and at least 0"),
        (dict(weights=np.full(n, np.nan)), "finite and at least 0"),
        (dict(weights=np.zeros(n)), "every weight is 0"),
        (dict(weights=np.ones((n, 1))), r"shape \(%d, 1\)" % n),
        (dict(weights=np.ones(n), balance="cell_type"), "not both"),
        (dict(balance=5), "balance must be an obs column name, a list of them or None"),
        (dict(balance=["cell_type", 3]), "balance must be an obs column name, a list of them or None"),
        (dict(samples_per_epoch=0), "samples_per_epoch"),
        (dict(samples_per_epoch=2.5), "samples_per_epoch must be an integer"),
        (dict(normalize=-1.0), "normalize must be a positive finite number"),
        (dict(normalize="1e4"), "normalize must be a positive finite number"),
        (dict(tokenizer="geneformer"), "tokenizer must be"),
        (dict(batch_size=2.5), "batch_size must be an integer"),
        (dict(rank=0.5, world_size=2), "rank must be an integer"),
    ]
    for options, match in refused_when_made:
        with pytest.raises(InputError, match=match):
            ds.batches(**options)
        with pytest.raises(InputError, match=match):
            CellDataset(path, **options)
    with pytest.raises(InputError, match="threads"):
        CellDataset(path, threads=0)
    # A tokenizer with settings it cannot take, dense rows included.
    tokens = {name: i + 3 for i, name in enumerate(ds.var_names)}
    tokens.update({"<pad>": 0, "<cls>": 1})
    tokenizer = ScGPT(tokens, max_len=16)
    for options in [dict(genes=list(ds.var_names[:3])), dict(normalize=1e4), dict(log1p=True),
                    dict(output="dense")]:
        with pytest.raises(InputError, match="a tokenizer reads every gene"):
            CellDataset(path, tokenizer=tokenizer, **options)
    # These need the dataset: batches refuses them at once, CellDataset (which
    # opens its dataset in each process that iterates) at its first batch.
    for options in [dict(weights=np.ones(5)), dict(cells=np.zeros(n + 1, dtype=bool))]:
        with pytest.raises(InputError):
            ds.batches(**options)
        with pytest.raises(InputError):
            next(iter(CellDataset(path, **options)))
    for options in [dict(balance="no such column"), dict(balance="score")]:
        with pytest.raises(InputError):
            list(ds.batches(**options))
    with pytest.raises(InputError):
        list(ds.batches(normalize=1e4, dtype=np.int32))
    # A whole number given as a float is that number.
    assert len(ds.batches(batch_size=64.0, cache_bytes=4e9)) == len(ds.batches(batch_size=64))

"""Model-ready batches of a corpus: tokens against the numpy tokenizers over
each member's rows (each cell's total over all of its member's genes),
weighted and balanced draws over the unified obs, subsets, and an elastic
resume of `CellDataset` over a corpus, as the same features of one dataset
are checked in test_model_batches and test_torch."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import CLS, EOS, N_CELLS, PAD, aligned, concat, geneformer_numpy, scgpt_numpy

import deltacells
from deltacells.tokenize import Geneformer, ScGPT

JOINS = {"union": "outer", "intersection": "inner"}


def dictionaries(names):
    """Tokens in an order of their own and medians that repeat (ties), each
    missing for some genes."""
    rng = np.random.default_rng(3)
    ids = rng.permutation(len(names)) + 3
    tokens = {n: int(ids[g]) for g, n in enumerate(names) if g % 5 != 2}
    tokens.update({"<pad>": PAD, "<cls>": CLS, "<eos>": EOS})
    medians = {n: [0.5, 1.0, 1.0, 2.0][g % 4] for g, n in enumerate(names) if g % 7 != 3}
    return tokens, medians


@pytest.fixture(scope="module", params=list(JOINS))
def corpus(request, corpus_members):
    """A corpus (union or intersection of the members' genes), its rows in
    its vocabulary as CSR, and each cell's total over its member's genes."""
    corpus = deltacells.Corpus(corpus_members, genes=request.param)
    rows = aligned(concat(corpus_members, join=JOINS[request.param]), list(corpus.var_names))
    totals = np.concatenate([
        np.asarray(deltacells.open(p).read(dtype="int32").sum(axis=1), dtype=np.float64).ravel()
        for p in corpus_members])
    return corpus, sp.csr_matrix(rows), totals


def test_tokens_count_each_members_whole_cell(corpus):
    corpus, X, totals = corpus
    names = list(corpus.var_names)
    tokens, medians = dictionaries(names)
    # The intersection drops genes of every member: a cell's total is still
    # over all of them.
    assert (np.asarray(X.sum(axis=1)).ravel() <= totals).all()
    cells = np.r_[np.arange(corpus.n_obs)[::-3], np.arange(40)]
    for max_len, special in [(2048, False), (6, True)]:
        tok = Geneformer(tokens, medians, max_len=max_len, special_tokens=special)
        want = geneformer_numpy(X, names, tokens, medians, max_len, special, totals)
        np.testing.assert_array_equal(corpus.read(cells, tokenizer=tok)["input_ids"], want[cells])
        for batch in corpus.batches(64, seed=3, tokenizer=tok):
            np.testing.assert_array_equal(batch.X["input_ids"], want[batch.cells])
    # No cell has 99 genes: scGPT samples none, and keeps them in gene order.
    assert np.diff(X.indptr).max() < 99
    for normalize, log1p in [(None, False), (1e4, True)]:
        tok = ScGPT(tokens, max_len=100, normalize=normalize, log1p=log1p)
        ids, values = scgpt_numpy(X, names, tokens, 51, 100, normalize, log1p, totals)
        got = corpus.read(cells, tokenizer=tok)
        np.testing.assert_array_equal(got["input_ids"], ids[cells])
        np.testing.assert_array_equal(got["values"], values[cells])
        seen = []
        for batch in corpus.batches(64, seed=3, tokenizer=tok, shuffle="random"):
            np.testing.assert_array_equal(batch.X["input_ids"], ids[batch.cells])
            np.testing.assert_array_equal(batch.X["values"], values[batch.cells])
            seen += batch.cells.tolist()
        assert sorted(seen) == list(range(corpus.n_obs))


def draws(corpus, world, **options):
    """Every rank's drawn cells, in order, and each rank's batch count."""
    cells, counts = [], []
    for rank in range(world):
        got = list(corpus.batches(64, rank=rank, world_size=world, **options))
        counts.append(len(got))
        cells += [c for b in got for c in b.cells.tolist()]
    return np.array(cells), counts


def test_balanced_and_weighted_draws_span_the_members(corpus):
    corpus, _, _ = corpus
    obs = corpus.obs
    # Classes are the (member, cell type) pairs present; the last member
    # has no cell types, and its cells make one class with a missing type.
    labels = obs["dataset_id"].astype(str) + "/" + obs["cell_type"].astype(str)
    classes = labels.unique()
    assert len(classes) == 7
    samples = 7000
    got, counts = draws(corpus, 2, balance=["dataset_id", "cell_type"], samples_per_epoch=samples,
                        seed=4)
    assert len(got) == samples and len(set(counts)) == 1
    again, _ = draws(corpus, 2, balance=["dataset_id", "cell_type"], samples_per_epoch=samples,
                     seed=4)
    assert (again == got).all()
    p = 1 / len(classes)
    freq = labels.to_numpy()[got]
    for name in classes:
        n = (freq == name).sum()
        assert abs(n - samples * p) < 4 * np.sqrt(samples * p * (1 - p)), (name, n)
    # Weights: one cell of each member.
    weights = np.zeros(corpus.n_obs)
    picked = {5: 1.0, N_CELLS[0] + 7: 2.0, N_CELLS[0] + N_CELLS[1] + 3: 5.0}
    weights[list(picked)] = list(picked.values())
    got, counts = draws(corpus, 3, weights=weights, samples_per_epoch=8000, seed=1,
                        shuffle="block")
    assert len(got) == 8000 and len(set(counts)) == 1
    freq = pd.Series(got).value_counts()
    assert set(freq.index) == set(picked)
    for cell, w in picked.items():
        p = w / 8.0
        assert abs(freq[cell] - 8000 * p) < 4 * np.sqrt(8000 * p * (1 - p)), (cell, freq[cell])


def test_a_subset_from_the_unified_obs(corpus):
    corpus, X, _ = corpus
    obs = corpus.obs
    mask = (obs["cell_type"] == "B") | (obs["score"] > 0.8)
    want = np.flatnonzero(mask.to_numpy())
    assert set(obs["dataset_id"].to_numpy()[want]) == {"part_a", "part_b", "part_c"}
    for shuffle in ["block", "random", "none"]:
        got, counts = draws(corpus, 3, cells=mask, shuffle=shuffle, dtype="int32")
        assert len(set(counts)) == 1
        assert sorted(got.tolist()) == want.tolist()
    for batch in corpus.batches(64, cells=want[::-1], format="numpy", dtype="int32"):
        np.testing.assert_array_equal(batch.X, X[batch.cells].toarray())


def test_two_ranks_with_two_workers_resume_on_three_ranks_with_one_worker(corpus):
    """The elastic resume of test_torch, over a corpus and with tokens."""
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from deltacells.torch import CellDataset

    corpus, X, totals = corpus
    names = list(corpus.var_names)
    tokens, medians = dictionaries(names)
    tok = Geneformer(tokens, medians, max_len=8)
    want = geneformer_numpy(X, names, tokens, medians, 8, False, totals)
    taken, states = [], []
    for rank in range(2):
        ds = CellDataset(corpus, batch_size=30, seed=7, rank=rank, world_size=2, tokenizer=tok,
                         obs_columns=["dataset_id"])
        loader = iter(DataLoader(ds, batch_size=None, num_workers=2,
                                 multiprocessing_context="fork"))
        taken += [next(loader) for _ in range(3)]
        del loader
        states.append(ds.state_dict(consumed=3, num_workers=2))
    assert states[1] == {**states[0], "world": [1, 2]}
    rest, lengths = [], []
    for rank in range(3):
        ds = CellDataset(corpus, batch_size=30, rank=rank, world_size=3, tokenizer=tok,
                         obs_columns=["dataset_id"])
        ds.load_state_dict(states[0])
        got = list(DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context="fork"))
        lengths.append(len(got))
        rest += got
    assert len(set(lengths)) == 1, lengths
    codes = corpus.obs["dataset_id"].cat.codes.to_numpy()
    for b in taken + rest:
        cells = b["cells"].numpy()
        np.testing.assert_array_equal(b["input_ids"].numpy(), want[cells])
        np.testing.assert_array_equal(b["dataset_id"].numpy(), codes[cells])
    every = sorted(c for b in taken + rest for c in b["cells"].tolist())
    assert every == list(range(corpus.n_obs))
    # Loaded in the same shape, the state goes on exactly where each rank stopped.
    full = [b["cells"].tolist() for b in DataLoader(
        CellDataset(corpus, batch_size=30, seed=7, rank=1, world_size=2, tokenizer=tok),
        batch_size=None, num_workers=2, multiprocessing_context="fork")]
    ds = CellDataset(corpus, batch_size=30, rank=1, world_size=2, tokenizer=tok)
    ds.load_state_dict(states[1])
    rest = [b["cells"].tolist() for b in DataLoader(ds, batch_size=None, num_workers=2,
                                                     multiprocessing_context="fork")]
    assert rest == full[3:]

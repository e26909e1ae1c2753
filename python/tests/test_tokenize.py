"""Tokenized reads against per-cell numpy tokenizers (in conftest): Geneformer
with `np.argsort` (ties by token id), scGPT with
`np.digitize(x, np.quantile(x, np.linspace(0, 1, n_bins - 1)))`."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import CLS, EOS, PAD, geneformer_numpy, scgpt_numpy

import deltacells
from deltacells.tokenize import Geneformer, ScGPT

N_GENES = 600


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Cells of 0 to ~550 genes with small counts (ties), written; the matrix
    as the dataset reads it back, and dictionaries missing some genes."""
    rng = np.random.default_rng(7)
    rows = []
    for cell in range(150):
        n = 550 if cell % 11 == 2 else int(rng.integers(0, 120))
        genes = np.sort(rng.choice(N_GENES, size=n, replace=False))
        counts = rng.integers(1, 3 if cell % 4 == 0 else 40, size=n)
        rows.append(sp.csr_matrix((counts, (np.zeros(n, int), genes)), shape=(1, N_GENES)))
    X = sp.vstack(rows).tocsr()
    var = pd.DataFrame({"gene_ids": [f"ENSG{g:05d}" for g in range(N_GENES)]},
                       index=[f"g{g}" for g in range(N_GENES)])
    out = tmp_path_factory.mktemp("tok") / "ds"
    deltacells.write(X, out, var=var, tile_size=40)
    ds = deltacells.open(out)
    names = list(ds.var_names)
    stored = ds.read(slice(None), dtype=np.int32)
    perm = rng.permutation(N_GENES) + 3
    tokens = {n: int(perm[g]) for g, n in enumerate(names) if g % 9 != 4}
    tokens.update({"<pad>": PAD, "<cls>": CLS, "<eos>": EOS})
    medians = {n: float([0.5, 1.0, 1.0, 2.0][g % 4]) for g, n in enumerate(names) if g % 7 != 1}
    return ds, stored, names, tokens, medians, out


@pytest.mark.parametrize("max_len,special", [(2048, False), (64, True), (30, False), (3, True)])
def test_geneformer_matches_numpy(data, max_len, special):
    ds, X, names, tokens, medians, _ = data
    cells = np.r_[np.arange(150)[::-3], np.arange(40)]
    got = ds.read(cells, tokenizer=Geneformer(tokens, medians, max_len=max_len,
                                              special_tokens=special))
    assert set(got) == {"input_ids", "attention_mask"}
    want = geneformer_numpy(X[cells], names, tokens, medians, max_len, special)
    np.testing.assert_array_equal(got["input_ids"], want)
    assert got["input_ids"].dtype == np.int32 and got["attention_mask"].dtype == np.bool_
    lengths = [(len(r) - (r == PAD).sum()) for r in want]
    np.testing.assert_array_equal(got["attention_mask"].sum(axis=1), lengths)


@pytest.mark.parametrize("max_len,special", [(2048, True), (40, False)])
def test_geneformer_with_a_median_per_gene_matches_numpy(tmp_path, max_len, special):
    """A dictionary like Geneformer's own: a median per gene and tokens in
    another order than the genes. Counts mostly small with some past the
    table of places (32), so rows are ranked by places with strays merged
    in; some cells hold only large counts (ranked by their keys)."""
    rng = np.random.default_rng(11)
    rows = []
    for cell in range(120):
        n = 500 if cell % 9 == 4 else int(rng.integers(0, 150))
        genes = np.sort(rng.choice(N_GENES, size=n, replace=False))
        counts = np.minimum(rng.geometric(0.45, size=n), 30)
        large = rng.random(n) < (0.6 if cell % 13 == 6 else 0.03)
        counts[large] = rng.integers(33, 400, size=large.sum())
        rows.append(sp.csr_matrix((counts, (np.zeros(n, int), genes)), shape=(1, N_GENES)))
    X = sp.vstack(rows).tocsr()
    var = pd.DataFrame(index=[f"g{g}" for g in range(N_GENES)])
    deltacells.write(X, tmp_path / "ds", var=var, tile_size=50)
    ds = deltacells.open(tmp_path / "ds")
    names = list(ds.var_names)
    stored = ds.read(slice(None), dtype=np.int32)
    perm = rng.permutation(N_GENES) + 3
    tokens = {n: int(perm[g]) for g, n in enumerate(names) if g % 10 != 3}
    tokens.update({"<pad>": PAD, "<cls>": CLS, "<eos>": EOS})
    medians = {n: float(m) for n, m in zip(names, rng.uniform(0.05, 8.0, N_GENES))}
    cells = np.r_[np.arange(120)[::-2], np.arange(30)]
    got = ds.read(cells, tokenizer=Geneformer(tokens, medians, max_len=max_len,
                                              special_tokens=special))
    want = geneformer_numpy(stored[cells], names, tokens, medians, max_len, special)
    np.testing.assert_array_equal(got["input_ids"], want)


@pytest.mark.parametrize("n_bins,normalize,log1p", [(51, None, False), (2, None, False),
                                                    (11, 1e4, True), (51, None, True)])
def test_scgpt_bins_match_numpy_for_every_cell(data, n_bins, normalize, log1p):
    ds, X, names, tokens, _, _ = data
    tok = ScGPT(tokens, n_bins=n_bins, max_len=600, normalize=normalize, log1p=log1p)
    got = ds.read(slice(None), tokenizer=tok)
    ids, values = scgpt_numpy(X, names, tokens, n_bins, 600, normalize, log1p)
    np.testing.assert_array_equal(got["input_ids"], ids)
    np.testing.assert_array_equal(got["values"], values)
    np.testing.assert_array_equal(got["attention_mask"], ids != PAD)


def test_scgpt_samples_long_cells_from_their_binned_genes(data):
    ds, X, names, tokens, _, _ = data
    tok = ScGPT(tokens, max_len=100)
    got = ds.read(range(150), tokenizer=tok)
    full_ids, full_values = scgpt_numpy(X, names, tokens, 51, 600)
    again = ds.read([13, 2], tokenizer=tok)
    sampled = 0
    for i in range(150):
        whole = {(t, v) for t, v in zip(full_ids[i, 1:], full_values[i, 1:]) if t != PAD}
        row = {(t, v) for t, v in zip(got["input_ids"][i, 1:], got["values"][i, 1:]) if t != PAD}
        if len(whole) > 99:
            sampled += 1
            assert len(row) == 99 and row <= whole
        else:
            assert row == whole
    assert sampled >= 3
    np.testing.assert_array_equal(again["input_ids"], got["input_ids"][[13, 2]])
    other = ds.read([13], tokenizer=ScGPT(tokens, max_len=100, epoch=1))
    assert not np.array_equal(other["input_ids"][0], got["input_ids"][13])


def test_dictionaries_load_from_files_and_a_var_column(data, tmp_path):
    ds, X, names, tokens, medians, _ = data
    by_id = dict(zip(ds.var_names, ds.var["gene_ids"]))
    t = tmp_path / "tokens.tsv"
    t.write_text("gene\ttoken\n" + "".join(f"{by_id.get(k, k)}\t{v}\n" for k, v in tokens.items()))
    m = tmp_path / "medians.csv"
    m.write_text("".join(f"{by_id[k]},{v}\n" for k, v in medians.items()))
    got = ds.read(range(20), tokenizer=Geneformer(t, str(m), gene_key="gene_ids"))
    want = ds.read(range(20), tokenizer=Geneformer(tokens, medians))
    np.testing.assert_array_equal(got["input_ids"], want["input_ids"])


def test_bad_input_is_refused_before_any_read(data, tmp_path):
    ds, _, _, tokens, medians, _ = data
    bad = tmp_path / "bad.tsv"
    bad.write_text("g1\t1\ng2\tnot-a-number\n")
    errors = (deltacells.InputError, ValueError)
    with pytest.raises(errors, match="line 2"):
        Geneformer(bad, medians)
    with pytest.raises(errors, match="positive"):
        Geneformer(tokens, {**medians, "g0": 0.0})
    with pytest.raises(errors, match="positive"):
        Geneformer(tokens, {**medians, "g0": -1.0})
    with pytest.raises(errors, match="at least 3"):
        Geneformer(tokens, medians, max_len=2, special_tokens=True)
    with pytest.raises(errors, match="at least 1"):
        Geneformer(tokens, medians, max_len=0)
    with pytest.raises(errors, match="n_bins"):
        ScGPT(tokens, n_bins=1)
    with pytest.raises(errors, match="n_bins"):
        ScGPT(tokens, n_bins=2**40)
    # Rows past any memory are an error, not an abort of the process.
    huge = Geneformer(tokens, medians, max_len=2**62)
    for cells in [[0], [0, 1]]:
        with pytest.raises(errors, match="memory"):
            ds.read(cells, tokenizer=huge)
    with pytest.raises(errors, match="at least 2"):
        ScGPT(tokens, max_len=1)
    with pytest.raises(errors, match="<cls>"):
        ScGPT({"<pad>": 0, "g1": 3})
    with pytest.raises(errors, match="genes"):
        ds.read([0], genes=[1, 2], tokenizer=ScGPT(tokens))
    # Mappings of the wrong kinds name the gene, as InputError (not the
    # binding's TypeError); a gene may not take a special token's id.
    for t, m, match in [({**tokens, "g1": 3.5}, medians, "tokens of gene 'g1'"),
                        (tokens, {**medians, "g1": "2.0"}, "medians of gene 'g1'"),
                        ({**tokens, 7: 9}, medians, "gene keys are strings"),
                        ({**tokens, "g1": tokens["<pad>"]}, medians, '"g1" has the token of <pad>')]:
        with pytest.raises(deltacells.InputError, match=match):
            Geneformer(t, m)
    with pytest.raises(deltacells.InputError, match="has the token of <cls>"):
        ScGPT({**tokens, "g2": tokens["<cls>"]})
    with pytest.raises(deltacells.InputError, match="has the token of <eos>"):
        Geneformer({**tokens, "g2": tokens["<eos>"]}, medians, special_tokens=True)
    for name, value in [("seed", -1), ("epoch", 2**64), ("max_len", -5)]:
        with pytest.raises(deltacells.InputError, match=name):
            ScGPT(tokens, **{name: value})


def test_dictionary_files_with_a_byte_order_mark_or_leading_blank_lines(tmp_path):
    """A dictionary saved by a spreadsheet program (a UTF-8 byte order mark,
    no header) or with blank lines first reads as the same mapping: the
    mark had become part of the first key, dropping that gene's token."""
    X = sp.csr_matrix(np.array([[5, 1, 2], [0, 3, 3]]))
    path = tmp_path / "ds"
    deltacells.write(X, path, var=pd.DataFrame(index=["A", "B", "C"]), sort_genes=False)
    ds = deltacells.open(path)
    tokens = {"A": 3, "B": 4, "C": 5, "<pad>": 0}
    medians = {"A": 1.0, "B": 2.0, "C": 1.0}
    want = ds.read([0, 1], tokenizer=Geneformer(tokens, medians, max_len=4))
    body = "".join(f"{k}\t{v}\n" for k, v in tokens.items())
    for name, text, encoding in [("bom.tsv", body, "utf-8-sig"),
                                 ("blank.tsv", "\n\ngene\ttoken\n" + body, "utf-8")]:
        (tmp_path / name).write_text(text, encoding=encoding)
        got = ds.read([0, 1], tokenizer=Geneformer(tmp_path / name, medians, max_len=4))
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=name)


def test_a_key_two_tokenized_genes_share_is_refused(tmp_path):
    """Two genes of one Ensembl id (a reference that names a gene twice)
    took its token both, and a cell of both carried it twice; matched by
    their unique var names they tokenize."""
    X = sp.csr_matrix(np.array([[5, 1, 2], [0, 3, 3]]))
    var = pd.DataFrame({"gene_ids": ["ENSG1", "ENSG2", "ENSG1"]}, index=["A", "B", "A-1"])
    path = tmp_path / "ds"
    deltacells.write(X, path, var=var, sort_genes=False)
    ds = deltacells.open(path)
    tokens = {"ENSG1": 3, "ENSG2": 4, "<pad>": 0}
    for tok in [Geneformer(tokens, {"ENSG1": 1.0, "ENSG2": 2.0}, gene_key="gene_ids"),
                ScGPT({**tokens, "<cls>": 1}, gene_key="gene_ids")]:
        with pytest.raises(deltacells.InputError,
                           match=r'"ENSG1" appears twice \(positions 0 and 2\)'):
            ds.read([0, 1], tokenizer=tok)
    by_name = {"A": 3, "B": 4, "A-1": 5, "<pad>": 0}
    got = ds.read([0, 1], tokenizer=Geneformer(by_name, {"A": 1.0, "B": 2.0, "A-1": 1.0}, max_len=3))
    np.testing.assert_array_equal(got["input_ids"], [[3, 5, 4], [5, 4, 0]])

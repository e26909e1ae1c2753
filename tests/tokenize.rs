//! The tokenizers against straightforward implementations written here:
//! Geneformer sorted with float comparisons, scGPT binned with a numpy-style
//! quantile and digitize, on data with ties, cells longer and shorter than
//! the rows, and genes outside the dictionaries.

use std::collections::BTreeSet;

use deltacells::dataset::{BatchConfig, BatchRows, Recycler, Shuffle};
use deltacells::engine::Transform;
use deltacells::tokenize::{GeneMap, Geneformer, ScGpt, TokenBatch, Tokenizer};
use deltacells::{Csr, Dataset, DatasetWriter, GeneSelection, WriterConfig};

const GENES: u32 = 3000;
const PAD: i32 = 0;
const CLS: i32 = 1;
const EOS: i32 = 2;

/// A reproducible matrix (a plain LCG): cells of 0 to ~400 genes, and every
/// 17th of ~2,600, with small counts so that values tie often.
fn matrix(n: usize) -> Csr<i32> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (state >> 33) % bound
    };
    let mut m = Csr::empty(u64::from(GENES));
    for cell in 0..n {
        let len = if cell % 17 == 3 { 4000 } else { next(400) };
        let genes: BTreeSet<i32> = (0..len).map(|_| next(u64::from(GENES)) as i32).collect();
        for g in genes {
            m.indices.push(g);
            // Mostly small counts (the bins' table), some cells with
            // counts past it and past the row kernels' memo.
            let bound = match cell % 5 {
                0 => 3,
                1 => 1000,
                _ => 60,
            };
            m.values.push(1 + next(bound) as i32);
        }
        m.indptr.push(m.indices.len() as i64);
    }
    m
}

fn name(g: usize) -> String {
    format!("G{g}")
}

/// Tokens: a permutation of the columns (so token order is not column
/// order), with every 10th gene left out, and the special tokens.
fn tokens() -> GeneMap<i32> {
    tokens_by(all_but(10, 7), |g| (g * 1907) % GENES as usize)
}

/// Tokens increasing with the columns, every 10th gene left out.
fn tokens_in_column_order() -> GeneMap<i32> {
    tokens_by(all_but(10, 7), |g| g)
}

/// The genes but every `n`th from `at`: those a dictionary leaves out.
fn all_but(n: usize, at: usize) -> impl Iterator<Item = usize> {
    (0..GENES as usize).filter(move |g| g % n != at)
}

/// A token for each of `genes`, and the special tokens.
fn tokens_by(genes: impl Iterator<Item = usize>, token: impl Fn(usize) -> usize) -> GeneMap<i32> {
    let genes = genes.map(|g| (name(g), 3 + token(g) as i32));
    GeneMap::new(genes.chain(special_tokens())).unwrap()
}

/// `<pad>`, `<cls>` and `<eos>` with their tokens.
fn special_tokens() -> impl Iterator<Item = (String, i32)> {
    ["<pad>", "<cls>", "<eos>"]
        .into_iter()
        .zip([PAD, CLS, EOS])
        .map(|(k, t)| (k.to_string(), t))
}

/// Tokens in column order and tie-heavy medians for every gene: rows that
/// skip none.
fn every_gene() -> (GeneMap<i32>, GeneMap<f64>) {
    let all = || 0..GENES as usize;
    (tokens_by(all(), |g| g), medians_by(all(), tie_median))
}

/// Medians from a few values (ties), every 13th gene left out.
fn medians() -> GeneMap<f64> {
    medians_by(all_but(13, 5), tie_median)
}

/// Gene `g`'s median among a few values, so that many genes tie.
fn tie_median(g: usize) -> f64 {
    const VALUES: [f64; 5] = [0.5, 1.0, 1.0, 2.0, 0.1];
    VALUES[g % VALUES.len()]
}

/// Medians on a sketch's grid (values 2% apart, as `gene_stats` gives
/// them) and tokens in column order: rows ranked by classes of genes.
fn sketch_grid() -> (GeneMap<i32>, GeneMap<f64>) {
    let median = |g: usize| 0.37 * 1.0202f64.powi((g % 90) as i32);
    (tokens_in_column_order(), medians_by(all_but(13, 5), median))
}

/// A different median for every gene, as Geneformer's own are.
fn distinct_medians() -> GeneMap<f64> {
    medians_by(all_but(13, 5), |g| 0.05 + g as f64 / 997.0)
}

/// A median for each of `genes`.
fn medians_by(genes: impl Iterator<Item = usize>, median: impl Fn(usize) -> f64) -> GeneMap<f64> {
    GeneMap::new(genes.map(|g| (name(g), median(g)))).unwrap()
}

fn dataset(dir: &std::path::Path, m: &Csr<i32>) -> Dataset {
    dataset_named(dir, m, (0..GENES as usize).map(name).collect())
}

fn dataset_named(dir: &std::path::Path, m: &Csr<i32>, names: Vec<String>) -> Dataset {
    let _ = std::fs::remove_dir_all(dir);
    let config = WriterConfig::default()
        .with_tile_size(40)
        .with_n_chunks(3)
        .with_var_names(Some(names));
    let mut w = DatasetWriter::create(dir, GENES, config).unwrap();
    w.push(m.as_ref()).unwrap();
    w.finish().unwrap();
    deltacells::open(dir).unwrap()
}

struct Dir(std::path::PathBuf);
impl Dir {
    fn new(name: &str) -> Dir {
        Dir(std::env::temp_dir().join(format!("deltacells-tokenize-{}-{name}", std::process::id())))
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn row(m: &Csr<i32>, cell: usize) -> (&[i32], &[i32]) {
    let (a, b) = (m.indptr[cell] as usize, m.indptr[cell + 1] as usize);
    (&m.indices[a..b], &m.values[a..b])
}

/// Geneformer's row of one cell, the plain way.
fn geneformer_row(
    (tok, med): &(GeneMap<i32>, GeneMap<f64>),
    m: &Csr<i32>,
    cell: usize,
    max_len: usize,
    special: bool,
) -> (Vec<i32>, Vec<u8>) {
    let (genes, counts) = row(m, cell);
    let total: f64 = counts.iter().map(|&c| f64::from(c)).sum();
    let mut genes: Vec<(f64, i32)> = genes
        .iter()
        .zip(counts)
        .filter_map(|(&g, &c)| {
            let (t, md) = (tok.get(&name(g as usize))?, med.get(&name(g as usize))?);
            Some((((f64::from(c) / total) * 10_000.0) / md, t))
        })
        .collect();
    genes.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
    let mut ids: Vec<i32> = Vec::new();
    let body = if special { max_len - 2 } else { max_len };
    if special {
        ids.push(CLS);
    }
    ids.extend(genes.iter().take(body).map(|g| g.1));
    if special {
        ids.push(EOS);
    }
    let mut mask = vec![1u8; ids.len()];
    ids.resize(max_len, PAD);
    mask.resize(max_len, 0);
    (ids, mask)
}

/// `np.quantile(x, np.linspace(0, 1, points))`, written out as numpy runs it.
fn np_quantile(x: &[f64], points: usize) -> Vec<f64> {
    let mut s = x.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let q: Vec<f64> = if points == 1 {
        vec![0.0]
    } else {
        let step = 1.0 / (points - 1) as f64;
        let mut q: Vec<f64> = (0..points).map(|j| j as f64 * step).collect();
        q[points - 1] = 1.0;
        q
    };
    let n = s.len();
    q.iter()
        .map(|&q| {
            let vi = (n - 1) as f64 * q;
            let (prev, next) = if vi >= (n - 1) as f64 {
                (n - 1, n - 1)
            } else {
                (vi.floor() as usize, vi.floor() as usize + 1)
            };
            let gamma = if vi >= (n - 1) as f64 {
                vi + 1.0
            } else {
                vi - vi.floor()
            };
            let (a, b) = (s[prev], s[next]);
            let d = b - a;
            let lerp = a + d * gamma;
            if gamma >= 0.5 {
                b - d * (1.0 - gamma)
            } else {
                lerp
            }
        })
        .collect()
}

/// scGPT's genes and bins of one cell (before any sampling), the plain way.
fn scgpt_genes(
    m: &Csr<i32>,
    cell: usize,
    n_bins: usize,
    norm: Option<f64>,
    log1p: bool,
) -> Vec<(i32, f32)> {
    scgpt_genes_over(&tokens(), m, cell, (n_bins, norm, log1p))
}

/// [`scgpt_genes`] over the dictionary `tok`.
fn scgpt_genes_over(
    tok: &GeneMap<i32>,
    m: &Csr<i32>,
    cell: usize,
    (n_bins, norm, log1p): (usize, Option<f64>, bool),
) -> Vec<(i32, f32)> {
    let (genes, counts) = row(m, cell);
    let total: f64 = counts.iter().map(|&c| f64::from(c)).sum();
    let (ids, x): (Vec<i32>, Vec<f64>) = genes
        .iter()
        .zip(counts)
        .filter_map(|(&g, &c)| {
            let mut x = f64::from(c);
            if let Some(t) = norm {
                x = x / total * t;
            }
            if log1p {
                x = x.ln_1p();
            }
            Some((tok.get(&name(g as usize))?, x))
        })
        .unzip();
    if x.is_empty() {
        return Vec::new();
    }
    let edges = np_quantile(&x, n_bins - 1);
    ids.into_iter()
        .zip(&x)
        .map(|(t, &x)| (t, edges.iter().filter(|&&e| e <= x).count() as f32))
        .collect()
}

fn geneformer(max_len: usize, special: bool) -> Tokenizer {
    geneformer_over(&(tokens(), medians()), max_len, special)
}

fn geneformer_over(
    (tokens, medians): &(GeneMap<i32>, GeneMap<f64>),
    max_len: usize,
    special: bool,
) -> Tokenizer {
    let g = Geneformer::new(tokens.clone(), medians.clone()).unwrap();
    Tokenizer::Geneformer(g.with_max_len(max_len, special).unwrap())
}

fn scgpt(n_bins: usize, max_len: usize, norm: Option<f64>, log1p: bool) -> Tokenizer {
    let s = ScGpt::new(tokens()).unwrap().with_n_bins(n_bins).unwrap();
    let s = s
        .with_max_len(max_len)
        .unwrap()
        .with_transform(norm, log1p)
        .unwrap();
    Tokenizer::ScGpt(s)
}

fn row_of(b: &TokenBatch, r: usize) -> std::ops::Range<usize> {
    r * b.rows.max_len..(r + 1) * b.rows.max_len
}

/// The genes (tokens) and bins of scGPT row `r`, between `<cls>` and the
/// padding.
fn scgpt_row(b: &TokenBatch, r: usize) -> Vec<(i32, f32)> {
    let span = row_of(b, r);
    let values = b.rows.values.as_ref().expect("scGPT rows have values");
    b.rows.input_ids[span.clone()][1..]
        .iter()
        .copied()
        .zip(values[span][1..].iter().copied())
        .take_while(|&(t, _)| t != PAD)
        .collect()
}

/// Over tie-heavy medians with tokens in and out of column order, medians
/// on a sketch's grid, and distinct medians: each ranks its rows with
/// different passes. All but the last leave genes out (rows skip some).
#[test]
fn geneformer_matches_a_float_sort_with_ties_by_token() {
    let dir = Dir::new("geneformer");
    let m = matrix(120);
    let ds = dataset(&dir.0, &m);
    let order: Vec<u64> = (0..120u64).rev().step_by(3).chain(0..40).collect();
    let dictionaries = [
        (tokens(), medians()),
        (tokens_in_column_order(), medians()),
        (tokens(), distinct_medians()),
        sketch_grid(),
        every_gene(),
    ];
    for dictionary in &dictionaries {
        for (max_len, special) in [
            (2048, false),
            (2048, true),
            (50, false),
            (3, true),
            (1, false),
        ] {
            let tok = geneformer_over(dictionary, max_len, special);
            let b = ds.read(order.clone()).tokenize(&tok).unwrap();
            assert_eq!(b.cells, order);
            assert!(b.rows.values.is_none());
            assert_eq!(b.rows.input_ids.len(), order.len() * max_len);
            for (r, &cell) in order.iter().enumerate() {
                let (ids, mask) = geneformer_row(dictionary, &m, cell as usize, max_len, special);
                assert_eq!(
                    b.rows.input_ids[row_of(&b, r)],
                    ids,
                    "cell {cell}, max_len {max_len}"
                );
                assert_eq!(b.rows.attention_mask[row_of(&b, r)], mask, "cell {cell}");
            }
        }
    }
}

#[test]
fn scgpt_bins_match_numpy_for_every_cell() {
    let dir = Dir::new("scgpt");
    let m = matrix(120);
    let ds = dataset(&dir.0, &m);
    for (n_bins, norm, log1p) in [
        (51, None, false),
        (2, None, false),
        (7, Some(1e4), true),
        (51, Some(3.0), false),
    ] {
        let tok = scgpt(n_bins, 5000, norm, log1p);
        let b = ds.read(0..120).tokenize(&tok).unwrap();
        let values = b.rows.values.as_ref().unwrap();
        for cell in 0..120 {
            let want = scgpt_genes(&m, cell, n_bins, norm, log1p);
            let span = row_of(&b, cell);
            let (ids, vals, mask) = (
                &b.rows.input_ids[span.clone()],
                &values[span.clone()],
                &b.rows.attention_mask[span],
            );
            assert_eq!((ids[0], vals[0], mask[0]), (CLS, 0.0, 1));
            let n = want.len();
            let got: Vec<(i32, f32)> = ids[1..=n]
                .iter()
                .copied()
                .zip(vals[1..=n].iter().copied())
                .collect();
            assert_eq!(got, want, "cell {cell}, {n_bins} bins");
            assert!(ids[n + 1..].iter().all(|&t| t == PAD));
            assert!(vals[n + 1..].iter().all(|&v| v == -2.0));
            assert!(mask[..=n].iter().all(|&x| x == 1) && mask[n + 1..].iter().all(|&x| x == 0));
        }
    }
}

#[test]
fn scgpt_samples_long_cells_deterministically_with_bins_over_all_genes() {
    let dir = Dir::new("sample");
    let m = matrix(60);
    let ds = dataset(&dir.0, &m);
    let max_len = 100;
    let tok = scgpt(51, max_len, None, false);
    let b = ds.read(0..60).tokenize(&tok).unwrap();
    let again = ds.read([20u64, 3, 37]).tokenize(&tok).unwrap();
    let values = b.rows.values.as_ref().unwrap();
    let mut sampled = 0;
    for cell in 0..60 {
        let all = scgpt_genes(&m, cell, 51, None, false);
        let got = scgpt_row(&b, cell);
        if all.len() > max_len - 1 {
            sampled += 1;
            assert_eq!(got.len(), max_len - 1);
            // A subsequence of the cell's genes, in column order, with the bins over all of them.
            let mut rest = all.iter();
            assert!(got.iter().all(|g| rest.any(|a| a == g)), "cell {cell}");
        } else {
            assert_eq!(got, all, "cell {cell}");
        }
    }
    assert!(sampled >= 3, "the data has long cells");
    // The same cell gives the same row in any read; another epoch draws anew.
    let av = again.rows.values.as_ref().unwrap();
    for (r, cell) in [20usize, 3, 37].into_iter().enumerate() {
        assert_eq!(
            again.rows.input_ids[row_of(&again, r)],
            b.rows.input_ids[row_of(&b, cell)]
        );
        assert_eq!(av[row_of(&again, r)], values[row_of(&b, cell)]);
    }
    let Tokenizer::ScGpt(s) = scgpt(51, max_len, None, false) else {
        unreachable!()
    };
    let other = ds
        .read([3u64])
        .tokenize(&Tokenizer::ScGpt(s.with_seed(0, 1)))
        .unwrap();
    assert_ne!(other.rows.input_ids, b.rows.input_ids[row_of(&b, 3)]);
}

/// The positions of `0..n` a row of `k` genes keeps (`n > k`), drawn as the
/// scGPT module docs say: Floyd's algorithm over `m = min(k, n - k)`
/// positions with SplitMix64 seeded from `(seed, epoch, cell)`, the
/// positions drawn kept when `m = k`, else dropped.
fn floyd_kept(n: usize, k: usize, (seed, epoch, cell): (u64, u64, u64)) -> Vec<usize> {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let splitmix = |z: u64| mix(z.wrapping_add(GOLDEN));
    let mut state = splitmix(splitmix(splitmix(seed) ^ epoch) ^ cell);
    let m = k.min(n - k);
    let mut drawn = vec![false; n];
    for j in n - m..n {
        state = state.wrapping_add(GOLDEN);
        let r = mix(state.wrapping_add(GOLDEN));
        let t = ((u128::from(r) * (j as u128 + 1)) >> 64) as usize;
        let p = if drawn[t] { j } else { t };
        drawn[p] = true;
    }
    (0..n).filter(|&p| drawn[p] == (m == k)).collect()
}

#[test]
fn scgpt_keeps_the_documented_draw_whether_or_not_every_gene_has_a_token() {
    let dir = Dir::new("draw");
    let m = matrix(60);
    let ds = dataset(&dir.0, &m);
    // A dictionary of every gene takes the path that draws a long cell's
    // genes before looking up their tokens; the usual one leaves genes
    // out. Rows of 100 keep most of a cell of ~400 tokenized genes (the
    // dropped drawn) and few of one of ~2,600 (the kept drawn).
    let every = tokens_by(0..GENES as usize, |g| (g * 1907) % GENES as usize);
    for (dictionary, max_len, (seed, epoch)) in [
        (tokens(), 100, (0, 0)),
        (every.clone(), 100, (0, 0)),
        (every.clone(), 300, (5, 3)),
        (every, 2, (1, 1)),
    ] {
        let s = ScGpt::new(dictionary.clone())
            .unwrap()
            .with_max_len(max_len)
            .unwrap()
            .with_seed(seed, epoch);
        let b = ds.read(0..60).tokenize(&Tokenizer::ScGpt(s)).unwrap();
        let (mut most, mut few) = (0, 0);
        for cell in 0..60 {
            let all = scgpt_genes_over(&dictionary, &m, cell, (51, None, false));
            let k = max_len - 1;
            let want: Vec<(i32, f32)> = if all.len() > k {
                if 2 * k >= all.len() {
                    most += 1;
                } else {
                    few += 1;
                }
                let kept = floyd_kept(all.len(), k, (seed, epoch, cell as u64));
                kept.into_iter().map(|p| all[p]).collect()
            } else {
                all
            };
            let got = scgpt_row(&b, cell);
            assert_eq!(got, want, "cell {cell}, rows of {max_len}");
        }
        assert!(few >= 3, "rows of {max_len}: cells drawing the genes kept");
        if max_len == 100 {
            assert!(
                most >= 3,
                "rows of {max_len}: cells drawing the genes dropped"
            );
        }
    }
}

#[test]
fn bad_settings_are_refused_before_any_read() {
    let bad_median = GeneMap::new([("G1", 0.0)]).unwrap();
    assert!(Geneformer::new(tokens(), bad_median).is_err());
    let negative = GeneMap::new([("G1", -1.0)]).unwrap();
    assert!(Geneformer::new(tokens(), negative).is_err());
    let g = || Geneformer::new(tokens(), medians()).unwrap();
    assert!(g().with_max_len(0, false).is_err());
    assert!(g().with_max_len(2, true).is_err());
    assert!(g().with_max_len(1, false).is_ok());
    let no_pad = GeneMap::new([("G1", 4)]).unwrap();
    assert!(Geneformer::new(no_pad.clone(), medians()).is_err());
    assert!(ScGpt::new(no_pad).is_err());
    let s = || ScGpt::new(tokens()).unwrap();
    assert!(s().with_n_bins(1).is_err());
    assert!(s().with_max_len(1).is_err());
    assert!(s().with_transform(Some(0.0), false).is_err());

    let dir = Dir::new("bad");
    let _ = std::fs::create_dir_all(&dir.0);
    let file = dir.0.join("tokens.tsv");
    std::fs::write(&file, "gene\ttoken\nG1\t4\nG2\tfour\n").unwrap();
    let err = GeneMap::<i32>::from_file(&file).unwrap_err().to_string();
    assert!(err.contains("line 3"), "{err}");
    std::fs::write(&file, "gene\ttoken\nG1\t4\n<pad>\t0\n").unwrap();
    assert_eq!(GeneMap::<i32>::from_file(&file).unwrap().get("G1"), Some(4));
}

#[test]
fn a_gene_selection_or_an_unknown_gene_key_is_refused() {
    let dir = Dir::new("refused");
    let m = matrix(10);
    let ds = dataset(&dir.0, &m);
    let sel = GeneSelection::new(GENES, &[1, 2]).unwrap();
    assert!(ds
        .read(0..2)
        .genes(&sel)
        .tokenize(&geneformer(10, false))
        .is_err());
    let g = Geneformer::new(tokens(), medians())
        .unwrap()
        .with_gene_key(Some("gene_ids".into()));
    assert!(ds.read(0..2).tokenize(&Tokenizer::Geneformer(g)).is_err());
    // A transform on the read: the tokenizer's own is the one it takes (the
    // message had spoken of a custom output).
    for read in [ds.read(0..2).normalize(1e4), ds.read(0..2).log1p()] {
        let err = read.tokenize(&geneformer(10, false)).unwrap_err();
        assert!(
            err.to_string().contains("without normalize or log1p"),
            "{err}"
        );
    }
}

#[test]
fn a_dictionary_covering_none_of_the_genes_is_refused() {
    // Keyed by ids where the dataset names genes by symbols: every row was
    // padding, without an error.
    let dir = Dir::new("no-gene");
    let ds = dataset(&dir.0, &matrix(10));
    let ids = |g: usize| format!("ENSG{g:011}");
    let tokens = GeneMap::new(
        (0..GENES as usize)
            .map(|g| (ids(g), 3 + g as i32))
            .chain(special_tokens()),
    )
    .unwrap();
    let medians = GeneMap::new((0..GENES as usize).map(|g| (ids(g), 1.0))).unwrap();
    // Tokens for the genes, medians for none: no gene has both.
    let half = Geneformer::new(tokens_in_column_order(), medians.clone()).unwrap();
    for tokenizer in [
        Tokenizer::Geneformer(Geneformer::new(tokens.clone(), medians).unwrap()),
        Tokenizer::Geneformer(half),
        Tokenizer::ScGpt(ScGpt::new(tokens).unwrap()),
    ] {
        let err = ds.read(0..2).tokenize(&tokenizer).unwrap_err().to_string();
        assert!(
            err.contains(&format!("for none of the {GENES} genes")),
            "{err}"
        );
    }
}

#[test]
fn a_key_two_tokenized_columns_share_is_refused() {
    // Column 20 named as column 10, which has a token and a median: both
    // took its token, and a row of both genes carried it twice.
    let dir = Dir::new("repeated-key");
    let m = matrix(10);
    let mut names: Vec<String> = (0..GENES as usize).map(name).collect();
    names[20] = name(10);
    let ds = dataset_named(&dir.0, &m, names.clone());
    for tokenizer in [geneformer(64, true), scgpt(51, 64, None, false)] {
        let err = ds.read(0..2).tokenize(&tokenizer).unwrap_err().to_string();
        assert!(
            err.contains("gene key \"G10\" appears twice (positions 10 and 20)")
                && err.contains("var_names_make_unique"),
            "{err}"
        );
    }
    // A key repeated among columns without a token takes no token twice:
    // column 27 named as column 17, which the dictionaries leave out.
    names[20] = name(20);
    names[27] = name(17);
    let ds = dataset_named(&dir.0, &m, names);
    for tokenizer in [geneformer(64, true), scgpt(51, 64, None, false)] {
        ds.read(0..2).tokenize(&tokenizer).unwrap();
    }
}

#[test]
fn model_ready_batches_hold_what_reads_of_their_cells_give() {
    let dir = Dir::new("model-batches");
    let m = matrix(300);
    let ds = dataset(&dir.0, &m);
    let geneformer = Tokenizer::Geneformer(
        Geneformer::new(tokens(), medians())
            .unwrap()
            .with_max_len(64, true)
            .unwrap(),
    );
    let scgpt = ScGpt::new(tokens()).unwrap().with_max_len(50).unwrap();
    let selection = GeneSelection::new(GENES, &[5, 2999, 17, 400]).unwrap();
    let norm = Transform::NONE.normalize(1e4).log1p();
    // Every strategy: windows built at once (block shuffle, a large bound:
    // CSR of every gene, dense rows and tokens scattered from their chunks),
    // the cache (random order), and the same in stored order.
    for (shuffle, cache) in [
        (Shuffle::Block { window_tiles: 2 }, 64 << 20),
        (Shuffle::Random, 1 << 20),
        (Shuffle::None, 64 << 20),
    ] {
        let base = BatchConfig::default()
            .with_batch_size(48)
            .with_shuffle(shuffle)
            .with_seed(3)
            .with_epoch(2)
            .with_cache_bytes(cache);
        for batch in ds.batches(base.clone().with_transform(norm)).unwrap() {
            let batch = batch.unwrap();
            let want = ds
                .read(&batch.cells)
                .normalize(1e4)
                .log1p()
                .csr()
                .unwrap()
                .csr;
            assert_eq!(batch.rows, BatchRows::Csr(want), "{shuffle} normalized CSR");
        }
        // CSR rows over the selection, out of gene order: each row's kept
        // genes put in column order, as the read puts them.
        let selected = base
            .clone()
            .with_transform(norm)
            .with_genes(Some(selection.clone()));
        for batch in ds.batches(selected).unwrap() {
            let batch = batch.unwrap();
            let read = ds.read(&batch.cells).genes(&selection).normalize(1e4);
            let want = read.log1p().csr().unwrap().csr;
            assert_eq!(batch.rows, BatchRows::Csr(want), "{shuffle} selected CSR");
        }
        let dense = base
            .clone()
            .with_transform(Transform::NONE.normalize(1e4))
            .with_genes(Some(selection.clone()))
            .with_dense(true);
        // Each batch handed back once compared, so later ones are built in
        // its buffers (dense and token rows alike): one recycler for all of
        // them, so token rows are also built over what dense rows and the
        // other tokenizer left there, and a short last batch in buffers
        // longer than it.
        let recycler = Recycler::new(4);
        let mut batches = ds
            .batches(dense.with_recycler(Some(recycler.clone())))
            .unwrap();
        while let Some(batch) = batches.next() {
            let batch = batch.unwrap();
            let read = ds.read(&batch.cells).genes(&selection).normalize(1e4);
            assert_eq!(
                batch.rows,
                BatchRows::Dense(read.dense().unwrap().rows),
                "{shuffle} dense"
            );
            batches.recycle(batch);
        }
        let with_scgpt = Tokenizer::ScGpt(scgpt.clone().with_seed(3, 2));
        for (tokenizer, read_with) in [
            (&geneformer, &geneformer),
            (&Tokenizer::ScGpt(scgpt.clone()), &with_scgpt),
        ] {
            let config = base
                .clone()
                .with_tokenizer(Some(tokenizer.clone()))
                .with_recycler(Some(recycler.clone()));
            let mut seen = 0;
            let mut batches = ds.batches(config).unwrap();
            while let Some(batch) = batches.next() {
                let batch = batch.unwrap();
                let want = ds.read(&batch.cells).tokenize(read_with).unwrap().rows;
                assert_eq!(batch.rows, BatchRows::Tokens(want), "{shuffle} tokens");
                seen += batch.cells.len();
                batches.recycle(batch);
            }
            assert_eq!(seen, 300);
        }
    }
    // scGPT samples by epoch: an epoch made ahead samples by its own, as a
    // fresh iterator of that epoch does.
    let config = |epoch| {
        BatchConfig::default()
            .with_batch_size(48)
            .with_seed(3)
            .with_epoch(epoch)
            .with_shuffle(Shuffle::Block { window_tiles: 2 })
            .with_tokenizer(Some(Tokenizer::ScGpt(scgpt.clone())))
            .with_next_epoch_ahead(true)
    };
    let rows = |batches: deltacells::dataset::BatchIter| -> Vec<BatchRows<f32>> {
        batches.map(|b| b.unwrap().rows).collect()
    };
    let first = ds.batches(config(4)).unwrap();
    let recycler = first.recycler();
    drop(rows(first));
    assert!(recycler.holds_next_epoch());
    // Without prefetch nothing is made before the first `next`, so the
    // iterator cannot have left the epoch after it yet.
    let ahead = ds
        .batches(
            config(5)
                .with_prefetch(0)
                .with_recycler(Some(recycler.clone())),
        )
        .unwrap();
    assert!(!recycler.holds_next_epoch(), "taken");
    assert_eq!(rows(ahead), rows(ds.batches(config(5)).unwrap()));
    // Settings that cannot go together are refused before any batch.
    let refused = |config: BatchConfig| ds.batches(config).expect_err("refused").to_string();
    let tokens = BatchConfig::default().with_tokenizer(Some(geneformer.clone()));
    assert!(refused(tokens.clone().with_genes(Some(selection.clone()))).contains("every gene"));
    assert!(refused(tokens.with_transform(norm)).contains("every gene"));
    let ints = BatchConfig::default().with_transform(norm);
    assert!(ds
        .batches_of::<i32>(ints)
        .err()
        .unwrap()
        .to_string()
        .contains("f32"));
    let bad = BatchConfig::default().with_transform(Transform::NONE.normalize(-1.0));
    assert!(refused(bad).contains("target_sum"));
}

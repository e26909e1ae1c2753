//! scGPT's binned values: a cell's genes with their value's bin among the
//! cell's own quantiles.
//!
//! For the cell's nonzero genes that have a token (in column order), the
//! value `x_g` is the count as `f64`, or with normalization
//! `(count_g / n_counts) * target_sum` (`n_counts` the cell's total over all
//! its genes), then with `log1p` `ln_1p(x_g)`, each step one `f64`
//! operation. The bins are exactly
//! `np.digitize(x, np.quantile(x, np.linspace(0, 1, n_bins - 1)))`:
//!
//! * `q_j = j * (1 / (n_bins - 2))` for `j < n_bins - 2`, the last `1.0`
//!   (`q_0 = 0` when `n_bins` is 2), as `np.linspace` computes them;
//! * with `x` sorted (`s`, `n` values), `i = (n - 1) * q_j`; for
//!   `i >= n - 1` the edge is `s[n - 1]`, else with `k = floor(i)`,
//!   `t = i - k`, `a = s[k]`, `b = s[k + 1]`, `d = b - a`, the edge is
//!   `a + d * t`, or `b - d * (1 - t)` when `t >= 0.5` (numpy's linear
//!   quantile and its `_lerp`);
//! * a gene's bin is the number of edges `<= x_g` (`searchsorted(..,
//!   side="right")`), so from 1 to `n_bins - 1`.
//!
//! The row is `<cls>` (value 0), the genes and their bins, then `<pad>`
//! (value -2). A cell with more than `max_len - 1` such genes keeps
//! `max_len - 1` of them, drawn without replacement (a partial
//! Fisher-Yates shuffle driven by SplitMix64 seeded from `(seed, epoch,
//! cell)`), in column order; the bins are those computed over all its genes.

use super::dict::{check_tokens, special, GeneMap};
use crate::error::{Error, Result};

/// scGPT's settings: tokens by gene key, bins, row length, the value
/// transform and the sampling seed.
#[derive(Clone, Debug)]
pub struct ScGpt {
    tokens: GeneMap<i32>,
    n_bins: usize,
    max_len: usize,
    normalize: Option<f64>,
    log1p: bool,
    seed: u64,
    epoch: u64,
    gene_key: Option<String>,
}

/// What scGPT's rows use, checked: the special tokens and the per-column
/// tokens.
#[derive(Clone, Debug)]
pub(crate) struct ScGptColumns {
    /// Per column: its token, or `None` (skipped).
    pub(crate) columns: Vec<Option<i32>>,
    pub(crate) pad: i32,
    pub(crate) cls: i32,
    pub(crate) n_bins: usize,
    pub(crate) max_len: usize,
    pub(crate) normalize: Option<f64>,
    pub(crate) log1p: bool,
    pub(crate) seed: u64,
    pub(crate) epoch: u64,
}

impl ScGpt {
    /// scGPT over `tokens` (which hold `<pad>` and `<cls>`): 51 bins of raw
    /// counts, rows of 1,200 tokens, seed and epoch 0, matched by var names.
    pub fn new(tokens: GeneMap<i32>) -> Result<ScGpt> {
        check_tokens(&tokens)?;
        special(&tokens, "<pad>", "padding")?;
        special(&tokens, "<cls>", "scGPT")?;
        Ok(ScGpt {
            tokens,
            n_bins: 51,
            max_len: 1200,
            normalize: None,
            log1p: false,
            seed: 0,
            epoch: 0,
            gene_key: None,
        })
    }

    /// `n_bins` bins (at least 2).
    pub fn with_n_bins(mut self, n_bins: usize) -> Result<ScGpt> {
        if n_bins < 2 {
            return Err(Error::Input(format!(
                "scGPT n_bins must be at least 2, not {n_bins}"
            )));
        }
        self.n_bins = n_bins;
        Ok(self)
    }

    /// Rows of `max_len` tokens (at least 2: `<cls>` and a gene).
    pub fn with_max_len(mut self, max_len: usize) -> Result<ScGpt> {
        if max_len < 2 {
            return Err(Error::Input(format!(
                "scGPT max_len must be at least 2 (<cls> and a gene), not {max_len}"
            )));
        }
        self.max_len = max_len;
        Ok(self)
    }

    /// Values normalized to `target_sum` per cell (`None`: counts), then
    /// `log1p` when asked.
    pub fn with_transform(mut self, normalize: Option<f64>, log1p: bool) -> Result<ScGpt> {
        if let Some(t) = normalize {
            if !(t > 0.0 && t.is_finite()) {
                return Err(Error::Input(format!(
                    "normalize target sum must be positive and finite, not {t}"
                )));
            }
        }
        self.normalize = normalize;
        self.log1p = log1p;
        Ok(self)
    }

    /// Samples genes of long cells by `seed` and `epoch`.
    pub fn with_seed(mut self, seed: u64, epoch: u64) -> ScGpt {
        self.seed = seed;
        self.epoch = epoch;
        self
    }

    /// Matches genes by the `var` column `key` (`None`: the var names).
    pub fn with_gene_key(mut self, key: Option<String>) -> ScGpt {
        self.gene_key = key;
        self
    }

    /// The `var` column genes are matched by (`None`: the var names).
    pub fn gene_key(&self) -> Option<&str> {
        self.gene_key.as_deref()
    }

    /// Tokens per row.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The table for columns named `keys`.
    pub(crate) fn columns(&self, keys: &[String]) -> ScGptColumns {
        let token = |name| self.tokens.get(name).expect("checked when configured");
        ScGptColumns {
            columns: keys.iter().map(|k| self.tokens.get(k)).collect(),
            pad: token("<pad>"),
            cls: token("<cls>"),
            n_bins: self.n_bins,
            max_len: self.max_len,
            normalize: self.normalize,
            log1p: self.log1p,
            seed: self.seed,
            epoch: self.epoch,
        }
    }
}

/// Counts below this are counted in a table when a cell's values are
/// ordered; larger ones are sorted.
const SMALL_COUNTS: usize = 256;

/// Reused buffers of [`ScGptColumns::row`].
#[derive(Default)]
pub(crate) struct BinScratch {
    tokens: Vec<i32>,
    counts: Vec<u32>,
    /// Genes of each count below [`SMALL_COUNTS`], then running totals.
    table: Vec<u32>,
    /// The counts from [`SMALL_COUNTS`] on, sorted.
    large: Vec<u32>,
    /// The bin of each count below [`SMALL_COUNTS`] (0: not computed yet).
    bins: Vec<u32>,
    edges: Vec<f64>,
    picked: Vec<u32>,
    marks: Vec<u64>,
}

impl ScGptColumns {
    /// The value of `count` in a cell of `n_counts` (see the module docs).
    fn value(&self, count: u32, n_counts: f64) -> f64 {
        let mut x = f64::from(count);
        if let Some(target) = self.normalize {
            x = (x / n_counts) * target;
        }
        if self.log1p {
            x = x.ln_1p();
        }
        x
    }

    /// Writes the row of cell `cell` with `genes` (columns) and `counts`
    /// into `ids`, `values` and `mask` (`max_len` each).
    ///
    /// A cell's values are a non-decreasing function of its counts, so the
    /// `k`-th smallest value is the value of the `k`-th smallest count:
    /// the counts are ordered by a table of small counts (and a sort of the
    /// few large ones), the edges computed from the order statistics they
    /// give, and each distinct count's bin found once.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn row(
        &self,
        cell: u64,
        genes: &[i32],
        counts: &[i32],
        ids: &mut [i32],
        values: &mut [f32],
        mask: &mut [u8],
        s: &mut BinScratch,
    ) {
        let n_counts = counts.iter().map(|&c| u64::from(c as u32)).sum::<u64>() as f64;
        s.tokens.clear();
        s.counts.clear();
        s.large.clear();
        s.table.clear();
        s.table.resize(SMALL_COUNTS + 1, 0);
        for (&g, &c) in genes.iter().zip(counts) {
            if let Some(token) = self.columns[g as usize] {
                let c = c as u32;
                s.tokens.push(token);
                s.counts.push(c);
                if (c as usize) < SMALL_COUNTS {
                    s.table[c as usize + 1] += 1;
                } else {
                    s.large.push(c);
                }
            }
        }
        s.large.sort_unstable();
        // `table[c]`: genes of count below `c` (for `c <= SMALL_COUNTS`).
        for c in 1..s.table.len() {
            s.table[c] += s.table[c - 1];
        }
        let n = s.counts.len();
        let (table, large) = (&s.table, &s.large);
        let n_small = table[SMALL_COUNTS] as usize;
        let kth = |k: usize| -> f64 {
            let count = if k < n_small {
                (table.partition_point(|&t| t as usize <= k) - 1) as u32
            } else {
                large[k - n_small]
            };
            self.value(count, n_counts)
        };
        quantile_edges(n, self.n_bins, kth, &mut s.edges);
        let body = self.max_len - 1;
        if n > body {
            sample(
                n,
                body,
                self.seed,
                self.epoch,
                cell,
                &mut s.picked,
                &mut s.marks,
            );
        } else {
            s.picked.clear();
            s.picked.extend(0..n as u32);
        }
        s.bins.clear();
        s.bins.resize(SMALL_COUNTS, 0);
        let edges = &s.edges;
        let bin_of = |c: u32| {
            let x = self.value(c, n_counts);
            edges.partition_point(|&e| e <= x) as u32
        };
        ids[0] = self.cls;
        values[0] = 0.0;
        mask[0] = 1;
        let len = 1 + s.picked.len();
        for (j, &p) in s.picked.iter().enumerate() {
            let c = s.counts[p as usize];
            let bin = match s.bins.get_mut(c as usize) {
                Some(b) if *b != 0 => *b,
                Some(b) => {
                    *b = bin_of(c);
                    *b
                }
                None => bin_of(c),
            };
            ids[1 + j] = s.tokens[p as usize];
            values[1 + j] = bin as f32;
            mask[1 + j] = 1;
        }
        ids[len..].fill(self.pad);
        values[len..].fill(-2.0);
        mask[len..].fill(0);
    }
}

/// The bin edges of `n` values whose `k`-th smallest is `kth(k)` (all
/// non-negative), as `np.quantile(x, np.linspace(0, 1, n_bins - 1))`
/// computes them (see the module docs), into `edges`; none when `n` is 0.
pub(crate) fn quantile_edges(
    n: usize,
    n_bins: usize,
    kth: impl Fn(usize) -> f64,
    edges: &mut Vec<f64>,
) {
    edges.clear();
    if n == 0 {
        return;
    }
    let points = n_bins - 1;
    let step = 1.0 / (points.saturating_sub(1)) as f64;
    let last = (n - 1) as f64;
    for j in 0..points {
        let q = if points > 1 && j == points - 1 {
            1.0
        } else if points > 1 {
            j as f64 * step + 0.0
        } else {
            0.0
        };
        let i = last * q;
        let edge = if i >= last {
            kth(n - 1)
        } else {
            let k = i.floor();
            let t = i - k;
            let (a, b) = (kth(k as usize), kth(k as usize + 1));
            let d = b - a;
            if t >= 0.5 {
                b - d * (1.0 - t)
            } else {
                a + d * t
            }
        };
        edges.push(edge);
    }
}

/// `k` of `0..n` drawn without replacement, in increasing order, into
/// `out`: a partial Fisher-Yates shuffle driven by SplitMix64 seeded from
/// `(seed, epoch, cell)`.
/// The drawn positions are put back in increasing order through the
/// bitmap `marks` (a word per 64 positions) rather than sorted.
pub(crate) fn sample(
    n: usize,
    k: usize,
    seed: u64,
    epoch: u64,
    cell: u64,
    out: &mut Vec<u32>,
    marks: &mut Vec<u64>,
) {
    let mut state = splitmix(splitmix(splitmix(seed) ^ epoch) ^ cell);
    out.clear();
    out.extend(0..n as u32);
    for i in 0..k {
        state = state.wrapping_add(GOLDEN);
        let r = splitmix(state);
        let j = i + ((u128::from(r) * (n - i) as u128) >> 64) as usize;
        out.swap(i, j);
    }
    marks.clear();
    marks.resize(n.div_ceil(64), 0);
    for &p in &out[..k] {
        marks[p as usize >> 6] |= 1 << (p & 63);
    }
    out.clear();
    for (w, &word) in marks.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            out.push((w << 6) as u32 + bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function of `z` (with the increment added).
fn splitmix(z: u64) -> u64 {
    let mut z = z.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

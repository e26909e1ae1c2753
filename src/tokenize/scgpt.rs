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
//! `max_len - 1` of them, in column order, the bins being those computed
//! over all its genes. Which are kept is a uniform draw without
//! replacement, deterministic in `(seed, epoch, cell)`: with `n` genes and
//! `k = max_len - 1` kept, `m = min(k, n - k)` positions of `0..n` are
//! chosen by Floyd's algorithm (for `j` from `n - m` to `n - 1`, draw `t`
//! in `0..=j`; take `t`, or `j` when `t` is taken already), and they are
//! the positions kept when `m = k`, else the positions dropped. Each draw
//! is `(r * (j + 1)) >> 64` of the next output `r` of SplitMix64 seeded
//! from `(seed, epoch, cell)`, so a cell costs `m` draws, at most half its
//! genes.

use super::dict::{check_tokens, special, GeneMap};
use crate::engine::{best_row_kernels, count_total};
use crate::error::{Error, Result};
use crate::kernels::reference::rows::splitmix;
use crate::kernels::rows::{RowKernels, MEMO_SLOTS, TALLY_SLOTS};

/// The most bins scGPT values take. Each cell computes `n_bins - 1` edges
/// (8 bytes each): 65,536 bins keep that to half a megabyte, far past any
/// model's (scGPT's default is 51), where a mistyped count in the billions
/// would ask for gigabytes of edges.
pub const MAX_BINS: usize = 1 << 16;

/// scGPT's settings: tokens by gene key, bins, row length, the value
/// transform and the sampling seed.
#[derive(Clone, Debug, PartialEq)]
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
    /// Per column: its token, or -1 (skipped); tokens are non-negative
    /// (checked).
    pub(crate) tokens: Vec<i32>,
    /// Whether every column has a token (a dataset subset to the model's
    /// vocabulary, as scGPT's own preprocessing leaves it): then a long
    /// cell's genes are drawn before any token is looked up, and only the
    /// kept genes' tokens are.
    pub(crate) every_column: bool,
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

    /// `n_bins` bins (at least 2, at most [`MAX_BINS`]).
    pub fn with_n_bins(mut self, n_bins: usize) -> Result<ScGpt> {
        if !(2..=MAX_BINS).contains(&n_bins) {
            return Err(Error::Input(format!(
                "scGPT n_bins must be at least 2 and at most {MAX_BINS}, not {n_bins}"
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
        let tokens: Vec<i32> = keys
            .iter()
            .map(|k| self.tokens.get(k).unwrap_or(-1))
            .collect();
        ScGptColumns {
            every_column: tokens.iter().all(|&t| t >= 0),
            tokens,
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
/// ordered, and their bins looked up in one; larger ones are sorted.
const SMALL_COUNTS: usize = 256;

// The bins of the small counts are the row kernels' memo for `lookup`.
const _: () = assert!(SMALL_COUNTS >= MEMO_SLOTS);
// Every count `tally` counts has its own slot.
const _: () = assert!(SMALL_COUNTS >= TALLY_SLOTS);

/// Reused buffers of [`ScGptColumns::row`].
#[derive(Default)]
pub(crate) struct BinScratch {
    /// The tokens of the cell's genes that have one, in column order.
    tokens: Vec<i32>,
    /// Their counts.
    counts: Vec<u32>,
    /// The kept genes' tokens and counts.
    kept_tokens: Vec<i32>,
    kept_counts: Vec<u32>,
    /// The kept genes, where they are kept before their tokens are looked
    /// up.
    kept_genes: Vec<i32>,
    /// The genes of each count below [`SMALL_COUNTS`], and of the larger
    /// ones in a slot past them.
    table: Vec<u32>,
    /// The counts the row kernels' `tally` leaves to the table.
    rest: Vec<u32>,
    /// `below[c]`: the genes of count below `c`, for `c <= SMALL_COUNTS`
    /// (`below[0]`, 0, is never written).
    below: Vec<u32>,
    /// The counts from [`SMALL_COUNTS`] on, sorted.
    large: Vec<u32>,
    /// The bin of each count below [`SMALL_COUNTS`] the cell holds.
    bins: Vec<f32>,
    edges: Vec<f64>,
    /// Whether each gene is kept (1) or not (0).
    keep: Vec<u8>,
    /// The positions drawn, in the order of the draws.
    draws: Vec<u32>,
}

impl ScGptColumns {
    /// Whether column `g` has a token.
    pub(crate) fn tokenizes(&self, g: usize) -> bool {
        self.tokens[g] >= 0
    }

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
    /// `k`-th smallest value is the value of the `k`-th smallest count, and
    /// the bins a non-decreasing function of the counts too: the counts are
    /// ordered by a table of small counts (and a sort of the few large
    /// ones), the edges computed from the order statistics they give, and
    /// the bin of each small count the cell holds found once, by one walk
    /// along the edges. The kept genes are then compressed out of the
    /// cell's by the row kernels' `compress` and their bins looked up by
    /// `lookup`, a register of genes at a time. Where every column has a
    /// token, a long cell's tokens are looked up for its kept genes alone,
    /// after the draw (a gather a gene, the row's dearest step after the
    /// draw): the same row, 5-10% faster on the bench's cells of ~2,100
    /// genes in rows of 1,200. `total`, the cell's total
    /// over all the genes it has where `counts` are not all of them (a
    /// corpus member's row mapped into fewer genes).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn row(
        &self,
        cell: u64,
        (genes, counts): (&[i32], &[i32]),
        total: Option<u64>,
        ids: &mut [i32],
        values: &mut [f32],
        mask: &mut [u8],
        s: &mut BinScratch,
    ) {
        let n_counts = match self.normalize {
            Some(_) => total.unwrap_or_else(|| count_total(counts)) as f64,
            None => 0.0,
        };
        let kernels = best_row_kernels();
        let body = self.max_len - 1;
        // Where every column has a token, a long cell's genes are all its
        // genes: its counts are ordered where they lie, and its tokens
        // looked up after the draw, for the kept genes alone.
        let draw_first = self.every_column && genes.len() > body;
        let n = if draw_first {
            genes.len()
        } else {
            self.gather(kernels, genes, counts, s)
        };
        let mut gathered = std::mem::take(&mut s.counts);
        let held = {
            let ordered: &[u32] = if draw_first {
                bytemuck::cast_slice(counts)
            } else {
                &gathered[..n]
            };
            Self::order(kernels, ordered, s)
        };
        let mut ordered = Ordered::new(&s.below, &s.large);
        quantile_edges(
            n,
            self.n_bins,
            |k| self.value(ordered.kth(k), n_counts),
            &mut s.edges,
        );
        let edges = &s.edges;
        let bin_of = |c: u32| edges.partition_point(|&e| e <= self.value(c, n_counts)) as f32;
        s.bins.clear();
        s.bins.resize(SMALL_COUNTS, 0.0);
        let mut e = 0;
        for c in 0..held {
            if s.below[c + 1] != s.below[c] {
                let x = self.value(c as u32, n_counts);
                while e < edges.len() && edges[e] <= x {
                    e += 1;
                }
                s.bins[c] = e as f32;
            }
        }
        if n > body {
            keep(
                n,
                body,
                (self.seed, self.epoch, cell),
                &mut s.keep,
                &mut s.draws,
            );
            s.kept_tokens.resize(n, 0);
            s.kept_counts.resize(n, 0);
        }
        let (kept_tokens, kept_counts) = if n <= body {
            (&s.tokens[..n], &gathered[..n])
        } else if draw_first {
            s.kept_genes.resize(n, 0);
            let kept = kernels.compress(
                genes,
                &s.keep,
                bytemuck::cast_slice(counts),
                (&mut s.kept_genes, &mut s.kept_counts),
            );
            gathered.resize(kept, 0);
            let looked_up = kernels.select(
                &self.tokens,
                0,
                &s.kept_genes[..kept],
                &s.kept_counts[..kept],
                (&mut s.kept_tokens, &mut gathered),
            );
            debug_assert_eq!(looked_up, kept, "every column has a token");
            (&s.kept_tokens[..looked_up], &gathered[..looked_up])
        } else {
            let kept = kernels.compress(
                &s.tokens[..n],
                &s.keep,
                &gathered[..n],
                (&mut s.kept_tokens, &mut s.kept_counts),
            );
            (&s.kept_tokens[..kept], &s.kept_counts[..kept])
        };
        let len = 1 + kept_tokens.len();
        ids[0] = self.cls;
        values[0] = 0.0;
        ids[1..len].copy_from_slice(kept_tokens);
        let memo = s.bins[..MEMO_SLOTS]
            .try_into()
            .expect("SMALL_COUNTS >= MEMO_SLOTS");
        kernels.lookup_or(memo, kept_counts, &mut values[1..len], |c| {
            match s.bins.get(c as usize) {
                Some(&bin) => bin,
                None => bin_of(c),
            }
        });
        mask[..len].fill(1);
        ids[len..].fill(self.pad);
        values[len..].fill(-2.0);
        mask[len..].fill(0);
        s.counts = gathered;
    }

    /// Keeps the tokens and counts of the genes that have a token, in
    /// column order, at the front of `s.tokens` and `s.counts`; returns how
    /// many. The row kernels' `select` looks the tokens up a register of
    /// genes at a time.
    fn gather(
        &self,
        kernels: &RowKernels,
        genes: &[i32],
        counts: &[i32],
        s: &mut BinScratch,
    ) -> usize {
        s.tokens.resize(genes.len(), 0);
        s.counts.resize(genes.len(), 0);
        kernels.select(
            &self.tokens,
            0,
            genes,
            bytemuck::cast_slice(counts),
            (&mut s.tokens, &mut s.counts),
        )
    }

    /// Orders `counts`: `s.below` the running totals of
    /// the small counts, `s.large` the others sorted. The row kernels'
    /// `tally` counts the values below its slots (most of a cell's) and
    /// hands back the rest, which a table counts. Returns one past the
    /// largest count below [`SMALL_COUNTS`] the cell holds.
    fn order(kernels: &RowKernels, counts: &[u32], s: &mut BinScratch) -> usize {
        let mut tallied = [0usize; TALLY_SLOTS];
        s.rest.resize(counts.len(), 0);
        let others = kernels.tally(counts, &mut tallied, &mut s.rest);
        let rest = &s.rest[..others];
        // A slot past the small counts counts the large ones, so that the
        // loop has no branch; they are collected by a second pass only
        // when the cell has some.
        s.table.clear();
        s.table.resize(SMALL_COUNTS + 1, 0);
        for (slot, &k) in s.table.iter_mut().zip(&tallied) {
            *slot = k as u32;
        }
        // One past the largest small count the cell holds: the running
        // totals are flat after it, and no count after it has a bin.
        let mut held = tallied.iter().rposition(|&k| k > 0).map_or(0, |c| c + 1);
        for &c in rest {
            let slot = c.min(SMALL_COUNTS as u32) as usize;
            s.table[slot] += 1;
            held = held.max(slot + 1).min(SMALL_COUNTS);
        }
        s.large.clear();
        if s.table[SMALL_COUNTS] > 0 {
            s.large
                .extend(rest.iter().copied().filter(|&c| c as usize >= SMALL_COUNTS));
            s.large.sort_unstable();
        }
        s.below.resize(SMALL_COUNTS + 1, 0);
        let mut total = 0;
        for (below, &per_count) in s.below[1..=held].iter_mut().zip(&s.table[..held]) {
            total += per_count;
            *below = total;
        }
        s.below[held + 1..].fill(total);
        held
    }
}

/// A cell's counts in order, read as [`ScGptColumns::order`] leaves them:
/// the `k`-th smallest is a small count found by a cursor along the
/// running totals (the edges ask for `k`s that only step back by one
/// between calls), or a large one by its place.
struct Ordered<'s> {
    below: &'s [u32],
    large: &'s [u32],
    /// The small count the cursor is at.
    at: usize,
}

impl<'s> Ordered<'s> {
    fn new(below: &'s [u32], large: &'s [u32]) -> Ordered<'s> {
        Ordered {
            below,
            large,
            at: 0,
        }
    }

    /// The `k`-th smallest count (from 0).
    fn kth(&mut self, k: usize) -> u32 {
        let n_small = self.below[SMALL_COUNTS] as usize;
        if k >= n_small {
            return self.large[k - n_small];
        }
        while self.below[self.at] as usize > k {
            self.at -= 1;
        }
        while self.below[self.at + 1] as usize <= k {
            self.at += 1;
        }
        self.at as u32
    }
}

/// The bin edges of `n` values whose `k`-th smallest is `kth(k)` (all
/// non-negative), as `np.quantile(x, np.linspace(0, 1, n_bins - 1))`
/// computes them (see the module docs), into `edges`; none when `n` is 0.
pub(crate) fn quantile_edges(
    n: usize,
    n_bins: usize,
    mut kth: impl FnMut(usize) -> f64,
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
            // `i` is in `0..n - 1`: the truncation is its floor, without
            // a call to libm's `floor` (1% of scGPT batches' samples).
            let k = i as usize;
            let t = i - k as f64;
            let (a, b) = (kth(k), kth(k + 1));
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

/// Marks in `keep` (1 kept, 0 not, a byte per position) the positions of
/// `0..n` a cell of `n` genes keeps in a row of `k` genes: all of them when
/// `n <= k`, else `k` drawn without replacement as the module docs say.
///
/// A byte per position rather than a bit: a draw reads whether its
/// position is taken right after earlier draws stored theirs, and with
/// bits most of those fall in the same few words, so the processor's guess
/// that the read does not depend on a pending store fails often (each a
/// pipeline flush); measured 3x slower per cell of 2,100 genes. A byte
/// rather than a mark in the token itself: with the token's sign as the
/// mark, each mark's place waited on a value loaded just before, and the
/// draw took over twice as long. The row kernels'
/// `compress` then takes the kept genes by these bytes.
pub(crate) fn keep(
    n: usize,
    k: usize,
    (seed, epoch, cell): (u64, u64, u64),
    keep: &mut Vec<u8>,
    draws: &mut Vec<u32>,
) {
    keep.clear();
    keep.resize(n, 0);
    let (drawn, dropped) = if n <= k {
        (0, true)
    } else if k <= n - k {
        (k, false)
    } else {
        (n - k, true)
    };
    // The draws first, a register at a time (they depend on nothing but
    // the seed), then their marks, one after the other.
    draws.resize(drawn, 0);
    let state = splitmix(splitmix(splitmix(seed) ^ epoch) ^ cell);
    let first = u32::try_from(n - drawn).expect("a row's genes are counted in u32");
    best_row_kernels().draws(state, first, draws);
    // The marks as a slice: a byte stored through the vector's pointer
    // might be its length or pointer, so each draw would load both again.
    let marks = keep.as_mut_slice();
    for (j, &t) in (n - drawn..n).zip(draws.iter()) {
        let t = t as usize;
        // Floyd's step: `j` is taken when `t` is, else `t`. No position
        // from `j` on is taken yet, so `j` takes `t`'s mark, then `t` is
        // marked (`t == j` included): both stores' places are known before
        // the load, so none waits on it, and nothing branches on it (taken
        // about half the time at the end of a long draw).
        marks[j] = marks[t];
        marks[t] = 1;
    }
    if dropped {
        for kept in keep.iter_mut() {
            *kept ^= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The positions a cell of `n` genes keeps in a row of `k`.
    fn kept(n: usize, k: usize, seed: u64, epoch: u64, cell: u64) -> Vec<usize> {
        let mut flags = vec![7; 3];
        keep(n, k, (seed, epoch, cell), &mut flags, &mut vec![5; 2]);
        assert_eq!(flags.len(), n);
        assert!(flags.iter().all(|&f| f <= 1));
        (0..n).filter(|&p| flags[p] == 1).collect()
    }

    #[test]
    fn keep_draws_k_distinct_positions_uniformly() {
        // Fewer genes than the row holds: every one, in order.
        assert_eq!(kept(70, 100, 1, 0, 5), (0..70).collect::<Vec<_>>());
        assert!(kept(0, 100, 1, 0, 5).is_empty());
        // Positions kept when few are kept, dropped when most are: each
        // position's frequency over many cells is within 4 standard
        // deviations of k / n, and every cell keeps exactly k.
        for (n, k) in [(130, 20), (130, 110), (2111, 1199), (64, 63), (65, 1)] {
            let cells = 4000;
            let mut freq = vec![0u32; n];
            for cell in 0..cells {
                let got = kept(n, k, 7, 3, cell);
                assert_eq!(got.len(), k, "{n} genes, {k} kept");
                for p in got {
                    freq[p] += 1;
                }
            }
            let p = k as f64 / n as f64;
            let (mean, sd) = (cells as f64 * p, (cells as f64 * p * (1.0 - p)).sqrt());
            for (pos, &f) in freq.iter().enumerate() {
                assert!(
                    (f64::from(f) - mean).abs() <= 4.0 * sd + 1e-9,
                    "{n} genes, {k} kept: position {pos} kept {f} times, expected {mean:.0}"
                );
            }
        }
        // Deterministic in (seed, epoch, cell), and each of them matters.
        let draw = |seed, epoch, cell| kept(500, 200, seed, epoch, cell);
        assert_eq!(draw(1, 2, 3), draw(1, 2, 3));
        for other in [draw(9, 2, 3), draw(1, 9, 3), draw(1, 2, 9)] {
            assert_ne!(other, draw(1, 2, 3));
        }
    }

    #[test]
    fn ordered_finds_every_kth_count_forward_and_one_back() {
        let counts = [3u32, 1, 1, 300, 7, 1, 256, 3, 0, 255];
        let mut sorted = counts.to_vec();
        sorted.sort_unstable();
        let mut below = vec![0u32; SMALL_COUNTS + 1];
        for &c in counts.iter().filter(|&&c| (c as usize) < SMALL_COUNTS) {
            below[c as usize + 1] += 1;
        }
        for c in 0..SMALL_COUNTS {
            below[c + 1] += below[c];
        }
        let large: Vec<u32> = sorted.iter().copied().filter(|&c| c >= 256).collect();
        let mut ordered = Ordered::new(&below, &large);
        // The order the edges ask in: k, k + 1, then k again or later.
        for k in 0..counts.len() - 1 {
            assert_eq!(ordered.kth(k), sorted[k], "k = {k}");
            assert_eq!(ordered.kth(k + 1), sorted[k + 1], "k = {}", k + 1);
        }
        for k in (0..counts.len()).rev() {
            assert_eq!(ordered.kth(k), sorted[k], "back to k = {k}");
        }
    }
}

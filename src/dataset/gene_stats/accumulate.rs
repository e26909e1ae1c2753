//! Per-gene accumulators, and the pass that adds rows to them in parallel
//! over blocks of genes (each block owned by one task, so no locks and no
//! per-task copies of the accumulators).

use crate::engine::count_total;
use std::ops::Range;

use rayon::prelude::*;
use sketches_ddsketch::{Config, DDSketch};

use crate::csr::CsrRef;
use crate::error::{Error, Result};

/// Each cell's normalized values sum to this (scanpy's and Geneformer's 10,000).
pub const TARGET_SUM: f64 = 10_000.0;

/// Relative error the median sketch guarantees (DDSketch's `alpha`).
pub const MEDIAN_RELATIVE_ERROR: f64 = 0.01;

/// The sketch's bin limit: values from 1e-9 to 1e4 span about 1,500 bins at
/// [`MEDIAN_RELATIVE_ERROR`], so a gene's sketch never collapses bins.
const SKETCH_BINS: u32 = 2048;

/// Smallest value the sketch tells from zero: below every normalized value
/// of a cell whose total is under 10^13 counts.
const SKETCH_MIN_VALUE: f64 = 1e-9;

/// `2^64`: normalized values are summed as fixed-point integers of this scale.
pub(crate) const FIXED_ONE: f64 = 18_446_744_073_709_551_616.0;

/// The sketch configuration every gene's sketch uses (merges need one config).
pub(crate) fn sketch_config() -> Config {
    Config::new(MEDIAN_RELATIVE_ERROR, SKETCH_BINS, SKETCH_MIN_VALUE)
}

/// One gene's sums over the cells seen so far.
#[derive(Clone)]
pub(crate) struct GeneAcc {
    /// Cells with a count above zero.
    pub(crate) n_cells: u64,
    /// Sum of counts.
    pub(crate) sum: u64,
    /// Sum of squared counts.
    pub(crate) sum_sq: u128,
    /// Sum of normalized values, each rounded to a multiple of `2^-64`, in
    /// units of `2^-64`.
    pub(crate) norm_sum: u128,
    /// Sum of squared normalized values, in the same fixed point.
    pub(crate) norm_sq: u128,
    /// The nonzero normalized values.
    pub(crate) sketch: DDSketch,
}

impl GeneAcc {
    pub(crate) fn new(config: Config) -> GeneAcc {
        GeneAcc {
            n_cells: 0,
            sum: 0,
            sum_sq: 0,
            norm_sum: 0,
            norm_sq: 0,
            sketch: DDSketch::new(config),
        }
    }

    /// Adds a cell with `count` (above zero) and normalized value `x`;
    /// `None` if a sum overflows.
    fn add(&mut self, count: u32, x: f64) -> Option<()> {
        let c = u128::from(count);
        self.n_cells += 1;
        self.sum = self.sum.checked_add(u64::from(count))?;
        self.sum_sq = self.sum_sq.checked_add(c * c)?;
        self.norm_sum = self.norm_sum.checked_add(fixed(x))?;
        self.norm_sq = self.norm_sq.checked_add(fixed(x * x))?;
        self.sketch.add(x);
        Some(())
    }

    /// Adds `other`'s cells; `None` if a sum overflows.
    pub(crate) fn merge(&mut self, other: &GeneAcc) -> Option<()> {
        self.n_cells = self.n_cells.checked_add(other.n_cells)?;
        self.sum = self.sum.checked_add(other.sum)?;
        self.sum_sq = self.sum_sq.checked_add(other.sum_sq)?;
        self.norm_sum = self.norm_sum.checked_add(other.norm_sum)?;
        self.norm_sq = self.norm_sq.checked_add(other.norm_sq)?;
        self.sketch.merge(&other.sketch).ok()
    }
}

/// `2^52`: from here on every `f64` is an integer.
const TWO_52: f64 = 4_503_599_627_370_496.0;

/// `x` (at least 0) as an integer number of `2^-64`, rounded to nearest,
/// ties away from zero: `(x * 2^64).round() as u128`, with the same result
/// (saturating above `u128::MAX`), but computed from the product's bits
/// instead of a `round` call and a software conversion to `u128`, which
/// took a fifth of the statistics pass.
#[inline]
fn fixed(x: f64) -> u128 {
    let y = x * FIXED_ONE;
    if y < TWO_52 {
        // `y + 0.5` is exact here (`y`'s ulp is at most 0.5), and the
        // truncation of a value at least 0 is its floor.
        return u128::from((y + 0.5) as u64);
    }
    // An integer: its significand shifted up by its exponent.
    let bits = y.to_bits();
    let shift = ((bits >> 52) & 0x7ff) as u32 - 1075;
    let significand = (bits & ((1 << 52) - 1)) | (1 << 52);
    if shift > 128 - 53 {
        return u128::MAX;
    }
    u128::from(significand) << shift
}

/// A cell's normalized value of `count`: `(count / total) * 10_000`, two f64
/// operations, each rounded to nearest.
#[inline]
pub fn normalized(count: u32, total: u64) -> f64 {
    (f64::from(count) / total as f64) * TARGET_SUM
}

/// Each row's total count (counts read as `u32`).
pub(crate) fn row_totals(rows: CsrRef<'_, i32>) -> Vec<u64> {
    (0..rows.n_rows())
        .into_par_iter()
        .with_min_len(256)
        .map(|r| {
            let (lo, hi) = (rows.indptr[r] as usize, rows.indptr[r + 1] as usize);
            count_total(&rows.values[lo..hi])
        })
        .collect()
}

/// Cuts `0..n_genes` into about `n_blocks` ranges holding similar numbers of
/// `rows`' nonzeros (genes of real data differ by orders of magnitude).
pub(crate) fn balanced_blocks(n_genes: usize, rows: CsrRef<'_, i32>, n_blocks: usize) -> Vec<u32> {
    let mut per_gene = vec![0u64; n_genes];
    for &g in rows.indices {
        per_gene[g as usize] += 1;
    }
    let total: u64 = per_gene.iter().sum();
    let share = total / n_blocks.max(1) as u64 + 1;
    let mut cuts = vec![0u32];
    let mut filled = 0u64;
    for (g, &n) in per_gene.iter().enumerate() {
        filled += n;
        if filled >= share && g + 1 < n_genes {
            cuts.push(g as u32 + 1);
            filled = 0;
        }
    }
    cuts.push(n_genes as u32);
    cuts.dedup();
    cuts
}

/// Rows added at once hold at most this many nonzeros (one row more if a
/// row alone holds more), and at most this many rows: positions and row
/// numbers within them fit a `u32`, and the copy grouped by gene stays
/// bounded whatever the caller passes.
const PIECE: usize = 1 << 23;

/// Adds `rows` (over every gene, each row's total in `totals`) to `genes`,
/// one parallel task per block of genes (`cuts`: block starts, then the end).
/// Within a block, cells are added in row order; every sum is exact, so the
/// result does not depend on the blocks.
///
/// A block's nonzeros are first grouped by gene (a counting sort that keeps
/// row order within each gene), then added one gene at a time: a gene's
/// sketch bins (a few KiB) stay in cache while its values go in. Added in
/// row order across a block of thousands of genes instead, nearly every
/// value missed the cache on its gene's bins. Rows go through in pieces of
/// at most [`PIECE`] nonzeros.
pub(crate) fn add_rows(
    genes: &mut [GeneAcc],
    cuts: &[u32],
    rows: CsrRef<'_, i32>,
    totals: &[u64],
) -> Result<()> {
    add_in_pieces(genes, cuts, rows, totals, PIECE)
}

/// [`add_rows`] in pieces of at most `limit` nonzeros (or one row) and
/// `limit` rows.
fn add_in_pieces(
    genes: &mut [GeneAcc],
    cuts: &[u32],
    rows: CsrRef<'_, i32>,
    totals: &[u64],
    limit: usize,
) -> Result<()> {
    let mut first = 0;
    while first < totals.len() {
        let base = rows.indptr[first] as usize;
        let mut end = first + 1;
        while end < totals.len()
            && end - first < limit
            && rows.indptr[end + 1] as usize - base <= limit
        {
            end += 1;
        }
        add_piece(genes, cuts, rows, totals, first..end)?;
        first = end;
    }
    Ok(())
}

/// [`add_rows`] of the rows `piece`.
fn add_piece(
    genes: &mut [GeneAcc],
    cuts: &[u32],
    rows: CsrRef<'_, i32>,
    totals: &[u64],
    piece: Range<usize>,
) -> Result<()> {
    let bounds = block_bounds(rows, piece.clone(), cuts);
    let mut blocks: Vec<(Range<u32>, usize, &mut [GeneAcc])> = Vec::with_capacity(cuts.len());
    let mut rest = genes;
    for (b, w) in cuts.windows(2).enumerate() {
        let (block, tail) = std::mem::take(&mut rest).split_at_mut((w[1] - w[0]) as usize);
        blocks.push((w[0]..w[1], b, block));
        rest = tail;
    }
    let base = rows.indptr[piece.start] as usize;
    let parts = |b: usize| {
        bounds
            .chunks_exact(cuts.len())
            .map(move |at| base + at[b] as usize..base + at[b + 1] as usize)
    };
    let totals = &totals[piece];
    blocks
        .into_par_iter()
        .try_for_each(|(range, b, block)| add_block(block, range.start, rows, totals, parts(b)))
}

/// Where each row of `piece` crosses each of `cuts` (gene block starts, then
/// the end): `cuts.len()` positions per row, into the piece's nonzeros, found
/// by one walk along the row (its genes ascend) for all blocks at once, not
/// two searches per block.
fn block_bounds(rows: CsrRef<'_, i32>, piece: Range<usize>, cuts: &[u32]) -> Vec<u32> {
    let base = rows.indptr[piece.start] as usize;
    let mut bounds = vec![0u32; piece.len() * cuts.len()];
    bounds
        .par_chunks_mut(cuts.len())
        .with_min_len(256)
        .zip(piece)
        .for_each(|(at, r)| {
            let (lo, hi) = (rows.indptr[r] as usize, rows.indptr[r + 1] as usize);
            let mut i = lo;
            for (slot, &cut) in at.iter_mut().zip(cuts) {
                while i < hi && (rows.indices[i] as u32) < cut {
                    i += 1;
                }
                *slot = (i - base) as u32;
            }
        });
    bounds
}

/// Adds the nonzeros `parts` (each row's range in the block, for the rows
/// whose totals are `totals`) of `rows` to `block`, the accumulators of
/// genes `first..`, grouped by gene (see [`add_rows`]).
fn add_block(
    block: &mut [GeneAcc],
    first: u32,
    rows: CsrRef<'_, i32>,
    totals: &[u64],
    parts: impl Iterator<Item = Range<usize>> + Clone,
) -> Result<()> {
    let column = |g: i32| (g as u32 - first) as usize;
    // Where each gene's nonzeros start among the block's.
    let mut starts = vec![0u32; block.len() + 1];
    for part in parts.clone() {
        for (&g, &c) in rows.indices[part.clone()].iter().zip(&rows.values[part]) {
            starts[column(g) + 1] += u32::from(c != 0);
        }
    }
    for g in 1..starts.len() {
        starts[g] += starts[g - 1];
    }
    // Each gene's (count, row), rows ascending.
    let mut grouped = vec![(0u32, 0u32); starts[block.len()] as usize];
    let mut next = starts.clone();
    for (r, part) in parts.enumerate() {
        for (&g, &c) in rows.indices[part.clone()].iter().zip(&rows.values[part]) {
            if c != 0 {
                let slot = &mut next[column(g)];
                grouped[*slot as usize] = (c as u32, r as u32);
                *slot += 1;
            }
        }
    }
    for (g, acc) in block.iter_mut().enumerate() {
        for &(count, r) in &grouped[starts[g] as usize..starts[g + 1] as usize] {
            acc.add(count, normalized(count, totals[r as usize]))
                .ok_or_else(|| overflow(first + g as u32))?;
        }
    }
    Ok(())
}

/// The error for a gene whose sums no longer fit.
pub(crate) fn overflow(gene: u32) -> Error {
    Error::Input(format!(
        "gene {gene}: its statistics overflow (more than about 10^11 cells)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_keeps_every_bit_of_values_above_2_to_minus_11() {
        let x = normalized(3, 7);
        assert_eq!(fixed(x) as f64 / FIXED_ONE, x);
        assert_eq!(fixed(TARGET_SUM), 10_000u128 << 64);
    }

    #[test]
    fn fixed_rounds_as_round_then_cast() {
        let reference = |x: f64| (x * FIXED_ONE).round() as u128;
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut xs = vec![
            0.0,
            f64::MIN_POSITIVE,
            0.5 / FIXED_ONE,
            1.5 / FIXED_ONE,
            2.5 / FIXED_ONE,
            (TWO_52 - 0.5) / FIXED_ONE,
            (TWO_52 - 1.5) / FIXED_ONE,
            TWO_52 / FIXED_ONE,
            1.0,
            TARGET_SUM,
            TARGET_SUM * TARGET_SUM,
            2f64.powi(63),
            2f64.powi(64),
            f64::MAX,
        ];
        for _ in 0..200_000 {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            // Magnitudes from 2^-80 to 2^40, every significand.
            let exponent = 1023 - 80 + (s >> 57) % 121;
            xs.push(f64::from_bits(exponent << 52 | (s >> 12)));
        }
        for x in xs {
            assert_eq!(fixed(x), reference(x), "{x:e}");
        }
    }

    #[test]
    fn pieces_of_any_size_add_up_to_the_same_statistics() {
        // 40 rows over 30 genes, some rows empty, some counts stored as 0.
        let (mut indptr, mut indices, mut values) = (vec![0i64], Vec::new(), Vec::new());
        for r in 0..40i32 {
            for g in (0..30).filter(|g| (g * 7 + r * 3) % 5 < r % 4) {
                indices.push(g);
                values.push((g + r) % 6);
            }
            indptr.push(indices.len() as i64);
        }
        let rows = CsrRef {
            n_cols: 30,
            indptr: &indptr,
            indices: &indices,
            values: &values,
        };
        let totals = row_totals(rows);
        let cuts = balanced_blocks(30, rows, 4);
        let summary = |limit: usize| {
            let mut genes = vec![GeneAcc::new(sketch_config()); 30];
            add_in_pieces(&mut genes, &cuts, rows, &totals, limit).unwrap();
            genes
                .iter()
                .map(|a| {
                    let median = a.sketch.quantile(0.5).unwrap().map(f64::to_bits);
                    (a.n_cells, a.sum, a.sum_sq, a.norm_sum, a.norm_sq, median)
                })
                .collect::<Vec<_>>()
        };
        let whole = summary(PIECE);
        assert!(whole.iter().any(|g| g.0 > 0));
        for limit in [1, 2, 7, 50] {
            assert_eq!(summary(limit), whole, "pieces of {limit}");
        }
    }

    #[test]
    fn blocks_cover_every_gene_once() {
        let rows = CsrRef {
            n_cols: 6,
            indptr: &[0, 3, 5],
            indices: &[0, 1, 5, 0, 1],
            values: &[1i32, 1, 1, 1, 1],
        };
        let cuts = balanced_blocks(6, rows, 3);
        assert_eq!((cuts[0], *cuts.last().unwrap()), (0, 6));
        assert!(cuts.windows(2).all(|w| w[0] < w[1]));
        assert!(cuts.len() >= 3);
    }
}

//! Per-gene statistics of a dataset: how many cells express each gene, the
//! sum, mean and variance of its counts and of its normalized counts, and the
//! median of its nonzero normalized values, as `gene_stats.parquet` holds them
//! (`deltacells stats`, `deltacells.gene_stats` in Python).
//!
//! # Formulas, in the order the floating-point operations run
//!
//! Over the `N` cells the statistics cover (every cell of the dataset, or of
//! the cell ranges merged), with `c[i,g]` the count of gene `g` in cell `i`
//! (read as `u32`) and `t[i]` cell `i`'s total over *all* the dataset's genes
//! (a `u64`):
//!
//! * `n_cells[g]` = the number of cells with `c[i,g] > 0`;
//! * `sum[g]` = `S` = `Σ c[i,g]`, an exact `u64`; `mean[g]` = `f64(S) / f64(N)`;
//! * `var[g]` = `(f64(N·Q − S²) / f64(N)) / f64(N)`, with `Q = Σ c[i,g]²` and
//!   `N·Q − S²` exact integers (`u128`); if `N·Q` does not fit a `u128`,
//!   `f64(Q) / f64(N) − mean²` instead. Variances are over all `N` cells,
//!   zeros included, with no degrees-of-freedom correction (ddof 0);
//! * the normalized value of a nonzero count is
//!   `x[i,g] = (f64(c[i,g]) / f64(t[i])) * 10000.0` (two operations, each
//!   rounded to nearest; [`normalized`]); zero counts stay zero;
//! * `norm_mean[g]` = `(f64(S') · 2^-64) / f64(N)` and
//!   `norm_var[g]` = `max(0, (f64(Q') · 2^-64) / f64(N) − norm_mean²)`, where
//!   `S' = Σ round(x · 2^64)` and `Q' = Σ round(f64(x · x) · 2^64)` are exact
//!   integer sums (`u128`): each value is rounded to a multiple of `2^-64`,
//!   which keeps every bit of any `x ≥ 2^-11` (and of `x²` from `x ≥ 0.023`),
//!   then summed without rounding. The sums are exact but the subtraction
//!   is not: `norm_var` is within about `norm_mean² · 2^-52` of the
//!   variance, so a gene whose normalized values barely vary (a variance
//!   below about `1e-15 · norm_mean²`, every cell alike) reads as 0 or as
//!   a few units of that bound, where `var` of the counts is exact;
//! * `norm_median[g]`: the median of gene `g`'s nonzero `x` from a
//!   [DDSketch](https://arxiv.org/abs/1908.10693) (the `sketches-ddsketch`
//!   crate) of relative accuracy [`MEDIAN_RELATIVE_ERROR`]: for the value `v`
//!   of rank `⌊(n − 1) / 2⌋` among the `n = n_cells[g]` sorted values (the
//!   lower median; the median itself when `n` is odd), the estimate `m`
//!   satisfies `|m − v| ≤ 0.01 · v`. NaN for a gene no cell expresses.
//!
//! `f64(a)` is the nearest `f64` to the integer `a` (exact below `2^53`).
//! `N = 0` gives NaN means and variances.
//!
//! # Parallel, exact and mergeable
//!
//! The cells are read through the one read pipeline ([`Dataset::read`]) in
//! windows of whole tiles, the next window's tiles fetched meanwhile; each
//! window's rows are added on the decode pool, one task per block of genes
//! (blocks cut to hold similar numbers of nonzeros), cells in row order.
//! Every sum is an exact integer and a sketch's bins are counts, so the
//! result depends on neither the thread count, the blocks, the windows nor
//! the order partial results are merged in: the statistics of two cell
//! ranges (or of datasets over the same genes, in the same order) merged
//! with [`GeneStats::merge`] equal those of one pass over both, bit for bit.
//! [`GeneStats::to_bytes`] carries a task's share to another process.

mod accumulate;
mod bytes;
mod table;

use std::ops::Range;

use crate::csr::{Csr, CsrRef};
use crate::dataset::Dataset;
use crate::error::{Error, Result};

pub use accumulate::{normalized, MEDIAN_RELATIVE_ERROR, TARGET_SUM};
pub use table::{gene_keys, GeneTable, VAR_NAMES_KEY};

use accumulate::{add_rows, balanced_blocks, row_totals, sketch_config, GeneAcc, FIXED_ONE};

/// Nonzeros a window of tiles holds before the next tile starts a new one
/// (at least one tile): its decoded rows take 8 bytes per nonzero.
const WINDOW_NNZ: u64 = 1 << 23;

/// Parallel tasks per decode thread in the pass over gene blocks.
const BLOCKS_PER_THREAD: usize = 4;

/// Partial statistics of some cells over every gene of a dataset, mergeable
/// (see the module docs); [`GeneStats::table`] gives the columns.
#[derive(Clone)]
pub struct GeneStats {
    n_obs: u64,
    genes: Vec<GeneAcc>,
    /// Gene block starts (then the end) for the parallel pass, cut from the
    /// first rows added; not part of the statistics.
    cuts: Vec<u32>,
}

/// The statistics' extent, not their figures ([`GeneStats::table`]).
impl std::fmt::Debug for GeneStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneStats")
            .field("n_obs", &self.n_obs)
            .field("n_genes", &self.genes.len())
            .finish_non_exhaustive()
    }
}

impl GeneStats {
    /// Statistics of no cell over `n_genes` genes.
    pub fn new(n_genes: u32) -> GeneStats {
        let config = sketch_config();
        GeneStats {
            n_obs: 0,
            genes: vec![GeneAcc::new(config); n_genes as usize],
            cuts: Vec::new(),
        }
    }

    /// Cells seen (the `N` of the module docs).
    pub fn n_obs(&self) -> u64 {
        self.n_obs
    }

    /// Number of genes.
    pub fn n_genes(&self) -> usize {
        self.genes.len()
    }

    /// Adds the cells `rows` (every gene, as stored: genes ascending in each
    /// row), in parallel on the current rayon pool.
    pub fn add_csr(&mut self, rows: CsrRef<'_, i32>) -> Result<()> {
        if rows.n_cols != self.genes.len() as u64 {
            return Err(Error::Input(format!(
                "rows of {} genes added to statistics of {}",
                rows.n_cols,
                self.genes.len()
            )));
        }
        if self.cuts.is_empty() && rows.nnz() > 0 {
            let blocks = BLOCKS_PER_THREAD * rayon::current_num_threads();
            self.cuts = balanced_blocks(self.genes.len(), rows, blocks);
        }
        let totals = row_totals(rows);
        if !self.cuts.is_empty() {
            add_rows(&mut self.genes, &self.cuts, rows, &totals)?;
        }
        self.n_obs += rows.n_rows() as u64;
        Ok(())
    }

    /// Adds the cells of `other` (statistics over the same genes).
    pub fn merge(&mut self, other: &GeneStats) -> Result<()> {
        if other.genes.len() != self.genes.len() {
            return Err(Error::Input(format!(
                "statistics of {} genes merged into statistics of {}",
                other.genes.len(),
                self.genes.len()
            )));
        }
        for (g, (a, b)) in self.genes.iter_mut().zip(&other.genes).enumerate() {
            a.merge(b).ok_or_else(|| accumulate::overflow(g as u32))?;
        }
        self.n_obs += other.n_obs;
        Ok(())
    }

    /// The statistics over `n_columns` columns, gene `g`'s in column
    /// `column(g)` (none where `None`): a column no gene lands in takes
    /// those of a gene no cell expresses (its count is zero in every cell).
    /// What a corpus member's statistics become in the corpus's vocabulary
    /// before they are merged: each cell's normalized counts still divide
    /// by its total over all of its member's genes.
    pub fn into_columns(
        &self,
        n_columns: u32,
        column: impl Fn(u32) -> Option<u32>,
    ) -> Result<GeneStats> {
        let mut out = GeneStats::new(n_columns);
        out.n_obs = self.n_obs;
        let mut taken = vec![false; n_columns as usize];
        for (g, acc) in self.genes.iter().enumerate() {
            let Some(c) = column(g as u32) else {
                continue;
            };
            match taken.get_mut(c as usize) {
                Some(t) if !*t => *t = true,
                _ => {
                    return Err(Error::Input(format!(
                        "gene {g} placed in column {c}, outside 0..{n_columns} or taken"
                    )))
                }
            }
            out.genes[c as usize] = acc.clone();
        }
        Ok(out)
    }

    /// The statistics' columns, one entry per gene.
    pub fn table(&self) -> GeneTable {
        let n = self.n_obs as f64;
        let mut t = GeneTable::with_capacity(self.genes.len());
        for a in &self.genes {
            let mean = a.sum as f64 / n;
            let var = u128::from(self.n_obs)
                .checked_mul(a.sum_sq)
                .map(|nq| (nq - u128::from(a.sum) * u128::from(a.sum)) as f64 / n / n)
                .unwrap_or_else(|| a.sum_sq as f64 / n - mean * mean);
            let norm_mean = (a.norm_sum as f64 / FIXED_ONE) / n;
            let norm_var = ((a.norm_sq as f64 / FIXED_ONE) / n - norm_mean * norm_mean).max(0.0);
            let median = a.sketch.quantile(0.5).ok().flatten().unwrap_or(f64::NAN);
            t.n_cells.push(a.n_cells);
            t.sum.push(a.sum);
            t.mean.push(mean);
            t.var.push(var);
            t.norm_mean.push(norm_mean);
            t.norm_var
                .push(if self.n_obs == 0 { f64::NAN } else { norm_var });
            t.norm_median.push(median);
        }
        t
    }
}

impl Dataset {
    /// The statistics of every cell (see the module docs).
    pub fn gene_stats(&self) -> Result<GeneStats> {
        self.gene_stats_of(0..self.n_cells())
    }

    /// The statistics of cells `cells`: a task's share, to merge with the
    /// others' ([`GeneStats::merge`]).
    pub fn gene_stats_of(&self, cells: Range<u64>) -> Result<GeneStats> {
        if cells.end > self.n_cells() || cells.start > cells.end {
            return Err(Error::Input(format!(
                "cells {}..{} are not within 0..{}",
                cells.start,
                cells.end,
                self.n_cells()
            )));
        }
        let windows = windows(self.limits(), &self.manifest().tile_nnz, &cells, WINDOW_NNZ);
        // Made once the first window is read, whose tiles are checked
        // against the manifest: a manifest claiming 2^31 genes must not size
        // a table before anything says whether the tiles agree.
        let mut stats = None;
        let mut rows = Csr::<i32>::empty(0);
        for (w, (range, _)) in windows.iter().enumerate() {
            if let Some((_, next)) = windows.get(w + 1) {
                self.prefetch(next.clone());
            }
            self.read(range.clone()).uncached().csr_into(&mut rows)?;
            let stats = stats.get_or_insert_with(|| GeneStats::new(self.n_genes()));
            self.engine().install(|| stats.add_csr(rows.as_ref()))?;
        }
        Ok(stats.unwrap_or_else(|| GeneStats::new(self.n_genes())))
    }
}

/// `cells` cut into windows of whole tiles (tile `t` holds cells
/// `limits[t]..limits[t + 1]` and `nnz[t]` nonzeros) of at most `window_nnz`
/// nonzeros, or one tile: each window's cells and tiles.
fn windows(
    limits: &[u64],
    nnz: &[u64],
    cells: &Range<u64>,
    window_nnz: u64,
) -> Vec<(Range<u64>, Range<usize>)> {
    let mut windows = Vec::new();
    let mut tile = limits
        .partition_point(|&l| l <= cells.start)
        .saturating_sub(1);
    let mut start = cells.start;
    while start < cells.end {
        let first = tile;
        let mut held = 0u64;
        while tile < nnz.len() && (tile == first || held + nnz[tile] <= window_nnz) {
            held += nnz[tile];
            tile += 1;
            if limits[tile] >= cells.end {
                break;
            }
        }
        let end = limits[tile].min(cells.end);
        windows.push((start..end, first..tile));
        start = end;
    }
    windows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_the_cells_once_in_whole_tiles() {
        let limits = [0, 10, 20, 30, 40];
        let nnz = [5, 5, 20, 5];
        let cut = |cells: Range<u64>| windows(&limits, &nnz, &cells, 10);
        assert_eq!(cut(0..40), [(0..20, 0..2), (20..30, 2..3), (30..40, 3..4)]);
        assert_eq!(cut(15..25), [(15..20, 1..2), (20..25, 2..3)]);
        assert_eq!(cut(3..7), [(3..7, 0..1)]);
        assert!(cut(40..40).is_empty());
    }
}

//! Transforms fused into reads: each cell normalized to a total and/or
//! log-transformed, as scanpy's `normalize_total(target_sum=...)` and
//! `log1p` define them, written as `f32` straight into the output (CSR or
//! dense) while the rows are decoded: no second pass over the output.
//!
//! # Formulas, in the order the floating-point operations run
//!
//! For a cell with counts `c[g]` (read as `u32`) and total
//! `t = Σ c[g]` over *all* the dataset's genes (a `u64`, summed before any
//! gene selection, so a selection of a few genes is normalized by the whole
//! cell, as scanpy normalizes before subsetting), each stored count becomes
//!
//! 1. `x = f64(c)`;
//! 2. with `normalize(target_sum)`: `x = (x / f64(t)) * target_sum` (two f64
//!    operations, each rounded to nearest; the same value as the gene
//!    statistics' normalized counts for `target_sum = 10,000`);
//! 3. with `log1p`: `x = ln(1 + x)`, as `f64::ln_1p` computes it;
//! 4. the output value is `x as f32` (rounded to nearest once, at the end).
//!
//! Counts that are not stored stay zero (`ln(1 + 0) = 0`), and a cell whose
//! total is 0 has no stored count, so it stays all zeros. The total comes
//! from the same decoded row the values do: every gene of the row reaches
//! the output through [`SinkPart::write_row`] before the gene selection is
//! applied (or, for CSR rows of every gene, is decoded in place and rewritten
//! as values by its task: `transform_csr.rs`), so nothing is decoded twice.
//! Within a row, the value of each count below 64 is computed once and
//! reused: the same value, fewer logarithms.

use std::cell::RefCell;

use crate::csr::Csr;
use crate::engine::genes::{best_row_kernels, GeneSelection, RowMapper};
use crate::engine::sink::{kept_offsets, AddedRows, CsrPart, Dense, DensePart, Sink, SinkPart};
use crate::error::{Error, Result};
use crate::kernels::rows::{RowKernels, MEMO_SLOTS};

/// What a read does to counts before writing them (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Transform {
    target_sum: Option<f64>,
    log1p: bool,
}

impl Transform {
    /// Counts as stored.
    pub const NONE: Transform = Transform {
        target_sum: None,
        log1p: false,
    };

    /// Also divides each cell by its total and multiplies by `target_sum`.
    pub fn normalize(self, target_sum: f64) -> Transform {
        Transform {
            target_sum: Some(target_sum),
            ..self
        }
    }

    /// Also takes `ln(1 + x)` of every value (after normalizing).
    pub fn log1p(self) -> Transform {
        Transform {
            log1p: true,
            ..self
        }
    }

    /// The normalization's target sum, if any.
    pub fn target_sum(&self) -> Option<f64> {
        self.target_sum
    }

    /// Whether values are log-transformed.
    pub fn is_log1p(&self) -> bool {
        self.log1p
    }

    /// Whether counts are left as stored.
    pub fn is_identity(&self) -> bool {
        *self == Transform::NONE
    }

    /// Refuses a target sum that is not a positive finite number.
    pub fn check(&self) -> Result<()> {
        match self.target_sum {
            Some(t) if !(t.is_finite() && t > 0.0) => Err(Error::Input(format!(
                "normalize target_sum must be a positive finite number, not {t}"
            ))),
            _ => Ok(()),
        }
    }

    /// The output value of a stored `count` in a cell of total `total`.
    #[inline]
    pub fn value(&self, count: u32, total: u64) -> f32 {
        let mut x = f64::from(count);
        if let Some(target) = self.target_sum {
            x = (x / total as f64) * target;
        }
        if self.log1p {
            x = x.ln_1p();
        }
        x as f32
    }
}

/// An output of `f32` values written column by column: what a transformed
/// read fills ([`Csr<f32>`], [`Dense<f32>`]). Whether its rows need their
/// lengths is its [`Sink::sizes_rows`].
pub(crate) trait ValueSink: Sink {
    /// One task's rows.
    type Values<'p>: ValuePart
    where
        Self: 'p;
    /// As [`Sink::start`].
    fn start_values(&mut self, n_cols: u32);
    /// As [`Sink::extend`]: each row's length is its number of values.
    fn extend_values(&mut self, rows: &AddedRows<'_>) -> Result<()>;
    /// As [`Sink::split`].
    fn split_values(&mut self, cuts: &[usize]) -> Vec<Self::Values<'_>>;
}

/// Rows of a [`ValueSink`].
pub(crate) trait ValuePart: Send {
    /// The rows as a dense output's, which take their columns in any order
    /// and can be composed whole ([`DensePart::compose`]); `None` for CSR
    /// rows, which take their columns in ascending order only.
    fn dense(&mut self) -> Option<DensePart<'_, f32>>;
    /// Writes row `row`: `values` at `columns` (ascending unless the rows
    /// are [`ValuePart::dense`]).
    fn write_values(&mut self, row: usize, columns: &[i32], values: &[f32]);
    /// As [`SinkPart::prefetch_edges`].
    fn prefetch_edges(&self);
}

/// Implements [`ValueSink`] for an `f32` output through its [`Sink`] impl.
macro_rules! value_sink {
    ($out:ty, $part:ident, dense: $dense:expr) => {
        impl ValueSink for $out {
            type Values<'p> = $part<'p, f32>;
            fn start_values(&mut self, n_cols: u32) {
                Sink::start(self, n_cols)
            }
            fn extend_values(&mut self, rows: &AddedRows<'_>) -> Result<()> {
                Sink::extend(self, rows)
            }
            fn split_values(&mut self, cuts: &[usize]) -> Vec<$part<'_, f32>> {
                Sink::split(self, cuts)
            }
        }

        impl ValuePart for $part<'_, f32> {
            fn dense(&mut self) -> Option<DensePart<'_, f32>> {
                $dense(self)
            }
            fn write_values(&mut self, row: usize, columns: &[i32], values: &[f32]) {
                $part::write_values(self, row, columns, values)
            }
            fn prefetch_edges(&self) {
                SinkPart::prefetch_edges(self)
            }
        }
    };
}

value_sink!(Csr<f32>, CsrPart, dense: |_| None);
value_sink!(Dense<f32>, DensePart, dense: dense_rows);

/// A dense part's rows as [`ValuePart::dense`] gives them.
fn dense_rows<'a>(part: &'a mut DensePart<'_, f32>) -> Option<DensePart<'a, f32>> {
    Some(part.reborrow())
}

impl<S: ValueSink> ValueSink for &mut S {
    type Values<'p>
        = S::Values<'p>
    where
        Self: 'p;
    fn start_values(&mut self, n_cols: u32) {
        (**self).start_values(n_cols)
    }
    fn extend_values(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        (**self).extend_values(rows)
    }
    fn split_values(&mut self, cuts: &[usize]) -> Vec<Self::Values<'_>> {
        (**self).split_values(cuts)
    }
}

/// A transformed output: each row's total from all its genes, then the
/// gene selection (or mapping) when given, then the values of the
/// transform, into `inner`.
pub(crate) struct Transformed<'g, S> {
    inner: S,
    genes: Option<&'g GeneSelection>,
    transform: Transform,
    kept: Vec<i64>,
}

impl<'g, S: ValueSink> Transformed<'g, S> {
    /// `inner` over the columns of `genes` (every gene when `None`).
    pub(crate) fn new(
        inner: S,
        genes: Option<&'g GeneSelection>,
        transform: Transform,
    ) -> Transformed<'g, S> {
        Transformed {
            inner,
            genes,
            transform,
            kept: Vec::new(),
        }
    }
}

impl<S: ValueSink> Sink for Transformed<'_, S> {
    type Part<'p>
        = TransformedPart<'p, S::Values<'p>>
    where
        Self: 'p;

    fn stores_rows(&self) -> bool {
        false
    }

    fn sizes_rows(&self) -> bool {
        self.inner.sizes_rows()
    }

    fn start(&mut self, n_cols: u32) {
        self.inner
            .start_values(self.genes.map_or(n_cols, |g| g.len() as u32));
    }

    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        let Some(selection) = self
            .genes
            .filter(|g| self.inner.sizes_rows() && !g.keeps_every_gene())
        else {
            return self.inner.extend_values(rows);
        };
        kept_offsets(selection, rows, &mut self.kept)?;
        self.inner.extend_values(&AddedRows::new(&self.kept))
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<Self::Part<'_>> {
        let (genes, transform) = (self.genes, self.transform);
        self.inner
            .split_values(cuts)
            .into_iter()
            .map(|inner| TransformedPart {
                inner,
                genes,
                transform,
            })
            .collect()
    }
}

/// Rows of a [`Transformed`] output.
pub(crate) struct TransformedPart<'g, P> {
    inner: P,
    genes: Option<&'g GeneSelection>,
    transform: Transform,
}

/// The buffers a row is transformed in.
#[derive(Default)]
struct RowScratch {
    /// Puts a row's kept genes in column order, for a CSR output over a
    /// selection out of gene order.
    mapper: RowMapper<u32>,
    columns: Vec<i32>,
    /// The counts of the kept genes.
    counts: Vec<u32>,
    values: Vec<f32>,
}

thread_local! {
    /// The buffers a thread transforms rows in, kept from row to row and
    /// read to read: a part is often a single row (a batch's row scattered
    /// from its chunk), so buffers of its own would be grown for each.
    static SCRATCH: RefCell<RowScratch> = RefCell::default();
}

impl<P: ValuePart> SinkPart for TransformedPart<'_, P> {
    type Value = f32;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [f32])> {
        None
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        SCRATCH.with_borrow_mut(|s| self.write_row_in(row, (genes, counts), None, s));
    }

    fn uses_totals(&self) -> bool {
        true
    }

    fn write_mapped_row(&mut self, row: usize, genes: &[i32], counts: &[i32], total: u64) {
        SCRATCH.with_borrow_mut(|s| self.write_row_in(row, (genes, counts), Some(total), s));
    }

    fn prefetch_edges(&self) {
        self.inner.prefetch_edges()
    }
}

impl<P: ValuePart> TransformedPart<'_, P> {
    /// [`SinkPart::write_row`] in the buffers `s`, which only grow: a row
    /// is kept in their fronts, never zeroed first. `total`, the cell's
    /// total where the row lacks some of its genes (see [`RowValues::new`]).
    fn write_row_in(
        &mut self,
        row: usize,
        (genes, counts): (&[i32], &[i32]),
        total: Option<u64>,
        s: &mut RowScratch,
    ) {
        let counts: &[u32] = bytemuck::cast_slice(counts);
        let n = genes.len();
        at_least(&mut s.columns, n);
        at_least(&mut s.counts, n);
        at_least(&mut s.values, n);
        let values = RowValues::new(self.transform, counts, total);
        if let (Some(selection), Some(mut dense)) = (self.genes, self.inner.dense()) {
            let (offsets, kept) = (&mut s.columns[..n], &mut s.counts[..n]);
            if let Some((table, k)) = selection.keep_offsets(genes, counts, offsets, kept) {
                let (offsets, kept) = (&offsets[..k], &kept[..k]);
                dense.compose(row, |out| values.scatter(table, offsets, kept, out));
                return;
            }
        }
        let ascending = self.inner.dense().is_none();
        let (columns, kept) = match self.genes {
            None => (genes, counts),
            // Kept in the row's order: a selection in gene order, or an
            // output that takes its columns in any order.
            Some(selection) if selection.is_monotone() || !ascending => {
                let k = selection.keep_row(genes, counts, &mut s.columns[..n], &mut s.counts[..n]);
                (&s.columns[..k], &s.counts[..k])
            }
            Some(selection) => {
                let k = s.mapper.take(selection, genes, counts);
                s.mapper.emit(&mut s.columns[..k], &mut s.counts[..k]);
                (&s.columns[..k], &s.counts[..k])
            }
        };
        let out = &mut s.values[..kept.len()];
        values.write(kept, out);
        self.inner.write_values(row, columns, out);
    }
}

/// Grows `v` to at least `n` values (a buffer's front holds a row).
pub(crate) fn at_least<T: Copy + Default>(v: &mut Vec<T>, n: usize) {
    if v.len() < n {
        v.resize(n, T::default());
    }
}

/// A cell's total: the sum of its stored counts, each read as `u32`. What
/// normalized values, Geneformer's `n_counts` and the gene statistics
/// divide by, and what a mapped row keeps of the genes it drops
/// ([`crate::engine::decoded::DecodedChunk::totals`]). Summed by the row
/// kernels' `scan`, a register at a time: compiled for the baseline
/// instruction set, the sum went two counts at a time (3% of a profile of
/// CSR batches over 2,000 genes, whose chunks are summed as they map).
pub(crate) fn count_total(counts: &[i32]) -> u64 {
    best_row_kernels().scan(bytemuck::cast_slice(counts)).0
}

/// The values of one row's counts (one cell total): the value of each
/// count below [`MEMO_SLOTS`] that the row holds is computed once (most
/// stored counts of single-cell data are small, so a row of thousands of
/// nonzeros computes a few dozen logarithms) and looked up for every count
/// by the row kernels; larger counts are computed one by one. Each value is
/// the one [`Transform::value`] gives.
pub(crate) struct RowValues {
    transform: Transform,
    total: u64,
    /// `memo[c]`: the value of count `c`, for the counts the row holds.
    memo: [f32; MEMO_SLOTS],
    /// Whether some count is at least `MEMO_SLOTS - 1` (the memo's last
    /// slot stands for all of them, so they are rewritten after a lookup).
    large: bool,
    kernels: &'static RowKernels,
}

impl RowValues {
    /// The values of the row of `counts` under `transform`, divided (when
    /// normalized) by `total`, the cell's total over all the genes it has,
    /// where `counts` are not all of them (a corpus member's row mapped
    /// into fewer genes), else by the sum of `counts`.
    pub(crate) fn new(transform: Transform, counts: &[u32], total: Option<u64>) -> RowValues {
        let kernels = best_row_kernels();
        let (sum, seen) = kernels.scan(counts);
        let total = total.unwrap_or(sum);
        let mut memo = [0.0; MEMO_SLOTS];
        // The last slot stands for the larger counts, whose values are
        // computed one by one: never read.
        let mut bits = seen & !(1 << (MEMO_SLOTS - 1));
        while bits != 0 {
            let c = bits.trailing_zeros();
            memo[c as usize] = transform.value(c, total);
            bits &= bits - 1;
        }
        RowValues {
            transform,
            total,
            memo,
            large: seen >> (MEMO_SLOTS - 1) != 0,
            kernels,
        }
    }

    /// Writes the value of each of `counts` (the row's, in any order) to `out`.
    pub(crate) fn write(&self, counts: &[u32], out: &mut [f32]) {
        if self.large {
            self.kernels
                .lookup_or(&self.memo, counts, out, |c| self.larger(c));
        } else {
            self.kernels.lookup(&self.memo, counts, out);
        }
    }

    /// Writes the value of each of `counts` to `out[table[o]]`, `o` its
    /// offset in `offsets`: a dense row's kept genes looked up, valued and
    /// stored in one pass ([`RowKernels::scatter_values`]), where a gather
    /// of their columns, a lookup of their values and a scatter of both had
    /// each made one.
    pub(crate) fn scatter(&self, table: &[i32], offsets: &[i32], counts: &[u32], out: &mut [f32]) {
        self.kernels
            .scatter_values(&self.memo, (table, offsets), counts, out, &|c| {
                self.larger(c)
            });
    }

    /// Writes over each of `slots` (the row's counts, in any order) the
    /// bits of its value.
    pub(crate) fn write_in_place(&self, slots: &mut [u32]) {
        self.kernels
            .values_in_place(&self.memo, slots, &|c| self.larger(c));
    }

    /// The value of a count without a memo slot of its own.
    fn larger(&self, count: u32) -> f32 {
        self.transform.value(count, self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_follow_the_documented_operations() {
        let n = Transform::NONE.normalize(1e4);
        assert_eq!(n.value(3, 7), ((3.0f64 / 7.0) * 1e4) as f32);
        let l = n.log1p();
        assert_eq!(l.value(3, 7), ((3.0f64 / 7.0) * 1e4).ln_1p() as f32);
        assert_eq!(Transform::NONE.log1p().value(5, 100), 6f64.ln() as f32);
        assert!(Transform::NONE.is_identity() && !l.is_identity());
        assert!(Transform::NONE.normalize(0.0).check().is_err());
        assert!(Transform::NONE.normalize(f64::NAN).check().is_err());
        assert!(l.check().is_ok());
    }

    #[test]
    fn row_values_are_the_formula_for_every_count() {
        // Small counts (memoized), the memo's last slot, larger ones and
        // the top of u32, in no order, in blocks with and without them.
        let mut counts: Vec<u32> = (0..40).map(|i| i % 7).collect();
        counts.extend([62, 63, 64, 500, 3, u32::MAX, 1, 63]);
        counts.extend((0..37).map(|i| i % 5));
        counts.push(70_000);
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        for transform in [
            Transform::NONE.log1p(),
            Transform::NONE.normalize(1e4),
            Transform::NONE.normalize(1e4).log1p(),
        ] {
            let values = RowValues::new(transform, &counts, None);
            let mut out = vec![f32::NAN; counts.len()];
            values.write(&counts, &mut out);
            let mut in_place = counts.clone();
            values.write_in_place(&mut in_place);
            for (i, (&c, &v)) in counts.iter().zip(&out).enumerate() {
                let want = transform.value(c, total);
                assert_eq!(v.to_bits(), want.to_bits(), "count {c} at {i}");
                assert_eq!(in_place[i], want.to_bits(), "count {c} at {i}, in place");
            }
        }
    }
}

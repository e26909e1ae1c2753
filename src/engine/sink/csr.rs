//! CSR rows of every gene as a sink: kept as stored, so decoded in place.

use crate::csr::Csr;
use crate::engine::genes::best_row_kernels;
use crate::error::Result;
use crate::kernels::rows::stream_part;
use crate::kernels::{DecodedCount, Stores};

use super::{convert, fit, split_off, AddedRows, Sink, SinkPart};

/// CSR rows of every gene: kept as stored, so decoded in place.
impl<V: DecodedCount> Sink for Csr<V> {
    type Part<'p> = CsrPart<'p, V>;

    fn stores_rows(&self) -> bool {
        true
    }

    fn start(&mut self, n_cols: u32) {
        self.n_cols = u64::from(n_cols);
        self.indptr.clear();
        self.indptr.push(0);
    }

    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        let base = *self.indptr.last().unwrap_or(&0);
        let offsets = rows.stored_offsets();
        self.indptr
            .extend(offsets.iter().skip(1).map(|&p| base + p));
        let total = *self.indptr.last().unwrap_or(&0) as usize;
        fit(&mut self.indices, base as usize, total);
        fit(&mut self.values, base as usize, total);
        Ok(())
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<CsrPart<'_, V>> {
        let added = cuts.last().copied().unwrap_or(0);
        let first = self.n_rows() - added;
        let indptr = &self.indptr[first..];
        let start = indptr[0] as usize;
        let (mut idx, mut val) = (&mut self.indices[start..], &mut self.values[start..]);
        cuts.windows(2)
            .map(|w| {
                let rows = &indptr[w[0]..=w[1]];
                let len = (rows[rows.len() - 1] - rows[0]) as usize;
                CsrPart {
                    indptr: rows,
                    indices: split_off(&mut idx, len),
                    values: split_off(&mut val, len),
                }
            })
            .collect()
    }
}

/// Rows of a [`Csr`] output.
pub struct CsrPart<'p, V> {
    indptr: &'p [i64],
    indices: &'p mut [i32],
    values: &'p mut [V],
}

impl<V: DecodedCount> SinkPart for CsrPart<'_, V> {
    type Value = V;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [V])> {
        Some((self.indices, self.values))
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        let (start, end) = self.span(row);
        self.indices[start..end].copy_from_slice(genes);
        convert(&mut self.values[start..end], counts);
    }

    /// A CSR output is read by its caller once the read is done: a batch of
    /// a window after the window is built, a read's rows after all of them.
    fn streams(&self) -> bool {
        true
    }

    fn prefetch_edges(&self) {
        Stores::Streaming.prefetch_edges(self.indices);
        Stores::Streaming.prefetch_edges(self.values);
    }
}

impl<V: bytemuck::Pod> CsrPart<'_, V> {
    /// Where row `row`'s nonzeros lie in the part's slices.
    fn span(&self, row: usize) -> (usize, usize) {
        let start = (self.indptr[row] - self.indptr[0]) as usize;
        (start, (self.indptr[row + 1] - self.indptr[0]) as usize)
    }

    /// Calls `f` with each of the part's rows' values, in order.
    pub(crate) fn for_each_row(&mut self, mut f: impl FnMut(&mut [V])) {
        for r in 0..self.indptr.len() - 1 {
            let (start, end) = self.span(r);
            f(&mut self.values[start..end]);
        }
    }

    /// Writes row `row` from its columns (ascending) and values, which
    /// fill exactly the length the row was sized to. They were composed in
    /// the cache (a transformed or selected row), and nothing reads the
    /// output before it is handed out, so they are streamed, both with one
    /// fence ([`RowKernels::stream_parts`](crate::kernels::rows::RowKernels::stream_parts)).
    pub(crate) fn write_values(&mut self, row: usize, columns: &[i32], values: &[V]) {
        let (start, end) = self.span(row);
        best_row_kernels().stream_parts(&mut [
            stream_part(columns, &mut self.indices[start..end]),
            stream_part(values, &mut self.values[start..end]),
        ]);
    }
}

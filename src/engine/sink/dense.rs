//! Dense row-major rows as a sink: each row composed in the cache and
//! streamed to its place.

use std::cell::RefCell;

use crate::engine::genes::best_row_kernels;
use crate::error::{Error, Result};
use crate::kernels::{Count, DecodedCount, Stores};

use super::{grow, split_off, AddedRows, Sink, SinkPart};

/// Dense row-major rows: `n_cols` values per row, zeros where nothing is stored.
#[derive(Clone, Debug, Default)]
pub struct Dense<V> {
    n_cols: usize,
    n_rows: usize,
    /// The rows, then (in a reused buffer) whatever it held past them.
    data: Vec<V>,
}

impl<V: PartialEq> PartialEq for Dense<V> {
    fn eq(&self, other: &Dense<V>) -> bool {
        (self.n_cols, self.n_rows, self.data()) == (other.n_cols, other.n_rows, other.data())
    }
}

impl<V> Dense<V> {
    /// Columns per row.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// The values, row after row.
    pub fn data(&self) -> &[V] {
        &self.data[..self.n_rows * self.n_cols]
    }

    /// The values, row after row, and the number of columns.
    pub fn into_parts(mut self) -> (usize, Vec<V>) {
        self.data.truncate(self.n_rows * self.n_cols);
        (self.n_cols, self.data)
    }

    /// No rows, to be built in `data`'s allocation: its contents are
    /// written over, every row zeroed by its part before its stores, so
    /// they are neither zeroed nor dropped first.
    pub(crate) fn in_buffer(data: Vec<V>) -> Dense<V> {
        Dense {
            n_cols: 0,
            n_rows: 0,
            data,
        }
    }
}

impl<V: DecodedCount> Sink for Dense<V> {
    type Part<'p> = DensePart<'p, V>;

    fn stores_rows(&self) -> bool {
        false
    }

    fn sizes_rows(&self) -> bool {
        false
    }

    fn start(&mut self, n_cols: u32) {
        self.n_cols = n_cols as usize;
        self.n_rows = 0;
    }

    /// Sizes the rows without zeroing those the buffer already holds (a
    /// recycled batch's, or rows of an earlier read): every row of a dense
    /// output reaches its part's `write_row`, which zeroes the row just
    /// before its stores, so zeroing it here too would only write it twice.
    /// What the buffer holds past the rows is never read.
    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        let n_rows = self.n_rows + rows.len();
        let too_many = || {
            Error::Input(format!(
                "{n_rows} dense rows of {} columns do not fit in memory: read fewer cells or \
                 genes at a time",
                self.n_cols
            ))
        };
        let len = n_rows.checked_mul(self.n_cols).ok_or_else(too_many)?;
        if !grow(&mut self.data, len, V::default()) {
            return Err(too_many());
        }
        self.n_rows = n_rows;
        Ok(())
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<DensePart<'_, V>> {
        let added = cuts.last().copied().unwrap_or(0);
        let n_cols = self.n_cols;
        let mut rest = &mut self.data[(self.n_rows - added) * n_cols..self.n_rows * n_cols];
        cuts.windows(2)
            .map(|w| DensePart {
                n_cols,
                data: split_off(&mut rest, (w[1] - w[0]) * n_cols),
            })
            .collect()
    }
}

/// Rows of a [`Dense`] output.
pub struct DensePart<'p, V> {
    n_cols: usize,
    data: &'p mut [V],
}

impl<V: DecodedCount> SinkPart for DensePart<'_, V> {
    type Value = V;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [V])> {
        None
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        let values = counts.iter().map(|&c| V::from_u32(c as u32));
        self.write_at(row, genes.iter().copied().zip(values));
    }

    fn prefetch_edges(&self) {
        Stores::Streaming.prefetch_edges(self.data);
    }
}

thread_local! {
    /// The dense row a thread is composing (see [`DensePart::compose`]),
    /// as words that any count type's values fit.
    static ROW: RefCell<Vec<u64>> = RefCell::default();
}

impl<V: Count> DensePart<'_, V> {
    /// The same rows, borrowed for a shorter while.
    pub(crate) fn reborrow(&mut self) -> DensePart<'_, V> {
        DensePart {
            n_cols: self.n_cols,
            data: &mut *self.data,
        }
    }

    /// Writes row `row`: zeros, then what `set` stores into them. Every
    /// write of a dense row comes here, the one place a row is zeroed
    /// (sizing leaves a reused buffer's contents). The row is composed in
    /// the thread's buffer, which stays in cache from row to row, and
    /// streamed to its place whole
    /// ([`RowKernels::stream`](crate::kernels::rows::RowKernels::stream)):
    /// each of its bytes is written there once, in order, without its line
    /// being read first. A row of a buffer last written long before, zeroed
    /// in place and then stored into, took 17% of the samples of a profile
    /// of normalized dense batches (its scattered stores missed the cache
    /// that the zeroing had gone past); composed here and copied plainly,
    /// 11%.
    pub(crate) fn compose(&mut self, row: usize, set: impl FnOnce(&mut [V])) {
        let n = self.n_cols;
        let out = &mut self.data[row * n..(row + 1) * n];
        ROW.with_borrow_mut(|words| {
            let len = (n * size_of::<V>()).div_ceil(size_of::<u64>());
            if words.len() < len {
                words.resize(len, 0);
            }
            let scratch = &mut bytemuck::cast_slice_mut::<u64, V>(&mut words[..len])[..n];
            scratch.fill(V::default());
            set(scratch);
            best_row_kernels().stream(scratch, out);
        });
    }

    /// Writes row `row`'s `values` at `columns` (the other columns stay zero).
    pub(crate) fn write_values(&mut self, row: usize, columns: &[i32], values: &[V]) {
        self.write_at(row, columns.iter().copied().zip(values.iter().copied()));
    }

    /// Writes row `row`: each `(column, value)` of `entries`, zeros
    /// elsewhere.
    fn write_at(&mut self, row: usize, entries: impl Iterator<Item = (i32, V)>) {
        self.compose(row, |out| {
            for (c, v) in entries {
                out[c as usize] = v;
            }
        });
    }
}

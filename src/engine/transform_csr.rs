//! Transformed CSR rows of every gene, decoded in place: the fast form of a
//! normalized (or log1p) read in the dataset's full gene space.
//!
//! Rows of every gene are kept as stored, so whole chunks decode straight
//! into the output's slices, as for plain CSR: the value slots (`f32`)
//! receive the counts' `i32` bits, and when a task's part is done (dropped,
//! right after its rows were written, on the task's thread) each row is
//! summed and its slots rewritten as the transform's values. A row
//! scattered from its chunk (a batch's) is not decoded into the output but
//! handed to [`SinkPart::write_row`] from the decoder's scratch, still in
//! the cache: its values are computed there and the row streamed to its
//! place, so the output's lines are written once, without being read
//! first. The values are those of [`Transform::value`], the same as a
//! [`crate::engine::Transformed`] output's.

use std::cell::RefCell;

use crate::csr::Csr;
use crate::engine::sink::{AddedRows, CsrPart, Sink, SinkPart};
use crate::engine::transform::{at_least, RowValues, Transform};
use crate::error::Result;

/// CSR `f32` rows of every gene, transformed (see the module docs).
pub(crate) struct TransformedCsr<'o> {
    out: &'o mut Csr<f32>,
    transform: Transform,
}

impl<'o> TransformedCsr<'o> {
    pub(crate) fn new(out: &'o mut Csr<f32>, transform: Transform) -> TransformedCsr<'o> {
        TransformedCsr { out, transform }
    }
}

impl Sink for TransformedCsr<'_> {
    type Part<'p>
        = InPlacePart<'p>
    where
        Self: 'p;

    fn stores_rows(&self) -> bool {
        true
    }

    fn start(&mut self, n_cols: u32) {
        Sink::start(self.out, n_cols)
    }

    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        Sink::extend(self.out, rows)
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<InPlacePart<'_>> {
        let transform = self.transform;
        Sink::split(self.out, cuts)
            .into_iter()
            .map(|part| InPlacePart {
                part,
                transform,
                in_place: false,
            })
            .collect()
    }
}

/// Rows of a [`TransformedCsr`]: rows decoded into [`SinkPart::stored`]
/// hold counts until the part is dropped, rows written by
/// [`SinkPart::write_row`] their values at once.
pub(crate) struct InPlacePart<'p> {
    part: CsrPart<'p, f32>,
    transform: Transform,
    /// Whether rows were handed out to be decoded into (and so are
    /// rewritten as values when the part is dropped).
    in_place: bool,
}

impl SinkPart for InPlacePart<'_> {
    type Value = i32;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [i32])> {
        let (indices, values) = self.part.stored()?;
        self.in_place = true;
        Some((indices, bytemuck::cast_slice_mut(values)))
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        self.write_values(row, (genes, counts), None);
    }

    fn uses_totals(&self) -> bool {
        true
    }

    fn prefetch_edges(&self) {
        self.part.prefetch_edges()
    }

    fn write_mapped_row(&mut self, row: usize, genes: &[i32], counts: &[i32], total: u64) {
        self.write_values(row, (genes, counts), Some(total));
    }
}

impl InPlacePart<'_> {
    /// Writes row `row`'s values, normalized by `total` where the row lacks
    /// some of the cell's genes (see [`RowValues::new`]).
    fn write_values(&mut self, row: usize, (genes, counts): (&[i32], &[i32]), total: Option<u64>) {
        let counts: &[u32] = bytemuck::cast_slice(counts);
        VALUES.with_borrow_mut(|values| {
            at_least(values, counts.len());
            let values = &mut values[..counts.len()];
            RowValues::new(self.transform, counts, total).write(counts, values);
            self.part.write_values(row, genes, values);
        });
    }
}

thread_local! {
    /// The values of the row a thread is writing (see the module docs),
    /// in its front: the buffer only grows.
    static VALUES: RefCell<Vec<f32>> = RefCell::default();
}

impl Drop for InPlacePart<'_> {
    fn drop(&mut self) {
        if !self.in_place {
            return;
        }
        let transform = self.transform;
        self.part.for_each_row(|slots| {
            // Each slot holds a count's bits until it is rewritten.
            let counts: &mut [u32] = bytemuck::cast_slice_mut(slots);
            RowValues::new(transform, counts, None).write_in_place(counts);
        });
    }
}

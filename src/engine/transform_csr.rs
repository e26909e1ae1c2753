//! Transformed CSR rows of every gene, decoded in place: the fast form of a
//! normalized (or log1p) read in the dataset's full gene space.
//!
//! Rows of every gene are kept as stored, so chunks decode straight into the
//! output's slices, as for plain CSR: the value slots (`f32`) receive the
//! counts' `i32` bits, and when a task's part is done (dropped, right after
//! its rows were written, on the task's thread) each row is summed and its
//! slots rewritten as the transform's values. The values are those of
//! [`Transform::value`], the same as a [`crate::engine::Transformed`] output's.

use crate::csr::Csr;
use crate::engine::sink::{AddedRows, CsrPart, Sink, SinkPart};
use crate::engine::transform::{RowValues, Transform};
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
            .map(|part| InPlacePart { part, transform })
            .collect()
    }
}

/// Rows of a [`TransformedCsr`]: counts while being filled, values once dropped.
pub(crate) struct InPlacePart<'p> {
    part: CsrPart<'p, f32>,
    transform: Transform,
}

impl SinkPart for InPlacePart<'_> {
    type Value = i32;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [i32])> {
        let (indices, values) = self.part.stored()?;
        Some((indices, bytemuck::cast_slice_mut(values)))
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        self.part
            .write_values(row, genes, bytemuck::cast_slice(counts));
    }
}

impl Drop for InPlacePart<'_> {
    fn drop(&mut self) {
        let transform = self.transform;
        self.part.for_each_row(|slots| {
            // Each slot holds a count's bits until it is rewritten.
            let counts: &mut [u32] = bytemuck::cast_slice_mut(slots);
            RowValues::new(transform, counts).write_in_place(counts);
        });
    }
}

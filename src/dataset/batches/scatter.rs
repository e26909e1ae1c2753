//! Training batches built a window at a time, each output byte written once.
//!
//! Every batch of a block-shuffle window draws its rows from all of the
//! window's chunks. So the window's batches are built together, as one read
//! with an output per batch: each batch is sized exactly from the tiles'
//! indptr, then each chunk is decoded once, by one worker, its frames
//! decompressed once and the kernels run on each row's part of the planes,
//! writing the row straight into its batch (the plan's scatter fill). No row
//! passes through a chunk- or window-sized buffer. A corpus member's rows
//! whose genes all land in the vocabulary are as long as stored, so they
//! are built the same way and then put in the vocabulary's order where
//! they lie.
//!
//! A batch that straddles two windows gets a part from each; the parts are
//! joined when the second window is built. Only CSR batches of every gene
//! are built this way: a window's worth of dense rows would be far larger
//! than its decoded nonzeros, and the row lengths of a gene selection (or a
//! mapping that drops genes) are only known after decoding (those batches are cut from [`super::window`]).

use std::collections::BTreeMap;

use crate::csr::Csr;

/// One batch's rows from one window.
pub(crate) struct Part<V> {
    /// The batch's index.
    pub(crate) index: usize,
    /// The batch's cells that lie in the window, in batch order.
    pub(crate) cells: Vec<u64>,
    /// How many windows the batch spans (so how many parts it has).
    pub(crate) windows: usize,
    /// Their rows.
    pub(crate) rows: Csr<V>,
}

/// Batches built from the windows seen so far but not yet handed out.
pub(crate) struct Pending<V> {
    /// By batch index: the parts built, and how many windows the batch spans.
    batches: BTreeMap<usize, (Vec<Part<V>>, usize)>,
    /// The last window built (windows are built in epoch order).
    last_window: Option<usize>,
}

impl<V> Default for Pending<V> {
    fn default() -> Self {
        Pending {
            batches: BTreeMap::new(),
            last_window: None,
        }
    }
}

impl<V: Copy> Pending<V> {
    /// Whether window `w` still has to be built.
    pub(crate) fn needs(&self, w: usize) -> bool {
        self.last_window.is_none_or(|last| w > last)
    }

    /// Records that window `w` was built into `parts`.
    pub(crate) fn add(&mut self, w: usize, parts: Vec<Part<V>>) {
        for part in parts {
            let entry = self
                .batches
                .entry(part.index)
                .or_insert_with(|| (Vec::new(), part.windows));
            entry.0.push(part);
        }
        self.last_window = Some(w);
    }

    /// Batch `index`, if all of its windows were built: its cells and rows.
    pub(crate) fn take(&mut self, index: usize) -> Option<(Vec<u64>, Csr<V>)> {
        let (parts, windows) = self.batches.get(&index)?;
        if parts.len() < *windows {
            return None;
        }
        let (parts, _) = self.batches.remove(&index)?;
        let mut parts = parts.into_iter();
        let first = parts.next()?;
        let (mut cells, mut rows) = (first.cells, first.rows);
        for part in parts {
            cells.extend_from_slice(&part.cells);
            let base = rows.nnz() as i64;
            rows.indptr
                .extend(part.rows.indptr[1..].iter().map(|&p| base + p));
            rows.indices.extend_from_slice(&part.rows.indices);
            rows.values.extend_from_slice(&part.rows.values);
        }
        Some((cells, rows))
    }
}

//! Training batches built a window at a time, each output byte written once.
//!
//! Every batch of a block-shuffle window draws its rows from all of the
//! window's chunks. So the window's batches are built together, as one read
//! with an output per batch: each batch is sized from the tiles' indptr
//! (CSR rows) or from its number of rows (rows of a fixed width: dense rows,
//! tokens), then each chunk is decoded once, by one worker, its frames
//! decompressed once and the kernels run on each row's part of the planes.
//! A CSR row of every gene is written straight into its batch (the plan's
//! scatter fill), and normalized there when asked; a fixed-width row is
//! decoded into the worker's scratch (a chunk's rows at most, in cache) and
//! written into its batch from there, over the gene selection, transformed
//! or tokenized. No row passes through a window-sized buffer. A corpus
//! member's rows whose genes all land in the vocabulary are as long as
//! stored, so they are built the same way and then put in the vocabulary's
//! order where they lie.
//!
//! A batch that straddles two windows is started with the first and
//! appended to with the second. Only CSR batches over a gene selection (or
//! a mapping that drops genes) are not built this way: their row lengths
//! are only known after decoding (those batches are cut from
//! [`super::window`]).

use std::collections::BTreeMap;

use crate::dataset::batches::BatchRows;
use crate::error::Result;

/// A batch being built from the windows it spans.
pub(crate) struct Building<V> {
    /// The batch's index.
    pub(crate) index: usize,
    /// Its cells in the windows built so far, in batch order.
    pub(crate) cells: Vec<u64>,
    /// Its rows so far (`None` only while a window is being built into them).
    pub(crate) rows: Option<BatchRows<V>>,
    /// Windows still to build it from.
    windows_left: usize,
}

/// Batches built from the windows seen so far but not yet handed out.
pub(crate) struct Pending<V> {
    batches: BTreeMap<usize, Building<V>>,
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

impl<V> Pending<V> {
    /// Whether window `w` still has to be built.
    pub(crate) fn needs(&self, w: usize) -> bool {
        self.last_window.is_none_or(|last| w > last)
    }

    /// Batch `index`, spanning `windows` windows, taken out to have a
    /// window built into it: as built so far, or new with rows `start`s.
    pub(crate) fn open(
        &mut self,
        index: usize,
        windows: usize,
        start: impl FnOnce() -> Result<BatchRows<V>>,
    ) -> Result<Building<V>> {
        match self.batches.remove(&index) {
            Some(b) => Ok(b),
            None => Ok(Building {
                index,
                cells: Vec::new(),
                rows: Some(start()?),
                windows_left: windows,
            }),
        }
    }

    /// Puts back `built`, the batches opened for window `w`, now built
    /// from it.
    pub(crate) fn close(&mut self, w: usize, built: Vec<Building<V>>) {
        for mut b in built {
            b.windows_left -= 1;
            self.batches.insert(b.index, b);
        }
        self.last_window = Some(w);
    }

    /// Batch `index`, if all of its windows were built: its cells and rows.
    pub(crate) fn take(&mut self, index: usize) -> Option<(Vec<u64>, BatchRows<V>)> {
        if self.batches.get(&index)?.windows_left > 0 {
            return None;
        }
        let b = self.batches.remove(&index)?;
        Some((b.cells, b.rows?))
    }
}

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
//!
//! Where a window's rows do not fit the iterator's bound, its batches are
//! built a share at a time ([`Pending::share`] of them a read, as many as
//! fit): each read decompresses again every chunk holding one of its rows,
//! about all of the window's, so the bound trades decode time for memory
//! in proportion (two shares, about twice the decode) rather than falling
//! back to batches read one by one through a chunk cache, which decodes
//! each chunk for nearly every batch once the cache is short.

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
    /// The last window built whole (windows are built in epoch order).
    last_window: Option<usize>,
    /// The window being built a share of its batches at a time, and the
    /// first of its batches not built from it yet.
    partial: Option<(usize, usize)>,
    /// The most batches one read builds from a window (see
    /// [`WindowBudget::passes`](super::window::WindowBudget::passes)).
    share: usize,
}

impl<V> Pending<V> {
    /// No batches yet, each window's built at most `share` at a time.
    pub(crate) fn new(share: usize) -> Pending<V> {
        Pending {
            batches: BTreeMap::new(),
            last_window: None,
            partial: None,
            share: share.max(1),
        }
    }

    /// The most batches one read builds from a window.
    pub(crate) fn share(&self) -> usize {
        self.share
    }

    /// Whether window `w` still has batches to build from it.
    pub(crate) fn needs(&self, w: usize) -> bool {
        self.last_window.is_none_or(|last| w > last)
    }

    /// Where the next read of window `w` starts for batch `index` to have
    /// its part of it: `index` itself when the window is not begun (the
    /// batches before it that draw from it were made otherwise), the first
    /// batch not built from it when it is built in shares and `index` is
    /// not built yet, `None` when batch `index` has its part.
    pub(crate) fn next_read(&self, w: usize, index: usize) -> Option<usize> {
        if !self.needs(w) {
            return None;
        }
        match self.partial {
            Some((p, next)) if p == w => (index >= next).then_some(next),
            _ => Some(index),
        }
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
    /// from it; `next`, the first of the window's batches still to build
    /// from it, if any.
    pub(crate) fn close(&mut self, w: usize, built: Vec<Building<V>>, next: Option<usize>) {
        for mut b in built {
            b.windows_left -= 1;
            self.batches.insert(b.index, b);
        }
        match next {
            Some(next) => self.partial = Some((w, next)),
            None => {
                self.partial = None;
                self.last_window = Some(w);
            }
        }
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

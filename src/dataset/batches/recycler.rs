//! Buffers of batches the caller is done with, handed back to be built in.
//!
//! Fresh pages cost as much to fault in as the rows cost to decode, so a
//! caller that is done with a batch can hand its buffers back
//! ([`crate::dataset::BatchIter::recycle`]); later batches are then built in
//! them, and a warm loop allocates nothing. It also carries the next epoch
//! made ahead from one iterator to the next (see [`super::ahead`]), and the
//! buffers of an epoch's decoded windows to the next epoch's.

use std::sync::{Arc, Mutex, PoisonError};

use crate::csr::Csr;
use crate::dataset::batches::ahead::Ahead;
use crate::dataset::batches::BatchRows;
use crate::engine::decoded::DecodedChunk;
use crate::engine::Dense;
use crate::kernels::DecodedCount;
use crate::tokenize::TokenRows;

/// Hands the buffers of batches the caller is done with back to their batch
/// iterator, which builds later batches in them (see
/// [`crate::dataset::BatchIter::recycle`]). Buffers come back one by one, so
/// a caller whose arrays die at different times (numpy arrays over a
/// batch's buffers, say) can give each back as it goes. Cheap to clone; may
/// outlive the iterator (what it then gets back is dropped with it). Value
/// buffers of `f32` and `i32` batches share one pool (both are 4-byte words).
/// An iterator that cut its batches from decoded windows (CSR over a gene
/// selection) leaves it the buffers of its decoded chunks, about a window's
/// decoded rows, for the next epoch's windows: they are freed when that
/// epoch takes them or the recycler is dropped.
#[derive(Clone, Debug)]
pub struct Recycler(Arc<Spare>);

/// The kept buffers, by kind, and how many of each are kept at most.
#[derive(Debug)]
struct Spare {
    indptr: Mutex<Vec<Vec<i64>>>,
    indices: Mutex<Vec<Vec<i32>>>,
    values: Mutex<Vec<Vec<u32>>>,
    /// Token batches' attention masks.
    masks: Mutex<Vec<Vec<u8>>>,
    limit: usize,
    /// The next epoch, made ahead by the last iterator (see [`super::ahead`]).
    ahead: Mutex<Option<Ahead>>,
    /// The buffers of the last epoch's decoded window chunks, for the next
    /// epoch's windows (see [`Recycler::give_chunks`]).
    chunks: Mutex<Vec<DecodedChunk>>,
}

/// Keeps `buf` in `kept` unless `limit` are kept already.
fn keep<T>(kept: &Mutex<Vec<Vec<T>>>, buf: Vec<T>, limit: usize) {
    let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
    if kept.len() < limit {
        kept.push(buf);
    }
}

/// A kept buffer, or a new empty one.
fn reuse<T>(kept: &Mutex<Vec<Vec<T>>>) -> Vec<T> {
    let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
    kept.pop().unwrap_or_default()
}

impl Recycler {
    /// A recycler keeping at most `limit` buffers of each kind.
    pub fn new(limit: usize) -> Recycler {
        Recycler(Arc::new(Spare {
            indptr: Mutex::default(),
            indices: Mutex::default(),
            values: Mutex::default(),
            masks: Mutex::default(),
            limit,
            ahead: Mutex::default(),
            chunks: Mutex::default(),
        }))
    }

    /// Keeps the buffers of an epoch's decoded window chunks (batches over
    /// a gene selection are cut from whole decoded windows), unless some are
    /// kept already: at most one epoch's, about a window's worth. Without
    /// them the next epoch's first window is decoded into fresh memory,
    /// every page of it faulted in: with the demo's windows of 4 tiles,
    /// about 276 MiB an epoch (see the README).
    pub(crate) fn give_chunks(&self, chunks: Vec<DecodedChunk>) {
        let mut kept = self.0.chunks.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.is_empty() {
            *kept = chunks;
        }
    }

    /// The chunk buffers kept by [`Recycler::give_chunks`], if any.
    pub(crate) fn take_chunks(&self) -> Vec<DecodedChunk> {
        std::mem::take(&mut *self.0.chunks.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Gives back every buffer of `csr`.
    pub fn give<V: DecodedCount + bytemuck::Pod>(&self, csr: Csr<V>) {
        self.give_indptr(csr.indptr);
        self.give_indices(csr.indices);
        self.give_values(csr.values);
    }

    /// Gives back a batch's `indptr` buffer.
    pub fn give_indptr(&self, buf: Vec<i64>) {
        keep(&self.0.indptr, buf, self.0.limit);
    }

    /// Gives back a batch's `indices` buffer.
    pub fn give_indices(&self, buf: Vec<i32>) {
        keep(&self.0.indices, buf, self.0.limit);
    }

    /// Gives back a batch's `values` buffer (of `f32` or `i32` counts).
    pub fn give_values<V: DecodedCount + bytemuck::Pod>(&self, buf: Vec<V>) {
        // Same size and alignment as u32, so the cast keeps the allocation.
        if let Ok(words) = bytemuck::allocation::try_cast_vec::<V, u32>(buf) {
            keep(&self.0.values, words, self.0.limit);
        }
    }

    /// Gives back every buffer of a batch's rows: CSR, dense or tokens (ids
    /// share the pool of `indices`, scGPT's values that of `values`).
    pub fn give_rows<V: DecodedCount + bytemuck::Pod>(&self, rows: BatchRows<V>) {
        match rows {
            BatchRows::Csr(csr) => self.give(csr),
            BatchRows::Dense(dense) => self.give_values(dense.into_parts().1),
            BatchRows::Tokens(tokens) => {
                self.give_indices(tokens.input_ids);
                keep(&self.0.masks, tokens.attention_mask, self.0.limit);
                if let Some(values) = tokens.values {
                    self.give_values(values);
                }
            }
        }
    }

    /// Dense rows to build a batch in, in a given-back buffer if any.
    pub(crate) fn take_dense<V: DecodedCount + bytemuck::Pod>(&self) -> Dense<V> {
        Dense::in_buffer(values_of(reuse(&self.0.values)))
    }

    /// Token rows to build a batch in, in given-back buffers if any.
    pub(crate) fn take_tokens(&self) -> TokenRows {
        TokenRows::in_buffers(
            reuse(&self.0.indices),
            Some(values_of(reuse(&self.0.values))),
            reuse(&self.0.masks),
        )
    }

    /// Whether it holds a next epoch made ahead
    /// ([`BatchConfig::next_epoch_ahead`](crate::dataset::BatchConfig::next_epoch_ahead)),
    /// made or being made, for the next iterator made with it to take.
    pub fn holds_next_epoch(&self) -> bool {
        self.0
            .ahead
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Drops the next epoch made ahead, if any, once its thread is done (it
    /// is not stopped midway). For a caller that ends its epochs and wants nothing left
    /// running behind it: a benchmark that times what comes next, a process
    /// measuring its memory.
    pub fn forget_next_epoch(&self) {
        if let Some(ahead) = self.take_ahead() {
            ahead.finish();
        }
    }

    /// Keeps the next epoch made ahead, in place of any other.
    pub(crate) fn leave_ahead(&self, ahead: Ahead) {
        *self.0.ahead.lock().unwrap_or_else(PoisonError::into_inner) = Some(ahead);
    }

    /// The next epoch made ahead, if any, no longer kept.
    pub(crate) fn take_ahead(&self) -> Option<Ahead> {
        self.0
            .ahead
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Buffers to build a batch in: given-back ones where there are any.
    pub(crate) fn take<V: DecodedCount + bytemuck::Pod>(&self) -> Csr<V> {
        let values = values_of(reuse(&self.0.values));
        Csr {
            n_cols: 0,
            indptr: reuse(&self.0.indptr),
            indices: reuse(&self.0.indices),
            values,
        }
    }
}

/// A kept value buffer as values of `V` (same size and alignment as `u32`,
/// so the allocation is kept).
fn values_of<V: DecodedCount + bytemuck::Pod>(words: Vec<u32>) -> Vec<V> {
    bytemuck::allocation::try_cast_vec::<u32, V>(words).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_as_either_value_type_up_to_the_limit() {
        let r = Recycler::new(1);
        let mut f = Csr::<f32>::empty(3);
        f.values = Vec::with_capacity(100);
        r.give(f);
        r.give(Csr::<f32>::empty(3));
        let i: Csr<i32> = r.take();
        assert!(
            i.values.capacity() >= 100,
            "the kept f32 buffer serves i32 values"
        );
        let again: Csr<f32> = r.take();
        assert_eq!(
            again.values.capacity(),
            0,
            "only one buffer of each kind is kept"
        );
    }

    #[test]
    fn one_epochs_window_chunks_are_kept_for_the_next() {
        let r = Recycler::new(1);
        let chunks = |n: usize, capacity: usize| -> Vec<DecodedChunk> {
            (0..n)
                .map(|_| DecodedChunk {
                    indices: Vec::with_capacity(capacity),
                    ..DecodedChunk::default()
                })
                .collect()
        };
        r.give_chunks(chunks(3, 50));
        // A second epoch's chunks, while the first's are kept, are dropped:
        // at most one epoch's are held.
        r.give_chunks(chunks(5, 7));
        let kept = r.take_chunks();
        assert_eq!(kept.len(), 3);
        assert!(kept.iter().all(|c| c.indices.capacity() >= 50));
        assert!(r.take_chunks().is_empty(), "taken once");
        r.give_chunks(chunks(5, 7));
        assert_eq!(r.take_chunks().len(), 5, "kept again once taken");
    }
}

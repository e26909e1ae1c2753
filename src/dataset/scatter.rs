//! Training batches built a window at a time, each output byte written once.
//!
//! Every batch of a block-shuffle window draws its rows from all of the
//! window's chunks. So the window's batches are built together: their rows'
//! lengths come from the tiles' indptr, so each batch is allocated at its
//! exact size and cut into one slice per row; then each chunk is decoded once,
//! by one worker, its frames decompressed once and the kernels run on each
//! row's part of the planes, writing the row straight into its slice
//! ([`crate::engine::ChunkDecoder::decode_rows`]). No row passes through a
//! chunk- or window-sized buffer.
//!
//! Fresh pages cost as much to fault in as the rows cost to decode, so a
//! caller that is done with a batch can hand its buffers back
//! ([`crate::dataset::BatchIter::recycle`]); parts are then built in them,
//! and a warm loop allocates nothing.
//!
//! A batch that straddles two windows gets a part from each; the parts are
//! joined when the second window is built. Only CSR batches of every gene
//! are built this way: a window's worth of dense rows would be far larger
//! than its decoded nonzeros, and a gene selection's row lengths are only
//! known after decoding (those batches are cut from [`super::window`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;

use crate::csr::Csr;
use crate::dataset::cache::ChunkCache;
use crate::dataset::read::{chunk_ends, split_off, ReadStats};
use crate::dataset::Dataset;
use crate::engine::RowOut;
use crate::error::{Error, Result};
use crate::format::tile::TileView;

/// One batch's rows from one window.
pub(crate) struct Part {
    /// The batch's index.
    pub(crate) index: usize,
    /// The batch's cells that lie in the window, in batch order.
    pub(crate) cells: Vec<u64>,
    /// How many windows the batch spans (so how many parts it has).
    pub(crate) windows: usize,
    /// Their rows (filled by [`build_window`]).
    pub(crate) rows: Csr<f32>,
}

/// Hands the buffers of batches the caller is done with back to their batch
/// iterator, which builds later batches in them (see
/// [`crate::dataset::BatchIter::recycle`]). Buffers come back one by one, so
/// a caller whose arrays die at different times (numpy arrays over a
/// batch's buffers, say) can give each back as it goes. Cheap to clone; may
/// outlive the iterator (what it then gets back is dropped with it).
#[derive(Clone, Debug)]
pub struct Recycler(Arc<Spare>);

/// The kept buffers, by kind, and how many of each are kept at most.
#[derive(Debug)]
struct Spare {
    indptr: Mutex<Vec<Vec<i64>>>,
    indices: Mutex<Vec<Vec<i32>>>,
    values: Mutex<Vec<Vec<f32>>>,
    limit: usize,
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
    pub(crate) fn new(limit: usize) -> Recycler {
        Recycler(Arc::new(Spare {
            indptr: Mutex::default(),
            indices: Mutex::default(),
            values: Mutex::default(),
            limit,
        }))
    }

    /// Gives back every buffer of `csr`.
    pub fn give(&self, csr: Csr<f32>) {
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

    /// Gives back a batch's `values` buffer.
    pub fn give_values(&self, buf: Vec<f32>) {
        keep(&self.0.values, buf, self.0.limit);
    }

    /// Buffers to build a part in: given-back ones where there are any.
    fn take(&self) -> Csr<f32> {
        Csr {
            n_cols: 0,
            indptr: reuse(&self.0.indptr),
            indices: reuse(&self.0.indices),
            values: reuse(&self.0.values),
        }
    }
}

/// Makes `v` hold exactly `n` elements for the rows to overwrite. A buffer
/// with room is reused without moving its contents; one without is replaced
/// by a new one with an eighth more room, so that batches of a similar size
/// (as a window's are) fit in it when it comes back.
fn sized<T: Copy + Default>(v: &mut Vec<T>, n: usize) {
    if v.capacity() < n {
        // Zeroed memory comes as fresh pages, faulted in by the workers as
        // they write the rows rather than all at once here.
        *v = vec![T::default(); n + n / 8];
    }
    if v.len() >= n {
        v.truncate(n);
    } else {
        v.resize(n, T::default());
    }
}

/// Batches built from the windows seen so far but not yet handed out.
#[derive(Default)]
pub(crate) struct Pending {
    /// By batch index: the parts built, and how many windows the batch spans.
    batches: BTreeMap<usize, (Vec<Part>, usize)>,
    /// The last window built (windows are built in epoch order).
    last_window: Option<usize>,
}

impl Pending {
    /// Whether window `w` still has to be built.
    pub(crate) fn needs(&self, w: usize) -> bool {
        self.last_window.is_none_or(|last| w > last)
    }

    /// Records that window `w` was built into `parts`.
    pub(crate) fn add(&mut self, w: usize, parts: Vec<Part>) {
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
    pub(crate) fn take(&mut self, index: usize) -> Option<(Vec<u64>, Csr<f32>)> {
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

/// Where one row goes: its slices of a part's indices and values.
type Dst<'o> = (&'o mut [i32], &'o mut [f32]);

/// The rows one chunk fills: each local cell and where it goes.
type ChunkRows<'o> = Vec<RowOut<'o, f32>>;

/// Fills `parts` (each with its cells, which lie in the window of `tiles`,
/// and empty rows) from that window: every row decoded straight into its
/// place, in `recycled` buffers when there are any.
pub(crate) fn build_window(
    dataset: &Dataset,
    tiles: &[usize],
    parts: &mut [Part],
    cache: &ChunkCache,
    recycled: &Recycler,
) -> Result<ReadStats> {
    let mut stats = ReadStats::default();
    let fetched = dataset.fetch_tiles(tiles, cache, &mut stats)?;
    let view = |t: usize| {
        TileView::revalidated(fetched[&t].bytes.as_bytes()).expect("fetched tiles were validated")
    };
    let ends = chunk_ends(&fetched);
    let n_cols = dataset.n_genes() as usize;
    // Each part's rows: where they come from, and the part sized to hold them.
    let mut located = Vec::with_capacity(parts.len());
    for part in parts.iter_mut() {
        let rows: Vec<(usize, usize)> = part
            .cells
            .iter()
            .map(|&c| dataset.locate(c))
            .collect::<Result<_>>()?;
        let mut out = recycled.take();
        out.n_cols = n_cols as u64;
        out.indptr.clear();
        out.indptr.reserve(rows.len() + 1);
        out.indptr.push(0);
        let mut total = 0i64;
        for &(t, local) in &rows {
            let ip = view(t).indptr(local, local + 1);
            total += ip[1] - ip[0];
            out.indptr.push(total);
        }
        sized(&mut out.indices, total as usize);
        sized(&mut out.values, total as usize);
        located.push(rows);
        part.rows = out;
    }
    // Every row's slice, filed under the chunk holding it.
    let mut by_chunk: HashMap<(usize, usize), ChunkRows<'_>> = HashMap::new();
    for (rows, part) in located.iter().zip(parts.iter_mut()) {
        let csr = &mut part.rows;
        let (mut idx, mut val) = (&mut csr.indices[..], &mut csr.values[..]);
        let mut dsts: Vec<Dst<'_>> = Vec::with_capacity(rows.len());
        for w in csr.indptr.windows(2) {
            let len = (w[1] - w[0]) as usize;
            dsts.push((split_off(&mut idx, len), split_off(&mut val, len)));
        }
        for (&(t, local), dst) in rows.iter().zip(dsts) {
            let chunk = ends[&t].partition_point(|&e| e <= local as u64);
            by_chunk.entry((t, chunk)).or_default().push((local, dst));
        }
    }
    stats.chunks_touched += by_chunk.len();
    stats.chunks_decoded += by_chunk.len();
    let work: Vec<((usize, usize), ChunkRows<'_>)> = by_chunk.into_iter().collect();
    dataset.engine().install(|| {
        work.into_par_iter().try_for_each(|((t, c), mut rows)| {
            dataset
                .engine()
                .with_decoder(|d| d.decode_rows(&view(t), c, &mut rows))
                .map_err(|err| Error::InTile {
                    tile: t,
                    source: Box::new(err),
                })
        })
    })?;
    Ok(stats)
}

//! Training batches cut from a decoded window: the path of CSR rows over a
//! gene selection, whose lengths are known only once decoded (CSR batches
//! of every gene and rows of a fixed width are built straight from the
//! chunks, see [`super::scatter`]).
//!
//! Every batch of a block-shuffle window draws its cells from all of the
//! window's chunks, so every chunk of the window's tiles is decoded whole,
//! once, into buffers kept from the previous window (no page faults once
//! warm). A batch is then a read whose every segment is copied out of those
//! chunks (the plan's copy fill), in parallel pieces on the pool, the output
//! transforming each row as it goes.
//!
//! A window's output is the iterator's cache, either way: [`WindowBudget`]
//! decides from the manifest whether the largest window fits the configured
//! bound together with its compressed tiles, and how many bytes are left for
//! the tile cache.

use std::sync::Arc;

use crate::dataset::read::{Fetched, ReadStats};
use crate::dataset::tiles::{decode_into, pieces_in, Tiles};
use crate::engine::decoded::DecodedChunk;
use crate::engine::execute::{execute, Sources};
use crate::engine::plan::Policy;
use crate::engine::{CellSelection, Sink};
use crate::error::Result;

/// Whether decoded windows fit the iterator's memory bound, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowBudget {
    /// Bytes of the tile cache once the largest decoded window is set aside.
    pub(crate) tile_cache_bytes: usize,
}

impl WindowBudget {
    /// The budget for windows of `windows` (each a list of tiles) under a
    /// bound of `cache_bytes`: the largest window's rows (decoded as CSR, 8
    /// bytes per nonzero and per cell; or `row_bytes` per cell for rows of a
    /// fixed width, built a window's batches at once), plus an eighth of
    /// room, its compressed tiles in the cache, and the next window's tiles
    /// being fetched ahead must all fit. `None` when they do not: batches
    /// are then assembled chunk by chunk through a cache that re-decodes
    /// what it had to evict.
    pub(crate) fn new<'w, T: Tiles + ?Sized>(
        tiles: &T,
        windows: impl Iterator<Item = &'w [usize]>,
        cache_bytes: usize,
        row_bytes: Option<u64>,
    ) -> Option<WindowBudget> {
        let (mut decoded, mut compressed) = (0u64, 0u64);
        for window in windows {
            let sum =
                |f: &dyn Fn(usize) -> u64| window.iter().fold(0u64, |a, &t| a.saturating_add(f(t)));
            decoded = decoded.max(sum(&|t| {
                let (nnz, cells, _) = tiles.figures(t);
                match row_bytes {
                    Some(bytes) => cells.saturating_mul(bytes),
                    None => nnz
                        .saturating_add(cells)
                        .saturating_add(1)
                        .saturating_mul(8),
                }
            }));
            compressed = compressed.max(sum(&|t| tiles.figures(t).2));
        }
        // Batches built in fresh buffers get an eighth more room (see
        // `scatter::sized`): counted here, so the bound holds either way.
        let decoded = decoded.saturating_add(decoded / 8);
        let rest = (cache_bytes as u64).checked_sub(decoded)?;
        (rest >= 2 * compressed).then(|| WindowBudget {
            tile_cache_bytes: (rest - compressed) as usize,
        })
    }
}

/// The decoded chunks of the window being served.
#[derive(Default)]
pub(crate) struct WindowChunks {
    /// The window decoded (its index in the epoch order).
    window: Option<usize>,
    /// Its tiles and every chunk of them, decoded.
    fetched: Fetched,
    /// Buffers of the previous window's chunks, decoded into next.
    spare: Vec<DecodedChunk>,
}

impl WindowChunks {
    /// Whether window `w` is the decoded one.
    pub(crate) fn holds(&self, w: usize) -> bool {
        self.window == Some(w)
    }

    /// Makes window `w` (tiles `window` of `tiles`) the decoded one,
    /// decoding it unless it already is.
    pub(crate) fn enter<T: Tiles + ?Sized>(
        &mut self,
        tiles: &T,
        w: usize,
        window: &[usize],
    ) -> Result<ReadStats> {
        let mut stats = ReadStats::default();
        if self.window == Some(w) {
            return Ok(stats);
        }
        self.window = None;
        for (_, chunk) in self.fetched.chunks.drain() {
            if let Ok(chunk) = Arc::try_unwrap(chunk) {
                self.spare.push(chunk);
            }
        }
        self.fetched = Fetched::new(tiles.fetch(window, &[], &mut stats)?);
        let units: Vec<(usize, usize)> = window
            .iter()
            .flat_map(|&t| (0..self.fetched.view(t).n_chunks()).map(move |c| (t, c)))
            .collect();
        stats.chunks_touched += units.len();
        stats.chunks_decoded += units.len();
        let spare = std::mem::take(&mut self.spare);
        let decoded = decode_into(tiles, &self.fetched, &units, spare)?;
        self.fetched
            .chunks
            .extend(decoded.into_iter().map(|(u, c)| (u, Arc::new(c))));
        self.window = Some(w);
        Ok(stats)
    }

    /// Appends the rows of `cells` of `tiles` (all in the decoded window)
    /// to `sink`.
    pub(crate) fn copy<T: Tiles + ?Sized, S: Sink>(
        &self,
        tiles: &T,
        cells: &CellSelection,
        sink: S,
    ) -> Result<()> {
        let pieces = pieces_in(tiles.limits(), std::slice::from_ref(cells))?;
        let plan = self.fetched.plan(&pieces, 1, &Policy::Copy);
        execute(tiles.engine(), &plan, &self.fetched, &mut [sink])
    }
}

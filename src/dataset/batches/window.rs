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
    /// Whether two windows fit as well: one whose batches are being used
    /// and the next, built meanwhile (then the tile cache is what is left
    /// beside both).
    pub(crate) two_windows: bool,
}

impl WindowBudget {
    /// The budget for windows of `windows` (each a list of tiles) under a
    /// bound of `cache_bytes`: the largest window's rows (decoded as CSR, 8
    /// bytes per nonzero and per cell; or `row_bytes` per cell for rows of a
    /// fixed width, built a window's batches at once), plus an eighth of
    /// room, its compressed tiles in the cache, and the next window's tiles
    /// being fetched ahead must all fit. `None` when they do not: batches
    /// are then assembled chunk by chunk through a cache that re-decodes
    /// what it had to evict. Two windows may fit as well (see
    /// [`WindowBudget::two_windows`]).
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
        WindowBudget::of(decoded, compressed, cache_bytes as u64)
    }

    /// The budget for windows whose largest holds `decoded` bytes of rows
    /// and `compressed` bytes of tiles, under a bound of `cache_bytes`: a
    /// window and the next one's tiles must fit, and when two windows fit
    /// with theirs, the next window is built while this one is used.
    fn of(decoded: u64, compressed: u64, cache_bytes: u64) -> Option<WindowBudget> {
        // Batches built in fresh buffers get an eighth more room (see
        // `scatter::sized`): counted here, so the bound holds either way.
        let decoded = decoded.saturating_add(decoded / 8);
        let rest = cache_bytes.checked_sub(decoded)?;
        if rest < compressed.saturating_mul(2) {
            return None;
        }
        Some(match rest.checked_sub(decoded) {
            Some(left) if left >= compressed.saturating_mul(2) => WindowBudget {
                tile_cache_bytes: (left - compressed) as usize,
                two_windows: true,
            },
            _ => WindowBudget {
                tile_cache_bytes: (rest - compressed) as usize,
                two_windows: false,
            },
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

#[cfg(test)]
mod tests {
    use super::WindowBudget;

    #[test]
    fn the_bound_holds_one_or_two_windows_and_the_tiles_beside_them() {
        // A window of 800 bytes of rows holds 900 with its eighth of room.
        assert_eq!(WindowBudget::of(800, 100, 1000), None, "no room for tiles");
        assert_eq!(WindowBudget::of(800, 100, 1099), None, "one tile set short");
        let one = WindowBudget::of(800, 100, 1100).expect("one window fits");
        assert_eq!((one.tile_cache_bytes, one.two_windows), (100, false));
        let still_one = WindowBudget::of(800, 100, 1999).expect("fits");
        assert!(!still_one.two_windows, "two windows need 1800 + 200");
        let two = WindowBudget::of(800, 100, 2000).expect("fits");
        assert_eq!((two.tile_cache_bytes, two.two_windows), (100, true));
        assert_eq!(WindowBudget::of(u64::MAX, 1, u64::MAX), None, "saturates");
    }
}

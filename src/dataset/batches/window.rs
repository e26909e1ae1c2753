//! Training batches cut from a decoded window: the path of CSR rows over a
//! gene selection, whose lengths are known only once decoded (CSR batches
//! of every gene and rows of a fixed width are built straight from the
//! chunks, see [`super::scatter`]).
//!
//! Every batch of a block-shuffle window draws its cells from all of the
//! window's chunks, so every chunk of the window's tiles is decoded whole,
//! once, into buffers kept from the previous window (no page faults once
//! warm). Each batch decodes the chunks it needs that are not decoded yet:
//! a window's first batch, about a tile's worth of its chunks, is handed out
//! without waiting for the rest, and the next batches decode fewer and fewer.
//! A batch is then a read whose every segment is copied out of those chunks
//! (the plan's copy fill), in parallel pieces on the pool, the output
//! transforming each row as it goes.
//!
//! A window's output is the iterator's cache, either way: [`WindowBudget`]
//! decides from the manifest whether the largest window fits the configured
//! bound together with its compressed tiles (else, for batches built straight
//! from the chunks, in how many shares its batches are built), and how many
//! bytes are left for the tile cache.

use std::collections::HashSet;
use std::sync::Arc;

use crate::dataset::batches::recycler::Recycler;
use crate::dataset::read::{Fetched, ReadStats};
use crate::dataset::tiles::{decode_into, pieces_in, Tiles};
use crate::engine::decoded::{DecodedChunk, Unit};
use crate::engine::execute::{execute, Sources};
use crate::engine::plan::Policy;
use crate::engine::{CellSelection, Sink};
use crate::error::Result;

/// Whether decoded windows fit the iterator's memory bound, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowBudget {
    /// Bytes of the tile cache once the rows a window's build holds are
    /// set aside.
    pub(crate) tile_cache_bytes: usize,
    /// Whether two windows fit as well: one whose batches are being used
    /// and the next, built meanwhile (then the tile cache is what is left
    /// beside both).
    pub(crate) two_windows: bool,
    /// How many reads a window's batches are built in: 1 when the whole
    /// window's rows fit, else each read builds the next share of its
    /// batches, so that only that share's rows are held, and decompresses
    /// again every chunk holding one of their rows (the window's tiles stay
    /// in the cache between reads).
    pub(crate) passes: usize,
}

impl WindowBudget {
    /// The budget for windows of `windows` (each its list of tiles and the
    /// rows it serves) under a bound of `cache_bytes`: the largest window's
    /// rows (decoded as CSR, 8 bytes per nonzero and per row, a row holding
    /// its tiles' mean nonzeros; or `row_bytes` per row for rows of a fixed
    /// width, built a window's batches at once), plus an eighth of room, its
    /// compressed tiles in the cache, and the next window's tiles being
    /// fetched ahead must all fit; where the rows do not, a share of them
    /// built at a time (see [`WindowBudget::passes`]). The rows are counted
    /// as served, not as stored: a window of a few cells drawn millions of
    /// times holds millions of rows. `None` when not even the tiles fit:
    /// batches are then assembled chunk by chunk through a cache that
    /// re-decodes what it had to evict. Two windows may fit as well (see
    /// [`WindowBudget::two_windows`]).
    pub(crate) fn new<'w, T: Tiles + ?Sized>(
        tiles: &T,
        windows: impl Iterator<Item = (&'w [usize], u64)>,
        cache_bytes: usize,
        row_bytes: Option<u64>,
    ) -> Option<WindowBudget> {
        let (mut decoded, mut compressed) = (0u64, 0u64);
        for (window, rows) in windows {
            let sum =
                |f: &dyn Fn(usize) -> u64| window.iter().fold(0u64, |a, &t| a.saturating_add(f(t)));
            let bytes = match row_bytes {
                Some(bytes) => rows.saturating_mul(bytes),
                None => {
                    let (nnz, cells) = (sum(&|t| tiles.figures(t).0), sum(&|t| tiles.figures(t).1));
                    let per_row = nnz.div_ceil(cells.max(1)).saturating_add(1);
                    rows.saturating_mul(per_row)
                        .saturating_add(1)
                        .saturating_mul(8)
                }
            };
            decoded = decoded.max(bytes);
            compressed = compressed.max(sum(&|t| tiles.figures(t).2));
        }
        WindowBudget::of(decoded, compressed, cache_bytes as u64)
    }

    /// The budget for windows whose largest holds `decoded` bytes of rows
    /// and `compressed` bytes of tiles, under a bound of `cache_bytes`: a
    /// window's rows (or the fewest shares of them that fit) and the next
    /// one's tiles must fit, and when two windows fit with theirs, the next
    /// window is built while this one is used.
    fn of(decoded: u64, compressed: u64, cache_bytes: u64) -> Option<WindowBudget> {
        // Batches built in fresh buffers get an eighth more room (see
        // `scatter::sized`): counted here, so the bound holds either way.
        let decoded = decoded.saturating_add(decoded / 8);
        let room = cache_bytes.checked_sub(compressed.saturating_mul(2))?;
        if room == 0 {
            return None;
        }
        let passes = decoded.div_ceil(room).max(1);
        let held = decoded.div_ceil(passes);
        let rest = cache_bytes - held;
        Some(match rest.checked_sub(decoded) {
            Some(left) if passes == 1 && left >= compressed.saturating_mul(2) => WindowBudget {
                tile_cache_bytes: (left - compressed) as usize,
                two_windows: true,
                passes: 1,
            },
            _ => WindowBudget {
                tile_cache_bytes: (rest - compressed) as usize,
                two_windows: false,
                passes: usize::try_from(passes).unwrap_or(usize::MAX),
            },
        })
    }
}

/// The decoded chunks of the window being served.
#[derive(Default)]
pub(crate) struct WindowChunks {
    /// The window entered (its index in the epoch order).
    window: Option<usize>,
    /// Its tiles, and its chunks decoded so far.
    fetched: Fetched,
    /// Its chunks not decoded yet.
    pending: HashSet<Unit>,
    /// Buffers of the previous window's chunks, decoded into next.
    spare: Vec<DecodedChunk>,
}

impl WindowChunks {
    /// Whether window `w` is the one entered, every chunk of it decoded.
    pub(crate) fn holds(&self, w: usize) -> bool {
        self.window == Some(w) && self.pending.is_empty()
    }

    /// Makes window `w` (tiles `window` of `tiles`) the one entered, its
    /// tiles fetched, unless it already is; then decodes the chunks that
    /// `cells` (all in the window) need and are not decoded yet, into the
    /// buffers of the window before, or else of an earlier epoch's windows
    /// kept by `recycled`.
    pub(crate) fn enter<T: Tiles + ?Sized>(
        &mut self,
        tiles: &T,
        w: usize,
        window: &[usize],
        cells: &CellSelection,
        recycled: &Recycler,
    ) -> Result<ReadStats> {
        let mut stats = ReadStats::default();
        if self.window != Some(w) {
            self.leave();
            self.fetched = Fetched::new(tiles.fetch(window, &[], &mut stats)?);
            let fetched = &self.fetched;
            self.pending.extend(
                window
                    .iter()
                    .flat_map(|&t| (0..fetched.view(t).n_chunks()).map(move |c| (t, c))),
            );
            stats.chunks_touched += self.pending.len();
            self.window = Some(w);
        }
        if self.pending.is_empty() {
            return Ok(stats);
        }
        let pieces = pieces_in(tiles.limits(), std::slice::from_ref(cells))?;
        let plan = self.fetched.plan(&pieces, 1, &Policy::Copy);
        let units: Vec<Unit> = plan
            .buffered
            .into_iter()
            .filter(|u| self.pending.contains(u))
            .collect();
        if self.spare.len() < units.len() {
            self.spare.extend(recycled.take_chunks());
        }
        let buffers = self
            .spare
            .split_off(self.spare.len().saturating_sub(units.len()));
        let decoded = decode_into(tiles, &self.fetched, &units, buffers)?;
        stats.chunks_decoded += units.len();
        for (u, c) in decoded {
            self.pending.remove(&u);
            self.fetched.chunks.insert(u, Arc::new(c));
        }
        Ok(stats)
    }

    /// Leaves the window entered: its decoded chunks (those no batch still
    /// holds) become spare buffers.
    fn leave(&mut self) {
        self.window = None;
        self.pending.clear();
        for (_, chunk) in self.fetched.chunks.drain() {
            if let Ok(chunk) = Arc::try_unwrap(chunk) {
                self.spare.push(chunk);
            }
        }
    }

    /// The buffers of every chunk it holds (decoded or spare), for the next
    /// epoch's windows.
    pub(crate) fn buffers(&mut self) -> Vec<DecodedChunk> {
        self.leave();
        std::mem::take(&mut self.spare)
    }

    /// Appends the rows of `cells` of `tiles` (all in the window entered,
    /// their chunks decoded) to `sink`.
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
        let one = WindowBudget::of(800, 100, 1100).expect("one window fits");
        assert_eq!(
            (one.tile_cache_bytes, one.two_windows, one.passes),
            (100, false, 1)
        );
        let still_one = WindowBudget::of(800, 100, 1999).expect("fits");
        assert!(!still_one.two_windows, "two windows need 1800 + 200");
        let two = WindowBudget::of(800, 100, 2000).expect("fits");
        assert_eq!(
            (two.tile_cache_bytes, two.two_windows, two.passes),
            (100, true, 1)
        );
        let huge = WindowBudget::of(u64::MAX, 1, u64::MAX).expect("saturates");
        assert_eq!(huge.passes, 2, "the rows, saturated, fit twice over");
    }

    #[test]
    fn a_window_too_large_for_the_bound_is_built_in_the_fewest_shares_that_fit() {
        // 900 bytes of rows beside two sets of 100 bytes of tiles.
        let budget = |cache| WindowBudget::of(800, 100, cache).expect("tiles fit");
        let half = budget(1099);
        assert_eq!((half.passes, half.two_windows), (2, false));
        // Each share holds 450 bytes: the tile cache keeps the rest but for
        // the next window's tiles.
        assert_eq!(half.tile_cache_bytes, 1099 - 450 - 100);
        assert_eq!(budget(650).passes, 2, "450 of rows beside 200 of tiles");
        assert_eq!(budget(649).passes, 3);
        assert_eq!(budget(201).passes, 900, "a byte a share: one batch a read");
        for cache in [201, 400, 649, 650, 1099] {
            let b = budget(cache);
            let held = 900u64.div_ceil(b.passes as u64);
            assert!(held + 200 <= cache, "{cache}: {b:?}");
            assert!(b.tile_cache_bytes >= 100, "{cache}: {b:?}");
        }
        assert_eq!(WindowBudget::of(800, 100, 200), None, "only the tiles fit");
        assert_eq!(WindowBudget::of(800, 100, 199), None, "not even the tiles");
        assert_eq!(WindowBudget::of(800, 100, 0), None);
    }
}

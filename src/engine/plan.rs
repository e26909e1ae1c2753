//! Read plans: what a request needs, worked out before any byte is fetched or
//! decoded, from the manifest and the tiles' chunk tables alone.
//!
//! A request (a list of cells in any order, or a range) becomes [`CellRuns`]:
//! runs of consecutive cell ids, so a range is one run however many cells it
//! holds. Cutting the runs at tile limits gives [`Piece`]s (which tiles to
//! fetch, from the manifest only); cutting the pieces at chunk limits gives
//! the [`ReadPlan`]'s [`Segment`]s: consecutive rows of one chunk landing on
//! consecutive output rows. A segment that is a whole chunk in order is
//! decoded straight into the output; any other is copied out of its chunk
//! decoded once into a buffer, as one span of nonzeros (a segment's rows are
//! adjacent in the chunk too). Nothing here does I/O or decodes, so every
//! case is tested on its own below.

use std::ops::Range;

/// A request as runs of consecutive cell ids, in request order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CellRuns {
    /// `(first id, number of cells)` of each run; no run is empty.
    runs: Vec<(u64, u64)>,
}

impl CellRuns {
    /// The cells of `list`, in order (duplicates kept): each id that follows
    /// its predecessor extends the run.
    pub(crate) fn list(list: &[u64]) -> CellRuns {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &c in list {
            match runs.last_mut() {
                Some((first, len)) if first.checked_add(*len) == Some(c) => *len += 1,
                _ => runs.push((c, 1)),
            }
        }
        CellRuns { runs }
    }

    /// The cells `start..end` (none when `end <= start`).
    pub(crate) fn range(start: u64, end: u64) -> CellRuns {
        CellRuns {
            runs: if end > start {
                vec![(start, end - start)]
            } else {
                Vec::new()
            },
        }
    }

    /// The first cell id at or past `n_cells`, if any.
    pub(crate) fn first_outside(&self, n_cells: u64) -> Option<u64> {
        self.runs
            .iter()
            .find(|&&(first, len)| first.saturating_add(len) > n_cells)
            .map(|&(first, _)| first.max(n_cells))
    }

    /// Every cell id, in order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs
            .iter()
            .flat_map(|&(first, len)| (first..=u64::MAX).take(len as usize))
    }
}

/// The cells `local` (local to `tile`) of a request, landing on output rows
/// from `out_row` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) tile: usize,
    pub(crate) local: Range<usize>,
    pub(crate) out_row: usize,
}

/// Cuts `runs` at the tile limits `limits` (first cell of each tile, then the
/// cell count; every id of `runs` below the last). Pieces follow the request
/// order; a run spanning tiles gives one piece per tile.
pub(crate) fn pieces(runs: &CellRuns, limits: &[u64]) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut out_row = 0usize;
    for &(first, len) in &runs.runs {
        let (mut at, end) = (first, first + len);
        while at < end {
            let tile = limits.partition_point(|&l| l <= at) - 1;
            let stop = end.min(limits[tile + 1]);
            let local = (at - limits[tile]) as usize..(stop - limits[tile]) as usize;
            out.push(Piece {
                tile,
                out_row,
                local: local.clone(),
            });
            out_row += local.len();
            at = stop;
        }
    }
    out
}

/// Consecutive rows `local` of chunk `chunk` of `tile`, landing on output rows
/// from `out_row` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) tile: usize,
    pub(crate) chunk: usize,
    pub(crate) local: Range<usize>,
    pub(crate) out_row: usize,
    /// The whole chunk, in order: decoded straight into its output rows.
    pub(crate) direct: bool,
}

/// A planned read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReadPlan {
    /// Every output row exactly once, in output order.
    pub(crate) segments: Vec<Segment>,
    /// Distinct chunks holding requested cells, sorted.
    pub(crate) touched: Vec<(usize, usize)>,
    /// Distinct chunks the copied segments read from, sorted: decoded once
    /// into buffers (unless a cache holds them).
    pub(crate) buffered: Vec<(usize, usize)>,
}

impl ReadPlan {
    /// Plans `pieces` given each tile's chunk ends (`chunk_ends(t)`: the first
    /// cell past each chunk, increasing, the last being the tile's cell
    /// count). `direct_ok`: whole chunks may be decoded straight into the
    /// output (not for a gene selection or dense rows, which need a copy);
    /// `cached(t, c)`: a decoded chunk is at hand, so copying from it beats
    /// decoding it again.
    pub(crate) fn new<'e>(
        pieces: &[Piece],
        chunk_ends: impl Fn(usize) -> &'e [u64],
        direct_ok: bool,
        cached: impl Fn(usize, usize) -> bool,
    ) -> ReadPlan {
        let mut segments = Vec::new();
        for p in pieces {
            let ends = chunk_ends(p.tile);
            let mut at = p.local.start;
            while at < p.local.end {
                let chunk = ends.partition_point(|&e| e <= at as u64);
                let chunk_lo = if chunk == 0 {
                    0
                } else {
                    ends[chunk - 1] as usize
                };
                let chunk_hi = ends[chunk] as usize;
                let stop = p.local.end.min(chunk_hi);
                let direct = direct_ok
                    && at == chunk_lo
                    && stop == chunk_hi
                    && chunk_hi > chunk_lo
                    && !cached(p.tile, chunk);
                segments.push(Segment {
                    tile: p.tile,
                    chunk,
                    local: at..stop,
                    out_row: p.out_row + (at - p.local.start),
                    direct,
                });
                at = stop;
            }
        }
        let distinct = |keep: &dyn Fn(&Segment) -> bool| {
            let mut v: Vec<(usize, usize)> = segments
                .iter()
                .filter(|s| keep(s))
                .map(|s| (s.tile, s.chunk))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let touched = distinct(&|_| true);
        let buffered = distinct(&|s| !s.direct);
        ReadPlan {
            segments,
            touched,
            buffered,
        }
    }

    /// Number of output rows.
    pub(crate) fn n_rows(&self) -> usize {
        self.segments
            .last()
            .map_or(0, |s| s.out_row + s.local.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_consecutive_ids_and_keep_order_and_duplicates() {
        let runs = CellRuns::list(&[5, 6, 7, 3, 3, 4, 9, u64::MAX]);
        assert_eq!(runs.runs, [(5, 3), (3, 1), (3, 2), (9, 1), (u64::MAX, 1)]);
        assert_eq!(
            runs.ids().collect::<Vec<_>>(),
            [5, 6, 7, 3, 3, 4, 9, u64::MAX]
        );
        assert_eq!(runs.first_outside(10), Some(u64::MAX));
        assert_eq!(CellRuns::list(&[1, 2]).first_outside(3), None);
        assert_eq!(CellRuns::list(&[1, 2]).first_outside(2), Some(2));
        // A range is one run, however long.
        assert_eq!(CellRuns::range(10, 1 << 40).runs, [(10, (1 << 40) - 10)]);
        assert_eq!(CellRuns::range(4, 4), CellRuns::default());
    }

    #[test]
    fn pieces_cut_runs_at_tile_limits_in_request_order() {
        let limits = [0u64, 10, 20, 25];
        let runs = CellRuns::list(&[8, 9, 10, 11, 24, 0, 19]);
        assert_eq!(
            pieces(&runs, &limits),
            [
                Piece {
                    tile: 0,
                    local: 8..10,
                    out_row: 0
                },
                Piece {
                    tile: 1,
                    local: 0..2,
                    out_row: 2
                },
                Piece {
                    tile: 2,
                    local: 4..5,
                    out_row: 4
                },
                Piece {
                    tile: 0,
                    local: 0..1,
                    out_row: 5
                },
                Piece {
                    tile: 1,
                    local: 9..10,
                    out_row: 6
                },
            ]
        );
        let whole = pieces(&CellRuns::range(0, 25), &limits);
        assert_eq!(whole.iter().map(|p| p.local.len()).sum::<usize>(), 25);
        assert_eq!(whole.len(), 3);
    }

    #[test]
    fn segments_cover_every_row_once_and_whole_chunks_go_direct() {
        // Tile 0: chunks of cells 0..4, 4..4 (empty), 4..10; tile 1: 0..5, 5..10.
        let ends: [&[u64]; 2] = [&[4, 4, 10], &[5, 10]];
        let runs = CellRuns::list(&(2..17).chain([3, 0, 1, 2, 3]).collect::<Vec<_>>());
        let p = pieces(&runs, &[0, 10, 20]);
        let plan = ReadPlan::new(&p, |t| ends[t], true, |_, _| false);
        let seg = |tile, chunk, local: Range<usize>, out_row, direct| Segment {
            tile,
            chunk,
            local,
            out_row,
            direct,
        };
        assert_eq!(
            plan.segments,
            [
                seg(0, 0, 2..4, 0, false),
                seg(0, 2, 4..10, 2, true),
                seg(1, 0, 0..5, 8, true),
                seg(1, 1, 5..7, 13, false),
                seg(0, 0, 3..4, 15, false),
                seg(0, 0, 0..4, 16, true),
            ]
        );
        assert_eq!(plan.n_rows(), 20);
        assert_eq!(plan.touched, [(0, 0), (0, 2), (1, 0), (1, 1)]);
        assert_eq!(plan.buffered, [(0, 0), (1, 1)]);
        // No direct decoding (a gene selection, dense rows), or a cached chunk:
        // those rows are copied from buffers.
        let copied = ReadPlan::new(&p, |t| ends[t], false, |_, _| false);
        assert!(copied.segments.iter().all(|s| !s.direct));
        assert_eq!(copied.buffered, copied.touched);
        let cached = ReadPlan::new(&p, |t| ends[t], true, |t, c| (t, c) == (1, 0));
        assert_eq!(cached.buffered, [(0, 0), (1, 0), (1, 1)]);
    }

    #[test]
    fn an_empty_request_plans_nothing() {
        let plan = ReadPlan::new(
            &pieces(&CellRuns::default(), &[0, 5]),
            |_| &[5],
            true,
            |_, _| false,
        );
        assert_eq!(plan, ReadPlan::default());
        assert_eq!(plan.n_rows(), 0);
    }
}

//! Read plans: what a request needs, worked out before any byte is fetched or
//! decoded, from the manifest and the tiles' chunk tables alone.
//!
//! A request is one or more outputs, each a [`CellSelection`]. Cutting each
//! selection's runs at tile limits gives [`Piece`]s (which tiles to fetch,
//! from the manifest only: [`pieces`]); once the tiles' heads are at hand,
//! cutting the pieces at chunk limits gives the [`ReadPlan`]'s [`Segment`]s:
//! consecutive rows of one chunk landing on consecutive rows of one output.
//! How each segment is filled ([`Fill`]) follows from the request's
//! [`Policy`]; the executor ([`super::execute`]) runs the plan, every
//! strategy consuming the same segments grouped by chunk. Nothing here does
//! I/O or decodes, so every case is tested on its own below.

use std::ops::Range;

use crate::engine::cells::CellSelection;

/// The cells `local` (local to `tile`) of output `output`, landing on its
/// rows from `out_row` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) output: usize,
    pub(crate) tile: usize,
    pub(crate) local: Range<usize>,
    pub(crate) out_row: usize,
}

/// Cuts `cells` (every id below the last limit) at the tile limits `limits`
/// (first cell of each tile, then the cell count), as output `output`.
/// Pieces follow the selection's order; a run spanning tiles gives one piece
/// per tile.
pub(crate) fn pieces(cells: &CellSelection, limits: &[u64], output: usize) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut out_row = 0usize;
    for &(first, len) in cells.runs() {
        let (mut at, end) = (first, first + len);
        while at < end {
            let tile = limits.partition_point(|&l| l <= at) - 1;
            let stop = end.min(limits[tile + 1]);
            let local = (at - limits[tile]) as usize..(stop - limits[tile]) as usize;
            out.push(Piece {
                output,
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

/// The distinct tiles of `pieces`, sorted.
pub(crate) fn tiles_of(pieces: &[Piece]) -> Vec<usize> {
    let mut tiles: Vec<usize> = pieces.iter().map(|p| p.tile).collect();
    tiles.sort_unstable();
    tiles.dedup();
    tiles
}

/// How a segment's rows reach their output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fill {
    /// The whole chunk, in order, into an output that keeps rows as stored:
    /// decoded straight into the output's slice.
    Decode,
    /// Copied (or transformed by the output) from the chunk decoded once
    /// into a buffer, as one span of nonzeros (a segment's rows are
    /// adjacent in the chunk too).
    Copy,
    /// Decoded row by row straight into the output's slices, together with
    /// every other segment reading the chunk: its frames decompressed once,
    /// no buffer in between.
    Scatter,
}

/// How a request's segments are filled.
pub(crate) enum Policy<'c> {
    /// Reads through a cache: whole chunks in order go to [`Fill::Decode`]
    /// when the output keeps rows as stored (`stored`) and `cached(t, c)`
    /// says no decoded copy is at hand; every other segment is copied from
    /// its chunk, decoded once (and kept for the next request).
    Cached {
        stored: bool,
        cached: &'c dyn Fn(usize, usize) -> bool,
    },
    /// Every segment copied from chunks decoded beforehand (a decoded window).
    Copy,
    /// Every segment scattered (the outputs keep rows as stored), except
    /// those of the tiles `buffered(t)` names, copied from their chunks
    /// decoded once (a corpus member whose genes are mapped as it decodes).
    Scatter { buffered: &'c dyn Fn(usize) -> bool },
}

/// Consecutive rows `local` of chunk `chunk` of `tile`, landing on rows of
/// `output` from `out_row` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) output: usize,
    pub(crate) tile: usize,
    pub(crate) chunk: usize,
    pub(crate) local: Range<usize>,
    pub(crate) out_row: usize,
    pub(crate) fill: Fill,
}

/// A planned read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReadPlan {
    /// Every row of every output exactly once, in output order, then row order.
    pub(crate) segments: Vec<Segment>,
    /// Rows of each output.
    pub(crate) rows: Vec<usize>,
    /// Distinct chunks holding requested cells, sorted.
    pub(crate) touched: Vec<(usize, usize)>,
    /// Distinct chunks the copied segments read from, sorted: decoded once
    /// into buffers (unless a cache holds them).
    pub(crate) buffered: Vec<(usize, usize)>,
    /// Chunks decoded straight into outputs (see [`ReadPlan::decoded_in_place`]).
    in_place: usize,
}

impl ReadPlan {
    /// Plans `pieces` (of `outputs` outputs, each output's pieces in row
    /// order) over `tiles` (sorted and distinct, holding every tile the
    /// pieces name: the fetched tiles) given each tile's chunk ends
    /// (`chunk_ends(t)`: the first cell past each chunk, increasing, the last
    /// being the tile's cell count).
    pub(crate) fn new<'e>(
        pieces: &[Piece],
        outputs: usize,
        tiles: &[usize],
        chunk_ends: impl Fn(usize) -> &'e [u64],
        policy: &Policy<'_>,
    ) -> ReadPlan {
        let mut segments = Vec::new();
        let mut rows = vec![0usize; outputs];
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
                let fill = match policy {
                    Policy::Cached { stored, cached } => {
                        let whole = at == chunk_lo && stop == chunk_hi && chunk_hi > chunk_lo;
                        if *stored && whole && !cached(p.tile, chunk) {
                            Fill::Decode
                        } else {
                            Fill::Copy
                        }
                    }
                    Policy::Copy => Fill::Copy,
                    Policy::Scatter { buffered } if buffered(p.tile) => Fill::Copy,
                    Policy::Scatter { .. } => Fill::Scatter,
                };
                segments.push(Segment {
                    output: p.output,
                    tile: p.tile,
                    chunk,
                    local: at..stop,
                    out_row: p.out_row + (at - p.local.start),
                    fill,
                });
                at = stop;
            }
            rows[p.output] = rows[p.output].max(p.out_row + p.local.len());
        }
        // Outputs one after the other (pieces of several outputs may come
        // interleaved), each in row order.
        segments.sort_by_key(|s| (s.output, s.out_row));
        // Which chunks the segments touch, copy from and scatter from: a
        // mark per chunk of the tiles involved (tiles sorted, so the lists
        // come out sorted), linear in segments and chunks.
        let mut base = Vec::with_capacity(tiles.len() + 1);
        base.push(0usize);
        for &t in tiles {
            base.push(base[base.len() - 1] + chunk_ends(t).len());
        }
        let slot = |t: usize, c: usize| base[tiles.partition_point(|&x| x < t)] + c;
        const TOUCHED: u8 = 1;
        const COPIED: u8 = 2;
        const SCATTERED: u8 = 4;
        let mut marks = vec![0u8; base[base.len() - 1]];
        let mut in_place = 0;
        for s in &segments {
            marks[slot(s.tile, s.chunk)] |= TOUCHED
                | match s.fill {
                    Fill::Copy => COPIED,
                    Fill::Scatter => SCATTERED,
                    Fill::Decode => 0,
                };
            in_place += usize::from(s.fill == Fill::Decode);
        }
        let (marks, base) = (&marks, &base);
        let marked = |mark: u8| -> Vec<(usize, usize)> {
            tiles
                .iter()
                .enumerate()
                .flat_map(|(i, &t)| {
                    (0..base[i + 1] - base[i])
                        .filter(move |&c| marks[base[i] + c] & mark != 0)
                        .map(move |c| (t, c))
                })
                .collect()
        };
        let touched = marked(TOUCHED);
        let buffered = marked(COPIED);
        in_place += marks.iter().filter(|&&m| m & SCATTERED != 0).count();
        ReadPlan {
            segments,
            rows,
            touched,
            buffered,
            in_place,
        }
    }

    /// Chunks decoded straight into outputs: one per [`Fill::Decode`]
    /// segment, one per chunk that [`Fill::Scatter`] segments read.
    pub(crate) fn decoded_in_place(&self) -> usize {
        self.in_place
    }

    /// The segments of output `output`, in row order.
    pub(crate) fn output(&self, output: usize) -> &[Segment] {
        let start = self.segments.partition_point(|s| s.output < output);
        let end = self.segments.partition_point(|s| s.output <= output);
        &self.segments[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cut_runs_at_tile_limits_in_request_order() {
        let limits = [0u64, 10, 20, 25];
        let cells = CellSelection::ids(&[8, 9, 10, 11, 24, 0, 19]);
        let piece = |tile, local, out_row| Piece {
            output: 0,
            tile,
            local,
            out_row,
        };
        assert_eq!(
            pieces(&cells, &limits, 0),
            [
                piece(0, 8..10, 0),
                piece(1, 0..2, 2),
                piece(2, 4..5, 4),
                piece(0, 0..1, 5),
                piece(1, 9..10, 6),
            ]
        );
        let whole = pieces(&CellSelection::range(0..25), &limits, 3);
        assert_eq!(whole.iter().map(|p| p.local.len()).sum::<usize>(), 25);
        assert_eq!(whole.len(), 3);
        assert!(whole.iter().all(|p| p.output == 3));
        assert_eq!(tiles_of(&pieces(&cells, &limits, 0)), [0, 1, 2]);
    }

    #[test]
    fn segments_cover_every_row_once_and_whole_chunks_decode_in_place() {
        // Tile 0: chunks of cells 0..4, 4..4 (empty), 4..10; tile 1: 0..5, 5..10.
        let ends: [&[u64]; 2] = [&[4, 4, 10], &[5, 10]];
        let cells = CellSelection::ids(&(2..17).chain([3, 0, 1, 2, 3]).collect::<Vec<_>>());
        let p = pieces(&cells, &[0, 10, 20], 0);
        let never = |_: usize, _: usize| false;
        let cached = Policy::Cached {
            stored: true,
            cached: &never,
        };
        let plan = ReadPlan::new(&p, 1, &[0, 1], |t| ends[t], &cached);
        let seg = |tile, chunk, local: Range<usize>, out_row, fill| Segment {
            output: 0,
            tile,
            chunk,
            local,
            out_row,
            fill,
        };
        use Fill::{Copy, Decode};
        assert_eq!(
            plan.segments,
            [
                seg(0, 0, 2..4, 0, Copy),
                seg(0, 2, 4..10, 2, Decode),
                seg(1, 0, 0..5, 8, Decode),
                seg(1, 1, 5..7, 13, Copy),
                seg(0, 0, 3..4, 15, Copy),
                seg(0, 0, 0..4, 16, Decode),
            ]
        );
        assert_eq!(plan.rows, [20]);
        assert_eq!(plan.touched, [(0, 0), (0, 2), (1, 0), (1, 1)]);
        assert_eq!(plan.buffered, [(0, 0), (1, 1)]);
        assert_eq!(plan.decoded_in_place(), 3);
        // An output that transforms rows (a gene selection, dense rows), or a
        // cached chunk: those rows are copied from buffers.
        let transformed = Policy::Cached {
            stored: false,
            cached: &never,
        };
        let copied = ReadPlan::new(&p, 1, &[0, 1], |t| ends[t], &transformed);
        assert!(copied.segments.iter().all(|s| s.fill == Fill::Copy));
        assert_eq!(copied.buffered, copied.touched);
        let one = |t: usize, c: usize| (t, c) == (1, 0);
        let with_cache = Policy::Cached {
            stored: true,
            cached: &one,
        };
        let cached = ReadPlan::new(&p, 1, &[0, 1], |t| ends[t], &with_cache);
        assert_eq!(cached.buffered, [(0, 0), (1, 0), (1, 1)]);
        let scatter = Policy::Scatter {
            buffered: &|_| false,
        };
        let scattered = ReadPlan::new(&p, 1, &[0, 1], |t| ends[t], &scatter);
        assert!(scattered.segments.iter().all(|s| s.fill == Fill::Scatter));
        assert!(scattered.buffered.is_empty());
        // Every chunk scattered from decodes once, however many segments read it.
        assert_eq!(scattered.decoded_in_place(), scattered.touched.len());
        // A tile named buffered is copied from its decoded chunks instead.
        let second = Policy::Scatter {
            buffered: &|t| t == 1,
        };
        let mixed = ReadPlan::new(&p, 1, &[0, 1], |t| ends[t], &second);
        assert!(mixed
            .segments
            .iter()
            .all(|s| (s.fill == Fill::Copy) == (s.tile == 1)));
        assert_eq!(mixed.buffered, [(1, 0), (1, 1)]);
    }

    #[test]
    fn outputs_keep_their_own_rows_in_order() {
        let ends: [&[u64]; 2] = [&[5, 10], &[10]];
        let limits = [0u64, 10, 20];
        let mut p = pieces(&CellSelection::ids(&[12, 3]), &limits, 1);
        p.extend(pieces(&CellSelection::range(4..7), &limits, 0));
        let plan = ReadPlan::new(&p, 3, &[0, 1], |t| ends[t], &Policy::Copy);
        assert_eq!(plan.rows, [3, 2, 0]);
        let first: Vec<(usize, Range<usize>)> = plan
            .output(0)
            .iter()
            .map(|s| (s.out_row, s.local.clone()))
            .collect();
        assert_eq!(first, [(0, 4..5), (1, 5..7)]);
        let second: Vec<(usize, usize, usize)> = plan
            .output(1)
            .iter()
            .map(|s| (s.out_row, s.tile, s.local.start))
            .collect();
        assert_eq!(second, [(0, 1, 2), (1, 0, 3)]);
        assert!(plan.output(2).is_empty());
    }

    #[test]
    fn an_empty_request_plans_nothing() {
        let plan = ReadPlan::new(
            &pieces(&CellSelection::default(), &[0, 5], 0),
            1,
            &[],
            |_| &[5],
            &Policy::Scatter {
                buffered: &|_| false,
            },
        );
        assert!(plan.segments.is_empty() && plan.touched.is_empty());
        assert_eq!(plan.rows, [0]);
    }
}

//! The order a resumed job's batches are cut from: the epoch order less the
//! positions already delivered (see [`super::resume`]), with the windows of
//! the epoch order that still hold a position.
//!
//! Its positions are those of the remaining sequence, so a rank's share of
//! it is cut as that of any epoch ([`super::RankShare`]), and its windows
//! are numbered as they come in it. Every listing goes to the epoch order
//! through the sequence's runs, each window's tiles fetched before its cells
//! are listed as there. With nothing delivered it is the epoch order itself.

use std::ops::Range;

use super::order::EpochOrder;
use super::resume::Remaining;
use crate::error::{Error, Result};

/// The epoch order of a job resumed after some positions were delivered.
#[derive(Clone, Debug)]
pub(crate) struct RemainingOrder {
    order: EpochOrder,
    remaining: Remaining,
    /// The epoch order's windows that still hold a position, in order.
    kept: Vec<usize>,
    /// Where each kept window starts in the sequence, then its length.
    starts: Vec<u64>,
}

impl RemainingOrder {
    /// `order` less the epoch positions `delivered` (sorted, disjoint,
    /// inside the epoch: see [`Remaining::new`]).
    pub(crate) fn new(order: EpochOrder, delivered: &[Range<u64>]) -> Result<RemainingOrder> {
        let remaining = Remaining::new(order.len(), delivered).map_err(|e| match e {
            Error::Input(m) => Error::Input(format!("resuming the epoch: {m}")),
            other => other,
        })?;
        let mut kept = Vec::new();
        let mut starts = vec![0];
        for w in 0..order.windows().count() {
            let span = order.window_span(w);
            let (lo, hi) = (remaining.before(span.start), remaining.before(span.end));
            if lo < hi {
                kept.push(w);
                starts.push(hi);
            }
        }
        Ok(RemainingOrder {
            order,
            remaining,
            kept,
            starts,
        })
    }

    /// Positions in the sequence.
    pub(crate) fn len(&self) -> u64 {
        self.remaining.len()
    }

    /// The cells at sequence positions `range` (within it), as
    /// [`EpochOrder::cells_fetched`] lists those of epoch positions.
    pub(crate) fn cells_fetched(
        &mut self,
        range: Range<u64>,
        mut fetch: impl FnMut(&[usize]) -> Result<()>,
    ) -> Result<Vec<u64>> {
        let mut runs = self.remaining.to_epoch(range.clone());
        let Some(first) = runs.next() else {
            return Ok(Vec::new());
        };
        let rest: Vec<Range<u64>> = runs.collect();
        let mut cells = self.order.cells_fetched(first, &mut fetch)?;
        for run in rest {
            cells.extend(self.order.cells_fetched(run, &mut fetch)?);
        }
        Ok(cells)
    }

    /// Whether cells are served a window of tiles at a time (see
    /// [`EpochOrder::has_windows`]).
    pub(crate) fn has_windows(&self) -> bool {
        self.order.has_windows()
    }

    /// The tiles of the window holding sequence position `at` (none past
    /// the end, and none in random order).
    pub(crate) fn window_tiles(&self, at: u64) -> &[usize] {
        self.order.window_tiles(self.remaining.epoch_position(at))
    }

    /// The index of the window holding sequence position `at` (`at < len()`).
    pub(crate) fn window_of(&self, at: u64) -> usize {
        self.starts.partition_point(|&s| s <= at) - 1
    }

    /// The sequence positions of window `w`.
    pub(crate) fn window_span(&self, w: usize) -> Range<u64> {
        self.starts[w]..self.starts[w + 1]
    }

    /// Every window's tiles, in order.
    pub(crate) fn windows(&self) -> impl Iterator<Item = &[usize]> {
        self.kept.iter().map(|&w| self.order.window(w))
    }

    /// The sequence position where the window holding `at` ends (the
    /// sequence's length past its end).
    pub(crate) fn window_end(&self, at: u64) -> u64 {
        let end = self.order.window_end(self.remaining.epoch_position(at));
        self.remaining.before(end)
    }

    /// The tiles of window `w`.
    pub(crate) fn window(&self, w: usize) -> &[usize] {
        self.order.window(self.kept[w])
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // lists of delivered ranges
mod tests {
    use super::*;
    use crate::dataset::batches::Shuffle;

    #[test]
    fn the_remaining_order_is_the_epoch_order_less_what_was_delivered() {
        let limits = [0u64, 10, 20, 30, 35, 41, 50, 64];
        // Whole windows delivered (the second of block:2, and the last),
        // windows cut into, and nothing.
        let cases: [&[Range<u64>]; 4] = [&[], &[20..35, 60..64], &[3..7, 18..19, 40..64], &[0..64]];
        for mode in [
            Shuffle::None,
            Shuffle::Block { window_tiles: 2 },
            Shuffle::Random,
        ] {
            for delivered in cases {
                let full = EpochOrder::new(&limits, mode, 4, 2).cells(0..64);
                let want: Vec<u64> = (0..64u64)
                    .filter(|p| !delivered.iter().any(|r| r.contains(p)))
                    .map(|p| full[p as usize])
                    .collect();
                let order = EpochOrder::new(&limits, mode, 4, 2);
                let mut rest = RemainingOrder::new(order, delivered).unwrap();
                assert_eq!(rest.len(), want.len() as u64);
                // In pieces, as batches list it.
                let mut got = Vec::new();
                let mut at = 0;
                while at < rest.len() {
                    let stop = (at + 5).min(rest.len());
                    got.extend(rest.cells_fetched(at..stop, |_| Ok(())).unwrap());
                    at = stop;
                }
                assert_eq!(got, want, "{mode} {delivered:?}");
                // Windows are non-empty, in order, and cover the sequence;
                // each holds cells of its tiles only.
                let n = rest.windows().count();
                let mut covered = 0;
                for w in 0..n {
                    let span = rest.window_span(w);
                    assert!(span.start == covered && span.start < span.end, "{mode} {w}");
                    assert_eq!(rest.window_of(span.start), w);
                    assert_eq!(rest.window_of(span.end - 1), w);
                    assert_eq!(rest.window_end(span.start), span.end);
                    if mode != Shuffle::Random {
                        let tiles = rest.window_tiles(span.start).to_vec();
                        let cells = rest.cells_fetched(span.clone(), |_| Ok(())).unwrap();
                        let tile_of = |c: &u64| limits.partition_point(|&l| l <= *c) - 1;
                        assert!(cells.iter().all(|c| tiles.contains(&tile_of(c))));
                    }
                    covered = span.end;
                }
                assert_eq!(covered, rest.len());
                assert_eq!(rest.window_end(rest.len()), rest.len());
                assert!(rest.window_tiles(rest.len()).is_empty());
            }
        }
        let order = EpochOrder::new(&limits, Shuffle::None, 0, 0);
        let e = RemainingOrder::new(order, &[60..70]).unwrap_err();
        assert!(e.to_string().contains("resuming the epoch"), "{e}");
    }
}

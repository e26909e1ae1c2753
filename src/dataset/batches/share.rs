//! Each rank's share of an epoch, and each loader worker's share of a rank.
//!
//! The epoch order is cut into `world_size` contiguous shares of
//! near-equal length (contiguous, so each rank touches its own windows). Every
//! rank yields the same number of batches. With `drop_last`, every batch holds
//! exactly `batch_size` cells and the remainder is dropped; without it every
//! cell appears exactly once per epoch, batches hold `batch_size` cells except
//! each rank's last, which is smaller (when a rank's share is a multiple of
//! `batch_size` but another rank's is one longer, the rank's last two batches
//! hold `batch_size - 1` and 1 cells so the counts stay equal). An epoch of
//! no cells has no batches on any rank.

use std::ops::Range;

/// One rank's batches of an epoch: the epoch positions of each, computed on
/// demand (nothing is allocated per cell or per batch), and how data-loader
/// workers split them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankShare {
    /// Position of the rank's first cell.
    start: u64,
    /// Cells per batch.
    size: u64,
    /// Number of batches.
    count: usize,
    /// Cells of the last batch.
    last: u64,
    /// Whether the last two batches hold `size - 1` and 1 cells (see the module docs).
    split_tail: bool,
}

impl RankShare {
    /// The batches of rank `rank` of `world_size` over an epoch of `n` cells
    /// (see the module docs for how shares and the last batches are cut).
    pub fn new(
        n: u64,
        batch_size: usize,
        rank: usize,
        world_size: usize,
        drop_last: bool,
    ) -> RankShare {
        let b = batch_size.max(1) as u64;
        let ws = world_size.max(1) as u64;
        let rank = rank as u64;
        if drop_last {
            let per_rank = n / (ws * b);
            return RankShare {
                start: rank * per_rank * b,
                size: b,
                count: per_rank as usize,
                last: b,
                split_tail: false,
            };
        }
        let (base, extra) = (n / ws, n % ws);
        let len = base + u64::from(rank < extra);
        let max_len = base + u64::from(extra > 0);
        // An epoch of no cells (an empty subset, a resumed epoch already
        // delivered) has no batches; one of fewer cells than ranks gives
        // some ranks an empty batch, so that every rank takes as many steps.
        let count = max_len.div_ceil(b);
        let last = len.saturating_sub(count.saturating_sub(1) * b);
        let split_tail = count >= 2 && last == 0 && b >= 2;
        RankShare {
            start: rank * base + rank.min(extra),
            size: b,
            count: count as usize,
            last: if split_tail { 1 } else { last },
            split_tail,
        }
    }

    /// Number of batches (the same on every rank).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the rank has no batches.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Epoch positions of batch `i` (`i < len()`).
    pub fn get(&self, i: usize) -> Range<u64> {
        let start = self.start + i as u64 * self.size;
        let len = if i + 1 == self.count {
            self.last
        } else if self.split_tail && i + 2 == self.count {
            self.size - 1
        } else {
            self.size
        };
        // The split tail's last batch starts one early (after a short batch).
        let start = if self.split_tail && i + 1 == self.count {
            start - 1
        } else {
            start
        };
        start..start + len
    }

    /// The batches loader worker `worker` of `workers` yields: the rank's
    /// batches are cut into `workers` contiguous spans, longer ones first,
    /// so that each worker decodes its own windows.
    pub fn worker_span(&self, worker: usize, workers: usize) -> Range<usize> {
        let workers = workers.max(1);
        let (base, extra) = (self.count / workers, self.count % workers);
        let first = (worker * base + worker.min(extra)).min(self.count);
        let len = if worker < workers {
            base + usize::from(worker < extra)
        } else {
            0
        };
        first..(first + len).min(self.count)
    }

    /// Where a loader that takes one batch from each of `workers` workers in
    /// turn, and has delivered `delivered` batches, resumes: the batches
    /// worker `worker` still yields, in order. Delivered position `p` is
    /// batch `p / workers` of span `p % workers`, so the loader's order is
    /// the same however far it got before it stopped.
    pub fn worker_resume(&self, worker: usize, workers: usize, delivered: usize) -> Range<usize> {
        let workers = workers.max(1);
        let position = delivered + worker;
        let span = self.worker_span(position % workers, workers);
        let first = span.start + position / workers;
        let remaining = self
            .count
            .saturating_sub(position)
            .div_ceil(workers)
            .min(span.end.saturating_sub(first));
        first..first + remaining
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank_batches(n: u64, b: usize, rank: usize, ws: usize, drop: bool) -> Vec<Range<u64>> {
        let share = RankShare::new(n, b, rank, ws, drop);
        (0..share.len()).map(|i| share.get(i)).collect()
    }

    #[test]
    fn rank_shares_cover_every_cell_once_with_equal_batch_counts() {
        for n in [0u64, 1, 5, 10, 100, 257, 1000] {
            for ws in 1..5 {
                for b in [1usize, 2, 3, 7, 256] {
                    let all: Vec<Vec<Range<u64>>> =
                        (0..ws).map(|r| rank_batches(n, b, r, ws, false)).collect();
                    let counts: Vec<usize> = all.iter().map(Vec::len).collect();
                    assert!(
                        counts.windows(2).all(|w| w[0] == w[1]),
                        "n={n} ws={ws} b={b}: {counts:?}"
                    );
                    let mut covered: Vec<u64> =
                        all.iter().flatten().flat_map(Clone::clone).collect();
                    covered.sort_unstable();
                    assert_eq!(covered, (0..n).collect::<Vec<_>>(), "n={n} ws={ws} b={b}");
                    assert!(all.iter().flatten().all(|r| r.end - r.start <= b as u64));
                    let dropped: Vec<Vec<Range<u64>>> =
                        (0..ws).map(|r| rank_batches(n, b, r, ws, true)).collect();
                    assert!(dropped
                        .iter()
                        .flatten()
                        .all(|r| r.end - r.start == b as u64));
                    assert!(dropped.windows(2).all(|w| w[0].len() == w[1].len()));
                    assert_eq!(counts[0] == 0, n == 0, "n={n} ws={ws} b={b}");
                }
            }
        }
    }

    #[test]
    fn worker_spans_split_the_rank_and_resume_in_the_loaders_order() {
        for count in [0u64, 1, 2, 5, 9, 16] {
            let share = RankShare::new(count, 1, 0, 1, false);
            let total = share.len();
            for workers in 1..5 {
                let spans: Vec<Range<usize>> = (0..workers)
                    .map(|w| share.worker_span(w, workers))
                    .collect();
                let flat: Vec<usize> = spans.iter().flat_map(Clone::clone).collect();
                assert_eq!(flat, (0..total).collect::<Vec<_>>(), "{count} {workers}");
                assert!(spans.windows(2).all(|s| s[0].len() >= s[1].len()));
                // A loader taking one batch from each worker in turn, stopped
                // after `delivered` batches and resumed: the rest of its
                // sequence is what the uninterrupted one would have delivered.
                let round_robin = |streams: Vec<Range<usize>>| {
                    let mut streams: Vec<_> = streams.into_iter().collect();
                    let mut out = Vec::new();
                    while streams.iter().any(|s| !s.is_empty()) {
                        for s in streams.iter_mut() {
                            out.extend(s.next());
                        }
                    }
                    out
                };
                let full = round_robin(spans.clone());
                for delivered in 0..=total {
                    let resumed = round_robin(
                        (0..workers)
                            .map(|w| share.worker_resume(w, workers, delivered))
                            .collect(),
                    );
                    assert_eq!(resumed, full[delivered..], "{count} {workers} {delivered}");
                }
            }
        }
    }
}

//! Elastic resume: the rest of an epoch taken up by a job of another shape.
//!
//! # What a job delivered
//!
//! A job's shape ([`JobShape`]) is what decides which epoch positions (places
//! in the [`EpochOrder`] of `(seed, epoch, shuffle)`) a number of delivered
//! batches covers: its world size, its loader workers per rank, its batch size
//! and `drop_last`. Each rank's batches are cut as [`RankShare`] says, and
//! among the rank's `w` loader workers into contiguous spans
//! ([`RankShare::worker_span`]); the loader takes one batch from each worker
//! in turn, so once it has delivered `k` batches, span `j` has delivered its
//! first `ceil((k - j) / w)` batches (none when `k <= j`; the model of
//! [`RankShare::worker_resume`]). DDP ranks step in lockstep, so every rank
//! has delivered the same `k`: one rank's count, with the shape, says which
//! positions the whole job delivered, whichever rank records it.
//!
//! # The state
//!
//! What an epoch has delivered is a set of epoch positions, kept as sorted,
//! disjoint, non-empty ranges: a few numbers however many cells they cover.
//! A job resumed from delivered ranges `D` serves the *remaining sequence*
//! ([`Remaining`]): the epoch positions outside `D`, in increasing order,
//! numbered `0..m`. Its ranks share that sequence exactly as a fresh job
//! shares an epoch of `m` cells (contiguous shares, equal batch counts per
//! rank, `drop_last` dropping the end of the sequence), and each batch's
//! positions in the sequence map back to epoch positions, whose cells the
//! epoch order gives. With `D` empty that is the fresh job. A block shuffle's
//! windows stay windows: the sequence passes through them in epoch order,
//! less what was delivered, so a resumed job decodes each window about once.
//!
//! After a job resumed from `D` has delivered `k` batches per rank, the epoch
//! has delivered `D` plus the epoch positions of those batches of every rank
//! ([`JobShape::after`]): ranges of the original epoch order again, so resumes
//! compose, each job a shape of its own.
//!
//! Positions are places in the epoch order whatever cells it serves: every
//! cell, a subset's, or draws with replacement (a resumed epoch serves the
//! same draws).
//!
//! # What it guarantees
//!
//! The delivered sets of the jobs of an epoch are disjoint, so no position
//! comes twice. When the job that finishes the epoch does not drop its last
//! cells, every position of the epoch comes exactly once over all its jobs
//! (so every cell once, without replacement; positions an earlier job
//! dropped were never delivered, so they remain for the next). When it does
//! (`drop_last`), the positions never delivered are the ones it dropped:
//! fewer than its `world_size * batch_size`.
//!
//! Resuming with the shape of the job that stopped can instead continue that
//! very job, the same batches in the same order: its delivered ranges from
//! before it started, and its batches from the loader's position on
//! ([`RankShare::worker_resume`]). Another shape serves different batches.
//!
//! [`EpochOrder`]: super::EpochOrder

use std::ops::Range;

use super::RankShare;
use crate::error::{Error, Result};

/// How a job cuts an epoch among its ranks and their loader workers: all
/// that decides which epoch positions its delivered batches hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobShape {
    /// Ranks of the job (at least 1).
    pub world_size: usize,
    /// Data-loader workers per rank (at least 1; one for a loop that
    /// iterates the batches itself).
    pub workers: usize,
    /// Cells per batch (at least 1).
    pub batch_size: usize,
    /// Whether the job drops the cells that do not fill a batch on every rank.
    pub drop_last: bool,
}

/// The epoch positions a job resumed from delivered ranges still serves, in
/// epoch order: position `i` of this sequence is the `i`-th epoch position
/// not yet delivered. A job's ranks share it as [`RankShare`] shares a
/// fresh epoch of that many cells; [`JobShape::after`] says what remains
/// once they have delivered some batches. (The semantics in full, with what
/// they guarantee, are the docs of `src/dataset/batches/resume.rs`.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remaining {
    /// Cells in the epoch.
    cells: u64,
    /// The runs of positions not delivered: where each starts in the
    /// sequence, and its epoch positions.
    runs: Vec<(u64, Range<u64>)>,
    /// Length of the sequence.
    len: u64,
}

impl JobShape {
    /// A job of `world_size` ranks, each with `workers` loader workers,
    /// cutting batches of `batch_size` cells.
    pub fn new(world_size: usize, workers: usize, batch_size: usize, drop_last: bool) -> JobShape {
        JobShape {
            world_size,
            workers,
            batch_size,
            drop_last,
        }
    }

    /// What remains of the epoch once a job of this shape, serving
    /// `remaining`, has delivered `consumed` batches on every rank.
    pub fn after(&self, remaining: &Remaining, consumed: usize) -> Result<Remaining> {
        for (what, n) in [
            ("world_size", self.world_size),
            ("workers", self.workers),
            ("batch_size", self.batch_size),
        ] {
            if n == 0 {
                return Err(Error::Input(format!("a job's {what} must be at least 1")));
            }
        }
        let mut delivered = remaining.delivered();
        for rank in 0..self.world_size {
            let share = RankShare::new(
                remaining.len(),
                self.batch_size,
                rank,
                self.world_size,
                self.drop_last,
            );
            if consumed > share.len() {
                return Err(Error::Input(format!(
                    "{consumed} batches per rank were delivered, but the job has {} per rank",
                    share.len()
                )));
            }
            for batches in delivered_batches(&share, self.workers, consumed) {
                // A rank's batches are contiguous in the sequence, so a run
                // of them is one range of it.
                if !batches.is_empty() {
                    let positions = share.get(batches.start).start..share.get(batches.end - 1).end;
                    delivered.extend(remaining.to_epoch(positions));
                }
            }
        }
        delivered.sort_unstable_by_key(|r| r.start);
        Remaining::new(remaining.cells, &merged(delivered))
    }
}

/// The batches of `share` a loader over `workers` workers has delivered
/// after `consumed` of them: from each worker's span, the batches before
/// those [`RankShare::worker_resume`] says it still yields.
fn delivered_batches(
    share: &RankShare,
    workers: usize,
    consumed: usize,
) -> impl Iterator<Item = Range<usize>> + '_ {
    (0..workers).map(move |worker| {
        // Worker `worker` of the resumed loader takes up span
        // `(consumed + worker) % workers`.
        let span = share.worker_span((consumed + worker) % workers, workers);
        span.start..share.worker_resume(worker, workers, consumed).start
    })
}

/// Sorted ranges with touching ones joined.
fn merged(sorted: Vec<Range<u64>>) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

impl Remaining {
    /// Every position of an epoch of `cells` cells: a fresh epoch.
    pub fn all(cells: u64) -> Remaining {
        Remaining {
            cells,
            runs: vec![(0, 0..cells)],
            len: cells,
        }
    }

    /// The positions of an epoch of `cells` cells outside `delivered`:
    /// non-empty ranges, sorted and disjoint (touching is allowed), inside
    /// the epoch; anything else is an [`Error::Input`].
    pub fn new(cells: u64, delivered: &[Range<u64>]) -> Result<Remaining> {
        let mut runs = Vec::with_capacity(delivered.len() + 1);
        let (mut at, mut len) = (0u64, 0u64);
        let mut previous: Option<&Range<u64>> = None;
        for r in delivered {
            if r.start >= r.end {
                return Err(Error::Input(format!(
                    "delivered range {r:?} is empty or reversed"
                )));
            }
            if r.end > cells {
                return Err(Error::Input(format!(
                    "delivered range {r:?} is outside the epoch's {cells} cells"
                )));
            }
            if let Some(p) = previous.filter(|p| r.start < p.end) {
                return Err(Error::Input(format!(
                    "delivered ranges must be sorted and disjoint: {r:?} follows {p:?}"
                )));
            }
            if at < r.start {
                runs.push((len, at..r.start));
                len += r.start - at;
            }
            at = r.end;
            previous = Some(r);
        }
        if at < cells {
            runs.push((len, at..cells));
            len += cells - at;
        }
        Ok(Remaining { cells, runs, len })
    }

    /// Cells in the epoch.
    pub fn cells(&self) -> u64 {
        self.cells
    }

    /// Positions not yet delivered.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the epoch has delivered every position.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The epoch positions delivered: sorted, disjoint, non-touching ranges
    /// (what [`Remaining::new`] takes back).
    pub fn delivered(&self) -> Vec<Range<u64>> {
        let mut out = Vec::with_capacity(self.runs.len() + 1);
        let mut at = 0;
        for (_, r) in &self.runs {
            if at < r.start {
                out.push(at..r.start);
            }
            at = r.end;
        }
        if at < self.cells {
            out.push(at..self.cells);
        }
        out
    }

    /// The epoch positions of sequence positions `positions` (clamped to
    /// the sequence), as ranges in epoch order.
    pub fn to_epoch(&self, positions: Range<u64>) -> impl Iterator<Item = Range<u64>> + '_ {
        let first = self
            .runs
            .partition_point(|(s, r)| s + (r.end - r.start) <= positions.start);
        self.runs[first..]
            .iter()
            .take_while(move |(s, _)| *s < positions.end)
            .map(move |(s, r)| {
                let lo = r.start + positions.start.saturating_sub(*s);
                let hi = r.start + (positions.end - s).min(r.end - r.start);
                lo..hi
            })
            .filter(|r| r.start < r.end)
    }

    /// The epoch position of sequence position `at` (the epoch's length
    /// past the sequence's end).
    pub(crate) fn epoch_position(&self, at: u64) -> u64 {
        self.to_epoch(at..at + 1)
            .next()
            .map_or(self.cells, |r| r.start)
    }

    /// How many sequence positions come before epoch position `at` (the
    /// sequence position of `at` when it is not delivered).
    pub(crate) fn before(&self, at: u64) -> u64 {
        let i = self.runs.partition_point(|(_, r)| r.end <= at);
        match self.runs.get(i) {
            Some((s, r)) => s + at.saturating_sub(r.start),
            None => self.len,
        }
    }
}

#[cfg(test)]
// Lists of delivered ranges, some of them bad on purpose.
#[allow(clippy::single_range_in_vec_init, clippy::reversed_empty_ranges)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A small generator of the test's own (an LCG), so the cases are
    /// reproducible without the library's.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, bound: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % bound.max(1)
        }
    }

    /// Each rank's batches in the order its loader delivers them (one batch
    /// from each worker's span in turn, skipping spent ones), as epoch
    /// positions: the sequence is listed explicitly from the delivered
    /// ranges and indexed, independently of `to_epoch`.
    fn loader_batches(
        delivered: &BTreeSet<u64>,
        cells: u64,
        shape: JobShape,
    ) -> Vec<Vec<Vec<u64>>> {
        let sequence: Vec<u64> = (0..cells).filter(|p| !delivered.contains(p)).collect();
        (0..shape.world_size)
            .map(|rank| {
                let share = RankShare::new(
                    sequence.len() as u64,
                    shape.batch_size,
                    rank,
                    shape.world_size,
                    shape.drop_last,
                );
                let spans: Vec<Range<usize>> = (0..shape.workers)
                    .map(|w| share.worker_span(w, shape.workers))
                    .collect();
                let rounds = spans.iter().map(|s| s.len()).max().unwrap_or(0);
                let mut out = Vec::new();
                for t in 0..rounds {
                    for s in spans.iter().filter(|s| t < s.len()) {
                        let p = share.get(s.start + t);
                        out.push(sequence[p.start as usize..p.end as usize].to_vec());
                    }
                }
                out
            })
            .collect()
    }

    fn random_shape(rng: &mut Lcg) -> JobShape {
        JobShape::new(
            1 + rng.below(5) as usize,
            1 + rng.below(4) as usize,
            1 + rng.below(40) as usize,
            rng.below(3) == 0,
        )
    }

    #[test]
    fn any_shape_resumes_as_any_other_and_every_cell_comes_once() {
        let mut rng = Lcg(7);
        for case in 0..400 {
            let cells = rng.below(700);
            let shapes = [
                random_shape(&mut rng),
                random_shape(&mut rng),
                random_shape(&mut rng),
            ];
            let mut remaining = Remaining::all(cells);
            let mut delivered = BTreeSet::new();
            for (job, shape) in shapes.iter().enumerate() {
                let batches = loader_batches(&delivered, cells, *shape);
                let count = batches[0].len();
                assert!(batches.iter().all(|b| b.len() == count), "{case}");
                // The first two jobs stop at a random batch, the last runs on.
                let consumed = if job < 2 {
                    rng.below(count as u64 + 1) as usize
                } else {
                    count
                };
                let mut taken = BTreeSet::new();
                for rank in &batches {
                    for &p in rank[..consumed].iter().flatten() {
                        assert!(!delivered.contains(&p) && taken.insert(p), "{case} {p}");
                    }
                }
                delivered.extend(taken);
                remaining = shape.after(&remaining, consumed).unwrap();
                let listed: BTreeSet<u64> = remaining.delivered().into_iter().flatten().collect();
                assert_eq!(listed, delivered, "case {case}, job {job}: {shape:?}");
                assert_eq!(remaining.len(), cells - delivered.len() as u64);
            }
            let left = cells - delivered.len() as u64;
            let last = shapes[2];
            if last.drop_last {
                assert!(left < (last.world_size * last.batch_size) as u64, "{case}");
            } else {
                assert_eq!(left, 0, "case {case}: {shapes:?}");
            }
        }
    }

    #[test]
    fn delivered_batches_follow_the_loaders_turns() {
        for count in [0u64, 1, 5, 9, 16] {
            let share = RankShare::new(count, 1, 0, 1, false);
            for workers in 1..5 {
                for consumed in 0..=share.len() {
                    let got: BTreeSet<usize> = delivered_batches(&share, workers, consumed)
                        .flatten()
                        .collect();
                    // Delivered position p is batch p / workers of span p % workers.
                    let want: BTreeSet<usize> = (0..consumed)
                        .map(|p| share.worker_span(p % workers, workers).start + p / workers)
                        .collect();
                    assert_eq!(got, want, "{count} {workers} {consumed}");
                }
            }
        }
    }

    #[test]
    fn the_sequence_maps_to_the_positions_not_delivered() {
        let delivered = [2u64..5, 5..6, 9..12, 19..20];
        let remaining = Remaining::new(20, &delivered).unwrap();
        let sequence: Vec<u64> = (0..20)
            .filter(|p| !(2..6).contains(p) && !(9..12).contains(p) && *p != 19)
            .collect();
        assert_eq!(remaining.len(), sequence.len() as u64);
        assert_eq!(remaining.delivered(), [2..6, 9..12, 19..20]);
        for a in 0..=sequence.len() {
            for b in a..=sequence.len() + 2 {
                let got: Vec<u64> = remaining.to_epoch(a as u64..b as u64).flatten().collect();
                assert_eq!(got, sequence[a..b.min(sequence.len())], "{a}..{b}");
            }
        }
        for (at, &p) in sequence.iter().enumerate() {
            assert_eq!(remaining.epoch_position(at as u64), p);
        }
        assert_eq!(remaining.epoch_position(sequence.len() as u64), 20);
        for at in 0..=20u64 {
            let before = sequence.iter().filter(|&&p| p < at).count() as u64;
            assert_eq!(remaining.before(at), before, "{at}");
        }
        assert_eq!(Remaining::new(20, &[]).unwrap(), Remaining::all(20));
        assert!(Remaining::new(20, &[0..20]).unwrap().is_empty());
    }

    #[test]
    fn bad_states_are_refused_with_what_is_wrong() {
        let cases: [(&[Range<u64>], &str); 4] = [
            (&[3..3], "empty"),
            (&[5..2], "reversed"),
            (&[0..5, 4..8], "sorted and disjoint"),
            (&[90..101], "outside the epoch's 100 cells"),
        ];
        for (ranges, message) in cases {
            let e = Remaining::new(100, ranges).unwrap_err().to_string();
            assert!(e.contains(message), "{ranges:?}: {e}");
        }
        let fresh = Remaining::all(100);
        let e = JobShape::new(2, 1, 10, false).after(&fresh, 6).unwrap_err();
        assert!(e.to_string().contains("6 batches per rank"), "{e}");
        for shape in [
            JobShape::new(0, 1, 10, false),
            JobShape::new(1, 0, 10, false),
            JobShape::new(1, 1, 0, false),
        ] {
            assert!(shape.after(&fresh, 0).is_err(), "{shape:?}");
        }
    }
}

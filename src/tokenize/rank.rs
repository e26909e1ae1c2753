//! Geneformer's per-cell order: `(key, token)` pairs sorted by key, then
//! token, where the key is the complement of a positive `f64`'s bits (so
//! increasing keys are decreasing values).
//!
//! A comparison sort of a cell's ~2,000 pairs costs several times the decode
//! of the cell; counting passes over the keys' bits cost a few memory passes
//! instead. The keys' bits order the values, and their high bits spread
//! them by magnitude (exponent, then leading mantissa bits). Which passes
//! are cheapest depends on the medians, so the tokenizer says what to
//! [`Expect`] (only the time depends on it, never the order):
//!
//! - **Exact ties, tokens in input order** (medians that repeat, as a
//!   sketch's do; a dictionary made in the dataset's gene order): one
//!   stable counting pass into about a bucket per pair, by the keys' high
//!   bits, then one insertion sort over all the pairs, which moves each only
//!   within its bucket. A bucket is mostly one run of ties, already in token
//!   order, so few pairs move.
//! - **Mostly distinct keys** (medians that do not repeat, as Geneformer's
//!   own do): there buckets hold several keys in no order, and the
//!   insertion sort's moves cost more than a second pass. The keys are
//!   sorted stably by their top [`BITS`] bits below the highest bit in which
//!   they differ, in two counting passes (least significant digit first).
//! - **Exact ties, tokens in any order**: the same two passes, after two
//!   on the tokens' bits, so that ties come out in token order.
//!
//! Each ends with a check of the whole order. Pairs still out of order lie
//! within a run of equal top bits (keys a few ulps apart, or ties that came
//! in out of token order): an insertion sort moves them, and past a bound on
//! its moves each such run is sorted whole instead. Linear in the pairs but
//! for those runs, and the same order as a full sort of the pairs.

use crate::engine::best_row_kernels;

/// Below this many pairs, a comparison sort.
const SMALL: usize = 32;
/// Bits of the low digit of the two-digit sorts.
const LOW: u32 = 11;
/// Bits of the high digit.
const HIGH: u32 = 12;
/// The bits two counting passes sort by.
const BITS: u32 = LOW + HIGH;

/// What a cell's pairs are like, known from the tokenizer's medians and
/// tokens: it picks the passes of [`rank`] (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Many exact ties (medians repeat), and tokens increase in input order.
    TiesInTokenOrder,
    /// Many exact ties, tokens in any order.
    Ties,
    /// Keys mostly distinct.
    Distinct,
}

impl Expect {
    /// What to expect of rows over `columns` (each column's median and
    /// token, in column order; tokens below 0 are columns a row skips).
    /// Ties are expected where at least one column in 4 shares its median
    /// with another.
    pub(crate) fn of(columns: &[(f64, i32)]) -> Expect {
        let used = columns.iter().filter(|c| c.1 >= 0).count();
        if 4 * distinct_medians(columns).len() > 3 * used {
            Expect::Distinct
        } else if tokens_increase(columns) {
            Expect::TiesInTokenOrder
        } else {
            Expect::Ties
        }
    }
}

/// The distinct medians of the columns a row keeps (`(median, token)`, a
/// token below 0 a column rows skip), increasing.
pub(crate) fn distinct_medians(columns: &[(f64, i32)]) -> Vec<f64> {
    let mut medians: Vec<f64> = columns.iter().filter(|c| c.1 >= 0).map(|c| c.0).collect();
    medians.sort_unstable_by(f64::total_cmp);
    medians.dedup();
    medians
}

/// Whether the tokens of the columns a row keeps increase with the columns.
pub(crate) fn tokens_increase(columns: &[(f64, i32)]) -> bool {
    let tokens = columns.iter().map(|c| c.1).filter(|&t| t >= 0);
    tokens.clone().zip(tokens.skip(1)).all(|(a, b)| a < b)
}

/// Reused buffers of [`rank`].
#[derive(Debug, Default)]
pub(crate) struct RankBuffers {
    /// Bucket boundaries.
    counts: Vec<u32>,
    /// Each pair's bucket.
    slots: Vec<u32>,
    /// The other side of each counting pass.
    spare: Vec<(u64, i32)>,
    /// The sorted pairs. Only grown, never cleared: every cell's pairs are
    /// all written over its front, so zeroing it per cell (a memset of 16
    /// bytes a gene, 5% of a Geneformer batch's time) would be wasted.
    sorted: Vec<(u64, i32)>,
}

/// The pairs `(keys[i], tokens[i])` sorted by `(key, token)` increasing
/// (see the module docs), in `buffers` (as long as `keys`). `range` is the
/// least and the greatest key, as [`RowKernels::quotient_keys`] returns
/// them: found while the keys are written, in vectors, where a pass of its
/// own here (scalar compares of 64-bit values, one after another) took a
/// quarter of this function's time.
///
/// [`RowKernels::quotient_keys`]: crate::kernels::rows::RowKernels::quotient_keys
pub(crate) fn rank<'b>(
    keys: &[u64],
    range: (u64, u64),
    tokens: &[i32],
    expect: Expect,
    buffers: &'b mut RankBuffers,
) -> &'b [(u64, i32)] {
    debug_assert_eq!(keys.len(), tokens.len());
    debug_assert!(keys.iter().all(|k| (range.0..=range.1).contains(k)));
    let n = keys.len();
    if buffers.sorted.len() < n {
        buffers.sorted.resize(n, (0, 0));
        buffers.spare.resize(n, (0, 0));
    }
    let sorted = &mut buffers.sorted[..n];
    if n <= SMALL {
        pairs_into(sorted, keys, tokens);
        sorted.sort_unstable();
        return sorted;
    }
    let by_key = Digits::between(range);
    if expect == Expect::TiesInTokenOrder
        && buckets(
            keys,
            tokens,
            sorted,
            &by_key,
            &mut buffers.counts,
            &mut buffers.slots,
        )
    {
        return sorted;
    }
    let spare = &mut buffers.spare[..n];
    let mut source = Some((keys, tokens));
    if expect == Expect::Ties {
        let by_token = Digits::over(tokens.iter().map(|&t| ordered(t)));
        two_passes(source.take(), sorted, spare, &mut buffers.counts, |p| {
            by_token.of(ordered(p.1))
        });
    }
    two_passes(source, sorted, spare, &mut buffers.counts, |p| {
        by_key.of(p.0)
    });
    finish(sorted, |p| by_key.of(p.0));
    sorted
}

/// A token as a `u64` in the same order.
fn ordered(token: i32) -> u64 {
    u64::from(token as u32 ^ 1 << 31)
}

/// Writes the pairs `(keys[i], tokens[i])` into `to`, in their order.
fn pairs_into(to: &mut [(u64, i32)], keys: &[u64], tokens: &[i32]) {
    for ((slot, &key), &token) in to.iter_mut().zip(keys).zip(tokens) {
        *slot = (key, token);
    }
}

/// The top [`BITS`] bits of values below their highest differing bit.
struct Digits {
    lo: u64,
    shift: u32,
    /// How many bits the digits have (fewer than [`BITS`] where the
    /// values differ in fewer).
    width: u32,
}

impl Digits {
    /// The digits of `values`.
    fn over(values: impl Iterator<Item = u64>) -> Digits {
        Digits::between(values.fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v))))
    }

    /// The digits of values from `lo` to `hi` (both included).
    fn between((lo, hi): (u64, u64)) -> Digits {
        let bits = 64 - hi.saturating_sub(lo).leading_zeros();
        Digits {
            lo,
            shift: bits.saturating_sub(BITS),
            width: bits.min(BITS),
        }
    }

    /// `value`'s digits, below `2^width`.
    fn of(&self, value: u64) -> u64 {
        (value - self.lo) >> self.shift
    }
}

/// Sorts stably by `digits` (below `2^BITS`), low digit first, through
/// `spare`, into `pairs`: the pairs `(keys[i], tokens[i])` of `columns`,
/// or with `None` those in `pairs` already (the columns are read where
/// they lie rather than first written as pairs, a pass fewer).
fn two_passes(
    columns: Option<(&[u64], &[i32])>,
    pairs: &mut [(u64, i32)],
    spare: &mut [(u64, i32)],
    counts: &mut Vec<u32>,
    digits: impl Fn((u64, i32)) -> u64,
) {
    counts.clear();
    counts.resize((1 << LOW) + (1 << HIGH), 0);
    let (low, high) = counts.split_at_mut(1 << LOW);
    let low_of = |p| (digits(p) & ((1 << LOW) - 1)) as usize;
    let high_of = |p| (digits(p) >> LOW) as usize;
    match columns {
        Some((keys, tokens)) => {
            let from = keys.iter().copied().zip(tokens.iter().copied());
            low_pass(from, spare, (low, high), (&low_of, &high_of));
        }
        None => low_pass(
            pairs.iter().copied(),
            spare,
            (low, high),
            (&low_of, &high_of),
        ),
    }
    scatter(spare.iter().copied(), pairs, high, high_of);
}

/// The first of [`two_passes`]: counts both digits of `from`, turns the
/// counts into starts and places `from` into `to` by its low digit.
fn low_pass(
    from: impl Iterator<Item = (u64, i32)> + Clone,
    to: &mut [(u64, i32)],
    (low, high): (&mut [u32], &mut [u32]),
    (low_of, high_of): (&impl Fn((u64, i32)) -> usize, &impl Fn((u64, i32)) -> usize),
) {
    for p in from.clone() {
        low[low_of(p)] += 1;
        high[high_of(p)] += 1;
    }
    starts(low);
    starts(high);
    scatter(from, to, low, low_of);
}

/// Turns counts into where each digit's pairs start: the row kernels'
/// `starts`, a register of counts at a time (there are about as many
/// buckets as pairs, so one addition after another cost as much as
/// counting the pairs).
fn starts(counts: &mut [u32]) {
    best_row_kernels().starts(counts);
}

/// Places each pair of `from` at its digit's next place in `to`, in order.
fn scatter(
    from: impl Iterator<Item = (u64, i32)>,
    to: &mut [(u64, i32)],
    next: &mut [u32],
    digit: impl Fn((u64, i32)) -> usize,
) {
    for p in from {
        let at = &mut next[digit(p)];
        to[*at as usize] = p;
        *at += 1;
    }
}

/// Sorts the pairs `(keys[i], tokens[i])` into `to` by buckets (see the
/// module docs): stably into about one bucket per pair by their keys' top
/// bits, then by insertion. `false` (the pairs left in some order) when
/// the insertion sort would move pairs more than `4 * len` times.
fn buckets(
    keys: &[u64],
    tokens: &[i32],
    to: &mut [(u64, i32)],
    by_key: &Digits,
    counts: &mut Vec<u32>,
    slots: &mut Vec<u32>,
) -> bool {
    // About one bucket per pair: measured on Geneformer batches, 5-7% faster
    // than one per two pairs (fewer pairs out of order for the insertion
    // sort), and two per pair was slower (more buckets to count through).
    let bits = keys.len().next_power_of_two().trailing_zeros();
    let drop = by_key.width.saturating_sub(bits);
    slots.clear();
    slots.extend(keys.iter().map(|&key| (by_key.of(key) >> drop) as u32));
    counts.clear();
    counts.resize(1 << (by_key.width - drop), 0);
    for &b in slots.iter() {
        counts[b as usize] += 1;
    }
    starts(counts);
    for ((&key, &token), &b) in keys.iter().zip(tokens).zip(slots.iter()) {
        let at = &mut counts[b as usize];
        to[*at as usize] = (key, token);
        *at += 1;
    }
    // Every pair now lies in its bucket, buckets in order, and an insertion
    // sort over all of them moves each pair only within its bucket: the
    // same order as sorting each, without a loop over the buckets (whose
    // sizes, 0, 1, 2, ..., no branch predicts).
    insertion_sort_within(to, 4 * to.len())
}

/// Sorts `pairs`, already sorted by `digits` (stably or not): pairs out of
/// order lie within runs of equal digits.
fn finish(pairs: &mut [(u64, i32)], digits: impl Fn((u64, i32)) -> u64) {
    if in_order(pairs) || insertion_sort_within(pairs, pairs.len()) {
        return;
    }
    // Every move was within a run, so the runs are still whole.
    let mut rest = pairs;
    while let Some(&first) = rest.first() {
        let d = digits(first);
        let end = rest
            .iter()
            .position(|&p| digits(p) != d)
            .unwrap_or(rest.len());
        let (run, after) = rest.split_at_mut(end);
        run.sort_unstable();
        rest = after;
    }
}

/// Whether pair `a` comes before pair `b` (by key, then token), computed
/// without a branch on whether the keys are equal (exact ties are common:
/// genes of one count and one median).
fn before(a: (u64, i32), b: (u64, i32)) -> bool {
    (a.0 < b.0) | ((a.0 == b.0) & (a.1 < b.1))
}

/// Whether `pairs` are sorted: a branch per pair, which the predictor gets
/// right after the passes that leave them sorted, where a fold of every
/// comparison without branches made the check 12% of the samples of
/// Geneformer batches over distinct medians (with the branch, those batches
/// ran 4-8% faster).
fn in_order(pairs: &[(u64, i32)]) -> bool {
    pairs.windows(2).all(|w| !before(w[1], w[0]))
}

/// Sorts pairs in place by insertion, unless that takes more than `moves`
/// moves of a pair: then `false`, the pairs left in some order reached by
/// moving pairs only left past larger ones. The largest pair so far is
/// held apart, so a pair already in place (most are) is compared with it
/// and neither loaded again nor stored.
fn insertion_sort_within(part: &mut [(u64, i32)], mut moves: usize) -> bool {
    let Some(&first) = part.first() else {
        return true;
    };
    let mut last = first;
    for i in 1..part.len() {
        let p = part[i];
        if !before(p, last) {
            last = p;
            continue;
        }
        let mut j = i;
        while j > 0 && before(p, part[j - 1]) {
            if moves == 0 {
                part[j] = p;
                return false;
            }
            moves -= 1;
            part[j] = part[j - 1];
            j -= 1;
        }
        part[j] = p;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPECTS: [Expect; 3] = [Expect::TiesInTokenOrder, Expect::Ties, Expect::Distinct];

    /// A reproducible generator.
    fn next(s: &mut u64) -> u64 {
        *s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1442695040888963407);
        *s >> 11
    }

    /// A reproducible `(!bits, token)` list of `n` values: few distinct
    /// values (exact ties), values one ulp apart, a wide spread of
    /// magnitudes; tokens increasing, or in no particular order.
    fn candidates(n: usize, seed: u64, tokens_in_order: bool) -> Vec<(u64, i32)> {
        let mut s = seed;
        (0..n)
            .map(|i| {
                let r = next(&mut s);
                let v = match r % 4 {
                    0 => 1.0 + (r >> 2 & 3) as f64 / 8.0,
                    1 => f64::from_bits(1.5f64.to_bits() + (r >> 2 & 1)),
                    _ => (r >> 2) as f64 % 100_000.0 / 7.0 + 1e-3,
                };
                let token = if tokens_in_order { i } else { (i * 7919) % n };
                (!v.to_bits(), token as i32 - 5)
            })
            .collect()
    }

    /// Geneformer-like values `(c / n) * 1e4 / median` of small counts:
    /// medians from `medians` distinct ones (a sketch's few, or one per
    /// gene), tokens in gene order or not.
    fn cell(n: usize, seed: u64, medians: u64, tokens_in_order: bool) -> Vec<(u64, i32)> {
        let mut s = seed;
        let total = 3.0 * n as f64;
        (0..n)
            .map(|i| {
                let count = 1 + next(&mut s) % 8 * (next(&mut s) % 2);
                let median = 0.5 + (next(&mut s) % medians) as f64 * 0.37;
                let v = ((count as f64 / total) * 1e4) / median;
                let token = if tokens_in_order { i } else { (i * 7919) % n };
                (!v.to_bits(), token as i32)
            })
            .collect()
    }

    /// `pairs` ranked.
    fn ranked(pairs: &[(u64, i32)], expect: Expect, buffers: &mut RankBuffers) -> Vec<(u64, i32)> {
        let (keys, tokens): (Vec<u64>, Vec<i32>) = pairs.iter().copied().unzip();
        let range = (
            keys.iter().copied().min().unwrap_or(u64::MAX),
            keys.iter().copied().max().unwrap_or(0),
        );
        rank(&keys, range, &tokens, expect, buffers).to_vec()
    }

    /// `pairs` ranked with each [`Expect`] equal `pairs` sorted by value
    /// down, then token up.
    fn check(pairs: &[(u64, i32)], buffers: &mut RankBuffers, what: &str) {
        let mut want = pairs.to_vec();
        want.sort_by(|a, b| {
            let (va, vb) = (f64::from_bits(!a.0), f64::from_bits(!b.0));
            vb.partial_cmp(&va).unwrap().then(a.1.cmp(&b.1))
        });
        for expect in EXPECTS {
            assert_eq!(ranked(pairs, expect, buffers), want, "{what}, {expect:?}");
        }
    }

    #[test]
    fn rank_orders_by_value_down_then_token_up() {
        let mut buffers = RankBuffers::default();
        for (n, seed) in [(0, 1), (1, 2), (33, 9), (2_000, 3), (70_000, 4)] {
            for in_order in [true, false] {
                let what = format!("{n} candidates, tokens in order {in_order}");
                check(&candidates(n, seed, in_order), &mut buffers, &what);
            }
        }
        for seed in 0..8 {
            for (medians, n) in [(40, 2_100), (1 << 40, 2_100), (300, 9_000)] {
                for in_order in [true, false] {
                    let what =
                        format!("cell {seed}, {medians} medians, tokens in order {in_order}");
                    check(&cell(n, seed, medians, in_order), &mut buffers, &what);
                }
            }
        }
    }

    #[test]
    fn rank_holds_at_the_edges_of_its_passes() {
        let mut buffers = RankBuffers::default();
        // A large bucket of ties in reverse token order beside distinct
        // keys: past the bound on moves of the insertion sort.
        let mixed: Vec<(u64, i32)> = (0..600)
            .map(|i| (!1_000f64.to_bits(), 600 - i))
            .chain((0..400).map(|i| (!(i as f64 * 977.0 + 0.5).to_bits(), i)))
            .collect();
        check(&mixed, &mut buffers, "ties reversed beside distinct keys");
        // Every key equal: by token alone.
        let same: Vec<(u64, i32)> = (0..100)
            .map(|i| (!7f64.to_bits(), (i * 37) % 100))
            .collect();
        check(&same, &mut buffers, "one key");
        // Keys within a few ulps (fewer bits than the passes sort by), and
        // keys a few ulps apart among widely spread ones (within one digit).
        let narrow: Vec<(u64, i32)> = (0..5_000)
            .map(|i| (!(1.0f64.to_bits() + (i * 7919 % 1_000) as u64), i))
            .collect();
        check(&narrow, &mut buffers, "keys within 1,000 ulps");
        let wide: Vec<(u64, i32)> = (0..3_000)
            .map(|i| {
                let v = match i % 3 {
                    0 => f64::MAX,
                    1 => f64::from_bits(1 + (i * 31 % 97) as u64),
                    _ => f64::from_bits(2.0f64.to_bits() + (i * 13 % 5) as u64),
                };
                (!v.to_bits(), (i * 7 % 3_000))
            })
            .collect();
        check(&wide, &mut buffers, "extreme and near-equal keys");
        // Negative tokens order below positive ones.
        let signed: Vec<(u64, i32)> = (0..500)
            .map(|i| (!3f64.to_bits() + i % 2, 250 - i as i32))
            .collect();
        check(&signed, &mut buffers, "negative tokens");
    }

    #[test]
    fn expect_follows_the_medians_and_tokens() {
        let sketch = |i: usize| 1.0 + (i % 10) as f64;
        let in_order: Vec<(f64, i32)> = (0..100).map(|i| (sketch(i), i as i32)).collect();
        assert_eq!(Expect::of(&in_order), Expect::TiesInTokenOrder);
        let shuffled: Vec<(f64, i32)> = (0..100)
            .map(|i| (sketch(i), (i * 37 % 100) as i32))
            .collect();
        assert_eq!(Expect::of(&shuffled), Expect::Ties);
        let distinct: Vec<(f64, i32)> = (0..100).map(|i| (1.0 + i as f64, i)).collect();
        assert_eq!(Expect::of(&distinct), Expect::Distinct);
        // Skipped columns (token -1, median 1) count for neither.
        let skipping: Vec<(f64, i32)> = (0..100)
            .map(|i| {
                if i % 2 == 0 {
                    (1.0, -1)
                } else {
                    (1.0 + i as f64, 100 - i)
                }
            })
            .collect();
        assert_eq!(Expect::of(&skipping), Expect::Distinct);
    }
}

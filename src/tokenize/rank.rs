//! Geneformer's per-cell order: `(key, token)` pairs sorted by key, then
//! token, where the key is the complement of a positive `f64`'s bits (so
//! increasing keys are decreasing values).
//!
//! A comparison sort of a cell's ~2,000 pairs costs several times the decode
//! of the cell. The keys' bits order the values, and their high bits spread
//! them by magnitude (exponent, then leading mantissa bits), so one counting
//! pass into about a bucket per pair, over the keys' span, leaves buckets
//! of a few pairs each. One insertion sort over all the pairs then
//! moves each only within its bucket, so it costs the pairs out of order
//! within buckets (a run of exact ties already in token order costs
//! nothing). Past a bound on its moves (a large cluster out of order), the
//! buckets are sorted one by one instead: a bucket still large is bucketed
//! again over its own span, one of equal keys sorted by token alone unless
//! it already is. Linear in the pairs and the buckets, and the same order as
//! a full sort of the pairs.

/// Buckets this small are sorted directly.
const SMALL: usize = 32;

/// Reused buffers of [`rank`].
#[derive(Debug, Default)]
pub(crate) struct RankBuffers {
    /// Bucket boundaries.
    counts: Vec<u32>,
    /// Each pair's bucket.
    slots: Vec<u32>,
    /// The sorted pairs. Only grown, never cleared: every cell's pairs are
    /// all written over its front, so zeroing it per cell (a memset of 16
    /// bytes a gene, 5% of a Geneformer batch's time) would be wasted.
    sorted: Vec<(u64, i32)>,
}

/// The pairs `(keys[i], tokens[i])` sorted by `(key, token)` increasing
/// (see the module docs), in `buffers` (as long as `keys`).
pub(crate) fn rank<'b>(
    keys: &[u64],
    tokens: &[i32],
    buffers: &'b mut RankBuffers,
) -> &'b [(u64, i32)] {
    debug_assert_eq!(keys.len(), tokens.len());
    let n = keys.len();
    if buffers.sorted.len() < n {
        buffers.sorted.resize(n, (0, 0));
    }
    let sorted = &mut buffers.sorted[..n];
    if n <= SMALL {
        pairs_into(sorted, keys, tokens);
        sorted.sort_unstable();
    } else {
        bucket(
            keys,
            tokens,
            sorted,
            &mut buffers.counts,
            &mut buffers.slots,
        );
    }
    sorted
}

/// Writes the pairs `(keys[i], tokens[i])` into `to`, in their order.
fn pairs_into(to: &mut [(u64, i32)], keys: &[u64], tokens: &[i32]) {
    for ((slot, &key), &token) in to.iter_mut().zip(keys).zip(tokens) {
        *slot = (key, token);
    }
}

/// Sorts the pairs `(keys[i], tokens[i])` into `to` (as long): counted into
/// buckets by the high bits of `key - min`, stably, each bucket then sorted
/// (large ones bucketed again). A run of equal keys keeps the order it came
/// in, which is token order whenever tokens increase with the columns (a
/// dictionary made in the dataset's gene order): such runs are checked and
/// left as they are.
fn bucket(
    keys: &[u64],
    tokens: &[i32],
    to: &mut [(u64, i32)],
    counts: &mut Vec<u32>,
    slots: &mut Vec<u32>,
) {
    let (lo, hi) = keys
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), &k| (lo.min(k), hi.max(k)));
    if lo >= hi {
        pairs_into(to, keys, tokens);
        if !to.is_sorted_by_key(|p| p.1) {
            to.sort_unstable_by_key(|p| p.1);
        }
        return;
    }
    // About one bucket per pair: measured on Geneformer batches, 5-7% faster
    // than one per two pairs (fewer pairs out of order for the insertion
    // sort), and two per pair was slower (more buckets to count through).
    let bits = keys.len().next_power_of_two().trailing_zeros();
    let n_buckets = 1usize << bits;
    let span = hi - lo;
    // `span >> shift` has at most `bits` bits: every bucket index is below `n_buckets`.
    let shift = (64 - span.leading_zeros()).saturating_sub(bits);
    let at = |key: u64| ((key - lo) >> shift) as usize;
    counts.clear();
    counts.resize(n_buckets + 1, 0);
    slots.clear();
    slots.extend(keys.iter().map(|&key| at(key) as u32));
    for &b in slots.iter() {
        counts[b as usize + 1] += 1;
    }
    // The running total kept in a register: adding each bucket's stored
    // predecessor instead makes every step wait for the store before it.
    let mut total = 0;
    for c in counts.iter_mut() {
        total += *c;
        *c = total;
    }
    // `counts[b]` is where bucket `b` starts; it is advanced past each pair
    // placed, so afterwards it is where bucket `b` ends.
    for ((&key, &token), &b) in keys.iter().zip(tokens).zip(slots.iter()) {
        let slot = &mut counts[b as usize];
        to[*slot as usize] = (key, token);
        *slot += 1;
    }
    // Every pair now lies in its bucket, buckets in order, and an insertion
    // sort over all of them moves each pair only within its bucket: the
    // same order as sorting each, without a loop over the buckets (whose
    // sizes, 0, 1, 2, ..., no branch predicts). Its cost is the pairs out of
    // order within buckets: few, unless a bucket is a large cluster (a run
    // of exact ties in token order is none). Past a bound on the moves, the
    // buckets are sorted one by one instead (they are still buckets).
    if insertion_sort_within(to, 4 * to.len()) {
        return;
    }
    let mut begin = 0usize;
    for &end in &counts[..n_buckets] {
        let end = end as usize;
        let part = &mut to[begin..end];
        match part.len() {
            0 | 1 => {}
            // No bound on a few pairs' moves: always sorted.
            2..=SMALL => {
                insertion_sort_within(part, usize::MAX);
            }
            _ => {
                let (keys, tokens): (Vec<u64>, Vec<i32>) = part.iter().copied().unzip();
                bucket(&keys, &tokens, part, &mut Vec::new(), &mut Vec::new());
            }
        }
        begin = end;
    }
}

/// Whether pair `a` comes before pair `b` (by key, then token), computed
/// without a branch on whether the keys are equal (exact ties are common:
/// genes of one count and one median).
fn before(a: (u64, i32), b: (u64, i32)) -> bool {
    (a.0 < b.0) | ((a.0 == b.0) & (a.1 < b.1))
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

    /// A reproducible `(!bits, token)` list of `n` values: few distinct
    /// values (exact ties), values one ulp apart, a wide spread of
    /// magnitudes, and tokens in no particular order.
    fn candidates(n: usize, seed: u64) -> Vec<(u64, i32)> {
        let mut s = seed;
        (0..n)
            .map(|i| {
                s = s
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1442695040888963407);
                let v = match s >> 62 {
                    0 => 1.0 + (s >> 60 & 3) as f64 / 8.0,
                    1 => f64::from_bits(1.5f64.to_bits() + (s >> 61 & 1)),
                    _ => ((s >> 20) % 100_000) as f64 / 7.0 + 1e-3,
                };
                (!v.to_bits(), ((i * 7919) % n.max(1)) as i32 - 5)
            })
            .collect()
    }

    /// `pairs` ranked.
    fn sorted(pairs: &[(u64, i32)], buffers: &mut RankBuffers) -> Vec<(u64, i32)> {
        let (keys, tokens): (Vec<u64>, Vec<i32>) = pairs.iter().copied().unzip();
        rank(&keys, &tokens, buffers).to_vec()
    }

    #[test]
    fn rank_orders_by_value_down_then_token_up() {
        let mut buffers = RankBuffers::default();
        for (n, seed) in [(0, 1), (1, 2), (33, 9), (2_000, 3), (70_000, 4)] {
            let got = candidates(n, seed);
            let mut want = got.clone();
            want.sort_by(|a, b| {
                let (va, vb) = (f64::from_bits(!a.0), f64::from_bits(!b.0));
                vb.partial_cmp(&va).unwrap().then(a.1.cmp(&b.1))
            });
            assert_eq!(sorted(&got, &mut buffers), want, "{n} candidates");
        }
        // A large bucket of ties in reverse token order beside distinct
        // keys: past the bound on moves, so its buckets are sorted one by one.
        let mixed: Vec<(u64, i32)> = (0..600)
            .map(|i| (1_000, 600 - i))
            .chain((0..400).map(|i| (i as u64 * 977, i)))
            .collect();
        let mut want = mixed.clone();
        want.sort_unstable();
        assert_eq!(sorted(&mixed, &mut buffers), want);
        // Every key equal: by token alone.
        let same: Vec<(u64, i32)> = (0..100).map(|i| (7, (i * 37) % 100)).collect();
        assert!(sorted(&same, &mut buffers)
            .windows(2)
            .all(|w| w[0].1 < w[1].1));
    }
}

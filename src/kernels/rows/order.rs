//! The vector bodies of ordering a cell's genes: scGPT's tally of small
//! counts, and Geneformer's classes and the counting pass over them.

use super::{all_lanes, any_above, last_gathered, TALLY_BLOCK};
use crate::kernels::reference::rows as scalar;
use crate::kernels::rows::{ClassLookup, CLASS_START_BITS, TALLY_SLOTS};
use crate::kernels::vector::Vector;

/// [`scalar::tally`] a register of counts at a time. With `m_k` the sum of
/// `min(c, k)` over the counts, `m_k - m_(k-1)` is the number of counts of
/// at least `k`, so the tally of the small values takes a minimum and an
/// addition per value below [`TALLY_SLOTS`] and register, with no store
/// per count (the reference's increments of a table wait on each other
/// when consecutive counts are equal, as most are). The larger counts of a
/// register are compressed to `rest`; the tail goes through the
/// reference's loop.
#[inline(always)]
pub(super) fn tally<V: Vector>(
    v: V,
    counts: &[u32],
    small: &mut [usize; TALLY_SLOTS],
    rest: &mut [u32],
) -> usize {
    scalar::check_tally(counts, rest);
    let lanes = V::LANES;
    let all = all_lanes::<V>();
    let (top, below_top) = (v.splat(TALLY_SLOTS as u32), v.splat(TALLY_SLOTS as u32 - 1));
    let (mut n, mut i) = (0, 0);
    while i + lanes <= counts.len() {
        let end = counts.len().min(i + TALLY_BLOCK * lanes);
        let (start, rest_before) = (i, n);
        // `mins[k - 1]`: the lanes' sums of `min(c, k)`.
        let mut mins = [v.splat(0); TALLY_SLOTS];
        while i + lanes <= end {
            // SAFETY: `i + LANES <= counts.len()`; `n <= i`, so `n + LANES`
            // is within `rest` (at least as long as `counts`, checked).
            unsafe {
                let c = v.load_u32(counts.as_ptr().add(i));
                for (k, m) in mins.iter_mut().enumerate() {
                    *m = v.add(*m, v.min(c, v.splat(k as u32 + 1)));
                }
                // -1 in the lanes of `TALLY_SLOTS` or more.
                let larger = v.sign_bits(v.sub(below_top, v.min(c, top))) & all;
                v.compress_store_u32(rest.as_mut_ptr().add(n), c, larger);
                n += larger.count_ones() as usize;
            }
            i += lanes;
        }
        // `at_least[k]`: the counts of at least `k`.
        let mut at_least = [0usize; TALLY_SLOTS + 1];
        at_least[0] = i - start;
        let mut before = 0;
        for (k, &m) in mins.iter().enumerate() {
            let total = v.sum_lanes(m);
            at_least[k + 1] = total - before;
            before = total;
        }
        debug_assert_eq!(at_least[TALLY_SLOTS], n - rest_before);
        for (k, slot) in small.iter_mut().enumerate() {
            *slot += at_least[k] - at_least[k + 1];
        }
    }
    scalar::tally_from(&counts[i..], small, rest, n)
}

/// [`scalar::starts`] a register of counts at a time: each register's
/// inclusive sums across its lanes, less its own counts, plus the total
/// before it; the total carried to the next register in every lane. The
/// register's own total is broadcast apart from the running one, so the
/// chain from register to register is one addition (where the reference's
/// is an addition per count); broadcasting the running total after adding
/// it made each register's lane permute wait on the addition before, and
/// starts took 0.55 cycles a count. Additions wrap alike in any order.
/// The tail through the reference's loop.
#[inline(always)]
pub(super) fn starts<V: Vector>(v: V, counts: &mut [u32]) -> u32 {
    let mut total = v.splat(0);
    let mut i = 0;
    while i + V::LANES <= counts.len() {
        // SAFETY: `i + LANES <= counts.len()`.
        unsafe {
            let at = counts.as_mut_ptr().add(i);
            let c = v.load_u32(at);
            let sums = v.prefix_sum(c);
            v.store_u32(at, v.add(v.sub(sums, c), total));
            total = v.add(total, v.broadcast_last(sums));
        }
        i += V::LANES;
    }
    scalar::starts_from(&mut counts[i..], v.lanes(total)[0])
}

/// [`scalar::classify`] a register of genes at a time: each gene's word
/// gathered from the columns, its class gathered from the order, its token
/// shifted out of the word. A register with a gene or a class outside the
/// lookup goes through the reference's loop (which panics there, at the
/// same gene), as do the first gene (the one with no gene before it in the
/// register's loads) and the tail.
#[inline(always)]
pub(super) fn classify<V: Vector>(
    v: V,
    lookup: &ClassLookup<'_>,
    genes: &[i32],
    counts: &[u32],
    (classes, tokens): (&mut [u32], &mut [i32]),
    strays: &mut Vec<u32>,
) -> bool {
    scalar::check_classify(genes, counts, classes, tokens);
    let lanes = V::LANES;
    let reference =
        |from: usize, to: usize, out: (&mut [u32], &mut [i32]), strays: &mut Vec<u32>| {
            let last = from.checked_sub(1).map_or(-1, |l| genes[l]);
            let out = (&mut out.0[from..to], &mut out.1[from..to]);
            scalar::classify_from(
                lookup,
                &genes[from..to],
                &counts[from..to],
                out,
                strays,
                from,
                last,
            )
        };
    let mut increasing = reference(0, genes.len().min(1), (classes, tokens), strays);
    let mut i = 1;
    if let (Some(last_column), Some(last_class)) = (
        last_gathered(lookup.columns.len()),
        last_gathered(lookup.order.len()),
    ) {
        let (last_column, last_class) = (v.splat(last_column), v.splat(last_class));
        let (one, top, stray) = (v.splat(1), v.splat(lookup.top), v.splat(lookup.stray));
        let (start_mask, start_bits) = (
            v.splat((1 << CLASS_START_BITS) - 1),
            v.splat(CLASS_START_BITS),
        );
        let mut descents = v.splat(0);
        while i + lanes <= genes.len() {
            // SAFETY: `1 <= i` and `i + LANES <= genes.len()`, so `LANES`
            // genes are readable at `i - 1` and at `i`, and counts at `i`.
            let (g, before, c) = unsafe {
                let at = genes.as_ptr().add(i).cast::<u32>();
                (
                    v.load_u32(at),
                    v.load_u32(at.sub(1)),
                    v.load_u32(counts.as_ptr().add(i)),
                )
            };
            if any_above(v, g, last_column) {
                increasing &= reference(i, i + lanes, (classes, tokens), strays);
                i += lanes;
                continue;
            }
            // SAFETY: every lane of `g` is at most the last column.
            let word = unsafe { v.gather_u32(lookup.columns.as_ptr(), g) };
            let at = v.add(v.and(word, start_mask), v.min(v.sub(c, one), top));
            if any_above(v, at, last_class) {
                increasing &= reference(i, i + lanes, (classes, tokens), strays);
                i += lanes;
                continue;
            }
            // SAFETY: every lane of `at` is at most the last class; the
            // outputs are as long as the genes, so `LANES` values at `i`.
            let class = unsafe {
                let class = v.gather_u32(lookup.order.as_ptr(), at);
                v.store_u32(classes.as_mut_ptr().add(i), class);
                v.store_u32(
                    tokens.as_mut_ptr().add(i).cast(),
                    v.shr_each(word, start_bits),
                );
                class
            };
            // Genes within the columns lie below `2^31`, so `g - before - 1`
            // is negative exactly where a gene does not exceed the one
            // before it.
            descents = v.or(descents, v.sub(v.sub(g, before), one));
            // `a - b` or `b - a` has its top bit set unless `a == b`.
            let unequal = v.or(v.sub(class, stray), v.sub(stray, class));
            let mut at_stray = !v.sign_bits(unequal) & all_lanes::<V>();
            while at_stray != 0 {
                strays.push((i + at_stray.trailing_zeros() as usize) as u32);
                at_stray &= at_stray - 1;
            }
            i += lanes;
        }
        increasing &= v.sign_bits(descents) == 0;
    }
    increasing & reference(i.min(genes.len()), genes.len(), (classes, tokens), strays)
}

/// [`scalar::order_by_class`] as a counting pass that keeps each gene's
/// rank among the genes of its class before it (past the counters), the
/// classes' starts, and a placing pass that only reads: a gene's place is
/// its class's start plus its rank. The starts are never moved, so each
/// class's end is the next class's start: the counters are one longer than
/// the classes, and the ends begin at the second.
///
/// Where the ISA ranks the lanes that share a value ([`Vector::CONFLICTS`])
/// both passes take a register of genes at a time: counting gathers the
/// register's classes' counters, adds the lanes before it of the same class
/// (a gene's rank) and scatters the ranks moved on (the scatter writes
/// lanes in order, so the highest lane of a class, the largest rank, is
/// what stays); placing gathers the starts and scatters the tokens, with no
/// store it waits on. Elsewhere, and for the tail, a gene at a time.
///
/// Why the passes are shaped so, each measured in Geneformer's batches:
/// placing that moved a class's start past each gene (the reference's)
/// made every gene, or register, wait on the store of the one before it
/// wherever two genes in a row share a class, a third of a cell's genes;
/// counting the row's halves apart, two such chains side by side, doubled
/// the counters, and clearing and summing them cost more than the chains
/// (8-10% slower on an AVX2 Zen 3 core; on AVX-512 too, in registers). A
/// gene at a time, every place is found before any token is stored: placed
/// in the same loop, each store's address waited on two loads and the next
/// genes' loads on those stores (1.7 ns a gene on the Zen 3 core against
/// 1.0 split).
#[inline(always)]
pub(super) fn order_by_class<V: Vector>(
    v: V,
    classes: &[u32],
    tokens: &[i32],
    width: usize,
    ends: &mut Vec<u32>,
    placed: &mut [i32],
) -> usize {
    scalar::check_order_by_class(classes, tokens, width, placed);
    let (n, lanes, one) = (classes.len(), V::LANES, v.splat(1));
    let whole = if V::CONFLICTS { n - n % lanes } else { 0 };
    ends.clear();
    ends.resize(width + 1 + n, 0);
    let (counters, ranks) = ends.split_at_mut(width + 1);
    for i in (0..whole).step_by(lanes) {
        // SAFETY: `i + LANES <= whole <= n`, within the classes and the
        // ranks; every class is below `width` (checked above), within the
        // counters.
        unsafe {
            let k = v.load_u32(classes.as_ptr().add(i));
            let rank = v.add(v.gather_u32(counters.as_ptr(), k), v.equal_before(k));
            v.store_u32(ranks.as_mut_ptr().add(i), rank);
            v.scatter_u32(counters.as_mut_ptr(), k, v.add(rank, one));
        }
    }
    for (&k, rank) in classes[whole..].iter().zip(&mut ranks[whole..]) {
        let counter = &mut counters[k as usize];
        *rank = *counter;
        *counter += 1;
    }
    starts(v, counters);
    for i in (0..whole).step_by(lanes) {
        // SAFETY: as above for the classes, tokens and ranks; each place is
        // its class's start plus its rank in the class, below the class's
        // end, so below `n`, within `placed`.
        unsafe {
            let k = v.load_u32(classes.as_ptr().add(i));
            let t = v.load_u32(tokens.as_ptr().add(i).cast());
            let rank = v.load_u32(ranks.as_ptr().add(i));
            let at = v.add(v.gather_u32(counters.as_ptr(), k), rank);
            v.scatter_u32(placed.as_mut_ptr().cast(), at, t);
        }
    }
    // Each rank becomes the gene's place.
    for (&k, rank) in classes[whole..].iter().zip(&mut ranks[whole..]) {
        *rank += counters[k as usize];
    }
    for (&at, &t) in ranks[whole..].iter().zip(&tokens[whole..]) {
        placed[at as usize] = t;
    }
    ends.truncate(width + 1);
    1
}

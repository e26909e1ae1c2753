//! Geneformer's order from each gene's place in one order shared by every
//! cell, where the classes do not apply: medians that do not repeat
//! (Geneformer's own dictionary has a median per gene), or tokens in
//! another order than the genes.
//!
//! The argument of the `classes` module holds for every pair `(c, g)` of a
//! count and a column: where two pairs' `c / m` differ by more than a
//! relative `2^-40`, their `v = ((c / n) * t) / m` differ in the same
//! direction in every cell, and pairs of one count and one median have one
//! `v` in every cell. So the pairs of counts up to a bound, ordered by
//! `c / m` decreasing and then by token, have places that order every
//! cell's genes as `(v, token)` does. A row's genes then sort by their
//! places: integers below `2^22`, distinct within a row, sorted exactly by
//! two counting passes of 8-byte items (the place above the gene's index in
//! the row), with no key computed, no check of the order and no insertion
//! sort. The key path ([`super::rank`]) sorts 16-byte `(key, token)` pairs
//! by the keys' top bits, then checks and repairs the order.
//!
//! Two kinds of genes have no place and are merged in by their keys:
//! counts past the bound (about one gene in 450 with the bound at 32), and
//! pairs whose `c / m` lies within a relative `2^-40` of a different pair's
//! (say `(1, m)` and `(3, 3m)`), whose order may differ from cell to cell.
//! A row of more than one such stray in eight is left to the key path.

use super::classes::{APART, BOUNDS};
use crate::engine::best_row_kernels;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};

/// The most counts a table gives places.
const COUNTS: usize = 32;

/// Bits a place may have: two counting passes of at most 11 bits each,
/// about as many buckets as a row has genes.
const PLACE_BITS: u32 = 22;

/// The place of a column rows skip (no token or no median).
const SKIP: u32 = u32::MAX;

/// The place of a pair whose order may differ from cell to cell.
const STRAY: u32 = u32::MAX - 1;

/// Each `(count, column)` pair's place (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct PlaceTable {
    /// `places[(c - 1) * width + g]`, for count `c` in `1..=top` in column
    /// `g`: its place, or [`SKIP`] or [`STRAY`].
    places: Vec<u32>,
    /// Each column's token (-1 where skipped).
    tokens: Vec<i32>,
    /// Columns.
    width: usize,
    /// The counts with places: `1..=top`.
    top: u32,
    /// How many places there are (one past the greatest).
    len: u32,
}

/// Reused buffers of [`PlaceTable::ranked`].
#[derive(Debug, Default)]
pub(crate) struct PlaceScratch {
    /// Each gene's place.
    places: Vec<u32>,
    /// Each gene's token.
    tokens: Vec<i32>,
    /// The placed genes, their place above their index; then sorted.
    items: Vec<u64>,
    /// The other side of the first counting pass.
    spare: Vec<u64>,
    /// Counts of the low digits, then of the high ones.
    counts: Vec<u32>,
    /// Where the strays lie in the row.
    strays_at: Vec<u32>,
    /// The strays' keys and tokens.
    strays: Vec<(u64, i32)>,
}

impl PlaceTable {
    /// The places of `columns` (`(median, token)`, a token below 0 a
    /// column rows skip) for `target_sum`, or `None` where a table would
    /// not order every cell's genes: a median or the target sum outside
    /// the bounds that keep every `v` a normal number, or too many columns
    /// for places of two counts.
    pub(crate) fn over(columns: &[(f64, i32)], target_sum: f64) -> Option<PlaceTable> {
        let mut by_median: Vec<u32> = (0..columns.len() as u32)
            .filter(|&g| columns[g as usize].1 >= 0)
            .collect();
        let bounded = BOUNDS.contains(&target_sum)
            && by_median
                .iter()
                .all(|&g| BOUNDS.contains(&columns[g as usize].0));
        let top = ((1 << PLACE_BITS) / by_median.len().max(1)).min(COUNTS);
        if !bounded || top < 2 || by_median.is_empty() {
            return None;
        }
        by_median.sort_unstable_by(|&a, &b| {
            let (ma, ta) = columns[a as usize];
            let (mb, tb) = columns[b as usize];
            ma.total_cmp(&mb).then(ta.cmp(&tb))
        });
        let pairs = merged(columns, &by_median, top as u32);
        let width = columns.len();
        let mut places = vec![SKIP; top * width];
        let same = |a: (u32, u32), b: (u32, u32)| {
            a.0 == b.0 && columns[a.1 as usize].0 == columns[b.1 as usize].0
        };
        let ratio = |(c, g): (u32, u32)| f64::from(c) / columns[g as usize].0;
        // Runs of one `(count, median)`: a run is a stray where its ratio
        // lies within `APART` of the run before or after it.
        let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
        for (i, &p) in pairs.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if same(pairs[run.start], p) => run.end = i + 1,
                _ => runs.push(i..i + 1),
            }
        }
        let close = |a: &std::ops::Range<usize>, b: &std::ops::Range<usize>| {
            ratio(pairs[a.start]) < ratio(pairs[b.start]) * (1.0 + APART)
        };
        let mut place = 0u32;
        for (k, run) in runs.iter().enumerate() {
            let stray = (k > 0 && close(&runs[k - 1], run))
                || runs.get(k + 1).is_some_and(|next| close(run, next));
            for &(c, g) in &pairs[run.clone()] {
                let at = if stray {
                    STRAY
                } else {
                    place += 1;
                    place - 1
                };
                places[(c as usize - 1) * width + g as usize] = at;
            }
        }
        Some(PlaceTable {
            places,
            tokens: columns.iter().map(|c| c.1).collect(),
            width,
            top: top as u32,
            len: place,
        })
    }

    /// Writes the first `out.len()` tokens of a row's genes with a token
    /// and a median, ordered by `v` decreasing, then token, to `out`, and
    /// returns how many it wrote. `columns` are the table's (`(median,
    /// token)`); `key(c, m)` is `!v.to_bits()` of a gene of count `c` and
    /// median `m`. `None` (the row left to [`super::rank`]) where more than
    /// one gene in eight is a stray.
    ///
    /// # Panics
    ///
    /// Where a gene is not a column of the table.
    pub(crate) fn ranked(
        &self,
        genes: &[i32],
        counts: &[i32],
        columns: &[(f64, i32)],
        key: impl Fn(u32, f64) -> u64,
        s: &mut PlaceScratch,
        out: &mut [i32],
    ) -> Option<usize> {
        let len = genes.len();
        s.tokens.resize(len, 0);
        s.items.resize(len, 0);
        s.spare.resize(len, 0);
        s.strays_at.clear();
        // Genes that are not placed are counted at `none`, one past the
        // last place, and taken off again after the loop: the loop then
        // counts every gene with no branch.
        let none = self.len;
        let bits = 32 - none.leading_zeros();
        let low_bits = bits.div_ceil(2);
        let mask = (1u32 << low_bits) - 1;
        let n_low = 1usize << low_bits;
        s.counts.clear();
        s.counts.resize(n_low + (none >> low_bits) as usize + 1, 0);
        let (low, high) = s.counts.split_at_mut(n_low);
        // Each gene's place and token are gathered first, in a loop of
        // loads alone: the places lie in a table of several MiB, and a loop
        // that also counts and writes each gene has fewer of their loads in
        // flight. Places of 4 bytes and tokens in a table of their own, in
        // place of one 8-byte entry of both, keep the rows of the small
        // counts (most genes') in less cache: 9-25% faster at 1 thread,
        // about even at 2.
        let top = self.top;
        s.places.resize(len, 0);
        let (tokens, places) = (&mut s.tokens[..len], &mut s.places[..len]);
        for (((&g, &c), t), p) in genes
            .iter()
            .zip(counts)
            .zip(tokens.iter_mut())
            .zip(places.iter_mut())
        {
            let g = g as usize;
            *t = self.tokens[g];
            let c = (c as u32).wrapping_sub(1);
            *p = if c < top {
                self.places[c as usize * self.width + g]
            } else {
                STRAY
            };
        }
        let mut n = 0;
        let items = &mut s.items[..len];
        for (i, (&place, &token)) in places.iter().zip(tokens.iter()).enumerate() {
            items[n] = u64::from(place) << 32 | i as u64;
            let counted = place.min(none);
            low[(counted & mask) as usize] += 1;
            high[(counted >> low_bits) as usize] += 1;
            n += usize::from(place < none);
            if place == STRAY && token >= 0 {
                s.strays_at.push(i as u32);
            }
        }
        if 8 * s.strays_at.len() > len {
            return None;
        }
        let unplaced = (len - n) as u32;
        low[(none & mask) as usize] -= unplaced;
        high[(none >> low_bits) as usize] -= unplaced;
        best_row_kernels().starts(low);
        best_row_kernels().starts(high);
        for &item in &s.items[..n] {
            let at = &mut low[((item >> 32) as u32 & mask) as usize];
            s.spare[*at as usize] = item;
            *at += 1;
        }
        for &item in &s.spare[..n] {
            let at = &mut high[(item >> (32 + low_bits)) as usize];
            s.items[*at as usize] = item;
            *at += 1;
        }
        let (items, tokens) = (&s.items[..n], &s.tokens);
        let token_of = |item: &u64| tokens[*item as u32 as usize];
        let mut written = 0;
        if s.strays_at.is_empty() {
            fill(out, &mut written, items.iter().map(token_of));
            return Some(written);
        }
        let key_of = |i: usize| {
            (
                key(counts[i] as u32, columns[genes[i] as usize].0),
                tokens[i],
            )
        };
        s.strays.clear();
        s.strays
            .extend(s.strays_at.iter().map(|&i| key_of(i as usize)));
        s.strays.sort_unstable();
        let mut from = 0;
        for &stray in &s.strays {
            let before = |item: &u64| key_of(*item as u32 as usize) < stray;
            let at = from + gallop(&items[from..], before);
            fill(out, &mut written, items[from..at].iter().map(token_of));
            fill(out, &mut written, std::iter::once(stray.1));
            from = at;
        }
        fill(out, &mut written, items[from..].iter().map(token_of));
        Some(written)
    }
}

/// How many of `items` lie `before` (a prefix of them), found by probing
/// 1, 2, 4, ... items in and then searching the last step: a stray's
/// place is near the front of what is left (its large count puts it
/// high in the order), where a search of the whole row probes a dozen
/// items, each a key computed from a median looked up.
fn gallop(items: &[u64], before: impl Fn(&u64) -> bool) -> usize {
    let mut step = 1;
    let mut lo = 0;
    while lo + step <= items.len() && before(&items[lo + step - 1]) {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(items.len());
    lo + items[lo..hi].partition_point(before)
}

/// The last [`PlaceTable`] built and what it was built from. Batches
/// resolve their tokenizer once an epoch, and a table of places for 36,000
/// columns takes about 80 ms to build on a 2-core machine: an epoch over
/// the same columns takes it from here. Not part of a tokenizer's
/// settings, so every two memos are equal.
#[derive(Clone, Default)]
pub(crate) struct PlaceMemo(Arc<Mutex<Option<Built>>>);

/// A table and what it was built from (the medians' bits).
struct Built {
    columns: Vec<(u64, i32)>,
    target_sum: u64,
    table: Arc<PlaceTable>,
}

impl PlaceMemo {
    /// The table over `columns` for `target_sum`, from the memo where it
    /// was the last built.
    pub(crate) fn over(&self, columns: &[(f64, i32)], target_sum: f64) -> Option<Arc<PlaceTable>> {
        let bits: Vec<(u64, i32)> = columns.iter().map(|&(m, t)| (m.to_bits(), t)).collect();
        let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(built) = memo.as_ref() {
            if built.columns == bits && built.target_sum == target_sum.to_bits() {
                return Some(Arc::clone(&built.table));
            }
        }
        let table = Arc::new(PlaceTable::over(columns, target_sum)?);
        *memo = Some(Built {
            columns: bits,
            target_sum: target_sum.to_bits(),
            table: Arc::clone(&table),
        });
        Some(table)
    }
}

impl PartialEq for PlaceMemo {
    fn eq(&self, _: &PlaceMemo) -> bool {
        true
    }
}

impl std::fmt::Debug for PlaceMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlaceMemo")
    }
}

/// Writes `tokens` into `out` from `written` on, as many as fit, and
/// moves `written` past them.
fn fill(out: &mut [i32], written: &mut usize, tokens: impl Iterator<Item = i32>) {
    for (o, t) in out[*written..].iter_mut().zip(tokens) {
        *o = t;
        *written += 1;
    }
}

/// Every pair `(c, g)` of a count in `1..=top` and a column of
/// `by_median` (the columns a row keeps, by median, then token, increasing),
/// ordered by `c / m` decreasing, then token: for each count the columns
/// are in that order already, so the `top` runs are merged.
fn merged(columns: &[(f64, i32)], by_median: &[u32], top: u32) -> Vec<(u32, u32)> {
    let head = |c: u32, at: usize| {
        let g = by_median[at];
        let (m, t) = columns[g as usize];
        // Ratios are positive, so their bits order them.
        Reverse(((!(f64::from(c) / m).to_bits()), t, c, at))
    };
    let mut heads: BinaryHeap<_> = (1..=top).map(|c| head(c, 0)).collect();
    let mut pairs = Vec::with_capacity(top as usize * by_median.len());
    while let Some(Reverse((_, _, c, at))) = heads.pop() {
        pairs.push((c, by_median[at]));
        if at + 1 < by_median.len() {
            heads.push(head(c, at + 1));
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{by_sort, key_of, next, TARGET};
    use super::*;

    /// `genes` columns, tokens a permutation of them, every 11th column
    /// skipped; a median per column from `median`.
    fn columns(genes: usize, median: impl Fn(usize) -> f64) -> Vec<(f64, i32)> {
        (0..genes)
            .map(|g| {
                if g % 11 == 5 {
                    (1.0, -1)
                } else {
                    (median(g), ((g * 1_907) % genes) as i32)
                }
            })
            .collect()
    }

    /// A row of about `len` distinct genes of `genes`, in no particular
    /// order, counts mostly below `small` and one in `rare` up to `large`.
    fn cell(
        s: &mut u64,
        genes: usize,
        len: u64,
        (small, rare, large): (u64, u64, u64),
    ) -> (Vec<i32>, Vec<i32>) {
        let mut picked: Vec<i32> = (0..len).map(|_| next(s, genes as u64) as i32).collect();
        picked.sort_unstable();
        picked.dedup();
        for i in (1..picked.len()).rev() {
            picked.swap(i, next(s, i as u64 + 1) as usize);
        }
        let counts = picked
            .iter()
            .map(|_| {
                let bound = if next(s, rare) == 0 { large } else { small };
                1 + next(s, bound) as i32
            })
            .collect();
        (picked, counts)
    }

    /// Medians: one per column (Geneformer's own); a few values (exact
    /// ties, tokens against the columns); and one per column where every
    /// 7th is three times and every 9th twice another (pairs such as
    /// `(1, m)` and `(3, 3m)` whose order may change from cell to cell,
    /// and `(1, m)` and `(2, 2m)`, which always tie).
    fn dictionaries() -> Vec<(&'static str, Vec<(f64, i32)>)> {
        let distinct = |g: usize| 0.05 + g as f64 / 997.0;
        vec![
            ("distinct", columns(3_000, distinct)),
            ("few", columns(3_000, |g| [0.5, 1.37, 0.113, 7.29][g % 4])),
            (
                "multiples",
                columns(3_000, |g| match g % 63 {
                    7 | 14 => 3.0 * distinct(g - 7),
                    9 | 18 => 2.0 * distinct(g - 9),
                    _ => distinct(g),
                }),
            ),
        ]
    }

    #[test]
    fn places_rank_rows_as_a_sort_by_key_and_token() {
        let mut s = 11;
        let mut scratch = PlaceScratch::default();
        for (what, columns) in dictionaries() {
            let table = PlaceTable::over(&columns, TARGET).expect("a table");
            let (mut placed, mut merged) = (0, 0);
            for round in 0..300 {
                let len = [0, 1, 40, 2_000][round % 4];
                let (g, c) = cell(&mut s, columns.len(), len, (4, 60, 200));
                let want = by_sort(&columns, &g, &c);
                let strays = g
                    .iter()
                    .zip(&c)
                    .filter(|&(&g, &c)| {
                        let (g, c) = (g as usize, c as usize);
                        columns[g].1 >= 0
                            && (c > table.top as usize
                                || table.places[(c - 1) * columns.len() + g] == STRAY)
                    })
                    .count();
                // Room for the whole row, or for half of it (a row cut at
                // the batch's length).
                let room = if round % 3 == 2 {
                    want.len() / 2
                } else {
                    want.len() + 3
                };
                let mut out = vec![-7; room];
                match table.ranked(&g, &c, &columns, key_of(&c), &mut scratch, &mut out) {
                    Some(n) => {
                        assert_eq!(n, want.len().min(room), "{what}, round {round}");
                        assert_eq!(&out[..n], &want[..n], "{what}, round {round}");
                        assert!(out[n..].iter().all(|&t| t == -7), "{what}, round {round}");
                        placed += 1;
                        merged += usize::from(strays > 0);
                    }
                    None => assert!(8 * strays > g.len(), "{what}, round {round}"),
                }
            }
            assert!(
                placed > 250 && merged > 60,
                "{what}: {placed} placed, {merged} merged"
            );
        }
    }

    #[test]
    fn pairs_whose_order_may_change_are_strays() {
        let (_, columns) = dictionaries().pop().unwrap();
        let table = PlaceTable::over(&columns, TARGET).unwrap();
        let place = |c: usize, g: usize| table.places[(c - 1) * columns.len() + g];
        // Column 70's median is three times column 63's: counts 1 and 3
        // have one ratio, and so do 2 and 6; column 72's twice column
        // 63's: counts 1 and 2 tie in every cell, but are strays too.
        assert_eq!(
            (columns[70].0, columns[72].0),
            (3.0 * columns[63].0, 2.0 * columns[63].0)
        );
        for (c, g) in [(1, 63), (3, 70), (2, 63), (6, 70), (1, 63), (2, 72)] {
            assert_eq!(place(c, g), STRAY, "count {c}, column {g}");
        }
        // Every other pair has a place of its own, and skipped columns none.
        let mut places: Vec<u32> = table
            .places
            .iter()
            .copied()
            .filter(|&p| p < SKIP - 1)
            .collect();
        let n = places.len();
        places.sort_unstable();
        places.dedup();
        assert_eq!((places.len(), n as u32), (n, table.len));
        assert!(columns
            .iter()
            .enumerate()
            .filter(|c| c.1 .1 < 0)
            .all(|(g, _)| place(1, g) == SKIP && place(2, g) == SKIP));
    }

    #[test]
    fn rows_of_many_strays_are_left_to_the_sort() {
        let (_, columns) = dictionaries().swap_remove(0);
        let table = PlaceTable::over(&columns, TARGET).unwrap();
        let mut scratch = PlaceScratch::default();
        let (genes, counts) = ([9, 4, 30, 31], [1, 100, 1, 1]);
        let mut out = [0; 4];
        assert!(table
            .ranked(
                &genes,
                &counts,
                &columns,
                key_of(&counts),
                &mut scratch,
                &mut out
            )
            .is_none());
    }

    #[test]
    fn no_table_where_places_would_not_order_every_cell() {
        let ok = columns(3_000, |g| 0.05 + g as f64 / 997.0);
        assert!(PlaceTable::over(&ok, TARGET).is_some());
        let mut tiny = ok.clone();
        tiny[0].0 = 1e-200;
        assert!(PlaceTable::over(&tiny, TARGET).is_none());
        assert!(PlaceTable::over(&ok, 1e200).is_none());
        // Too many columns for places of two counts.
        let wide = columns(3 << 20, |g| 1.0 + g as f64);
        assert!(PlaceTable::over(&wide, TARGET).is_none());
        let none: Vec<(f64, i32)> = vec![(1.0, -1); 10];
        assert!(PlaceTable::over(&none, TARGET).is_none());
    }

    #[test]
    fn the_memo_keeps_the_last_table_built() {
        let memo = PlaceMemo::default();
        let one = columns(500, |g| 0.05 + g as f64 / 997.0);
        let mut other = one.clone();
        other[3].0 = 7.0;
        let first = memo.over(&one, TARGET).unwrap();
        assert!(Arc::ptr_eq(
            &first,
            &memo.clone().over(&one, TARGET).unwrap()
        ));
        let rebuilt = memo.over(&other, TARGET).unwrap();
        assert!(!Arc::ptr_eq(&first, &rebuilt));
        assert!(!Arc::ptr_eq(&rebuilt, &memo.over(&other, 1e3).unwrap()));
        assert_ne!(first.places, rebuilt.places);
    }
}

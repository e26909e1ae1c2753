//! Geneformer's order from classes of genes, where the medians repeat.
//!
//! A gene of count `c` and median `m` has `v = ((c / n) * t) / m` in a cell
//! of total `n` (`t` the target sum). Where the medians repeat (a sketch's
//! medians lie on a grid), a cell's genes take few distinct pairs `(c, m)`:
//! a cell of 2,100 genes about 330. Ordered by `c / m` decreasing, these
//! pairs are classes that order the genes, with no key computed or
//! compared: genes of one class have one `v`, and the row's genes come in
//! column order, which is token order where the tokens follow the columns
//! (checked per row). So a stable counting pass by class orders a row, and
//! only the genes of larger counts than the table holds (strays, about one
//! in 450) are sorted by their keys and merged in.
//!
//! ## Why the class order is the order of `v`
//!
//! Each of the three operations rounds to within a relative `u = 2^-53`, so
//! `v = (c / m) * (t / n) * (1 + d)` with `|d| <= 3u` (a little more), as
//! long as nothing overflows or falls below the normal range. For two
//! classes, `t / n` is common: where their `c / m` differ by more than a
//! relative `2^-40` (computed ratios, each within `u` of the exact one),
//! their `v` differ in the same direction. A table is built only where
//! every two classes next to each other in its order differ so, and where
//! the target sum and every median lie within `1e-100..1e100` (so that
//! `v` stays normal for any count up to `2^64`): there the class order is
//! the order of `v`, strictly, for every cell. Medians such as `1.0` and
//! `2.0`, whose classes `(1, 1.0)` and `(2, 2.0)` tie, build no table, and
//! their rows are ranked by their keys ([`super::rank`]).

use super::rank::{distinct_medians, tokens_increase};
use crate::engine::best_row_kernels;
use crate::kernels::rows::{class_start, ClassLookup, CLASS_START_BITS};

/// Classes a table may have: a row's counting pass clears and sums this
/// many counts, about as many as its genes.
const CLASSES: usize = 4096;

/// The most counts a table has classes for.
const COUNTS: usize = 32;

/// How far apart two classes' `c / m` must be, relatively.
pub(super) const APART: f64 = 1.0 / (1u64 << 40) as f64;

/// Medians and target sums a table is built for: within these bounds every
/// `v` is a normal number.
pub(super) const BOUNDS: std::ops::RangeInclusive<f64> = 1e-100..=1e100;

/// The classes of `(count, median)` pairs (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct ClassTable {
    /// Per column, a word of its token above where its run of `order`
    /// starts ([`ClassLookup`]'s; a skipped column's token is 0, never
    /// read): a gather of one word a gene.
    columns: Vec<u32>,
    /// The columns' distinct medians, increasing.
    medians: Vec<f64>,
    /// The counts with classes: `1..=top`.
    top: u32,
    /// A run of `top + 1` classes per distinct median, at `q * (top + 1)`
    /// for the median `medians[q]`: count `c`'s class at `c - 1`, then the
    /// strays' class (for larger counts); then a run of skipped columns'
    /// class. So that a gene's class is one lookup, at its column's start
    /// plus `min(c - 1, top)`, with no multiplication or test of its token.
    order: Vec<u32>,
    /// Each class's count and median, in class order.
    members: Vec<(u32, f64)>,
    /// Each class's `c / m`, decreasing: where a stray falls among the
    /// classes, searched without a division a step (see
    /// [`ClassTable::classes_before`]).
    ratios: Vec<f64>,
}

/// Reused buffers of [`ClassTable::ranked`].
#[derive(Debug, Default)]
pub(crate) struct ClassScratch {
    /// Each gene's class.
    classes: Vec<u32>,
    /// Each gene's token.
    tokens: Vec<i32>,
    /// The counters in which the counting pass by class
    /// ([`crate::kernels::rows::RowKernels::order_by_class`]) leaves where
    /// each class's tokens end in `placed`.
    ends: Vec<u32>,
    /// The tokens by class.
    placed: Vec<i32>,
    /// Where the strays lie in the row.
    strays_at: Vec<u32>,
    /// The strays' keys and tokens, and the bits of their `c / m`.
    strays: Vec<(u64, i32, u64)>,
}

impl ClassTable {
    /// The table of `columns` (`(median, token)`, a token below 0 a column
    /// rows skip), or `None` where the classes would not order every cell's
    /// genes: the tokens do not increase with the columns, or classes lie
    /// too close (see the module docs), or there would be too many for two
    /// counts; or where a column's word would not hold its token (from
    /// `2^19` on, past any model's vocabulary) or its run's start.
    pub(crate) fn over(columns: &[(f64, i32)], target_sum: f64) -> Option<ClassTable> {
        if !tokens_increase(columns) {
            return None;
        }
        let medians = distinct_medians(columns);
        let counts = (CLASSES / medians.len().max(1)).min(COUNTS);
        let bounded = BOUNDS.contains(&target_sum) && medians.iter().all(|m| BOUNDS.contains(m));
        if counts < 2 || !bounded {
            return None;
        }
        let mut members: Vec<(u32, f64)> = (1..=counts as u32)
            .flat_map(|c| medians.iter().map(move |&m| (c, m)))
            .collect();
        let ratio = |&(c, m): &(u32, f64)| f64::from(c) / m;
        members.sort_unstable_by(|a, b| ratio(b).total_cmp(&ratio(a)));
        if members
            .windows(2)
            .any(|w| ratio(&w[0]) < ratio(&w[1]) * (1.0 + APART))
        {
            return None;
        }
        let run = counts + 1;
        let stray = members.len() as u32;
        let mut order = vec![stray; (medians.len() + 1) * run];
        order[medians.len() * run..].fill(stray + 1);
        let start = |m: f64| medians.partition_point(|&x| x < m) * run;
        for (class, &(c, m)) in members.iter().enumerate() {
            order[start(m) + c as usize - 1] = class as u32;
        }
        let skipped = medians.len() * run;
        let token_bits = 32 - CLASS_START_BITS;
        if skipped >> CLASS_START_BITS != 0
            || columns.iter().any(|&(_, t)| t >= 0 && t >> token_bits != 0)
        {
            return None;
        }
        let columns = columns
            .iter()
            .map(|&(m, t)| {
                if t >= 0 {
                    ((t as u32) << CLASS_START_BITS) | start(m) as u32
                } else {
                    skipped as u32
                }
            })
            .collect();
        let ratios = members.iter().map(ratio).collect();
        Some(ClassTable {
            columns,
            medians,
            top: counts as u32,
            order,
            members,
            ratios,
        })
    }

    /// How many classes have keys below `stray_key`, the key of a stray
    /// whose `c / m` is `ratio`: the first class whose key is not below it.
    /// Class keys increase strictly (see the module docs), and only as
    /// their ratios decrease, so a search of the ratios, with no division,
    /// finds it wherever the stray's `v` is not within a few roundings of a
    /// class's; the two keys around that place confirm it, and where they
    /// do not (a stray all but tied with a class) the keys are searched.
    /// A search of the keys alone divided at each of its dozen steps, one
    /// after another: 3% of the samples of Geneformer's batches over a
    /// sketch's medians, for about five strays a cell.
    fn classes_before(&self, stray_key: u64, ratio: f64, key: &impl Fn(u32, f64) -> u64) -> usize {
        let lo = self.ratios.partition_point(|&r| r > ratio);
        let before_is_below = lo == 0 || self.class_key(lo - 1, key) < stray_key;
        let at_is_not_below = lo == self.members.len() || self.class_key(lo, key) >= stray_key;
        if before_is_below && at_is_not_below {
            lo
        } else {
            self.members
                .partition_point(|&(c, m)| key(c, m) < stray_key)
        }
    }

    /// Class `k`'s key, by `key` (see [`ClassTable::ranked`]).
    fn class_key(&self, k: usize, key: &impl Fn(u32, f64) -> u64) -> u64 {
        let (c, m) = self.members[k];
        key(c, m)
    }

    /// The class of strays: one past the last class.
    fn strays(&self) -> u32 {
        self.members.len() as u32
    }

    /// Writes the first `out.len()` tokens of a row's genes with a token
    /// and a median, ordered by `v` decreasing, then token, to `out` (the
    /// row's body in the batch: no copy of the order in between), and
    /// returns how many it wrote; `key(c, m)` is `!v.to_bits()` of a gene of
    /// count `c` and median `m`. `None` (the row left to [`super::rank`])
    /// where the row's genes do not increase, or more than one in eight is
    /// a stray.
    pub(crate) fn ranked(
        &self,
        genes: &[i32],
        counts: &[i32],
        key: impl Fn(u32, f64) -> u64,
        s: &mut ClassScratch,
        out: &mut [i32],
    ) -> Option<usize> {
        let len = genes.len();
        s.classes.resize(len, 0);
        s.tokens.resize(len, 0);
        s.strays_at.clear();
        let stray = self.strays();
        let lookup = ClassLookup {
            columns: &self.columns,
            order: &self.order,
            top: self.top,
            stray,
        };
        let counts_u32: &[u32] = bytemuck::cast_slice(counts);
        let increasing = best_row_kernels().classify(
            &lookup,
            genes,
            counts_u32,
            (&mut s.classes, &mut s.tokens),
            &mut s.strays_at,
        );
        let n_strays = s.strays_at.len();
        if !increasing || 8 * n_strays > len {
            return None;
        }
        let strays = stray as usize;
        s.placed.resize(len, 0);
        let ends = best_row_kernels().order_by_class(
            &s.classes,
            &s.tokens,
            strays + 2,
            &mut s.ends,
            &mut s.placed,
        );
        let end = |k: usize| ends.end(k);
        let classed = strays.checked_sub(1).map_or(0, end);
        let mut written = 0;
        let mut put = |tokens: &[i32]| {
            let n = tokens.len().min(out.len() - written);
            out[written..written + n].copy_from_slice(&tokens[..n]);
            written += n;
        };
        if n_strays == 0 {
            put(&s.placed[..classed]);
            return Some(written);
        }
        s.strays.clear();
        for &i in &s.strays_at {
            let i = i as usize;
            let run = self.top as usize + 1;
            let start = class_start(self.columns[genes[i] as usize]);
            let median = self.medians[start as usize / run];
            let c = counts[i] as u32;
            let ratio = f64::from(c) / median;
            s.strays
                .push((key(c, median), s.tokens[i], ratio.to_bits()));
        }
        s.strays.sort_unstable();
        let mut from = 0;
        for &(stray_key, token, ratio) in &s.strays {
            let lo = self.classes_before(stray_key, f64::from_bits(ratio), &key);
            let start = if lo == 0 { 0 } else { end(lo - 1) };
            let at = if lo < strays && self.class_key(lo, &key) == stray_key {
                start + s.placed[start..end(lo)].partition_point(|&t| t < token)
            } else {
                start
            };
            put(&s.placed[from..at]);
            put(&[token]);
            from = at;
        }
        put(&s.placed[from..classed]);
        Some(written)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{by_sort, key_of, next, TARGET};
    use super::*;

    /// `genes` columns, tokens increasing with them and every 11th column
    /// skipped; medians on a sketch's grid of `medians` values. Above
    /// 1,365 medians (classes for two counts), every 7th median is three
    /// times another, so that genes of three times the count, strays, can
    /// tie with a class.
    fn columns(genes: usize, medians: usize) -> Vec<(f64, i32)> {
        (0..genes)
            .map(|g| {
                let m = 0.37 * 1.0202f64.powi((g % medians) as i32);
                let m = if medians > 1_365 && g % 7 == 3 {
                    3.0 * m
                } else {
                    m
                };
                if g % 11 == 5 {
                    (1.0, -1)
                } else {
                    (m, 2 * g as i32 + 3)
                }
            })
            .collect()
    }

    /// A row of about `len` of `genes` genes, increasing, with counts
    /// mostly below `small` and one in `rare` up to `large`.
    fn cell(
        s: &mut u64,
        genes: usize,
        len: u64,
        small: u64,
        rare: u64,
        large: u64,
    ) -> (Vec<i32>, Vec<i32>) {
        let picked: std::collections::BTreeSet<i32> =
            (0..len).map(|_| next(s, genes as u64) as i32).collect();
        let counts = picked
            .iter()
            .map(|_| {
                let bound = if next(s, rare) == 0 { large } else { small };
                1 + next(s, bound) as i32
            })
            .collect();
        (picked.into_iter().collect(), counts)
    }

    #[test]
    fn classes_rank_rows_as_a_sort_by_key_and_token() {
        let mut s = 7;
        let mut scratch = ClassScratch::default();
        // Few medians (a class per count up to 32), and many (two counts,
        // strays that tie with classes).
        for (genes, medians, small, large) in [(3_000, 60, 4, 200), (4_000, 1_500, 2, 9)] {
            let columns = columns(genes, medians);
            let table = ClassTable::over(&columns, TARGET).expect("a table");
            let counts_classed = table.top as usize;
            let (mut classed, mut merged, mut tied) = (0, 0, 0);
            for round in 0..300 {
                let len = [0, 1, 40, 2_000][round % 4];
                let (g, c) = cell(&mut s, genes, len, small, 50, large);
                let want = by_sort(&columns, &g, &c);
                let key = key_of(&c);
                let (mut stray_keys, mut class_keys) = (vec![], vec![]);
                for (&g, &c) in g.iter().zip(&c) {
                    let (m, t) = columns[g as usize];
                    if t >= 0 {
                        let keys = if c as usize > counts_classed {
                            &mut stray_keys
                        } else {
                            &mut class_keys
                        };
                        keys.push(key(c as u32, m));
                    }
                }
                // Room for the whole row, or for half of it (a row cut at
                // the batch's length).
                let room = if round % 3 == 2 {
                    want.len() / 2
                } else {
                    want.len() + 3
                };
                let mut out = vec![-7; room];
                match table.ranked(&g, &c, key, &mut scratch, &mut out) {
                    Some(n) => {
                        assert_eq!(n, want.len().min(room), "round {round}");
                        assert_eq!(&out[..n], &want[..n], "{medians} medians, round {round}");
                        assert!(out[n..].iter().all(|&t| t == -7), "round {round}");
                        classed += 1;
                        merged += usize::from(!stray_keys.is_empty());
                        tied += usize::from(stray_keys.iter().any(|k| class_keys.contains(k)));
                    }
                    None => assert!(8 * stray_keys.len() > g.len(), "round {round}"),
                }
            }
            assert!(
                classed > 200 && merged > 50,
                "{classed} classed, {merged} merged"
            );
            if medians > 1_365 {
                assert!(tied >= 5, "{tied} rows with a stray tied with a class");
            }
        }
    }

    #[test]
    fn strays_fall_among_the_classes_where_their_keys_do() {
        // Medians three times others: strays of three times a class's count
        // tie with it, or all but tie, in some cells.
        let columns = columns(4_000, 1_500);
        let table = ClassTable::over(&columns, TARGET).unwrap();
        let by_keys = |stray_key: u64, key: &dyn Fn(u32, f64) -> u64| {
            table
                .members
                .partition_point(|&(c, m)| key(c, m) < stray_key)
        };
        let mut s = 3;
        let (mut inside, mut ends) = (0, 0);
        for _ in 0..2_000 {
            let counts: Vec<i32> = (0..1 + next(&mut s, 3_000))
                .map(|_| 1 + next(&mut s, 40) as i32)
                .collect();
            let key = key_of(&counts);
            let g = next(&mut s, columns.len() as u64) as usize;
            let m = columns[g].0;
            let c = table.top + 1 + next(&mut s, 3 * table.top as u64) as u32;
            let stray_key = key(c, m);
            let want = by_keys(stray_key, &key);
            let ratio = f64::from(c) / m;
            assert_eq!(table.classes_before(stray_key, ratio, &key), want);
            // A ratio that places the stray elsewhere is caught by the
            // keys around that place.
            for wrong in [ratio * 1.5, ratio / 1.5, f64::INFINITY, 0.0] {
                assert_eq!(table.classes_before(stray_key, wrong, &key), want);
            }
            if want == 0 || want == table.members.len() {
                ends += 1;
            } else {
                inside += 1;
            }
        }
        assert!(
            inside > 1_000 && ends > 0,
            "{inside} inside, {ends} at an end"
        );
    }

    #[test]
    fn rows_a_table_cannot_order_are_left_to_the_sort() {
        let columns = columns(3_000, 60);
        let table = ClassTable::over(&columns, TARGET).unwrap();
        let mut scratch = ClassScratch::default();
        let mut out = [0; 4];
        let (genes, counts) = ([9, 4, 30], [1, 1, 2]);
        assert!(table
            .ranked(&genes, &counts, key_of(&counts), &mut scratch, &mut out)
            .is_none());
        let (genes, counts) = ([4, 9, 30, 31], [1, 100, 200, 1]);
        assert!(table
            .ranked(&genes, &counts, key_of(&counts), &mut scratch, &mut out)
            .is_none());
    }

    #[test]
    fn no_table_where_classes_would_not_order_every_cell() {
        let ok = columns(3_000, 60);
        assert!(ClassTable::over(&ok, TARGET).is_some());
        // Tokens against the columns.
        let mut reversed = ok.clone();
        reversed.swap(1, 2);
        assert!(ClassTable::over(&reversed, TARGET).is_none());
        // Classes (1, 1.0) and (2, 2.0) tie.
        let tied: Vec<(f64, i32)> = (0..100)
            .map(|g| ([1.0, 2.0, 0.3][g % 3], g as i32))
            .collect();
        assert!(ClassTable::over(&tied, TARGET).is_none());
        // Medians or a target sum where `v` could leave the normal range.
        let mut tiny = ok.clone();
        tiny[0].0 = 1e-200;
        assert!(ClassTable::over(&tiny, TARGET).is_none());
        assert!(ClassTable::over(&ok, 1e200).is_none());
        // A median per gene: too many classes for two counts.
        let distinct: Vec<(f64, i32)> = (0..3_000).map(|g| (1.0 + g as f64 / 977.0, g)).collect();
        assert!(ClassTable::over(&distinct, TARGET).is_none());
    }
}

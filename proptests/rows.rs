//! The row kernels: every backend places columns as the reference does, and
//! the reference puts them (with their counts) in increasing order, checked
//! against a sort; every backend scans, looks up and divides as the
//! reference does, tallies counts and turns them into starts as loops
//! written here do; every backend streams an exact copy (of one part or of
//! several with one fence) and makes Floyd's draws as a 128-bit product
//! written here gives them; every backend classifies genes as a loop
//! written here does, and panics where the reference does; every backend
//! orders tokens by class as a stable sort does, and refuses a class past
//! the width before it places anything.

use deltacells::kernels::rows::{
    ClassLookup, RowKernels, CLASS_START_BITS, MEMO_SLOTS, TALLY_SLOTS,
};
use deltacells::kernels::KernelTable;
use proptest::prelude::*;

use crate::config;

/// Distinct columns below `64 * words`, in no order, and the word count:
/// rows from empty to every column of a few words, and sparse ones over many.
fn marked() -> impl Strategy<Value = (Vec<u32>, usize)> {
    (1usize..40).prop_flat_map(|words| {
        let n = 64 * words as u32;
        (
            prop::collection::hash_set(0..n, 0..(n as usize).min(300)),
            Just(words),
        )
            .prop_map(|(set, words)| (set.into_iter().collect(), words))
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_places_like_a_sort((columns, words) in marked()) {
        let mut marks = vec![0u64; words];
        for &c in &columns {
            marks[(c >> 6) as usize] |= 1 << (c & 63);
        }
        let mut sorted = columns.clone();
        sorted.sort_unstable();
        let counts: Vec<u32> = columns.iter().map(|&c| c.wrapping_mul(2_654_435_761)).collect();
        let mut want = (vec![0; words], vec![0i32; columns.len()], vec![0u32; columns.len()]);
        RowKernels::scalar().place(&marks, &mut want.0, (&columns, &counts), (&mut want.1, &mut want.2));
        let sorted: Vec<i32> = sorted.iter().map(|&c| c as i32).collect();
        prop_assert_eq!(&want.1, &sorted);
        for (&c, &v) in want.1.iter().zip(&want.2) {
            prop_assert_eq!(v, (c as u32).wrapping_mul(2_654_435_761));
        }
        for k in crate::tables::<RowKernels>("rows") {
            let mut got = (vec![u32::MAX; words], vec![-1i32; columns.len()], vec![0u32; columns.len()]);
            k.place(&marks, &mut got.0, (&columns, &counts), (&mut got.1, &mut got.2));
            prop_assert_eq!(&got, &want, "{}", k.isa());
        }
    }
}

/// Counts as single-cell rows hold them: mostly small, some past the memo,
/// a few near the top of `u32`.
fn row_counts() -> impl Strategy<Value = Vec<u32>> {
    let count = prop_oneof![
        8 => 0u32..8,
        4 => 0u32..70,
        1 => 60u32..5_000,
        1 => (u32::MAX - 3)..=u32::MAX,
    ];
    prop::collection::vec(count, 0..300)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_scans_and_looks_up_like_the_reference(counts in row_counts(), least in 0u32..80) {
        let (total, seen) = RowKernels::scalar().scan(&counts);
        prop_assert_eq!(total, counts.iter().map(|&c| u64::from(c)).sum::<u64>());
        for bit in 0..MEMO_SLOTS as u32 {
            let held = counts.iter().any(|&c| c.min(MEMO_SLOTS as u32 - 1) == bit);
            prop_assert_eq!(seen >> bit & 1 == 1, held, "bit {}", bit);
        }
        let memo: [f32; MEMO_SLOTS] = std::array::from_fn(|i| i as f32 * 0.5 - 3.0);
        let mut want = vec![0f32; counts.len()];
        RowKernels::scalar().lookup(&memo, &counts, &mut want);
        for (&w, &c) in want.iter().zip(&counts) {
            prop_assert_eq!(w, memo[c.min(MEMO_SLOTS as u32 - 1) as usize]);
        }
        // Larger counts' values: any function of the count will do.
        let larger = |c: u32| -(c as f32) - least as f32;
        let last = MEMO_SLOTS as u32 - 1;
        let values: Vec<u32> = counts
            .iter()
            .map(|&c| if c < last { memo[c as usize] } else { larger(c) }.to_bits())
            .collect();
        let mut in_place = counts.clone();
        RowKernels::scalar().values_in_place(&memo, &mut in_place, &larger);
        prop_assert_eq!(&in_place, &values);
        for k in crate::tables::<RowKernels>("rows") {
            prop_assert_eq!(k.scan(&counts), (total, seen), "{}", k.isa());
            let mut got = vec![f32::NAN; counts.len()];
            k.lookup(&memo, &counts, &mut got);
            prop_assert_eq!(&got, &want, "{}", k.isa());
            // From every offset within a block, so blocks with and without
            // a larger count, and tails of every length, are covered.
            for from in 0..counts.len().min(17) {
                let mut got = counts[from..].to_vec();
                k.values_in_place(&memo, &mut got, &larger);
                prop_assert_eq!(&got[..], &values[from..], "{} from {}", k.isa(), from);
            }
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_scatters_values_like_a_loop(
        counts in row_counts(),
        seed in any::<u64>(),
        width in 1usize..80,
        least in 0u32..80,
    ) {
        // A table of 3 x width columns below `width` (so columns repeat
        // within a register, and the later count's value must stay), the
        // offsets spread over it by an LCG written here.
        let table: Vec<i32> = (0..3 * width as i32).map(|i| (i * 7 + 3) % width as i32).collect();
        let mut state = seed;
        let offsets: Vec<i32> = counts
            .iter()
            .map(|_| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                ((state >> 33) % table.len() as u64) as i32
            })
            .collect();
        let memo: [f32; MEMO_SLOTS] = std::array::from_fn(|i| i as f32 * 0.25 + 1.0);
        let larger = |c: u32| -(c as f32) - least as f32;
        let mut want = vec![0.5f32; width];
        for (&o, &c) in offsets.iter().zip(&counts) {
            want[table[o as usize] as usize] = if c < MEMO_SLOTS as u32 - 1 { memo[c as usize] } else { larger(c) };
        }
        for k in crate::tables::<RowKernels>("rows") {
            // From every offset within a register, so registers with and
            // without a larger count, and tails of every length.
            for from in 0..counts.len().min(17) {
                let mut want_from = vec![0.5f32; width];
                for (&o, &c) in offsets[from..].iter().zip(&counts[from..]) {
                    want_from[table[o as usize] as usize] =
                        if c < MEMO_SLOTS as u32 - 1 { memo[c as usize] } else { larger(c) };
                }
                let mut got = vec![0.5f32; width];
                k.scatter_values(&memo, (&table, &offsets[from..]), &counts[from..], &mut got, &larger);
                prop_assert_eq!(&got, &want_from, "{} from {}", k.isa(), from);
            }
            let mut got = vec![0.5f32; width];
            k.scatter_values(&memo, (&table, &offsets), &counts, &mut got, &larger);
            prop_assert_eq!(&got, &want, "{}", k.isa());
        }
    }
}

#[test]
fn every_backend_refuses_an_offset_or_a_column_out_of_range() {
    let memo = [1.0f32; MEMO_SLOTS];
    let table: Vec<i32> = (0..40).map(|i| i % 20).collect();
    let bad_table: Vec<i32> = (0..40).map(|i| if i == 33 { 20 } else { i % 20 }).collect();
    for (table, bad) in [(&table, 40), (&table, -1), (&bad_table, 33)] {
        // The bad offset in the middle of a register, after a register of
        // good ones.
        let mut offsets: Vec<i32> = (0..40).collect();
        offsets[21] = bad;
        let counts = vec![2u32; offsets.len()];
        for k in crate::tables::<RowKernels>("rows") {
            let mut out = vec![0f32; 20];
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                k.scatter_values(&memo, (table, &offsets), &counts, &mut out, &|_| 0.0)
            }));
            assert!(caught.is_err(), "{}: offset {bad}", k.isa());
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_tallies_like_the_reference(counts in row_counts(), filled in 0usize..3) {
        // The reference against a count written here.
        let mut small = [filled; TALLY_SLOTS];
        let mut rest = vec![u32::MAX; counts.len()];
        let n = RowKernels::scalar().tally(&counts, &mut small, &mut rest);
        for (c, &k) in small.iter().enumerate() {
            prop_assert_eq!(k, filled + counts.iter().filter(|&&x| x as usize == c).count(), "value {}", c);
        }
        let larger: Vec<u32> = counts.iter().copied().filter(|&c| c as usize >= TALLY_SLOTS).collect();
        prop_assert_eq!(&rest[..n], &larger[..]);
        // Every backend from every offset within a register, so registers
        // with and without larger counts and tails of every length.
        for k in crate::tables::<RowKernels>("rows") {
            for from in 0..counts.len().min(17) {
                let mut want = ([filled; TALLY_SLOTS], vec![0; counts.len() - from]);
                let n = RowKernels::scalar().tally(&counts[from..], &mut want.0, &mut want.1);
                let mut got = ([filled; TALLY_SLOTS], vec![7; counts.len() - from]);
                let m = k.tally(&counts[from..], &mut got.0, &mut got.1);
                prop_assert_eq!(m, n, "{} from {}", k.isa(), from);
                prop_assert_eq!(got.0, want.0, "{} from {}", k.isa(), from);
                prop_assert_eq!(&got.1[..m], &want.1[..n], "{} from {}", k.isa(), from);
            }
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_turns_counts_into_starts(
        counts in prop::collection::vec(prop_oneof![8 => 0u32..4, 1 => any::<u32>()], 0..300),
    ) {
        // Each start the wrapping sum of the counts before it, written here.
        let mut want = Vec::with_capacity(counts.len());
        let mut total = 0u32;
        for &c in &counts {
            want.push(total);
            total = total.wrapping_add(c);
        }
        for k in crate::tables::<RowKernels>("rows") {
            // From every offset within a register: tails of every length.
            for from in 0..counts.len().min(17) {
                let mut got = counts[from..].to_vec();
                let before = want.get(from).copied().unwrap_or(total);
                let past = k.starts(&mut got);
                let expected: Vec<u32> = want[from..].iter().map(|&w| w.wrapping_sub(before)).collect();
                prop_assert_eq!(&got, &expected, "{} from {}", k.isa(), from);
                prop_assert_eq!(past, total.wrapping_sub(before), "{} from {}", k.isa(), from);
            }
        }
    }
}

/// Positive finite values as Geneformer divides them: scaled counts over
/// medians, of every magnitude, subnormals and exact ties among them.
fn quotients() -> impl Strategy<Value = Vec<(f64, f64)>> {
    let value = prop_oneof![
        4 => 1e-3f64..1e4,
        2 => prop::sample::select(vec![0.5, 1.0, 2.0, 3.0, 10_000.0 / 7.0]),
        1 => (1u64..(1 << 52)).prop_map(f64::from_bits),
        1 => 1e300f64..f64::MAX,
    ];
    prop::collection::vec((value.clone(), value), 0..300)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_divides_like_the_reference(pairs in quotients()) {
        let (x, m): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
        let mut want = vec![0u64; x.len()];
        let range = RowKernels::scalar().quotient_keys(&x, &m, &mut want);
        for ((&w, &a), &b) in want.iter().zip(&x).zip(&m) {
            prop_assert_eq!(w, !(a / b).to_bits());
        }
        let least = want.iter().copied().min().unwrap_or(u64::MAX);
        prop_assert_eq!(range, (least, want.iter().copied().max().unwrap_or(0)));
        for k in crate::tables::<RowKernels>("rows") {
            let mut got = vec![0u64; x.len()];
            prop_assert_eq!(k.quotient_keys(&x, &m, &mut got), range, "{}", k.isa());
            prop_assert_eq!(&got, &want, "{}", k.isa());
        }
    }
}

/// A table (values from -1 up, mostly kept or mostly dropped), where it
/// starts, and genes as rows hold them: inside the table, below and past
/// it, negative, and registers that cross the table's ends.
fn selection() -> impl Strategy<Value = (Vec<i32>, u32, Vec<i32>)> {
    (0usize..400, 0u32..50, 0u32..=100).prop_flat_map(|(len, first, kept)| {
        let value = (0u32..100, 0i32..1_000_000)
            .prop_map(move |(p, v)| if p < kept { v } else { -1 - v % 3 });
        let span = first as i32 + len as i32;
        let gene = prop_oneof![
            8 => first as i32..span.max(first as i32 + 1),
            1 => 0..span + 20,
            1 => prop::sample::select(vec![-1, i32::MIN, i32::MAX]),
        ];
        (
            prop::collection::vec(value, len),
            Just(first),
            prop::collection::vec(gene, 0..200),
        )
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_selects_like_the_reference((table, first, genes) in selection()) {
        let counts: Vec<u32> = (0..genes.len() as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let value = |g: i32| table.get((g as u32).wrapping_sub(first) as usize).copied().filter(|&v| v >= 0);
        let want: Vec<(i32, u32)> = genes
            .iter()
            .zip(&counts)
            .filter_map(|(&g, &c)| value(g).map(|v| (v, c)))
            .collect();
        let len = genes.len();
        for k in crate::tables::<RowKernels>("rows") {
            let mut out = (vec![7i32; len], vec![7u32; len]);
            let n = k.select(&table, first, &genes, &counts, (&mut out.0, &mut out.1));
            let got: Vec<(i32, u32)> = out.0[..n].iter().copied().zip(out.1[..n].iter().copied()).collect();
            prop_assert_eq!(&got, &want, "{}", k.isa());
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_compresses_like_a_filter(
        kept in prop::collection::vec((any::<i32>(), prop_oneof![3 => Just(0u8), 2 => Just(1u8), 1 => any::<u8>()]), 0..300),
    ) {
        let (values, marks): (Vec<i32>, Vec<u8>) = kept.into_iter().unzip();
        let counts: Vec<u32> = (0..values.len() as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let want: Vec<(i32, u32)> = values
            .iter()
            .zip(&marks)
            .zip(&counts)
            .filter(|((_, &m), _)| m != 0)
            .map(|((&v, _), &c)| (v, c))
            .collect();
        let len = values.len();
        for k in crate::tables::<RowKernels>("rows") {
            let mut out = (vec![7i32; len], vec![7u32; len]);
            let n = k.compress(&values, &marks, &counts, (&mut out.0, &mut out.1));
            let got: Vec<(i32, u32)> = out.0[..n].iter().copied().zip(out.1[..n].iter().copied()).collect();
            prop_assert_eq!(&got, &want, "{}", k.isa());
        }
    }
}

/// A table, marks set apart from it (mostly where the table holds a value,
/// as a gene selection's are, sometimes anywhere), where both start, and
/// genes: mostly ascending runs as rows hold them (so that a register's
/// marks lie within one window of words, or just do not), sometimes any.
fn marked_selection() -> impl Strategy<Value = (Vec<i32>, Vec<u32>, u32, Vec<i32>)> {
    (0usize..1500, 0u32..50, 0u32..=100, any::<bool>()).prop_flat_map(|(len, first, kept, agree)| {
        let value = (0u32..100, 0i32..1_000_000)
            .prop_map(move |(p, v)| if p < kept { v } else { -1 - v % 3 });
        let span = first as i32 + len as i32;
        let gaps = prop::collection::vec(prop_oneof![8 => 1i32..20, 1 => 20i32..400, 1 => Just(0)], 0..300);
        let any_genes = prop::collection::vec(
            prop_oneof![8 => -3i32..span + 40, 1 => prop::sample::select(vec![-1, i32::MIN, i32::MAX])],
            0..100,
        );
        (
            prop::collection::vec(value, len),
            Just(agree),
            prop::collection::vec(any::<u32>(), 0..len / 32 + 3),
            Just(first),
            (0i32..30, gaps).prop_map(|(start, gaps)| {
                gaps.iter().scan(start, |g, &d| { *g += d; Some(*g) }).collect::<Vec<i32>>()
            }),
            any_genes,
            any::<bool>(),
        )
            .prop_map(|(table, agree, random, first, run, any_genes, ascending)| {
                let marks = if agree {
                    let mut marks = vec![0u32; table.len().div_ceil(32) + 1];
                    for (i, &v) in table.iter().enumerate() {
                        if v >= 0 {
                            marks[i >> 5] |= 1 << (i & 31);
                        }
                    }
                    marks
                } else {
                    random
                };
                (table, marks, first, if ascending { run } else { any_genes })
            })
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_selects_marked_genes_like_a_filter(
        (table, marks, first, genes) in marked_selection(),
    ) {
        // Against a filter written here: bit `g - first` (wrapping) of the
        // marks set and within the table; the value the table's, any sign
        // (`marked` keeps the offset instead).
        let counts: Vec<u32> = (0..genes.len() as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let marked = |i: usize| marks.get(i / 32).is_some_and(|w| w >> (i % 32) & 1 == 1);
        let offset = |g: i32| (g as u32).wrapping_sub(first) as usize;
        let kept = |g: i32| Some(offset(g)).filter(|&i| i < table.len() && marked(i));
        let want_offsets: Vec<(i32, u32)> = genes
            .iter()
            .zip(&counts)
            .filter_map(|(&g, &c)| kept(g).map(|i| (i as i32, c)))
            .collect();
        let want: Vec<(i32, u32)> = want_offsets.iter().map(|&(i, c)| (table[i as usize], c)).collect();
        let len = genes.len();
        for k in crate::tables::<RowKernels>("rows") {
            let mut out = (vec![7i32; len], vec![7u32; len]);
            let n = k.marked(table.len(), &marks, first, &genes, &counts, (&mut out.0, &mut out.1));
            let got: Vec<(i32, u32)> = out.0[..n].iter().copied().zip(out.1[..n].iter().copied()).collect();
            prop_assert_eq!(&got, &want_offsets, "{}", k.isa());
            let mut out = (vec![7i32; len], vec![7u32; len]);
            let n = k.select_marked(&table, &marks, first, &genes, &counts, (&mut out.0, &mut out.1));
            let got: Vec<(i32, u32)> = out.0[..n].iter().copied().zip(out.1[..n].iter().copied()).collect();
            prop_assert_eq!(&got, &want, "{}", k.isa());
            // With the marks a selection's, what `select` keeps.
            if table.iter().enumerate().all(|(i, &v)| marked(i) == (v >= 0)) {
                let mut plain = (vec![7i32; len], vec![7u32; len]);
                let m = k.select(&table, first, &genes, &counts, (&mut plain.0, &mut plain.1));
                prop_assert_eq!((&plain.0[..m], &plain.1[..m]), (&out.0[..n], &out.1[..n]), "{}", k.isa());
            }
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_counts_marked_genes_like_the_reference(
        marks in prop::collection::vec(any::<u32>(), 0..12),
        first in prop_oneof![Just(0u32), 0u32..500, Just(u32::MAX - 40)],
        genes in prop::collection::vec(prop_oneof![-3i32..600, Just(i32::MIN), Just(i32::MAX)], 0..200),
    ) {
        // Against a count written here: bit `g - first` (wrapping) of the
        // marks, none past them.
        let bits = 32 * marks.len() as u64;
        let want = genes
            .iter()
            .filter(|&&g| {
                let i = u64::from((g as u32).wrapping_sub(first));
                i < bits && marks[(i / 32) as usize] >> (i % 32) & 1 == 1
            })
            .count();
        for k in crate::tables::<RowKernels>("rows") {
            prop_assert_eq!(k.count_marked(&marks, first, &genes), want, "{}", k.isa());
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_streams_an_exact_copy(
        bytes in prop::collection::vec(any::<u8>(), 0..700),
        from in 0usize..70,
        at in 0usize..70,
    ) {
        // Source and destination at every offset from a line boundary:
        // partial lines at either end, whole lines between them or none.
        let src = &bytes[from.min(bytes.len())..];
        let mut out = vec![0xA5u8; at + src.len() + 64];
        let mut want = out.clone();
        want[at..at + src.len()].copy_from_slice(src);
        for k in crate::tables::<RowKernels>("rows") {
            let dst = &mut out[at..at + src.len()];
            dst.fill(0x5A);
            k.stream(src, dst);
            prop_assert_eq!(&out, &want, "{}", k.isa());
        }
    }

    #[test]
    fn every_backend_streams_parts_with_one_fence(
        bytes in prop::collection::vec(any::<u8>(), 0..700),
        cuts in (0usize..700, 0usize..700),
        gap in 0usize..70,
    ) {
        // Three parts of one source, each to its own place in one output
        // (`gap` bytes apart, untouched), as a row's parts are streamed.
        let (a, b) = (cuts.0.min(cuts.1).min(bytes.len()), cuts.0.max(cuts.1).min(bytes.len()));
        let (first, rest) = bytes.split_at(a);
        let (second, third) = rest.split_at(b - a);
        let mut want = vec![0xA5u8; bytes.len() + 3 * gap];
        want[gap..gap + a].copy_from_slice(first);
        want[2 * gap + a..2 * gap + b].copy_from_slice(second);
        want[3 * gap + b..].copy_from_slice(third);
        for k in crate::tables::<RowKernels>("rows") {
            let mut out = vec![0xA5u8; bytes.len() + 3 * gap];
            let (head, after) = out.split_at_mut(gap + a);
            let (middle, tail) = after.split_at_mut(gap + b - a);
            k.stream_parts(&mut [
                (first, &mut head[gap..]),
                (second, &mut middle[gap..]),
                (third, &mut tail[gap..]),
            ]);
            prop_assert_eq!(&out, &want, "{}", k.isa());
        }
    }

    #[test]
    fn every_backend_draws_the_high_half_of_the_product(
        state in any::<u64>(),
        len in 0usize..300,
        first in prop_oneof![0u32..5000, (u32::MAX - 400)..=u32::MAX],
    ) {
        // SplitMix64 and the draw as the module docs of scGPT define them,
        // with a 128-bit product: positions up to 2^32 - 1 at the top.
        let first = u64::from(first).min((1 << 32) - 1 - len as u64) as u32;
        let want: Vec<u32> = (0..len as u64)
            .map(|i| {
                let mut z = state
                    .wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(i + 1))
                    .wrapping_add(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                let r = z ^ (z >> 31);
                ((u128::from(r) * u128::from(u64::from(first) + i + 1)) >> 64) as u32
            })
            .collect();
        for k in crate::tables::<RowKernels>("rows") {
            let mut out = vec![7u32; len];
            k.draws(state, first, &mut out);
            prop_assert_eq!(&out, &want, "{}", k.isa());
        }
    }
}

/// A lookup of classes as Geneformer's class table lays it out: `runs`
/// runs of `top + 1` classes (drawn from `0..10`, 7 the strays'), and
/// columns each with a token and the start of one run; the order, the
/// columns' words.
fn class_lookup() -> impl Strategy<Value = (Vec<u32>, Vec<u32>, u32)> {
    (1usize..20, 0u32..8, 1usize..200).prop_flat_map(|(runs, top, n_columns)| {
        let run = top as usize + 1;
        (
            prop::collection::vec(0u32..10, runs * run),
            prop::collection::vec((0u32..1 << (32 - CLASS_START_BITS), 0..runs), n_columns),
            Just(top),
        )
            .prop_map(move |(order, columns, top)| {
                let words = columns
                    .into_iter()
                    .map(|(token, r)| (token << CLASS_START_BITS) | (r * run) as u32)
                    .collect();
                (order, words, top)
            })
    })
}

/// Genes of `n_columns` columns and their counts: increasing (a row's), or
/// in any order with repeats.
fn classified_genes(n_columns: usize) -> impl Strategy<Value = (Vec<i32>, Vec<u32>)> {
    let n = n_columns as i32;
    prop_oneof![
        prop::collection::btree_set(0..n, 0..n_columns.min(120))
            .prop_map(|set| set.into_iter().collect::<Vec<_>>()),
        prop::collection::vec(0..n, 0..120),
    ]
    .prop_flat_map(|genes| {
        let counts =
            prop::collection::vec(prop_oneof![6 => 0u32..10, 1 => any::<u32>()], genes.len());
        (Just(genes), counts)
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_classifies_genes_as_a_loop_written_here(
        ((order, columns, top), (genes, counts)) in class_lookup()
            .prop_flat_map(|lookup| {
                let n = lookup.1.len();
                (Just(lookup), classified_genes(n))
            }),
    ) {
        let lookup = ClassLookup { columns: &columns, order: &order, top, stray: 7 };
        let mask = (1u32 << CLASS_START_BITS) - 1;
        let want_classes: Vec<u32> = genes
            .iter()
            .zip(&counts)
            .map(|(&g, &c)| {
                // A count of 0 (or past the run) takes the run's last class.
                let k = if c == 0 { top } else { (c - 1).min(top) };
                order[((columns[g as usize] & mask) + k) as usize]
            })
            .collect();
        let want_tokens: Vec<i32> = genes
            .iter()
            .map(|&g| (columns[g as usize] >> CLASS_START_BITS) as i32)
            .collect();
        let want_strays: Vec<u32> = (0..genes.len() as u32)
            .filter(|&i| want_classes[i as usize] == 7)
            .collect();
        let increasing = genes.windows(2).all(|w| w[0] < w[1]);
        for k in crate::tables::<RowKernels>("rows") {
            let (mut classes, mut tokens) = (vec![u32::MAX; genes.len()], vec![-9; genes.len()]);
            let mut strays = vec![];
            let got = k.classify(&lookup, &genes, &counts, (&mut classes, &mut tokens), &mut strays);
            prop_assert_eq!(&classes, &want_classes, "{}", k.isa());
            prop_assert_eq!(&tokens, &want_tokens, "{}", k.isa());
            prop_assert_eq!(&strays, &want_strays, "{}", k.isa());
            prop_assert_eq!(got, increasing, "{}", k.isa());
        }
    }
}

#[test]
fn every_backend_panics_at_a_gene_outside_the_lookup() {
    let order: Vec<u32> = (0..40).collect();
    let columns: Vec<u32> = (0u32..64)
        .map(|g| (g << CLASS_START_BITS) | ((g % 5) * 8))
        .collect();
    let lookup = ClassLookup {
        columns: &columns,
        order: &order,
        top: 7,
        stray: 3,
    };
    for bad in [64, -1] {
        // The bad gene in the middle of a register, after a register of
        // good ones, on every backend.
        let mut genes: Vec<i32> = (0..40).collect();
        genes[21] = bad;
        let counts = vec![2u32; genes.len()];
        for k in crate::tables::<RowKernels>("rows") {
            let (mut classes, mut tokens) = (vec![0; genes.len()], vec![0; genes.len()]);
            let mut strays = vec![];
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                k.classify(
                    &lookup,
                    &genes,
                    &counts,
                    (&mut classes, &mut tokens),
                    &mut strays,
                )
            }));
            assert!(caught.is_err(), "{}: gene {bad}", k.isa());
            // Every gene before the bad one was classified.
            assert_eq!(&tokens[..21], &genes[..21], "{}", k.isa());
        }
    }
}

/// A row's classes as Geneformer's give them: from a few classes to
/// thousands, in runs (a third of a cell's genes share the class of the
/// gene before them), at any length, with the width past the largest class.
fn classed_row() -> impl Strategy<Value = (Vec<u32>, usize)> {
    (1u32..5000, 0usize..4).prop_flat_map(|(width, extra)| {
        let run = (0..width, 1usize..6);
        (
            prop::collection::vec(run, 0..400).prop_map(|runs| {
                runs.into_iter()
                    .flat_map(|(k, n)| std::iter::repeat_n(k, n))
                    .collect()
            }),
            Just(width as usize + extra),
        )
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_orders_tokens_by_class_like_a_stable_sort((classes, width) in classed_row()) {
        // Tokens in any order (not increasing), each placed by a stable sort
        // of (class, position) written here; each class's end counted here.
        let tokens: Vec<i32> = (0..classes.len() as i32).map(|i| (i * 7919) % 10_007 - 5_000).collect();
        let mut by_class: Vec<usize> = (0..classes.len()).collect();
        by_class.sort_by_key(|&i| (classes[i], i));
        let want: Vec<i32> = by_class.iter().map(|&i| tokens[i]).collect();
        let want_ends: Vec<u32> = (0..width as u32)
            .map(|k| classes.iter().filter(|&&c| c <= k).count() as u32)
            .collect();
        for k in crate::tables::<RowKernels>("rows") {
            let mut ends = vec![3; 5];
            let mut placed = vec![i32::MIN; classes.len()];
            let got = k.order_by_class(&classes, &tokens, width, &mut ends, &mut placed);
            let got_ends: Vec<u32> = (0..width).map(|c| got.end(c) as u32).collect();
            prop_assert_eq!(&placed, &want, "{}", k.isa());
            prop_assert_eq!(&got_ends, &want_ends, "{}", k.isa());
        }
    }
}

#[test]
fn every_backend_refuses_a_class_past_the_width_before_placing() {
    // The bad class in the middle of a register, after a register of good
    // ones; and lengths that differ.
    let mut classes: Vec<u32> = (0..40).map(|i| i % 9).collect();
    classes[21] = 9;
    let tokens: Vec<i32> = (0..40).collect();
    for k in crate::tables::<RowKernels>("rows") {
        let mut placed = vec![-1; 40];
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            k.order_by_class(&classes, &tokens, 9, &mut vec![], &mut placed);
        }));
        assert!(caught.is_err(), "{}: class 9 of 9", k.isa());
        assert!(
            placed.iter().all(|&t| t == -1),
            "{}: nothing placed",
            k.isa()
        );
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            k.order_by_class(&classes[..39], &tokens, 10, &mut vec![], &mut placed);
        }));
        assert!(caught.is_err(), "{}: 39 classes, 40 tokens", k.isa());
    }
}

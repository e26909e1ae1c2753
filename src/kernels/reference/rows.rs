//! The row kernels' reference: plain code that defines what every backend
//! computes (the vector tables run this very code, compiled for their
//! instruction set).

#[cfg(doc)]
use crate::kernels::rows::RowKernels;

/// Reference for [`RowKernels::place`].
#[inline(always)]
pub fn place(
    marks: &[u64],
    before: &mut [u32],
    (columns, counts): (&[u32], &[u32]),
    (out_columns, out_counts): (&mut [i32], &mut [u32]),
) {
    assert_eq!(
        before.len(),
        marks.len(),
        "place: `before` needs one entry per word of `marks`"
    );
    let n = columns.len();
    assert!(
        counts.len() == n && out_columns.len() == n && out_counts.len() == n,
        "place: the columns, their counts and both outputs must be as long"
    );
    let mut total = 0u32;
    for (b, &word) in before.iter_mut().zip(marks) {
        *b = total;
        total += word.count_ones();
    }
    for (&col, &c) in columns.iter().zip(counts) {
        let w = (col >> 6) as usize;
        let below = marks[w] & ((1u64 << (col & 63)) - 1);
        let at = (before[w] + below.count_ones()) as usize;
        out_columns[at] = col as i32;
        out_counts[at] = c;
    }
}

/// Counts below this have a slot in a row's memo of values
/// ([`RowKernels::lookup`]); larger ones share its last slot.
pub const MEMO_SLOTS: usize = 64;

/// Reference for [`RowKernels::scan`].
#[inline(always)]
pub fn scan(counts: &[u32]) -> (u64, u64) {
    let mut total = 0u64;
    let mut seen = 0u64;
    for &c in counts {
        total += u64::from(c);
        seen |= 1u64 << c.min(MEMO_SLOTS as u32 - 1);
    }
    (total, seen)
}

/// Reference for [`RowKernels::starts`].
#[inline(always)]
pub fn starts(counts: &mut [u32]) -> u32 {
    starts_from(counts, 0)
}

/// [`starts`] over `counts`, whose first start is `total` (the counts
/// before them); returns the total past them.
#[inline(always)]
pub(crate) fn starts_from(counts: &mut [u32], mut total: u32) -> u32 {
    for c in counts.iter_mut() {
        let here = *c;
        *c = total;
        total = total.wrapping_add(here);
    }
    total
}

/// Bits of a column's word in a [`ClassLookup`] below its token: where
/// its run of classes starts.
pub const CLASS_START_BITS: u32 = 13;

/// What [`RowKernels::classify`] looks a gene's class and token up in.
/// Column `g`'s word `columns[g]` holds its token above
/// [`CLASS_START_BITS`] bits of where its run starts in `order`; a gene of
/// count `c` takes class `order[start + min(c - 1, top)]` (`c - 1` and the
/// sum wrapping as `u32`), and is a stray where that class is `stray`.
#[derive(Clone, Copy, Debug)]
pub struct ClassLookup<'a> {
    /// A word per column: token, then start.
    pub columns: &'a [u32],
    /// The classes, in runs.
    pub order: &'a [u32],
    /// The largest count minus one that a run tells apart.
    pub top: u32,
    /// The class whose genes [`RowKernels::classify`] lists apart.
    pub stray: u32,
}

/// Where the run of classes of a column with `word` starts in a
/// [`ClassLookup`]'s order.
#[inline(always)]
pub fn class_start(word: u32) -> u32 {
    word & ((1 << CLASS_START_BITS) - 1)
}

impl ClassLookup<'_> {
    /// Gene `g`'s class and token at count `c`.
    ///
    /// # Panics
    ///
    /// If `g` lies outside `columns` or its class outside `order`.
    #[inline(always)]
    pub fn of(&self, g: i32, c: u32) -> (u32, i32) {
        let word = self.columns[g as u32 as usize];
        let at = class_start(word).wrapping_add(c.wrapping_sub(1).min(self.top));
        (self.order[at as usize], (word >> CLASS_START_BITS) as i32)
    }
}

/// Reference for [`RowKernels::classify`].
#[inline(always)]
pub fn classify(
    lookup: &ClassLookup<'_>,
    genes: &[i32],
    counts: &[u32],
    out: (&mut [u32], &mut [i32]),
    strays: &mut Vec<u32>,
) -> bool {
    check_classify(genes, counts, out.0, out.1);
    classify_from(lookup, genes, counts, out, strays, 0, -1)
}

/// The lengths [`RowKernels::classify`] takes, checked alike on every
/// backend.
#[inline(always)]
pub(crate) fn check_classify(genes: &[i32], counts: &[u32], classes: &[u32], tokens: &[i32]) {
    assert!(
        counts.len() == genes.len()
            && classes.len() == genes.len()
            && tokens.len() == genes.len()
            && u32::try_from(genes.len()).is_ok(),
        "classify: the genes, their counts, classes and tokens must be as long, below 2^32"
    );
}

/// [`classify`]'s loop over `genes`, the row's genes from `first` on,
/// after a gene `last`; whether they increase from it.
#[inline(always)]
pub(crate) fn classify_from(
    lookup: &ClassLookup<'_>,
    genes: &[i32],
    counts: &[u32],
    (classes, tokens): (&mut [u32], &mut [i32]),
    strays: &mut Vec<u32>,
    first: usize,
    mut last: i32,
) -> bool {
    let mut increasing = true;
    for (i, ((&g, &c), (k, t))) in genes
        .iter()
        .zip(counts)
        .zip(classes.iter_mut().zip(tokens.iter_mut()))
        .enumerate()
    {
        (*k, *t) = lookup.of(g, c);
        if *k == lookup.stray {
            strays.push((first + i) as u32);
        }
        increasing &= g > last;
        last = g;
    }
    increasing
}

/// Reference for [`RowKernels::order_by_class`]: the classes counted, the
/// counts turned into starts, each token placed at its class's next place,
/// which leaves each class's end at the class (the ends begin at 0).
#[inline(always)]
pub fn order_by_class(
    classes: &[u32],
    tokens: &[i32],
    width: usize,
    ends: &mut Vec<u32>,
    placed: &mut [i32],
) -> usize {
    check_order_by_class(classes, tokens, width, placed);
    ends.clear();
    ends.resize(width, 0);
    count_classes(classes, ends);
    starts(ends);
    place_by_class(classes, tokens, ends, placed);
    0
}

/// The lengths and classes [`RowKernels::order_by_class`] takes, checked
/// alike on every backend before anything is counted.
#[inline(always)]
pub(crate) fn check_order_by_class(classes: &[u32], tokens: &[i32], width: usize, placed: &[i32]) {
    assert!(
        tokens.len() == classes.len()
            && placed.len() == classes.len()
            && u32::try_from(classes.len()).is_ok(),
        "order_by_class: the classes, tokens and placed tokens must be as long, below 2^32"
    );
    let top = classes.iter().copied().max();
    assert!(
        top.is_none_or(|k| (k as usize) < width),
        "order_by_class: a class lies past the {width} classes"
    );
}

/// Adds each of `classes` to its class's counter.
#[inline(always)]
fn count_classes(classes: &[u32], counters: &mut [u32]) {
    for &k in classes {
        counters[k as usize] += 1;
    }
}

/// Places each of `tokens` at the start in `starts` of its class, which
/// moves on past it: the starts become the ends.
#[inline(always)]
fn place_by_class(classes: &[u32], tokens: &[i32], starts: &mut [u32], placed: &mut [i32]) {
    for (&k, &t) in classes.iter().zip(tokens) {
        let at = &mut starts[k as usize];
        placed[*at as usize] = t;
        *at += 1;
    }
}

/// Counts below this are tallied per value by [`RowKernels::tally`];
/// larger ones are handed back apart.
pub const TALLY_SLOTS: usize = 8;

/// Reference for [`RowKernels::tally`].
#[inline(always)]
pub fn tally(counts: &[u32], small: &mut [usize; TALLY_SLOTS], rest: &mut [u32]) -> usize {
    check_tally(counts, rest);
    tally_from(counts, small, rest, 0)
}

/// The lengths [`RowKernels::tally`] takes, checked alike on every backend.
#[inline(always)]
pub(crate) fn check_tally(counts: &[u32], rest: &[u32]) {
    assert!(
        rest.len() >= counts.len(),
        "tally: `rest` must hold at least as many counts as there are"
    );
}

/// [`tally`]'s loop over `counts`, whose larger counts go to `rest` from
/// `n` on (`n` at most the counts before these, so every write lies within
/// `rest`); returns `n` past them.
#[inline(always)]
pub(crate) fn tally_from(
    counts: &[u32],
    small: &mut [usize; TALLY_SLOTS],
    rest: &mut [u32],
    mut n: usize,
) -> usize {
    for &c in counts {
        match small.get_mut(c as usize) {
            Some(slot) => *slot += 1,
            None => {
                rest[n] = c;
                n += 1;
            }
        }
    }
    n
}

/// Reference for [`RowKernels::lookup`].
#[inline(always)]
pub fn lookup(memo: &[f32; MEMO_SLOTS], counts: &[u32], out: &mut [f32]) {
    check_lookup(counts, out);
    for (o, &c) in out.iter_mut().zip(counts) {
        *o = memo[c.min(MEMO_SLOTS as u32 - 1) as usize];
    }
}

/// The lengths [`RowKernels::lookup`] takes, checked alike on every
/// backend.
#[inline(always)]
pub(crate) fn check_lookup(counts: &[u32], out: &[f32]) {
    assert_eq!(
        counts.len(),
        out.len(),
        "lookup: the counts and the output must be as long"
    );
}

/// Reference for [`RowKernels::scatter_values`].
#[inline(always)]
pub fn scatter_values(
    memo: &[f32; MEMO_SLOTS],
    (table, offsets): (&[i32], &[i32]),
    counts: &[u32],
    out: &mut [f32],
    larger: &dyn Fn(u32) -> f32,
) {
    check_scatter(offsets, counts);
    for (&o, &c) in offsets.iter().zip(counts) {
        out[table[o as u32 as usize] as u32 as usize] = count_value(memo, c, larger);
    }
}

/// The lengths [`RowKernels::scatter_values`] takes, checked alike on
/// every backend.
#[inline(always)]
pub(crate) fn check_scatter(offsets: &[i32], counts: &[u32]) {
    assert_eq!(
        offsets.len(),
        counts.len(),
        "scatter_values: the offsets and the counts must be as long"
    );
}

/// Reference for [`RowKernels::values_in_place`].
#[inline(always)]
pub fn values_in_place(memo: &[f32; MEMO_SLOTS], slots: &mut [u32], larger: &dyn Fn(u32) -> f32) {
    for s in slots {
        *s = count_value(memo, *s, larger).to_bits();
    }
}

/// The value of `count`: its memo slot below `MEMO_SLOTS - 1`, else
/// `larger(count)` (the last slot stands for every larger count).
#[inline(always)]
fn count_value(memo: &[f32; MEMO_SLOTS], count: u32, larger: &dyn Fn(u32) -> f32) -> f32 {
    if count < MEMO_SLOTS as u32 - 1 {
        memo[count as usize]
    } else {
        larger(count)
    }
}

/// SplitMix64's increment (the golden ratio's fraction, in 64 bits).
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finalizer: a bijection of `u64` that mixes every bit (the
/// one hash of the crate's seeds: the epoch order, sampling, scGPT's draws,
/// the synthetic data).
#[inline(always)]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64's output for the state `z` (the increment added first).
#[inline(always)]
pub fn splitmix(z: u64) -> u64 {
    mix(z.wrapping_add(GOLDEN))
}

/// Reference for [`RowKernels::draws`]: draw `i` is `(r * m) >> 64` with
/// `r = splitmix(state + (i + 1) * GOLDEN)` and `m = first + i + 1`, the
/// high half of the product taken from two 32-bit halves of `r` (each
/// product fits 64 bits since `m < 2^32`; the sum is the 128-bit product's
/// high half exactly), which vector units multiply lane by lane.
///
/// Written so that a vector unit multiplies 32-bit lanes: `m` is masked to
/// its 32 bits (a no-op, `RowKernels::draws` asserts `m < 2^32`), so that
/// each half's product is one unsigned 32 x 32 -> 64 multiply (`vpmuludq`)
/// rather than a 64-bit one (`vpmullq`, three times the work on x86,
/// emulated on AVX2); the states are a running sum, not a product of the
/// index. Only SplitMix64's own two multiplies stay 64-bit.
#[inline(always)]
pub fn draws(state: u64, first: u32, out: &mut [u32]) {
    const HALF: u64 = 0xFFFF_FFFF;
    let mut z = state;
    for (i, t) in out.iter_mut().enumerate() {
        z = z.wrapping_add(GOLDEN);
        let r = splitmix(z);
        let m = (u64::from(first) + i as u64 + 1) & HALF;
        let low = ((r & HALF) * m) >> 32;
        *t = (((r >> 32) * m + low) >> 32) as u32;
    }
}

/// Reference for [`RowKernels::stream_parts`]: plain copies.
#[inline(always)]
pub fn stream(parts: &mut [(&[u8], &mut [u8])]) {
    for (src, dst) in parts.iter_mut() {
        dst.copy_from_slice(src);
    }
}

/// Reference for [`RowKernels::quotient_keys`].
#[inline(always)]
pub fn quotient_keys(x: &[f64], m: &[f64], out: &mut [u64]) -> (u64, u64) {
    assert!(
        x.len() == out.len() && m.len() == out.len(),
        "quotient_keys: the dividends, divisors and output must be as long"
    );
    let (mut least, mut greatest) = (u64::MAX, 0);
    for ((o, &x), &m) in out.iter_mut().zip(x).zip(m) {
        let key = !(x / m).to_bits();
        *o = key;
        least = least.min(key);
        greatest = greatest.max(key);
    }
    (least, greatest)
}

/// Reference for [`RowKernels::select`].
#[inline(always)]
pub fn select(
    table: &[i32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    out: (&mut [i32], &mut [u32]),
) -> usize {
    check_select(genes, counts, out.0, out.1);
    select_from(table, first, genes, counts, out, 0)
}

/// The lengths [`RowKernels::select`] and [`RowKernels::compress`] take
/// (genes or values, and counts), checked alike on every backend.
#[inline(always)]
pub(crate) fn check_select(genes: &[i32], counts: &[u32], out: &[i32], out_counts: &[u32]) {
    assert!(
        counts.len() == genes.len() && out.len() >= genes.len() && out_counts.len() >= genes.len(),
        "select, compress: the genes or values and their counts must be as long, the outputs at least as long"
    );
}

/// [`select`]'s loop over `genes`, whose kept values go to the outputs
/// from `n` on (`n` at most the genes before these, so every write lies
/// within the outputs); returns `n` past them.
#[inline(always)]
pub(crate) fn select_from(
    table: &[i32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    out: (&mut [i32], &mut [u32]),
    n: usize,
) -> usize {
    let values = genes.iter().map(|&g| {
        let value = table
            .get((g as u32).wrapping_sub(first) as usize)
            .copied()
            .unwrap_or(-1);
        (value, value >= 0)
    });
    keep_from(values, counts, out, n)
}

/// Reference for [`RowKernels::compress`].
#[inline(always)]
pub fn compress(
    values: &[i32],
    marks: &[u8],
    counts: &[u32],
    out: (&mut [i32], &mut [u32]),
) -> usize {
    check_compress(values, marks, counts, out.0, out.1);
    compress_from(values, marks, counts, out, 0)
}

/// The lengths [`RowKernels::compress`] takes, checked alike on every
/// backend.
#[inline(always)]
pub(crate) fn check_compress(
    values: &[i32],
    marks: &[u8],
    counts: &[u32],
    out: &[i32],
    out_counts: &[u32],
) {
    assert_eq!(marks.len(), values.len(), "compress: a mark per value");
    check_select(values, counts, out, out_counts);
}

/// [`compress`]'s loop over `values`, whose kept values go to the outputs
/// from `n` on (as [`keep_from`]); returns `n` past them.
#[inline(always)]
pub(crate) fn compress_from(
    values: &[i32],
    marks: &[u8],
    counts: &[u32],
    out: (&mut [i32], &mut [u32]),
    n: usize,
) -> usize {
    let kept = values.iter().zip(marks).map(|(&v, &m)| (v, m != 0));
    keep_from(kept, counts, out, n)
}

/// Writes the `values` marked kept and their `counts` to the outputs from
/// `n` on (`n` at most the values before these, so every write lies within
/// the outputs, at least as long as all of them); returns `n` past them.
/// Every value is written, and the next written over it unless it is kept:
/// no branch per value.
#[inline(always)]
pub(crate) fn keep_from(
    values: impl Iterator<Item = (i32, bool)>,
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
    mut n: usize,
) -> usize {
    for ((value, kept), &c) in values.zip(counts) {
        out[n] = value;
        out_counts[n] = c;
        n += usize::from(kept);
    }
    n
}

/// Reference for [`RowKernels::select_marked`]: the marked genes' offsets
/// kept first ([`marked`]), then looked up.
#[inline(always)]
pub fn select_marked(
    table: &[i32],
    marks: &[u32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    let n = marked(table.len(), marks, first, genes, counts, (out, out_counts));
    look_up_in_place(table, &mut out[..n]);
    n
}

/// Reference for [`RowKernels::marked`].
#[inline(always)]
pub fn marked(
    table_len: usize,
    marks: &[u32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    check_select(genes, counts, out, out_counts);
    marked_from(table_len, marks, first, genes, counts, (out, out_counts), 0)
}

/// [`select_marked`]'s first loop over `genes`: each gene whose offset
/// `g - first` (as `u32`, wrapping) lies within a table of `table_len`
/// values and is marked goes to the outputs from `n` on, its offset (as
/// `u32` bits) and its count; returns `n` past them (`n` at most the genes
/// before these, as in [`select_from`]).
#[inline(always)]
pub(crate) fn marked_from(
    table_len: usize,
    marks: &[u32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    out: (&mut [i32], &mut [u32]),
    n: usize,
) -> usize {
    let offsets = genes.iter().map(|&g| {
        let i = (g as u32).wrapping_sub(first);
        let bit = marks
            .get(i as usize >> 5)
            .map_or(0, |&w| (w >> (i & 31)) & 1);
        (i as i32, bit & u32::from((i as usize) < table_len) == 1)
    });
    keep_from(offsets, counts, out, n)
}

/// Replaces each offset (`u32` bits, each within `table`) by its value in
/// `table`: [`select_marked`]'s second loop.
#[inline(always)]
pub(crate) fn look_up_in_place(table: &[i32], offsets: &mut [i32]) {
    for o in offsets {
        *o = table[*o as u32 as usize];
    }
}

/// Reference for [`RowKernels::count_marked`].
#[inline(always)]
pub fn count_marked(marks: &[u32], first: u32, genes: &[i32]) -> usize {
    genes
        .iter()
        .map(|&g| {
            let i = (g as u32).wrapping_sub(first) as usize;
            marks
                .get(i >> 5)
                .map_or(0, |&w| (w >> (i & 31)) as usize & 1)
        })
        .sum()
}

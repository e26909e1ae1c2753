//! The vector bodies of keeping a row's genes: a table's values gathered,
//! or a bitmap's bits read a register of genes at a time, and the kept
//! lanes compressed to the front of the outputs.

use super::{all_lanes, any_above, last_gathered};
use crate::kernels::reference::rows as scalar;
use crate::kernels::vector::{Vector, MAX_LANES};

/// [`scalar::select`] a register of genes at a time: their values
/// gathered from the table and the kept ones (and their counts) compressed
/// to the outputs, where the reference takes a gene at a time with a load
/// that depends on it. A register with a gene outside the table (its
/// value none) goes through the reference's loop, as does the tail.
#[inline(always)]
pub(super) fn select<V: Vector>(
    v: V,
    table: &[i32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    scalar::check_select(genes, counts, out, out_counts);
    let lanes = V::LANES;
    let (mut n, mut i) = (0, 0);
    if let Some(last) = last_gathered(table.len()) {
        let (first_v, last_v) = (v.splat(first), v.splat(last));
        while i + lanes <= genes.len() {
            // SAFETY: `i + LANES <= genes.len() == counts.len()`.
            let g = unsafe { v.load_u32(genes.as_ptr().add(i).cast()) };
            let at = v.sub(g, first_v);
            if any_above(v, at, last_v) {
                n = scalar::select_from(
                    table,
                    first,
                    &genes[i..i + lanes],
                    &counts[i..i + lanes],
                    (&mut *out, &mut *out_counts),
                    n,
                );
            } else {
                // SAFETY: every lane of `at` is at most `last`, within the
                // table; `n <= i`, so `n + LANES <= genes.len()`, which
                // both outputs hold (checked above), and the counts are
                // readable for `LANES` values at `i`.
                unsafe {
                    let values = v.gather_u32(table.as_ptr().cast(), at);
                    let keep = !v.sign_bits(values) & all_lanes::<V>();
                    n = keep_register(v, values, keep, counts, i, (out, out_counts), n);
                }
            }
            i += lanes;
        }
    }
    scalar::select_from(
        table,
        first,
        &genes[i..],
        &counts[i..],
        (out, out_counts),
        n,
    )
}

/// [`scalar::select_marked`] a register of genes at a time, in two
/// passes: [`marked`], then the kept offsets replaced by their values, a
/// register gathered at a time. A gather costs about a load per lane, so
/// where [`select`] pays one per gene, this pays one per kept gene (a
/// 2,000-gene vocabulary keeps about two in five of a cell's genes); the
/// tail goes through the reference's loop.
#[inline(always)]
pub(super) fn select_marked<V: Vector>(
    v: V,
    table: &[i32],
    marks: &[u32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    let lanes = V::LANES;
    let n = marked(
        v,
        table.len(),
        marks,
        first,
        genes,
        counts,
        (&mut *out, out_counts),
    );
    let mut j = 0;
    if last_gathered(table.len()).is_some() {
        while j + lanes <= n {
            // SAFETY: `j + LANES <= n <= out.len()`; every kept offset lies
            // within the table, whose offsets fit `i32` lanes.
            unsafe {
                let offsets = out.as_mut_ptr().add(j).cast::<u32>();
                let values = v.gather_u32(table.as_ptr().cast(), v.load_u32(offsets));
                v.store_u32(offsets, values);
            }
            j += lanes;
        }
    }
    scalar::look_up_in_place(table, &mut out[j..n]);
    n
}

/// [`scalar::marked`] a register of genes at a time: each register's bits
/// read by a [`MarkReader`], the marked genes' offsets and counts
/// compressed to the outputs; the tail through the reference's loop.
#[inline(always)]
pub(super) fn marked<V: Vector>(
    v: V,
    table_len: usize,
    marks: &[u32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    scalar::check_select(genes, counts, out, out_counts);
    let lanes = V::LANES;
    // The offsets within both the table and the marks.
    let Some(last) = last_gathered(table_len.min(marks.len().saturating_mul(32))) else {
        return scalar::marked(table_len, marks, first, genes, counts, (out, out_counts));
    };
    let reader = MarkReader::new(v, marks, first, last);
    let zero = v.splat(0);
    let (mut n, mut i) = (0, 0);
    while i + lanes <= genes.len() {
        let (within, bit) = reader.read(v, genes, i);
        let kept = v.sign_bits(v.sub(zero, bit)) & all_lanes::<V>();
        // SAFETY: `i + LANES <= genes.len() == counts.len()`; `n <= i`, so
        // `n + LANES` is within both outputs (checked above).
        n = unsafe { keep_register(v, within, kept, counts, i, (&mut *out, &mut *out_counts), n) };
        i += lanes;
    }
    scalar::marked_from(
        table_len,
        marks,
        first,
        &genes[i..],
        &counts[i..],
        (out, out_counts),
        n,
    )
}

/// Zero bytes: the high plane under a register of marks, which
/// [`Vector::load_planes`] widens to `u32` lanes.
static NO_HIGH_BYTES: [u8; MAX_LANES] = [0; MAX_LANES];

/// [`scalar::compress`] a register of values at a time: the register's
/// marks widened to lanes, and the values (and counts) of the marked lanes
/// compressed to the outputs; the tail through the reference's loop.
#[inline(always)]
pub(super) fn compress<V: Vector>(
    v: V,
    values: &[i32],
    marks: &[u8],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    scalar::check_compress(values, marks, counts, out, out_counts);
    let zero = v.splat(0);
    let (mut n, mut i) = (0, 0);
    while i + V::LANES <= values.len() {
        // SAFETY: `i + LANES <= values.len()`, which `marks` and `counts`
        // are as long as, and `NO_HIGH_BYTES` holds `MAX_LANES >= LANES`
        // bytes; `n <= i`, so `n + LANES` is within both outputs (checked
        // above).
        unsafe {
            let register = v.load_u32(values.as_ptr().add(i).cast());
            let m = v.load_planes(marks.as_ptr().add(i), NO_HIGH_BYTES.as_ptr());
            // A mark (at most 255) negated is negative; 0 stays 0.
            let keep = v.sign_bits(v.sub(zero, m)) & all_lanes::<V>();
            n = keep_register(v, register, keep, counts, i, (out, out_counts), n);
        }
        i += V::LANES;
    }
    scalar::compress_from(
        &values[i..],
        &marks[i..],
        &counts[i..],
        (out, out_counts),
        n,
    )
}

/// Writes the lanes of `values` (the values at `i`) whose bit is set in
/// `keep`, and the counts at `i` of the same lanes, to the outputs at `n`;
/// returns `n` past them.
///
/// # Safety
///
/// `counts` holds `LANES` values at `i`, and both outputs `LANES` at `n`.
#[inline(always)]
pub(super) unsafe fn keep_register<V: Vector>(
    v: V,
    values: V::U32,
    keep: u32,
    counts: &[u32],
    i: usize,
    (out, out_counts): (&mut [i32], &mut [u32]),
    n: usize,
) -> usize {
    // SAFETY: the caller's contract: `LANES` counts at `i`, and room for
    // `LANES` values in each output at `n`.
    unsafe {
        let c = v.load_u32(counts.as_ptr().add(i));
        v.compress_store_u32(out.as_mut_ptr().add(n).cast(), values, keep);
        v.compress_store_u32(out_counts.as_mut_ptr().add(n), c, keep);
    }
    n + keep.count_ones() as usize
}

/// [`scalar::count_marked`] a register of genes at a time: each gene's bit
/// read by a [`MarkReader`], the bits summed per lane; the tail through
/// the reference's loop. Marks of `2^32` bits or more keep the reference.
#[inline(always)]
pub(super) fn count_marked<V: Vector>(v: V, marks: &[u32], first: u32, genes: &[i32]) -> usize {
    let Some(last) = u32::try_from(marks.len())
        .ok()
        .and_then(|w| w.checked_mul(32))
        .and_then(|bits| bits.checked_sub(1))
    else {
        return scalar::count_marked(marks, first, genes);
    };
    let reader = MarkReader::new(v, marks, first, last);
    let mut sums = v.splat(0);
    let mut i = 0;
    while i + V::LANES <= genes.len() {
        let (_, bit) = reader.read(v, genes, i);
        sums = v.add(sums, bit);
        i += V::LANES;
    }
    v.sum_lanes(sums) + scalar::count_marked(marks, first, &genes[i..])
}

/// Reads the bit of each gene of a register in a bitmap: bit `g - first`
/// (as `u32`, wrapping) of `marks`, none past `last`. The register's words
/// come from one lane permute of the `LANES` words from its first gene's
/// word on, where every lane's word falls within them (a row's genes
/// ascend, about 17 columns apart in a cell of 2,100 genes out of 36,000,
/// so 16 of them span about 9 words of 32 bits); else from a gather.
struct MarkReader<'m, V: Vector> {
    marks: &'m [u32],
    first: u32,
    last: u32,
    first_v: V::U32,
    last_v: V::U32,
    /// The largest index into a window of words: `LANES - 1`.
    widest: V::U32,
}

impl<'m, V: Vector> MarkReader<'m, V> {
    /// A reader of `marks` from `first` on, up to bit `last`, which lies
    /// within the marks.
    #[inline(always)]
    fn new(v: V, marks: &'m [u32], first: u32, last: u32) -> Self {
        assert!(
            (last as usize >> 5) < marks.len(),
            "MarkReader: the last bit lies past the marks"
        );
        MarkReader {
            marks,
            first,
            last,
            first_v: v.splat(first),
            last_v: v.splat(last),
            widest: v.splat(V::LANES as u32 - 1),
        }
    }

    /// The genes `genes[i..i + LANES]`' offsets from `first`, each at most
    /// `last`, and their bits (1 or 0, 0 past `last`).
    ///
    /// # Panics
    ///
    /// If `genes` holds fewer than `i + LANES` values.
    #[inline(always)]
    fn read(&self, v: V, genes: &[i32], i: usize) -> (V::U32, V::U32) {
        let lanes = &genes[i..i + V::LANES];
        let base = ((lanes[0] as u32).wrapping_sub(self.first).min(self.last) >> 5) as usize;
        // SAFETY: `lanes` holds `LANES` values; every word index is at most
        // `last / 32`, below `marks.len()` (checked when made); the window's
        // `LANES` words from `base` lie within the marks and every lane's
        // index into it is below `LANES` (both checked).
        unsafe {
            let at = v.sub(v.load_u32(lanes.as_ptr().cast()), self.first_v);
            let within = v.min(at, self.last_v);
            let words = v.shr_each(within, v.splat(5));
            let index = v.sub(words, v.splat(base as u32));
            let in_window = !any_above(v, index, self.widest);
            let word = if in_window && base + V::LANES <= self.marks.len() {
                v.permute_window(self.marks.as_ptr().add(base), index)
            } else {
                v.gather_u32(self.marks.as_ptr(), words)
            };
            let one = v.splat(1);
            let bit = v.and(v.shr_each(word, v.and(at, v.splat(31))), one);
            // 1 in the lanes past `last`, whose bit is then dropped.
            let past = v.min(v.sub(at, within), one);
            (within, v.andnot(past, bit))
        }
    }
}

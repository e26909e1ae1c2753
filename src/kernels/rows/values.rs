//! The vector bodies of a row's transformed values: the memo looked up a
//! register of counts at a time, over the counts or into a dense row.

use super::{any_above, last_gathered};
use crate::kernels::reference::rows as scalar;
use crate::kernels::rows::MEMO_SLOTS;
use crate::kernels::vector::Vector;

/// [`scalar::lookup`] a register of counts at a time, each looked up in the
/// memo by [`Vector::lookup_64`]; the tail through the reference's loop.
#[inline(always)]
pub(super) fn lookup<V: Vector>(v: V, memo: &[f32; MEMO_SLOTS], counts: &[u32], out: &mut [f32]) {
    scalar::check_lookup(counts, out);
    let table = bytemuck::cast_ref(memo);
    let last = v.splat(MEMO_SLOTS as u32 - 1);
    let mut i = 0;
    while i + V::LANES <= counts.len() {
        // SAFETY: `i + LANES <= counts.len() == out.len()`; every lane of
        // the index is at most `MEMO_SLOTS - 1`, within the memo.
        unsafe {
            let c = v.min(v.load_u32(counts.as_ptr().add(i)), last);
            let values = v.lookup_64(table, c);
            v.store_u32(out.as_mut_ptr().add(i).cast(), values);
        }
        i += V::LANES;
    }
    scalar::lookup(memo, &counts[i..], &mut out[i..])
}

/// [`scalar::values_in_place`] a register of counts at a time: a register
/// whose counts all have a memo slot of their own is one lookup in the
/// memo ([`Vector::lookup_64`]), stored over the counts; one holding a
/// larger count goes through the reference's loop, as does the tail. (The
/// reference's loop over blocks of 16 counts, compiled as it was, came out
/// as half-width gathers with scalar code between them: three times this
/// kernel's share of a profile of normalized batches.)
#[inline(always)]
pub(super) fn values_in_place<V: Vector>(
    v: V,
    memo: &[f32; MEMO_SLOTS],
    slots: &mut [u32],
    larger: &dyn Fn(u32) -> f32,
) {
    let top = v.splat(MEMO_SLOTS as u32 - 2);
    let mut i = 0;
    while i + V::LANES <= slots.len() {
        // SAFETY: `i + LANES <= slots.len()`.
        let c = unsafe { v.load_u32(slots.as_ptr().add(i)) };
        if any_above(v, c, top) {
            scalar::values_in_place(memo, &mut slots[i..i + V::LANES], larger);
        } else {
            // SAFETY: every lane of `c` is at most `MEMO_SLOTS - 2`, within
            // the memo; `i + LANES <= slots.len()`.
            unsafe {
                let values = v.lookup_64(bytemuck::cast_ref(memo), c);
                v.store_u32(slots.as_mut_ptr().add(i), values);
            }
        }
        i += V::LANES;
    }
    scalar::values_in_place(memo, &mut slots[i..], larger)
}

/// [`scalar::scatter_values`] a register of kept genes at a time: their
/// columns gathered from the table, their values looked up in the memo
/// ([`Vector::lookup_64`]) and scattered to the row
/// ([`Vector::scatter_u32`]). A register with an offset past the table, a
/// column past the row or a count without a memo slot of its own goes
/// through the reference's loop, as does the tail.
#[inline(always)]
pub(super) fn scatter_values<V: Vector>(
    v: V,
    memo: &[f32; MEMO_SLOTS],
    (table, offsets): (&[i32], &[i32]),
    counts: &[u32],
    out: &mut [f32],
    larger: &dyn Fn(u32) -> f32,
) {
    scalar::check_scatter(offsets, counts);
    let (Some(last_offset), Some(last_column)) =
        (last_gathered(table.len()), last_gathered(out.len()))
    else {
        return scalar::scatter_values(memo, (table, offsets), counts, out, larger);
    };
    let (last_offset, last_column) = (v.splat(last_offset), v.splat(last_column));
    let top = v.splat(MEMO_SLOTS as u32 - 2);
    let lanes = V::LANES;
    let mut i = 0;
    while i + lanes <= offsets.len() {
        // SAFETY: `i + LANES <= offsets.len() == counts.len()`.
        let (o, c) = unsafe {
            (
                v.load_u32(offsets.as_ptr().add(i).cast()),
                v.load_u32(counts.as_ptr().add(i)),
            )
        };
        let register = i..i + lanes;
        i += lanes;
        if !any_above(v, o, last_offset) && !any_above(v, c, top) {
            // SAFETY: every offset is at most the table's last.
            let columns = unsafe { v.gather_u32(table.as_ptr().cast(), o) };
            if !any_above(v, columns, last_column) {
                // SAFETY: every count is at most `MEMO_SLOTS - 2`, within
                // the memo; every column is at most the row's last.
                unsafe {
                    let values = v.lookup_64(bytemuck::cast_ref(memo), c);
                    v.scatter_u32(out.as_mut_ptr().cast(), columns, values);
                }
                continue;
            }
        }
        let (o, c) = (&offsets[register.clone()], &counts[register]);
        scalar::scatter_values(memo, (table, o), c, out, larger);
    }
    scalar::scatter_values(memo, (table, &offsets[i..]), &counts[i..], out, larger)
}

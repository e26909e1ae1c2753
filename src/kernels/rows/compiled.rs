//! The row kernels that run the reference's own code, compiled for a
//! vector table's instruction set (see the parent module's docs).

use crate::kernels::reference::rows as scalar;

/// The reference's code, compiled for the ISA of the token (unused but for
/// its type: holding one proves the CPU runs the ISA).
#[inline(always)]
pub(super) fn place<S>(
    _: S,
    marks: &[u64],
    before: &mut [u32],
    columns: (&[u32], &[u32]),
    out: (&mut [i32], &mut [u32]),
) {
    scalar::place(marks, before, columns, out)
}

/// [`scalar::scan`] compiled for the token's ISA.
#[inline(always)]
pub(super) fn scan<S>(_: S, counts: &[u32]) -> (u64, u64) {
    scalar::scan(counts)
}

/// [`scalar::draws`] compiled for the token's ISA: the compiler makes
/// the draws a register at a time where the ISA multiplies 64-bit lanes.
#[inline(always)]
pub(super) fn draws<S>(_: S, state: u64, first: u32, out: &mut [u32]) {
    scalar::draws(state, first, out)
}

/// [`scalar::quotient_keys`] compiled for the token's ISA.
#[inline(always)]
pub(super) fn quotient_keys<S>(_: S, x: &[f64], m: &[f64], out: &mut [u64]) -> (u64, u64) {
    scalar::quotient_keys(x, m, out)
}

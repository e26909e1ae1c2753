//! The running sum and the scaling of TS_2DIFF blocks, written once over
//! [`Vector`] for both word types.

use super::{scalar, Divisor, DivisorKind, Word};
use crate::kernels::vector::Vector;

/// A block word's registers on one ISA: lets one body serve FLOAT pages
/// (`u32` integers, `f32` values) and DOUBLE pages (`u64`, `f64`).
pub(super) trait WordVector<S: Vector>: Word {
    /// A register of these words.
    type V: Copy;
    /// Words per register.
    const N: usize;
    /// Every lane `x`.
    fn splat(s: S, x: Self) -> Self::V;
    /// Lane-wise `a + b`, wrapping.
    fn add(s: S, a: Self::V, b: Self::V) -> Self::V;
    /// Inclusive prefix sum across the lanes, wrapping.
    fn prefix_sum(s: S, v: Self::V) -> Self::V;
    /// The last lane in every lane.
    fn broadcast_last(s: S, v: Self::V) -> Self::V;
    /// `N` words from `src`.
    ///
    /// # Safety
    /// `src` is readable for `N` words.
    unsafe fn load(s: S, src: *const Self) -> Self::V;
    /// Stores `N` words at `dst`.
    ///
    /// # Safety
    /// `dst` is writable for `N` words.
    unsafe fn store(s: S, dst: *mut Self, v: Self::V);
    /// `S::LANES_64` words from `src`, read as signed integers, as `f64`.
    ///
    /// # Safety
    /// `src` is readable for `S::LANES_64` words.
    unsafe fn load_as_f64(s: S, src: *const Self) -> S::F64;
    /// Stores `S::LANES_64` results as this word's float type.
    ///
    /// # Safety
    /// `dst` is writable for `S::LANES_64` floats.
    unsafe fn store_float(s: S, dst: *mut Self::Float, v: S::F64);
}

impl<S: Vector> WordVector<S> for u32 {
    type V = S::U32;
    const N: usize = S::LANES;
    #[inline(always)]
    fn splat(s: S, x: u32) -> S::U32 {
        s.splat(x)
    }
    #[inline(always)]
    fn add(s: S, a: S::U32, b: S::U32) -> S::U32 {
        s.add(a, b)
    }
    #[inline(always)]
    fn prefix_sum(s: S, v: S::U32) -> S::U32 {
        s.prefix_sum(v)
    }
    #[inline(always)]
    fn broadcast_last(s: S, v: S::U32) -> S::U32 {
        s.broadcast_last(v)
    }
    #[inline(always)]
    unsafe fn load(s: S, src: *const u32) -> S::U32 {
        // SAFETY: the caller's contract.
        unsafe { s.load_u32(src) }
    }
    #[inline(always)]
    unsafe fn store(s: S, dst: *mut u32, v: S::U32) {
        // SAFETY: the caller's contract.
        unsafe { s.store_u32(dst, v) }
    }
    #[inline(always)]
    unsafe fn load_as_f64(s: S, src: *const u32) -> S::F64 {
        // SAFETY: the caller's contract.
        unsafe { s.load_i32_as_f64(src) }
    }
    #[inline(always)]
    unsafe fn store_float(s: S, dst: *mut f32, v: S::F64) {
        // SAFETY: the caller's contract.
        unsafe { s.store_f32(dst, v) }
    }
}

impl<S: Vector> WordVector<S> for u64 {
    type V = S::U64;
    const N: usize = S::LANES_64;
    #[inline(always)]
    fn splat(s: S, x: u64) -> S::U64 {
        s.splat_u64(x)
    }
    #[inline(always)]
    fn add(s: S, a: S::U64, b: S::U64) -> S::U64 {
        s.add_u64(a, b)
    }
    #[inline(always)]
    fn prefix_sum(s: S, v: S::U64) -> S::U64 {
        s.prefix_sum_u64(v)
    }
    #[inline(always)]
    fn broadcast_last(s: S, v: S::U64) -> S::U64 {
        s.broadcast_last_u64(v)
    }
    #[inline(always)]
    unsafe fn load(s: S, src: *const u64) -> S::U64 {
        // SAFETY: the caller's contract.
        unsafe { s.load_u64(src) }
    }
    #[inline(always)]
    unsafe fn store(s: S, dst: *mut u64, v: S::U64) {
        // SAFETY: the caller's contract.
        unsafe { s.store_u64(dst, v) }
    }
    #[inline(always)]
    unsafe fn load_as_f64(s: S, src: *const u64) -> S::F64 {
        // SAFETY: the caller's contract.
        unsafe { s.i64_to_f64(s.load_u64(src)) }
    }
    #[inline(always)]
    unsafe fn store_float(s: S, dst: *mut f64, v: S::F64) {
        // SAFETY: the caller's contract.
        unsafe { s.store_f64(dst, v) }
    }
}

/// The running sum `buf[k] = prev + min_delta + buf[k]` (wrapping), returning
/// the last value (see [`scalar::delta`]). One register at a time: add
/// `min_delta`, sum the lanes, add the carry (the sum so far, broadcast). The
/// carry advances by the register's own last lane, computed off the carry's
/// dependency chain, so that chain is one addition per register rather than
/// an addition plus a permute.
#[inline(always)]
pub(super) fn delta<S: Vector, W: WordVector<S>>(s: S, prev: W, min_delta: W, buf: &mut [W]) -> W {
    let n = buf.len();
    let ptr = buf.as_mut_ptr();
    let md = W::splat(s, min_delta);
    let mut carry = W::splat(s, prev);
    let mut i = 0;
    while i + W::N <= n {
        // SAFETY: the register covers `[i, i + N)` with `i + N <= n`.
        unsafe {
            let x = W::prefix_sum(s, W::add(s, W::load(s, ptr.add(i)), md));
            W::store(s, ptr.add(i), W::add(s, x, carry));
            carry = W::add(s, carry, W::broadcast_last(s, x));
        }
        i += W::N;
    }
    let prev = if i == 0 { prev } else { buf[i - 1] };
    scalar::delta(prev, min_delta, &mut buf[i..])
}

/// `a / p`, correctly rounded, given `y = 1/p` correctly rounded.
///
/// Division is the slow instruction here (about 2 cycles per lane on current
/// x86), so a [`DivisorKind::Reciprocal`] divisor uses the reciprocal `y` with
/// two FMA correction steps: `q = a*y`, then twice `r = a - q*p` (exact),
/// `q = q + r*y`. After the first step `q` is within one ulp of `a/p`; from
/// there Markstein's theorem (`y` = `1/p` correctly rounded, `q` within one
/// ulp) makes the second step's result the correctly rounded quotient, i.e.
/// exactly what the division instruction returns. [`Divisor::new`] picks this
/// path only for `1 < p <= 1e280`, where nothing overflows or goes subnormal.
#[inline(always)]
fn divide<S: Vector>(s: S, a: S::F64, p: S::F64, y: S::F64, kind: DivisorKind) -> S::F64 {
    match kind {
        DivisorKind::One => a,
        DivisorKind::Reciprocal => {
            let q = s.mul_f64(a, y);
            let q = s.mul_add_f64(s.neg_mul_add_f64(q, p, a), y, q);
            s.mul_add_f64(s.neg_mul_add_f64(q, p, a), y, q)
        }
        DivisorKind::Divide => s.div_f64(a, p),
    }
}

/// `out[k] = ints[k] / divisor` with Java's conversion (see [`scalar::scale`]).
#[inline(always)]
pub(super) fn scale<S: Vector, W: WordVector<S>>(
    s: S,
    ints: &[W],
    divisor: &Divisor,
    out: &mut [W::Float],
) {
    let n = ints.len().min(out.len());
    if n < S::LANES_64 {
        return scalar::scale(&ints[..n], divisor, &mut out[..n]);
    }
    let (src, dst) = (ints.as_ptr(), out.as_mut_ptr());
    let p = s.splat_f64(divisor.value);
    let y = s.splat_f64(divisor.reciprocal);
    let mut i = 0;
    while i + S::LANES_64 <= n {
        // SAFETY: `i + LANES_64 <= n`, inside both slices.
        unsafe { scale_at(s, src, dst, i, p, y, divisor.kind) };
        i += S::LANES_64;
    }
    // A ragged end is the last full register again, overlapping: the values
    // are recomputed identically (a 129-value block would otherwise pay a
    // scalar division for its last value).
    if i < n {
        // SAFETY: `n >= LANES_64`, so `n - LANES_64 .. n` is inside both.
        unsafe { scale_at(s, src, dst, n - S::LANES_64, p, y, divisor.kind) };
    }
}

/// Scales the register of words at `src + i` into `dst + i`. A function, not
/// a closure: a closure would not inherit the caller's target features, and
/// its intrinsics would become calls.
///
/// # Safety
/// `LANES_64` words at `src + i` are readable and as many floats at `dst + i`
/// writable.
#[inline(always)]
unsafe fn scale_at<S: Vector, W: WordVector<S>>(
    s: S,
    src: *const W,
    dst: *mut W::Float,
    i: usize,
    p: S::F64,
    y: S::F64,
    kind: DivisorKind,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let a = W::load_as_f64(s, src.add(i));
        W::store_float(s, dst.add(i), divide(s, a, p, y, kind));
    }
}

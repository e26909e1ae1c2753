//! The integration kernels' vector bodies, written once over [`Vector`]'s
//! `u64` (read as `i64`) and `f64` lanes.

use super::{scalar, Affine, Overflow, Scale};
use crate::kernels::vector::Vector;

/// Bit `i` set iff lane `i` of the register sum `s = prev + x` overflowed.
///
/// The wrapped sums equal the true sums modulo 2^64, so `s - x` is the
/// previous wrapped sum, and `prev + x` overflowed exactly when both operands
/// have the sign opposite to `s`.
#[inline(always)]
fn overflowed<S: Vector>(s: S, sum: S::U64, x: S::U64) -> u32 {
    let prev = s.sub_u64(sum, x);
    s.sign_bits_u64(s.and_u64(s.xor_u64(prev, sum), s.xor_u64(x, sum)))
}

/// Prefix sum, one register per step: scan inside the register, add the
/// carry (the previous register's last sum), check overflow, store.
///
/// At the first flagged lane every earlier sum was exact, so the first flag
/// is the first true overflow. A flagged register is not stored: the
/// reference redoes it, so the partial output and the reported position are
/// the reference's by construction.
#[inline(always)]
pub(super) fn prefix_sum<S: Vector>(s: S, data: &mut [i64]) -> Result<(), Overflow> {
    let n = data.len();
    if n < 2 {
        return Ok(());
    }
    let mut carry = s.splat_u64(data[0] as u64);
    let p = data.as_mut_ptr().cast::<u64>();
    let mut i = 1;
    while n - i >= S::LANES_64 {
        // SAFETY: `i + LANES_64 <= n`, so the register lies inside `data`.
        let x = unsafe { s.load_u64(p.add(i)) };
        let sum = s.add_u64(s.prefix_sum_u64(x), carry);
        if overflowed(s, sum, x) != 0 {
            break;
        }
        // SAFETY: as above.
        unsafe { s.store_u64(p.add(i), sum) };
        carry = s.broadcast_last_u64(sum);
        i += S::LANES_64;
    }
    scalar::prefix_sum_from(data, i)
}

/// [`prefix_sum`] fused with [`ints_to_f64`]: scan, check, convert, map,
/// store, one register at a time. A flagged register is left for the
/// reference tail, which continues from the running sum.
#[inline(always)]
pub(super) fn prefix_sum_to_f64<S: Vector>(
    s: S,
    data: &mut [f64],
    affine: Affine,
) -> Result<(), Overflow> {
    let n = data.len();
    let Some(first) = data.first_mut() else {
        return Ok(());
    };
    let running = first.to_bits();
    *first = affine.apply(running as i64 as f64);
    let p = data.as_mut_ptr();
    let map = Map::new(s, affine);
    let mut carry = s.splat_u64(running);
    let mut i = 1;
    while n - i >= S::LANES_64 {
        // SAFETY: `i + LANES_64 <= n` keeps the register inside `data`, whose
        // 8-byte elements are read as integers and written as `f64`.
        let x = unsafe { s.load_u64(p.add(i).cast::<u64>()) };
        let sum = s.add_u64(s.prefix_sum_u64(x), carry);
        if overflowed(s, sum, x) != 0 {
            break;
        }
        // SAFETY: as above.
        unsafe { s.store_f64(p.add(i), map.apply(s, s.i64_to_f64(sum))) };
        carry = s.broadcast_last_u64(sum);
        i += S::LANES_64;
    }
    let running = s.first_u64(carry) as i64;
    scalar::prefix_sum_to_f64_from(data, i, running, affine)
}

/// `x -> affine(x)` over registers, the tail by the reference.
#[inline(always)]
pub(super) fn affine<S: Vector>(s: S, data: &mut [f64], affine: Affine) {
    let map = Map::new(s, affine);
    let mut chunks = data.chunks_exact_mut(S::LANES_64);
    for c in &mut chunks {
        // SAFETY: each chunk holds exactly `LANES_64` elements.
        unsafe { s.store_f64(c.as_mut_ptr(), map.apply(s, s.load_f64(c.as_ptr()))) };
    }
    scalar::affine_f64(chunks.into_remainder(), affine);
}

/// Integer bit patterns -> `affine(i as f64)` over registers.
#[inline(always)]
pub(super) fn ints_to_f64<S: Vector>(s: S, data: &mut [f64], affine: Affine) {
    let map = Map::new(s, affine);
    let mut chunks = data.chunks_exact_mut(S::LANES_64);
    for c in &mut chunks {
        // SAFETY: each chunk holds exactly `LANES_64` elements of 8 bytes,
        // read as integers and written back as `f64`.
        unsafe {
            let x = s.i64_to_f64(s.load_u64(c.as_ptr().cast::<u64>()));
            s.store_f64(c.as_mut_ptr(), map.apply(s, x));
        }
    }
    scalar::ints_to_f64(chunks.into_remainder(), affine);
}

/// An [`Affine`] with its constants splatted once.
struct Map<F> {
    mul: Option<F>,
    div: Option<F>,
    add: Option<F>,
}

impl<F: Copy> Map<F> {
    #[inline(always)]
    fn new<S: Vector<F64 = F>>(s: S, a: Affine) -> Self {
        let (mul, div) = match a.scale {
            Scale::None => (None, None),
            Scale::Mul(m) => (Some(s.splat_f64(m)), None),
            Scale::Div(d) => (None, Some(s.splat_f64(d))),
        };
        // No closure (`Option::map`): it would not inherit the caller's
        // target features.
        #[allow(clippy::manual_map)]
        let add = match a.offset {
            Some(o) => Some(s.splat_f64(o)),
            None => None,
        };
        Map { mul, div, add }
    }

    /// The same steps as [`Affine::apply`]; the branches are loop-invariant.
    #[inline(always)]
    fn apply<S: Vector<F64 = F>>(&self, s: S, mut x: F) -> F {
        if let Some(m) = self.mul {
            x = s.mul_f64(x, m);
        }
        if let Some(d) = self.div {
            x = s.div_f64(x, d);
        }
        if let Some(o) = self.add {
            x = s.add_f64(x, o);
        }
        x
    }
}

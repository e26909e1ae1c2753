//! Integration kernels for the XDelta codec (and anything else that
//! integrates deltas): checked `i64` prefix sums, fused with the
//! integer-to-float conversion and scale/offset map.
//!
//! # Algorithm and numerics
//!
//! * [`IntegrateKernels::prefix_sum_i64`] is an inclusive prefix sum in
//!   checked `i64` arithmetic: `data[k] = data[k-1] + data[k]`, the first
//!   element unchanged (the "static first value" of a delta coding). Integer
//!   addition is associative, so the vector bodies add in a different order (a
//!   log-step scan inside each register, plus a carry) and still produce the
//!   same bits. Overflow is detected exactly in the same pass: see
//!   [`Overflow`] and `simd::prefix_sum`.
//! * [`IntegrateKernels::affine_f64`] and [`IntegrateKernels::ints_to_f64`]
//!   compute `x * s` or `x / s`, then `+ o`: two roundings, in that order,
//!   never a fused multiply-add (Rust never contracts `a * b + c`, and the
//!   vector bodies use separate multiply and add operations). Elementwise work
//!   is order-independent, so every backend gives the reference's bits.
//! * [`IntegrateKernels::prefix_sum_to_f64`] (and its second-order twin) fuses
//!   the integer prefix sum with the conversion and the map: the decoder's
//!   whole integer path in one read and one write of the buffer, which matters
//!   because a decoded column is far larger than the caches.
//! * [`prefix_sum_f64`] has no vector body on purpose: floating-point
//!   addition is not associative, so a SIMD scan would round differently from
//!   the sequential left-to-right sum that the XDelta reference decoders
//!   compute. It stays a plain sequential loop.
//!
//! The reference is [`crate::kernels::reference::integrate`].

use super::dispatch::{kernel_entry, kernel_tables, Isa, Level};
use super::reference::integrate as scalar;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod simd;

/// The first position whose running sum left the `i64` range.
///
/// Reported identically by every backend: on overflow at `index`,
/// `data[..index]` holds the prefix sums and `data[index..]` is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// Position (in the slice passed to the kernel) whose sum overflowed.
    pub index: usize,
}

/// The multiplicative part of an [`Affine`] map.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// No scaling.
    None,
    /// `x * s`.
    Mul(f64),
    /// `x / s` (a true division, one rounding; not a multiplication by `1/s`).
    Div(f64),
}

/// `x -> (x scaled) + offset`, each step one IEEE-754 rounding, absent steps
/// skipped (so `-0.0` survives a map without an offset).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Affine {
    /// Applied first.
    pub scale: Scale,
    /// Added second, when present.
    pub offset: Option<f64>,
}

impl Affine {
    /// The map that changes nothing.
    pub const IDENTITY: Affine = Affine {
        scale: Scale::None,
        offset: None,
    };

    /// Whether this map is [`Affine::IDENTITY`].
    pub fn is_identity(&self) -> bool {
        matches!(self.scale, Scale::None) && self.offset.is_none()
    }

    /// The map applied to one value: the definition the vector code matches.
    #[inline(always)]
    pub fn apply(&self, x: f64) -> f64 {
        let y = match self.scale {
            Scale::None => x,
            Scale::Mul(s) => x * s,
            Scale::Div(s) => x / s,
        };
        match self.offset {
            Some(o) => y + o,
            None => y,
        }
    }
}

/// The integration kernels of one [`Isa`]; reach one through
/// [`KernelTable`](super::KernelTable).
#[derive(Debug)]
pub struct IntegrateKernels {
    isa: Isa,
    prefix_sum_i64: fn(&mut [i64]) -> Result<(), Overflow>,
    prefix_sum_to_f64: fn(&mut [f64], Affine) -> Result<(), Overflow>,
    affine_f64: fn(&mut [f64], Affine),
    ints_to_f64: fn(&mut [f64], Affine),
}

impl IntegrateKernels {
    /// In-place inclusive prefix sum in checked `i64` arithmetic (one order of
    /// delta decoding: the first element is the static start value).
    pub fn prefix_sum_i64(&self, data: &mut [i64]) -> Result<(), Overflow> {
        (self.prefix_sum_i64)(data)
    }

    /// In-place second-order integration in checked `i64` arithmetic: the first
    /// element is static, the second is a delta from it, every later one a delta
    /// of the delta. Equivalently, a prefix sum of `data[1..]` (the deltas) and
    /// then of `data`.
    ///
    /// On overflow, [`Overflow::index`] is the first position whose delta or
    /// value leaves the `i64` range, as if both were computed position by
    /// position; the contents of `data` are then unspecified (but the same for
    /// every backend).
    pub fn prefix_sum2_i64(&self, data: &mut [i64]) -> Result<(), Overflow> {
        self.integrate_deltas(data)?;
        self.prefix_sum_i64(data)
    }

    /// The first pass of a second-order integration: the deltas `data[1..]`.
    /// On overflow it also runs the second pass up to the bad delta, so that
    /// the reported position is the first bad delta *or value*.
    fn integrate_deltas(&self, data: &mut [i64]) -> Result<(), Overflow> {
        if data.len() < 2 {
            return Ok(());
        }
        self.prefix_sum_i64(&mut data[1..])
            .or_else(|Overflow { index }| {
                // The delta at `index + 1` overflowed; deltas before it are
                // integrated, so a value before it may overflow first.
                let first_bad = index + 1;
                self.prefix_sum_i64(&mut data[..first_bad])?;
                Err(Overflow { index: first_bad })
            })
    }

    /// [`IntegrateKernels::prefix_sum_i64`] and
    /// [`IntegrateKernels::ints_to_f64`] fused into one pass over memory:
    /// `data` holds `i64` bit patterns (as for `ints_to_f64`); each running
    /// sum is converted and mapped as soon as it is known.
    ///
    /// On overflow at `index`, `data[..index]` holds the mapped doubles and
    /// `data[index..]` the untouched integers, on every backend.
    pub fn prefix_sum_to_f64(&self, data: &mut [f64], affine: Affine) -> Result<(), Overflow> {
        (self.prefix_sum_to_f64)(data, affine)
    }

    /// [`IntegrateKernels::prefix_sum2_i64`] with its second pass fused with
    /// the conversion, as in [`IntegrateKernels::prefix_sum_to_f64`]. Overflow
    /// is reported as by `prefix_sum2_i64`; the contents are then unspecified
    /// (but the same for every backend).
    pub fn prefix_sum2_to_f64(&self, data: &mut [f64], affine: Affine) -> Result<(), Overflow> {
        self.integrate_deltas(bytemuck::cast_slice_mut(data))?;
        self.prefix_sum_to_f64(data, affine)
    }

    /// In-place `x -> affine.apply(x)`.
    pub fn affine_f64(&self, data: &mut [f64], affine: Affine) {
        if !affine.is_identity() {
            (self.affine_f64)(data, affine)
        }
    }

    /// In-place conversion of integers to floats, then `affine`.
    ///
    /// On entry each element of `data` holds an `i64` stored as its bit pattern
    /// (write it through `bytemuck::cast_slice_mut::<f64, i64>`); on return it
    /// holds `affine.apply(i as f64)`, where `i as f64` rounds to nearest, ties
    /// to even (the same double that parsing the integer's decimal text gives).
    /// Working in place lets a decoder integrate and convert in one buffer.
    pub fn ints_to_f64(&self, data: &mut [f64], affine: Affine) {
        (self.ints_to_f64)(data, affine)
    }
}

/// The reference table.
static SCALAR: IntegrateKernels = IntegrateKernels {
    isa: Isa::PORTABLE,
    prefix_sum_i64: scalar::prefix_sum_i64,
    prefix_sum_to_f64: scalar::prefix_sum_to_f64,
    affine_f64: scalar::affine_f64,
    ints_to_f64: scalar::ints_to_f64,
};

/// Defines the table `$name`: the bodies of `simd.rs` for one ISA.
macro_rules! integrate_table {
    ($name:ident, $level:ident, $features:literal, $token:ty) => {
        static $name: IntegrateKernels = {
            kernel_entry!($features, $token, fn prefix_sum_i64(data: &mut [i64]) -> Result<(), Overflow> = simd::prefix_sum);
            kernel_entry!($features, $token, fn prefix_sum_to_f64(data: &mut [f64], affine: Affine) -> Result<(), Overflow> = simd::prefix_sum_to_f64);
            kernel_entry!($features, $token, fn affine_f64(data: &mut [f64], affine: Affine) = simd::affine);
            kernel_entry!($features, $token, fn ints_to_f64(data: &mut [f64], affine: Affine) = simd::ints_to_f64);
            IntegrateKernels {
                isa: Isa::compiled_for(Level::$level),
                prefix_sum_i64,
                prefix_sum_to_f64,
                affine_f64,
                ints_to_f64,
            }
        };
    };
}

kernel_tables!(IntegrateKernels, SCALAR, integrate_table);

/// In-place inclusive prefix sum in IEEE-754 double arithmetic, strictly left
/// to right (`data[k] = data[k-1] + data[k]`). Sequential by design: see the
/// module docs.
pub fn prefix_sum_f64(data: &mut [f64]) {
    let Some((first, rest)) = data.split_first_mut() else {
        return;
    };
    let mut acc = *first;
    for x in rest {
        acc += *x;
        *x = acc;
    }
}

/// In-place second-order integration in double arithmetic: deltas
/// `data[1..]` summed first (the second element is a delta from the first),
/// then values, each strictly left to right. This computes the same roundings
/// as interleaving the two sums position by position.
pub fn prefix_sum2_f64(data: &mut [f64]) {
    if data.len() < 2 {
        return;
    }
    prefix_sum_f64(&mut data[1..]);
    prefix_sum_f64(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference::integrate as reference;
    use crate::kernels::KernelTable;

    /// Every table this CPU runs, scalar included.
    fn scans() -> Vec<&'static IntegrateKernels> {
        IntegrateKernels::available()
    }

    #[test]
    fn overflow_is_reported_at_the_same_place_with_the_same_partial_output() {
        for scan in scans() {
            for at in 1..40 {
                let mut data = vec![1i64; 41];
                data[at] = i64::MAX;
                let mut want = data.clone();
                let r = reference::prefix_sum_i64(&mut want);
                assert_eq!(r, Err(Overflow { index: at }));
                assert_eq!(scan.prefix_sum_i64(&mut data), r, "{}", scan.isa());
                assert_eq!(data, want, "{}", scan.isa());
            }
        }
    }

    #[test]
    fn second_order_reports_the_first_bad_position() {
        // The value overflows at position 2 (MAX - 1 + 1 + 1); no delta does.
        let mut data = vec![i64::MAX - 1, 1, 0, 0];
        assert_eq!(
            IntegrateKernels::scalar().prefix_sum2_i64(&mut data),
            Err(Overflow { index: 2 })
        );
        // The delta itself overflows at position 2.
        let mut data = vec![0, i64::MAX, 1, 0];
        assert_eq!(
            IntegrateKernels::scalar().prefix_sum2_i64(&mut data),
            Err(Overflow { index: 2 })
        );
        let mut data = vec![5, 1, 1, 1];
        IntegrateKernels::scalar()
            .prefix_sum2_i64(&mut data)
            .unwrap();
        assert_eq!(data, [5, 6, 8, 11]);
    }

    #[test]
    fn affine_is_two_roundings_not_a_fused_multiply_add() {
        // x * s rounds away a bit that a fused multiply-add would keep.
        let x = 1.0 + f64::EPSILON;
        let s = 1.0 - f64::EPSILON;
        let o = -1.0;
        let two_roundings = (x * s) + o;
        assert_ne!(two_roundings, x.mul_add(s, o));
        let affine = Affine {
            scale: Scale::Mul(s),
            offset: Some(o),
        };
        for scan in scans() {
            let mut data = vec![x; 19];
            scan.affine_f64(&mut data, affine);
            assert!(
                data.iter().all(|v| v.to_bits() == two_roundings.to_bits()),
                "{}",
                scan.isa()
            );
        }
    }

    #[test]
    fn int_conversion_rounds_like_as() {
        let ints = [
            0,
            -1,
            1,
            i64::MIN,
            i64::MAX,
            (1 << 53) + 1,
            -(1 << 53) - 1,
            (1 << 62) + 513,
            0x7FFF_FFFF_FFFF_FDFF,
        ];
        for scan in scans() {
            let mut data: Vec<f64> = ints
                .iter()
                .cycle()
                .take(37)
                .map(|&i| f64::from_bits(i as u64))
                .collect();
            scan.ints_to_f64(&mut data, Affine::IDENTITY);
            for (got, want) in data.iter().zip(ints.iter().cycle()) {
                assert_eq!(got.to_bits(), (*want as f64).to_bits(), "{}", scan.isa());
            }
        }
    }

    #[test]
    fn float_sums_are_sequential() {
        let mut data = [1e16, 1.0, 1.0, -1e16];
        prefix_sum_f64(&mut data);
        assert_eq!(data, [1e16, 1e16, 1e16, 0.0]);
        let mut data = [1.0, 2.0, 0.5];
        prefix_sum2_f64(&mut data);
        assert_eq!(data, [1.0, 3.0, 5.5]);
    }
}

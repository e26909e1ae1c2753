//! Block kernels for TS_2DIFF integer blocks (TsFile's `DeltaBinaryEncoder`).
//!
//! A block stores a first value, a minimum delta and `n` bit-packed
//! non-negative "two-diffs" `td[k] = delta[k] - min_delta`, packed MSB-first at
//! a fixed width of 0..=32 bits (FLOAT pages, `u32` words) or 0..=64 bits
//! (DOUBLE pages, `u64` words). Decoding a block is three passes over a few
//! hundred words that stay in L1:
//!
//! * unpacking ([`BlockKernels::unpack_u32`], [`BlockKernels::unpack_u64`]):
//!   eight `w`-bit values fill exactly `w` bytes, so the stream is a run of
//!   same-shaped groups; each value's bytes are gathered into a 64-bit lane,
//!   byte-reversed and shifted into place (see `unpack.rs`);
//! * the running sum ([`BlockKernels::delta_u32`], [`BlockKernels::delta_u64`]):
//!   `v[k] = v[k-1] + min_delta + td[k]`, wrapping; a register at a time, a
//!   lane prefix sum plus a carry;
//! * scaling ([`BlockKernels::scale_f32`], [`BlockKernels::scale_f64`]):
//!   integer to float with Java's rules, `(float) ((double) i / p)` and
//!   `(double) i / p`, bit-exact; the vector bodies replace the division by an
//!   exact FMA sequence on the reciprocal (see [`Divisor`]).
//!
//! The reference ([`crate::kernels::reference::block`]) defines every result;
//! the vector bodies hand it their ragged ends.

use std::fmt;

use super::dispatch::{kernel_entry, kernel_tables, Isa, Level};
use super::reference::block as scalar;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod simd;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod unpack;

/// Nominally public so that the format's sealed traits may name it, but
/// unreachable from outside the crate.
mod word {
    use std::fmt;

    /// A block word: `u32` for FLOAT pages, `u64` for DOUBLE pages.
    pub trait Word: Copy + Default + PartialEq + fmt::Debug + Send + Sync + 'static {
        /// Bits in the word (the largest bit width a block may use).
        const BITS: u32;
        /// The float type a page of these words decodes to.
        type Float: Copy;
        /// The low `BITS` bits of `x`.
        fn truncate(x: u64) -> Self;
        /// Wrapping addition.
        fn wrapping_add(self, other: Self) -> Self;
        /// Java's conversion of the stored integer: FLOAT `(float) ((double) i / p)`,
        /// DOUBLE `(double) i / p`, with the word read as a signed integer.
        fn scaled(self, p: f64) -> Self::Float;
    }

    impl Word for u32 {
        const BITS: u32 = 32;
        type Float = f32;
        fn truncate(x: u64) -> u32 {
            x as u32
        }
        fn wrapping_add(self, other: u32) -> u32 {
            u32::wrapping_add(self, other)
        }
        fn scaled(self, p: f64) -> f32 {
            (f64::from(self as i32) / p) as f32
        }
    }

    impl Word for u64 {
        const BITS: u32 = 64;
        type Float = f64;
        fn truncate(x: u64) -> u64 {
            x
        }
        fn wrapping_add(self, other: u64) -> u64 {
            u64::wrapping_add(self, other)
        }
        fn scaled(self, p: f64) -> f64 {
            self as i64 as f64 / p
        }
    }
}
pub(crate) use word::Word;

/// A divisor prepared for dividing many integers by it, bit-exactly.
///
/// For `1 < p <= 1e280` the vector backends multiply by the correctly rounded
/// reciprocal and correct the quotient with FMAs (Markstein's theorem makes
/// the result the correctly rounded quotient; see `simd::divide`), several
/// times faster than the division instruction. `p == 1` is a plain
/// conversion. Anything else (tiny, huge, infinite or NaN `p`) divides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Divisor {
    value: f64,
    reciprocal: f64,
    kind: DivisorKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DivisorKind {
    One,
    Reciprocal,
    Divide,
}

impl Divisor {
    /// The largest divisor for which the reciprocal path is used: quotients
    /// of non-zero integers stay above 1e-280 and the remainders above 2^-52,
    /// far from the subnormal range where the FMA argument breaks down.
    const RECIPROCAL_MAX: f64 = 1e280;

    /// Prepares `value` as a divisor.
    pub fn new(value: f64) -> Divisor {
        let kind = if value == 1.0 {
            DivisorKind::One
        } else if value > 1.0 && value <= Self::RECIPROCAL_MAX {
            DivisorKind::Reciprocal
        } else {
            DivisorKind::Divide
        };
        Divisor {
            value,
            reciprocal: 1.0 / value,
            kind,
        }
    }

    /// The divisor.
    pub fn value(&self) -> f64 {
        self.value
    }
}

/// The block kernels of one [`Isa`]; reach one through
/// [`KernelTable`](super::KernelTable) (once per page or per process) and call
/// through it in the hot loop.
pub struct BlockKernels {
    isa: Isa,
    unpack_u32: fn(&[u8], u32, &mut [u32]),
    unpack_u64: fn(&[u8], u32, &mut [u64]),
    delta_u32: fn(u32, u32, &mut [u32]) -> u32,
    delta_u64: fn(u64, u64, &mut [u64]) -> u64,
    scale_f32: fn(&[u32], &Divisor, &mut [f32]),
    scale_f64: fn(&[u64], &Divisor, &mut [f64]),
}

impl fmt::Debug for BlockKernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockKernels")
            .field("isa", &self.isa)
            .finish()
    }
}

impl BlockKernels {
    /// Unpacks `out.len()` values of `width` bits (0..=32), MSB-first, from
    /// `packed`. Bytes after the `ceil(out.len() * width / 8)` the values need
    /// are ignored (pad bits included) but let the vector bodies use wide
    /// loads to the very end, so pass them when you have them.
    ///
    /// # Panics
    /// If `width > 32` or `packed` is shorter than the values need.
    pub fn unpack_u32(&self, packed: &[u8], width: u32, out: &mut [u32]) {
        check_unpack(packed, width, u32::BITS, out.len());
        (self.unpack_u32)(packed, width, out)
    }

    /// [`BlockKernels::unpack_u32`] for `u64` words: widths 0..=64.
    ///
    /// # Panics
    /// If `width > 64` or `packed` is shorter than the values need.
    pub fn unpack_u64(&self, packed: &[u8], width: u32, out: &mut [u64]) {
        check_unpack(packed, width, u64::BITS, out.len());
        (self.unpack_u64)(packed, width, out)
    }

    /// Replaces each `buf[k]` by `prev + min_delta + buf[k]`, where `prev` is
    /// the previous (already replaced) element or, for `k = 0`, the argument;
    /// wrapping. Returns the last value (`prev` when `buf` is empty), the
    /// `prev` of the next chunk of the same block.
    pub fn delta_u32(&self, prev: u32, min_delta: u32, buf: &mut [u32]) -> u32 {
        (self.delta_u32)(prev, min_delta, buf)
    }

    /// [`BlockKernels::delta_u32`] for `u64` words.
    pub fn delta_u64(&self, prev: u64, min_delta: u64, buf: &mut [u64]) -> u64 {
        (self.delta_u64)(prev, min_delta, buf)
    }

    /// `out[k] = (float) ((double) (i32) ints[k] / divisor)`, as Java's TsFile
    /// `FloatDecoder` computes it.
    ///
    /// # Panics
    /// If `out` and `ints` differ in length.
    pub fn scale_f32(&self, ints: &[u32], divisor: &Divisor, out: &mut [f32]) {
        assert_eq!(ints.len(), out.len(), "one scaled value per integer");
        (self.scale_f32)(ints, divisor, out)
    }

    /// `out[k] = (double) (i64) ints[k] / divisor`, as Java computes it.
    ///
    /// # Panics
    /// If `out` and `ints` differ in length.
    pub fn scale_f64(&self, ints: &[u64], divisor: &Divisor, out: &mut [f64]) {
        assert_eq!(ints.len(), out.len(), "one scaled value per integer");
        (self.scale_f64)(ints, divisor, out)
    }
}

/// The unpack contract: a width the word holds, and the bytes `n` values need.
fn check_unpack(packed: &[u8], width: u32, max_width: u32, n: usize) {
    assert!(width <= max_width, "bit width {width} exceeds {max_width}");
    let need = (n as u128 * u128::from(width)).div_ceil(8);
    assert!(
        packed.len() as u128 >= need,
        "{n} values of {width} bits need {need} packed bytes, got {}",
        packed.len()
    );
}

/// The reference table.
static SCALAR: BlockKernels = BlockKernels {
    isa: Isa::PORTABLE,
    unpack_u32: scalar::unpack::<u32>,
    unpack_u64: scalar::unpack::<u64>,
    delta_u32: scalar::delta::<u32>,
    delta_u64: scalar::delta::<u64>,
    scale_f32: scalar::scale::<u32>,
    scale_f64: scalar::scale::<u64>,
};

/// Defines the table `$name`: the bodies of `unpack.rs` and `simd.rs` for one
/// ISA.
macro_rules! block_table {
    ($name:ident, $level:ident, $features:literal, $token:ty) => {
        static $name: BlockKernels = {
            kernel_entry!($features, $token, fn unpack_u32(packed: &[u8], width: u32, out: &mut [u32]) = unpack::unpack);
            kernel_entry!($features, $token, fn unpack_u64(packed: &[u8], width: u32, out: &mut [u64]) = unpack::unpack);
            kernel_entry!($features, $token, fn delta_u32(prev: u32, min_delta: u32, buf: &mut [u32]) -> u32 = simd::delta);
            kernel_entry!($features, $token, fn delta_u64(prev: u64, min_delta: u64, buf: &mut [u64]) -> u64 = simd::delta);
            kernel_entry!($features, $token, fn scale_f32(ints: &[u32], divisor: &Divisor, out: &mut [f32]) = simd::scale);
            kernel_entry!($features, $token, fn scale_f64(ints: &[u64], divisor: &Divisor, out: &mut [f64]) = simd::scale);
            BlockKernels {
                isa: Isa::compiled_for(Level::$level),
                unpack_u32,
                unpack_u64,
                delta_u32,
                delta_u64,
                scale_f32,
                scale_f64,
            }
        };
    };
}

kernel_tables!(BlockKernels, SCALAR, block_table);

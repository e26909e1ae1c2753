//! TsFile FLOAT/DOUBLE TS_2DIFF pages, byte-compatible with the Java reference.
//!
//! Apache TsFile stores float and double series as integers: each value is
//! scaled by `10^maxPointNumber` and rounded (or, when that overflows, just
//! rounded, or when even that overflows or the value is NaN, stored as its raw
//! IEEE bits), and the integers are delta-of-delta coded in blocks
//! (`DeltaBinaryEncoder`). This module reads and writes those pages exactly as
//! the Java `FloatEncoder`/`FloatDecoder` do, including their conversion
//! quirks: FLOAT values divide in double precision and then round to float,
//! ties round towards +infinity (`Math.round`), every NaN is written as the
//! canonical NaN, and `-0.0` reads back as `+0.0`.
//!
//! * [`Decoder`] decodes a page into a caller's `&mut [f32]`/`&mut [f64]`
//!   ([`Decoder::decode_into`]) or a new `Vec` ([`Decoder::decode`]); the hot
//!   loops run on the [`crate::kernels::block`] kernels of the chosen
//!   [`crate::Backend`] (by default [`crate::Backend::active`]).
//! * [`Encoder`] writes a page from a slice into a `Vec<u8>` or an
//!   [`std::io::Write`], with Java's defaults (maxPointNumber 2, 128 deltas per
//!   block) or any other settings.
//! * [`inspect`] reads only the headers: form, maxPointNumber, value and block
//!   counts.
//!
//! The byte layout is described in the project's
//! `spec/ts2diff-java-layout.md`: an optional Form 2/3 header with page-wide
//! LSB-first bitmaps, the maxPointNumber varint, then integer blocks until the
//! page ends, each `[writeIndex i32][bitWidth i32][minDelta][firstValue]`
//! followed by the MSB-first packed deltas.
//!
//! Decoding is strict: every field is checked against the bytes that remain
//! before it is used, so a hostile page cannot make the decoder read out of
//! bounds, loop for long or allocate more than its output (see
//! [`Decoder::max_values`] for the one count a page cannot bound by its size:
//! zero-width blocks cost 16 or 24 bytes however many values they hold).
//! Pad bits are the exception: the Java encoder leaves stale bits there, so
//! they are ignored.
//!
//! ```
//! use deltacells::format::ts2diff::{Decoder, Encoder};
//!
//! let values = [20.5f64, 20.75, 21.0, f64::NAN, 1e300];
//! let page = Encoder::new().encode(&values)?;
//! let back: Vec<f64> = Decoder::new().decode(&page)?;
//! assert_eq!(back[..3], values[..3]);
//! assert!(back[3].is_nan());
//! assert_eq!(back[4], 1e300);
//! # Ok::<(), deltacells::format::ts2diff::Ts2diffError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use crate::kernels::block::{BlockKernels, Divisor, Word};

mod decode;
mod encode;
mod error;
mod wire;

pub use decode::Decoder;
pub use encode::Encoder;
pub use error::{Field, Ts2diffError};
pub use wire::{inspect, Form, PageInfo};

/// The value type of a page: FLOAT (`IntDeltaEncoder`, 32-bit integers) or
/// DOUBLE (`LongDeltaEncoder`, 64-bit integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloatType {
    /// TsFile FLOAT, Rust `f32`.
    Float,
    /// TsFile DOUBLE, Rust `f64`.
    Double,
}

impl FloatType {
    /// `"float"` or `"double"`.
    pub fn name(self) -> &'static str {
        match self {
            FloatType::Float => "float",
            FloatType::Double => "double",
        }
    }
}

impl fmt::Display for FloatType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FloatType {
    type Err = Ts2diffError;

    fn from_str(s: &str) -> Result<FloatType, Ts2diffError> {
        match s.to_ascii_lowercase().as_str() {
            "float" | "f32" => Ok(FloatType::Float),
            "double" | "f64" => Ok(FloatType::Double),
            _ => Err(Ts2diffError::UnknownType(s.to_string())),
        }
    }
}

/// A float type TS_2DIFF pages can hold: `f32` (FLOAT) or `f64` (DOUBLE).
/// Sealed; the methods that make it work are internal.
pub trait PageFloat: repr::Repr {}

impl PageFloat for f32 {}
impl PageFloat for f64 {}

pub(crate) mod repr {
    use super::*;

    /// How one value is stored (Java's `underflowFlags`: true, false, null).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Stored {
        /// `round(v * 10^mpn)`; decoded as `i / 10^mpn`.
        Scaled,
        /// `round(v)`, because the scaled value overflows; decoded as `i / 1`.
        Rounded,
        /// The IEEE bits, because `v` itself overflows or is NaN.
        Raw,
    }

    /// The per-type half of the codec (private: it seals [`PageFloat`]).
    pub trait Repr: Copy + Default + PartialEq + fmt::Debug + Send + Sync + 'static {
        /// The stored integer, as an unsigned word of the same width.
        type Bits: Word + Into<u64>;
        /// The page value type.
        const TYPE: FloatType;
        /// Java's "no delta yet" minDelta, written in one-value blocks.
        const NO_DELTA: Self::Bits;

        /// Raw-bits form.
        fn from_bits(bits: Self::Bits) -> Self;
        /// Rounded form: `(float) i` / `(double) i` of the signed integer.
        fn unscaled(bits: Self::Bits) -> Self;
        /// The integer read as signed and widened.
        fn to_i64(bits: Self::Bits) -> i64;
        /// The low bits of `x`.
        fn from_i64(x: i64) -> Self::Bits;
        /// Big-endian bytes to a word (`bytes` has exactly the word's size).
        fn from_be(bytes: &[u8]) -> Self::Bits;
        /// Appends the word big-endian.
        fn put_be(bits: Self::Bits, out: &mut Vec<u8>);
        /// The encoder's per-value choice (layout spec section 2) for
        /// `p = 10^mpn`.
        fn classify(self, p: f64) -> (Stored, Self::Bits);

        fn unpack(k: &BlockKernels, packed: &[u8], width: u32, out: &mut [Self::Bits]);
        fn delta(
            k: &BlockKernels,
            prev: Self::Bits,
            min_delta: Self::Bits,
            buf: &mut [Self::Bits],
        ) -> Self::Bits;
        fn scale(k: &BlockKernels, ints: &[Self::Bits], d: &Divisor, out: &mut [Self]);
    }

    impl Repr for f32 {
        type Bits = u32;
        const TYPE: FloatType = FloatType::Float;
        const NO_DELTA: u32 = i32::MAX as u32;

        fn from_bits(bits: u32) -> f32 {
            f32::from_bits(bits)
        }
        fn unscaled(bits: u32) -> f32 {
            bits as i32 as f32
        }
        fn to_i64(bits: u32) -> i64 {
            i64::from(bits as i32)
        }
        fn from_i64(x: i64) -> u32 {
            x as u32
        }
        fn from_be(bytes: &[u8]) -> u32 {
            let mut b = [0u8; 4];
            b.copy_from_slice(bytes);
            u32::from_be_bytes(b)
        }
        fn put_be(bits: u32, out: &mut Vec<u8>) {
            out.extend_from_slice(&bits.to_be_bytes());
        }
        // `x > HI || x < LO` is false for NaN, unlike `!(LO..=HI).contains(&x)`:
        // NaN must fall through to the NaN test, as in Java.
        #[allow(clippy::manual_range_contains)]
        fn classify(self, p: f64) -> (Stored, u32) {
            // `value * maxPointValue` is float * double: a double product.
            let x = f64::from(self) * p;
            if x > f64::from(i32::MAX) || x < f64::from(i32::MIN) {
                // Java compares the float with Integer.MAX_VALUE promoted to
                // float, i.e. 2^31, so 2^31 itself is "rounded" (and saturates).
                if self > 2_147_483_648.0 || self < -2_147_483_648.0 {
                    (Stored::Raw, self.to_bits())
                } else {
                    let r =
                        java_round(f64::from(self)).clamp(i64::from(i32::MIN), i64::from(i32::MAX));
                    (Stored::Rounded, r as i32 as u32)
                }
            } else if self.is_nan() {
                (Stored::Raw, 0x7fc0_0000)
            } else {
                // In int range by the test above, so `(int) Math.round(x)` keeps it.
                (Stored::Scaled, java_round(x) as i32 as u32)
            }
        }

        fn unpack(k: &BlockKernels, packed: &[u8], width: u32, out: &mut [u32]) {
            k.unpack_u32(packed, width, out)
        }
        fn delta(k: &BlockKernels, prev: u32, min_delta: u32, buf: &mut [u32]) -> u32 {
            k.delta_u32(prev, min_delta, buf)
        }
        fn scale(k: &BlockKernels, ints: &[u32], d: &Divisor, out: &mut [f32]) {
            k.scale_f32(ints, d, out)
        }
    }

    impl Repr for f64 {
        type Bits = u64;
        const TYPE: FloatType = FloatType::Double;
        const NO_DELTA: u64 = i64::MAX as u64;

        fn from_bits(bits: u64) -> f64 {
            f64::from_bits(bits)
        }
        fn unscaled(bits: u64) -> f64 {
            bits as i64 as f64
        }
        fn to_i64(bits: u64) -> i64 {
            bits as i64
        }
        fn from_i64(x: i64) -> u64 {
            x as u64
        }
        fn from_be(bytes: &[u8]) -> u64 {
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            u64::from_be_bytes(b)
        }
        fn put_be(bits: u64, out: &mut Vec<u8>) {
            out.extend_from_slice(&bits.to_be_bytes());
        }
        // As for f32: the comparisons must be false for NaN.
        #[allow(clippy::manual_range_contains)]
        fn classify(self, p: f64) -> (Stored, u64) {
            // (double) Long.MAX_VALUE and Long.MIN_VALUE are exactly +-2^63.
            const LIMIT: f64 = 9_223_372_036_854_775_808.0;
            let x = self * p;
            if x > LIMIT || x < -LIMIT {
                if self > LIMIT || self < -LIMIT {
                    (Stored::Raw, self.to_bits())
                } else {
                    (Stored::Rounded, java_round(self) as u64)
                }
            } else if self.is_nan() {
                (Stored::Raw, 0x7ff8_0000_0000_0000)
            } else {
                // x == 2^63 passes the test above and saturates to Long.MAX_VALUE.
                (Stored::Scaled, java_round(x) as u64)
            }
        }

        fn unpack(k: &BlockKernels, packed: &[u8], width: u32, out: &mut [u64]) {
            k.unpack_u64(packed, width, out)
        }
        fn delta(k: &BlockKernels, prev: u64, min_delta: u64, buf: &mut [u64]) -> u64 {
            k.delta_u64(prev, min_delta, buf)
        }
        fn scale(k: &BlockKernels, ints: &[u64], d: &Divisor, out: &mut [f64]) {
            k.scale_f64(ints, d, out)
        }
    }
}

/// Java's `Math.round(double)`: the exact `floor(x + 1/2)` (ties towards
/// +infinity), saturating to the i64 range, NaN to 0.
///
/// Not `(x + 0.5).floor()`: that addition rounds, which turns
/// 0.49999999999999994 into 1 and odd integers above 2^52 into their
/// successors. Instead: `|x| >= 2^52` is already an integer; below that,
/// `floor(x)` comes from the truncating conversion, and `x - floor(x)` is
/// exact (Sterbenz for `|x| >= 1`, trivially below), so comparing it with 1/2
/// decides exactly. No `f64::floor`, which is a libm call on baseline x86-64.
pub fn java_round(x: f64) -> i64 {
    const INTEGRAL: f64 = 4_503_599_627_370_496.0; // 2^52
    if x.is_nan() || x.abs() >= INTEGRAL {
        // An integer, an infinity or NaN: `as` saturates and maps NaN to 0,
        // as Java does.
        return x as i64;
    }
    let t = x as i64; // towards zero
    let floor = t - i64::from(t as f64 > x);
    // Branch-free: for data with few decimals the fractional part of a
    // scaled value sits just above 0 or just below 1, which no branch
    // predictor guesses.
    floor + i64::from(x - floor as f64 >= 0.5)
}

/// `maxPointValue` for a maxPointNumber: `10^mpn` as Java's `Math.pow(10, mpn)`,
/// and 1 for `mpn <= 0`.
///
/// Powers up to 10^22 are exact doubles (and exact in Java, whose `Math.pow`
/// must return an exactly representable result). Above that this returns the
/// correctly rounded value (what `1e23` etc. parse to); overflow gives +inf,
/// as in Java.
pub fn max_point_value(mpn: i32) -> f64 {
    const EXACT: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    match usize::try_from(mpn) {
        Err(_) => 1.0,
        Ok(m) if m < EXACT.len() => EXACT[m],
        Ok(_) if mpn > 400 => f64::INFINITY,
        Ok(_) => format!("1e{mpn}").parse().unwrap_or(f64::INFINITY),
    }
}

/// Decodes a whole page into a new vector with [`Decoder::new`]'s settings.
pub fn decode<T: PageFloat>(page: &[u8]) -> Result<Vec<T>, Ts2diffError> {
    Decoder::new().decode(page)
}

/// Encodes `values` as one page with Java's defaults ([`Encoder::new`]).
pub fn encode<T: PageFloat>(values: &[T]) -> Result<Vec<u8>, Ts2diffError> {
    Encoder::new().encode(values)
}

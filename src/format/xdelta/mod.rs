//! XDelta: lists of numbers (with nulls) as short plain-text strings.
//!
//! The format (spec: `shared/spec/xdelta.md`) is a header of parameters and a
//! comma-separated list of values:
//!
//! ```text
//! v1,d1,/10,+50:0,1,2,-1,-3,2      ->  50, 50.1, 50.3, 50.2, 49.9, 50.1
//! v1,br,d1:nn3,0,1n4,n,1n5         ->  null x3, 0, 1, 2, 3, 4, null, 5 .. 9
//! d,b0:1,,n2,1,n2,,,-1,n3,,        ->  (v0) 1, 1, 1, 1, 2, 3, 4, 4, 4, 3, 2, 1, 0, 0, 0
//! ```
//!
//! * [`decode()`] / [`Decoder`]: a hand-written one-pass parser for the v1
//!   grammar and the v0 grammar (no version prefix), producing `f64` values and
//!   an Arrow-layout validity bitmap ([`Decoded`]), or filling a caller's
//!   reusable buffers ([`Decoder::decode_into`]).
//! * [`encode()`] / [`Encoder`]: tries delta orders, blank modes, a scalar from
//!   an optional decimal precision, and offsets, and emits the shortest string
//!   that decodes back to exactly the same bits.
//!
//! # Decoding, step by step
//!
//! 1. **Blank resolution and expansion** (one pass over the text). Each literal
//!    is parsed to the nearest `f64` (std's correctly rounded parser, after this
//!    module has checked the grammar). Non-null values are written densely;
//!    nulls only touch the validity bitmap. Nulls never enter the delta state:
//!    integration runs over the non-null values only, which is how "nulls carry
//!    delta state across them" is implemented. Two things keep this pass fast:
//!    the commas are located 64 bytes at a time before the values between them
//!    are parsed (so one value's parse does not wait for the previous one's),
//!    and a short integer literal is read with one 8-byte load and three
//!    multiplications (SWAR) instead of a loop over its digits. Nothing is
//!    allocated per value.
//! 2. **Delta** (`d1`: one prefix sum; `d2`: the first value static, the second
//!    a delta from it, then deltas of deltas).
//! 3. **Scalar** (`*s` multiplies, `/s` divides), then **offset** (`+o`, `-o`),
//!    each one IEEE-754 rounding, never fused, absent steps skipped.
//!
//! ## Two arithmetic paths
//!
//! When every value literal (and the blank value, where it is used) is an
//! integer that fits in `i64`, and the literals' magnitudes add up to at
//! most 2^53 (for `d2`, times the number of values), integration runs in
//! `i64` arithmetic through the SIMD kernels of [`crate::kernels::integrate`],
//! and the integers are converted to `f64` just before the scalar/offset
//! step, in the same pass over memory. Every running sum is then an integer
//! a double holds exactly, so this gives exactly the bits of the spec's
//! double arithmetic. Past that bound the doubles round at each step, and
//! the decoder takes the double path as the spec does. `1e3`, `1.5e1` and
//! `2.0` count as integers; `-0` does not (it would lose its sign).
//!
//! Otherwise integration runs in `f64`, strictly left to right. This loop is
//! deliberately not vectorised: floating-point addition is not associative,
//! so a SIMD scan would round differently from the reference decoders. The
//! elementwise scalar/offset pass is vectorised in both paths.
//!
//! # Choices where the spec is silent
//!
//! * **A `br` blank right after a null** repeats the previous *item*, which is
//!   the null: `v1:n,` is two nulls. Blanks resolve to "the previous encoded
//!   item after blank resolution"; a null is an item. (The alternative, the
//!   last non-null value, would make `v1:n,` undecodable.) The same holds for
//!   `nY` blank runs under `br`, and for v0's `nY`.
//! * **v0 without a delta parameter applies no delta** (as the shared test
//!   vectors expect); v1 defaults to `d1`. Both default to `br`.
//! * **v0 needs at least one parameter**, has no nulls, no `bn`, no `XnY`, and
//!   its `nY` repeats the previous item `Y` times, as its grammar says.
//! * **Repeat counts must be at least 1** (`1n0`, `n0` and `nn0` are errors);
//!   the grammar's `pos_integer` admits `0`, but a run of zero values is never
//!   what an encoder meant. Counts take no leading zeros.
//! * **Only `v1` carries a version.** `v0,...` is an unknown version: v0
//!   strings are the ones without a prefix. Any other version is rejected.
//! * **`/` by a number that parses to zero** (`/0`, `/0.0`, `/-0`, `/1e-400`)
//!   is the invalid `/0`. A literal beyond the double range parses to an
//!   infinity, as IEEE-754 rounding says; arithmetic then follows IEEE-754.
//! * **Expansion limit**: a string may not expand beyond
//!   [`Decoder::max_values`] values, by default
//!   `max(2^20, 1024 * input length)`: a 20-byte string decodes at most ~1M
//!   values (8 MiB), and `0n99999999999` is refused before anything is
//!   allocated for it.
//! * **The value slot of a null is `0.0`**; read nulls from the bitmap.
//!
//! # Errors
//!
//! Every [`XdeltaError`] raised while decoding carries the byte offset of the
//! problem and what was expected there. Whitespace anywhere is
//! [`XdeltaError::Whitespace`].

mod decimal;
mod decode;
mod encode;
mod header;
mod number;
mod values;

use std::fmt;

use crate::kernels::BackendError;

pub use decode::{decode, Decoded, Decoder, Summary};
pub use encode::{encode, Encoder, MAX_PRECISION};
pub use header::{Blank, Delta, Header, Version};

/// Which kind of parameter a [`XdeltaError::RepeatedParameter`] repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parameter {
    /// `d0`, `d1`, `d2` (v0: `d`, `dd`).
    Delta,
    /// `br`, `bn`, `b<number>`.
    Blank,
    /// `*<number>`, `/<number>`.
    Scalar,
    /// `+<number>`, `-<number>`.
    Offset,
}

impl fmt::Display for Parameter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Parameter::Delta => "delta (d)",
            Parameter::Blank => "blank (b)",
            Parameter::Scalar => "scalar (* or /)",
            Parameter::Offset => "offset (+ or -)",
        })
    }
}

/// What stood where something else was expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// This byte.
    Byte(u8),
    /// The input ended.
    End,
}

impl Found {
    fn at(bytes: &[u8], offset: usize) -> Found {
        bytes.get(offset).map_or(Found::End, |&b| Found::Byte(b))
    }
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Found::Byte(b) if b.is_ascii_graphic() => write!(f, "'{}'", b as char),
            Found::Byte(b) => write!(f, "byte {b:#04x}"),
            Found::End => f.write_str("the end of the input"),
        }
    }
}

/// Why an XDelta string could not be decoded, or values could not be encoded.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum XdeltaError {
    /// Whitespace, which the format never contains.
    #[error("xdelta: whitespace at byte {offset} (the format has none)")]
    Whitespace {
        /// Byte offset of the whitespace.
        offset: usize,
    },
    /// The grammar was broken outside a number or a count.
    #[error("xdelta: expected {expected} at byte {offset}, found {found}")]
    Syntax {
        /// Byte offset of what was found.
        offset: usize,
        /// What the grammar allows there, in words.
        expected: &'static str,
        /// What stood there instead.
        found: Found,
    },
    /// A malformed number literal (`01`, `.5`, `1.`, `1e`, `-`).
    #[error("xdelta: bad number at byte {offset}: expected {expected}, found {found}")]
    BadNumber {
        /// Byte offset of the first byte that breaks the literal.
        offset: usize,
        /// What the number grammar allows there, in words.
        expected: &'static str,
        /// What stood there instead.
        found: Found,
    },
    /// A repeat count that is not an integer of at least 1 without leading zeros.
    #[error("xdelta: bad repeat count at byte {offset}: expected {expected}, found {found}")]
    BadCount {
        /// Byte offset of the first byte that breaks the count.
        offset: usize,
        /// What a count allows there, in words.
        expected: &'static str,
        /// What stood there instead.
        found: Found,
    },
    /// A version other than `v1` (v0 strings have no version prefix).
    #[error("xdelta: unknown version v{version} at byte {offset} (expected v1, or a v0 string without a version)")]
    UnknownVersion {
        /// Byte offset of the `v`.
        offset: usize,
        /// The version number written.
        version: u64,
    },
    /// A second parameter of the same kind.
    #[error("xdelta: repeated {parameter} parameter at byte {offset} (expected at most one)")]
    RepeatedParameter {
        /// Byte offset of the second parameter.
        offset: usize,
        /// Its kind.
        parameter: Parameter,
    },
    /// `/0`: a divisor that parses to zero.
    #[error("xdelta: division by zero at byte {offset} (expected a nonzero divisor)")]
    ZeroDivisor {
        /// Byte offset of the `/` parameter.
        offset: usize,
    },
    /// The first value is blank (`,` or `nY`); it must be a number, `n` or `nnY`.
    #[error("xdelta: blank first value at byte {offset} (expected a number, n or nn<count>)")]
    BlankFirst {
        /// Byte offset of the blank.
        offset: usize,
    },
    /// The string expands beyond the decoder's limit
    /// ([`Decoder::max_values`]), checked before anything is allocated for it.
    #[error("xdelta: the run at byte {offset} expands beyond the limit of {limit} values")]
    TooManyValues {
        /// Byte offset of the item or run that crosses the limit.
        offset: usize,
        /// The limit in values.
        limit: usize,
    },
    /// The encoder was given a NaN or an infinity.
    #[error("xdelta: cannot encode value {index} ({value}): expected a finite number or a null")]
    NotFinite {
        /// Index of the value in the encoder's input.
        index: usize,
        /// The value.
        value: f64,
    },
    /// The encoder was given a precision above [`MAX_PRECISION`].
    #[error("xdelta: precision {precision} is above the maximum of {MAX_PRECISION} digits")]
    Precision {
        /// The precision given, in decimal digits.
        precision: u32,
    },
    /// The kernel backend the decoder was asked to use cannot run here.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl XdeltaError {
    /// The byte offset in the input, for decoding errors.
    pub fn offset(&self) -> Option<usize> {
        match *self {
            XdeltaError::Whitespace { offset }
            | XdeltaError::Syntax { offset, .. }
            | XdeltaError::BadNumber { offset, .. }
            | XdeltaError::BadCount { offset, .. }
            | XdeltaError::UnknownVersion { offset, .. }
            | XdeltaError::RepeatedParameter { offset, .. }
            | XdeltaError::ZeroDivisor { offset }
            | XdeltaError::BlankFirst { offset }
            | XdeltaError::TooManyValues { offset, .. } => Some(offset),
            XdeltaError::NotFinite { .. }
            | XdeltaError::Precision { .. }
            | XdeltaError::Backend(_) => None,
        }
    }
}

/// Whether `b` is whitespace (ASCII, including vertical tab).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C)
}

/// Builds the error for `offset`, or [`XdeltaError::Whitespace`] if the byte
/// there is whitespace (whatever was expected, whitespace is the real problem).
fn error_at(bytes: &[u8], offset: usize, make: impl FnOnce(Found) -> XdeltaError) -> XdeltaError {
    match bytes.get(offset) {
        Some(&b) if is_space(b) => XdeltaError::Whitespace { offset },
        _ => make(Found::at(bytes, offset)),
    }
}

/// [`XdeltaError::Syntax`] at `offset` (or whitespace).
fn syntax(bytes: &[u8], offset: usize, expected: &'static str) -> XdeltaError {
    error_at(bytes, offset, |found| XdeltaError::Syntax {
        offset,
        expected,
        found,
    })
}

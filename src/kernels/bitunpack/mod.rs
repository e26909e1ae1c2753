//! Block kernels for TS_2DIFF integer blocks (TsFile's `DeltaBinaryEncoder`).
//!
//! A block stores a first value, a minimum delta and `n` bit-packed
//! non-negative "two-diffs" `td[k] = delta[k] - min_delta`, packed MSB-first at
//! a fixed width of 0..=32 bits (FLOAT pages, u32 words) or 0..=64 bits
//! (DOUBLE pages, u64 words). Decoding a block is three passes over a few
//! hundred words that stay in L1:
//!
//! * [`BlockKernels::unpack_u32`] / [`BlockKernels::unpack_u64`]: bit-unpacking;
//! * [`BlockKernels::delta_u32`] / [`BlockKernels::delta_u64`]: the running sum
//!   `v[k] = v[k-1] + min_delta + td[k]` with wrapping arithmetic;
//! * [`BlockKernels::scale_f32`] / [`BlockKernels::scale_f64`]: integer to
//!   float with Java's rules, `(float) ((double) i / p)` and `(double) i / p`,
//!   bit-exact (the vector backends replace the division by an exact FMA
//!   sequence, see [`Divisor`]).
//!
//! Every backend is the same generic algorithm (`generic.rs`) instantiated per
//! instruction set; `scalar.rs` is the reference the property tests compare
//! them with. Pick the backend once with [`BlockKernels::new`] (which checks the
//! CPU) and call through the table; the free functions are one-shot shorthands.

use std::fmt;

use crate::error::{Error, Result};
use crate::kernels::Backend;

mod generic;
#[cfg(target_arch = "aarch64")]
mod neon;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

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
        /// Zero-extended to 64 bits.
        fn widen(self) -> u64;
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
        fn widen(self) -> u64 {
            u64::from(self)
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
        fn widen(self) -> u64 {
            self
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
/// the result the correctly rounded quotient; see `generic::scale`), several
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

    fn reciprocal(&self) -> f64 {
        self.reciprocal
    }

    fn kind(&self) -> DivisorKind {
        self.kind
    }
}

/// The block kernels of one backend, chosen after checking that the CPU can
/// run it. Cheap to copy; build it once per page (or per process) and call
/// through it in the hot loop.
#[derive(Clone, Copy)]
pub struct BlockKernels {
    backend: Backend,
    table: &'static generic::Table,
}

/// The scalar instantiation, through the same table type as the vector ones.
static SCALAR: generic::Table = generic::Table {
    unpack32: scalar::unpack::<u32>,
    unpack64: scalar::unpack::<u64>,
    delta32: scalar::delta::<u32>,
    delta64: scalar::delta::<u64>,
    scale32: scalar::scale::<u32>,
    scale64: scalar::scale::<u64>,
};

impl fmt::Debug for BlockKernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockKernels")
            .field("backend", &self.backend)
            .finish()
    }
}

impl BlockKernels {
    /// The kernels of `backend`, or [`Error::BackendUnavailable`] if this CPU
    /// cannot run it.
    pub fn new(backend: Backend) -> Result<BlockKernels> {
        let table: &'static generic::Table = match backend.require()? {
            Backend::Scalar => &SCALAR,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => &x86::avx2::TABLE,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => &x86::avx512::TABLE,
            #[cfg(target_arch = "aarch64")]
            Backend::Neon => &neon::wrappers::TABLE,
            #[allow(unreachable_patterns)]
            other => return Err(Error::BackendUnavailable(other)),
        };
        Ok(BlockKernels { backend, table })
    }

    /// The kernels of [`Backend::active`].
    pub fn active() -> Result<BlockKernels> {
        BlockKernels::new(Backend::active()?)
    }

    /// The backend these kernels run on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Unpacks `out.len()` values of `width` bits (0..=32), MSB-first, from
    /// `packed`, which must hold at least `ceil(out.len() * width / 8)` bytes.
    /// Bytes after those are ignored (pad bits included) but let the vector
    /// backends use wide loads to the very end, so pass them when you have them.
    pub fn unpack_u32(&self, packed: &[u8], width: u32, out: &mut [u32]) -> Result<()> {
        check_unpack(packed, width, 32, out.len())?;
        // SAFETY: `new` checked that the CPU runs this table's backend, and
        // `check_unpack` the width and the packed length (the table contract).
        unsafe { (self.table.unpack32)(packed, width, out) };
        Ok(())
    }

    /// [`BlockKernels::unpack_u32`] for u64 words: widths 0..=64.
    pub fn unpack_u64(&self, packed: &[u8], width: u32, out: &mut [u64]) -> Result<()> {
        check_unpack(packed, width, 64, out.len())?;
        // SAFETY: as in `unpack_u32`.
        unsafe { (self.table.unpack64)(packed, width, out) };
        Ok(())
    }

    /// Replaces each `buf[k]` by `prev + min_delta + buf[k]`, where `prev` is
    /// the previous (already replaced) element or, for `k = 0`, the argument;
    /// wrapping. Returns the last value (`prev` when `buf` is empty), the
    /// `prev` of the next chunk of the same block.
    pub fn delta_u32(&self, prev: u32, min_delta: u32, buf: &mut [u32]) -> u32 {
        // SAFETY: `new` checked the CPU; the function has no other precondition.
        unsafe { (self.table.delta32)(prev, min_delta, buf) }
    }

    /// [`BlockKernels::delta_u32`] for u64 words.
    pub fn delta_u64(&self, prev: u64, min_delta: u64, buf: &mut [u64]) -> u64 {
        // SAFETY: `new` checked the CPU; the function has no other precondition.
        unsafe { (self.table.delta64)(prev, min_delta, buf) }
    }

    /// `out[k] = (float) ((double) (i32) ints[k] / divisor)`, as Java's TsFile
    /// `FloatDecoder` computes it. `out` must have the length of `ints`.
    pub fn scale_f32(&self, ints: &[u32], divisor: &Divisor, out: &mut [f32]) -> Result<()> {
        check_lengths(ints.len(), out.len())?;
        // SAFETY: `new` checked the CPU, and the lengths are equal.
        unsafe { (self.table.scale32)(ints, divisor, out) };
        Ok(())
    }

    /// `out[k] = (double) (i64) ints[k] / divisor`, as Java computes it. `out`
    /// must have the length of `ints`.
    pub fn scale_f64(&self, ints: &[u64], divisor: &Divisor, out: &mut [f64]) -> Result<()> {
        check_lengths(ints.len(), out.len())?;
        // SAFETY: `new` checked the CPU, and the lengths are equal.
        unsafe { (self.table.scale64)(ints, divisor, out) };
        Ok(())
    }
}

fn check_unpack(packed: &[u8], width: u32, max_width: u32, n: usize) -> Result<()> {
    if width > max_width {
        return Err(Error::Input(format!(
            "bit width {width} exceeds {max_width}"
        )));
    }
    let need = (n as u128 * u128::from(width)).div_ceil(8);
    if (packed.len() as u128) < need {
        return Err(Error::Input(format!(
            "{n} values of {width} bits need {need} packed bytes, got {}",
            packed.len()
        )));
    }
    Ok(())
}

fn check_lengths(ints: usize, out: usize) -> Result<()> {
    if ints != out {
        return Err(Error::OutputLength {
            what: "scaled values",
            expected: ints,
            got: out,
        });
    }
    Ok(())
}

/// One-shot [`BlockKernels::unpack_u32`] on `backend`.
pub fn unpack_u32(backend: Backend, packed: &[u8], width: u32, out: &mut [u32]) -> Result<()> {
    BlockKernels::new(backend)?.unpack_u32(packed, width, out)
}

/// One-shot [`BlockKernels::unpack_u64`] on `backend`.
pub fn unpack_u64(backend: Backend, packed: &[u8], width: u32, out: &mut [u64]) -> Result<()> {
    BlockKernels::new(backend)?.unpack_u64(packed, width, out)
}

/// One-shot [`BlockKernels::delta_u32`] on `backend`.
pub fn delta_u32(backend: Backend, prev: u32, min_delta: u32, buf: &mut [u32]) -> Result<u32> {
    Ok(BlockKernels::new(backend)?.delta_u32(prev, min_delta, buf))
}

/// One-shot [`BlockKernels::delta_u64`] on `backend`.
pub fn delta_u64(backend: Backend, prev: u64, min_delta: u64, buf: &mut [u64]) -> Result<u64> {
    Ok(BlockKernels::new(backend)?.delta_u64(prev, min_delta, buf))
}

/// One-shot [`BlockKernels::scale_f32`] on `backend`.
pub fn scale_f32(backend: Backend, ints: &[u32], divisor: &Divisor, out: &mut [f32]) -> Result<()> {
    BlockKernels::new(backend)?.scale_f32(ints, divisor, out)
}

/// One-shot [`BlockKernels::scale_f64`] on `backend`.
pub fn scale_f64(backend: Backend, ints: &[u64], divisor: &Divisor, out: &mut [f64]) -> Result<()> {
    BlockKernels::new(backend)?.scale_f64(ints, divisor, out)
}

//! Compute kernels: slices in, slices out.
//!
//! Nothing in here knows about files, tiles or zstd. Three families:
//!
//! * [`tile`]: byte planes -> counts and gene indices, with the strict
//!   reader's checks folded in, and the writer's inverse (the deltacells tile
//!   codec);
//! * [`block`]: TS_2DIFF integer blocks: MSB-first bit unpacking, the delta
//!   running sum and Java's integer-to-float scaling;
//! * [`integrate`]: XDelta's checked `i64` prefix sums fused with the
//!   integer-to-float conversion and scale/offset map.
//!
//! # One vocabulary
//!
//! Every family has a scalar reference in [`mod@reference`]: plain, obviously
//! correct code that defines "correct", errors included. Every vector kernel
//! is written once, generically, over the `vector::Vector` trait: one set of
//! register operations (`u32`, `u64`/`i64` and `f64` lanes, byte planes) that
//! each instruction set (AVX2, AVX-512 with and without VBMI, NEON) implements
//! with intrinsics and nothing else. A value of an ISA's type is a token: it
//! exists only on a CPU that runs the ISA, which is the whole safety argument
//! of its register operations.
//!
//! # One dispatch idiom
//!
//! Each family is a table of safe `fn` pointers ([`TileKernels`],
//! [`block::BlockKernels`], [`integrate::IntegrateKernels`]), instantiated once
//! per ISA and chosen once through [`KernelTable`]: by [`Isa`] (a checked
//! instruction-set level), by [`Backend`], or for the process
//! ([`KernelTable::active`]: `DELTACELLS_KERNEL` if set, else the best the CPU
//! runs). Calling a kernel needs no `unsafe`. Forcing a backend the CPU lacks is
//! an error ([`Error::BackendUnavailable`]), never a silent fallback.
//!
//! # One rule for misuse
//!
//! Faults in the *data* are values: [`Fault`] for a tile rule broken,
//! [`integrate::Overflow`] for a sum leaving `i64`. Calling a kernel against its
//! documented contract (slices whose lengths disagree, a bit width beyond the
//! word, too few packed bytes) is a bug in the caller: it panics with the
//! contract's wording before touching memory, on every backend alike.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use crate::error::{Error, Result};

pub mod block;
mod dispatch;
pub mod integrate;
pub mod reference;
pub mod tile;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod vector;

pub use dispatch::{Isa, KernelTable};
pub use tile::{CellBounds, Count, DecodedCount, Fault, Planes, TileKernels};

/// An instruction-set backend for the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// Portable reference code; always available.
    Scalar,
    /// x86-64 with AVX2 (and BMI2/FMA/LZCNT as in the x86-64-v3 level).
    Avx2,
    /// x86-64 with AVX-512 F/BW/VL/DQ (x86-64-v4); VBMI is used when present.
    Avx512,
    /// AArch64 Advanced SIMD.
    Neon,
}

/// Environment variable that forces the process-wide backend.
pub const KERNEL_ENV: &str = "DELTACELLS_KERNEL";

impl Backend {
    /// Every backend, in increasing order of preference on its architecture.
    pub const ALL: [Backend; 4] = [
        Backend::Scalar,
        Backend::Avx2,
        Backend::Avx512,
        Backend::Neon,
    ];

    /// The lower-case name used by `DELTACELLS_KERNEL` and `--kernel`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Scalar => "scalar",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
            Backend::Neon => "neon",
        }
    }

    /// Whether this CPU can run the backend (runtime detection, cached by std).
    pub fn is_available(self) -> bool {
        match self {
            Backend::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("bmi2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && Backend::Avx2.is_available()
            }
            #[cfg(target_arch = "aarch64")]
            Backend::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// Every backend this CPU can run, scalar first.
    pub fn available() -> Vec<Backend> {
        Backend::ALL
            .into_iter()
            .filter(|b| b.is_available())
            .collect()
    }

    /// The best backend this CPU can run.
    pub fn detect() -> Backend {
        [Backend::Avx512, Backend::Avx2, Backend::Neon]
            .into_iter()
            .find(|b| b.is_available())
            .unwrap_or(Backend::Scalar)
    }

    /// `Ok(self)` if the CPU can run it, else [`Error::BackendUnavailable`].
    pub fn require(self) -> Result<Backend> {
        if self.is_available() {
            Ok(self)
        } else {
            Err(Error::BackendUnavailable(self))
        }
    }

    /// The process-wide backend: `DELTACELLS_KERNEL` if set (it must name an
    /// available backend), else [`Backend::detect`]. Decided once and cached.
    pub fn active() -> Result<Backend> {
        static ACTIVE: OnceLock<std::result::Result<Backend, String>> = OnceLock::new();
        ACTIVE
            .get_or_init(|| match std::env::var(KERNEL_ENV) {
                Ok(name) if !name.is_empty() => name
                    .parse::<Backend>()
                    .and_then(Backend::require)
                    .map_err(|e| format!("{KERNEL_ENV}={name}: {e}")),
                _ => Ok(Backend::detect()),
            })
            .clone()
            .map_err(Error::Config)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = Error;

    fn from_str(s: &str) -> Result<Backend> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| Error::UnknownBackend(s.to_string()))
    }
}

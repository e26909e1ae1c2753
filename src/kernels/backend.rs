//! The instruction-set backends, how one is chosen, and why one cannot be.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// An instruction-set backend for the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// Portable reference code; always available.
    Scalar,
    /// x86-64 with AVX2 (and BMI2/FMA/LZCNT/POPCNT as in the x86-64-v3 level).
    Avx2,
    /// x86-64 with AVX-512 F/BW/VL/DQ/CD (x86-64-v4, and conflict detection,
    /// which every AVX-512 core has); VBMI is used when present.
    Avx512,
    /// AArch64 Advanced SIMD.
    Neon,
}

/// Environment variable that forces the process-wide backend.
pub const KERNEL_ENV: &str = "DELTACELLS_KERNEL";

/// Why a backend cannot be used: a forced backend is an error, never a
/// silent fallback to another.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// A kernel backend was forced that this CPU cannot run.
    #[error("kernel backend `{0}` is not available on this CPU")]
    Unavailable(Backend),
    /// A backend name that is not one of scalar, avx2, avx512, neon.
    #[error("unknown kernel backend `{0}` (expected scalar, avx2, avx512 or neon)")]
    Unknown(String),
    /// [`KERNEL_ENV`] names a backend that is unknown or that this CPU cannot run.
    #[error("{}={value}: {reason}", KERNEL_ENV)]
    Env {
        /// The variable's value.
        value: String,
        /// Why that value cannot be used.
        reason: Box<BackendError>,
    },
}

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
                    && std::arch::is_x86_feature_detected!("popcnt")
            }
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512cd")
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

    /// `Ok(self)` if the CPU can run it, else [`BackendError::Unavailable`].
    pub fn require(self) -> Result<Backend, BackendError> {
        if self.is_available() {
            Ok(self)
        } else {
            Err(BackendError::Unavailable(self))
        }
    }

    /// The process-wide backend: `DELTACELLS_KERNEL` if set (it must name an
    /// available backend), else [`Backend::detect`]. Decided once and cached.
    pub fn active() -> Result<Backend, BackendError> {
        static ACTIVE: OnceLock<Result<Backend, BackendError>> = OnceLock::new();
        ACTIVE
            .get_or_init(|| match std::env::var(KERNEL_ENV) {
                Ok(name) if !name.is_empty() => name
                    .parse::<Backend>()
                    .and_then(Backend::require)
                    .map_err(|e| BackendError::Env {
                        value: name,
                        reason: Box::new(e),
                    }),
                _ => Ok(Backend::detect()),
            })
            .clone()
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = BackendError;

    fn from_str(s: &str) -> Result<Backend, BackendError> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| BackendError::Unknown(s.to_string()))
    }
}

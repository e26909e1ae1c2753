//! The one dispatch idiom: a table of safe `fn` pointers per family and
//! instruction set, chosen once.
//!
//! A family defines its table type and a macro that fills one table from its
//! generic bodies for a given vector token; [`kernel_tables!`] runs that macro
//! once per ISA of the target architecture and implements [`KernelTable`], so
//! every family is reached the same way. Each vector entry is a
//! `#[target_feature]` function behind a safe trampoline ([`kernel_entry!`]);
//! the tables are private statics, handed out only by
//! [`KernelTable::for_isa`], and an [`Isa`] exists only once the CPU has been
//! checked for it. That is the safety argument of every trampoline, stated
//! once here.

use std::fmt;

use super::{Backend, BackendError};

/// Which table of a backend: the backend plus the optional extensions it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Level {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx512Vbmi,
    #[cfg(target_arch = "aarch64")]
    Neon,
}

impl Level {
    /// The backend this level belongs to.
    pub(crate) const fn backend(self) -> Backend {
        match self {
            Level::Portable => Backend::Scalar,
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => Backend::Avx2,
            #[cfg(target_arch = "x86_64")]
            Level::Avx512 | Level::Avx512Vbmi => Backend::Avx512,
            #[cfg(target_arch = "aarch64")]
            Level::Neon => Backend::Neon,
        }
    }

    /// The level's name, as tests and benches print it.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Level::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Level::Avx512 => "avx512",
            #[cfg(target_arch = "x86_64")]
            Level::Avx512Vbmi => "avx512+vbmi",
            #[cfg(target_arch = "aarch64")]
            Level::Neon => "neon",
        }
    }
}

/// An instruction-set level this CPU runs: a backend, plus the optional
/// extensions its table uses (AVX-512 with or without VBMI).
///
/// Only [`Isa::best_of`] and [`Isa::available`] make one, after checking the
/// CPU, so holding an `Isa` proves the CPU runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Isa(Level);

impl Isa {
    /// The portable reference (every CPU runs it).
    pub const PORTABLE: Isa = Isa(Level::Portable);

    /// The richest level of `backend` this CPU runs, or
    /// [`BackendError::Unavailable`].
    pub fn best_of(backend: Backend) -> Result<Isa, BackendError> {
        Ok(Isa(match backend.require()? {
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => Level::Avx2,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 if std::arch::is_x86_feature_detected!("avx512vbmi") => {
                Level::Avx512Vbmi
            }
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => Level::Avx512,
            #[cfg(target_arch = "aarch64")]
            Backend::Neon => Level::Neon,
            // `require` passes only the scalar backend and this architecture's.
            _ => Level::Portable,
        }))
    }

    /// Every level this CPU runs, portable first, including those that
    /// [`Isa::best_of`] passes over for a richer one (AVX-512 without VBMI on
    /// a CPU that has it), so that tests and benches can cover them all.
    pub fn available() -> Vec<Isa> {
        let mut levels = Vec::new();
        for backend in Backend::available() {
            let Ok(best) = Isa::best_of(backend) else {
                continue;
            };
            #[cfg(target_arch = "x86_64")]
            if best.0 == Level::Avx512Vbmi {
                levels.push(Isa(Level::Avx512));
            }
            levels.push(best);
        }
        levels
    }

    /// The backend this level belongs to.
    pub fn backend(self) -> Backend {
        self.0.backend()
    }

    /// The level's name: `portable`, `avx2`, `avx512`, `avx512+vbmi` or `neon`.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    pub(crate) fn level(self) -> Level {
        self.0
    }

    /// The level a table records as its own. Not a check of the CPU: a table
    /// is only ever handed out (by `for_isa`) for a checked `Isa`.
    pub(crate) const fn compiled_for(level: Level) -> Isa {
        Isa(level)
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A family's table of kernels, one per [`Isa`], reached only through here.
pub trait KernelTable: Sync + Sized + 'static {
    /// The table compiled for `isa`.
    fn for_isa(isa: Isa) -> &'static Self;

    /// The level this table was compiled for.
    fn isa(&self) -> Isa;

    /// The backend this table belongs to.
    fn backend(&self) -> Backend {
        self.isa().backend()
    }

    /// The scalar reference table.
    fn scalar() -> &'static Self {
        Self::for_isa(Isa::PORTABLE)
    }

    /// The richest table of `backend` this CPU runs, or
    /// [`BackendError::Unavailable`].
    fn for_backend(backend: Backend) -> Result<&'static Self, BackendError> {
        Ok(Self::for_isa(Isa::best_of(backend)?))
    }

    /// The table of the process-wide backend ([`Backend::active`]: the one
    /// `DELTACELLS_KERNEL` names, else the best the CPU runs).
    fn active() -> Result<&'static Self, BackendError> {
        Self::for_backend(Backend::active()?)
    }

    /// The table of `backend` when a caller forces one, else
    /// [`KernelTable::active`]: how every codec with a backend setting picks
    /// its kernels.
    fn chosen(backend: Option<Backend>) -> Result<&'static Self, BackendError> {
        match backend {
            Some(b) => Self::for_backend(b),
            None => Self::active(),
        }
    }

    /// Every table this CPU runs ([`Isa::available`]), scalar first.
    fn available() -> Vec<&'static Self> {
        Isa::available().into_iter().map(Self::for_isa).collect()
    }
}

/// One table entry: a `#[target_feature]` function running the generic body
/// `$body` with the ISA token `$token`, behind a safe trampoline (a
/// `#[target_feature]` function cannot coerce to a safe `fn` pointer).
macro_rules! kernel_entry {
    ($features:literal, $token:ty, fn $f:ident($($a:ident: $t:ty),*) $(-> $r:ty)? = $body:path) => {
        fn $f($($a: $t),*) $(-> $r)? {
            #[target_feature(enable = $features)]
            fn inner($($a: $t),*) $(-> $r)? {
                // SAFETY: this function is compiled for the token's features,
                // so it runs only on a CPU that has them.
                $body(unsafe { <$token>::new_unchecked() }, $($a),*)
            }
            // SAFETY: reachable only through its table, which
            // `KernelTable::for_isa` hands out for a checked `Isa` only.
            unsafe { inner($($a),*) }
        }
    };
}
pub(crate) use kernel_entry;

/// Instantiates a family's tables and implements [`KernelTable`] for it.
///
/// `$table!(NAME, Level, "features", Token)` must define a `static NAME:
/// $ty` whose vector entries are [`kernel_entry!`]s for those features and
/// that token; `$scalar` is the family's reference table.
macro_rules! kernel_tables {
    ($ty:ty, $scalar:ident, $table:ident) => {
        #[cfg(target_arch = "x86_64")]
        $table!(
            AVX2,
            Avx2,
            "avx2,bmi2,fma,popcnt",
            $crate::kernels::vector::Avx2
        );
        #[cfg(target_arch = "x86_64")]
        $table!(
            AVX512,
            Avx512,
            "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx2,bmi2,fma,popcnt",
            $crate::kernels::vector::Avx512<false>
        );
        #[cfg(target_arch = "x86_64")]
        $table!(
            AVX512_VBMI,
            Avx512Vbmi,
            "avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx2,bmi2,fma,popcnt,avx512vbmi",
            $crate::kernels::vector::Avx512<true>
        );
        #[cfg(target_arch = "aarch64")]
        $table!(NEON, Neon, "neon", $crate::kernels::vector::Neon);

        impl $crate::kernels::KernelTable for $ty {
            fn for_isa(isa: $crate::kernels::Isa) -> &'static $ty {
                use $crate::kernels::dispatch::Level;
                match isa.level() {
                    Level::Portable => &$scalar,
                    #[cfg(target_arch = "x86_64")]
                    Level::Avx2 => &AVX2,
                    #[cfg(target_arch = "x86_64")]
                    Level::Avx512 => &AVX512,
                    #[cfg(target_arch = "x86_64")]
                    Level::Avx512Vbmi => &AVX512_VBMI,
                    #[cfg(target_arch = "aarch64")]
                    Level::Neon => &NEON,
                }
            }

            fn isa(&self) -> $crate::kernels::Isa {
                self.isa
            }
        }
    };
}
pub(crate) use kernel_tables;

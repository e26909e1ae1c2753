//! The tile kernel contract shared by every backend: the inputs ([`CellBounds`]),
//! the faults a strict reader reports ([`Fault`]), and the table of functions
//! one backend provides ([`TileKernels`]).
//!
//! Every table computes exactly what [`TileKernels::SCALAR`] computes: the same
//! output and the same `Result` for every input (the property tests in
//! `proptests/tile_kernels.rs` check it). When a kernel returns a fault, what it
//! wrote to `out` is unspecified, as it is for the reference.

#[cfg(target_arch = "aarch64")]
use super::aarch64;
use super::scalar::{self, Count};
#[cfg(target_arch = "x86_64")]
use super::x86;
use super::Backend;
use crate::error::{Error, Result};

/// The cells of one chunk as offsets into its nonzeros: cell `c` holds
/// `bounds[c] - bounds[0] .. bounds[c + 1] - bounds[0]`.
///
/// Built only through [`CellBounds::new`], which checks that the bounds are
/// non-decreasing and end exactly at the chunk's nonzero count, so kernels
/// (vector ones included) can rely on every segment lying inside the chunk.
#[derive(Clone, Copy, Debug)]
pub struct CellBounds<'a> {
    bounds: &'a [i64],
}

impl<'a> CellBounds<'a> {
    /// Checks `bounds` (an `indptr` slice, `cells + 1` entries) against a chunk of
    /// `n` nonzeros. `None` if it is empty, decreases, or does not span exactly `n`.
    pub fn new(bounds: &'a [i64], n: usize) -> Option<CellBounds<'a>> {
        let first = *bounds.first()?;
        let last = *bounds.last()?;
        if last.checked_sub(first)? != i64::try_from(n).ok()?
            || bounds.windows(2).any(|w| w[1] < w[0])
        {
            return None;
        }
        Some(CellBounds { bounds })
    }

    /// Number of cells.
    pub fn n_cells(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Number of nonzeros spanned.
    pub fn nnz(&self) -> usize {
        (self.bounds[self.bounds.len() - 1] - self.bounds[0]) as usize
    }

    /// The raw `indptr` slice.
    pub fn raw(&self) -> &'a [i64] {
        self.bounds
    }

    /// `(start, end)` of each cell, relative to the chunk.
    pub fn iter(&self) -> impl Iterator<Item = (usize, usize)> + 'a {
        let base = self.bounds[0];
        self.bounds
            .windows(2)
            .map(move |w| ((w[0] - base) as usize, (w[1] - base) as usize))
    }
}

/// A strict-reader rule broken inside a chunk, at a nonzero position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A stored count of 0.
    ZeroCount { position: u64 },
    /// A gap of 0 that is not a cell's first.
    ZeroGap { position: u64 },
    /// A gene index (the cell's last) not below `n_genes`.
    GeneIndex { position: u64, index: u64 },
    /// An exception at a nonzero whose stored value is not 65535.
    Unmarked { position: u64, stored: u16 },
}

type CountsFn<V> = fn(&[u8], &mut [V]) -> Result<(), Fault>;
type ValueExcFn<V> = fn(&[u8], &[u32], &[u32], &mut [V]) -> Result<(), Fault>;
type GapsFn = fn(&[u8], CellBounds<'_>, u32, &mut [i32]) -> Result<(), Fault>;
type GapExcFn = fn(&[u8], CellBounds<'_>, u32, &[u32], &[u32], &mut [i32]) -> Result<(), Fault>;
type IndicesToGapsFn = fn(&[i32], CellBounds<'_>, &mut [u16], &mut Vec<(u32, u32)>);

/// The tile kernels of one backend, as plain function pointers chosen once.
#[derive(Clone, Copy, Debug)]
pub struct TileKernels {
    /// Which backend these are.
    pub backend: Backend,
    /// The instruction-set extensions this table was compiled for (e.g.
    /// `avx512+vbmi`): one backend can have several tables, chosen by detection.
    pub isa: &'static str,
    /// Planes -> `u16`.
    pub recombine_u16: fn(&[u8], &mut [u16]),
    /// Planes -> `i32` counts, refusing zeros.
    pub counts_i32: CountsFn<i32>,
    /// Planes -> `f32` counts, refusing zeros.
    pub counts_f32: CountsFn<f32>,
    /// Per-cell prefix sum of gaps -> `i32` gene indices, with the strict checks.
    pub gaps_to_indices: GapsFn,
    /// `vexc` application to `i32` counts.
    pub value_exceptions_i32: ValueExcFn<i32>,
    /// `vexc` application to `f32` counts.
    pub value_exceptions_f32: ValueExcFn<f32>,
    /// `gexc` application.
    pub gap_exceptions: GapExcFn,
    /// `u16` -> planes.
    pub split_planes: fn(&[u16], &mut [u8]),
    /// Sorted gene indices -> per-cell gaps, collecting gap exceptions.
    pub indices_to_gaps: IndicesToGapsFn,
}

impl TileKernels {
    /// The scalar reference table.
    pub const SCALAR: TileKernels = TileKernels {
        backend: Backend::Scalar,
        isa: "portable",
        recombine_u16: scalar::recombine_u16,
        counts_i32: scalar::counts::<i32>,
        counts_f32: scalar::counts::<f32>,
        gaps_to_indices: scalar::gaps_to_indices,
        value_exceptions_i32: scalar::apply_value_exceptions::<i32>,
        value_exceptions_f32: scalar::apply_value_exceptions::<f32>,
        gap_exceptions: scalar::apply_gap_exceptions,
        split_planes: scalar::split_planes,
        indices_to_gaps: scalar::indices_to_gaps,
    };

    /// The table for `backend`, if this CPU can run it: the one using the most
    /// optional extensions the CPU has (AVX-512 VBMI where present).
    ///
    /// This is the only way to reach a vector table, and it checks the CPU
    /// first: the safety argument of every `#[target_feature]` kernel rests on
    /// it (see `generic::tile_kernels!`).
    pub fn for_backend(backend: Backend) -> Result<&'static TileKernels> {
        match backend.require()? {
            Backend::Scalar => Ok(&TileKernels::SCALAR),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => Ok(&x86::avx2::KERNELS),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 if x86::avx512::has_vbmi() => Ok(&x86::avx512::KERNELS_VBMI),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => Ok(&x86::avx512::KERNELS),
            #[cfg(target_arch = "aarch64")]
            Backend::Neon => Ok(&aarch64::neon::KERNELS),
            other => Err(Error::BackendUnavailable(other)),
        }
    }

    /// Every table this CPU can run, scalar first, including those that
    /// [`TileKernels::for_backend`] passes over for a richer one (AVX-512
    /// without VBMI on a CPU that has it), so tests can cover them all.
    pub fn available() -> Vec<&'static TileKernels> {
        let mut tables = Vec::new();
        for backend in Backend::available() {
            #[cfg(target_arch = "x86_64")]
            if backend == Backend::Avx512 && x86::avx512::has_vbmi() {
                tables.push(&x86::avx512::KERNELS);
            }
            if let Ok(table) = TileKernels::for_backend(backend) {
                tables.push(table);
            }
        }
        tables
    }

    /// The table of the best backend this CPU runs ([`Backend::detect`]), for
    /// callers whose output does not depend on the backend (e.g. the writer).
    pub fn best() -> &'static TileKernels {
        TileKernels::for_backend(Backend::detect()).unwrap_or(&TileKernels::SCALAR)
    }

    /// The table for the process-wide backend ([`Backend::active`]).
    pub fn active() -> Result<&'static TileKernels> {
        TileKernels::for_backend(Backend::active()?)
    }
}

/// A decoded count type with its kernels picked from a table.
pub trait DecodedCount: Count {
    /// This type's count kernel.
    fn counts_kernel(k: &TileKernels) -> CountsFn<Self>;
    /// This type's `vexc` kernel.
    fn value_exceptions_kernel(k: &TileKernels) -> ValueExcFn<Self>;
}

impl DecodedCount for i32 {
    fn counts_kernel(k: &TileKernels) -> CountsFn<i32> {
        k.counts_i32
    }
    fn value_exceptions_kernel(k: &TileKernels) -> ValueExcFn<i32> {
        k.value_exceptions_i32
    }
}

impl DecodedCount for f32 {
    fn counts_kernel(k: &TileKernels) -> CountsFn<f32> {
        k.counts_f32
    }
    fn value_exceptions_kernel(k: &TileKernels) -> ValueExcFn<f32> {
        k.value_exceptions_f32
    }
}

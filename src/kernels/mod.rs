//! Compute kernels: slices in, slices out.
//!
//! Nothing in here knows about files, tiles or zstd. Four families:
//!
//! * [`tile`]: byte planes -> counts and gene indices, with the strict
//!   reader's checks folded in, and the writer's inverse (the deltacells tile
//!   codec);
//! * [`block`]: TS_2DIFF integer blocks: MSB-first bit unpacking, the delta
//!   running sum and Java's integer-to-float scaling;
//! * [`integrate`]: XDelta's checked `i64` prefix sums fused with the
//!   integer-to-float conversion and scale/offset map;
//! * [`rows`]: where each gene of a row lands when a gene mapping puts the
//!   row in a new column order.
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
//! [`block::BlockKernels`], [`integrate::IntegrateKernels`],
//! [`rows::RowKernels`]), instantiated once
//! per ISA and chosen once through [`KernelTable`]: by [`Isa`] (a checked
//! instruction-set level), by [`Backend`], or for the process
//! ([`KernelTable::active`]: `DELTACELLS_KERNEL` if set, else the best the CPU
//! runs). Calling a kernel needs no `unsafe`. Forcing a backend the CPU lacks is
//! an error ([`BackendError::Unavailable`]), never a silent fallback.
//!
//! # One rule for misuse
//!
//! Faults in the *data* are values: [`Fault`] for a tile rule broken,
//! [`integrate::Overflow`] for a sum leaving `i64`. Calling a kernel against its
//! documented contract (slices whose lengths disagree, a bit width beyond the
//! word, too few packed bytes) is a bug in the caller: it panics with the
//! contract's wording before touching memory, on every backend alike.

mod backend;
pub mod block;
mod dispatch;
pub mod integrate;
pub mod reference;
pub mod rows;
pub mod tile;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod vector;

pub use backend::{Backend, BackendError, KERNEL_ENV};
pub use dispatch::{Isa, KernelTable};
pub(crate) use tile::GapSpan;
pub use tile::{
    CellBounds, Count, CountSpan, DecodedCount, Exceptions, Fault, Planes, SpanFault, Stores,
    TileKernels,
};

//! # deltacells
//!
//! Storage engine and decoder for huge single-cell RNA-seq count matrices.
//!
//! A dataset is a set of *tiles*, each holding consecutive cells in CSR form:
//! delta-coded gene gaps and counts as `u16` byte planes in zstd frames, with
//! the rare value above 65535 listed as an exception. The layers, bottom up:
//!
//! * [`kernels`]: byte-plane recombination, prefix sums, exception application,
//!   as a scalar reference and runtime-dispatched SIMD backends.
//! * [`format`](mod@format): bytes to structures and back: [`format::tile::TileView`],
//!   [`format::tile_writer::TileEncoder`], zstd, and the TS_2DIFF and XDelta codecs.
//! * [`engine`]: joins the two: decoding chunks and tiles into caller buffers.
//! * [`storage`]: where bytes live (directories, memory, object storage: `s3://`).
//! * [`dataset`] and [`obs`]: datasets of tiles, the manifest, per-cell metadata.
//! * [`tokenize`]: Geneformer and scGPT tokens, written as rows decode.
//!
//! Beside them, two modules for the tools (the `deltacells` command-line
//! tool, the benches and the tests), each behind a cargo feature of its own
//! that an embedder leaves off: `synth` (feature `synth`) generates realistic
//! count matrices of any size, and `measure` (feature `measure`) reports decode
//! throughput against zstd-only decompression, as `deltacells bench` does.
//!
//! The format is little-endian; this crate refuses to build for big-endian targets.

#![warn(missing_docs)]

#[cfg(target_endian = "big")]
compile_error!(
    "deltacells reads little-endian tiles in place and supports little-endian hosts only"
);

pub mod corpus;
pub mod csr;
pub mod dataset;
pub mod engine;
pub mod error;
pub mod format;
pub mod kernels;
#[cfg(feature = "measure")]
pub mod measure;
pub mod obs;
mod setters;
pub mod storage;
#[cfg(feature = "synth")]
pub mod synth;
mod threads;
pub mod tokenize;

pub use corpus::{Corpus, CorpusSpec};
pub use csr::{Csr, CsrRef};
pub use dataset::{
    Batch, BatchConfig, BatchIter, BatchRows, CsrBatch, Dataset, DatasetWriter, DenseBatch,
    OpenOptions, Read, ReadSource, ReadStats, Shuffle, WriterConfig,
};
pub use engine::{CellSelection, Dense, GeneSelection, Sink, SinkPart};
pub use error::{Error, Result};
pub use format::tile::{TilePosition, TileRule};
pub use kernels::Backend;

/// Opens the dataset at `location` with default options: a directory, or a
/// URL such as `s3://bucket/prefix` (see [`Dataset::open`]).
///
/// ```no_run
/// let ds = deltacells::open("pbmc_dc")?;
/// let rows = ds.read(0..256).csr::<f32>()?;
/// println!("{} cells x {} genes, {} nonzeros read", ds.n_cells(), ds.n_genes(), rows.csr.nnz());
/// # Ok::<(), deltacells::Error>(())
/// ```
pub fn open(location: impl AsRef<std::ffi::OsStr>) -> Result<Dataset> {
    Dataset::open(location)
}

/// Build information recorded by `build.rs`.
pub mod build_info {
    /// The crate version.
    pub const VERSION: &str = env!("CARGO_PKG_VERSION");
    /// Git revision of the source tree, or `unknown` outside a git checkout.
    pub const GIT_REVISION: &str = env!("DELTACELLS_GIT_REVISION");
    /// The compiler that built this crate.
    pub const RUSTC_VERSION: &str = env!("DELTACELLS_RUSTC_VERSION");
}

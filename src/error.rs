//! The crate's one error type.
//!
//! Corrupt input is reported as [`Error::Tile`] with the [`TileRule`] it broke
//! and where ([`Location`]): tests match on the rule, people read the message.

use std::fmt;

use crate::kernels::Backend;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in deltacells.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tile broke a rule of the format.
    #[error("invalid tile: {rule}{at}")]
    Tile { rule: TileRule, at: Location },
    /// Input handed to a writer/encoder that the format cannot represent.
    #[error("invalid input: {0}")]
    Input(String),
    /// The writer's policy refused a tile (the format could hold it, but should not).
    #[error("refused by writer policy: {0}")]
    Policy(String),
    /// A caller-provided output buffer has the wrong length.
    #[error("output buffer `{what}` has length {got}, expected {expected}")]
    OutputLength {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A kernel backend was forced that this CPU cannot run.
    #[error("kernel backend `{0}` is not available on this CPU")]
    BackendUnavailable(Backend),
    /// A backend name that is not one of scalar, avx2, avx512, neon.
    #[error("unknown kernel backend `{0}` (expected scalar, avx2, avx512 or neon)")]
    UnknownBackend(String),
    /// Bad configuration (environment variable, option).
    #[error("configuration: {0}")]
    Config(String),

    /// A thread of the engine panicked (the batch prefetch thread, an I/O
    /// thread running a store): what it was doing, and the panic's own message,
    /// so the cause is not lost behind "the thread stopped".
    #[error("{what} panicked: {message}")]
    Panicked {
        /// What the thread was doing.
        what: String,
        /// The panic's message.
        message: String,
    },
    /// zstd failed while compressing (decompression failures are tile errors).
    #[error("zstd compression failed: {0}")]
    Compress(String),
    /// A dataset broke a rule of the format (manifest, layout, side files).
    #[error("invalid dataset: {0}")]
    Dataset(#[from] DatasetRule),
    /// Something was wrong inside tile `tile` of a dataset.
    #[error("tile {tile}: {source}")]
    InTile { tile: usize, source: Box<Error> },
    /// A TsFile TS_2DIFF page could not be decoded or encoded.
    #[error(transparent)]
    Ts2diff(#[from] crate::format::ts2diff::Ts2diffError),
    /// An XDelta string could not be decoded or encoded.
    #[error(transparent)]
    Xdelta(#[from] crate::format::xdelta::XdeltaError),
    /// An I/O error, with the path or object it concerned.
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl Error {
    /// The error for a caught panic: `what` the thread was doing, and the
    /// payload's message when it has one (`panic!` gives a `&str` or a `String`).
    pub fn panicked(what: impl Into<String>, payload: &(dyn std::any::Any + Send)) -> Error {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Error::Panicked {
            what: what.into(),
            message,
        }
    }

    /// Shorthand for a tile error.
    pub fn tile(rule: TileRule, at: Location) -> Error {
        Error::Tile { rule, at }
    }

    /// The tile rule this error reports, if it is a tile error.
    pub fn tile_rule(&self) -> Option<&TileRule> {
        match self {
            Error::Tile { rule, .. } => Some(rule),
            _ => None,
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// Where in a tile a rule was broken. Every part is optional: header rules
/// have only a byte offset, element rules have a chunk and a nonzero position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// Chunk index within the tile.
    pub chunk: Option<u32>,
    /// Byte offset within the tile object.
    pub offset: Option<u64>,
    /// Nonzero position within the chunk (0-based).
    pub position: Option<u64>,
}

impl Location {
    /// No location (a rule about the whole object).
    pub const NONE: Location = Location {
        chunk: None,
        offset: None,
        position: None,
    };

    /// A byte offset in the tile.
    pub fn offset(offset: u64) -> Location {
        Location {
            offset: Some(offset),
            ..Location::NONE
        }
    }

    /// A chunk.
    pub fn chunk(chunk: usize) -> Location {
        Location {
            chunk: Some(chunk as u32),
            ..Location::NONE
        }
    }

    /// A nonzero within a chunk.
    pub fn position(chunk: usize, position: u64) -> Location {
        Location {
            chunk: Some(chunk as u32),
            position: Some(position),
            offset: None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = " (at ";
        if let Some(c) = self.chunk {
            write!(f, "{sep}chunk {c}")?;
            sep = ", ";
        }
        if let Some(p) = self.position {
            write!(f, "{sep}nonzero {p}")?;
            sep = ", ";
        }
        if let Some(o) = self.offset {
            write!(f, "{sep}byte {o}")?;
            sep = ", ";
        }
        if sep == ", " {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// Which zstd stream of a chunk an error concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// The gene-gap stream.
    Gaps,
    /// The count stream.
    Vals,
    /// The value-exception frame.
    Vexc,
    /// The gap-exception frame.
    Gexc,
}

impl fmt::Display for StreamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamKind::Gaps => "gaps",
            StreamKind::Vals => "vals",
            StreamKind::Vexc => "vexc",
            StreamKind::Gexc => "gexc",
        })
    }
}

/// A rule of the tile format (spec sections "Tile layout" to "Exceptions").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TileRule {
    #[error("object of {0} bytes is shorter than the 64-byte header")]
    TooShort(u64),
    #[error("magic is not DELTACEL")]
    BadMagic,
    #[error("unsupported version {0} (this reader knows version 2)")]
    Version(u32),
    #[error("unknown flags {0:#x} (must be 0)")]
    Flags(u32),
    #[error("reserved header field is {0:#x} (must be 0)")]
    Reserved(u32),
    #[error("total_size {header} differs from the object size {actual}")]
    TotalSize { header: u64, actual: u64 },
    #[error("CRC-32 mismatch: header says {stored:#010x}, bytes give {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("n_genes {0} is outside 1..=2^31")]
    NGenes(u32),
    #[error("chunk table of {n_chunks} entries does not fit in the object")]
    ChunkTableBounds { n_chunks: u32 },
    #[error("{n_chunks} chunks for {n_cells} cells (zero chunks if and only if zero cells)")]
    ChunkCount { n_chunks: u32, n_cells: u64 },
    #[error("indptr_off {0} is not a multiple of 8 or lies inside the header/chunk table")]
    IndptrOffset(u64),
    #[error("indptr of {n_cells} + 1 entries at offset {offset} does not fit in the object")]
    IndptrBounds { offset: u64, n_cells: u64 },
    #[error("indptr[0] is {0}, must be 0")]
    IndptrStart(i64),
    #[error("indptr decreases at cell {cell}")]
    IndptrDecreasing { cell: u64 },
    #[error("indptr[n_cells] is {last}, header nnz is {nnz}")]
    IndptrEnd { last: i64, nnz: u64 },
    #[error("chunk {field} is {got}, expected {expected}")]
    ChunkCoverage {
        field: &'static str,
        got: u64,
        expected: u64,
    },
    #[error("chunk bounds out of order or beyond the tile ({field} = {got})")]
    ChunkBounds { field: &'static str, got: u64 },
    #[error("indptr[{cell}] = {indptr} disagrees with the chunk's {field} = {expected}")]
    ChunkIndptr {
        cell: u64,
        indptr: i64,
        field: &'static str,
        expected: u64,
    },
    #[error("chunk holds {0} nonzeros (must be below 2^32)")]
    ChunkTooLarge(u64),
    #[error("{stream} stream is empty (every chunk has a gaps and a vals frame)")]
    StreamEmpty { stream: StreamKind },
    #[error("{stream} stream offset {offset} is not 8-byte aligned")]
    StreamMisaligned { stream: StreamKind, offset: u64 },
    #[error("{stream} stream [{offset}, +{len}) lies outside the stream area of the object")]
    StreamBounds {
        stream: StreamKind,
        offset: u64,
        len: u64,
    },
    #[error("{stream} stream is not a zstd frame")]
    FrameMagic { stream: StreamKind },
    #[error("{stream} frame has no content size in its header")]
    FrameNoContentSize { stream: StreamKind },
    #[error("{stream} frame declares {declared} bytes, the format requires {expected}")]
    FrameSize {
        stream: StreamKind,
        declared: u64,
        expected: u64,
    },
    #[error("{stream} frame of {compressed} bytes cannot hold {declared} bytes")]
    FrameRatio {
        stream: StreamKind,
        compressed: u64,
        declared: u64,
    },
    #[error("{stream} stream has {extra} bytes after its single frame")]
    FrameTrailing { stream: StreamKind, extra: u64 },
    #[error("{stream} frame is corrupt: {reason}")]
    FrameCorrupt { stream: StreamKind, reason: String },
    #[error("{stream} frame holds {bytes} bytes, not 8 * k with k <= {n}")]
    ExceptionSize {
        stream: StreamKind,
        bytes: u64,
        n: u64,
    },
    #[error("{stream} position {position} is not above the previous one")]
    ExceptionOrder { stream: StreamKind, position: u32 },
    #[error("{stream} position {position} is not below the chunk's {n} nonzeros")]
    ExceptionPosition {
        stream: StreamKind,
        position: u32,
        n: u64,
    },
    #[error("{stream} payload {payload} is out of range")]
    ExceptionPayload { stream: StreamKind, payload: u32 },
    #[error("{stream} exception at a nonzero whose stored value is {stored}, not 65535")]
    ExceptionUnmarked { stream: StreamKind, stored: u16 },
    #[error("stored count is 0 (zeros are never stored)")]
    ZeroCount,
    #[error("gap of 0 after a cell's first nonzero (gene indices must strictly increase)")]
    ZeroGap,
    #[error("gene index {index} is not below n_genes = {n_genes}")]
    GeneIndex { index: u64, n_genes: u32 },
    #[error("tile has n_genes = {tile}, the caller expects {expected}")]
    GenesMismatch { tile: u32, expected: u32 },
}

/// A rule of the dataset layout (spec sections "Dataset layout" and "manifest.json").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DatasetRule {
    #[error("{0} has no manifest.json: the dataset is incomplete (the manifest is written last)")]
    ManifestMissing(String),
    #[error("manifest.json is not valid JSON: {0}")]
    ManifestJson(String),
    #[error("manifest field `{key}`: {problem}")]
    Field { key: &'static str, problem: String },
    #[error("manifest format is {0}, expected \"deltacells-dataset\"")]
    Format(String),
    #[error("manifest version is {0}, this reader knows version 2")]
    Version(String),
    #[error("manifest counts are inconsistent: {0}")]
    Inconsistent(String),
    #[error("tile {tile} is {actual} bytes, the manifest says {manifest}")]
    TileBytes {
        tile: usize,
        manifest: u64,
        actual: u64,
    },
    #[error("tile {tile} is missing ({key})")]
    TileMissing { tile: usize, key: String },
    #[error("tile {tile} disagrees with the manifest: {problem}")]
    TileHeader { tile: usize, problem: String },
    #[error("gene_order.npy: {0}")]
    GeneOrder(String),
    #[error("var_names.txt: {0}")]
    VarNames(String),
    #[error("var.parquet: {0}")]
    VarTable(String),
    #[error("obs: {0}")]
    Obs(String),
}

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
    Tile {
        /// The rule broken.
        rule: TileRule,
        /// Where in the tile it was broken.
        at: Location,
    },
    /// Input handed to a writer/encoder that the format cannot represent.
    #[error("invalid input: {0}")]
    Input(String),
    /// The writer's policy refused a tile (the format could hold it, but should not).
    #[error("refused by writer policy: {0}")]
    Policy(String),
    /// A caller-provided output buffer has the wrong length.
    #[error("output buffer `{what}` has length {got}, expected {expected}")]
    OutputLength {
        /// Which buffer: `indptr`, `indices` or `values`.
        what: &'static str,
        /// The length the decoded data needs.
        expected: usize,
        /// The length the caller passed.
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
    /// Something was wrong inside one tile of a dataset: the tile's error,
    /// tagged with which tile it was (the tile itself does not know its index).
    #[error("tile {tile}: {source}")]
    InTile {
        /// Index of the tile in the dataset.
        tile: usize,
        /// The error the tile gave (usually [`Error::Tile`]).
        source: Box<Error>,
    },
    /// A TsFile TS_2DIFF page could not be decoded or encoded.
    #[error(transparent)]
    Ts2diff(#[from] crate::format::ts2diff::Ts2diffError),
    /// An XDelta string could not be decoded or encoded.
    #[error(transparent)]
    Xdelta(#[from] crate::format::xdelta::XdeltaError),
    /// An I/O error, with the path or object it concerned.
    #[error("{context}: {source}")]
    Io {
        /// What was being done: the path, object key or operation.
        context: String,
        /// The underlying I/O error.
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
///
/// Header and chunk-table rules are checked by
/// [`TileView::parse`](crate::format::tile::TileView::parse) before any
/// byte is decoded; frame, exception and element rules while decoding. Each
/// variant's fields hold the offending values as read from the tile, so a
/// message can show what the file says next to what the rule requires.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TileRule {
    /// The object is shorter than the fixed 64-byte header; holds its length.
    #[error("object of {0} bytes is shorter than the 64-byte header")]
    TooShort(u64),
    /// The first 8 bytes are not `DELTACEL`: not a tile at all.
    #[error("magic is not DELTACEL")]
    BadMagic,
    /// The header's `version` is not 2; holds the version found.
    #[error("unsupported version {0} (this reader knows version 2)")]
    Version(u32),
    /// The header's `flags` is not 0: readers must reject flags they do not
    /// know, and version 2 defines none. Holds the flags found.
    #[error("unknown flags {0:#x} (must be 0)")]
    Flags(u32),
    /// The header's `reserved` word is not 0; holds its value.
    #[error("reserved header field is {0:#x} (must be 0)")]
    Reserved(u32),
    /// The header's `total_size` is not the size of the object: the object
    /// was truncated, extended, or is not the tile the header describes.
    #[error("total_size {header} differs from the object size {actual}")]
    TotalSize {
        /// `total_size` as the header states it.
        header: u64,
        /// The object's real length in bytes.
        actual: u64,
    },
    /// The CRC-32 of bytes `[64, total_size)` is not the header's `crc32`.
    #[error("CRC-32 mismatch: header says {stored:#010x}, bytes give {computed:#010x}")]
    Crc {
        /// The `crc32` the header states.
        stored: u32,
        /// The CRC-32 of the bytes as they are.
        computed: u32,
    },
    /// `n_genes` is 0 or above 2^31 (gene indices are decoded as `i32`);
    /// holds the value found.
    #[error("n_genes {0} is outside 1..=2^31")]
    NGenes(u32),
    /// The chunk table (`n_chunks` entries of 96 bytes after the header)
    /// would run past the end of the object.
    #[error("chunk table of {n_chunks} entries does not fit in the object")]
    ChunkTableBounds {
        /// The header's `n_chunks`.
        n_chunks: u32,
    },
    /// A tile has zero chunks but some cells, or chunks but no cells.
    #[error("{n_chunks} chunks for {n_cells} cells (zero chunks if and only if zero cells)")]
    ChunkCount {
        /// The header's `n_chunks`.
        n_chunks: u32,
        /// The header's `n_cells`.
        n_cells: u64,
    },
    /// `indptr_off` is not a multiple of 8 or points before the end of the
    /// chunk table; holds the offset found.
    #[error("indptr_off {0} is not a multiple of 8 or lies inside the header/chunk table")]
    IndptrOffset(u64),
    /// The `n_cells + 1` indptr entries starting at `indptr_off` run past the
    /// end of the object.
    #[error("indptr of {n_cells} + 1 entries at offset {offset} does not fit in the object")]
    IndptrBounds {
        /// The header's `indptr_off`.
        offset: u64,
        /// The header's `n_cells`.
        n_cells: u64,
    },
    /// `indptr[0]` is not 0; holds its value.
    #[error("indptr[0] is {0}, must be 0")]
    IndptrStart(i64),
    /// The indptr is not non-decreasing: a cell would end before it starts.
    #[error("indptr decreases at cell {cell}")]
    IndptrDecreasing {
        /// The first index `i` with `indptr[i] < indptr[i - 1]`.
        cell: u64,
    },
    /// `indptr[n_cells]` is not the header's `nnz`.
    #[error("indptr[n_cells] is {last}, header nnz is {nnz}")]
    IndptrEnd {
        /// `indptr[n_cells]`.
        last: i64,
        /// The header's `nnz`.
        nnz: u64,
    },
    /// The chunks do not cover the tile contiguously: a chunk does not start
    /// where the previous one ended (the first at 0), or the last does not end
    /// at `n_cells` / `nnz`.
    #[error("chunk {field} is {got}, expected {expected}")]
    ChunkCoverage {
        /// The chunk table field: `cell_lo`, `nnz_lo`, `last cell_hi` or `last nnz_hi`.
        field: &'static str,
        /// Its value in the table.
        got: u64,
        /// The value contiguous coverage requires.
        expected: u64,
    },
    /// A chunk ends before it starts, or beyond the tile's `n_cells` / `nnz`.
    #[error("chunk bounds out of order or beyond the tile ({field} = {got})")]
    ChunkBounds {
        /// The chunk table field: `cell_hi` or `nnz_hi`.
        field: &'static str,
        /// Its value in the table.
        got: u64,
    },
    /// The indptr does not agree with a chunk's bounds: the spec requires
    /// `indptr[cell_lo] = nnz_lo` and `indptr[cell_hi] = nnz_hi`.
    #[error("indptr[{cell}] = {indptr} disagrees with the chunk's {field} = {expected}")]
    ChunkIndptr {
        /// The cell index (the chunk's `cell_lo` or `cell_hi`).
        cell: u64,
        /// `indptr[cell]`.
        indptr: i64,
        /// The chunk table field it must equal: `nnz_lo` or `nnz_hi`.
        field: &'static str,
        /// That field's value.
        expected: u64,
    },
    /// A chunk holds 2^32 nonzeros or more, which exception positions
    /// (`u32`) cannot address; holds the chunk's nonzero count.
    #[error("chunk holds {0} nonzeros (must be below 2^32)")]
    ChunkTooLarge(u64),
    /// A chunk's `gaps` or `vals` stream has length 0: every chunk has both
    /// frames, even a chunk without nonzeros.
    #[error("{stream} stream is empty (every chunk has a gaps and a vals frame)")]
    StreamEmpty {
        /// The empty stream.
        stream: StreamKind,
    },
    /// A stream or exception frame does not start on an 8-byte boundary.
    #[error("{stream} stream offset {offset} is not 8-byte aligned")]
    StreamMisaligned {
        /// The stream or frame.
        stream: StreamKind,
        /// Its offset in the chunk table.
        offset: u64,
    },
    /// A stream or exception frame starts before the end of the indptr or
    /// ends past the end of the object.
    #[error("{stream} stream [{offset}, +{len}) lies outside the stream area of the object")]
    StreamBounds {
        /// The stream or frame.
        stream: StreamKind,
        /// Its offset in the chunk table.
        offset: u64,
        /// Its length in the chunk table.
        len: u64,
    },
    /// A stream or exception frame does not start with the magic of a zstd frame.
    #[error("{stream} stream is not a zstd frame")]
    FrameMagic {
        /// The stream or frame.
        stream: StreamKind,
    },
    /// A frame's header omits its content size, which the format requires
    /// so that a reader can check the size before decompressing.
    #[error("{stream} frame has no content size in its header")]
    FrameNoContentSize {
        /// The stream or frame.
        stream: StreamKind,
    },
    /// A stream's frame declares a content size other than `2 * n` bytes
    /// for its chunk's `n` nonzeros.
    #[error("{stream} frame declares {declared} bytes, the format requires {expected}")]
    FrameSize {
        /// The stream or frame.
        stream: StreamKind,
        /// The content size in the frame header.
        declared: u64,
        /// The size the format requires.
        expected: u64,
    },
    /// A frame is too small to decompress to the size it must have: no zstd
    /// frame expands more than [`MAX_EXPANSION`](crate::format::zstd::MAX_EXPANSION)
    /// times, so the header lies. Refused before anything is allocated for it.
    #[error("{stream} frame of {compressed} bytes cannot hold {declared} bytes")]
    FrameRatio {
        /// The stream or frame.
        stream: StreamKind,
        /// The frame's length in the tile.
        compressed: u64,
        /// The size it declares or must decompress to.
        declared: u64,
    },
    /// A stream holds bytes after its frame: each stream is a single frame.
    #[error("{stream} stream has {extra} bytes after its single frame")]
    FrameTrailing {
        /// The stream or frame.
        stream: StreamKind,
        /// How many bytes follow the frame.
        extra: u64,
    },
    /// zstd refused to decompress a frame.
    #[error("{stream} frame is corrupt: {reason}")]
    FrameCorrupt {
        /// The stream or frame.
        stream: StreamKind,
        /// zstd's own message.
        reason: String,
    },
    /// An exception frame does not decompress to `8 * k` bytes with `k <= n`
    /// (`k` positions and `k` payloads for a chunk of `n` nonzeros).
    #[error("{stream} frame holds {bytes} bytes, not 8 * k with k <= {n}")]
    ExceptionSize {
        /// The exception frame (`vexc` or `gexc`).
        stream: StreamKind,
        /// Its content size, as declared in its header or decompressed.
        bytes: u64,
        /// The chunk's nonzero count.
        n: u64,
    },
    /// Exception positions are not strictly increasing.
    #[error("{stream} position {position} is not above the previous one")]
    ExceptionOrder {
        /// The exception frame.
        stream: StreamKind,
        /// The first position not above its predecessor.
        position: u32,
    },
    /// An exception position is not the index of a nonzero of the chunk.
    #[error("{stream} position {position} is not below the chunk's {n} nonzeros")]
    ExceptionPosition {
        /// The exception frame.
        stream: StreamKind,
        /// The position, not below `n`.
        position: u32,
        /// The chunk's nonzero count.
        n: u64,
    },
    /// An exception payload is out of range: a `vexc` count must be in
    /// `65536 ..= 2^31 - 1` (smaller counts fit in the stream), a `gexc`
    /// excess in `1 ..= n_genes - 1`.
    #[error("{stream} payload {payload} is out of range")]
    ExceptionPayload {
        /// The exception frame.
        stream: StreamKind,
        /// The first payload out of range.
        payload: u32,
    },
    /// An exception names a nonzero whose stored value is not the `65535`
    /// marker that every exception replaces.
    #[error("{stream} exception at a nonzero whose stored value is {stored}, not 65535")]
    ExceptionUnmarked {
        /// The exception frame.
        stream: StreamKind,
        /// The value stored in the stream at that position.
        stored: u16,
    },
    /// A stored count is 0: counts are in `[1, 2^31 - 1]`, zeros are never stored.
    #[error("stored count is 0 (zeros are never stored)")]
    ZeroCount,
    /// A gap after a cell's first nonzero is 0, so two nonzeros of the cell
    /// would have the same gene: gene indices must strictly increase.
    #[error("gap of 0 after a cell's first nonzero (gene indices must strictly increase)")]
    ZeroGap,
    /// A decoded gene index is not below the tile's `n_genes`.
    #[error("gene index {index} is not below n_genes = {n_genes}")]
    GeneIndex {
        /// The gene index decoded.
        index: u64,
        /// The tile's `n_genes`.
        n_genes: u32,
    },
    /// The tile is valid on its own, but its `n_genes` is not what the caller
    /// expected (e.g. a tile that is not part of the dataset it is read with).
    #[error("tile has n_genes = {tile}, the caller expects {expected}")]
    GenesMismatch {
        /// The tile's `n_genes`.
        tile: u32,
        /// The `n_genes` the caller expected.
        expected: u32,
    },
}

/// A rule of the dataset layout (spec sections "Dataset layout" and "manifest.json").
///
/// The `String` fields say what was found, in words: the rules are checked by
/// hand (not by a derived parser) so that each refusal can name the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DatasetRule {
    /// There is no `manifest.json`. The manifest is written last, so this is
    /// a dataset whose writer has not finished (or not a dataset). Holds the
    /// dataset's location.
    #[error("{0} has no manifest.json: the dataset is incomplete (the manifest is written last)")]
    ManifestMissing(String),
    /// `manifest.json` is not valid JSON or not a JSON object; holds the
    /// parser's message.
    #[error("manifest.json is not valid JSON: {0}")]
    ManifestJson(String),
    /// A manifest field is missing or has the wrong type or range.
    #[error("manifest field `{key}`: {problem}")]
    Field {
        /// The manifest key.
        key: &'static str,
        /// What is wrong with it (`missing`, `must be a list`, ...).
        problem: String,
    },
    /// The manifest's `format` is not `"deltacells-dataset"`; holds the value
    /// found, as JSON.
    #[error("manifest format is {0}, expected \"deltacells-dataset\"")]
    Format(String),
    /// The manifest's `version` is not 2; holds the value found, as JSON.
    #[error("manifest version is {0}, this reader knows version 2")]
    Version(String),
    /// Manifest counts disagree with each other (per-tile lists of different
    /// lengths, `tile_cells` not summing to `n_cells`, a tile of fewer bytes
    /// than its cells need, ...); holds which ones and how.
    #[error("manifest counts are inconsistent: {0}")]
    Inconsistent(String),
    /// A tile object's size is not the manifest's `tile_bytes` entry.
    #[error("tile {tile} is {actual} bytes, the manifest says {manifest}")]
    TileBytes {
        /// Index of the tile.
        tile: usize,
        /// Its size in the manifest's `tile_bytes`.
        manifest: u64,
        /// The object's real size.
        actual: u64,
    },
    /// A tile the manifest lists has no object in the store.
    #[error("tile {tile} is missing ({key})")]
    TileMissing {
        /// Index of the tile.
        tile: usize,
        /// The object key it should have (`tiles/tile_NNNNNN.dct`).
        key: String,
    },
    /// A valid tile whose header disagrees with the manifest: its `n_cells`
    /// (vs `tile_cells`), `nnz` (vs `tile_nnz`) or `n_genes`.
    #[error("tile {tile} disagrees with the manifest: {problem}")]
    TileHeader {
        /// Index of the tile.
        tile: usize,
        /// Which count disagrees, with both values.
        problem: String,
    },
    /// `gene_order.npy` is missing although the manifest's `has_gene_order`
    /// says it exists, or is not `n_genes` distinct non-negative `int32`
    /// source columns; holds what is wrong.
    #[error("gene_order.npy: {0}")]
    GeneOrder(String),
    /// `var_names.txt` is missing although `has_var_names` says it exists, is
    /// not UTF-8, or does not hold one line per gene; holds what is wrong.
    #[error("var_names.txt: {0}")]
    VarNames(String),
    /// `var.parquet` is missing although `has_var_table` says it exists, is
    /// not a readable Parquet table, or does not hold one row per gene; holds
    /// what is wrong.
    #[error("var.parquet: {0}")]
    VarTable(String),
    /// The obs sidecar breaks a rule of spec section "Obs": schema, shard
    /// sizes, SHA-256 or fingerprint, row groups per tile, or column types.
    #[error("obs: {0}")]
    Obs(String),
}

//! The rules of the tile format, one variant each, and the streams they name.
//!
//! Tests match on the rule a corrupt tile broke; people read its message, which
//! shows what the file says next to what the rule requires.

use std::fmt;

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

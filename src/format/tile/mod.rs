//! Zero-copy parsing and validation of one tile (spec section "Tile layout").
//!
//! [`TileView::parse`] checks every structural rule of the format before
//! anything else touches the bytes: the header, the CRC, the chunk table's
//! contiguous coverage, the indptr and its agreement with every chunk, and the
//! extents of every stream. Counts are checked against the bytes that exist
//! before any arithmetic that could overflow, so a 100-byte object claiming
//! 2^40 cells is refused in O(1) memory. What needs decompression (frame sizes,
//! exception lists, gene indices) is checked while decoding, by `engine`.
//!
//! Every refusal is a [`TileError`]: the [`TileRule`] broken (tests match on
//! it) and the [`TilePosition`] where, for the message.

use std::borrow::Cow;

use crate::format::zstd::MAX_EXPANSION;

mod error;
mod rules;

pub use error::{TileError, TilePosition};
pub use rules::{StreamKind, TileRule};

/// The 8 magic bytes at the start of every tile.
pub const MAGIC: &[u8; 8] = b"DELTACEL";
/// The format version this crate reads and writes.
pub const VERSION: u32 = 2;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 64;
/// Size of one chunk table entry (12 `u64`).
pub const CHUNK_ENTRY_LEN: usize = 96;
/// Largest `n_genes` (gene indices are `i32`).
pub const MAX_GENES: u32 = 1 << 31;

/// The fixed 64-byte header (spec "Header"), as read: [`Header::read`]
/// checks nothing but the length, [`TileView::parse`] checks every field.
/// The magic is not a field: it is always [`MAGIC`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Format version; [`VERSION`] in a valid tile.
    pub version: u32,
    /// Feature flags; 0 in a valid tile (version 2 defines none, and readers
    /// must reject flags they do not know).
    pub flags: u32,
    /// Number of cells (rows).
    pub n_cells: u64,
    /// Number of stored nonzeros.
    pub nnz: u64,
    /// Number of genes (columns), `1 ..= 2^31`.
    pub n_genes: u32,
    /// Number of chunk table entries; 0 exactly when `n_cells` is 0.
    pub n_chunks: u32,
    /// Byte offset of the indptr: a multiple of 8, at or after the end of
    /// the chunk table.
    pub indptr_off: u64,
    /// Size of the whole tile object in bytes.
    pub total_size: u64,
    /// CRC-32 (zlib / IEEE) of bytes `[64, total_size)`.
    pub crc32: u32,
    /// Reserved; 0 in a valid tile.
    pub reserved: u32,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

impl Header {
    /// Bytes from the start of the tile to the end of the indptr: what a
    /// reader needs before it can find any cell's chunk and frames.
    pub fn head_len(&self) -> u64 {
        self.n_cells
            .saturating_add(1)
            .saturating_mul(8)
            .saturating_add(self.indptr_off)
    }

    /// Reads the header fields (no validation beyond the length).
    pub fn read(b: &[u8]) -> Result<Header, TileError> {
        if b.len() < HEADER_LEN {
            return Err(TileError::new(
                TileRule::TooShort(b.len() as u64),
                TilePosition::NONE,
            ));
        }
        Ok(Header {
            version: u32_at(b, 8),
            flags: u32_at(b, 12),
            n_cells: u64_at(b, 16),
            nnz: u64_at(b, 24),
            n_genes: u32_at(b, 32),
            n_chunks: u32_at(b, 36),
            indptr_off: u64_at(b, 40),
            total_size: u64_at(b, 48),
            crc32: u32_at(b, 56),
            reserved: u32_at(b, 60),
        })
    }

    /// The 64 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.n_cells.to_le_bytes());
        b[24..32].copy_from_slice(&self.nnz.to_le_bytes());
        b[32..36].copy_from_slice(&self.n_genes.to_le_bytes());
        b[36..40].copy_from_slice(&self.n_chunks.to_le_bytes());
        b[40..48].copy_from_slice(&self.indptr_off.to_le_bytes());
        b[48..56].copy_from_slice(&self.total_size.to_le_bytes());
        b[56..60].copy_from_slice(&self.crc32.to_le_bytes());
        b[60..64].copy_from_slice(&self.reserved.to_le_bytes());
        b
    }
}

/// The extent of one compressed stream or exception frame inside the tile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extent {
    /// Byte offset from the start of the tile; a multiple of 8.
    pub offset: u64,
    /// Length in bytes; 0 for an absent exception frame.
    pub len: u64,
}

/// One chunk table entry (spec "Chunk table entry"): the cells
/// `cell_lo..cell_hi` and nonzeros `nnz_lo..nnz_hi` of the tile that the
/// chunk holds, and where its four frames lie.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkEntry {
    /// First cell of the chunk (tile-local).
    pub cell_lo: u64,
    /// One past the chunk's last cell.
    pub cell_hi: u64,
    /// First nonzero of the chunk (`indptr[cell_lo]`).
    pub nnz_lo: u64,
    /// One past the chunk's last nonzero (`indptr[cell_hi]`).
    pub nnz_hi: u64,
    /// The gene-gap stream: a zstd frame of `2 * nnz()` bytes of `u16` planes.
    pub gaps: Extent,
    /// The count stream: a zstd frame of `2 * nnz()` bytes of `u16` planes.
    pub vals: Extent,
    /// `len == 0` when the chunk has no value exceptions.
    pub vexc: Extent,
    /// `len == 0` when the chunk has no gap exceptions.
    pub gexc: Extent,
}

impl ChunkEntry {
    /// Number of nonzeros in the chunk.
    pub fn nnz(&self) -> u64 {
        self.nnz_hi - self.nnz_lo
    }

    /// Number of cells in the chunk.
    pub fn n_cells(&self) -> u64 {
        self.cell_hi - self.cell_lo
    }

    fn read(b: &[u8]) -> ChunkEntry {
        let f = |i: usize| u64_at(b, 8 * i);
        let e = |i: usize| Extent {
            offset: f(i),
            len: f(i + 1),
        };
        ChunkEntry {
            cell_lo: f(0),
            cell_hi: f(1),
            nnz_lo: f(2),
            nnz_hi: f(3),
            gaps: e(4),
            vals: e(6),
            vexc: e(8),
            gexc: e(10),
        }
    }

    /// The 96 bytes of this entry.
    pub fn to_bytes(&self) -> [u8; CHUNK_ENTRY_LEN] {
        let fields = [
            self.cell_lo,
            self.cell_hi,
            self.nnz_lo,
            self.nnz_hi,
            self.gaps.offset,
            self.gaps.len,
            self.vals.offset,
            self.vals.len,
            self.vexc.offset,
            self.vexc.len,
            self.gexc.offset,
            self.gexc.len,
        ];
        let mut b = [0u8; CHUNK_ENTRY_LEN];
        for (dst, v) in b.chunks_exact_mut(8).zip(fields) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// The byte ranges of the chunk's frames (the exception frames only when present).
    pub fn frames(&self) -> impl Iterator<Item = std::ops::Range<u64>> {
        [self.gaps, self.vals, self.vexc, self.gexc]
            .into_iter()
            .filter(|e| e.len > 0)
            .map(|e| e.offset..e.offset.saturating_add(e.len))
    }

    /// The extent of `kind`'s frame (`len == 0` for an absent exception frame).
    pub fn extent(&self, kind: StreamKind) -> Extent {
        match kind {
            StreamKind::Gaps => self.gaps,
            StreamKind::Vals => self.vals,
            StreamKind::Vexc => self.vexc,
            StreamKind::Gexc => self.gexc,
        }
    }
}

/// A validated tile, borrowing its bytes.
#[derive(Clone, Copy, Debug)]
pub struct TileView<'a> {
    bytes: &'a [u8],
    header: Header,
}

impl<'a> TileView<'a> {
    /// Parses and validates a whole tile object (all of `bytes`).
    pub fn parse(bytes: &'a [u8]) -> Result<TileView<'a>, TileError> {
        TileView::parse_with(bytes, true)
    }

    /// Parses a tile of which only some byte ranges were fetched, laid out at
    /// their offsets in a buffer of the tile's full length: the header, chunk
    /// table and indptr (the first [`Header::head_len`] bytes) and the
    /// streams of the chunks to be decoded. Every rule of [`TileView::parse`]
    /// is checked except the CRC, which needs every byte; the streams of the
    /// chunks decoded are still checked by zstd (frame structure, exact
    /// content size) and by the kernels, and only those may be decoded.
    pub fn parse_partial(bytes: &'a [u8]) -> Result<TileView<'a>, TileError> {
        TileView::parse_with(bytes, false)
    }

    fn parse_with(bytes: &'a [u8], whole: bool) -> Result<TileView<'a>, TileError> {
        let h = Header::read(bytes)?;
        let len = bytes.len() as u64;
        let fail = |rule, at| Err(TileError::new(rule, at));
        if &bytes[..8] != MAGIC {
            return fail(TileRule::BadMagic, TilePosition::offset(0));
        }
        if h.version != VERSION {
            return fail(TileRule::Version(h.version), TilePosition::offset(8));
        }
        if h.flags != 0 {
            return fail(TileRule::Flags(h.flags), TilePosition::offset(12));
        }
        if h.reserved != 0 {
            return fail(TileRule::Reserved(h.reserved), TilePosition::offset(60));
        }
        if h.total_size != len {
            return fail(
                TileRule::TotalSize {
                    header: h.total_size,
                    actual: len,
                },
                TilePosition::offset(48),
            );
        }
        let computed = if whole {
            crc32fast::hash(&bytes[HEADER_LEN..])
        } else {
            h.crc32
        };
        if computed != h.crc32 {
            return fail(
                TileRule::Crc {
                    stored: h.crc32,
                    computed,
                },
                TilePosition::offset(56),
            );
        }
        if h.n_genes == 0 || h.n_genes > MAX_GENES {
            return fail(TileRule::NGenes(h.n_genes), TilePosition::offset(32));
        }
        let table_end = HEADER_LEN as u64 + CHUNK_ENTRY_LEN as u64 * u64::from(h.n_chunks);
        if table_end > len {
            return fail(
                TileRule::ChunkTableBounds {
                    n_chunks: h.n_chunks,
                },
                TilePosition::offset(36),
            );
        }
        if (h.n_chunks == 0) != (h.n_cells == 0) {
            return fail(
                TileRule::ChunkCount {
                    n_chunks: h.n_chunks,
                    n_cells: h.n_cells,
                },
                TilePosition::offset(36),
            );
        }
        if !h.indptr_off.is_multiple_of(8) || h.indptr_off < table_end {
            return fail(
                TileRule::IndptrOffset(h.indptr_off),
                TilePosition::offset(40),
            );
        }
        // n_cells + 1 entries of 8 bytes must fit after indptr_off: compare counts,
        // not byte products, so no header value can overflow the arithmetic.
        let room = len.saturating_sub(h.indptr_off) / 8;
        if h.indptr_off > len || h.n_cells >= room {
            return fail(
                TileRule::IndptrBounds {
                    offset: h.indptr_off,
                    n_cells: h.n_cells,
                },
                TilePosition::offset(40),
            );
        }
        let view = TileView { bytes, header: h };
        view.check_indptr()?;
        view.check_chunks()?;
        Ok(view)
    }

    /// A view of bytes that [`TileView::parse`] has already accepted (and that have
    /// not changed since), reading only the header: how a cache of validated tiles
    /// avoids re-checking the CRC for every chunk it decodes. Given other bytes,
    /// later accessors may panic, never misbehave otherwise.
    pub fn revalidated(bytes: &'a [u8]) -> Result<TileView<'a>, TileError> {
        Ok(TileView {
            bytes,
            header: Header::read(bytes)?,
        })
    }

    fn indptr_at(&self, cell: u64) -> i64 {
        let off = (self.header.indptr_off + 8 * cell) as usize;
        i64::from_le_bytes(self.bytes[off..off + 8].try_into().expect("8 bytes"))
    }

    fn check_indptr(&self) -> Result<(), TileError> {
        let h = &self.header;
        let at = |cell: u64| TilePosition::offset(h.indptr_off + 8 * cell);
        let first = self.indptr_at(0);
        if first != 0 {
            return Err(TileError::new(TileRule::IndptrStart(first), at(0)));
        }
        let start = h.indptr_off as usize;
        let raw = &self.bytes[start..start + 8 * (h.n_cells as usize + 1)];
        let mut prev = 0i64;
        for (cell, b) in raw.chunks_exact(8).enumerate() {
            let v = i64::from_le_bytes(b.try_into().expect("8 bytes"));
            if v < prev {
                return Err(TileError::new(
                    TileRule::IndptrDecreasing { cell: cell as u64 },
                    at(cell as u64),
                ));
            }
            prev = v;
        }
        if prev as u64 != h.nnz {
            return Err(TileError::new(
                TileRule::IndptrEnd {
                    last: prev,
                    nnz: h.nnz,
                },
                at(h.n_cells),
            ));
        }
        Ok(())
    }

    fn check_chunks(&self) -> Result<(), TileError> {
        let h = &self.header;
        let len = self.bytes.len() as u64;
        let streams_start = h.indptr_off + 8 * (h.n_cells + 1);
        let (mut cell, mut nz) = (0u64, 0u64);
        for i in 0..h.n_chunks as usize {
            let c = self.chunk(i);
            let at = TilePosition::chunk_offset(i, (HEADER_LEN + i * CHUNK_ENTRY_LEN) as u64);
            let rule = |rule| Err(TileError::new(rule, at));
            if c.cell_lo != cell {
                return rule(TileRule::ChunkCoverage {
                    field: "cell_lo",
                    got: c.cell_lo,
                    expected: cell,
                });
            }
            if c.nnz_lo != nz {
                return rule(TileRule::ChunkCoverage {
                    field: "nnz_lo",
                    got: c.nnz_lo,
                    expected: nz,
                });
            }
            if c.cell_hi < c.cell_lo || c.cell_hi > h.n_cells {
                return rule(TileRule::ChunkBounds {
                    field: "cell_hi",
                    got: c.cell_hi,
                });
            }
            if c.nnz_hi < c.nnz_lo || c.nnz_hi > h.nnz {
                return rule(TileRule::ChunkBounds {
                    field: "nnz_hi",
                    got: c.nnz_hi,
                });
            }
            for (cell_idx, field, want) in [
                (c.cell_lo, "nnz_lo", c.nnz_lo),
                (c.cell_hi, "nnz_hi", c.nnz_hi),
            ] {
                let got = self.indptr_at(cell_idx);
                if got as u64 != want {
                    return rule(TileRule::ChunkIndptr {
                        cell: cell_idx,
                        indptr: got,
                        field,
                        expected: want,
                    });
                }
            }
            let n = c.nnz();
            if n >= 1 << 32 {
                return rule(TileRule::ChunkTooLarge(n));
            }
            for kind in [
                StreamKind::Gaps,
                StreamKind::Vals,
                StreamKind::Vexc,
                StreamKind::Gexc,
            ] {
                let e = c.extent(kind);
                let required = matches!(kind, StreamKind::Gaps | StreamKind::Vals);
                if e.len == 0 {
                    if required {
                        return rule(TileRule::StreamEmpty { stream: kind });
                    }
                    continue;
                }
                if !e.offset.is_multiple_of(8) {
                    return rule(TileRule::StreamMisaligned {
                        stream: kind,
                        offset: e.offset,
                    });
                }
                if e.offset < streams_start
                    || e.offset.checked_add(e.len).is_none_or(|end| end > len)
                {
                    return rule(TileRule::StreamBounds {
                        stream: kind,
                        offset: e.offset,
                        len: e.len,
                    });
                }
                // The frame must be able to expand to what the format requires
                // (2n bytes for a stream, at least 8 for an exception frame), so a
                // caller sizing buffers from `nnz` allocates in proportion to the file.
                let need = if required { 2 * n } else { 8 };
                if need > e.len.saturating_mul(MAX_EXPANSION) {
                    return rule(TileRule::FrameRatio {
                        stream: kind,
                        compressed: e.len,
                        declared: need,
                    });
                }
            }
            cell = c.cell_hi;
            nz = c.nnz_hi;
        }
        let end = TilePosition::offset(
            HEADER_LEN as u64 + CHUNK_ENTRY_LEN as u64 * u64::from(h.n_chunks),
        );
        if cell != h.n_cells {
            return Err(TileError::new(
                TileRule::ChunkCoverage {
                    field: "last cell_hi",
                    got: cell,
                    expected: h.n_cells,
                },
                end,
            ));
        }
        if nz != h.nnz {
            return Err(TileError::new(
                TileRule::ChunkCoverage {
                    field: "last nnz_hi",
                    got: nz,
                    expected: h.nnz,
                },
                end,
            ));
        }
        Ok(())
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The whole tile object.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Number of cells.
    pub fn n_cells(&self) -> usize {
        self.header.n_cells as usize
    }

    /// Number of stored nonzeros.
    pub fn nnz(&self) -> usize {
        self.header.nnz as usize
    }

    /// Number of genes (columns).
    pub fn n_genes(&self) -> u32 {
        self.header.n_genes
    }

    /// Number of chunks.
    pub fn n_chunks(&self) -> usize {
        self.header.n_chunks as usize
    }

    /// Chunk table entry `i` (`i < n_chunks`; panics otherwise).
    pub fn chunk(&self, i: usize) -> ChunkEntry {
        assert!(i < self.n_chunks(), "chunk {i} out of range");
        let off = HEADER_LEN + i * CHUNK_ENTRY_LEN;
        ChunkEntry::read(&self.bytes[off..off + CHUNK_ENTRY_LEN])
    }

    /// All chunk table entries.
    pub fn chunks(&self) -> impl Iterator<Item = ChunkEntry> + '_ {
        (0..self.n_chunks()).map(|i| self.chunk(i))
    }

    /// The raw bytes of `extent`: validated to lie inside the tile, or empty for
    /// an absent exception frame (length 0, whose offset the format ignores).
    pub fn extent_bytes(&self, e: Extent) -> &'a [u8] {
        if e.len == 0 {
            return &[];
        }
        &self.bytes[e.offset as usize..(e.offset + e.len) as usize]
    }

    /// `indptr[lo ..= hi]`: borrowed when the tile bytes are 8-byte aligned in
    /// memory (as the dataset stores provide them), copied otherwise.
    pub fn indptr(&self, lo: usize, hi: usize) -> Cow<'a, [i64]> {
        assert!(
            lo <= hi && hi <= self.n_cells(),
            "indptr range {lo}..={hi} out of range"
        );
        let start = self.header.indptr_off as usize + 8 * lo;
        let raw = &self.bytes[start..start + 8 * (hi - lo + 1)];
        match bytemuck::try_cast_slice::<u8, i64>(raw) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => Cow::Owned(
                raw.chunks_exact(8)
                    .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .collect(),
            ),
        }
    }

    /// The whole indptr (`n_cells + 1` entries).
    pub fn indptr_all(&self) -> Cow<'a, [i64]> {
        self.indptr(0, self.n_cells())
    }
}

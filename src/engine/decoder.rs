//! Chunk and tile decoding with reusable scratch.
//!
//! One stream at a time goes through one scratch buffer: decompress the
//! counts, run their kernels, then decompress the gaps into the same buffer
//! and run theirs. The planes a kernel reads were written by zstd a moment
//! before and are still in cache, and the scratch is half the size two live
//! streams would need (a chunk of 1M nonzeros has 2 MB of planes per stream).
//!
//! The order of checks is fixed, so every backend reports the same error for
//! the same corrupt input: the exception frames and lists (vexc, gexc), then the
//! vals frame, counts and their `vexc` markers, then the gaps frame, gene
//! indices and the `gexc` markers.

use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::format::exceptions::ExceptionList;
use crate::format::tile::{ChunkEntry, StreamKind, TileError, TilePosition, TileRule, TileView};
use crate::format::zstd::Decompressor;
use crate::kernels::reference::tile::apply_value_exceptions;
use crate::kernels::{
    Backend, CellBounds, CountSpan, DecodedCount, Exceptions, Fault, GapSpan, KernelTable, Planes,
    Stores, TileKernels,
};

/// Decodes chunks of tiles. Owns a zstd context and the scratch planes; keep one
/// per thread and reuse it.
pub struct ChunkDecoder {
    kernels: &'static TileKernels,
    zstd: Decompressor,
    /// Byte planes of the stream being decoded (2n bytes).
    planes: Vec<u8>,
    vexc: Vec<u32>,
    gexc: Vec<u32>,
    /// Exception positions of one span, relative to it.
    shifted: Vec<u32>,
}

/// One row for [`ChunkDecoder::decode_rows`]: a cell of the tile (local
/// index), and the slices its genes and its counts are written to.
pub type RowOut<'o, V> = (usize, (&'o mut [i32], &'o mut [V]));

/// Consecutive cells of a chunk, from nonzero `start` on, and where they
/// are decoded to.
struct Span<'b, 'o, V> {
    start: usize,
    /// The cells, relative to `start`.
    cells: CellBounds<'b>,
    indices: &'o mut [i32],
    values: &'o mut [V],
}

impl<V> Span<'_, '_, V> {
    /// This span's part of a stream's planes.
    fn planes<'p>(&self, all: Planes<'p>) -> Planes<'p> {
        all.range(self.start..self.start + self.indices.len())
    }

    /// The exceptions of `list` inside this span, on this span's part of
    /// `all`, positions made relative to it (in `shifted`).
    fn exceptions<'l>(
        &self,
        list: &ExceptionList<'l>,
        all: Planes<'l>,
        shifted: &'l mut Vec<u32>,
    ) -> Exceptions<'l> {
        let end = self.start + self.indices.len();
        let first = list
            .positions
            .partition_point(|&p| (p as usize) < self.start);
        let last = list.positions.partition_point(|&p| (p as usize) < end);
        shifted.clear();
        shifted.extend(
            list.positions[first..last]
                .iter()
                .map(|&p| p - self.start as u32),
        );
        Exceptions::new(self.planes(all), shifted, &list.payloads[first..last])
    }
}

/// `Ok` if the caller's `what` buffer holds the `expected` elements.
pub(crate) fn output_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::OutputLength {
            what,
            expected,
            got,
        })
    }
}

/// Where a frame decompresses to.
enum Scratch<'s> {
    /// A stream's byte planes.
    Planes(&'s mut Vec<u8>),
    /// An exception frame's `u32` words.
    Words(&'s mut Vec<u32>),
}

/// The order in which a chunk's frames are decompressed (see the module docs).
const DECODE_ORDER: [StreamKind; 4] = [
    StreamKind::Vexc,
    StreamKind::Gexc,
    StreamKind::Vals,
    StreamKind::Gaps,
];

/// The output size from which [`ChunkDecoder::decode_tile`] streams its
/// stores ([`Stores::Streaming`]): past any core's L2 and most of a shared
/// L3, the lines it writes leave the cache before anyone reads them.
const STREAM_TILE_BYTES: usize = 8 << 20;

/// Grows `v` to exactly `len` elements, reusing its allocation.
fn sized<T: Copy + Default>(v: &mut Vec<T>, len: usize) -> &mut [T] {
    v.resize(len, T::default());
    &mut v[..]
}

impl ChunkDecoder {
    /// A decoder using the process-wide kernel backend ([`Backend::active`]).
    pub fn new() -> Result<ChunkDecoder> {
        ChunkDecoder::for_backend(Backend::active()?)
    }

    /// A decoder using `backend` (an error if this CPU cannot run it).
    pub fn for_backend(backend: Backend) -> Result<ChunkDecoder> {
        Ok(ChunkDecoder {
            kernels: TileKernels::for_backend(backend)?,
            zstd: Decompressor::new(),
            planes: Vec::new(),
            vexc: Vec::new(),
            gexc: Vec::new(),
            shifted: Vec::new(),
        })
    }

    /// The kernel backend in use.
    pub fn backend(&self) -> Backend {
        self.kernels.backend()
    }

    /// Decompresses `kind`'s frame of chunk `chunk` into `out`: a stream's 2n
    /// bytes of planes, or an exception frame's 2k words (checked: `k <= n`).
    fn frame_into(
        zstd: &mut Decompressor,
        tile: &TileView<'_>,
        chunk: usize,
        c: &ChunkEntry,
        kind: StreamKind,
        out: Scratch<'_>,
    ) -> Result<(), TileError> {
        let e = c.extent(kind);
        let src = tile.extent_bytes(e);
        let at = TilePosition::chunk_offset(chunk, e.offset);
        let fail = |rule| TileError::new(rule, at);
        let n = c.nnz() as usize;
        match out {
            Scratch::Planes(buf) => zstd
                .decompress_exact(src, sized(buf, 2 * n))
                .map_err(|e| fail(TileRule::frame(kind, e))),
            Scratch::Words(buf) => {
                if e.len == 0 {
                    buf.clear();
                    return Ok(());
                }
                let size = crate::format::zstd::frame_content_size(src)
                    .map_err(|e| fail(TileRule::frame(kind, e)))?;
                // 8k bytes with k <= n: checked before the buffer is sized from it.
                if size % 8 != 0 || size / 8 > n as u64 {
                    return Err(fail(TileRule::ExceptionSize {
                        stream: kind,
                        bytes: size,
                        n: n as u64,
                    }));
                }
                let words = sized(buf, (size / 4) as usize);
                zstd.decompress_exact(src, bytemuck::cast_slice_mut(words))
                    .map_err(|e| fail(TileRule::frame(kind, e)))
            }
        }
    }

    /// Decompresses one frame of a chunk into this decoder's scratch for it.
    fn decompress(
        &mut self,
        tile: &TileView<'_>,
        chunk: usize,
        c: &ChunkEntry,
        kind: StreamKind,
    ) -> Result<(), TileError> {
        let out = match kind {
            StreamKind::Gaps | StreamKind::Vals => Scratch::Planes(&mut self.planes),
            StreamKind::Vexc => Scratch::Words(&mut self.vexc),
            StreamKind::Gexc => Scratch::Words(&mut self.gexc),
        };
        Self::frame_into(&mut self.zstd, tile, chunk, c, kind, out)
    }

    /// Decompresses chunk `chunk`'s frames into scratch, in decode order, and
    /// stops: the zstd-only baseline that decode throughput is measured against.
    pub fn decompress_chunk(&mut self, tile: &TileView<'_>, chunk: usize) -> Result<()> {
        let c = tile.chunk(chunk);
        for kind in DECODE_ORDER {
            self.decompress(tile, chunk, &c, kind)?;
        }
        Ok(())
    }

    /// Decodes chunk `chunk` of `tile` into `indices` and `values`, which must hold
    /// exactly the chunk's nonzeros (`nnz_hi - nnz_lo`). Indices are `i32` gene
    /// indices below the tile's `n_genes`; values are counts as `i32` or `f32`.
    pub fn decode_chunk<V: DecodedCount>(
        &mut self,
        tile: &TileView<'_>,
        chunk: usize,
        indices: &mut [i32],
        values: &mut [V],
    ) -> Result<()> {
        self.decode_chunk_with(tile, chunk, indices, values, Stores::Cached)
    }

    /// [`ChunkDecoder::decode_chunk`], written as `stores` says
    /// ([`Stores::Streaming`] for output not read before it would have left
    /// the cache).
    pub fn decode_chunk_with<V: DecodedCount>(
        &mut self,
        tile: &TileView<'_>,
        chunk: usize,
        indices: &mut [i32],
        values: &mut [V],
        stores: Stores,
    ) -> Result<()> {
        let c = tile.chunk(chunk);
        let n = c.nnz() as usize;
        output_len("indices", n, indices.len())?;
        output_len("values", n, values.len())?;
        let indptr = tile.indptr(c.cell_lo as usize, c.cell_hi as usize);
        let cells = CellBounds::new(&indptr, n).expect("TileView validated the chunk's indptr");
        self.decode_spans(
            tile,
            chunk,
            &mut [Span {
                start: 0,
                cells,
                indices,
                values,
            }],
            stores,
        )
    }

    /// Decodes some rows of chunk `chunk` of `tile` straight into their own
    /// buffers: each row is a cell of the tile (local index) with slices of
    /// exactly its length, in any order. The chunk's frames are decompressed
    /// once, and each row's genes and counts are written once, where they
    /// belong (a training batch builds its rows this way, with no whole-chunk
    /// buffer in between), as `stores` says: [`Stores::Streaming`] where the
    /// rows are not read again before they would have left the cache (a
    /// batch of a window, handed out later).
    ///
    /// Checks and errors are those of [`ChunkDecoder::decode_chunk`], in its
    /// order: given every row of the chunk, it reports the same error.
    pub fn decode_rows<V: DecodedCount>(
        &mut self,
        tile: &TileView<'_>,
        chunk: usize,
        rows: &mut [RowOut<'_, V>],
        stores: Stores,
    ) -> Result<()> {
        let c = tile.chunk(chunk);
        let (lo, hi) = (c.cell_lo as usize, c.cell_hi as usize);
        rows.sort_unstable_by_key(|r| r.0);
        if let Some(&(cell, _)) = rows.iter().find(|r| r.0 < lo || r.0 >= hi) {
            return Err(Error::Input(format!(
                "cell {cell} is not in chunk {chunk} (cells {lo}..{hi})"
            )));
        }
        let indptr = tile.indptr(lo, hi);
        let bounds: Vec<[i64; 2]> = rows
            .iter()
            .map(|r| [0, indptr[r.0 + 1 - lo] - indptr[r.0 - lo]])
            .collect();
        let mut spans = Vec::with_capacity(rows.len());
        for ((cell, (indices, values)), b) in rows.iter_mut().zip(&bounds) {
            let len = b[1] as usize;
            output_len("indices", len, indices.len())?;
            output_len("values", len, values.len())?;
            spans.push(Span {
                start: (indptr[*cell - lo] - indptr[0]) as usize,
                cells: CellBounds::new(b, len).expect("one cell spans its length"),
                indices,
                values,
            });
        }
        self.decode_spans(tile, chunk, &mut spans, stores)
    }

    /// The decode of [`ChunkDecoder::decode_chunk`] and
    /// [`ChunkDecoder::decode_rows`]: every frame once, each kernel over
    /// every span in turn (so a fault is found in chunk order whatever the
    /// spans), exceptions applied to the spans holding them.
    fn decode_spans<V: DecodedCount>(
        &mut self,
        tile: &TileView<'_>,
        chunk: usize,
        spans: &mut [Span<'_, '_, V>],
        stores: Stores,
    ) -> Result<()> {
        let c = tile.chunk(chunk);
        let n = c.nnz() as usize;
        // The spans' edge lines arrive while the frames decompress.
        for s in spans.iter() {
            stores.prefetch_edges(s.values);
            stores.prefetch_edges(s.indices);
        }
        self.decompress(tile, chunk, &c, StreamKind::Vexc)?;
        self.decompress(tile, chunk, &c, StreamKind::Gexc)?;
        let n_genes = tile.n_genes();
        let at = |kind: StreamKind| TilePosition::chunk_offset(chunk, c.extent(kind).offset);
        let vexc = ExceptionList::parse(&self.vexc, n as u64, StreamKind::Vexc, n_genes)
            .map_err(|r| TileError::new(r, at(StreamKind::Vexc)))?;
        let gexc = ExceptionList::parse(&self.gexc, n as u64, StreamKind::Gexc, n_genes)
            .map_err(|r| TileError::new(r, at(StreamKind::Gexc)))?;
        let k = self.kernels;
        // A fault found in a span, placed in the chunk.
        let fail = |stream, f: Fault, start: usize| {
            TileError::fault(f.moved(start), chunk, stream, n_genes)
        };
        let vals = Scratch::Planes(&mut self.planes);
        Self::frame_into(&mut self.zstd, tile, chunk, &c, StreamKind::Vals, vals)?;
        let planes = Planes::split(&self.planes);
        // Every span's counts by one kernel call, so that streaming stores
        // are fenced once a chunk rather than once a row.
        let mut values: Vec<CountSpan<'_, V>> = spans
            .iter_mut()
            .map(|s| (s.start, &mut *s.values))
            .collect();
        V::counts(k, planes, &mut values, stores)
            .map_err(|(i, f)| fail(StreamKind::Vals, f, values[i].0))?;
        drop(values);
        if !vexc.is_empty() {
            for s in spans.iter_mut() {
                let exceptions = s.exceptions(&vexc, planes, &mut self.shifted);
                if !exceptions.is_empty() {
                    apply_value_exceptions(exceptions, s.values)
                        .map_err(|f| fail(StreamKind::Vexc, f, s.start))?;
                }
            }
        }
        let gaps = Scratch::Planes(&mut self.planes);
        Self::frame_into(&mut self.zstd, tile, chunk, &c, StreamKind::Gaps, gaps)?;
        let planes = Planes::split(&self.planes);
        let mut indices: Vec<GapSpan<'_, '_>> = spans
            .iter_mut()
            .map(|s| (s.start, s.cells, &mut *s.indices))
            .collect();
        k.gaps_to_indices_each(planes, &mut indices, n_genes, stores)
            .map_err(|(i, f)| fail(StreamKind::Gaps, f, indices[i].0))?;
        drop(indices);
        if !gexc.is_empty() {
            for s in spans.iter_mut() {
                let exceptions = s.exceptions(&gexc, planes, &mut self.shifted);
                if !exceptions.is_empty() {
                    k.gap_exceptions(exceptions, s.cells, n_genes, s.indices)
                        .map_err(|f| fail(StreamKind::Gexc, f, s.start))?;
                }
            }
        }
        Ok(())
    }

    /// Decodes a whole tile into caller buffers: `indptr` (`n_cells + 1`),
    /// `indices` and `values` (`nnz` each), with streaming stores
    /// ([`Stores::Streaming`]) from 8 MiB of output on.
    pub fn decode_tile<V: DecodedCount>(
        &mut self,
        tile: &TileView<'_>,
        indptr: &mut [i64],
        indices: &mut [i32],
        values: &mut [V],
    ) -> Result<()> {
        let (cells, nnz) = (tile.n_cells(), tile.nnz());
        output_len("indptr", cells + 1, indptr.len())?;
        output_len("indices", nnz, indices.len())?;
        output_len("values", nnz, values.len())?;
        indptr.copy_from_slice(&tile.indptr_all());
        let bytes = nnz * (size_of::<i32>() + size_of::<V>());
        let stores = Stores::streaming_if(bytes >= STREAM_TILE_BYTES);
        for (i, c) in tile.chunks().enumerate() {
            let r = c.nnz_lo as usize..c.nnz_hi as usize;
            self.decode_chunk_with(tile, i, &mut indices[r.clone()], &mut values[r], stores)?;
        }
        Ok(())
    }

    /// Decodes a whole tile into a new [`Csr`]. Allocation is bounded by the
    /// tile's size: [`TileView::parse`] refused any frame that cannot expand to
    /// its chunk's nonzeros.
    pub fn decode_tile_to_csr<V: DecodedCount>(&mut self, tile: &TileView<'_>) -> Result<Csr<V>> {
        let mut csr = Csr {
            n_cols: u64::from(tile.n_genes()),
            indptr: vec![0; tile.n_cells() + 1],
            indices: vec![0; tile.nnz()],
            values: vec![V::default(); tile.nnz()],
        };
        self.decode_tile(tile, &mut csr.indptr, &mut csr.indices, &mut csr.values)?;
        Ok(csr)
    }
}

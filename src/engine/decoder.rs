//! Chunk and tile decoding with reusable scratch.
//!
//! The order of checks is fixed, so every backend reports the same error for
//! the same corrupt input: frames (gaps, vals, vexc, gexc), exception lists,
//! counts and their `vexc` markers, then gene indices and the `gexc` ones.

use crate::csr::Csr;
use crate::error::{Error, Location, Result, StreamKind, TileRule};
use crate::format::exceptions::ExceptionList;
use crate::format::tile::{ChunkEntry, TileView};
use crate::format::zstd::{Decompressor, FrameError};
use crate::kernels::{Backend, CellBounds, DecodedCount, Fault, TileKernels};

/// Decodes chunks of tiles. Owns a zstd context and the scratch planes; keep one
/// per thread and reuse it.
pub struct ChunkDecoder {
    kernels: &'static TileKernels,
    zstd: Decompressor,
    gaps: Vec<u8>,
    vals: Vec<u8>,
    vexc: Vec<u32>,
    gexc: Vec<u32>,
}

fn frame_rule(stream: StreamKind, e: FrameError) -> TileRule {
    match e {
        FrameError::NotAFrame => TileRule::FrameMagic { stream },
        FrameError::NoContentSize => TileRule::FrameNoContentSize { stream },
        FrameError::Size { declared, expected } => TileRule::FrameSize {
            stream,
            declared,
            expected,
        },
        FrameError::Ratio {
            declared,
            compressed,
        } => TileRule::FrameRatio {
            stream,
            compressed,
            declared,
        },
        FrameError::Trailing { extra } => TileRule::FrameTrailing { stream, extra },
        FrameError::Corrupt(reason) => TileRule::FrameCorrupt { stream, reason },
    }
}

/// A kernel fault in `chunk` as a tile error; `stream` names the exception
/// frame an unmarked position came from.
fn fault_error(f: Fault, chunk: usize, stream: StreamKind, n_genes: u32) -> Error {
    let (rule, position) = match f {
        Fault::ZeroCount { position } => (TileRule::ZeroCount, position),
        Fault::ZeroGap { position } => (TileRule::ZeroGap, position),
        Fault::GeneIndex { position, index } => (TileRule::GeneIndex { index, n_genes }, position),
        Fault::Unmarked { position, stored } => {
            (TileRule::ExceptionUnmarked { stream, stored }, position)
        }
    };
    Error::tile(rule, Location::position(chunk, position))
}

/// Grows `v` to exactly `len` elements, reusing its allocation.
fn sized<T: Copy + Default>(v: &mut Vec<T>, len: usize) -> &mut [T] {
    v.resize(len, T::default());
    &mut v[..]
}

impl ChunkDecoder {
    /// A decoder using the process-wide kernel backend ([`Backend::active`]).
    pub fn new() -> Result<ChunkDecoder> {
        ChunkDecoder::with_backend(Backend::active()?)
    }

    /// A decoder using `backend` (an error if this CPU cannot run it).
    pub fn with_backend(backend: Backend) -> Result<ChunkDecoder> {
        Ok(ChunkDecoder {
            kernels: TileKernels::for_backend(backend)?,
            zstd: Decompressor::new(),
            gaps: Vec::new(),
            vals: Vec::new(),
            vexc: Vec::new(),
            gexc: Vec::new(),
        })
    }

    /// The kernel backend in use.
    pub fn backend(&self) -> Backend {
        self.kernels.backend
    }

    fn decompress(
        &mut self,
        tile: &TileView<'_>,
        chunk: usize,
        c: &ChunkEntry,
        kind: StreamKind,
    ) -> Result<()> {
        let e = c.extent(kind);
        let src = tile.extent_bytes(e);
        let at = Location {
            chunk: Some(chunk as u32),
            offset: Some(e.offset),
            position: None,
        };
        let fail = |rule| Error::tile(rule, at);
        let n = c.nnz() as usize;
        match kind {
            StreamKind::Gaps | StreamKind::Vals => {
                let buf = if kind == StreamKind::Gaps {
                    &mut self.gaps
                } else {
                    &mut self.vals
                };
                self.zstd
                    .decompress_exact(src, sized(buf, 2 * n))
                    .map_err(|e| fail(frame_rule(kind, e)))
            }
            StreamKind::Vexc | StreamKind::Gexc => {
                let buf = if kind == StreamKind::Vexc {
                    &mut self.vexc
                } else {
                    &mut self.gexc
                };
                if e.len == 0 {
                    buf.clear();
                    return Ok(());
                }
                let size = crate::format::zstd::frame_content_size(src)
                    .map_err(|e| fail(frame_rule(kind, e)))?;
                // 8k bytes with k <= n: checked before the buffer is sized from it.
                if size % 8 != 0 || size / 8 > n as u64 {
                    return Err(fail(TileRule::ExceptionSize {
                        stream: kind,
                        bytes: size,
                        n: n as u64,
                    }));
                }
                let words = sized(buf, (size / 4) as usize);
                self.zstd
                    .decompress_exact(src, bytemuck::cast_slice_mut(words))
                    .map_err(|e| fail(frame_rule(kind, e)))
            }
        }
    }

    /// Decompresses chunk `chunk`'s frames into scratch and stops: the zstd-only
    /// baseline that decode throughput is measured against.
    pub fn decompress_chunk(&mut self, tile: &TileView<'_>, chunk: usize) -> Result<()> {
        let c = tile.chunk(chunk);
        for kind in [
            StreamKind::Gaps,
            StreamKind::Vals,
            StreamKind::Vexc,
            StreamKind::Gexc,
        ] {
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
        let c = tile.chunk(chunk);
        let n = c.nnz() as usize;
        if indices.len() != n {
            return Err(Error::OutputLength {
                what: "indices",
                expected: n,
                got: indices.len(),
            });
        }
        if values.len() != n {
            return Err(Error::OutputLength {
                what: "values",
                expected: n,
                got: values.len(),
            });
        }
        self.decompress_chunk(tile, chunk)?;
        let n_genes = tile.n_genes();
        let at = |kind: StreamKind| Location {
            chunk: Some(chunk as u32),
            offset: Some(c.extent(kind).offset),
            position: None,
        };
        let vexc = ExceptionList::parse(&self.vexc, n as u64, StreamKind::Vexc, n_genes)
            .map_err(|r| Error::tile(r, at(StreamKind::Vexc)))?;
        let gexc = ExceptionList::parse(&self.gexc, n as u64, StreamKind::Gexc, n_genes)
            .map_err(|r| Error::tile(r, at(StreamKind::Gexc)))?;
        let k = self.kernels;
        (V::counts_kernel(k))(&self.vals, values)
            .map_err(|f| fault_error(f, chunk, StreamKind::Vals, n_genes))?;
        if !vexc.is_empty() {
            (V::value_exceptions_kernel(k))(&self.vals, vexc.positions, vexc.payloads, values)
                .map_err(|f| fault_error(f, chunk, StreamKind::Vexc, n_genes))?;
        }
        let indptr = tile.indptr(c.cell_lo as usize, c.cell_hi as usize);
        let cells = CellBounds::new(&indptr, n).expect("TileView validated the chunk's indptr");
        (k.gaps_to_indices)(&self.gaps, cells, n_genes, indices)
            .map_err(|f| fault_error(f, chunk, StreamKind::Gaps, n_genes))?;
        if !gexc.is_empty() {
            (k.gap_exceptions)(
                &self.gaps,
                cells,
                n_genes,
                gexc.positions,
                gexc.payloads,
                indices,
            )
            .map_err(|f| fault_error(f, chunk, StreamKind::Gexc, n_genes))?;
        }
        Ok(())
    }

    /// Decodes a whole tile into caller buffers: `indptr` (`n_cells + 1`),
    /// `indices` and `values` (`nnz` each).
    pub fn decode_tile<V: DecodedCount>(
        &mut self,
        tile: &TileView<'_>,
        indptr: &mut [i64],
        indices: &mut [i32],
        values: &mut [V],
    ) -> Result<()> {
        let (cells, nnz) = (tile.n_cells(), tile.nnz());
        if indptr.len() != cells + 1 {
            return Err(Error::OutputLength {
                what: "indptr",
                expected: cells + 1,
                got: indptr.len(),
            });
        }
        if indices.len() != nnz {
            return Err(Error::OutputLength {
                what: "indices",
                expected: nnz,
                got: indices.len(),
            });
        }
        if values.len() != nnz {
            return Err(Error::OutputLength {
                what: "values",
                expected: nnz,
                got: values.len(),
            });
        }
        indptr.copy_from_slice(&tile.indptr_all());
        for (i, c) in tile.chunks().enumerate() {
            let r = c.nnz_lo as usize..c.nnz_hi as usize;
            self.decode_chunk(tile, i, &mut indices[r.clone()], &mut values[r])?;
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

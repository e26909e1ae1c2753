//! Encoding a CSR block into one tile (the mirror of [`super::tile`]).
//!
//! Chunk boundaries fall on cell edges and hold roughly equal numbers of
//! nonzeros; every stream and exception frame starts on an 8-byte boundary; the
//! indptr follows the chunk table. The writer's policy (not a format rule)
//! refuses tiles where exceptions are not rare: decoding applies them one by
//! one, and data with that many counts above 65535 is not raw counts.

use crate::csr::CsrRef;
use crate::format::tile::{
    ChunkEntry, Extent, Header, CHUNK_ENTRY_LEN, HEADER_LEN, MAX_GENES, VERSION,
};
use crate::format::zstd::Compressor;
use crate::format::EncodeError;
use crate::kernels::reference::tile as scalar;
use crate::kernels::{Backend, CellBounds, KernelTable, TileKernels};

/// Default number of chunks per tile: 16 cells per chunk in the default tile
/// of 4,096 cells.
///
/// A chunk is the unit of random access: a read of one cell decompresses its
/// whole chunk. Measured on 50,000 synthetic cells x 36,601 genes (~2,100
/// nonzeros per cell, zstd 15, 2 threads), against 8 chunks per tile: 256
/// chunks take the same bytes (0.997x), read uniformly random 256-cell
/// batches 14.5x faster (17.7k against 1.2k cells/s), and scan 5% slower (9%
/// on one thread). 512 chunks read random batches faster still (27k) but
/// scan 18-25% slower; 64 and 128 gain 4x and 9x on random batches. See the
/// README's "Chunking" table.
pub const DEFAULT_CHUNKS: usize = 256;
/// Default zstd level (higher levels are smaller and, here, decode faster).
pub const DEFAULT_LEVEL: i32 = 19;

/// A value the writer accepts as a count: an integer in `1 ..= 2^31 - 1`
/// (floats must hold such an integer exactly, as AnnData matrices often do).
/// Its `Display` is how an error message shows a value refused.
pub trait CountSource: Copy + std::fmt::Display {
    /// The count, or `None` if the value is not an integer in `1 ..= 2^31 - 1`.
    fn to_count(self) -> Option<u32>;
}

macro_rules! int_count_source {
    ($($t:ty),*) => {$(
        impl CountSource for $t {
            fn to_count(self) -> Option<u32> {
                u32::try_from(self).ok().filter(|&c| (1..=i32::MAX as u32).contains(&c))
            }
        }
    )*};
}
int_count_source!(i32, i64, u32, u64, u16);

macro_rules! float_count_source {
    ($($t:ty),*) => {$(
        impl CountSource for $t {
            fn to_count(self) -> Option<u32> {
                (self.fract() == 0.0 && self >= 1.0 && self <= i32::MAX as $t).then(|| self as u32)
            }
        }
    )*};
}
float_count_source!(f32, f64);

/// Encodes CSR blocks into tiles. Reuse one to keep its zstd context.
pub struct TileEncoder {
    n_chunks: usize,
    level: i32,
    backend: Option<Backend>,
    zstd: Compressor,
}

/// The `u16` streams and exception lists of one chunk, before compression.
struct ChunkStreams {
    cell_lo: usize,
    cell_hi: usize,
    nnz_lo: usize,
    nnz_hi: usize,
    gaps: Vec<u16>,
    vals: Vec<u16>,
    gexc: Vec<(u32, u32)>,
    vexc: Vec<(u32, u32)>,
}

impl Default for TileEncoder {
    fn default() -> Self {
        TileEncoder::new()
    }
}

impl TileEncoder {
    /// An encoder with [`DEFAULT_CHUNKS`] chunks and zstd level [`DEFAULT_LEVEL`].
    pub fn new() -> TileEncoder {
        TileEncoder {
            n_chunks: DEFAULT_CHUNKS,
            level: DEFAULT_LEVEL,
            backend: None,
            zstd: Compressor::new(),
        }
    }

    /// Sets the number of chunks (at least 1; a tile never has more chunks than cells).
    pub fn with_chunks(mut self, n_chunks: usize) -> TileEncoder {
        self.n_chunks = n_chunks.max(1);
        self
    }

    /// Sets the zstd level (negative levels are zstd's fast modes).
    pub fn with_level(mut self, level: i32) -> TileEncoder {
        self.level = level;
        self
    }

    /// Runs the kernels on `backend` (an error at encode time if this CPU
    /// cannot run it) instead of the process-wide [`Backend::active`]. The
    /// bytes written are the same on every backend.
    pub fn with_backend(mut self, backend: Backend) -> TileEncoder {
        self.backend = Some(backend);
        self
    }

    /// The configured number of chunks.
    pub fn chunks(&self) -> usize {
        self.n_chunks
    }

    /// The configured zstd level.
    pub fn level(&self) -> i32 {
        self.level
    }

    /// Encodes `csr` (rows = cells, `n_cols` genes) into one tile object.
    ///
    /// Refuses, with an error naming the cell and nonzero: a malformed indptr,
    /// unsorted or duplicate or out-of-range gene indices, counts outside
    /// `1 ..= 2^31 - 1`, `n_cols` outside `1 ..= 2^31`, and (policy) more than
    /// `max(1024, nnz / 200)` exceptions of either kind.
    pub fn encode<V: CountSource>(&mut self, csr: CsrRef<'_, V>) -> Result<Vec<u8>, EncodeError> {
        let counts = validate(&csr)?;
        let k = TileKernels::chosen(self.backend)?;
        let n_genes = csr.n_cols as u32;
        let chunks = self.plan_chunks(csr.indptr);
        let streams = chunks
            .windows(2)
            .map(|w| chunk_streams(k, &csr, &counts, w[0], w[1]))
            .collect::<Vec<_>>();
        let nnz = csr.nnz();
        let limit = (nnz / 200).max(1024);
        for (what, count) in [
            ("value", streams.iter().map(|s| s.vexc.len()).sum::<usize>()),
            ("gap", streams.iter().map(|s| s.gexc.len()).sum::<usize>()),
        ] {
            if count > limit {
                return Err(EncodeError::Policy(format!(
                    "{count} {what} exceptions in a tile of {nnz} nonzeros (limit max(1024, nnz/200) = {limit})"
                )));
            }
        }
        self.assemble(k, csr.indptr, n_genes, &streams)
    }

    /// Chunk boundaries (cell indices, `k + 1` of them) on cell edges, each
    /// chunk holding about `nnz / k` nonzeros and at least one cell.
    fn plan_chunks(&self, indptr: &[i64]) -> Vec<usize> {
        let n_cells = indptr.len() - 1;
        if n_cells == 0 {
            return vec![0];
        }
        let k = self.n_chunks.min(n_cells);
        let nnz = indptr[n_cells] as u128;
        let mut bounds = vec![0usize; k + 1];
        bounds[k] = n_cells;
        for i in 1..k {
            let target = (nnz * i as u128 / k as u128) as i64;
            let cell = indptr.partition_point(|&p| p < target);
            bounds[i] = cell.clamp(bounds[i - 1] + 1, n_cells - (k - i));
        }
        bounds
    }

    fn assemble(
        &mut self,
        k: &TileKernels,
        indptr: &[i64],
        n_genes: u32,
        streams: &[ChunkStreams],
    ) -> Result<Vec<u8>, EncodeError> {
        let n_cells = indptr.len() - 1;
        let indptr_off = HEADER_LEN + CHUNK_ENTRY_LEN * streams.len();
        let mut out = vec![0u8; indptr_off];
        for &p in indptr {
            out.extend_from_slice(&p.to_le_bytes());
        }
        let mut planes = Vec::new();
        let mut words = Vec::new();
        let mut entries = Vec::with_capacity(streams.len());
        for s in streams {
            let mut put = |out: &mut Vec<u8>, bytes: &[u8]| -> Result<Extent, EncodeError> {
                out.resize(out.len().next_multiple_of(8), 0);
                let offset = out.len() as u64;
                self.zstd
                    .compress_into(bytes, self.level, out)
                    .map_err(EncodeError::Compress)?;
                Ok(Extent {
                    offset,
                    len: out.len() as u64 - offset,
                })
            };
            let mut plane_frame = |out: &mut Vec<u8>, values: &[u16]| {
                planes.resize(2 * values.len(), 0);
                k.split_planes(values, &mut planes);
                put(out, &planes)
            };
            let gaps = plane_frame(&mut out, &s.gaps)?;
            let vals = plane_frame(&mut out, &s.vals)?;
            let mut exc_frame =
                |out: &mut Vec<u8>, list: &[(u32, u32)]| -> Result<Extent, EncodeError> {
                    if list.is_empty() {
                        return Ok(Extent::default());
                    }
                    words.clear();
                    words.extend(list.iter().flat_map(|(p, _)| p.to_le_bytes()));
                    words.extend(list.iter().flat_map(|(_, v)| v.to_le_bytes()));
                    put(out, &words)
                };
            let vexc = exc_frame(&mut out, &s.vexc)?;
            let gexc = exc_frame(&mut out, &s.gexc)?;
            entries.push(ChunkEntry {
                cell_lo: s.cell_lo as u64,
                cell_hi: s.cell_hi as u64,
                nnz_lo: s.nnz_lo as u64,
                nnz_hi: s.nnz_hi as u64,
                gaps,
                vals,
                vexc,
                gexc,
            });
        }
        for (i, e) in entries.iter().enumerate() {
            let off = HEADER_LEN + i * CHUNK_ENTRY_LEN;
            out[off..off + CHUNK_ENTRY_LEN].copy_from_slice(&e.to_bytes());
        }
        let header = Header {
            version: VERSION,
            flags: 0,
            n_cells: n_cells as u64,
            nnz: indptr[n_cells] as u64,
            n_genes,
            n_chunks: streams.len() as u32,
            indptr_off: indptr_off as u64,
            total_size: out.len() as u64,
            crc32: crc32fast::hash(&out[HEADER_LEN..]),
            reserved: 0,
        };
        out[..HEADER_LEN].copy_from_slice(&header.to_bytes());
        Ok(out)
    }
}

/// Checks the block and returns its counts as `u32`.
fn validate<V: CountSource>(csr: &CsrRef<'_, V>) -> Result<Vec<u32>, EncodeError> {
    let bad = |msg: String| Err(EncodeError::Input(msg));
    if csr.n_cols == 0 || csr.n_cols > u64::from(MAX_GENES) {
        return bad(format!("n_genes {} is outside 1..=2^31", csr.n_cols));
    }
    if csr.indptr.first() != Some(&0) {
        return bad("indptr must be non-empty and start at 0".into());
    }
    let nnz = csr.indices.len();
    if csr.values.len() != nnz || *csr.indptr.last().expect("non-empty") != nnz as i64 {
        return bad(format!(
            "indptr ends at {}, with {} indices and {} values",
            csr.indptr.last().expect("non-empty"),
            nnz,
            csr.values.len()
        ));
    }
    for (cell, w) in csr.indptr.windows(2).enumerate() {
        if w[1] < w[0] {
            return bad(format!("indptr decreases at cell {cell}"));
        }
        if w[1] as usize > nnz {
            return bad(format!(
                "indptr[{}] = {} is beyond the {nnz} nonzeros",
                cell + 1,
                w[1]
            ));
        }
        let (lo, hi) = (w[0] as usize, w[1] as usize);
        if (hi - lo) as u64 >= 1 << 32 {
            return bad(format!(
                "cell {cell} holds {} nonzeros (at most 2^32 - 1)",
                hi - lo
            ));
        }
        let mut prev: Option<i32> = None;
        for (j, &g) in csr.indices[lo..hi].iter().enumerate() {
            if g < 0 || g as u64 >= csr.n_cols {
                return bad(format!(
                    "cell {cell}, nonzero {j}: gene index {g} outside 0..{}",
                    csr.n_cols
                ));
            }
            if prev.is_some_and(|p| g <= p) {
                return bad(format!("cell {cell}, nonzero {j}: gene indices must be sorted and distinct ({g} after {})", prev.unwrap_or(0)));
            }
            prev = Some(g);
        }
    }
    csr.values
        .iter()
        .enumerate()
        .map(|(j, &v)| {
            v.to_count().ok_or_else(|| {
                let cell = csr.indptr.partition_point(|&p| p <= j as i64) - 1;
                EncodeError::Input(format!(
                    "cell {cell}: value {v} is not a count in 1..=2^31-1"
                ))
            })
        })
        .collect()
}

fn chunk_streams<V>(
    k: &TileKernels,
    csr: &CsrRef<'_, V>,
    counts: &[u32],
    cell_lo: usize,
    cell_hi: usize,
) -> ChunkStreams {
    let (nnz_lo, nnz_hi) = (csr.indptr[cell_lo] as usize, csr.indptr[cell_hi] as usize);
    let n = nnz_hi - nnz_lo;
    let cells = CellBounds::new(&csr.indptr[cell_lo..=cell_hi], n).expect("validated indptr");
    let mut s = ChunkStreams {
        cell_lo,
        cell_hi,
        nnz_lo,
        nnz_hi,
        gaps: vec![0; n],
        vals: vec![0; n],
        gexc: Vec::new(),
        vexc: Vec::new(),
    };
    k.indices_to_gaps(
        &csr.indices[nnz_lo..nnz_hi],
        cells,
        &mut s.gaps,
        &mut s.gexc,
    );
    scalar::counts_to_stream(&counts[nnz_lo..nnz_hi], &mut s.vals, &mut s.vexc);
    s
}

//! Helpers shared by the integration tests (the library's, and the
//! command-line tool's in cli/tests, which include this file): where the
//! shared test data lies, loading the golden `.npz` expectations, tiles
//! assembled by hand, and a manifest that lies about its cells.
#![allow(dead_code)]

mod testdata;

use std::path::Path;

use deltacells::dataset::MemoryStore;
use deltacells::engine::{ChunkDecoder, RowOut};
use deltacells::format::manifest::Manifest;
use deltacells::format::npy::read_csr_npz;
use deltacells::format::tile::TileView;
use deltacells::kernels::Stores;
use deltacells::{Backend, Csr};

pub use testdata::testdata;

/// A golden expectation as exact `i32` counts.
pub fn expected_csr(path: &Path) -> Csr<i32> {
    let npz = read_csr_npz(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Csr {
        n_cols: npz.shape[1],
        indptr: npz.indptr,
        indices: npz.indices,
        values: npz.data.to_i32().expect("integer counts"),
    }
}

/// Reads a file into memory that is 8-byte aligned, as the dataset stores do.
pub fn read_aligned(path: &Path) -> AlignedBytes {
    AlignedBytes::new(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Bytes backed by `u64` words, so views of them are 8-byte aligned.
pub struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBytes {
    pub fn new(bytes: &[u8]) -> AlignedBytes {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        AlignedBytes {
            words,
            len: bytes.len(),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }
}

/// Parses and fully decodes a tile with `backend`, as exact counts.
pub fn decode_with(bytes: &[u8], backend: Backend) -> deltacells::Result<Csr<i32>> {
    let view = TileView::parse(bytes)?;
    ChunkDecoder::for_backend(backend)?.decode_tile_to_csr(&view)
}

/// Parses and decodes a tile row by row with `backend`
/// ([`ChunkDecoder::decode_rows`]) and `stores`: each chunk's rows in
/// reverse order, or only the rows `keep` accepts (a tile cell index); the
/// rows left out stay empty.
pub fn decode_rows_with(
    bytes: &[u8],
    backend: Backend,
    stores: Stores,
    keep: impl Fn(usize) -> bool,
) -> deltacells::Result<Csr<i32>> {
    let view = TileView::parse(bytes)?;
    let mut dec = ChunkDecoder::for_backend(backend)?;
    let all = view.indptr_all();
    let mut csr = Csr {
        n_cols: u64::from(view.n_genes()),
        indptr: vec![0],
        indices: Vec::new(),
        values: Vec::new(),
    };
    let mut rows: Vec<(Vec<i32>, Vec<i32>)> = (0..view.n_cells())
        .map(|c| {
            let len = if keep(c) {
                (all[c + 1] - all[c]) as usize
            } else {
                0
            };
            (vec![-1; len], vec![-1; len])
        })
        .collect();
    for (i, c) in view.chunks().enumerate() {
        let mut wanted: Vec<RowOut<'_, i32>> = rows[c.cell_lo as usize..c.cell_hi as usize]
            .iter_mut()
            .enumerate()
            .map(|(k, (idx, val))| (c.cell_lo as usize + k, (&mut idx[..], &mut val[..])))
            .filter(|r| keep(r.0))
            .rev()
            .collect();
        dec.decode_rows(&view, i, &mut wanted, stores)?;
    }
    for (idx, val) in rows {
        csr.indices.extend(idx);
        csr.values.extend(val);
        csr.indptr.push(csr.indices.len() as i64);
    }
    Ok(csr)
}

/// Every backend this CPU runs (each has tile kernels).
pub fn tile_backends() -> Vec<Backend> {
    Backend::available()
}

/// One chunk of a hand-built tile: raw `u16` streams and exception words,
/// compressed as given, so tests can build tiles that break any element rule.
pub struct RawChunk {
    pub cells: std::ops::Range<u64>,
    pub gaps: Vec<u16>,
    pub vals: Vec<u16>,
    /// `k` positions then `k` payloads, or `None` for no frame.
    pub vexc: Option<Vec<u32>>,
    pub gexc: Option<Vec<u32>>,
}

fn planes(values: &[u16]) -> Vec<u8> {
    let mut out = vec![0u8; 2 * values.len()];
    deltacells::kernels::reference::tile::split_planes(values, &mut out);
    out
}

/// Assembles a tile from raw parts: any frame contents, valid framing, valid CRC.
pub fn assemble_tile(n_genes: u32, indptr: &[i64], chunks: &[RawChunk]) -> Vec<u8> {
    use deltacells::format::tile::{ChunkEntry, Extent, Header, CHUNK_ENTRY_LEN, HEADER_LEN};
    let indptr_off = HEADER_LEN + CHUNK_ENTRY_LEN * chunks.len();
    let mut out = vec![0u8; indptr_off];
    for p in indptr {
        out.extend_from_slice(&p.to_le_bytes());
    }
    let put = |out: &mut Vec<u8>, bytes: &[u8]| {
        out.resize(out.len().next_multiple_of(8), 0);
        let offset = out.len() as u64;
        out.extend_from_slice(&zstd::bulk::compress(bytes, 3).unwrap());
        Extent {
            offset,
            len: out.len() as u64 - offset,
        }
    };
    let mut entries = Vec::new();
    for c in chunks {
        let gaps = put(&mut out, &planes(&c.gaps));
        let vals = put(&mut out, &planes(&c.vals));
        let mut exc = |words: &Option<Vec<u32>>| match words {
            Some(w) => put(&mut out, bytemuck::cast_slice(w)),
            None => Extent::default(),
        };
        let (vexc, gexc) = (exc(&c.vexc), exc(&c.gexc));
        entries.push(ChunkEntry {
            cell_lo: c.cells.start,
            cell_hi: c.cells.end,
            nnz_lo: indptr[c.cells.start as usize] as u64,
            nnz_hi: indptr[c.cells.end as usize] as u64,
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
    let n_cells = indptr.len() as u64 - 1;
    let header = Header {
        version: 2,
        flags: 0,
        n_cells,
        nnz: *indptr.last().unwrap() as u64,
        n_genes,
        n_chunks: chunks.len() as u32,
        indptr_off: indptr_off as u64,
        total_size: out.len() as u64,
        crc32: crc32fast::hash(&out[HEADER_LEN..]),
        reserved: 0,
    };
    out[..HEADER_LEN].copy_from_slice(&header.to_bytes());
    out
}

/// Recomputes a tile's CRC after a test edited it, so deeper checks are reached.
pub fn fix_crc(tile: &mut [u8]) {
    let crc = crc32fast::hash(&tile[64..]);
    tile[56..60].copy_from_slice(&crc.to_le_bytes());
}

/// The cases of `deltacells/corpus/corpus.json` at `level` (`tile` or `dataset`).
pub fn corpus_cases(level: &str) -> Vec<serde_json::Value> {
    let path = testdata().join("deltacells/corpus/corpus.json");
    let corpus: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    corpus["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["level"] == level)
        .cloned()
        .collect()
}

/// The cells the hostile manifest of [`hostile`] claims.
pub const CLAIMED: u64 = 1 << 36;

/// A store holding one real tile and a manifest claiming `CLAIMED` cells in
/// it, with `tile_bytes` as given (the true size, or a lie big enough for
/// the claim to pass the manifest's own bound).
pub fn hostile(tile_bytes: Option<u64>) -> (MemoryStore, Vec<u8>) {
    let tile = read_aligned(&testdata().join("deltacells/tiles/realistic_1chunk.dct"));
    let view = TileView::parse(tile.bytes()).unwrap();
    let manifest = Manifest {
        n_cells: CLAIMED,
        n_genes: view.n_genes(),
        tile_size: CLAIMED,
        tile_cells: vec![CLAIMED],
        tile_nnz: vec![view.nnz() as u64],
        tile_bytes: vec![tile_bytes.unwrap_or(tile.bytes().len() as u64)],
        n_chunks: 1,
        zstd_level: 3,
        has_gene_order: false,
        has_var_names: false,
        has_var_table: false,
        obs: None,
        metadata: Default::default(),
    }
    .to_json();
    let store = MemoryStore::new();
    store.insert(Manifest::tile_key(0), tile.bytes());
    store.insert("manifest.json", &manifest);
    (store, manifest)
}

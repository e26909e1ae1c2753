//! Helpers shared by the integration tests: where the shared test data lies,
//! and loading the golden `.npz` expectations.
#![allow(dead_code)]

use std::path::PathBuf;

use deltacells::format::npy::read_csr_npz;
use deltacells::format::tile::TileView;
use deltacells::{engine::ChunkDecoder, Backend, Csr};

/// `../shared/testdata` relative to the crate root (where CI lays it too).
pub fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata")
}

/// A golden expectation as exact `i32` counts.
pub fn expected_csr(path: &std::path::Path) -> Csr<i32> {
    let (indptr, indices, data, shape) = read_csr_npz(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Csr { n_cols: shape[1], indptr, indices, values: data.to_i32().expect("integer counts") }
}

/// Reads a file into memory that is 8-byte aligned, as the dataset stores do.
pub fn read_aligned(path: &std::path::Path) -> AlignedBytes {
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
        AlignedBytes { words, len: bytes.len() }
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }
}

/// Parses and fully decodes a tile with `backend`, as exact counts.
pub fn decode_with(bytes: &[u8], backend: Backend) -> deltacells::Result<Csr<i32>> {
    let view = TileView::parse(bytes)?;
    ChunkDecoder::with_backend(backend)?.decode_tile_to_csr(&view)
}

/// Every backend this CPU runs that has tile kernels.
pub fn tile_backends() -> Vec<Backend> {
    Backend::available()
        .into_iter()
        .filter(|&b| deltacells::kernels::TileKernels::for_backend(b).is_ok())
        .collect()
}

//! `convert` as the input-parser targets run it: small blocks and transpose
//! runs (so the streaming and merge paths run on small inputs), zstd's
//! fastest level, one tile at a time, into a memory store. The parsers are
//! under test, not the encoder or the disk.

use std::path::Path;
use std::sync::Arc;

use deltacells::dataset::ingest::{convert_into, ConvertOptions, Input};
use deltacells::dataset::MemoryStore;

/// Converts `input`, with temporary run files under `tmp`; the outcome is
/// not looked at (only a panic, leak or hang would be a failure).
pub fn convert(input: &Input, tmp: &Path) {
    let mut options = ConvertOptions::default()
        .with_block_nonzeros(64)
        .with_run_nonzeros(1024)
        .with_tmp_dir(Some(tmp.to_path_buf()));
    options.writer.level = 1;
    options.writer.parallel_tiles = 1;
    let _ = convert_into(input, Arc::new(MemoryStore::new()), options, &|_| {});
}

//! Matrix Market and TSV parsing, through `convert` of a 10x folder on
//! arbitrary bytes: never a panic. The input is split at the first 0xff byte
//! into `matrix.mtx` and `barcodes.tsv`.
#![no_main]

use std::sync::Arc;

use deltacells::dataset::ingest::{convert_into, read_tsv, ConvertOptions, Input};
use deltacells::dataset::MemoryStore;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("deltacells-fuzz-mtx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let (matrix, barcodes) = match data.iter().position(|&b| b == 0xff) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    };
    std::fs::write(dir.join("matrix.mtx"), matrix).expect("write input");
    let barcodes = barcodes.map(|b| {
        let path = dir.join("barcodes.tsv");
        std::fs::write(&path, b).expect("write input");
        let _ = read_tsv(&path);
        path
    });
    let input = Input::TenX {
        matrix: dir.join("matrix.mtx"),
        features: None,
        barcodes,
    };
    let mut options = ConvertOptions {
        block_nonzeros: 64,
        run_nonzeros: 1024,
        tmp_dir: Some(dir.clone()),
        ..ConvertOptions::default()
    };
    // zstd's fastest level and one tile at a time: the parsers are under test.
    options.writer.level = 1;
    options.writer.parallel_tiles = 1;
    // Into memory: the parsers are under test, not the disk.
    let _ = convert_into(&input, Arc::new(MemoryStore::new()), options, &mut |_| {});
});

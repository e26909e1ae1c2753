//! Matrix Market and TSV parsing, through `convert` of a 10x folder on
//! arbitrary bytes: never a panic. The input is split at the first 0xff byte
//! into `matrix.mtx` and `barcodes.tsv`.
#![no_main]

#[path = "shared/convert_in_memory.rs"]
mod convert_in_memory;

use deltacells::dataset::ingest::{read_tsv, Input};
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
    convert_in_memory::convert(&input, &dir);
});

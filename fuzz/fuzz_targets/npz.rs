//! `.npy` parsing and `convert` of an `.npz` on arbitrary bytes: never a
//! panic, and a parsed array serialises back to an equal one.
#![no_main]

use std::sync::Arc;

use deltacells::dataset::ingest::{convert_into, ConvertOptions, Input};
use deltacells::dataset::MemoryStore;
use deltacells::format::npy::{Array, Header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(array) = Array::parse(data) {
        assert_eq!(Array::parse(&array.to_npy()).ok(), Some(array));
    }
    let _ = Header::read(&mut &data[..]);
    // The same bytes as an archive, converted with tiny blocks and runs.
    let dir = std::env::temp_dir().join(format!("deltacells-fuzz-npz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let path = dir.join("m.npz");
    std::fs::write(&path, data).expect("write input");
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
    let _ = convert_into(
        &Input::Npz(path),
        Arc::new(MemoryStore::new()),
        options,
        &mut |_| {},
    );
});

//! `.npy` parsing and `convert` of an `.npz` on arbitrary bytes: never a
//! panic, and a parsed array serialises back to an equal one.
#![no_main]

#[path = "shared/convert_in_memory.rs"]
mod convert_in_memory;

use deltacells::dataset::ingest::Input;
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
    convert_in_memory::convert(&Input::Npz(path), &dir);
});

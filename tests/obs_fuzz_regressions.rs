//! Obs shards that fuzzing found, kept as regression inputs in
//! `tests/fixtures/`: each stands in for shard 0 of the shared `small_obs`
//! dataset (with the manifest's size, SHA-256 and fingerprint updated, so
//! only the shard's content is wrong): every read ends at once with an
//! error, the column with the endless page header with the one naming it.

mod obs_common;

use std::sync::Arc;

use deltacells::dataset::MemoryStore;
use deltacells::format::manifest::Manifest;
use deltacells::obs::{fingerprint, sha256_hex, shard_key, ObsReader, SCHEMA_KEY};
use obs_common::testdata;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

/// `small_obs` in a memory store with `shard` as its first obs shard.
fn with_shard(shard: &[u8]) -> (MemoryStore, Manifest) {
    let dir = testdata().join("deltacells/datasets/small_obs");
    let store = MemoryStore::new();
    for key in ["manifest.json", SCHEMA_KEY, &shard_key(1)] {
        store.insert(key, &std::fs::read(dir.join(key)).unwrap());
    }
    store.insert(shard_key(0), shard);
    let mut manifest = Manifest::parse(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let obs = manifest.obs.as_mut().unwrap();
    obs.shard_bytes[0] = shard.len() as u64;
    obs.shard_sha256[0] = sha256_hex(shard);
    let schema = std::fs::read_to_string(dir.join(SCHEMA_KEY)).unwrap();
    obs.fingerprint = fingerprint(&schema, &manifest.tile_cells, &obs.shard_sha256);
    (store, manifest)
}

/// Opens `small_obs` with `shard` as shard 0 and reads every column of its
/// tiles: the reader and the errors of the reads that failed.
fn read_every_column(shard: &[u8]) -> (ObsReader, Vec<String>) {
    let (store, manifest) = with_shard(shard);
    let reader = ObsReader::open(Arc::new(store), &manifest).unwrap();
    let tiles = manifest.obs.as_ref().unwrap().tiles_per_file as usize;
    let errors = reader
        .schema()
        .columns
        .iter()
        .filter_map(|c| reader.read_column(&c.name, 0..tiles).err())
        .map(|e| e.to_string())
        .collect();
    (reader, errors)
}

/// The errors of `errors` that come from a panic (there must be none).
fn panics(errors: &[String]) -> Vec<&String> {
    errors.iter().filter(|e| e.contains("panicked")).collect()
}

#[test]
fn a_page_header_listing_endless_fields_past_the_end_is_refused_at_once() {
    // A data page header whose unknown field declares a huge list of byte
    // strings: the parquet decoder skipped it one empty read at a time (46 s
    // for this 19 KB shard). Every page header is now walked first, and a
    // list declaring more elements than bytes remain is refused at its header.
    let (reader, errors) = read_every_column(&fixture("obs_shard_endless_skip.bin"));
    assert!(
        errors.iter().any(|e| e.contains("elements declared")),
        "{errors:#?}"
    );
    assert!(panics(&errors).is_empty(), "{errors:#?}");
    // `verify` decodes the whole shard through the same reader; it stops at
    // the first damaged column of the first row group.
    assert!(reader.verify().is_err());
}

#[test]
fn a_footer_listing_billions_of_booleans_is_refused_at_once() {
    // Footer metadata of 109 bytes from fuzzing the footer decoder: lists of
    // two billion booleans each, which the parquet crate skips without
    // reading a byte per element. Its release build spends 6.6 s on this
    // footer and 102 s on a crafted 98-byte one (fifteen such lists); the
    // time grows with the footer's length, to hours for a few kilobytes.
    let dir = testdata().join("deltacells/datasets/small_obs");
    let good = std::fs::read(dir.join(shard_key(0))).unwrap();
    let meta_len = u32::from_le_bytes(good[good.len() - 8..good.len() - 4].try_into().unwrap());
    let mut shard = good[..good.len() - 8 - meta_len as usize].to_vec();
    let footer = fixture("footer_endless_bools.bin");
    shard.extend_from_slice(&footer);
    shard.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    shard.extend_from_slice(b"PAR1");
    let (store, manifest) = with_shard(&shard);
    let reader = ObsReader::open(Arc::new(store), &manifest).unwrap();
    let tiles = manifest.obs.as_ref().unwrap().tiles_per_file as usize;
    let column = &reader.schema().columns[0].name;
    let e = reader
        .read_column(column, 0..tiles)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("footer metadata: thrift:") && e.contains("elements declared"),
        "{e}"
    );
    let e = reader.verify().unwrap_err().to_string();
    assert!(e.contains("elements declared"), "{e}");
}

#[test]
fn a_shard_that_made_the_parquet_decoder_panic_gives_obs_errors() {
    // Data pages that use a dictionary their column chunk never defined: the
    // parquet crate panicked ("Decoder for dict should have been set"),
    // which the guard around every decode turned into an obs error. Its page
    // headers are damaged too, so the page walk now refuses it first.
    let (reader, errors) = read_every_column(&fixture("obs_shard_dictionary_panic.bin"));
    assert!(!errors.is_empty());
    assert!(
        errors
            .iter()
            .all(|e| e.starts_with("invalid dataset: obs:")),
        "{errors:#?}"
    );
    assert!(panics(&errors).is_empty(), "{errors:#?}");
    assert!(reader.verify().is_err());
}

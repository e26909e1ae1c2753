//! An obs shard (Parquet) on arbitrary bytes, in a real dataset whose manifest
//! is made to match it (size, SHA-256, fingerprint), so mutations reach the
//! footer, schema and row-group checks and the column decoder: never a panic
//! (a damaged shard is an error), and a shard that verifies reads every column.

#![no_main]

#[path = "shared/caught_panics.rs"]
mod caught_panics;
#[path = "shared/small_obs.rs"]
mod small_obs;

use std::sync::Arc;

use deltacells::format::manifest::Manifest;
use deltacells::obs::{fingerprint, sha256_hex, shard_key, ObsReader, SCHEMA_KEY};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    caught_panics::allow();
    let mut manifest = Manifest::parse(small_obs::file("manifest.json")).expect("valid manifest");
    let n_tiles = manifest.n_tiles();
    let obs = manifest.obs.as_mut().expect("the dataset has obs");
    obs.shard_bytes[0] = data.len() as u64;
    obs.shard_sha256[0] = sha256_hex(data);
    let schema = std::str::from_utf8(small_obs::file(SCHEMA_KEY)).expect("UTF-8 schema");
    obs.fingerprint = fingerprint(schema, &manifest.tile_cells, &obs.shard_sha256);
    let tiles = (obs.tiles_per_file as usize).min(n_tiles);
    let store = small_obs::store();
    store.insert(shard_key(0), data);
    let reader = ObsReader::open(Arc::new(store), &manifest).expect("only the shard changed");
    let verified = reader.verify().is_ok();
    for column in &reader.schema().columns {
        let read = reader.read_column(&column.name, 0..tiles);
        assert!(
            read.is_ok() || !verified,
            "{}: {:?}",
            column.name,
            read.err()
        );
    }
});

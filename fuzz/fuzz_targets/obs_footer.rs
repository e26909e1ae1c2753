//! Parquet footer metadata on arbitrary bytes, closing obs shard 0 of a real
//! dataset (the shard's pages kept, the manifest made to match): the bounded
//! Thrift walk, the parquet crate's footer decoder and schema conversion, the
//! footer's checks against the schema and tiles, then one column read. Never
//! a panic or a hang. Mutating only the footer reaches its decoder far more
//! often than mutating whole shards: this is how a footer that held the
//! decoder for 24 s was found.

#![no_main]

#[path = "shared/caught_panics.rs"]
mod caught_panics;
#[path = "shared/small_obs.rs"]
mod small_obs;

use std::sync::Arc;

use deltacells::format::manifest::Manifest;
use deltacells::obs::{fingerprint, sha256_hex, shard_key, ObsReader, SCHEMA_KEY};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|footer: &[u8]| {
    caught_panics::allow();
    let good = small_obs::file("obs/obs_0000.parquet");
    let meta_len = u32::from_le_bytes(good[good.len() - 8..good.len() - 4].try_into().unwrap());
    let mut shard = good[..good.len() - 8 - meta_len as usize].to_vec();
    shard.extend_from_slice(footer);
    shard.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    shard.extend_from_slice(b"PAR1");

    let mut manifest = Manifest::parse(small_obs::file("manifest.json")).expect("valid manifest");
    let n_tiles = manifest.n_tiles();
    let obs = manifest.obs.as_mut().expect("the dataset has obs");
    obs.shard_bytes[0] = shard.len() as u64;
    obs.shard_sha256[0] = sha256_hex(&shard);
    let schema = std::str::from_utf8(small_obs::file(SCHEMA_KEY)).expect("UTF-8 schema");
    obs.fingerprint = fingerprint(schema, &manifest.tile_cells, &obs.shard_sha256);
    let tiles = (obs.tiles_per_file as usize).min(n_tiles);
    let store = small_obs::store();
    store.insert(shard_key(0), &shard);
    let reader = ObsReader::open(Arc::new(store), &manifest).expect("only the shard changed");
    let column = reader.schema().columns[0].name.clone();
    let _ = reader.read_column(&column, 0..tiles);
});

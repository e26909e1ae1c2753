//! The shared test data's `small_obs` dataset (tiles, side files and obs),
//! compiled into the fuzz targets that need a real dataset around the part
//! they mutate. It lies beside the repository, where the tests read it too.

// Each target that includes this uses only part of it.
#![allow(dead_code)]

use deltacells::dataset::{MemoryStore, OpenOptions};
use deltacells::engine::EngineConfig;

macro_rules! file {
    ($key:literal) => {
        (
            $key,
            include_bytes!(concat!(
                "../../../../shared/testdata/deltacells/datasets/small_obs/",
                $key
            )) as &[u8],
        )
    };
}

/// Every file of the dataset by store key.
pub const FILES: &[(&str, &[u8])] = &[
    file!("manifest.json"),
    file!("gene_order.npy"),
    file!("var_names.txt"),
    file!("var.parquet"),
    file!("tiles/tile_000000.dct"),
    file!("tiles/tile_000001.dct"),
    file!("tiles/tile_000002.dct"),
    file!("obs/schema.json"),
    file!("obs/obs_0000.parquet"),
    file!("obs/obs_0001.parquet"),
];

/// The file stored under `key`.
pub fn file(key: &str) -> &'static [u8] {
    FILES
        .iter()
        .find(|(k, _)| *k == key)
        .expect("a dataset file")
        .1
}

/// A memory store holding the whole dataset.
pub fn store() -> MemoryStore {
    let store = MemoryStore::new();
    for (key, bytes) in FILES {
        store.insert(*key, bytes);
    }
    store
}

/// One unpinned worker and one fetch thread: a fuzz run opens a dataset
/// per input, and each input then starts and joins two threads only.
pub fn options() -> OpenOptions {
    OpenOptions::default()
        .with_engine(EngineConfig::default().with_threads(1).with_pin(false))
        .with_fetch_in_flight(1)
        .with_cache_bytes(16 << 20)
}

//! A localized obs cache file (Arrow IPC) on arbitrary bytes, placed where
//! `localize` looks for it: never a panic, and whatever the file holds,
//! `localize` succeeds (a damaged file is replaced from the shards) with
//! exactly the column's true values.

#![no_main]

#[path = "shared/caught_panics.rs"]
mod caught_panics;
#[path = "shared/small_obs.rs"]
mod small_obs;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use deltacells::dataset::Dataset;
use deltacells::obs::{cache_root, quote_name, Labels};
use libfuzzer_sys::fuzz_target;

struct Setup {
    dataset: Dataset,
    cache: PathBuf,
    /// Each column's true labels for every cell.
    truth: Vec<(String, Labels)>,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let dataset = Dataset::open_store(Arc::new(small_obs::store()), small_obs::options())
            .expect("small_obs opens");
        let cache =
            std::env::temp_dir().join(format!("deltacells-fuzz-obs-{}", std::process::id()));
        let reader = dataset.obs().expect("obs");
        let cells: Vec<u64> = (0..dataset.n_cells()).collect();
        let truth = reader
            .schema()
            .columns
            .iter()
            .map(|c| {
                let local = reader
                    .localize(&[&c.name], Some(cache.as_path()))
                    .expect("localize");
                (c.name.clone(), local.labels(&cells).expect("labels"))
            })
            .collect();
        Setup {
            dataset,
            cache,
            truth,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    caught_panics::allow();
    let s = setup();
    let reader = s.dataset.obs().expect("obs");
    let (name, truth) = &s.truth[data.len() % s.truth.len()];
    let dir = cache_root(Some(s.cache.as_path()))
        .expect("cache root")
        .join(reader.fingerprint())
        .join("obs");
    std::fs::write(dir.join(format!("{}.arrow", quote_name(name))), data).expect("write");
    let local = reader
        .localize(&[name], Some(s.cache.as_path()))
        .expect("a damaged cache file is replaced");
    let cells: Vec<u64> = (0..s.dataset.n_cells()).collect();
    assert_eq!(&local.labels(&cells).expect("labels"), truth, "{name}");
});

//! `manifest.json` on arbitrary bytes, opened with `Dataset::open` over a
//! memory store holding a real dataset's other files: never a panic, an
//! abort or an allocation sized by a claimed count; whatever opens can be
//! read (a range, single cells, the first training batch) without one.

#![no_main]

#[path = "shared/caught_panics.rs"]
mod caught_panics;
#[path = "shared/small_obs.rs"]
mod small_obs;

use std::sync::Arc;

use deltacells::dataset::{BatchConfig, Dataset};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    caught_panics::allow();
    let store = small_obs::store();
    store.insert("manifest.json", data);
    let Ok(ds) = Dataset::open_store(Arc::new(store), small_obs::options()) else {
        return;
    };
    let n = ds.n_cells();
    let _ = ds.read(0..n.min(40)).csr::<i32>();
    let _ = ds.read(&[n.saturating_sub(1), n / 2, n]).csr::<f32>();
    let ds = Arc::new(ds);
    if let Ok(mut batches) = ds.batches(BatchConfig::default().with_batch_size(32).with_prefetch(0))
    {
        let _ = batches.next();
    }
});

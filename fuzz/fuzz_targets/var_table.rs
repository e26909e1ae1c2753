//! `var.parquet` on arbitrary bytes, in a real dataset: the footer walk,
//! the decoders, the pandas metadata and the listed categories read by
//! `Dataset::var_table`, then the table taken as a writer's `VarTable`.
//! Never a panic; a table that reads writes a `var.parquet` that reads
//! back to the same table.

#![no_main]

#[path = "shared/caught_panics.rs"]
mod caught_panics;
#[path = "shared/small_obs.rs"]
mod small_obs;

use std::sync::Arc;

use deltacells::dataset::Dataset;
use deltacells::obs::VarTable;
use libfuzzer_sys::fuzz_target;

/// The gene table of the dataset with `var` as its `var.parquet`.
fn table(var: &[u8]) -> Option<VarTable> {
    let store = small_obs::store();
    store.insert("var.parquet", var);
    let ds = Dataset::open_store(Arc::new(store), small_obs::options()).ok()?;
    let frame = ds.var_table().ok()??;
    VarTable::from_frame(&frame).ok()
}

fuzz_target!(|data: &[u8]| {
    caught_panics::allow();
    let Some(read) = table(data) else {
        return;
    };
    let written = read.to_parquet(None).expect("a table read writes");
    let again = table(&written).expect("a written table reads");
    assert_eq!(
        again.to_parquet(None).expect("a table read writes"),
        written,
        "a written table reads back the same"
    );
});

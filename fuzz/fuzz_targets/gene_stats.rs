//! Gene medians read from a gene statistics file (`gene_stats.parquet`) on
//! arbitrary bytes (seeded with what `deltacells stats` writes): never a
//! panic that escapes, and every median read is a number.

#![no_main]

#[path = "shared/caught_panics.rs"]
mod caught_panics;

use deltacells::tokenize::GeneMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The parquet decoder runs guarded: its panics on corrupt data are errors.
    caught_panics::allow();
    if let Ok(medians) = GeneMap::<f64>::from_gene_stats(data) {
        assert!(medians.iter().all(|(_, m)| !m.is_nan()));
    }
});

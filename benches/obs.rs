//! The cost of labels: one epoch of training batches with and without three
//! obs columns (two categories and one numeric) requested, on realistic
//! synthetic counts (8,192 cells x 36,601 genes, ~2,000 nonzeros per cell,
//! 1,024-cell tiles, batches of 256). The obs cache is warm, as it is from the
//! second epoch on; creating the iterator (mapping and checking the cached
//! columns) is inside the measured epoch. Separate lines time the label
//! gather alone and the warm localize (map and check the cached columns).

use std::sync::Arc;

use arrow_array::Int64Array;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use deltacells::dataset::{BatchConfig, Dataset, DatasetWriter, Shuffle, WriterConfig};
use deltacells::obs::{ObsColumn, ObsConfig};
use deltacells::synth::{Synth, SynthConfig};

#[path = "common/plots.rs"]
mod plots;

const CELLS: usize = 8192;
const COLUMNS: [&str; 3] = ["cell_type", "batch", "n_counts"];

fn dataset(dir: &std::path::Path) -> Arc<Dataset> {
    let synth = Synth::new(SynthConfig::default());
    let types = ["T", "B", "NK", "Mono", "DC", "Plt"];
    let columns = vec![
        ObsColumn::categorical(
            "cell_type",
            (0..CELLS).map(|c| Some(types[c * 7 % types.len()])),
        ),
        ObsColumn::categorical("batch", (0..CELLS).map(|c| Some(format!("batch{}", c % 4)))),
        ObsColumn::from_arrow(
            "n_counts",
            Arc::new(Int64Array::from_iter_values(
                (0..CELLS as i64).map(|c| 1000 + c),
            )),
        )
        .unwrap(),
        ObsColumn::string(
            "barcode",
            (0..CELLS).map(|c| Some(format!("AAACCTG{c:09}-1"))),
        ),
    ];
    let config = WriterConfig::default()
        .with_tile_size(1024)
        .with_level(3)
        .with_obs(Some(ObsConfig::new(columns)));
    let mut writer =
        DatasetWriter::create(dir, SynthConfig::default().n_genes, config).expect("writer");
    for first in (0..CELLS).step_by(1024) {
        writer
            .push(synth.block(first as u64, 1024).as_ref())
            .expect("push");
    }
    writer.finish().expect("finish");
    Arc::new(Dataset::open(dir).expect("open"))
}

fn epoch(ds: &Arc<Dataset>, config: &BatchConfig) -> usize {
    ds.batches(config.clone())
        .expect("iterator")
        .map(|b| b.expect("batch").cells.len())
        .sum()
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("deltacells-bench-obs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ds = dataset(&dir.join("ds"));
    let plain = BatchConfig::default()
        .with_batch_size(256)
        .with_shuffle(Shuffle::Block { window_tiles: 2 });
    let labelled = plain
        .clone()
        .with_obs_columns(COLUMNS.iter().map(|s| s.to_string()).collect())
        .with_obs_cache_dir(Some(dir.join("cache")));
    // Warm the obs cache (the first epoch's one-time fetch).
    assert_eq!(epoch(&ds, &labelled), CELLS);

    let mut g = c.benchmark_group("epoch");
    g.throughput(Throughput::Elements(CELLS as u64));
    g.sample_size(10);
    g.bench_function("no-obs", |b| b.iter(|| epoch(&ds, &plain)));
    g.bench_function("obs-3-columns", |b| b.iter(|| epoch(&ds, &labelled)));
    g.finish();

    let obs = ds.obs().expect("obs");
    let cache = dir.join("cache");
    let local = obs.localize(&COLUMNS, Some(&cache)).expect("localize");
    let cells: Vec<u64> = (0..256u64).map(|i| i * 31 % CELLS as u64).collect();
    let mut g = c.benchmark_group("labels");
    g.throughput(Throughput::Elements(cells.len() as u64));
    g.bench_function("gather-3-columns-256-cells", |b| {
        b.iter(|| local.labels(&cells).expect("labels"))
    });
    g.finish();
    let mut g = c.benchmark_group("localize");
    g.bench_function("warm-3-columns", |b| {
        b.iter(|| obs.localize(&COLUMNS, Some(&cache)).expect("localize"))
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group! {
    name = benches;
    config = plots::plots(Criterion::default());
    targets = bench
}
criterion_main!(benches);

//! Obs round trips of every kind through writer -> localize -> batch labels;
//! a scan that requests no obs reads no Parquet byte, and localizing reads
//! only footers and the requested column's chunks; var.parquet round trips in
//! output column order.

mod obs_common;

use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use deltacells::dataset::{
    AlignedBytes, BatchConfig, Dataset, DatasetWriter, LocalStore, OpenOptions, Shuffle, Store,
    WriterConfig,
};
use deltacells::obs::{Kind, ObsColumn, ObsConfig, ObsType, VarTable};
use obs_common::{all_kinds, counts, write_dataset, Scratch};
use serde_json::Value;

const N: usize = 1000;

#[test]
fn every_kind_round_trips_through_batch_labels() {
    let dir = Scratch::new("obs-rt");
    let (columns, expected) = all_kinds(N);
    let ds = Arc::new(write_dataset(&dir.path().join("ds"), N, 64, 3, columns));
    ds.verify().unwrap();
    let obs = ds.obs().unwrap();
    assert_eq!(obs.n_shards(), 6, "16 tiles at 3 per shard");
    let kinds: Vec<(&str, Kind, ObsType, Option<usize>)> = obs
        .schema()
        .columns
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.kind,
                c.arrow_type,
                c.categories.as_ref().map(|v| v.len()),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("cluster", Kind::Category, ObsType::Int16, Some(200)),
            ("barcode", Kind::String, ObsType::String, None),
            ("kind", Kind::Category, ObsType::Int8, Some(3)),
            ("nothing", Kind::Category, ObsType::Int8, Some(0)),
            ("note", Kind::String, ObsType::String, None),
            ("no_numbers", Kind::Numeric, ObsType::Float64, None),
            ("score", Kind::Numeric, ObsType::Float32, None),
            ("n_counts", Kind::Numeric, ObsType::Int64, None),
            ("lane", Kind::Numeric, ObsType::UInt8, None),
            ("is_doublet", Kind::Bool, ObsType::Bool, None),
            ("../x", Kind::Numeric, ObsType::Int32, None),
        ]
    );

    let names: Vec<String> = expected.iter().map(|(n, _)| n.clone()).collect();
    let cache = dir.path().join("cache");
    let config = BatchConfig::default()
        .with_batch_size(37)
        .with_shuffle(Shuffle::Block { window_tiles: 3 })
        .with_seed(5)
        .with_obs_columns(names.clone())
        .with_obs_cache_dir(Some(cache.clone()));
    let mut seen = HashSet::new();
    for batch in ds.batches(config).unwrap() {
        let batch = batch.unwrap();
        assert_eq!(batch.labels.columns().len(), names.len());
        for (label, (name, want)) in batch.labels.columns().iter().zip(&expected) {
            assert_eq!(&label.name, name);
            assert_eq!(label.len(), batch.cells.len());
            for (row, &cell) in batch.cells.iter().enumerate() {
                assert_eq!(
                    label.json_value(row),
                    want[cell as usize],
                    "column {name}, cell {cell}"
                );
            }
        }
        let codes = batch.labels.get("cluster").unwrap().codes().unwrap();
        for (row, &cell) in batch.cells.iter().enumerate() {
            assert_eq!(
                codes[row],
                if cell % 13 == 0 {
                    -1
                } else {
                    (cell * 7 % 200) as i32
                }
            );
        }
        seen.extend(batch.cells);
    }
    assert_eq!(seen.len(), N);

    // `../x` stays inside the cache folder.
    let local = obs.localize(&["../x"], Some(&cache)).unwrap();
    let path = local.path("../x").unwrap();
    assert_eq!(
        path.parent().unwrap(),
        cache.join(obs.fingerprint()).join("obs")
    );
    assert_eq!(path.file_name().unwrap(), "..%2Fx.arrow");
    assert_eq!(local.report().reused, vec!["../x".to_string()]);
}

#[test]
fn read_cells_with_labels_keeps_request_order() {
    let dir = Scratch::new("obs-read");
    let (columns, expected) = all_kinds(N);
    let ds = write_dataset(&dir.path().join("ds"), N, 100, 4, columns);
    let local = ds
        .obs()
        .unwrap()
        .localize(
            &["note", "cluster", "score"],
            Some(&dir.path().join("cache")),
        )
        .unwrap();
    let cells = [999u64, 0, 5, 5, 640, 100];
    let labels = local.labels(&cells).unwrap();
    let names: Vec<&str> = labels.columns().iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["note", "cluster", "score"]);
    for label in labels.columns() {
        let want = &expected.iter().find(|(n, _)| *n == label.name).unwrap().1;
        for (row, &c) in cells.iter().enumerate() {
            assert_eq!(label.json_value(row), want[c as usize]);
        }
    }
    assert!(local.labels(&[N as u64]).is_err());
    assert!(local
        .labels(&[])
        .unwrap()
        .columns()
        .iter()
        .all(|l| l.is_empty()));
}

#[test]
fn requests_the_dataset_cannot_serve_are_refused() {
    let dir = Scratch::new("obs-refuse");
    let (columns, _) = all_kinds(50);
    let ds = Arc::new(write_dataset(&dir.path().join("ds"), 50, 16, 2, columns));
    let cache = Some(dir.path().join("cache"));
    let with = |cols: &[&str]| {
        BatchConfig::default()
            .with_obs_columns(cols.iter().map(|s| s.to_string()).collect())
            .with_obs_cache_dir(cache.clone())
    };
    let err = ds.batches(with(&["no such"])).err().unwrap().to_string();
    assert!(err.contains("no such"), "{err}");
    let err = ds
        .batches(with(&["note", "note"]))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("twice"), "{err}");

    let plain = dir.path().join("plain");
    let mut w =
        DatasetWriter::create(&plain, 40, WriterConfig::default().with_tile_size(16)).unwrap();
    w.push(counts(20, 40).as_ref()).unwrap();
    w.finish().unwrap();
    let plain = Arc::new(Dataset::open(&plain).unwrap());
    assert!(plain.obs().is_none());
    assert!(plain.batches(with(&["note"])).is_err());
}

#[test]
fn the_writer_refuses_bad_obs_and_leaves_no_manifest() {
    let dir = Scratch::new("obs-bad");
    let write = |name: &str, columns: Vec<ObsColumn>| {
        let out = dir.path().join(name);
        let config = WriterConfig::default()
            .with_tile_size(8)
            .with_obs(Some(ObsConfig::new(columns)));
        let mut w = DatasetWriter::create(&out, 40, config).unwrap();
        w.push(counts(20, 40).as_ref()).unwrap();
        let result = w.finish();
        assert!(!out.join("manifest.json").exists());
        result.unwrap_err().to_string()
    };
    let short = ObsColumn::string("s", (0..19).map(|_| Some("x")));
    assert!(write("short", vec![short]).contains("19 values for 20 cells"));
    let twice = vec![
        ObsColumn::bool("b", (0..20).map(|_| None)),
        ObsColumn::bool("b", (0..20).map(|_| None)),
    ];
    assert!(write("twice", twice).contains("twice"));
    assert!(write("none", vec![]).contains("at least one column"));
}

/// A store that counts and logs every Parquet byte read through it.
struct Counting {
    inner: LocalStore,
    parquet_bytes: AtomicU64,
    reads: Mutex<Vec<(String, Range<u64>)>>,
}

impl Counting {
    fn log(&self, key: &str, range: Range<u64>) {
        if key.ends_with(".parquet") {
            self.parquet_bytes
                .fetch_add(range.end - range.start, Ordering::SeqCst);
            self.reads.lock().unwrap().push((key.to_string(), range));
        }
    }
}

impl Store for Counting {
    fn size(&self, key: &str) -> deltacells::Result<Option<u64>> {
        self.inner.size(key)
    }

    fn get(&self, key: &str) -> deltacells::Result<Option<AlignedBytes>> {
        let got = self.inner.get(key)?;
        if let Some(b) = &got {
            self.log(key, 0..b.len() as u64);
        }
        Ok(got)
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> deltacells::Result<AlignedBytes> {
        self.log(key, range.clone());
        self.inner.get_range(key, range)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

#[test]
fn a_scan_without_obs_reads_no_parquet_byte_and_localize_reads_each_shard_once() {
    let dir = Scratch::new("obs-count");
    let (mut columns, expected) = all_kinds(N);
    // Incompressible filler: the shards are mostly bytes of other columns.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let filler = (0..N).map(|_| {
        (0..300)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'a' + (state % 26) as u8)
            })
            .collect::<String>()
    });
    columns.push(ObsColumn::string("filler", filler.map(Some)));
    let root = dir.path().join("ds");
    drop(write_dataset(&root, N, 64, 3, columns));
    let store = Arc::new(Counting {
        inner: LocalStore::new(&root),
        parquet_bytes: AtomicU64::new(0),
        reads: Mutex::new(vec![]),
    });
    let ds = Arc::new(Dataset::open_store(store.clone(), OpenOptions::default()).unwrap());

    let mut cells = 0;
    for batch in ds
        .batches(BatchConfig::default().with_batch_size(100))
        .unwrap()
    {
        let batch = batch.unwrap();
        assert!(batch.labels.is_empty());
        cells += batch.cells.len();
    }
    assert_eq!(cells, N);
    assert_eq!(
        store.parquet_bytes.load(Ordering::SeqCst),
        0,
        "a scan without obs read Parquet bytes"
    );

    // Localizing one column reads the shards, and iterating reads nothing more.
    let config = BatchConfig::default()
        .with_batch_size(100)
        .with_obs_columns(vec!["cluster".into()])
        .with_obs_cache_dir(Some(dir.path().join("cache")));
    let batches = ds.batches(config).unwrap();
    let after_localize = store.parquet_bytes.load(Ordering::SeqCst);
    assert!(after_localize > 0);
    for batch in batches {
        let batch = batch.unwrap();
        let want = &expected[0].1;
        for (row, &c) in batch.cells.iter().enumerate() {
            assert_eq!(batch.labels.columns()[0].json_value(row), want[c as usize]);
        }
    }
    assert_eq!(
        store.parquet_bytes.load(Ordering::SeqCst),
        after_localize,
        "iteration read Parquet bytes"
    );

    // Localizing checks every shard against its SHA-256 before caching a
    // column from it: each shard is read once, whole, and nothing else.
    let obs = ds.obs().unwrap();
    let mut reads = store.reads.lock().unwrap().clone();
    reads.sort_by(|a, b| a.0.cmp(&b.0));
    let expected: Vec<(String, Range<u64>)> = (0..obs.n_shards())
        .map(|s| {
            let key = format!("obs/obs_{s:04}.parquet");
            let len = std::fs::metadata(root.join(&key)).unwrap().len();
            (key, 0..len)
        })
        .collect();
    assert_eq!(reads, expected);
    assert_eq!(after_localize, obs.shard_bytes());
}

#[test]
fn var_table_round_trips_in_output_column_order() {
    let dir = Scratch::new("obs-var");
    let n_genes = 40u32;
    let ids: Vec<String> = (0..n_genes).map(|g| format!("ENSG{g:011}")).collect();
    let names: Vec<String> = (0..n_genes).map(|g| format!("Gene-{g}")).collect();
    let types: Vec<String> = (0..n_genes)
        .map(|g| {
            if g % 10 == 0 {
                "Antibody Capture"
            } else {
                "Gene Expression"
            }
            .to_string()
        })
        .collect();
    let totals: Vec<f64> = (0..n_genes).map(|g| f64::from((g * 17) % 23)).collect();
    let config = WriterConfig::default()
        .with_tile_size(8)
        .with_gene_totals(Some(totals))
        .with_var_names(Some(names.clone()))
        .with_var_table(Some(
            VarTable::from_features(ids.clone(), names.clone(), types.clone()).unwrap(),
        ));
    let out = dir.path().join("ds");
    let mut w = DatasetWriter::create(&out, n_genes, config).unwrap();
    w.push(counts(30, n_genes).as_ref()).unwrap();
    w.finish().unwrap();
    let ds = Dataset::open(&out).unwrap();
    ds.verify().unwrap();
    assert!(ds.manifest().has_var_table);
    let order = ds.gene_order().unwrap().to_vec();
    assert_ne!(order, (0..n_genes as i32).collect::<Vec<_>>());
    let var = ds.var_table().unwrap().unwrap();
    assert_eq!(var.index_columns, vec!["gene_ids".to_string()]);
    let column = |name: &str| -> Vec<String> {
        let a = var.table.column_by_name(name).unwrap();
        (0..a.len())
            .map(|i| {
                deltacells::obs::json_value(a.as_ref(), None, i)
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    let permuted = |v: &[String]| {
        order
            .iter()
            .map(|&g| v[g as usize].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(column("gene_ids"), permuted(&ids));
    assert_eq!(column("gene_name"), permuted(&names));
    assert_eq!(ds.var_names().unwrap(), permuted(&names).as_slice());
    let field_names: Vec<&str> = var
        .table
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(field_names, ["gene_name", "feature_types", "gene_ids"]);
    let types_col = var.table.column_by_name("feature_types").unwrap();
    let dict = arrow_array::cast::AsArray::as_any_dictionary(types_col.as_ref());
    assert_eq!(dict.values().len(), 2);
    let got_types: Vec<Value> = dict
        .normalized_keys()
        .iter()
        .map(|&k| deltacells::obs::json_value(dict.values().as_ref(), None, k))
        .collect();
    assert_eq!(
        got_types,
        permuted(&types)
            .into_iter()
            .map(Value::from)
            .collect::<Vec<_>>()
    );
    assert!(VarTable::from_features(ids, names, vec![]).is_err());
}

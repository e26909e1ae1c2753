//! The storage layer under the dataset writer and the obs cache: atomic,
//! durable, exclusive writes on any store, and a node cache that a killed
//! job cannot jam.

mod obs_common;

use std::ops::Range;
use std::sync::{Arc, Mutex};

use deltacells::dataset::{Dataset, DatasetWriter, OpenOptions, WriterConfig};
use deltacells::obs::{quote_name, ObsColumn, ObsConfig};
use deltacells::storage::{self, AlignedBytes, MemoryStore, Store, StoreLock};
use obs_common::{counts, write_dataset, Scratch};
use parquet::file::metadata::ParquetMetaDataReader;

/// A memory store that logs every put and sync, in order.
struct Recording {
    inner: MemoryStore,
    log: Mutex<Vec<String>>,
}

impl Store for Recording {
    fn size(&self, key: &str) -> deltacells::Result<Option<u64>> {
        self.inner.size(key)
    }
    fn get(&self, key: &str) -> deltacells::Result<Option<AlignedBytes>> {
        self.inner.get(key)
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> deltacells::Result<AlignedBytes> {
        self.inner.get_range(key, range)
    }
    fn put(&self, key: &str, bytes: &[u8]) -> deltacells::Result<()> {
        self.log.lock().unwrap().push(format!("put {key}"));
        self.inner.put(key, bytes)
    }
    fn sync(&self, dir: &str) -> deltacells::Result<()> {
        self.log.lock().unwrap().push(format!("sync {dir}"));
        Ok(())
    }
    fn lock_exclusive(&self) -> deltacells::Result<StoreLock> {
        self.log.lock().unwrap().push("lock".into());
        Ok(StoreLock::none())
    }
    fn describe(&self) -> String {
        "recording".into()
    }
}

#[test]
fn finish_makes_every_object_durable_before_the_manifest_and_the_manifest_before_returning() {
    let store = Arc::new(Recording {
        inner: MemoryStore::new(),
        log: Mutex::new(vec![]),
    });
    let config = WriterConfig::default()
        .with_tile_size(16)
        .with_n_chunks(2)
        .with_level(1)
        .with_gene_totals(Some((0..40).map(f64::from).collect()))
        .with_obs(Some(ObsConfig::new(vec![ObsColumn::bool(
            "b",
            (0..50).map(|i| Some(i % 3 == 0)),
        )])));
    let mut w = DatasetWriter::create_in(store.clone(), 40, config).unwrap();
    w.push(counts(50, 40).as_ref()).unwrap();
    w.finish().unwrap();
    let log = store.log.lock().unwrap().clone();
    assert_eq!(log.first().map(String::as_str), Some("lock"));
    let at = |entry: &str| {
        log.iter()
            .position(|e| e == entry)
            .unwrap_or_else(|| panic!("{entry} missing: {log:?}"))
    };
    let manifest = at("put manifest.json");
    let last_put = |prefix: &str| {
        log.iter()
            .rposition(|e| e.starts_with(&format!("put {prefix}")) && e != "put manifest.json")
            .unwrap()
    };
    // tiles/ and obs/ synced after their last put, the root after every
    // other put, all before the manifest; the root again after it.
    assert!(
        last_put("tiles/") < at("sync tiles") && at("sync tiles") < manifest,
        "{log:?}"
    );
    assert!(
        last_put("obs/") < at("sync obs") && at("sync obs") < manifest,
        "{log:?}"
    );
    assert!(last_put("") < manifest);
    let root_syncs: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| *e == "sync ")
        .map(|(i, _)| i)
        .collect();
    assert!(
        root_syncs.iter().any(|&i| i > last_put("") && i < manifest),
        "{log:?}"
    );
    assert_eq!(log.last().map(String::as_str), Some("sync "), "{log:?}");
    let ds = Dataset::open_store(store.clone(), OpenOptions::default()).unwrap();
    assert_eq!(ds.n_cells(), 50);
    ds.verify().unwrap();
}

#[test]
fn two_writers_never_share_a_directory() {
    let dir = Scratch::new("two-writers");
    let out = dir.path().join("ds");
    let config = || {
        WriterConfig::default()
            .with_tile_size(8)
            .with_n_chunks(1)
            .with_level(1)
    };
    let mut first = DatasetWriter::create(&out, 40, config()).unwrap();
    let second = DatasetWriter::create(&out, 40, config());
    let err = second
        .expect_err("a second writer must be refused")
        .to_string();
    assert!(err.contains("locked by another writer"), "{err}");
    first.push(counts(20, 40).as_ref()).unwrap();
    first.finish().unwrap();
    // The lock went with the writer; the finished dataset is still protected.
    let err = DatasetWriter::create(&out, 40, config())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("already holds a dataset"), "{err}");
    // A writer dropped half-way releases the lock too.
    let other = dir.path().join("other");
    drop(DatasetWriter::create(&other, 40, config()).unwrap());
    DatasetWriter::create(&other, 40, config()).unwrap();
}

#[test]
fn datasets_open_from_paths_file_urls_and_stores_alike() {
    let dir = Scratch::new("locations");
    let out = dir.path().join("ds");
    let url = format!("file://{}", out.display());
    let mut w = DatasetWriter::create(&url, 40, WriterConfig::default().with_tile_size(7)).unwrap();
    w.push(counts(30, 40).as_ref()).unwrap();
    w.finish().unwrap();
    let a = Dataset::open(&out).unwrap();
    let b = Dataset::open(&url).unwrap();
    let c = Dataset::open(out.to_str().unwrap()).unwrap();
    let memory = Arc::new(MemoryStore::from_dir(&out).unwrap());
    let d = Dataset::open_store(memory, OpenOptions::default()).unwrap();
    let all = |ds: &Dataset| ds.read(0..30).csr::<i32>().unwrap().csr;
    assert_eq!(all(&a), all(&b));
    assert_eq!(all(&a), all(&c));
    assert_eq!(all(&a), all(&d));
    assert!(Dataset::open(dir.path().join("missing")).is_err());
    assert!(storage::open("nosuch://bucket/x").is_err());
}

fn dataset_with_filler(dir: &std::path::Path) -> Dataset {
    let n = 200;
    let filler = (0..n).map(|i| Some(format!("{i:0>200}")));
    let columns = vec![
        ObsColumn::bool("small", (0..n).map(|i| Some(i % 2 == 0))),
        ObsColumn::string("filler", filler),
    ];
    write_dataset(dir, n, 50, 4, columns)
}

#[test]
fn a_temporary_file_left_by_a_killed_job_with_the_same_pid_does_not_block_localize() {
    let dir = Scratch::new("stale-tmp");
    let ds = dataset_with_filler(&dir.path().join("ds"));
    let obs = ds.obs().unwrap();
    let cache = dir.path().join("cache");
    let column_dir = cache.join(obs.fingerprint()).join("obs");
    std::fs::create_dir_all(&column_dir).unwrap();
    // What a job with this pid, killed while writing, left behind.
    let name = format!("{}.arrow", quote_name("small"));
    let stale = column_dir.join(format!(".{name}.{}.0.tmp", std::process::id()));
    std::fs::write(&stale, b"half a file").unwrap();
    let local = obs.localize(&["small"], Some(&cache)).unwrap();
    assert_eq!(local.report().fetched, ["small"]);
    assert!(
        !stale.exists(),
        "the stale temporary file was cleaned up under the lock"
    );
    let left: Vec<String> = std::fs::read_dir(&column_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.iter().all(|n| !n.ends_with(".tmp")), "{left:?}");
}

#[test]
fn localize_refuses_a_shard_that_does_not_match_its_sha256() {
    let dir = Scratch::new("obs-sha");
    let root = dir.path().join("ds");
    drop(dataset_with_filler(&root));
    // Damage a byte of the filler column, a column that is not localized.
    let shard = root.join("obs/obs_0000.parquet");
    let mut bytes = std::fs::read(&shard).unwrap();
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::from(bytes.clone()))
        .unwrap();
    let (start, len) = meta.row_group(0).column(1).byte_range();
    bytes[(start + len / 2) as usize] ^= 0x55;
    std::fs::write(&shard, &bytes).unwrap();
    let ds = Dataset::open(&root).unwrap();
    let err = ds
        .obs()
        .unwrap()
        .localize(&["small"], Some(&dir.path().join("cache")))
        .expect_err("a damaged shard must not reach the cache")
        .to_string();
    assert!(
        err.contains("obs_shard_sha256[0]") && err.contains("hashes to"),
        "{err}"
    );
}

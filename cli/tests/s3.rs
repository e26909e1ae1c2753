//! Datasets in S3, against a real server: run by `.ci/s3`, which starts
//! SeaweedFS on 127.0.0.1, uploads the golden datasets with boto3 under
//! `s3://$DELTACELLS_S3_BUCKET/golden/<name>`, and sets the standard AWS
//! variables. Every test is ignored in a plain `cargo test` (there is no
//! server), and fails loudly, rather than passing, if run without one.
#![cfg(feature = "object-store")]

mod common;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use deltacells::dataset::{Dataset, OpenOptions};
use deltacells::format::manifest::DatasetRule;
use deltacells::storage::object::{IoConfig, ObjectStore};
use deltacells::storage::{self, AlignedBytes, LocalStore, Location, Store};
use deltacells::Csr;
use futures_util::stream::BoxStream;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

const NEEDS_SERVER: &str = "needs an S3 server: run .ci/s3";

fn bucket() -> String {
    std::env::var("DELTACELLS_S3_BUCKET").unwrap_or_else(|_| {
        panic!("DELTACELLS_S3_BUCKET is not set: these tests need the server that .ci/s3 starts")
    })
}

fn golden_names() -> Vec<String> {
    let index = common::testdata().join("deltacells/datasets/index.json");
    let list: serde_json::Value = serde_json::from_slice(&std::fs::read(index).unwrap()).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|d| d["dir"].as_str().unwrap().to_string())
        .collect()
}

fn local_golden(name: &str) -> PathBuf {
    common::testdata().join("deltacells/datasets").join(name)
}

fn golden_url(name: &str) -> String {
    format!("s3://{}/golden/{name}", bucket())
}

/// A prefix of its own for each test run.
fn scratch_url(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "s3://{}/scratch/{what}-{}-{nanos}",
        bucket(),
        std::process::id()
    )
}

fn all_cells(ds: &Dataset) -> Csr<i32> {
    ds.read(0..ds.n_cells()).csr::<i32>().unwrap().csr
}

/// Every object of `a` equals the same object of `b`, and both hold the same keys.
fn same_objects(a: &dyn Store, b: &dyn Store) {
    let keys = a.list("").unwrap();
    assert_eq!(
        keys,
        b.list("").unwrap(),
        "{} vs {}",
        a.describe(),
        b.describe()
    );
    assert!(keys.iter().any(|k| k == "manifest.json"));
    for k in keys {
        assert_eq!(
            a.get(&k).unwrap().unwrap().as_bytes(),
            b.get(&k).unwrap().unwrap().as_bytes(),
            "{k}"
        );
    }
}

fn cli() -> Command {
    common::runner::deltacells()
}

/// I/O settings out of bounds are configuration errors before any request
/// (no server needed): a timeout of 1e30 s panicked converting it to a
/// duration, 1e19 s adding it to the clock, and 0.5 attempts made none.
#[test]
fn io_settings_out_of_bounds_are_configuration_errors() {
    for (name, value) in [
        ("DELTACELLS_IO_TIMEOUT", "1e30"),
        ("DELTACELLS_IO_TIMEOUT", "1e19"),
        ("DELTACELLS_IO_TIMEOUT", "0"),
        ("DELTACELLS_IO_LATENCY_MS", "1e30"),
        ("DELTACELLS_IO_ATTEMPTS", "0.5"),
        ("DELTACELLS_IO_IN_FLIGHT", "1e9"),
    ] {
        let out = cli()
            .env(name, value)
            .args(["info", "s3://bucket/prefix"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}={value}: {stderr}");
        assert!(
            stderr.contains(&format!("configuration: {name}=\"{value}\" is not")),
            "{name}={value}: {stderr}"
        );
    }
}

/// A bucket that does not exist is named as the server names it (a GET of
/// the manifest said only that the object was missing, and the dataset was
/// called unfinished); a prefix holding nothing is no dataset.
#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn a_missing_bucket_or_an_empty_prefix_is_named_for_what_it_is() {
    let info = |url: &str| {
        let out = cli().args(["info", url]).output().unwrap();
        assert!(!out.status.success(), "{url}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = info("s3://deltacells-no-such-bucket/x");
    assert!(
        missing.contains("LIST") && missing.contains("deltacells-no-such-bucket"),
        "{missing}"
    );
    assert!(!missing.contains("incomplete"), "{missing}");
    let bucket = std::env::var("DELTACELLS_S3_BUCKET").unwrap();
    let empty = info(&format!("s3://{bucket}/nothing-under-this-prefix"));
    assert!(empty.contains("nothing is stored at"), "{empty}");
}

/// `stats --out` takes an object's URL: the same bytes as the local file
/// (it was taken for a local path, "No such file or directory").
#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn stats_write_to_an_object_url_what_they_write_to_a_file() {
    let name = &golden_names()[0];
    let remote = format!("{}/genes.parquet", scratch_url("stats"));
    let local = std::env::temp_dir().join(format!("dc-s3-stats-{}.parquet", std::process::id()));
    for out in [remote.as_str(), local.to_str().unwrap()] {
        let done = cli()
            .args(["stats", &golden_url(name), "--out", out])
            .output()
            .unwrap();
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
    }
    let (dir, key) = remote.rsplit_once('/').unwrap();
    let store = Location::parse(dir).store().unwrap();
    assert_eq!(
        store.get(key).unwrap().unwrap().as_bytes(),
        std::fs::read(&local).unwrap()
    );
    std::fs::remove_file(local).unwrap();
}

/// An `http://` endpoint is used as named, without `AWS_ALLOW_HTTP` (which
/// every request was refused for, with "builder error").
#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn an_http_endpoint_is_used_without_aws_allow_http() {
    let url = golden_url(&golden_names()[0]);
    let info = |allow_http: Option<&str>| {
        let mut command = cli();
        match allow_http {
            Some(v) => command.env("AWS_ALLOW_HTTP", v),
            None => command.env_remove("AWS_ALLOW_HTTP"),
        };
        command.args(["info", &url]).output().unwrap()
    };
    let out = info(None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!info(Some("false")).status.success());
}

#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn golden_datasets_read_back_from_s3_as_from_the_directory() {
    let names = golden_names();
    assert!(!names.is_empty());
    for name in names {
        let local = Dataset::open(local_golden(&name)).unwrap();
        let remote = Dataset::open(golden_url(&name)).unwrap();
        assert_eq!(local.manifest(), remote.manifest(), "{name}");
        assert_eq!(all_cells(&local), all_cells(&remote), "{name}");
        let cells: Vec<u64> = (0..local.n_cells()).rev().step_by(7).collect();
        assert_eq!(
            local.read(&cells).csr::<f32>().unwrap().csr,
            remote.read(&cells).csr::<f32>().unwrap().csr
        );
        assert_eq!(local.verify().unwrap(), remote.verify().unwrap(), "{name}");
        assert_eq!(local.var_table().unwrap(), remote.var_table().unwrap());
        assert_eq!(local.var_names(), remote.var_names());
        assert_eq!(local.gene_order(), remote.gene_order());
        if let (Some(lo), Some(ro)) = (local.obs(), remote.obs()) {
            let names: Vec<String> = lo.schema().names().into_iter().map(String::from).collect();
            let caches = tempdirs(&name);
            let l = lo.localize(&names, Some(&caches.0)).unwrap();
            let r = ro.localize(&names, Some(&caches.1)).unwrap();
            assert_eq!(l.labels(&cells).unwrap(), r.labels(&cells).unwrap());
            let _ = std::fs::remove_dir_all(caches.0.parent().unwrap());
        }
        let same = |args: &[&str]| {
            let run = |at: &str| {
                let mut full: Vec<&str> = args.to_vec();
                full.insert(1, at);
                let out = cli().args(&full).output().unwrap();
                assert!(
                    out.status.success(),
                    "{full:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8(out.stdout).unwrap()
            };
            let local_dir = local_golden(&name);
            let (l, r) = (run(local_dir.to_str().unwrap()), run(&golden_url(&name)));
            let local_dir = local_dir.display().to_string();
            assert_eq!(
                l.replace(&local_dir, "X"),
                r.replace(&golden_url(&name), "X"),
                "{args:?}"
            );
        };
        same(&["cat", "--cells", "0:50,3,9"]);
        same(&["info", "--verbose"]);
        let verify = cli().args(["verify", &golden_url(&name)]).output().unwrap();
        assert!(
            verify.status.success(),
            "{}",
            String::from_utf8_lossy(&verify.stderr)
        );
    }
}

fn tempdirs(what: &str) -> (PathBuf, PathBuf) {
    let root = std::env::temp_dir().join(format!("deltacells-s3-{what}-{}", std::process::id()));
    (root.join("a"), root.join("b"))
}

#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn convert_to_s3_equals_the_local_conversion() {
    let input = common::testdata().join("deltacells/datasets/small_obs.expected.npz");
    let root = std::env::temp_dir().join(format!("deltacells-s3-convert-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let local = root.join("local");
    let url = scratch_url("convert");
    for out in [local.to_str().unwrap(), url.as_str()] {
        let run = cli()
            .args([
                "convert",
                input.to_str().unwrap(),
                out,
                "--tile-size",
                "128",
                "--quiet",
            ])
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    same_objects(
        &LocalStore::new(&local),
        storage::open(&url).unwrap().as_ref(),
    );
    let verify = cli().args(["verify", &url]).output().unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let (a, b) = (Dataset::open(&local).unwrap(), Dataset::open(&url).unwrap());
    assert_eq!(all_cells(&a), all_cells(&b));
    // A complete dataset is never overwritten.
    let again = cli()
        .args(["convert", input.to_str().unwrap(), &url, "--quiet"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a dataset"));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn a_build_of_inputs_on_s3_into_s3_equals_the_local_build() {
    // One input read from the bucket, one from the directory; the output in
    // the bucket and in a directory: the same objects, and no _build left.
    let inputs = [
        golden_url("small_obs"),
        local_golden("exceptions_70k").display().to_string(),
    ];
    let root = std::env::temp_dir().join(format!("deltacells-s3-build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let local = root.join("local");
    let url = scratch_url("build");
    for out in [local.to_str().unwrap(), url.as_str()] {
        let run = cli()
            .args([
                "convert",
                &inputs[0],
                &inputs[1],
                out,
                "--tiles-per-task",
                "1",
                "--quiet",
            ])
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let remote = storage::open(&url).unwrap();
    same_objects(&LocalStore::new(&local), remote.as_ref());
    assert!(remote.list("_build/").unwrap().is_empty());
    std::fs::remove_dir_all(&root).unwrap();
}

/// The raw S3 client for `url` (endpoint and credentials from the environment).
fn raw_s3() -> Arc<dyn object_store::ObjectStore> {
    deltacells::storage::object::install_tls_provider();
    Arc::new(
        object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket())
            .with_retry(object_store::RetryConfig {
                max_retries: 0,
                ..Default::default()
            })
            .build()
            .unwrap(),
    )
}

/// Fails every `every`-th read request with a transient error.
#[derive(Debug)]
struct Flaky {
    inner: Arc<dyn object_store::ObjectStore>,
    every: usize,
    calls: AtomicUsize,
    failed: AtomicUsize,
}

impl std::fmt::Display for Flaky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Flaky({})", self.inner)
    }
}

impl Flaky {
    fn roll(&self) -> object_store::Result<()> {
        if (self.calls.fetch_add(1, Ordering::SeqCst) + 1).is_multiple_of(self.every) {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Err(object_store::Error::Generic {
                store: "flaky",
                source: "injected failure (connection reset)".into(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl object_store::ObjectStore for Flaky {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.roll()?;
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn a_store_failing_every_third_request_still_yields_exactly_the_right_cells() {
    for name in golden_names() {
        let flaky = Arc::new(Flaky {
            inner: raw_s3(),
            every: 3,
            calls: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
        });
        let config = IoConfig::default().with_backoff(Duration::from_millis(1));
        let store = ObjectStore::new(
            flaky.clone(),
            &format!("golden/{name}"),
            &golden_url(&name),
            config,
        );
        let remote = Dataset::open_store(Arc::new(store), OpenOptions::default()).unwrap();
        let local = Dataset::open(local_golden(&name)).unwrap();
        assert_eq!(all_cells(&local), all_cells(&remote), "{name}");
        assert_eq!(local.verify().unwrap(), remote.verify().unwrap());
        assert!(
            flaky.failed.load(Ordering::SeqCst) > 0,
            "no failure was injected"
        );
    }
}

#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn a_store_that_always_fails_gives_an_error_naming_the_object_and_operation() {
    let flaky = Arc::new(Flaky {
        inner: raw_s3(),
        every: 1,
        calls: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
    });
    let config = IoConfig::default()
        .with_attempts(3)
        .with_backoff(Duration::from_millis(1));
    let store = ObjectStore::new(
        flaky.clone(),
        "golden/small_obs",
        "s3://x/golden/small_obs",
        config,
    );
    let err = Dataset::open_store(Arc::new(store), OpenOptions::default())
        .expect_err("every request fails")
        .to_string();
    assert!(
        err.contains("GET s3://x/golden/small_obs/manifest.json"),
        "{err}"
    );
    assert!(err.contains("after 3 attempts"), "{err}");
    assert_eq!(flaky.failed.load(Ordering::SeqCst), 3);
}

/// A store that counts the bytes and requests of every ranged read.
struct Counting {
    inner: Arc<dyn Store>,
    bytes: AtomicU64,
    requests: AtomicU64,
}

impl Store for Counting {
    fn size(&self, key: &str) -> deltacells::Result<Option<u64>> {
        self.inner.size(key)
    }
    fn get(&self, key: &str) -> deltacells::Result<Option<AlignedBytes>> {
        let got = self.inner.get(key)?;
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.bytes
            .fetch_add(got.as_ref().map_or(0, |b| b.len() as u64), Ordering::SeqCst);
        Ok(got)
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> deltacells::Result<AlignedBytes> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.bytes
            .fetch_add(range.end - range.start, Ordering::SeqCst);
        self.inner.get_range(key, range)
    }
    fn get_range_sized(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> deltacells::Result<(AlignedBytes, u64)> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.bytes
            .fetch_add(range.end - range.start, Ordering::SeqCst);
        self.inner.get_range_sized(key, range)
    }
    fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
    ) -> deltacells::Result<Vec<AlignedBytes>> {
        let merged = storage::coalesce(ranges, storage::COALESCE_GAP);
        self.requests
            .fetch_add(merged.len() as u64, Ordering::SeqCst);
        self.bytes.fetch_add(
            merged.iter().map(|r| r.end - r.start).sum::<u64>(),
            Ordering::SeqCst,
        );
        self.inner.get_ranges(key, ranges)
    }
    fn is_remote(&self) -> bool {
        self.inner.is_remote()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// `N` free TCP ports on the loopback interface, all held open until every one
/// is chosen so none comes back twice.
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<_> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

/// A SeaweedFS server of this test's own (it is stopped mid-test).
struct Server {
    child: Child,
    dir: PathBuf,
    endpoint: String,
}

impl Server {
    fn start(bucket: &str) -> Server {
        let weed = std::env::var("DELTACELLS_WEED")
            .unwrap_or_else(|_| panic!("DELTACELLS_WEED is not set: {NEEDS_SERVER}"));
        let dir = std::env::temp_dir().join(format!("deltacells-weed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // One port per component and one per gRPC service. The gRPC ports are
        // named: left out, the server derives each as its HTTP port + 10000
        // and refuses an HTTP port that equals another component's derived one.
        let ports = free_ports::<10>();
        let s3 = ports[0];
        let arg = |k: &str, v: String| format!("-{k}={v}");
        let components = ["s3", "master", "volume", "filer", "admin"];
        let http = components.iter().zip(&ports[..5]);
        let grpc = components.iter().zip(&ports[5..]);
        let child = Command::new(weed)
            .arg("mini")
            .args(http.map(|(c, p)| arg(&format!("{c}.port"), p.to_string())))
            .args(grpc.map(|(c, p)| arg(&format!("{c}.port.grpc"), p.to_string())))
            .args([
                arg("dir", dir.display().to_string()),
                arg("ip", "127.0.0.1".into()),
                arg("ip.bind", "127.0.0.1".into()),
                arg("admin.ui", "false".into()),
                arg("webdav", "false".into()),
                arg("s3.port.iceberg", "0".into()),
                arg("s3.port.lance", "0".into()),
                arg("bucket", bucket.into()),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Server {
            child,
            dir,
            endpoint: format!("http://127.0.0.1:{s3}"),
        };
        server
    }

    fn store(&self, bucket: &str, prefix: &str, config: IoConfig) -> ObjectStore {
        deltacells::storage::object::install_tls_provider();
        let raw = object_store::aws::AmazonS3Builder::from_env()
            .with_endpoint(&self.endpoint)
            .with_bucket_name(bucket)
            .with_retry(object_store::RetryConfig {
                max_retries: 0,
                ..Default::default()
            })
            .build()
            .unwrap();
        ObjectStore::new(
            Arc::new(raw),
            prefix,
            &format!("s3://{bucket}/{prefix}"),
            config,
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Copies every object of a local dataset into `store`.
fn upload(dir: &Path, store: &dyn Store) {
    let local = LocalStore::new(dir);
    for key in local.list("").unwrap() {
        store
            .put(&key, local.get(&key).unwrap().unwrap().as_bytes())
            .unwrap();
    }
}

#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn a_server_stopped_mid_scan_gives_a_clear_error_within_the_timeout() {
    let mut server = Server::start("faults");
    let config = IoConfig::default().with_timeout(Duration::from_secs(5));
    let store = server.store("faults", "ds", config);
    // The server is starting: wait until a put goes through.
    let started = Instant::now();
    while store.put("probe", b"").is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the server did not start"
        );
    }
    let name = "exceptions_70k";
    upload(&local_golden(name), &store);
    let ds =
        Dataset::open_store(Arc::new(store), OpenOptions::default().with_cache_bytes(0)).unwrap();
    assert!(ds.n_tiles() >= 2);
    ds.read(ds.tile_cells(0).unwrap()).csr::<i32>().unwrap();
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    // The rest of the scan must fail with an error naming what failed, not
    // hang: a generous bound, only to tell a hang from an error.
    let (tx, rx) = std::sync::mpsc::channel();
    let ds = Arc::new(ds);
    let scanner = ds.clone();
    std::thread::spawn(move || {
        let result = (1..scanner.n_tiles())
            .try_for_each(|t| scanner.read(scanner.tile_cells(t)?).csr::<i32>().map(drop));
        let _ = tx.send(result);
    });
    let result = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the scan hung after the server stopped");
    let err = result.expect_err("the server is gone").to_string();
    assert!(err.contains("s3://faults/ds/tiles/tile_0000"), "{err}");
    assert!(err.contains("GET"), "{err}");
}

#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn a_writer_killed_mid_upload_leaves_no_manifest() {
    let url = scratch_url("killed");
    let mut writer = cli()
        .args([
            "demo",
            "--cells",
            "400000",
            "--genes",
            "2000",
            "--tile-size",
            "1024",
            "--level",
            "3",
            "--out",
            &url,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let store = storage::open(&url).unwrap();
    let started = Instant::now();
    // Kill it once some tiles are up, before it can finish.
    while store.list("tiles/").unwrap().len() < 3 {
        assert!(
            writer.try_wait().unwrap().is_none(),
            "the writer finished before it was killed"
        );
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no tile was uploaded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    writer.kill().unwrap();
    writer.wait().unwrap();
    let tiles = store.list("tiles/").unwrap();
    assert!(store.get("manifest.json").unwrap().is_none());
    let err = Dataset::open(&url).expect_err("incomplete").to_string();
    assert!(err.contains("manifest"), "{err}");
    // Every object under a final name is whole: each tile parses and passes its CRC.
    for key in tiles {
        let bytes = store.get(&key).unwrap().unwrap();
        deltacells::format::tile::TileView::parse(bytes.as_bytes())
            .unwrap_or_else(|e| panic!("{key}: {e}"));
    }
}

#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn random_access_fetches_only_the_chunks_it_needs() {
    let name = "exceptions_70k";
    let counting = Arc::new(Counting {
        inner: storage::open(golden_url(name)).unwrap(),
        bytes: AtomicU64::new(0),
        requests: AtomicU64::new(0),
    });
    let ds =
        Dataset::open_store(counting.clone(), OpenOptions::default().with_cache_bytes(0)).unwrap();
    let local = Dataset::open(local_golden(name)).unwrap();
    let cells: Vec<u64> = vec![5, 140, 141, 299];
    counting.bytes.store(0, Ordering::SeqCst);
    let got = ds.read(&cells).csr::<i32>().unwrap();
    assert_eq!(got.csr, local.read(&cells).csr::<i32>().unwrap().csr);
    let fetched = counting.bytes.load(Ordering::SeqCst);
    let needed = needed_bytes(&local, &cells);
    let whole: u64 = ds.manifest().tile_bytes.iter().sum();
    assert!(
        fetched as f64 <= 1.5 * needed as f64,
        "fetched {fetched} bytes for {needed} bytes of chunks (tiles: {whole})"
    );
}

/// A range past an object's end is answered 416, and refused at once,
/// naming the object's size: it was retried as a transient failure until
/// the attempts ran out, and the error said so. A range the object holds
/// in part is cut at its end; one it holds none of is empty.
#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn a_range_past_an_objects_end_is_refused_without_retries() {
    let store = storage::open(golden_url("exceptions_70k")).unwrap();
    let key = deltacells::format::manifest::Manifest::tile_key(0);
    let size = store.size(&key).unwrap().unwrap();
    let err = store
        .get_range(&key, size + 10..size + 20)
        .expect_err("past the end")
        .to_string();
    assert!(
        err.contains(&format!("0 bytes came back of an object of {size}")),
        "{err}"
    );
    assert!(!err.contains("attempts"), "retried: {err}");
    let (bytes, whole) = store.get_range_sized(&key, size - 5..size + 20).unwrap();
    assert_eq!((bytes.len(), whole), (5, size));
    // A range at or past the end holds no bytes, with the size all the same.
    for range in [size..size + 20, size + 10..size + 20] {
        let (bytes, whole) = store.get_range_sized(&key, range).unwrap();
        assert_eq!((bytes.len(), whole), (0, size));
    }
}

/// A tile cut short in the bucket is refused by a read of a few of its
/// cells, whose frames all lie in its intact part: the ranged GET of the
/// tile's head gives the object's size, met with the manifest's. (Such
/// reads fetched only the head and the cells' frames, and returned the
/// cells; only a read reaching the missing end failed.) The head's request
/// is the one it had.
#[test]
#[ignore = "needs an S3 server: run .ci/s3"]
fn a_tile_cut_short_in_a_bucket_is_refused_by_a_read_of_a_few_cells() {
    let name = "exceptions_70k";
    let url = scratch_url("cut-tile");
    let store = storage::open(&url).unwrap();
    upload(&local_golden(name), store.as_ref());
    let key = deltacells::format::manifest::Manifest::tile_key(0);
    let whole = store.get(&key).unwrap().unwrap();
    let cut = whole.len() as u64 - 1000;
    let counting = Arc::new(Counting {
        inner: store.clone(),
        bytes: AtomicU64::new(0),
        requests: AtomicU64::new(0),
    });
    let open = || {
        Dataset::open_store(counting.clone(), OpenOptions::default().with_cache_bytes(0)).unwrap()
    };
    // Whole, the tile serves its first cells from one request for its
    // head and one for their frames.
    let cells = vec![0u64, 1];
    let ds = open();
    let before = counting.requests.load(Ordering::SeqCst);
    ds.read(&cells).csr::<i32>().unwrap();
    assert_eq!(counting.requests.load(Ordering::SeqCst) - before, 2);
    store.put(&key, &whole.as_bytes()[..cut as usize]).unwrap();
    let ds = open();
    match ds.read(&cells).csr::<i32>().map(drop) {
        Err(deltacells::Error::Dataset(DatasetRule::TileBytes {
            tile: 0,
            manifest,
            actual,
        })) => assert_eq!((manifest, actual), (whole.len() as u64, cut)),
        other => panic!("a tile cut short was read: {other:?}"),
    }
    // Emptied, it is refused the same way: its head's ranged GET is
    // answered 416, which names no size.
    store.put(&key, &[]).unwrap();
    match open().read(&cells).csr::<i32>().map(drop) {
        Err(deltacells::Error::Dataset(DatasetRule::TileBytes {
            tile: 0,
            manifest,
            actual: 0,
        })) => assert_eq!(manifest, whole.len() as u64),
        other => panic!("an empty tile was read: {other:?}"),
    }
    for k in store.list("").unwrap() {
        store.delete(&k).unwrap();
    }
}

/// Compressed bytes of the chunks holding `cells`, plus each touched tile's
/// header, chunk table and indptr.
fn needed_bytes(ds: &Dataset, cells: &[u64]) -> u64 {
    let mut chunks = std::collections::BTreeSet::new();
    for &c in cells {
        let (t, local) = ds.locate(c).unwrap();
        chunks.insert((t, local));
    }
    let mut total = 0u64;
    let mut seen_tiles = std::collections::BTreeSet::new();
    let mut seen_chunks = std::collections::BTreeSet::new();
    for (t, local) in chunks {
        let bytes = ds
            .store()
            .get(&deltacells::format::manifest::Manifest::tile_key(t))
            .unwrap()
            .unwrap();
        let view = deltacells::format::tile::TileView::parse(bytes.as_bytes()).unwrap();
        if seen_tiles.insert(t) {
            total += view.header().indptr_off + 8 * (view.n_cells() as u64 + 1);
        }
        let c = view
            .chunks()
            .position(|e| (local as u64) < e.cell_hi)
            .unwrap();
        if seen_chunks.insert((t, c)) {
            total += view.chunk(c).frames().map(|r| r.end - r.start).sum::<u64>();
        }
    }
    total
}

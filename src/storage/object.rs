//! Object storage through the `object_store` crate: S3 (`s3://bucket/prefix`),
//! and, because the crate gives them for free, GCS (`gs://`), Azure
//! (`az://`, `abfs://`) and plain HTTP(S) servers (read-only).
//!
//! Credentials, region and endpoint come from the standard environment
//! variables of each cloud: for S3 `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` (a local or
//! non-AWS server; one given as `http://` is used without TLS unless
//! `AWS_ALLOW_HTTP` says otherwise).
//!
//! Every request runs on a small tokio runtime of its own (threads named
//! `deltacells-io`), never on the decode workers; the calling thread waits.
//! Each operation is retried with exponential backoff on transient errors
//! (anything but not-found, permission, precondition and similar answers)
//! and bounded by a timeout, after which it fails with an error naming the
//! object and the operation. Several ranges of one object are coalesced and
//! fetched concurrently, at most [`IoConfig::requests_in_flight`] at once.
//! Puts are atomic: one PUT, or for large objects a multipart upload that
//! only becomes visible when completed.
//!
//! TLS is rustls with *ring*'s cryptography, installed as rustls's
//! process-wide provider by [`install_tls_provider`] (which
//! [`ObjectStore::from_url`] calls) unless the program installed one of its
//! own first. Code that builds `object_store` clients itself, to wrap them
//! with [`ObjectStore::new`], calls it before building them.

use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ::bytes::Bytes;
use futures_util::{stream, StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStoreExt, PutPayload, RetryConfig, WriteMultipart};

use super::{check_key, coalesce, split_coalesced, AlignedBytes, Store, COALESCE_GAP};
use crate::error::{Error, Result};

/// Objects above this size are uploaded in parts.
const MULTIPART_THRESHOLD: usize = 32 << 20;
/// Size of each part of a multipart upload.
const PART_SIZE: usize = 16 << 20;

/// Timeouts, retries and concurrency of an object store.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct IoConfig {
    /// Longest time one operation may take, retries included.
    pub timeout: Duration,
    /// Attempts per operation (1 = no retry).
    pub attempts: u32,
    /// First backoff delay; doubled after each failed attempt.
    pub backoff: Duration,
    /// Longest backoff delay.
    pub max_backoff: Duration,
    /// Requests one `get_ranges` call keeps in flight.
    pub requests_in_flight: usize,
    /// Latency added to every read request (object_store's `ThrottledStore`):
    /// for measuring how well reads hide latency, never for production.
    pub added_latency: Duration,
}

impl Default for IoConfig {
    fn default() -> Self {
        IoConfig {
            timeout: Duration::from_secs(60),
            attempts: 6,
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
            requests_in_flight: 16,
            added_latency: Duration::ZERO,
        }
    }
}

impl IoConfig {
    /// The defaults, with `DELTACELLS_IO_TIMEOUT` (seconds),
    /// `DELTACELLS_IO_ATTEMPTS`, `DELTACELLS_IO_IN_FLIGHT` and
    /// `DELTACELLS_IO_LATENCY_MS` (added latency) applied.
    pub fn from_env() -> Result<IoConfig> {
        let mut c = IoConfig::default();
        // Each setting within bounds a person would give it: a timeout of
        // 1e30 s cannot be a deadline (it overflowed the clock and panicked),
        // and 0.5 attempts is no attempt at all.
        let var = |name: &str, most: f64, whole: bool| -> Result<Option<f64>> {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| *x > 0.0 && *x <= most && (!whole || x.fract() == 0.0))
                    .map(Some)
                    .ok_or_else(|| {
                        let kind = if whole { "a whole number" } else { "a number" };
                        Error::Config(format!(
                            "{name}={v:?} is not {kind} above 0 and at most {most}"
                        ))
                    }),
                Err(_) => Ok(None),
            }
        };
        if let Some(s) = var("DELTACELLS_IO_TIMEOUT", 86_400.0, false)? {
            c.timeout = Duration::from_secs_f64(s);
        }
        if let Some(n) = var("DELTACELLS_IO_ATTEMPTS", 1_000.0, true)? {
            c.attempts = n as u32;
        }
        if let Some(n) = var("DELTACELLS_IO_IN_FLIGHT", 4_096.0, true)? {
            c.requests_in_flight = n as usize;
        }
        if let Some(ms) = var("DELTACELLS_IO_LATENCY_MS", 3_600_000.0, false)? {
            c.added_latency = Duration::from_secs_f64(ms / 1e3);
        }
        Ok(c)
    }
}

/// Whether the S3 endpoint is a plain `http://` URL and `AWS_ALLOW_HTTP`
/// says nothing: naming such an endpoint is the intent to use it, as the
/// AWS CLI and boto3 take it, where `object_store` alone would refuse every
/// request with a bare "builder error". An explicit `AWS_ALLOW_HTTP` stands.
fn plain_http_endpoint() -> bool {
    std::env::var_os("AWS_ALLOW_HTTP").is_none()
        && ["AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
            .iter()
            .any(|k| std::env::var(k).is_ok_and(|v| v.starts_with("http://")))
}

/// The process's I/O runtime (two threads: requests wait on the network,
/// not on the CPU).
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("deltacells-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Config(format!("cannot start the I/O runtime: {e}")))
}

/// Runs `fut` to its end on the I/O runtime. A caller already inside an
/// async runtime (an embedder's task), where blocking on another runtime
/// panics, waits for it on a thread of its own (as if it had called from
/// `spawn_blocking`).
fn block_on<F>(fut: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    if tokio::runtime::Handle::try_current().is_err() {
        return Ok(rt.block_on(fut));
    }
    std::thread::scope(|s| {
        let waited = std::thread::Builder::new()
            .name("deltacells-io-wait".into())
            .spawn_scoped(s, || rt.block_on(fut))
            .map_err(|e| Error::io("a thread to wait for storage on", e))?;
        waited
            .join()
            .map_err(|payload| Error::panicked("a thread waiting for storage", &*payload))
    })
}

/// Installs *ring* as rustls's process-wide cryptography provider, unless
/// one is installed already (the program's own choice stands).
///
/// The HTTP client of `object_store` takes its TLS cryptography from that
/// provider and panics when it builds a client without one. This crate
/// builds rustls with *ring* alone, so no other provider is compiled in
/// (see the `object-store` feature in Cargo.toml); calling this more than
/// once is harmless.
pub fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // An Err means another thread installed one first: it serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A dataset location in an object store.
pub struct ObjectStore {
    inner: Arc<dyn object_store::ObjectStore>,
    prefix: String,
    url: String,
    config: IoConfig,
}

/// Whether an error may go away on a retry: not one of the kinds that
/// say so, nor a range the object does not hold (answered 416, and
/// answered 416 again on every retry until the attempts ran out). Other
/// client errors are retried: S3 answers a timed-out upload 400.
fn transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    client_status(e) != Some(416)
        && !matches!(
            e,
            E::NotFound { .. }
                | E::InvalidPath { .. }
                | E::NotSupported { .. }
                | E::AlreadyExists { .. }
                | E::Precondition { .. }
                | E::NotModified { .. }
                | E::NotImplemented { .. }
                | E::PermissionDenied { .. }
                | E::Unauthenticated { .. }
                | E::UnknownConfigurationKey { .. }
        )
}

/// The HTTP status an error names, if any. `object_store` keeps it in an
/// error type it does not export (its `Generic` errors), so it is read
/// from the message, `... status code: 416 Range Not Satisfiable ...`; a
/// message worded otherwise names none, and the error is retried as before.
fn client_status(e: &object_store::Error) -> Option<u16> {
    const MARK: &str = "status code: ";
    let text = e.to_string();
    let at = text.find(MARK)? + MARK.len();
    text.get(at..at + 3)?.parse().ok()
}

/// How an error names a ranged read.
fn range_op(range: &Range<u64>) -> String {
    format!("GET bytes {}..{} of", range.start, range.end)
}

/// Splits `scheme://bucket/prefix` into (`scheme://bucket`, `prefix`).
fn split_url(url: &str) -> Result<(&str, &str)> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| Error::Config(format!("{url} is not a URL")))?;
    let bucket_end = rest.find('/').unwrap_or(rest.len());
    if bucket_end == 0 {
        return Err(Error::Config(format!("{url} names no bucket")));
    }
    let root = &url[..scheme.len() + 3 + bucket_end];
    Ok((root, rest[bucket_end..].trim_matches('/')))
}

impl ObjectStore {
    /// The store at `url`, configured from the environment (see the module docs).
    pub fn from_url(url: &str) -> Result<ObjectStore> {
        install_tls_provider();
        let bad = |e: object_store::Error| Error::Config(format!("{url}: {e}"));
        // Retries are ours (one policy for every backend, and for wrappers).
        let no_retry = RetryConfig {
            max_retries: 0,
            ..RetryConfig::default()
        };
        let scheme = url.split_once("://").map_or("", |(s, _)| s);
        let (inner, prefix): (Arc<dyn object_store::ObjectStore>, &str) = match scheme {
            "s3" | "s3a" => {
                let (root, prefix) = split_url(url)?;
                let mut s3 = object_store::aws::AmazonS3Builder::from_env()
                    .with_url(root)
                    .with_retry(no_retry);
                if plain_http_endpoint() {
                    s3 = s3.with_allow_http(true);
                }
                let s3 = s3.build().map_err(bad)?;
                (Arc::new(s3), prefix)
            }
            "gs" => {
                let (root, prefix) = split_url(url)?;
                let gcs = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(root)
                    .with_retry(no_retry)
                    .build()
                    .map_err(bad)?;
                (Arc::new(gcs), prefix)
            }
            "az" | "azure" | "abfs" | "abfss" => {
                let (root, prefix) = split_url(url)?;
                let azure = object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(root)
                    .with_retry(no_retry)
                    .build()
                    .map_err(bad)?;
                (Arc::new(azure), prefix)
            }
            "http" | "https" => {
                let http = object_store::http::HttpBuilder::new()
                    .with_url(url)
                    .with_client_options(
                        object_store::ClientOptions::new().with_allow_http(scheme == "http"),
                    )
                    .with_retry(no_retry)
                    .build()
                    .map_err(bad)?;
                (Arc::new(http), "")
            }
            _ => {
                return Err(Error::Config(format!(
                "{url}: unknown scheme {scheme:?} (expected s3, gs, az, http or https, or a path)"
            )))
            }
        };
        Ok(ObjectStore::new(inner, prefix, url, IoConfig::from_env()?))
    }

    /// The client, slowed down by `config.added_latency` per read request.
    fn throttled(
        inner: Arc<dyn object_store::ObjectStore>,
        config: &IoConfig,
    ) -> Arc<dyn object_store::ObjectStore> {
        if config.added_latency.is_zero() {
            return inner;
        }
        let throttle = object_store::throttle::ThrottleConfig {
            wait_get_per_call: config.added_latency,
            ..Default::default()
        };
        Arc::new(object_store::throttle::ThrottledStore::new(inner, throttle))
    }

    /// A store over any `object_store` implementation (tests wrap the real
    /// client in throttled or failing layers this way): objects live under
    /// `prefix`, `url` names the location in messages.
    pub fn new(
        inner: Arc<dyn object_store::ObjectStore>,
        prefix: &str,
        url: &str,
        config: IoConfig,
    ) -> ObjectStore {
        ObjectStore {
            inner: ObjectStore::throttled(inner, &config),
            prefix: prefix.trim_matches('/').to_string(),
            url: url.trim_end_matches('/').to_string(),
            config,
        }
    }

    /// The timeouts, retries and concurrency in use.
    pub fn config(&self) -> &IoConfig {
        &self.config
    }

    fn path(&self, key: &str) -> Result<ObjectPath> {
        check_key(key)?;
        let full = match (self.prefix.is_empty(), key.is_empty()) {
            (true, _) => key.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}/{key}", self.prefix),
        };
        ObjectPath::parse(&full).map_err(|e| {
            Error::Input(format!(
                "{}: {key:?} is not a valid object path: {e}",
                self.url
            ))
        })
    }

    /// One ranged GET of `range` of the object at `path`, retried as every
    /// request is: the bytes it holds of the range (cut where it ends, none
    /// where it ends before the range starts) and its size, which comes in
    /// the answer's `Content-Range`, so a part of a tile is checked against
    /// the manifest with no request of its own. A range that starts at or
    /// past the object's end is answered 416, with no size: the size then
    /// comes from a request of its own (an empty object's every range is
    /// such a range).
    async fn ranged(
        &self,
        path: &ObjectPath,
        key: &str,
        range: Range<u64>,
    ) -> Result<(Bytes, u64)> {
        let op = range_op(&range);
        let got = self
            .retrying(&op, key, || async {
                let options = GetOptions::new().with_range(Some(range.clone()));
                match self.inner.get_opts(path, options).await {
                    Ok(got) => {
                        let size = got.meta.size;
                        Ok(Some((got.bytes().await?, size)))
                    }
                    Err(e) if client_status(&e) == Some(416) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await?;
        let Some((bytes, size)) = got else {
            return match self.head_size(path, key).await? {
                Some(size) if size <= range.start => Ok((Bytes::new(), size)),
                Some(size) => Err(self.error(
                    &op,
                    key,
                    std::io::ErrorKind::Other,
                    format!("answered 416, but the object holds {size} bytes"),
                )),
                None => Err(self.error(
                    &op,
                    key,
                    std::io::ErrorKind::NotFound,
                    "no such object".into(),
                )),
            };
        };
        let held = range.end.min(size).saturating_sub(range.start);
        if bytes.len() as u64 != held {
            return Err(self.came_back(&range, key, bytes.len(), size));
        }
        Ok((bytes, size))
    }

    /// The size of the object at `path`, `None` where there is none.
    async fn head_size(&self, path: &ObjectPath, key: &str) -> Result<Option<u64>> {
        let head = self.retrying("HEAD", key, || self.inner.head(path)).await;
        Ok(found(head)?.map(|meta| meta.size))
    }

    /// What [`ObjectStore::ranged`] got of `range`, refused unless it is
    /// the whole range.
    fn whole(
        &self,
        key: &str,
        range: &Range<u64>,
        (bytes, size): (Bytes, u64),
    ) -> Result<AlignedBytes> {
        if bytes.len() as u64 != range.end - range.start {
            return Err(self.came_back(range, key, bytes.len(), size));
        }
        Ok(AlignedBytes::copy_from(&bytes))
    }

    /// A ranged read of `range` that got `n` bytes of an object of `size`,
    /// not what it needed.
    fn came_back(&self, range: &Range<u64>, key: &str, n: usize, size: u64) -> Error {
        self.error(
            &range_op(range),
            key,
            std::io::ErrorKind::UnexpectedEof,
            format!("{n} bytes came back of an object of {size}"),
        )
    }

    fn error(&self, op: &str, key: &str, kind: std::io::ErrorKind, why: String) -> Error {
        Error::io(
            format!("{op} {}/{key}", self.url),
            std::io::Error::new(kind, why),
        )
    }

    /// Runs `attempt` until it succeeds, fails for good, or the timeout passes.
    fn run<T, F, Fut>(&self, op: &str, key: &str, attempt: F) -> Result<T>
    where
        T: Send,
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = object_store::Result<T>> + Send,
    {
        block_on(self.retrying(op, key, attempt))?
    }

    async fn retrying<T, F, Fut>(&self, op: &str, key: &str, attempt: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = object_store::Result<T>>,
    {
        let start = Instant::now();
        let deadline = start + self.config.timeout;
        let mut delay = self.config.backoff;
        let mut tries = 0;
        loop {
            tries += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let why = match tokio::time::timeout(left, attempt()).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if !transient(&e) => {
                    let kind = match e {
                        object_store::Error::NotFound { .. } => std::io::ErrorKind::NotFound,
                        object_store::Error::PermissionDenied { .. }
                        | object_store::Error::Unauthenticated { .. } => {
                            std::io::ErrorKind::PermissionDenied
                        }
                        _ => std::io::ErrorKind::Other,
                    };
                    return Err(self.error(op, key, kind, e.to_string()));
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {:?}", self.config.timeout),
            };
            let out_of_time = Instant::now() + delay >= deadline;
            if tries >= self.config.attempts.max(1) || out_of_time {
                let kind = if out_of_time {
                    std::io::ErrorKind::TimedOut
                } else {
                    std::io::ErrorKind::Other
                };
                return Err(self.error(
                    op,
                    key,
                    kind,
                    format!(
                        "failed after {tries} attempts in {:.1} s: {why}",
                        start.elapsed().as_secs_f64()
                    ),
                ));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(self.config.max_backoff);
        }
    }
}

/// `None` for an object that does not exist; any other error as it is.
fn found<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(Error::Io { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Store for ObjectStore {
    fn size(&self, key: &str) -> Result<Option<u64>> {
        let path = self.path(key)?;
        block_on(self.head_size(&path, key))?
    }

    fn get(&self, key: &str) -> Result<Option<AlignedBytes>> {
        let path = self.path(key)?;
        let got = self.run("GET", key, || async {
            self.inner.get(&path).await?.bytes().await
        });
        Ok(found(got)?.map(|bytes| AlignedBytes::copy_from(&bytes)))
    }

    /// The ranged GET of [`Store::get_range_sized`], whose answer must be
    /// the whole range.
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<AlignedBytes> {
        let path = self.path(key)?;
        let got = block_on(self.ranged(&path, key, range.clone()))??;
        self.whole(key, &range, got)
    }

    /// One ranged GET, whose answer names the object's size.
    fn get_range_sized(&self, key: &str, range: Range<u64>) -> Result<(AlignedBytes, u64)> {
        let path = self.path(key)?;
        let (bytes, size) = block_on(self.ranged(&path, key, range))??;
        Ok((AlignedBytes::copy_from(&bytes), size))
    }

    fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> Result<Vec<AlignedBytes>> {
        let merged = coalesce(ranges, COALESCE_GAP);
        let path = self.path(key)?;
        let got: Vec<(Bytes, u64)> = block_on(
            stream::iter(merged.iter().map(|r| self.ranged(&path, key, r.clone())))
                .buffered(self.config.requests_in_flight.max(1))
                .try_collect(),
        )??;
        let fetched = got
            .into_iter()
            .zip(&merged)
            .map(|(got, r)| self.whole(key, r, got))
            .collect::<Result<Vec<_>>>()?;
        Ok(split_coalesced(ranges, &merged, &fetched))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(key)?;
        let data = Bytes::copy_from_slice(bytes);
        if data.len() <= MULTIPART_THRESHOLD {
            self.run("PUT", key, || {
                self.inner.put(&path, PutPayload::from(data.clone()))
            })?;
        } else {
            // A failed attempt's upload is aborted by dropping it; only a
            // completed upload makes the object visible.
            self.run("multipart PUT", key, || async {
                let upload = self.inner.put_multipart(&path).await?;
                let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
                writer.put(data.clone());
                writer.finish().await
            })?;
        }
        Ok(())
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        match self.run("DELETE", key, || self.inner.delete(&path)) {
            Err(Error::Io { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        // List the directory part recursively, keep keys that match.
        let dir = prefix.rfind('/').map_or("", |i| &prefix[..i]);
        let mut keys = Vec::new();
        let mut pending = vec![self.path(dir)?];
        let strip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        while let Some(at) = pending.pop() {
            let at_ref = (!at.as_ref().is_empty()).then_some(&at);
            let listed = self.run("LIST", prefix, || self.inner.list_with_delimiter(at_ref))?;
            pending.extend(listed.common_prefixes);
            for object in listed.objects {
                let full: &str = object.location.as_ref();
                let Some(key) = full.get(strip..) else {
                    continue;
                };
                if key.starts_with(prefix) {
                    keys.push(key.to_string());
                }
            }
        }
        keys.sort_unstable();
        Ok(keys)
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A range the object does not hold is not retried; a server error, a
    /// client error S3 gives for a timeout, and a failure naming no status
    /// are. (The wording is object_store's, checked against a real server
    /// by cli/tests/s3.rs.)
    #[test]
    fn only_a_range_past_the_end_is_refused_for_good_among_generic_errors() {
        let generic = |text: &str| object_store::Error::Generic {
            store: "S3",
            source: text.to_string().into(),
        };
        let past_end = generic(
            "Error performing GET http://127.0.0.1/b/k in 2ms - Server returned non-2xx status \
             code: 416 Range Not Satisfiable: <Error><Code>InvalidRange</Code></Error>",
        );
        assert_eq!(client_status(&past_end), Some(416));
        assert!(!transient(&past_end));
        for retried in [
            "Server returned non-2xx status code: 503 Service Unavailable: slow down",
            "Server returned non-2xx status code: 400 Bad Request: RequestTimeout",
            "error sending request: connection reset",
            "status code: 41",
        ] {
            assert!(transient(&generic(retried)), "{retried}");
        }
    }

    #[test]
    fn urls_split_into_bucket_and_prefix() {
        assert_eq!(split_url("s3://b/p/q/").unwrap(), ("s3://b", "p/q"));
        assert_eq!(split_url("s3://b").unwrap(), ("s3://b", ""));
        assert!(split_url("s3:///p").is_err());
    }

    /// Every scheme's client builds, HTTPS ones included: building one
    /// panics in reqwest when no TLS provider is installed.
    #[test]
    fn clients_build_with_tls_for_every_scheme() {
        for url in [
            "s3://bucket/prefix",
            "gs://bucket/prefix",
            "abfss://container@account.dfs.core.windows.net/prefix",
            "https://example.invalid/prefix",
        ] {
            let store = ObjectStore::from_url(url).unwrap();
            assert_eq!(store.describe(), url);
        }
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }

    #[test]
    fn a_memory_backend_behaves_like_a_store() {
        let inner = Arc::new(object_store::memory::InMemory::new());
        let store = ObjectStore::new(inner, "some/prefix", "memory://test", IoConfig::default());
        store.put("tiles/tile_000000.dct", b"0123456789").unwrap();
        store.put("manifest.json", b"{}").unwrap();
        assert_eq!(store.size("manifest.json").unwrap(), Some(2));
        assert_eq!(store.size("missing").unwrap(), None);
        assert!(store.get("missing").unwrap().is_none());
        assert_eq!(
            store.list("tiles/").unwrap(),
            ["tiles/tile_000000.dct".to_string()]
        );
        assert_eq!(store.list("").unwrap().len(), 2);
        let far: Vec<Range<u64>> = vec![0..2, 8..10];
        let got = store.get_ranges("tiles/tile_000000.dct", &far).unwrap();
        assert_eq!(got[0].as_bytes(), b"01");
        assert_eq!(got[1].as_bytes(), b"89");
        let err = store.get_range("missing", 0..1).unwrap_err().to_string();
        assert!(
            err.contains("memory://test/missing") && err.contains("GET"),
            "{err}"
        );
    }

    /// A corpus file named by its URL: the error says corpus files are read
    /// locally (it had said nothing was stored there, beside the object).
    #[test]
    fn a_corpus_file_in_a_bucket_is_named_as_one() {
        let inner = Arc::new(object_store::memory::InMemory::new());
        let url = "memory://bucket/x.corpus.json";
        let store = ObjectStore::new(inner, "x.corpus.json", url, IoConfig::default());
        let err = crate::dataset::Dataset::open_store(Arc::new(store), Default::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a corpus file is read from a local path"),
            "{err}"
        );
    }

    /// From inside an async runtime of the caller's, of either flavour, the
    /// store works as from any thread: blocking on the I/O runtime there had
    /// panicked ("Cannot start a runtime from within a runtime").
    #[test]
    fn a_caller_inside_its_own_runtime_is_served() {
        let inner = Arc::new(object_store::memory::InMemory::new());
        let store = ObjectStore::new(inner, "p", "memory://test", IoConfig::default());
        store.put("tile", b"0123456789").unwrap();
        let theirs = [
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .build()
                .unwrap(),
        ];
        for rt in theirs {
            rt.block_on(async {
                assert_eq!(store.size("tile").unwrap(), Some(10));
                let got = store.get_ranges("tile", &[0..2, 8..10]).unwrap();
                assert_eq!(got[1].as_bytes(), b"89");
            });
        }
    }
}

crate::setters!(IoConfig {
    /// Sets [`IoConfig::timeout`].
    with_timeout: timeout: Duration,
    /// Sets [`IoConfig::attempts`].
    with_attempts: attempts: u32,
    /// Sets [`IoConfig::backoff`].
    with_backoff: backoff: Duration,
    /// Sets [`IoConfig::max_backoff`].
    with_max_backoff: max_backoff: Duration,
    /// Sets [`IoConfig::requests_in_flight`].
    with_requests_in_flight: requests_in_flight: usize,
    /// Sets [`IoConfig::added_latency`].
    with_added_latency: added_latency: Duration,
});

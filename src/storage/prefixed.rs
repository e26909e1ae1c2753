//! A store seen through a key prefix: the objects under `prefix/` of another
//! store, as a store of their own (a build's stages live inside its output).

use std::ops::Range;
use std::sync::Arc;

use super::{AlignedBytes, Store};
use crate::error::Result;

/// The objects of `inner` under `prefix/`.
pub struct Prefixed {
    inner: Arc<dyn Store>,
    prefix: String,
}

impl Prefixed {
    /// The part of `inner` under `prefix` (a key, without a trailing `/`).
    pub fn new(inner: Arc<dyn Store>, prefix: &str) -> Prefixed {
        Prefixed {
            inner,
            prefix: format!("{}/", prefix.trim_end_matches('/')),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

impl Store for Prefixed {
    fn size(&self, key: &str) -> Result<Option<u64>> {
        self.inner.size(&self.key(key))
    }

    fn get(&self, key: &str) -> Result<Option<AlignedBytes>> {
        self.inner.get(&self.key(key))
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<AlignedBytes> {
        self.inner.get_range(&self.key(key), range)
    }

    fn get_range_sized(&self, key: &str, range: Range<u64>) -> Result<(AlignedBytes, u64)> {
        self.inner.get_range_sized(&self.key(key), range)
    }

    fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> Result<Vec<AlignedBytes>> {
        self.inner.get_ranges(&self.key(key), ranges)
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.inner.put(&self.key(key), bytes)
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(&self.key(key))
    }

    fn remove_temporaries(&self, dir: &str) -> Result<usize> {
        self.inner
            .remove_temporaries(self.key(dir).trim_end_matches('/'))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .inner
            .list(&self.key(prefix))?
            .into_iter()
            .filter_map(|k| k.strip_prefix(&self.prefix).map(str::to_string))
            .collect())
    }

    fn sync(&self, dir: &str) -> Result<()> {
        self.inner.sync(self.key(dir).trim_end_matches('/'))
    }

    fn is_remote(&self) -> bool {
        self.inner.is_remote()
    }

    fn describe(&self) -> String {
        format!(
            "{}/{}",
            self.inner.describe(),
            self.prefix.trim_end_matches('/')
        )
    }
}

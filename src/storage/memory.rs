//! Objects held in memory: tests, fuzzing, and data produced in-process.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::RwLock;

use super::{check_key, Store};
use crate::error::{Error, Result};
use crate::storage::AlignedBytes;

/// Objects held in memory. A put replaces the object whole, so it is atomic.
#[derive(Debug, Default)]
pub struct MemoryStore {
    objects: RwLock<BTreeMap<String, AlignedBytes>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, AlignedBytes>> {
        // A panic while holding the lock cannot leave a map half-updated
        // (inserts are single calls), so a poisoned lock is still consistent.
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds or replaces an object.
    pub fn insert(&self, key: impl Into<String>, bytes: &[u8]) {
        self.objects
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.into(), AlignedBytes::copy_from(bytes));
    }

    /// Removes an object (no error if it does not exist).
    pub fn remove(&self, key: &str) {
        self.objects
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// Copies every file under `dir` into a new store (keys are relative paths).
    pub fn from_dir(dir: &Path) -> Result<MemoryStore> {
        let local = super::LocalStore::new(dir);
        let store = MemoryStore::new();
        for key in local.list("")? {
            let bytes = local.get(&key)?.unwrap_or_default();
            store.insert(key, bytes.as_bytes());
        }
        Ok(store)
    }
}

impl Store for MemoryStore {
    fn size(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.read().get(key).map(|b| b.len() as u64))
    }

    fn get(&self, key: &str) -> Result<Option<AlignedBytes>> {
        Ok(self.read().get(key).cloned())
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<AlignedBytes> {
        let objects = self.read();
        let bytes = objects.get(key).map(|b| b.as_bytes()).unwrap_or_default();
        let slice = usize::try_from(range.start)
            .ok()
            .zip(usize::try_from(range.end).ok())
            .and_then(|(a, b)| bytes.get(a..b))
            .ok_or_else(|| {
                Error::io(
                    format!("memory:{key} bytes {}..{}", range.start, range.end),
                    std::io::ErrorKind::UnexpectedEof.into(),
                )
            })?;
        Ok(AlignedBytes::copy_from(slice))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        check_key(key)?;
        self.insert(key, bytes);
        Ok(())
    }

    fn delete(&self, key: &str) -> Result<()> {
        check_key(key)?;
        self.objects
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .read()
            .range(prefix.to_string()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(prefix))
            .cloned()
            .collect())
    }

    fn describe(&self) -> String {
        "in-memory store".into()
    }
}

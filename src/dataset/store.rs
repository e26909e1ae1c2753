//! Where tiles and side files come from.
//!
//! The local backend uses positional reads of whole objects into 8-byte-aligned
//! buffers rather than mmap: a tile is always read whole (it is the unit an
//! object store serves in one GET), a file truncated underneath a reader then
//! gives an I/O error instead of a SIGBUS, aligned buffers let the indptr be
//! borrowed in place, and the same code path serves the in-memory store and any
//! remote one.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use crate::error::{Error, Result};

/// Bytes in an 8-byte-aligned buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBytes {
    /// A zeroed buffer of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBytes {
        AlignedBytes {
            words: vec![0; len.div_ceil(8)],
            len,
        }
    }

    /// A copy of `bytes`.
    pub fn copy_from(bytes: &[u8]) -> AlignedBytes {
        let mut b = AlignedBytes::zeroed(bytes.len());
        b.as_mut_bytes().copy_from_slice(bytes);
        b
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }

    /// The bytes, mutably.
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.words)[..self.len]
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A read-only source of named objects (`manifest.json`, `tiles/tile_000000.dct`, ...).
pub trait Store: Send + Sync {
    /// Size of an object, `None` if it does not exist.
    fn size(&self, key: &str) -> Result<Option<u64>>;
    /// A whole object, `None` if it does not exist.
    fn get(&self, key: &str) -> Result<Option<AlignedBytes>>;
    /// A byte range of an object (an error if it does not exist or is shorter).
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<AlignedBytes>;
    /// Where the store is, for messages.
    fn describe(&self) -> String;
}

/// Objects as files under a directory.
#[derive(Clone, Debug)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// A store rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> LocalStore {
        LocalStore { root: root.into() }
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    fn open(&self, key: &str) -> Result<Option<File>> {
        let path = self.path(key);
        match File::open(&path) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path.display().to_string(), e)),
        }
    }

    fn read_at(&self, key: &str, file: &File, range: Range<u64>) -> Result<AlignedBytes> {
        let mut buf = AlignedBytes::zeroed((range.end - range.start) as usize);
        file.read_exact_at(buf.as_mut_bytes(), range.start)
            .map_err(|e| {
                Error::io(
                    format!(
                        "{} bytes {}..{}",
                        self.path(key).display(),
                        range.start,
                        range.end
                    ),
                    e,
                )
            })?;
        Ok(buf)
    }
}

impl Store for LocalStore {
    fn size(&self, key: &str) -> Result<Option<u64>> {
        match std::fs::metadata(self.path(key)) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(self.path(key).display().to_string(), e)),
        }
    }

    fn get(&self, key: &str) -> Result<Option<AlignedBytes>> {
        let Some(file) = self.open(key)? else {
            return Ok(None);
        };
        let len = file
            .metadata()
            .map_err(|e| Error::io(self.path(key).display().to_string(), e))?
            .len();
        self.read_at(key, &file, 0..len).map(Some)
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<AlignedBytes> {
        let file = self.open(key)?.ok_or_else(|| {
            Error::io(
                self.path(key).display().to_string(),
                std::io::ErrorKind::NotFound.into(),
            )
        })?;
        self.read_at(key, &file, range)
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }
}

/// Objects held in memory (tests, and data produced in-process).
#[derive(Debug, Default)]
pub struct MemoryStore {
    objects: RwLock<HashMap<String, AlignedBytes>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Adds or replaces an object.
    pub fn put(&self, key: impl Into<String>, bytes: &[u8]) {
        self.objects
            .write()
            .expect("store lock")
            .insert(key.into(), AlignedBytes::copy_from(bytes));
    }

    /// Copies every file under `dir` into a new store (keys are relative paths).
    pub fn from_dir(dir: &Path) -> Result<MemoryStore> {
        fn walk(store: &MemoryStore, root: &Path, dir: &Path) -> Result<()> {
            let entries =
                std::fs::read_dir(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
            for entry in entries {
                let path = entry
                    .map_err(|e| Error::io(dir.display().to_string(), e))?
                    .path();
                if path.is_dir() {
                    walk(store, root, &path)?;
                } else {
                    let bytes = std::fs::read(&path)
                        .map_err(|e| Error::io(path.display().to_string(), e))?;
                    let key = path
                        .strip_prefix(root)
                        .expect("under root")
                        .to_string_lossy()
                        .replace('\\', "/");
                    store.put(key, &bytes);
                }
            }
            Ok(())
        }
        let store = MemoryStore::new();
        walk(&store, dir, dir)?;
        Ok(store)
    }
}

impl Store for MemoryStore {
    fn size(&self, key: &str) -> Result<Option<u64>> {
        Ok(self
            .objects
            .read()
            .expect("store lock")
            .get(key)
            .map(|b| b.len() as u64))
    }

    fn get(&self, key: &str) -> Result<Option<AlignedBytes>> {
        Ok(self.objects.read().expect("store lock").get(key).cloned())
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<AlignedBytes> {
        let objects = self.objects.read().expect("store lock");
        let bytes = objects.get(key).map(|b| b.as_bytes()).unwrap_or_default();
        let slice = bytes
            .get(range.start as usize..range.end as usize)
            .ok_or_else(|| {
                Error::io(
                    format!("memory:{key} bytes {}..{}", range.start, range.end),
                    std::io::ErrorKind::UnexpectedEof.into(),
                )
            })?;
        Ok(AlignedBytes::copy_from(slice))
    }

    fn describe(&self) -> String {
        "in-memory store".into()
    }
}

//! Objects as files under a directory.
//!
//! Reads are positional reads of whole objects or ranges into aligned
//! buffers rather than mmap: a file truncated underneath a reader then gives
//! an I/O error instead of a SIGBUS. A put writes a uniquely named temporary
//! file beside the final name, syncs it and renames it into place, so a
//! reader (or a crash) never sees a partial object under its final name;
//! [`Store::sync`] then makes the renames themselves durable.

use std::fs::{self, File};
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{check_key, temporary_name, Store, StoreLock};
use crate::error::{Error, Result};
use crate::storage::AlignedBytes;

/// Objects as files under a directory.
#[derive(Clone, Debug)]
pub struct LocalStore {
    root: PathBuf,
}

/// Removes a temporary file unless it was renamed into place.
struct Temporary(Option<PathBuf>);

impl Drop for Temporary {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

/// Makes the entries of directory `dir` (creations, renames) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))
}

/// Removes the temporary files of `name` in `dir` that a writer killed
/// mid-write left (`.<name>.<pid>-<nanos>-<n>.tmp`, each with its
/// writer's process id), where that process is gone; a live writer's file
/// stays. Returns how many were removed. Where process ids cannot be looked
/// up (no `/proc`), nothing is removed.
pub fn remove_abandoned_temporaries(dir: &Path, name: &str) -> Result<usize> {
    if !Path::new("/proc/self").exists() {
        return Ok(0);
    }
    remove_temporaries_of(dir, name, |file| {
        // `.<name>.<pid>-...` (or `.<name>.<pid>.<n>.tmp`): the pid first.
        let pid = file[name.len() + 2..]
            .split(['-', '.'])
            .next()
            .unwrap_or_default();
        !Path::new("/proc").join(pid).exists()
    })
}

/// Removes the temporary files of entry `name` in `dir` (see
/// [`super::is_temporary_of`]) that `remove` picks by their file name, and
/// says how many went; one already gone is no error.
pub(crate) fn remove_temporaries_of(
    dir: &Path,
    name: &str,
    remove: impl Fn(&str) -> bool,
) -> Result<usize> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir.display().to_string(), e))?;
        let file = entry.file_name().to_string_lossy().into_owned();
        if !super::is_temporary_of(&file, name) || !remove(&file) {
            continue;
        }
        match fs::remove_file(entry.path()) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(entry.path().display().to_string(), e)),
        }
    }
    Ok(removed)
}

/// Writes `bytes` to `path` atomically: a new temporary file in the same
/// directory (a unique name, created exclusively), synced, then renamed.
pub(crate) fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (tmp, mut file) = loop {
        let tmp = path.with_file_name(temporary_name(&name));
        match File::create_new(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(tmp.display().to_string(), e)),
        }
    };
    let mut guard = Temporary(Some(tmp.clone()));
    let io = |e| Error::io(tmp.display().to_string(), e);
    write(&mut file).map_err(io)?;
    file.flush().map_err(io)?;
    file.sync_data().map_err(io)?;
    fs::rename(&tmp, path).map_err(|e| {
        Error::io(
            format!("renaming {} to {}", tmp.display(), path.display()),
            e,
        )
    })?;
    // Renamed: nothing left to remove.
    guard.0 = None;
    Ok(())
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

    fn path(&self, key: &str) -> Result<PathBuf> {
        check_key(key)?;
        Ok(if key.is_empty() {
            self.root.clone()
        } else {
            self.root.join(key)
        })
    }

    fn open(&self, key: &str) -> Result<Option<(PathBuf, File)>> {
        let path = self.path(key)?;
        // An object is a regular file: opening a FIFO for reading would wait
        // for a writer forever (a device, or a directory, is no object either).
        match fs::metadata(&path) {
            Ok(m) if !m.is_file() => {
                return Err(Error::io(
                    path.display().to_string(),
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            _ => {}
        }
        match File::open(&path) {
            Ok(f) => Ok(Some((path, f))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path.display().to_string(), e)),
        }
    }

    fn read_at(path: &Path, file: &File, range: Range<u64>) -> Result<AlignedBytes> {
        let context = || format!("{} bytes {}..{}", path.display(), range.start, range.end);
        let len = range
            .end
            .checked_sub(range.start)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| Error::Input(format!("bad byte range: {}", context())))?;
        let size = file
            .metadata()
            .map_err(|e| Error::io(path.display().to_string(), e))?
            .len();
        if range.end > size {
            return Err(Error::io(
                format!("{} (the object has {size} bytes)", context()),
                std::io::ErrorKind::UnexpectedEof.into(),
            ));
        }
        let mut buf = AlignedBytes::for_overwrite(len);
        file.read_exact_at(buf.as_mut_bytes(), range.start)
            .map_err(|e| Error::io(context(), e))?;
        Ok(buf)
    }
}

impl Store for LocalStore {
    fn size(&self, key: &str) -> Result<Option<u64>> {
        let path = self.path(key)?;
        match fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path.display().to_string(), e)),
        }
    }

    fn get(&self, key: &str) -> Result<Option<AlignedBytes>> {
        let Some((path, file)) = self.open(key)? else {
            return Ok(None);
        };
        let len = file
            .metadata()
            .map_err(|e| Error::io(path.display().to_string(), e))?
            .len();
        LocalStore::read_at(&path, &file, 0..len).map(Some)
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<AlignedBytes> {
        let (path, file) = self.open(key)?.ok_or_else(|| {
            Error::io(
                self.root.join(key).display().to_string(),
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            )
        })?;
        LocalStore::read_at(&path, &file, range)
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(key)?;
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent.display().to_string(), e))?;
        }
        write_atomically(&path, |f| f.write_all(bytes))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        if let Err(e) = fs::remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(Error::io(path.display().to_string(), e));
            }
        }
        // Directories exist only for their objects: remove those left empty
        // (up to the root; removing a directory that is not empty fails, and
        // stops the walk).
        let mut dir = path.parent();
        while let Some(d) = dir.filter(|d| *d != self.root && d.starts_with(&self.root)) {
            if fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }

    fn remove_temporaries(&self, dir: &str) -> Result<usize> {
        let mut removed = 0;
        let mut stack = vec![self.path(dir)?];
        while let Some(d) = stack.pop() {
            let entries = match fs::read_dir(&d) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(d.display().to_string(), e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| Error::io(d.display().to_string(), e))?;
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if path.is_dir() {
                    stack.push(path);
                } else if name.starts_with('.') && name.ends_with(".tmp") {
                    fs::remove_file(&path).map_err(|e| Error::io(path.display().to_string(), e))?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        check_key(prefix.trim_end_matches('/'))?;
        // Walk from the directory part of the prefix; keep keys that match it.
        let dir_part = prefix.rfind('/').map_or("", |i| &prefix[..i]);
        let mut keys = Vec::new();
        let mut stack = vec![dir_part.to_string()];
        while let Some(rel) = stack.pop() {
            let dir = self.path(&rel)?;
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(dir.display().to_string(), e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| Error::io(dir.display().to_string(), e))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                // Temporary files (and other hidden files) are not objects.
                if name.starts_with('.') {
                    continue;
                }
                let key = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                let kind = entry
                    .file_type()
                    .map_err(|e| Error::io(dir.display().to_string(), e))?;
                if kind.is_dir() {
                    stack.push(key);
                } else if key.starts_with(prefix) {
                    keys.push(key);
                }
            }
        }
        keys.sort_unstable();
        Ok(keys)
    }

    fn sync(&self, dir: &str) -> Result<()> {
        sync_dir(&self.path(dir.trim_end_matches('/'))?)
    }

    fn lock_exclusive(&self) -> Result<StoreLock> {
        fs::create_dir_all(&self.root)
            .map_err(|e| Error::io(self.root.display().to_string(), e))?;
        let dir =
            File::open(&self.root).map_err(|e| Error::io(self.root.display().to_string(), e))?;
        match dir.try_lock() {
            Ok(()) => Ok(StoreLock::holding(dir)),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::io(
                format!("{} is locked by another writer", self.root.display()),
                std::io::ErrorKind::WouldBlock.into(),
            )),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(Error::io(format!("locking {}", self.root.display()), e))
            }
        }
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }
}

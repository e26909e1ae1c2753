//! The per-node cache directory: files written whole under a lock, then
//! memory-mapped.
//!
//! A file is written to a temporary name, synced, renamed into place and the
//! directory synced, while the file's lock (`<name>.lock`, an exclusive
//! `flock`) is held, so processes on one node that fill the same entry at
//! once do the work once. A final file is never written in place: a damaged
//! one is unlinked and replaced by a new inode, so a mapping held elsewhere
//! keeps seeing the old, complete file. Temporary names are unique per call
//! and created exclusively; one left by a killed process is removed by the
//! next holder of the lock (only the lock holder writes, so every temporary
//! file of that entry found under the lock is stale).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::local::{remove_temporaries_of, sync_dir, write_atomically};
use crate::error::{Error, Result};

/// Environment variable naming the cache directory (see [`cache_root`]), for
/// putting the cache on a node-local disk without passing a path to every call.
pub const CACHE_ENV: &str = "DELTACELLS_CACHE";

/// The cache directory: `explicit`, else `$DELTACELLS_CACHE`,
/// `$XDG_CACHE_HOME/deltacells`, `~/.cache/deltacells`.
pub fn cache_root(explicit: Option<&Path>) -> Result<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    explicit
        .map(Path::to_path_buf)
        .or_else(|| var(CACHE_ENV))
        .or_else(|| var("XDG_CACHE_HOME").map(|p| p.join("deltacells")))
        .or_else(|| var("HOME").map(|p| p.join(".cache").join("deltacells")))
        .ok_or_else(|| {
            Error::Config(format!(
                "no cache directory: pass one or set {CACHE_ENV}, XDG_CACHE_HOME or HOME"
            ))
        })
}

/// One directory of the node cache.
#[derive(Clone, Debug)]
pub struct CacheDir {
    dir: PathBuf,
}

/// A held entry lock; released on drop.
#[derive(Debug)]
pub struct EntryLock {
    _file: File,
}

impl CacheDir {
    /// The cache directory `dir`, created if needed.
    pub fn open(dir: impl Into<PathBuf>) -> Result<CacheDir> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        Ok(CacheDir { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn checked(&self, name: &str) -> Result<PathBuf> {
        if matches!(name, "" | "." | "..") || name.contains(['/', '\\', '\0']) {
            return Err(Error::Input(format!(
                "{name:?} is not a valid cache entry name"
            )));
        }
        Ok(self.dir.join(name))
    }

    /// The path of entry `name` (a plain file name).
    pub fn path(&self, name: &str) -> Result<PathBuf> {
        self.checked(name)
    }

    /// Takes the exclusive lock of entry `name` (waiting for other holders),
    /// then removes the entry's stale temporary files.
    pub fn lock(&self, name: &str) -> Result<EntryLock> {
        let lock_path = self.checked(&format!("{name}.lock"))?;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(lock_path.display().to_string(), e))?;
        file.lock()
            .map_err(|e| Error::io(format!("locking {}", lock_path.display()), e))?;
        self.remove_stale(name)?;
        Ok(EntryLock { _file: file })
    }

    /// Removes entry `name`'s temporary files: only the lock holder writes,
    /// so under the lock any such file was left by a writer that died.
    fn remove_stale(&self, name: &str) -> Result<()> {
        remove_temporaries_of(&self.dir, name, |_| true).map(|_| ())
    }

    /// Writes entry `name` whole (temporary file, sync, rename, directory
    /// sync). Call it holding the entry's lock.
    pub fn write(
        &self,
        name: &str,
        write: impl FnOnce(&mut File) -> std::io::Result<()>,
    ) -> Result<()> {
        let path = self.checked(name)?;
        write_atomically(&path, write)?;
        sync_dir(&self.dir)
    }

    /// Removes entry `name` (no error if it is not there).
    pub fn remove(&self, name: &str) -> Result<()> {
        let path = self.checked(name)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(path.display().to_string(), e)),
        }
    }

    /// What entry `name` is when it exists but is no regular file (a
    /// directory, a FIFO, a device, a socket), else `None`. Check it before
    /// [`CacheDir::map`]: opening a FIFO blocks until a writer comes, and a
    /// directory or device cannot be mapped.
    pub fn not_a_file(&self, name: &str) -> Result<Option<&'static str>> {
        use std::os::unix::fs::FileTypeExt;
        let path = self.checked(name)?;
        let kind = match fs::metadata(&path) {
            Ok(m) => m.file_type(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path.display().to_string(), e)),
        };
        Ok(if kind.is_file() {
            None
        } else if kind.is_dir() {
            Some("directory")
        } else if kind.is_fifo() {
            Some("FIFO")
        } else if kind.is_socket() {
            Some("socket")
        } else {
            Some("device")
        })
    }

    /// Maps entry `name` read-only; `None` if it does not exist.
    pub fn map(&self, name: &str) -> Result<Option<Mmap>> {
        let path = self.checked(name)?;
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path.display().to_string(), e)),
        };
        // SAFETY: the mapping is read-only and cache files are never modified
        // while mapped by this crate: they are written whole under a
        // temporary name, synced and renamed into place, and a damaged one is
        // unlinked and replaced by a new file, never truncated or rewritten in
        // place, so the inode behind a mapping keeps its length and bytes.
        // (Another program truncating the file by hand would break that, as
        // with any mmap.)
        let map = unsafe { Mmap::map(&file) }
            .map_err(|e| Error::io(format!("mapping {}", path.display()), e))?;
        Ok(Some(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{is_temporary_of, temporary_name};

    #[test]
    fn cache_root_prefers_the_argument() {
        assert_eq!(
            cache_root(Some(Path::new("here"))).unwrap(),
            PathBuf::from("here")
        );
    }

    #[test]
    fn entries_are_written_whole_and_stale_temporaries_go_under_the_lock() {
        let root = std::env::temp_dir().join(format!("deltacells-nc-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let cache = CacheDir::open(&root).unwrap();
        // What a killed writer with this very pid left behind, under both the
        // old naming (pid and a per-process counter) and the current one.
        let stale = [
            root.join(format!(".col.arrow.{}.0.tmp", std::process::id())),
            root.join(format!(".col.arrow.{}-0000-0.tmp", std::process::id())),
        ];
        for s in &stale {
            fs::write(s, b"partial").unwrap();
        }
        let lock = cache.lock("col.arrow").unwrap();
        assert!(stale.iter().all(|s| !s.exists()));
        cache
            .write("col.arrow", |f| std::io::Write::write_all(f, b"whole"))
            .unwrap();
        drop(lock);
        assert_eq!(&cache.map("col.arrow").unwrap().unwrap()[..], b"whole");
        assert!(cache.map("other").unwrap().is_none());
        assert_eq!(cache.not_a_file("col.arrow").unwrap(), None);
        assert_eq!(cache.not_a_file("other").unwrap(), None);
        fs::create_dir(root.join("dir.arrow")).unwrap();
        assert_eq!(cache.not_a_file("dir.arrow").unwrap(), Some("directory"));
        let made = std::process::Command::new("mkfifo")
            .arg(root.join("fifo.arrow"))
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(cache.not_a_file("fifo.arrow").unwrap(), Some("FIFO"));
        assert!(cache.path("../x").is_err() && cache.path("..").is_err());
        let left: Vec<_> = fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.iter().all(|n| !n.ends_with(".tmp")), "{left:?}");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn only_an_entrys_own_temporaries_are_taken_for_stale() {
        let ours = temporary_name("a.arrow");
        assert!(is_temporary_of(&ours, "a.arrow"));
        assert!(is_temporary_of(".a.arrow.41.7.tmp", "a.arrow"));
        // Another entry's, whose name begins with this one's.
        let theirs = temporary_name("a.arrow.b.arrow");
        assert!(is_temporary_of(&theirs, "a.arrow.b.arrow"));
        assert!(!is_temporary_of(&theirs, "a.arrow"));
        assert!(!is_temporary_of(".a.arrow.1.arrow.2.3.tmp", "a.arrow"));
        assert!(!is_temporary_of(".a.arrow.tmp", "a.arrow"));
        assert!(!is_temporary_of("a.arrow.1-0a-2.tmp", "a.arrow"));
        // A writer of a.arrow under its lock leaves a.arrow.b.arrow's alone.
        let root =
            std::env::temp_dir().join(format!("deltacells-nc-prefix-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let cache = CacheDir::open(&root).unwrap();
        fs::write(root.join(&theirs), b"being written").unwrap();
        let lock = cache.lock("a.arrow").unwrap();
        cache
            .write("a.arrow", |f| std::io::Write::write_all(f, b"whole"))
            .unwrap();
        drop(lock);
        assert!(root.join(&theirs).exists());
        fs::remove_dir_all(&root).unwrap();
    }
}

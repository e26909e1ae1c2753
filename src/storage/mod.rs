//! Where bytes live: local directories, memory, object storage.
//!
//! The bottom layer of the crate: `dataset` and
//! `obs` both read and write through a [`Store`], and nothing
//! here knows about tiles or obs. A store holds named objects
//! (`manifest.json`, `tiles/tile_000000.dct`, ...) under a root (a directory
//! or a bucket prefix) and offers whole and ranged reads, several ranges of
//! one object at once (coalesced, and concurrent where the backend gains from
//! it), an atomic put, and a listing.
//!
//! * [`LocalStore`]: files under a directory (positional reads, puts by
//!   temporary file and rename).
//! * [`MemoryStore`]: objects in memory.
//! * [`ObjectStore`](object::ObjectStore) (cargo feature `object-store`, on by
//!   default): S3, GCS, Azure and HTTP through the `object_store` crate, with
//!   retries, backoff and a timeout on every request, run on a runtime of its
//!   own (never on the decode workers).
//! * [`open`]: a location (a path or a URL such as `s3://bucket/prefix`) to a store.
//! * [`Fetcher`]: the bounded I/O stage that fetches objects ahead of decode.
//! * `node_cache`: the per-node cache directory (lock files, atomic files, mmap).

mod bytes;
mod fetch;
mod local;
pub(crate) use local::write_atomically;
pub(crate) mod location;
mod memory;
pub(crate) mod node_cache;
#[cfg(feature = "object-store")]
pub mod object;
mod prefixed;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

pub use self::bytes::AlignedBytes;
pub use fetch::{FetchThreads, Fetcher};
pub use local::{remove_abandoned_temporaries, LocalStore};
pub use location::{location_stem, open, resolved, Location};
pub use memory::MemoryStore;
pub use prefixed::Prefixed;

use crate::error::{Error, Result};

/// Ranges of one object closer than this are fetched as one read: a request
/// costs far more than a few KiB of extra transfer, on a disk or a network.
pub const COALESCE_GAP: u64 = 32 << 10;

/// A source and sink of named objects.
///
/// Keys are relative, `/`-separated, without empty, `.` or `..` components.
/// Reads never see a partial object: [`Store::put`] replaces an object whole.
pub trait Store: Send + Sync {
    /// Size of an object, `None` if it does not exist.
    fn size(&self, key: &str) -> Result<Option<u64>>;

    /// A whole object, `None` if it does not exist.
    fn get(&self, key: &str) -> Result<Option<AlignedBytes>>;

    /// A byte range of an object (an error if it does not exist or is shorter).
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<AlignedBytes>;

    /// The bytes of `range` that an object holds (fewer where it ends
    /// sooner, none where it ends before `range` starts), with the
    /// object's size: what a read of part of an object checks the object
    /// against (a tile's size in the manifest) before it trusts the bytes.
    /// An error if the object does not exist. The default asks for the size,
    /// then for the bytes; a ranged GET answers both at once (its
    /// `Content-Range` names the object's size).
    fn get_range_sized(&self, key: &str, range: Range<u64>) -> Result<(AlignedBytes, u64)> {
        let size = self.size(key)?.ok_or_else(|| {
            Error::io(
                format!("{}: {key}", self.describe()),
                std::io::ErrorKind::NotFound.into(),
            )
        })?;
        let held = range.start..range.end.min(size);
        let bytes = if held.is_empty() {
            AlignedBytes::default()
        } else {
            self.get_range(key, held)?
        };
        Ok((bytes, size))
    }

    /// Several byte ranges of one object, in the order given. Ranges closer
    /// than [`COALESCE_GAP`] are read together; backends where requests are
    /// slow issue the reads concurrently.
    fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> Result<Vec<AlignedBytes>> {
        let merged = coalesce(ranges, COALESCE_GAP);
        let fetched = merged
            .iter()
            .map(|r| self.get_range(key, r.clone()))
            .collect::<Result<Vec<_>>>()?;
        Ok(split_coalesced(ranges, &merged, &fetched))
    }

    /// Writes an object atomically: readers see the old object or the whole
    /// new one, never a part (a temporary file and a rename locally; one PUT
    /// or a completed multipart upload remotely).
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let _ = bytes;
        Err(Error::io(
            format!("{}: cannot write {key}", self.describe()),
            std::io::ErrorKind::Unsupported.into(),
        ))
    }

    /// Removes an object; removing one that does not exist is not an error
    /// (a rerun of a cleanup finds it gone).
    fn delete(&self, key: &str) -> Result<()> {
        Err(Error::io(
            format!("{}: cannot delete {key}", self.describe()),
            std::io::ErrorKind::Unsupported.into(),
        ))
    }

    /// Removes the temporary files that writers killed mid-put left under
    /// directory `dir` (`""`: everywhere), and says how many. Only a local
    /// store has any: an object store's upload is invisible until complete.
    /// Call it only when no writer is at work (it holds the lock).
    fn remove_temporaries(&self, dir: &str) -> Result<usize> {
        let _ = dir;
        Ok(0)
    }

    /// The keys that start with `prefix`, sorted (temporary files excluded).
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Err(Error::io(
            format!("{}: cannot list {prefix}", self.describe()),
            std::io::ErrorKind::Unsupported.into(),
        ))
    }

    /// Makes the puts under directory `dir` (`""`: the root) durable: after a
    /// power loss they are all there. A directory fsync locally; nothing where
    /// a completed put is already durable (object storage, memory).
    fn sync(&self, dir: &str) -> Result<()> {
        let _ = dir;
        Ok(())
    }

    /// Takes the store's writer lock, held until the returned guard is
    /// dropped; an error if another writer holds it. Locally an exclusive
    /// `flock` on the directory; stores without locks return an empty guard.
    fn lock_exclusive(&self) -> Result<StoreLock> {
        Ok(StoreLock::none())
    }

    /// Whether a request is expensive (a network round trip), so that
    /// readers should fetch only the byte ranges they need, not whole objects.
    fn is_remote(&self) -> bool {
        false
    }

    /// Where the store is, for messages.
    fn describe(&self) -> String;
}

/// A held writer lock (see [`Store::lock_exclusive`]); released on drop.
pub struct StoreLock {
    _held: Option<Box<dyn Send + Sync>>,
}

impl StoreLock {
    /// A guard that holds nothing.
    pub fn none() -> StoreLock {
        StoreLock { _held: None }
    }

    /// A guard that releases the lock when `held` is dropped.
    pub fn holding(held: impl Send + Sync + 'static) -> StoreLock {
        StoreLock {
            _held: Some(Box::new(held)),
        }
    }
}

impl std::fmt::Debug for StoreLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self._held.is_some() {
            "StoreLock(held)"
        } else {
            "StoreLock(none)"
        })
    }
}

/// Refuses keys that could escape the root or name nothing.
pub(crate) fn check_key(key: &str) -> Result<()> {
    let bad = key.starts_with('/')
        || key.contains('\\')
        || key.contains('\0')
        || (!key.is_empty()
            && key
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == ".."));
    if bad {
        return Err(Error::Input(format!("{key:?} is not a valid object key")));
    }
    Ok(())
}

/// A fresh temporary name for `name`: hidden, so listings skip it, and unique
/// per process, thread and call. It is created exclusively and the caller
/// picks another name if it exists (a killed process with a reused pid can
/// have left one behind).
pub(crate) fn temporary_name(name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        ".{name}.{}-{nanos:08x}-{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether `s` is a number in decimal digits (at least one): the process
/// ids and counters in temporary names, the numbers of tile and shard keys.
pub(crate) fn is_decimal(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `file` is a temporary file of entry `name`, as
/// [`temporary_name`] names them (`.<name>.<pid>-<nanos>-<n>.tmp`) or as
/// earlier versions did (`.<name>.<pid>.<n>.tmp`). Matched exactly: by its
/// prefix alone, `.a.arrow.` also began the temporary file of an entry
/// `a.arrow.b.arrow`, which a writer of `a.arrow` deleted under another
/// writer's feet.
pub(crate) fn is_temporary_of(file: &str, name: &str) -> bool {
    let Some(middle) = file
        .strip_prefix('.')
        .and_then(|f| f.strip_prefix(name))
        .and_then(|f| f.strip_prefix('.'))
        .and_then(|f| f.strip_suffix(".tmp"))
    else {
        return false;
    };
    match middle.split('-').collect::<Vec<_>>()[..] {
        [pid, nanos, n] => {
            is_decimal(pid)
                && is_decimal(n)
                && !nanos.is_empty()
                && nanos.bytes().all(|b| b.is_ascii_hexdigit())
        }
        [old] => matches!(old.split_once('.'), Some((pid, n)) if is_decimal(pid) && is_decimal(n)),
        _ => false,
    }
}

/// Merges ranges that overlap or lie within `gap` bytes of each other.
/// The result is sorted and covers every input range.
pub fn coalesce(ranges: &[Range<u64>], gap: u64) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.iter().filter(|r| r.start < r.end).cloned().collect();
    sorted.sort_unstable_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match merged.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(r.end);
            }
            _ => merged.push(r),
        }
    }
    merged
}

/// Cuts each requested range out of the coalesced reads that cover it.
pub(crate) fn split_coalesced(
    ranges: &[Range<u64>],
    merged: &[Range<u64>],
    fetched: &[AlignedBytes],
) -> Vec<AlignedBytes> {
    ranges
        .iter()
        .map(|r| {
            if r.start >= r.end {
                return AlignedBytes::default();
            }
            // Merged ranges are sorted and disjoint: the last one starting
            // at or before `r` holds it.
            let i = merged.partition_point(|m| m.start <= r.start) - 1;
            let at = (r.start - merged[i].start) as usize;
            AlignedBytes::copy_from(&fetched[i].as_bytes()[at..at + (r.end - r.start) as usize])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_merges_near_ranges_and_splits_back() {
        let ranges = [100..200u64, 0..10, 150..160, 5000..5010, 210..220, 7..7];
        let merged = coalesce(&ranges, 16);
        assert_eq!(merged, vec![0..10, 100..220, 5000..5010]);
        let data: Vec<u8> = (0..6000u32).map(|i| (i % 251) as u8).collect();
        let fetched: Vec<AlignedBytes> = merged
            .iter()
            .map(|m| AlignedBytes::copy_from(&data[m.start as usize..m.end as usize]))
            .collect();
        for (r, b) in ranges
            .iter()
            .zip(split_coalesced(&ranges, &merged, &fetched))
        {
            assert_eq!(b.as_bytes(), &data[r.start as usize..r.end as usize]);
        }
    }

    #[test]
    fn keys_cannot_escape_the_root() {
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../b",
            "a//b",
            "a/./b",
            "a\\b",
            "tiles/",
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        for good in [
            "manifest.json",
            "tiles/tile_000000.dct",
            "obs/obs_0000.parquet",
            "",
        ] {
            assert!(check_key(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn memory_and_local_stores_agree() {
        let dir = std::env::temp_dir().join(format!("deltacells-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let local = LocalStore::new(&dir);
        let memory = MemoryStore::new();
        let stores: [&dyn Store; 2] = [&local, &memory];
        for s in stores {
            s.put("tiles/tile_000001.dct", b"second").unwrap();
            s.put("tiles/tile_000000.dct", b"first!").unwrap();
            s.put("manifest.json", b"{}").unwrap();
            s.put("manifest.json", b"{\"a\":1}").unwrap();
            assert_eq!(s.size("manifest.json").unwrap(), Some(7));
            assert_eq!(s.size("nothing").unwrap(), None);
            assert!(s.get("nothing").unwrap().is_none());
            assert_eq!(
                s.get("manifest.json").unwrap().unwrap().as_bytes(),
                b"{\"a\":1}"
            );
            assert_eq!(
                s.list("tiles/").unwrap(),
                ["tiles/tile_000000.dct", "tiles/tile_000001.dct"]
            );
            assert_eq!(s.list("").unwrap().len(), 3);
            let got = s
                .get_ranges("tiles/tile_000001.dct", &[3..6, 0..2])
                .unwrap();
            assert_eq!(got[0].as_bytes(), b"ond");
            assert_eq!(got[1].as_bytes(), b"se");
            assert!(s.get_range("tiles/tile_000001.dct", 4..7).is_err());
            // With the object's size, a range is cut where the object ends.
            for (range, held) in [(1..4, &b"eco"[..]), (4..9, b"nd"), (7..9, b"")] {
                let (bytes, size) = s.get_range_sized("tiles/tile_000001.dct", range).unwrap();
                assert_eq!((bytes.as_bytes(), size), (held, 6));
            }
            match s.get_range_sized("nothing", 0..1) {
                Err(Error::Io { error, .. }) => {
                    assert_eq!(error.kind(), std::io::ErrorKind::NotFound)
                }
                other => panic!("{:?}", other.map(|(_, size)| size)),
            }
            assert!(s.put("../escape", b"x").is_err());
            s.sync("tiles").unwrap();
        }
        let held = local.lock_exclusive().unwrap();
        assert!(
            local.lock_exclusive().is_err(),
            "a second writer must be refused"
        );
        drop(held);
        drop(local.lock_exclusive().unwrap());
        // A FIFO where an object should be: an error at once (opening it
        // for reading had waited for a writer forever).
        let fifo = dir.join("tiles/tile_000002.dct");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        for got in [
            local.get("tiles/tile_000002.dct").map(|_| ()),
            local.get_range("tiles/tile_000002.dct", 0..1).map(|_| ()),
        ] {
            assert!(got.unwrap_err().to_string().contains("not a regular file"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! A byte-bounded cache of fetched tiles and decoded chunks.
//!
//! Training batches drawn from a window of tiles touch nearly every chunk of
//! the window each time (256 random cells out of ~16k hit most of 32 chunks),
//! so without a cache each batch would decode ~60 times more than it returns.
//! Entries are shared (`Arc`), evicted least-recently-used first, and the bound
//! counts the bytes the entries hold.
//!
//! Any number of readers share one cache: its lock is held only to look an
//! entry up or to insert one, never while a tile is fetched or a chunk
//! decoded, so concurrent reads proceed in parallel. A panic elsewhere cannot
//! leave the map half-updated (no user code runs under the lock), so a
//! poisoned lock is taken over rather than failing every later read.
//!
//! A read makes room for the chunks it is about to decode before decoding
//! them ([`ChunkCache::make_room`]), and decodes into the buffers of the
//! chunks it evicted. A fresh buffer of a decoded chunk (~260 KB at the
//! default chunking) is zeroed by the allocator or faulted in page by page;
//! measured on uniform random reads, that cost as much as the tile kernels
//! themselves.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::engine::decoded::DecodedChunk;
use crate::storage::AlignedBytes;

/// A validated tile's bytes.
///
/// The tile object at its full length: [`crate::format::tile::TileView::parse`]
/// accepted it, or, for a ranged fetch of a few chunks (the other bytes are
/// zero), [`crate::format::tile::TileView::parse_partial`] did. Ranged tiles
/// serve the one read that fetched them and are never cached.
#[derive(Debug)]
pub(crate) struct TileBytes {
    /// The tile's bytes.
    pub bytes: AlignedBytes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Tile(usize),
    Chunk(usize, usize),
}

enum Entry {
    Tile(Arc<TileBytes>),
    Chunk(Arc<DecodedChunk>),
}

/// The cache, shared by every reader of a dataset (see the module docs).
pub(crate) struct ChunkCache {
    capacity: usize,
    lru: Mutex<Lru>,
}

/// The entries and their recency, behind the cache's lock.
#[derive(Default)]
struct Lru {
    used: usize,
    clock: u64,
    entries: HashMap<Key, (Entry, usize, u64)>,
    /// Every entry's key by its last use: the least recent comes first, so
    /// eviction does not scan the entries.
    order: BTreeMap<u64, Key>,
}

impl ChunkCache {
    /// A cache holding at most `capacity` bytes (0 keeps nothing between requests).
    pub(crate) fn new(capacity: usize) -> ChunkCache {
        ChunkCache {
            capacity,
            lru: Mutex::new(Lru::default()),
        }
    }

    /// The bound, in bytes.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes currently held.
    #[cfg(test)]
    fn used(&self) -> usize {
        self.lock().used
    }

    /// A cached tile.
    pub(crate) fn tile(&self, tile: usize) -> Option<Arc<TileBytes>> {
        match self.lock().touch(Key::Tile(tile)) {
            Some(Entry::Tile(t)) => Some(t.clone()),
            _ => None,
        }
    }

    /// Whether tile `tile` is cached (without counting as a use).
    pub(crate) fn has_tile(&self, tile: usize) -> bool {
        self.lock().entries.contains_key(&Key::Tile(tile))
    }

    /// Whether chunk `(tile, chunk)` is cached decoded (without counting as a use).
    pub(crate) fn has_chunk(&self, tile: usize, chunk: usize) -> bool {
        self.lock().entries.contains_key(&Key::Chunk(tile, chunk))
    }

    /// A cached decoded chunk.
    pub(crate) fn chunk(&self, tile: usize, chunk: usize) -> Option<Arc<DecodedChunk>> {
        match self.lock().touch(Key::Chunk(tile, chunk)) {
            Some(Entry::Chunk(c)) => Some(c.clone()),
            _ => None,
        }
    }

    /// Evicts least recently used entries until `bytes` more fit within the
    /// bound, and returns the evicted chunks that no reader still holds, for
    /// their buffers (their contents are stale). Other readers may fill the
    /// room again before the caller inserts; the bound is enforced on insert.
    pub(crate) fn make_room(&self, bytes: usize) -> Vec<DecodedChunk> {
        let mut lru = self.lock();
        let evicted = lru.evict(bytes, self.capacity);
        drop(lru);
        evicted
            .into_iter()
            .filter_map(|e| match e {
                Entry::Chunk(c) => Arc::into_inner(c),
                Entry::Tile(_) => None,
            })
            .collect()
    }

    /// Adds a tile (evicting older entries beyond the bound; possibly itself).
    pub(crate) fn put_tile(&self, tile: usize, t: Arc<TileBytes>) {
        let bytes = t.bytes.len();
        self.insert(Key::Tile(tile), Entry::Tile(t), bytes);
    }

    /// Drops tile `tile` and its decoded chunks: a reader done with them for
    /// good (a window of batches, once built) lets their buffers serve the
    /// next fetch and decode rather than wait for the bound to evict them.
    pub(crate) fn forget_tile(&self, tile: usize) {
        let mut lru = self.lock();
        let keys: Vec<Key> = lru
            .entries
            .keys()
            .copied()
            .filter(|k| matches!(*k, Key::Tile(t) | Key::Chunk(t, _) if t == tile))
            .collect();
        let forgotten: Vec<Entry> = keys.into_iter().filter_map(|k| lru.remove(k)).collect();
        // Dropped after the lock is released, as in `insert`.
        drop(lru);
        drop(forgotten);
    }

    /// Adds a decoded chunk (evicting older entries beyond the bound; possibly itself).
    pub(crate) fn put_chunk(&self, tile: usize, chunk: usize, c: Arc<DecodedChunk>) {
        let bytes = c.bytes();
        self.insert(Key::Chunk(tile, chunk), Entry::Chunk(c), bytes);
    }

    fn insert(&self, key: Key, entry: Entry, bytes: usize) {
        // Evicted entries are dropped after the lock is released: freeing a
        // large decoded chunk should not hold up other readers.
        let evicted = self.lock().insert(key, entry, bytes, self.capacity);
        drop(evicted);
    }
}

impl Lru {
    fn touch(&mut self, key: Key) -> Option<&Entry> {
        self.clock += 1;
        let clock = self.clock;
        let e = self.entries.get_mut(&key)?;
        self.order.remove(&e.2);
        self.order.insert(clock, key);
        e.2 = clock;
        Some(&e.0)
    }

    fn insert(&mut self, key: Key, entry: Entry, bytes: usize, capacity: usize) -> Vec<Entry> {
        self.clock += 1;
        let mut evicted = Vec::new();
        if let Some(old) = self.entries.insert(key, (entry, bytes, self.clock)) {
            self.order.remove(&old.2);
            self.used -= old.1;
            evicted.push(old.0);
        }
        self.order.insert(self.clock, key);
        self.used += bytes;
        evicted.extend(self.evict(0, capacity));
        evicted
    }

    /// Takes entry `key` out, if held.
    fn remove(&mut self, key: Key) -> Option<Entry> {
        let (entry, bytes, clock) = self.entries.remove(&key)?;
        self.order.remove(&clock);
        self.used -= bytes;
        Some(entry)
    }

    /// Evicts least recent entries until `used + room <= capacity` (or none
    /// are left).
    fn evict(&mut self, room: usize, capacity: usize) -> Vec<Entry> {
        let mut evicted = Vec::new();
        while self.used.saturating_add(room) > capacity {
            let Some((_, &victim)) = self.order.first_key_value() else {
                break;
            };
            evicted.extend(self.remove(victim));
        }
        evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(n: usize) -> Arc<DecodedChunk> {
        Arc::new(DecodedChunk {
            cell_lo: 0,
            indptr: vec![0, n],
            indices: vec![0; n],
            values: vec![1; n],
            totals: Vec::new(),
        })
    }

    #[test]
    fn stays_within_its_bound_and_evicts_least_recent() {
        let c = ChunkCache::new(1000);
        c.put_chunk(0, 0, chunk(50)); // 416 bytes
        c.put_chunk(0, 1, chunk(50));
        assert!(c.chunk(0, 0).is_some()); // 0,0 is now the most recent
        c.put_chunk(0, 2, chunk(50));
        assert!(c.used() <= 1000);
        assert!(c.chunk(0, 1).is_none(), "least recently used went first");
        assert!(c.chunk(0, 0).is_some() && c.chunk(0, 2).is_some());
        let none = ChunkCache::new(0);
        none.put_chunk(1, 1, chunk(1));
        assert_eq!(none.used(), 0);
    }

    #[test]
    fn making_room_hands_back_the_evicted_chunks_no_reader_holds() {
        let c = ChunkCache::new(2000);
        c.put_chunk(0, 0, chunk(100)); // 816 bytes
        c.put_chunk(0, 1, chunk(50)); // 416 bytes
        let held = c.chunk(0, 0).expect("cached");
        c.put_chunk(0, 2, chunk(50)); // 0,1 is now the least recent
        assert!(c.make_room(300).is_empty(), "1,648 + 300 fit 2,000");
        let spares = c.make_room(700);
        assert_eq!(spares.len(), 1, "0,1 was evicted and is free");
        assert_eq!(spares[0].indices.len(), 50);
        assert!(c.chunk(0, 1).is_none() && c.used() == 1232);
        let spares = c.make_room(1800);
        assert_eq!(c.used(), 0, "0,0 and 0,2 evicted");
        assert_eq!(spares.len(), 1, "0,0 stays with the reader holding it");
        assert_eq!(spares[0].indices.len(), 50);
        assert_eq!(held.indices.len(), 100);
    }

    #[test]
    fn forgetting_a_tile_drops_it_and_its_chunks_only() {
        let c = ChunkCache::new(1 << 20);
        let tile = |n| {
            Arc::new(TileBytes {
                bytes: AlignedBytes::zeroed(n),
            })
        };
        c.put_tile(3, tile(100));
        c.put_tile(4, tile(200));
        c.put_chunk(3, 0, chunk(10));
        c.put_chunk(3, 7, chunk(10));
        c.put_chunk(4, 0, chunk(10));
        c.forget_tile(3);
        assert!(!c.has_tile(3) && !c.has_chunk(3, 0) && !c.has_chunk(3, 7));
        assert!(c.has_tile(4) && c.has_chunk(4, 0));
        assert_eq!(c.used(), 200 + chunk(10).bytes());
        c.forget_tile(9);
        c.put_chunk(3, 0, chunk(10));
        assert!(c.chunk(3, 0).is_some(), "a forgotten tile may come back");
    }

    #[test]
    fn a_panic_under_the_lock_does_not_fail_later_readers() {
        let c = ChunkCache::new(1000);
        c.put_chunk(0, 0, chunk(10));
        let poisoned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = c.lru.lock().unwrap();
            panic!("a reader panicked while holding the cache");
        }));
        assert!(poisoned.is_err() && c.lru.is_poisoned());
        assert!(c.chunk(0, 0).is_some());
        c.put_chunk(0, 1, chunk(10));
        assert!(c.chunk(0, 1).is_some());
    }
}

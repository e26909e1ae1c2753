//! A byte-bounded cache of fetched tiles and decoded chunks.
//!
//! Training batches drawn from a window of tiles touch nearly every chunk of
//! the window each time (256 random cells out of ~16k hit most of 32 chunks),
//! so without a cache each batch would decode ~60 times more than it returns.
//! Entries are shared (`Arc`), evicted least-recently-used first, and the bound
//! counts the bytes the entries hold.

use std::collections::HashMap;
use std::sync::Arc;

use crate::storage::AlignedBytes;

/// A validated tile's bytes.
#[derive(Debug)]
pub struct TileBytes {
    /// The tile object, at its full length; [`crate::format::tile::TileView::parse`]
    /// accepted it, or when `partial`, [`crate::format::tile::TileView::parse_partial`].
    pub bytes: AlignedBytes,
    /// Only the head and the frames of some chunks were fetched (the other
    /// bytes are zero): never cached, and only those chunks may be decoded.
    pub partial: bool,
}

/// One chunk, decoded: rows `cell_lo .. cell_lo + n_cells` of its tile.
#[derive(Debug, Default)]
pub struct DecodedChunk {
    /// First cell of the chunk, local to the tile.
    pub cell_lo: usize,
    /// Row offsets into `indices`/`values`, `n_cells + 1` entries from 0.
    pub indptr: Vec<usize>,
    /// Gene indices.
    pub indices: Vec<i32>,
    /// Exact counts.
    pub values: Vec<i32>,
}

impl DecodedChunk {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        8 * self.indptr.len() + 4 * self.indices.len() + 4 * self.values.len()
    }

    /// The genes and counts of local cell `cell` (which must lie in the chunk).
    pub fn row(&self, cell: usize) -> (&[i32], &[i32]) {
        let r = cell - self.cell_lo;
        let span = self.indptr[r]..self.indptr[r + 1];
        (&self.indices[span.clone()], &self.values[span])
    }
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

/// The cache. Not shared between threads: the planner owns it and hands `Arc`s out.
pub struct ChunkCache {
    capacity: usize,
    used: usize,
    clock: u64,
    entries: HashMap<Key, (Entry, usize, u64)>,
}

impl ChunkCache {
    /// A cache holding at most `capacity` bytes (0 keeps nothing between requests).
    pub fn new(capacity: usize) -> ChunkCache {
        ChunkCache {
            capacity,
            used: 0,
            clock: 0,
            entries: HashMap::new(),
        }
    }

    /// Bytes currently held.
    pub fn used(&self) -> usize {
        self.used
    }

    /// The configured bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn touch(&mut self, key: Key) -> Option<&Entry> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(&key).map(|e| {
            e.2 = clock;
            &e.0
        })
    }

    /// A cached tile.
    pub fn tile(&mut self, tile: usize) -> Option<Arc<TileBytes>> {
        match self.touch(Key::Tile(tile)) {
            Some(Entry::Tile(t)) => Some(t.clone()),
            _ => None,
        }
    }

    /// Whether tile `tile` is cached (without counting as a use).
    pub fn has_tile(&self, tile: usize) -> bool {
        self.entries.contains_key(&Key::Tile(tile))
    }

    /// A cached decoded chunk.
    pub fn chunk(&mut self, tile: usize, chunk: usize) -> Option<Arc<DecodedChunk>> {
        match self.touch(Key::Chunk(tile, chunk)) {
            Some(Entry::Chunk(c)) => Some(c.clone()),
            _ => None,
        }
    }

    fn insert(&mut self, key: Key, entry: Entry, bytes: usize) {
        self.clock += 1;
        if let Some(old) = self.entries.insert(key, (entry, bytes, self.clock)) {
            self.used -= old.1;
        }
        self.used += bytes;
        while self.used > self.capacity {
            let Some((&victim, _)) = self.entries.iter().min_by_key(|(_, e)| e.2) else {
                break;
            };
            let (_, b, _) = self.entries.remove(&victim).expect("present");
            self.used -= b;
        }
    }

    /// Adds a tile (evicting older entries beyond the bound; possibly itself).
    pub fn put_tile(&mut self, tile: usize, t: Arc<TileBytes>) {
        let bytes = t.bytes.len();
        self.insert(Key::Tile(tile), Entry::Tile(t), bytes);
    }

    /// Adds a decoded chunk (evicting older entries beyond the bound; possibly itself).
    pub fn put_chunk(&mut self, tile: usize, chunk: usize, c: Arc<DecodedChunk>) {
        let bytes = c.bytes();
        self.insert(Key::Chunk(tile, chunk), Entry::Chunk(c), bytes);
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
        })
    }

    #[test]
    fn stays_within_its_bound_and_evicts_least_recent() {
        let mut c = ChunkCache::new(1000);
        c.put_chunk(0, 0, chunk(50)); // 416 bytes
        c.put_chunk(0, 1, chunk(50));
        assert!(c.chunk(0, 0).is_some()); // 0,0 is now the most recent
        c.put_chunk(0, 2, chunk(50));
        assert!(c.used() <= 1000);
        assert!(c.chunk(0, 1).is_none(), "least recently used went first");
        assert!(c.chunk(0, 0).is_some() && c.chunk(0, 2).is_some());
        let mut none = ChunkCache::new(0);
        none.put_chunk(1, 1, chunk(1));
        assert_eq!(none.used(), 0);
    }
}

//! One buffer type for every backend: bytes in 8-byte-aligned memory, so a
//! tile's indptr (little-endian `i64`s at 8-byte offsets) can be borrowed in
//! place whichever store the tile came from.

use std::sync::{Mutex, PoisonError};

/// Bytes in an 8-byte-aligned buffer.
#[derive(Default)]
pub struct AlignedBytes {
    memory: Memory,
    len: usize,
}

/// Where the bytes live.
enum Memory {
    /// A heap allocation of words.
    Heap(Vec<u64>),
    /// Anonymous pages of their own, zero until written: a large buffer of
    /// which only parts are filled (a tile fetched by byte ranges) costs only
    /// the pages written, where a zeroed heap allocation that reuses freed
    /// memory would be cleared in full first.
    Pages(memmap2::MmapMut),
}

impl Default for Memory {
    fn default() -> Self {
        Memory::Heap(Vec::new())
    }
}

/// Buffers from this size on are worth pages of their own when sparse.
const PAGES_FROM: usize = 1 << 20;

/// Whole-object buffers given back, to be filled again: their pages are in
/// the process already, so a read into one neither faults them in nor has
/// them zeroed first. A fresh buffer per tile cost a scan 5-6% of its time
/// that way, and allocators return large buffers to the system when freed.
static POOL: Mutex<Vec<Vec<u64>>> = Mutex::new(Vec::new());

/// The most bytes the pool keeps: twenty 6 MB tiles. A scan keeps what it
/// decodes and what the I/O stage fetches ahead of it (8 requests by
/// default) outstanding; with half of this, buffers given back past the
/// bound were freed and the next round faulted as many in again (a 2-thread
/// scan of the 100,000-cell demo: 6,800 page faults a round, none now).
const POOL_BYTES: usize = 128 << 20;

impl AlignedBytes {
    /// A zeroed buffer of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBytes {
        AlignedBytes {
            memory: Memory::Heap(vec![0; len.div_ceil(8)]),
            len,
        }
    }

    /// A zeroed buffer of `len` bytes of which only small parts will be
    /// written (a tile fetched by byte ranges): large ones get pages of their
    /// own, so the parts never written cost nothing. An error, never an
    /// abort, when the system will not map that much.
    pub fn sparse(len: usize) -> std::io::Result<AlignedBytes> {
        if len < PAGES_FROM {
            return Ok(AlignedBytes::zeroed(len));
        }
        Ok(AlignedBytes {
            memory: Memory::Pages(memmap2::MmapMut::map_anon(len)?),
            len,
        })
    }

    /// A buffer of `len` bytes for a caller that writes every one of them
    /// before anything reads it (a whole object read from a file): it may
    /// hold an earlier buffer's bytes. Large ones come from the buffers
    /// dropped before (see [`POOL`]) when one is large enough; else from the
    /// allocator, zeroed by it (fresh pages come zeroed from the system, so
    /// nothing writes them before the read does). A pooled buffer too small
    /// is left for a smaller read: growing it would copy its stale bytes.
    pub(crate) fn for_overwrite(len: usize) -> AlignedBytes {
        let words = len.div_ceil(8);
        if len < PAGES_FROM {
            return AlignedBytes::zeroed(len);
        }
        let pooled = {
            let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
            smallest_fitting(pool.iter().map(Vec::capacity), words).map(|i| pool.swap_remove(i))
        };
        let buffer = match pooled {
            // Within its capacity: only words past its old length are zeroed.
            Some(mut buffer) => {
                buffer.resize(buffer.len().max(words), 0);
                buffer
            }
            None => vec![0; words],
        };
        AlignedBytes {
            memory: Memory::Heap(buffer),
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
        match &self.memory {
            Memory::Heap(words) => &bytemuck::cast_slice::<u64, u8>(words)[..self.len],
            Memory::Pages(pages) => &pages[..self.len],
        }
    }

    /// The bytes, mutably.
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        match &mut self.memory {
            Memory::Heap(words) => &mut bytemuck::cast_slice_mut::<u64, u8>(words)[..self.len],
            Memory::Pages(pages) => &mut pages[..self.len],
        }
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

/// Which of buffers of `sizes` words to use for `words`: the smallest that
/// holds them (a large buffer kept for a large read), if any.
fn smallest_fitting(sizes: impl Iterator<Item = usize>, words: usize) -> Option<usize> {
    sizes
        .enumerate()
        .filter(|&(_, n)| n >= words)
        .min_by_key(|&(_, n)| n)
        .map(|(i, _)| i)
}

impl Drop for AlignedBytes {
    /// Keeps a large heap buffer for `AlignedBytes::for_overwrite` (see
    /// `kept_in`).
    fn drop(&mut self) {
        let Memory::Heap(words) = &mut self.memory else {
            return;
        };
        if 8 * words.capacity() < PAGES_FROM {
            return;
        }
        let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
        let sizes = pool.iter().map(Vec::capacity);
        let dropped = match kept_in(sizes, words.capacity(), POOL_BYTES / 8) {
            Kept::Added => {
                pool.push(std::mem::take(words));
                None
            }
            Kept::Instead(i) => Some(std::mem::replace(&mut pool[i], std::mem::take(words))),
            Kept::Not => None,
        };
        // A buffer let go is freed after the lock is released.
        drop(pool);
        drop(dropped);
    }
}

/// Whether the pool keeps a buffer given back.
#[derive(Debug, PartialEq, Eq)]
enum Kept {
    /// Beside the others.
    Added,
    /// In place of the smaller one at this index.
    Instead(usize),
    /// Not at all.
    Not,
}

/// Whether a pool of buffers of `sizes` words, holding at most `limit`
/// words, keeps one of `words` words: beside them while they fit, else in
/// place of the smallest if that is smaller and the larger fits in its
/// place (a small buffer serves only reads as small, a large one any read
/// up to its size). Nothing is allocated: it runs under the pool's lock.
fn kept_in(sizes: impl Iterator<Item = usize> + Clone, words: usize, limit: usize) -> Kept {
    let held: usize = sizes.clone().sum();
    if held + words <= limit {
        return Kept::Added;
    }
    match sizes.enumerate().min_by_key(|&(_, n)| n) {
        Some((i, n)) if n < words && held - n + words <= limit => Kept::Instead(i),
        _ => Kept::Not,
    }
}

impl Clone for AlignedBytes {
    fn clone(&self) -> Self {
        AlignedBytes::copy_from(self.as_bytes())
    }
}

impl PartialEq for AlignedBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for AlignedBytes {}

impl std::fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBytes")
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pooled_buffer_is_the_smallest_that_fits_if_any() {
        let sizes = [300, 100, 200, 100];
        assert_eq!(smallest_fitting(sizes.into_iter(), 150), Some(2));
        assert_eq!(smallest_fitting(sizes.into_iter(), 100), Some(1));
        assert_eq!(smallest_fitting(sizes.into_iter(), 50), Some(1));
        assert_eq!(smallest_fitting(sizes.into_iter(), 400), None);
        assert_eq!(smallest_fitting([].into_iter(), 1), None);
    }

    #[test]
    fn a_full_pool_keeps_the_larger_buffer_within_its_bound() {
        assert_eq!(kept_in([0usize; 0].into_iter(), 10, 30), Kept::Added);
        assert_eq!(kept_in([10, 10].into_iter(), 10, 30), Kept::Added);
        assert_eq!(kept_in([10, 4, 12].into_iter(), 8, 30), Kept::Instead(1));
        assert_eq!(kept_in([10, 4, 12].into_iter(), 4, 30), Kept::Added);
        assert_eq!(kept_in([10, 6, 12].into_iter(), 5, 30), Kept::Not);
        assert_eq!(kept_in([10, 4, 12].into_iter(), 20, 30), Kept::Not);
    }

    #[test]
    fn buffers_are_aligned_and_exact() {
        for len in [0usize, 1, 7, 8, 9, 1000] {
            let src: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let b = AlignedBytes::copy_from(&src);
            assert_eq!(b.as_bytes(), &src[..]);
            assert_eq!(b.as_bytes().as_ptr() as usize % 8, 0);
        }
    }

    #[test]
    fn buffers_for_overwrite_are_exact_and_the_pool_stays_bounded() {
        for len in [3, PAGES_FROM - 1, PAGES_FROM + 3, 3 * PAGES_FROM] {
            let mut b = AlignedBytes::for_overwrite(len);
            assert_eq!((b.len(), b.as_bytes().as_ptr() as usize % 8), (len, 0));
            b.as_mut_bytes().fill(0xA5);
            assert!(b.as_bytes().iter().all(|&x| x == 0xA5));
        }
        let many: Vec<AlignedBytes> = (0..2 * POOL_BYTES / PAGES_FROM)
            .map(|_| AlignedBytes::for_overwrite(PAGES_FROM))
            .collect();
        drop(many);
        let pool = POOL.lock().unwrap();
        assert!(pool.iter().map(|b| 8 * b.capacity()).sum::<usize>() <= POOL_BYTES);
    }

    #[test]
    fn sparse_buffers_start_zeroed_and_compare_and_clone_by_content() {
        let small = AlignedBytes::sparse(100).unwrap();
        assert!(matches!(small.memory, Memory::Heap(_)) && small.as_bytes() == [0; 100]);
        let mut b = AlignedBytes::sparse(PAGES_FROM + 5).unwrap();
        assert!(matches!(b.memory, Memory::Pages(_)));
        assert!(b.as_bytes().iter().all(|&x| x == 0));
        b.as_mut_bytes()[PAGES_FROM + 4] = 7;
        let c = b.clone();
        assert_eq!(c, b);
        assert_eq!(c.as_bytes()[PAGES_FROM + 4], 7);
        assert_ne!(AlignedBytes::zeroed(PAGES_FROM + 5), b);
    }
}

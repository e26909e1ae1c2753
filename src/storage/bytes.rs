//! One buffer type for every backend: bytes in 8-byte-aligned memory, so a
//! tile's indptr (little-endian `i64`s at 8-byte offsets) can be borrowed in
//! place whichever store the tile came from.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_exact() {
        for len in [0usize, 1, 7, 8, 9, 1000] {
            let src: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let b = AlignedBytes::copy_from(&src);
            assert_eq!(b.as_bytes(), &src[..]);
            assert_eq!(b.as_bytes().as_ptr() as usize % 8, 0);
        }
    }
}

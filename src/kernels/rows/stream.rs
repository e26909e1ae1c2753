//! The vector body of copying rows composed in the cache to an output
//! nobody reads before it is handed out, past the cache.

use crate::kernels::vector::Vector;

/// A cache line: the unit [`stream_lines`] writes past the cache.
const LINE: usize = 64;

/// [`scalar::stream`] with each part copied by [`stream_lines`], then one
/// fence.
#[inline(always)]
pub(super) fn stream<V: Vector>(v: V, parts: &mut [(&[u8], &mut [u8])]) {
    for (src, dst) in parts.iter_mut() {
        stream_lines(v, src, dst);
    }
    v.fence_streams();
}

/// A copy of `src` to `dst` (as long) with the whole lines of `dst` written by
/// [`Vector::stream_u32`] from unaligned loads of `src`, a line at a
/// time (two registers on AVX2), and the partial lines before and after
/// them copied plainly: no line is written both ways (a plain store to a
/// line being streamed makes the core read it from memory again).
#[inline(always)]
pub(super) fn stream_lines<V: Vector>(v: V, src: &[u8], dst: &mut [u8]) {
    let n = dst.len();
    let registers = LINE / (4 * V::LANES);
    if !V::STREAMS || n < 2 * LINE || registers == 0 || src.len() != n {
        dst.copy_from_slice(src);
        return;
    }
    let head = (LINE - dst.as_ptr() as usize % LINE) % LINE;
    let lines = (n - head) / LINE;
    let tail = head + lines * LINE;
    dst[..head].copy_from_slice(&src[..head]);
    let (from, to) = (src.as_ptr(), dst.as_mut_ptr());
    for line in 0..lines {
        for r in 0..registers {
            let at = head + line * LINE + r * 4 * V::LANES;
            // SAFETY: `at + 4 * LANES <= tail <= n`, within both slices
            // (as long, checked above); `to + at` lies on a line boundary,
            // so it is aligned to `ALIGN` (at most a line).
            unsafe {
                let x = v.load_u32(from.add(at).cast());
                v.stream_u32(to.add(at).cast(), x);
            }
        }
    }
    dst[tail..].copy_from_slice(&src[tail..]);
}

//! The TS_2DIFF block kernels' reference: plain code that defines what every
//! backend must produce.
//!
//! These functions are also the ragged-end handlers of the vector backends, so
//! they take any input without panicking: a packed area shorter than the values
//! need reads as zero bits (the public entry points refuse such input before it
//! gets here).

use crate::kernels::block::{Divisor, Word};

/// Reads `out.len()` values of `width` bits (0..=`W::BITS`) from an MSB-first
/// bit stream: value `k` occupies stream bits `k * width ..`, each written from
/// its most significant bit down, starting at bit 7 of byte 0.
pub(crate) fn unpack<W: Word>(packed: &[u8], width: u32, out: &mut [W]) {
    let mask = u64::MAX.checked_shr(64 - width.min(64)).unwrap_or(0);
    // `acc` holds the stream bits read so far in its low `bits` bits; older
    // bits fall off the top harmlessly (a value needs at most 64 + 7 of them).
    let mut acc: u128 = 0;
    let mut bits = 0u32;
    let mut bytes = packed.iter();
    for o in out {
        while bits < width {
            acc = (acc << 8) | u128::from(bytes.next().copied().unwrap_or(0));
            bits += 8;
        }
        bits -= width;
        *o = W::truncate((acc >> bits) as u64 & mask);
    }
}

/// `buf[k] = prev + min_delta + buf[k]` as a running sum (wrapping), returning
/// the last value (or `prev` when `buf` is empty).
pub(crate) fn delta<W: Word>(mut prev: W, min_delta: W, buf: &mut [W]) -> W {
    for x in buf {
        prev = prev.wrapping_add(min_delta).wrapping_add(*x);
        *x = prev;
    }
    prev
}

/// `out[k] = ints[k] / divisor` with the Java conversion rules (see [`Word::scaled`]).
pub(crate) fn scale<W: Word>(ints: &[W], divisor: &Divisor, out: &mut [W::Float]) {
    for (o, &i) in out.iter_mut().zip(ints) {
        *o = i.scaled(divisor.value());
    }
}

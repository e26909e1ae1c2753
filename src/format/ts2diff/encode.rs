//! Page encoding, as Java's `FloatEncoder` + `Int/LongDeltaEncoder` write it.

use std::io::Write;

use crate::error::Error;
use crate::Result;

use super::error::Ts2diffError;
use super::repr::Stored;
use super::wire::{RAW_MARKER, ROUNDED_MARKER};
use super::{max_point_value, PageFloat};

/// Writes TS_2DIFF pages. A small `Copy` value of settings.
///
/// Output is byte-identical to the Java encoder's except for pad bits, which
/// are always zero here (Java sometimes leaves stale bits in them; readers
/// ignore them).
#[derive(Clone, Copy, Debug)]
pub struct Encoder {
    mpn: i32,
    block_size: u32,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new()
    }
}

impl Encoder {
    /// TsFile's default maxPointNumber (`TSFileConfig.floatPrecision`), used
    /// when a schema sets none.
    pub const DEFAULT_MAX_POINT_NUMBER: i32 = 2;
    /// `DeltaBinaryEncoder`'s default: 128 deltas (129 values) per block.
    pub const DEFAULT_BLOCK_SIZE: u32 = 128;

    /// Java's defaults: maxPointNumber 2, 128 deltas per block.
    pub fn new() -> Encoder {
        Encoder {
            mpn: Self::DEFAULT_MAX_POINT_NUMBER,
            block_size: Self::DEFAULT_BLOCK_SIZE,
        }
    }

    /// Decimal digits kept: values are stored as `round(v * 10^mpn)` where
    /// that fits. Any `mpn <= 0` means no scaling and is stored as 0.
    pub fn max_point_number(mut self, mpn: i32) -> Encoder {
        self.mpn = mpn;
        self
    }

    /// Deltas per block (a block holds one more value); `1..=i32::MAX`,
    /// checked when encoding.
    pub fn block_size(mut self, block_size: u32) -> Encoder {
        self.block_size = block_size;
        self
    }

    /// Encodes `values` as one page.
    pub fn encode<T: PageFloat>(&self, values: &[T]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_into(values, &mut out)?;
        Ok(out)
    }

    /// Appends the page for `values` to `out`. Nothing is appended on error.
    pub fn encode_into<T: PageFloat>(&self, values: &[T], out: &mut Vec<u8>) -> Result<()> {
        if self.block_size == 0 || self.block_size > i32::MAX as u32 {
            return Err(Ts2diffError::BlockSize(self.block_size).into());
        }
        if values.len() > i32::MAX as usize {
            return Err(Ts2diffError::PageTooLarge(values.len()).into());
        }
        if values.is_empty() {
            // Java writes nothing at all for a page without values.
            return Ok(());
        }
        let p = max_point_value(self.mpn);
        let n = values.len();
        let mut ints = Vec::with_capacity(n);
        let mut scaled = vec![0u8; n / 8 + 1];
        let mut raw = vec![0u8; n / 8 + 1];
        let (mut any_rounded, mut any_raw) = (false, false);
        for (i, v) in values.iter().enumerate() {
            let (stored, int) = v.classify(p);
            match stored {
                Stored::Scaled => scaled[i / 8] |= 1 << (i % 8),
                Stored::Rounded => any_rounded = true,
                Stored::Raw => {
                    raw[i / 8] |= 1 << (i % 8);
                    any_raw = true;
                }
            }
            ints.push(int);
        }

        let word = T::TYPE.word_bytes();
        let block_values = self.block_size as usize + 1;
        out.reserve(2 * (n / 8 + 1) + 20 + n.div_ceil(block_values) * (8 + 2 * word) + n * word);
        if any_raw || any_rounded {
            put_uvar(out, if any_raw { RAW_MARKER } else { ROUNDED_MARKER });
            put_uvar(out, n as u32);
            out.extend_from_slice(&scaled);
            if any_raw {
                out.extend_from_slice(&raw);
            }
        }
        put_uvar(out, self.mpn.max(0) as u32);
        for block in ints.chunks(block_values) {
            put_block::<T>(block, out);
        }
        Ok(())
    }

    /// Writes the page for `values` to `w` (encoded in memory first: the
    /// header depends on every value).
    pub fn write<T: PageFloat, W: Write>(&self, values: &[T], mut w: W) -> Result<()> {
        let page = self.encode(values)?;
        w.write_all(&page)
            .map_err(|e| Error::io("writing a TS_2DIFF page", e))
    }
}

/// Unsigned LEB128, as `ReadWriteForEncodingUtils.writeUnsignedVarInt`.
fn put_uvar(out: &mut Vec<u8>, mut x: u32) {
    while x >= 0x80 {
        out.push(x as u8 | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// One `DeltaBinaryEncoder` block: `[writeIndex][bitWidth][minDelta][first]`
/// then the two-diffs `delta - minDelta`, MSB-first at the block's width.
fn put_block<T: PageFloat>(ints: &[T::Bits], out: &mut Vec<u8>) {
    let first = ints[0];
    let word_bits = 8 * T::TYPE.word_bytes() as u32;
    let mask = u64::MAX >> (64 - word_bits);
    let delta = |k: usize| {
        T::to_i64(T::from_i64(
            T::to_i64(ints[k + 1]).wrapping_sub(T::to_i64(ints[k])),
        ))
    };
    let deltas = ints.len() - 1;
    let (min_delta, width) = match (0..deltas).map(delta).min() {
        // One value: no delta, and Java writes its "no delta yet" sentinel.
        None => (T::NO_DELTA, 0),
        Some(min) => {
            let widest = (0..deltas)
                .map(|k| (delta(k).wrapping_sub(min)) as u64 & mask)
                .max()
                .unwrap_or(0);
            (T::from_i64(min), 64 - widest.leading_zeros())
        }
    };
    out.extend_from_slice(&(deltas as i32).to_be_bytes());
    out.extend_from_slice(&(width as i32).to_be_bytes());
    T::put_be(min_delta, out);
    T::put_be(first, out);
    if width == 0 {
        return;
    }
    let min = T::to_i64(min_delta);
    // Bits not yet written sit in the low `pending` bits of `acc`.
    let mut acc: u128 = 0;
    let mut pending = 0u32;
    for k in 0..deltas {
        let td = delta(k).wrapping_sub(min) as u64 & mask;
        acc = (acc << width) | u128::from(td);
        pending += width;
        while pending >= 8 {
            pending -= 8;
            out.push((acc >> pending) as u8);
        }
    }
    if pending > 0 {
        out.push((acc << (8 - pending)) as u8);
    }
}

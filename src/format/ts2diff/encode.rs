//! Page encoding, as Java's `FloatEncoder` + `Int/LongDeltaEncoder` write it.

use std::io::Write;

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
    /// that fits. Any `mpn <= 0` means no scaling and is stored as 0; the
    /// page markers `2147483646` and `2147483647` are refused when encoding
    /// (a page of scaled values starts with its maxPointNumber).
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
    pub fn encode<T: PageFloat>(&self, values: &[T]) -> Result<Vec<u8>, Ts2diffError> {
        let mut out = Vec::new();
        self.encode_into(values, &mut out)?;
        Ok(out)
    }

    /// Appends the page for `values` to `out`. Nothing is appended on error.
    pub fn encode_into<T: PageFloat>(
        &self,
        values: &[T],
        out: &mut Vec<u8>,
    ) -> Result<(), Ts2diffError> {
        if self.block_size == 0 || self.block_size > i32::MAX as u32 {
            return Err(Ts2diffError::BlockSize(self.block_size));
        }
        if values.len() > i32::MAX as usize {
            return Err(Ts2diffError::PageTooLarge(values.len()));
        }
        if [RAW_MARKER, ROUNDED_MARKER].contains(&(self.mpn.max(0) as u32)) {
            return Err(Ts2diffError::MaxPointNumber(self.mpn));
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
        let mut td = Vec::with_capacity(block_values.min(n));
        for block in ints.chunks(block_values) {
            put_block::<T>(block, &mut td, out);
        }
        Ok(())
    }

    /// Writes the page for `values` to `w` (encoded in memory first: the
    /// header depends on every value). Settings the page cannot hold fail as
    /// [`std::io::ErrorKind::InvalidInput`], carrying the [`Ts2diffError`].
    pub fn write<T: PageFloat, W: Write>(&self, values: &[T], mut w: W) -> std::io::Result<()> {
        let page = self
            .encode(values)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        w.write_all(&page)
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
/// `td` is scratch for the two-diffs (reused across blocks).
fn put_block<T: PageFloat>(ints: &[T::Bits], td: &mut Vec<u64>, out: &mut Vec<u8>) {
    let first = ints[0];
    let deltas = ints.len() - 1;
    let mask = u64::MAX >> (64 - 8 * T::TYPE.word_bytes() as u32);
    // Deltas wrap at the word width and compare as signed words.
    td.clear();
    td.extend(
        ints.windows(2)
            .map(|w| T::to_i64(T::from_i64(T::to_i64(w[1]).wrapping_sub(T::to_i64(w[0])))) as u64),
    );
    let (min_delta, width) = match td.iter().map(|&d| d as i64).min() {
        // One value: no delta, and Java writes its "no delta yet" sentinel.
        None => (T::NO_DELTA, 0),
        Some(min) => {
            let mut any = 0u64;
            for d in td.iter_mut() {
                *d = d.wrapping_sub(min as u64) & mask;
                any |= *d;
            }
            // The widest two-diff has the highest set bit of them all.
            (T::from_i64(min), 64 - any.leading_zeros())
        }
    };
    out.extend_from_slice(&(deltas as i32).to_be_bytes());
    out.extend_from_slice(&(width as i32).to_be_bytes());
    T::put_be(min_delta, out);
    T::put_be(first, out);
    if width == 0 {
        return;
    }
    out.reserve((deltas * width as usize).div_ceil(8));
    // Bits not yet written sit in the low `pending` (< 32) bits of `acc`;
    // they leave 32 at a time, big-endian, which is the MSB-first stream
    // order. Two-diffs wider than 32 bits go in as two pieces so that `acc`
    // never needs more than 64 bits.
    let mut acc = 0u64;
    let mut pending = 0u32;
    let mut push = |bits: u64, n: u32| {
        acc = (acc << n) | bits;
        pending += n;
        if pending >= 32 {
            pending -= 32;
            out.extend_from_slice(&((acc >> pending) as u32).to_be_bytes());
        }
    };
    for &d in td.iter() {
        if width > 32 {
            push(d >> 32, width - 32);
            push(d & 0xFFFF_FFFF, 32);
        } else {
            push(d, width);
        }
    }
    if pending > 0 {
        // The last bits, left-aligned, zero pad bits after them.
        let tail = (acc << (64 - pending)).to_be_bytes();
        out.extend_from_slice(&tail[..pending.div_ceil(8) as usize]);
    }
}

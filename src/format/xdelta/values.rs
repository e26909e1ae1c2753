//! The value list: one pass that tokenises, resolves blanks and repeats,
//! and hands each run of equal items to a visitor.

use super::header::{parse_count, BlankRule, Params, Version};
use super::number::{self, Literal};
use super::{error_at, syntax, XdeltaError};

/// One resolved item: a value or a null.
#[derive(Clone, Copy, Debug)]
pub(super) enum Item {
    Null,
    Num(Literal),
}

/// Receives the runs of the value list, in order.
pub(super) trait Visit {
    /// `count` copies of `item`, from the value at byte `offset`.
    fn run(&mut self, offset: usize, item: Item, count: u64) -> Result<(), XdeltaError>;
}

/// Walks the value list: tokenises, resolves blanks and repeats, and hands
/// each run to `visit`. One pass, no allocation.
pub(super) fn walk<V: Visit>(
    bytes: &[u8],
    params: &Params,
    visit: &mut V,
) -> Result<(), XdeltaError> {
    let v0 = params.header.version == Version::V0;
    let mut pos = params.values_start;
    if pos == bytes.len() {
        return Ok(());
    }
    // What a blank (or v0 repeat) stands for; set by the first item, which
    // the grammar requires to be nonblank.
    let mut prev = Item::Null;
    let mut first = true;
    let mut commas = Commas::new(bytes, pos);
    let blank = |prev: Item| match params.blank {
        BlankRule::Repeat => prev,
        BlankRule::Null => Item::Null,
        BlankRule::Value(lit) => Item::Num(lit),
    };
    loop {
        let start = pos;
        let token_end = commas.next();
        let (item, count, end) = match bytes.get(pos) {
            None | Some(b',') => {
                if first {
                    return Err(XdeltaError::BlankFirst { offset: start });
                }
                (blank(prev), 1, pos)
            }
            Some(b'n') => match bytes.get(pos + 1) {
                Some(b'n') if !v0 => {
                    let (count, end) = parse_count(bytes, pos + 2)?;
                    (Item::Null, count, end)
                }
                Some(b'0'..=b'9') => {
                    let (count, end) = parse_count(bytes, pos + 1)?;
                    if first {
                        return Err(XdeltaError::BlankFirst { offset: start });
                    }
                    (if v0 { prev } else { blank(prev) }, count, end)
                }
                _ if v0 => {
                    return Err(error_at(bytes, pos + 1, |found| XdeltaError::BadCount {
                        offset: pos + 1,
                        expected: "a repeat count after 'n' (v0 has no nulls)",
                        found,
                    }));
                }
                _ => (Item::Null, 1, pos + 1),
            },
            Some(_) => {
                let (lit, end) = number::parse(bytes, pos)?;
                if !v0 && bytes.get(end) == Some(&b'n') {
                    let (count, end) = parse_count(bytes, end + 1)?;
                    (Item::Num(lit), count, end)
                } else {
                    (Item::Num(lit), 1, end)
                }
            }
        };
        if end != token_end {
            return Err(syntax(bytes, end, "',' or the end of the input"));
        }
        visit.run(start, item, count)?;
        prev = item;
        first = false;
        if token_end == bytes.len() {
            return Ok(());
        }
        pos = token_end + 1;
    }
}

/// The commas of the value list, found 64 bytes at a time.
///
/// Knowing where each value ends before parsing it takes the parse off the
/// loop-carried path: the next value's start no longer waits for this one's
/// digits to be scanned, so the CPU overlaps consecutive values.
struct Commas<'a> {
    bytes: &'a [u8],
    /// Offset of the current 64-byte block.
    base: usize,
    /// Bit `i` set iff `bytes[base + i]` is a comma not yet returned.
    mask: u64,
}

impl<'a> Commas<'a> {
    /// The commas at or after `from`.
    fn new(bytes: &'a [u8], from: usize) -> Commas<'a> {
        let base = from - from % 64;
        let mask = comma_mask(bytes, base) & (u64::MAX << (from % 64));
        Commas { bytes, base, mask }
    }

    /// The next comma's offset, or the input's length after the last one.
    #[inline(always)]
    fn next(&mut self) -> usize {
        while self.mask == 0 {
            if self.base + 64 >= self.bytes.len() {
                return self.bytes.len();
            }
            self.base += 64;
            self.mask = comma_mask(self.bytes, self.base);
        }
        let at = self.base + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        at
    }
}

/// Bit `i` set iff `bytes[base + i]` is a comma (SWAR, eight bytes a word).
#[inline]
fn comma_mask(bytes: &[u8], base: usize) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let rest = bytes.get(base..).unwrap_or_default();
    let mut padded = [0u8; 64];
    let block = match rest.first_chunk::<64>() {
        Some(block) => block,
        None => {
            padded[..rest.len()].copy_from_slice(rest);
            &padded
        }
    };
    let mut mask = 0;
    for (k, word) in block.as_chunks::<8>().0.iter().enumerate() {
        let x = u64::from_le_bytes(*word) ^ (u64::from(b',') * ONES);
        // High bit of each byte that is not a comma (no carries across bytes),
        // inverted: the high bit of each comma byte.
        let commas = !((((x & (0x7F * ONES)) + 0x7F * ONES) | x) & (0x80 * ONES)) & (0x80 * ONES);
        // Gather the eight high bits into one byte (all partial products land
        // in distinct bit positions, so the multiplication cannot carry).
        let bits = (commas >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= bits << (8 * k);
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commas_are_found_in_every_block() {
        let text: Vec<u8> = (0..300)
            .map(|i| {
                if i % 7 == 3 || i % 64 == 63 || i == 64 {
                    b','
                } else {
                    b'1' + (i % 9) as u8
                }
            })
            .collect();
        for from in [0, 1, 63, 64, 65, 200, 299, 300] {
            let want: Vec<usize> = (from..text.len())
                .filter(|&i| text[i] == b',')
                .chain([text.len(), text.len()])
                .collect();
            let mut commas = Commas::new(&text, from);
            let got: Vec<usize> = (0..want.len()).map(|_| commas.next()).collect();
            assert_eq!(got, want, "from {from}");
        }
    }
}

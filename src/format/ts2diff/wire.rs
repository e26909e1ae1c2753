//! Page and block headers: parsing with every bound checked before use.

use super::error::{Field, Ts2diffError};
use super::{FloatType, PageFloat};

/// Form 2's leading varint (`Integer.MAX_VALUE`).
pub(super) const ROUNDED_MARKER: u32 = 0x7FFF_FFFF;
/// Form 3's leading varint (`Integer.MAX_VALUE - 1`).
pub(super) const RAW_MARKER: u32 = 0x7FFF_FFFE;

/// Which of the three page layouts a page uses (the encoder picks the
/// simplest that can hold every value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// Form 1: every value scaled by `10^mpn`; no bitmaps.
    Scaled,
    /// Form 2: some value stored rounded (its scaled form overflowed); a
    /// page-wide bitmap marks the scaled ones.
    Rounded,
    /// Form 3: some value stored as raw IEEE bits (NaN, infinities, values
    /// beyond the integer range); a second bitmap marks those.
    Raw,
}

impl Form {
    /// 1, 2 or 3, as the layout spec numbers them.
    pub fn number(self) -> u8 {
        match self {
            Form::Scaled => 1,
            Form::Rounded => 2,
            Form::Raw => 3,
        }
    }
}

/// What a page's headers say, from [`inspect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageInfo {
    /// The layout; `None` for the empty page (zero bytes, zero values).
    pub form: Option<Form>,
    /// maxPointNumber as stored (a Java `int`: a varint above 2^31 - 1 reads
    /// as negative, and any value <= 0 means no scaling); `None` when empty.
    pub max_point_number: Option<i32>,
    /// Number of values in the page.
    pub values: u64,
    /// Number of integer blocks.
    pub blocks: u64,
}

/// A cursor over the page bytes.
pub(super) struct Reader<'a> {
    page: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(page: &'a [u8]) -> Reader<'a> {
        Reader { page, pos: 0 }
    }

    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    fn left(&self) -> usize {
        self.page.len() - self.pos
    }

    /// An unsigned LEB128 varint of at most 32 bits (5 bytes, the fifth
    /// below 0x10). Java reads longer ones by letting shifts wrap; a strict
    /// reader refuses them. Non-minimal encodings within 5 bytes are accepted,
    /// as Java accepts them.
    pub(super) fn uvar(&mut self, field: Field) -> Result<u32, Ts2diffError> {
        let offset = self.pos;
        let mut value = 0u32;
        for i in 0..5 {
            let Some(&byte) = self.page.get(self.pos) else {
                return Err(Ts2diffError::TruncatedVarint { field, offset });
            };
            self.pos += 1;
            if i == 4 && byte >= 0x10 {
                return Err(Ts2diffError::VarintOverflow { field, offset });
            }
            value |= u32::from(byte & 0x7F) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Ts2diffError::VarintOverflow { field, offset })
    }

    /// A bitmap of `count` values: `count / 8 + 1` bytes.
    fn bitmap(&mut self, field: Field, count: u32) -> Result<&'a [u8], Ts2diffError> {
        let need = count as usize / 8 + 1;
        if need > self.left() {
            return Err(Ts2diffError::BitmapPastEnd {
                field,
                offset: self.pos,
                count,
                need,
                have: self.left(),
            });
        }
        let bytes = &self.page[self.pos..self.pos + need];
        self.pos += need;
        Ok(bytes)
    }
}

/// The page-level metadata before the first block.
pub(super) struct Header<'a> {
    pub form: Form,
    /// Form 2/3: the declared value count and where its varint starts.
    pub count: Option<(u32, usize)>,
    /// Form 2/3: bit `p` set if value `p` is scaled (empty in Form 1).
    pub scaled: &'a [u8],
    /// Form 3: bit `p` set if value `p` is raw bits (empty otherwise).
    pub raw: &'a [u8],
    pub mpn: i32,
    /// Offset of the first block.
    pub blocks: usize,
}

/// Parses the page header; `None` for the empty page.
pub(super) fn header(page: &[u8]) -> Result<Option<Header<'_>>, Ts2diffError> {
    if page.is_empty() {
        return Ok(None);
    }
    let mut r = Reader::new(page);
    let tag = r.uvar(Field::Marker)?;
    let (form, count, scaled, raw, mpn) = if tag == ROUNDED_MARKER || tag == RAW_MARKER {
        let count_at = r.pos();
        let count = r.uvar(Field::ValueCount)?;
        if count > i32::MAX as u32 {
            return Err(Ts2diffError::ValueCount {
                offset: count_at,
                count,
            });
        }
        let scaled = r.bitmap(Field::ScaledBitmap, count)?;
        let (form, raw) = if tag == RAW_MARKER {
            (Form::Raw, r.bitmap(Field::RawBitmap, count)?)
        } else {
            (Form::Rounded, &[][..])
        };
        let mpn = r.uvar(Field::MaxPointNumber)?;
        (form, Some((count, count_at)), scaled, raw, mpn)
    } else {
        (Form::Scaled, None, &[][..], &[][..], tag)
    };
    if r.pos() == page.len() {
        return Err(Ts2diffError::NoBlocks { offset: r.pos() });
    }
    Ok(Some(Header {
        form,
        count,
        scaled,
        raw,
        mpn: mpn as i32,
        blocks: r.pos(),
    }))
}

/// One integer block's header, checked against the page.
pub(super) struct Block<B> {
    pub offset: usize,
    /// writeIndex: the block holds `deltas + 1` values.
    pub deltas: u32,
    pub width: u32,
    pub min_delta: B,
    pub first: B,
    /// Offset of the packed deltas.
    pub packed: usize,
    /// Offset just past the packed deltas (the next block).
    pub end: usize,
}

/// Parses the block at `offset` of a page of `T` values.
pub(super) fn block<T: PageFloat>(
    page: &[u8],
    offset: usize,
) -> Result<Block<T::Bits>, Ts2diffError> {
    let word = T::TYPE.word_bytes();
    let head = 8 + 2 * word;
    let have = page.len() - offset;
    if have < head {
        return Err(Ts2diffError::Truncated {
            field: Field::BlockHeader,
            offset,
            need: head,
            have,
        });
    }
    let h = &page[offset..offset + head];
    let write_index = i32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    let bit_width = i32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let deltas = u32::try_from(write_index).map_err(|_| Ts2diffError::NegativeWriteIndex {
        offset,
        write_index,
    })?;
    let max = 8 * word as u32;
    let width =
        u32::try_from(bit_width)
            .ok()
            .filter(|&w| w <= max)
            .ok_or(Ts2diffError::BitWidth {
                offset,
                bit_width,
                max,
            })?;
    let need = (u64::from(deltas) * u64::from(width)).div_ceil(8);
    let packed = offset + head;
    let have = page.len() - packed;
    if need > have as u64 {
        return Err(Ts2diffError::PackedPastEnd {
            offset,
            deltas,
            bit_width: width,
            need,
            have,
        });
    }
    Ok(Block {
        offset,
        deltas,
        width,
        min_delta: T::from_be(&h[8..8 + word]),
        first: T::from_be(&h[8 + word..]),
        packed,
        end: packed + need as usize,
    })
}

impl FloatType {
    /// Bytes of one stored integer: 4 (FLOAT) or 8 (DOUBLE).
    pub(super) fn word_bytes(self) -> usize {
        match self {
            FloatType::Float => 4,
            FloatType::Double => 8,
        }
    }
}

/// Walks the headers of every block, without decoding, and checks the page's
/// structure: everything [`super::Decoder`] checks except the output size.
/// Takes time proportional to the number of blocks and no memory.
pub fn inspect(page: &[u8], ty: FloatType) -> Result<PageInfo, Ts2diffError> {
    match ty {
        FloatType::Float => inspect_as::<f32>(page),
        FloatType::Double => inspect_as::<f64>(page),
    }
}

fn inspect_as<T: PageFloat>(page: &[u8]) -> Result<PageInfo, Ts2diffError> {
    let Some(h) = header(page)? else {
        return Ok(PageInfo {
            form: None,
            max_point_number: None,
            values: 0,
            blocks: 0,
        });
    };
    let mut values = 0u64;
    let mut blocks = 0u64;
    let mut pos = h.blocks;
    while pos < page.len() {
        let b = block::<T>(page, pos)?;
        values += u64::from(b.deltas) + 1;
        blocks += 1;
        if let Some((declared, _)) = h.count {
            if values > u64::from(declared) {
                return Err(Ts2diffError::CountMismatch {
                    offset: b.offset,
                    declared,
                    found: values,
                });
            }
        }
        pos = b.end;
    }
    if let Some((declared, _)) = h.count {
        if values != u64::from(declared) {
            return Err(Ts2diffError::CountMismatch {
                offset: page.len(),
                declared,
                found: values,
            });
        }
    }
    Ok(PageInfo {
        form: Some(h.form),
        max_point_number: Some(h.mpn),
        values,
        blocks,
    })
}

//! Why a TS_2DIFF page could not be decoded or encoded.

use std::fmt;

use crate::kernels::BackendError;

/// The part of a page that was being read when something went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The leading varint: a Form 2/3 marker or Form 1's maxPointNumber.
    Marker,
    /// Form 2/3: the page value count varint.
    ValueCount,
    /// Form 2/3: the bitmap of values stored in scaled form.
    ScaledBitmap,
    /// Form 3: the bitmap of values stored as raw IEEE bits.
    RawBitmap,
    /// Form 2/3: the maxPointNumber varint after the bitmaps.
    MaxPointNumber,
    /// An integer block's header (writeIndex, bitWidth, minDelta, firstValue).
    BlockHeader,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Marker => "page marker varint",
            Field::ValueCount => "value count varint",
            Field::ScaledBitmap => "scaled-form bitmap",
            Field::RawBitmap => "raw-bits bitmap",
            Field::MaxPointNumber => "maxPointNumber varint",
            Field::BlockHeader => "block header",
        })
    }
}

/// Why a TS_2DIFF page could not be decoded or encoded. Decoding errors give
/// the byte offset in the page where the offending field starts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Ts2diffError {
    /// The page ends inside a varint (its last byte has the continuation bit).
    #[error("truncated {field} at byte {offset}: the page ends before the varint's last byte")]
    TruncatedVarint {
        /// The varint being read.
        field: Field,
        /// Byte offset of the varint's first byte.
        offset: usize,
    },
    /// A varint longer than 5 bytes, or whose value does not fit in 32 bits.
    #[error(
        "{field} at byte {offset} does not fit in 32 bits (at most 5 bytes, the 5th below 0x10)"
    )]
    VarintOverflow {
        /// The varint being read.
        field: Field,
        /// Byte offset of the varint's first byte.
        offset: usize,
    },
    /// A Form 2/3 value count above `i32::MAX` (negative for the Java reader).
    #[error("value count {count} at byte {offset} exceeds 2^31 - 1")]
    ValueCount {
        /// Byte offset of the count varint.
        offset: usize,
        /// The count it holds.
        count: u32,
    },
    /// A bitmap that would extend past the end of the page.
    #[error("{field} for {count} values at byte {offset} needs {need} bytes, only {have} left")]
    BitmapPastEnd {
        /// Which bitmap.
        field: Field,
        /// Byte offset where the bitmap starts.
        offset: usize,
        /// The page's value count, one bit each.
        count: u32,
        /// Bytes the bitmap needs.
        need: usize,
        /// Bytes left in the page from `offset`.
        have: usize,
    },
    /// The page ends inside a fixed-size field.
    #[error("truncated {field} at byte {offset}: need {need} bytes, only {have} left")]
    Truncated {
        /// The field being read.
        field: Field,
        /// Byte offset where the field starts.
        offset: usize,
        /// The field's size in bytes.
        need: usize,
        /// Bytes left in the page from `offset`.
        have: usize,
    },
    /// The page header is complete but no integer block follows it.
    #[error("no integer block after the page header (page ends at byte {offset})")]
    NoBlocks {
        /// The page length: where the first block should have started.
        offset: usize,
    },
    /// A block's writeIndex (its delta count) is negative.
    #[error("block at byte {offset}: writeIndex {write_index} is negative, expected 0..=2^31-1")]
    NegativeWriteIndex {
        /// Byte offset of the block header.
        offset: usize,
        /// The writeIndex it holds.
        write_index: i32,
    },
    /// A block's bitWidth is negative or wider than the page's integers.
    #[error("block at byte {offset}: bitWidth {bit_width}, expected 0..={max}")]
    BitWidth {
        /// Byte offset of the block header.
        offset: usize,
        /// The bitWidth it holds.
        bit_width: i32,
        /// The widest allowed: 32 for FLOAT pages, 64 for DOUBLE.
        max: u32,
    },
    /// A block claims more packed bits than the page holds.
    #[error("block at byte {offset}: {deltas} deltas of {bit_width} bits need {need} packed bytes, only {have} left")]
    PackedPastEnd {
        /// Byte offset of the block header.
        offset: usize,
        /// The block's delta count (its writeIndex).
        deltas: u32,
        /// Bits per packed delta.
        bit_width: u32,
        /// Bytes the packed deltas need.
        need: u64,
        /// Bytes left in the page after the block header.
        have: usize,
    },
    /// The blocks of a Form 2/3 page hold a different number of values than
    /// its header (and bitmaps) declare.
    #[error(
        "page declares {declared} values but its blocks hold {found} (detected at byte {offset})"
    )]
    CountMismatch {
        /// Byte offset of the block that went past the count, or the page
        /// length when the blocks hold too few.
        offset: usize,
        /// The value count in the page header.
        declared: u32,
        /// The values the blocks hold, up to where the mismatch was seen.
        found: u64,
    },
    /// The page holds more values than the output can take: the caller's
    /// slice, or the decoder's `max_values` cap for an allocating decode.
    #[error("block at byte {offset} takes the page past {limit} values (the output's capacity)")]
    TooManyValues {
        /// Byte offset of the field that declared or held the excess values
        /// (0 when the whole page's count was checked up front).
        offset: usize,
        /// The output's capacity in values.
        limit: usize,
    },
    /// An encoder block size outside `1..=i32::MAX`; holds the size given.
    #[error("block size {0} is outside 1..=2147483647")]
    BlockSize(u32),
    /// An encoder maxPointNumber that is one of the page markers
    /// (`2147483646`, `2147483647`): a page of scaled values starts with it,
    /// and would read as a page of the other forms. Any maxPointNumber from
    /// 309 on scales a double past its range alike.
    #[error("maxPointNumber {0} is a TS_2DIFF page marker and cannot start a page (any value from 309 on scales alike)")]
    MaxPointNumber(i32),
    /// More values than one page can count (`i32::MAX`); holds how many were given.
    #[error("{0} values do not fit in one page (at most 2147483647)")]
    PageTooLarge(usize),
    /// A value type name other than float (f32) or double (f64); holds the name.
    #[error("unknown TS_2DIFF value type `{0}` (expected float or double)")]
    UnknownType(String),
    /// The kernel backend the decoder was asked to use cannot run here.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

//! Why a TS_2DIFF page could not be decoded or encoded.

use std::fmt;

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
    TruncatedVarint { field: Field, offset: usize },
    /// A varint longer than 5 bytes, or whose value does not fit in 32 bits.
    #[error(
        "{field} at byte {offset} does not fit in 32 bits (at most 5 bytes, the 5th below 0x10)"
    )]
    VarintOverflow { field: Field, offset: usize },
    /// A Form 2/3 value count above `i32::MAX` (negative for the Java reader).
    #[error("value count {count} at byte {offset} exceeds 2^31 - 1")]
    ValueCount { offset: usize, count: u32 },
    /// A bitmap that would extend past the end of the page.
    #[error("{field} for {count} values at byte {offset} needs {need} bytes, only {have} left")]
    BitmapPastEnd {
        field: Field,
        offset: usize,
        count: u32,
        need: usize,
        have: usize,
    },
    /// The page ends inside a fixed-size field.
    #[error("truncated {field} at byte {offset}: need {need} bytes, only {have} left")]
    Truncated {
        field: Field,
        offset: usize,
        need: usize,
        have: usize,
    },
    /// The page header is complete but no integer block follows it.
    #[error("no integer block after the page header (page ends at byte {offset})")]
    NoBlocks { offset: usize },
    /// A block's writeIndex (its delta count) is negative.
    #[error("block at byte {offset}: writeIndex {write_index} is negative, expected 0..=2^31-1")]
    NegativeWriteIndex { offset: usize, write_index: i32 },
    /// A block's bitWidth is negative or wider than the page's integers.
    #[error("block at byte {offset}: bitWidth {bit_width}, expected 0..={max}")]
    BitWidth {
        offset: usize,
        bit_width: i32,
        max: u32,
    },
    /// A block claims more packed bits than the page holds.
    #[error("block at byte {offset}: {deltas} deltas of {bit_width} bits need {need} packed bytes, only {have} left")]
    PackedPastEnd {
        offset: usize,
        deltas: u32,
        bit_width: u32,
        need: u64,
        have: usize,
    },
    /// The blocks of a Form 2/3 page hold a different number of values than
    /// its header (and bitmaps) declare.
    #[error(
        "page declares {declared} values but its blocks hold {found} (detected at byte {offset})"
    )]
    CountMismatch {
        offset: usize,
        declared: u32,
        found: u64,
    },
    /// The page holds more values than the output can take: the caller's
    /// slice, or the decoder's `max_values` cap for an allocating decode.
    #[error("block at byte {offset} takes the page past {limit} values (the output's capacity)")]
    TooManyValues { offset: usize, limit: usize },
    /// An encoder block size outside `1..=i32::MAX`.
    #[error("block size {0} is outside 1..=2147483647")]
    BlockSize(u32),
    /// More values than one page can count (`i32::MAX`).
    #[error("{0} values do not fit in one page (at most 2147483647)")]
    PageTooLarge(usize),
}

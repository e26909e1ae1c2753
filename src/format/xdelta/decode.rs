//! The XDelta decoder: header, then one pass over the values, then the
//! integration and scale/offset kernels.

use super::number::{self, Literal};
use super::{error_at, syntax, Parameter, XdeltaError};
use crate::kernels::integrate::{self, Affine, IntegrateKernels, Overflow, Scale};
use crate::kernels::{Backend, KernelTable};

/// The format version of a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// No version prefix: the original grammar (`d`/`dd`, `nY` repeats).
    V0,
    /// `v1`.
    V1,
}

/// Delta order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// `d0`: values as they are (the v0 default).
    D0,
    /// `d1` (v0: `d`): each value a delta from the previous (the v1 default).
    D1,
    /// `d2` (v0: `dd`): deltas of deltas.
    D2,
}

/// What a blank value stands for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Blank {
    /// `br` (the default): the previous item, a null included.
    Repeat,
    /// `bn`: a null.
    Null,
    /// `b<number>`: this number.
    Value(f64),
}

/// The parameters of a string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Header {
    /// Format version.
    pub version: Version,
    /// Delta order.
    pub delta: Delta,
    /// Blank rule.
    pub blank: Blank,
    /// Scalar, then offset.
    pub affine: Affine,
}

/// The blank rule with its literal, for exact integer decoding.
#[derive(Clone, Copy, Debug)]
enum BlankRule {
    Repeat,
    Null,
    Value(Literal),
}

/// A parsed header and where the values start.
struct Params {
    header: Header,
    blank: BlankRule,
    values_start: usize,
}

fn parse_count_prefix(
    bytes: &[u8],
    start: usize,
    what: &'static str,
) -> Result<(u64, usize), XdeltaError> {
    let mut i = start;
    let mut value: u64 = 0;
    while let Some(&b @ b'0'..=b'9') = bytes.get(i) {
        value = value.saturating_mul(10).saturating_add(u64::from(b - b'0'));
        i += 1;
    }
    if i == start {
        return Err(syntax(bytes, start, what));
    }
    Ok((value, i))
}

/// Parses a repeat count: digits, no leading zero, at least 1. Counts beyond
/// `u64` saturate (and then exceed any expansion limit).
#[inline]
fn parse_count(bytes: &[u8], start: usize) -> Result<(u64, usize), XdeltaError> {
    match bytes.get(start) {
        Some(b'1'..=b'9') => {}
        _ => {
            let expected = if bytes.get(start) == Some(&b'0') {
                "a count of at least 1, without leading zeros"
            } else {
                "a count (digits)"
            };
            return Err(error_at(bytes, start, |found| XdeltaError::BadCount {
                offset: start,
                expected,
                found,
            }));
        }
    }
    parse_count_prefix(bytes, start, "a count (digits)")
}

/// Parses the header; `values_start` is just past the `:`.
fn parse_header(bytes: &[u8]) -> Result<Params, XdeltaError> {
    let mut header = Header {
        version: Version::V1,
        delta: Delta::D1,
        blank: Blank::Repeat,
        affine: Affine::IDENTITY,
    };
    let mut blank = BlankRule::Repeat;
    let mut pos = 0;
    if bytes.first() == Some(&b'v') {
        if bytes.get(1) == Some(&b'0') && matches!(bytes.get(2), Some(b'0'..=b'9')) {
            return Err(syntax(bytes, 2, "a version without leading zeros"));
        }
        let (version, end) = parse_count_prefix(bytes, 1, "a version number")?;
        if version != 1 {
            return Err(XdeltaError::UnknownVersion { offset: 0, version });
        }
        pos = end;
        match bytes.get(pos) {
            Some(b':') => {
                return Ok(Params {
                    header,
                    blank,
                    values_start: pos + 1,
                });
            }
            Some(b',') => pos += 1,
            _ => return Err(syntax(bytes, pos, "',' or ':' after the version")),
        }
    } else {
        header.version = Version::V0;
        header.delta = Delta::D0;
    }
    let v0 = header.version == Version::V0;
    let mut seen = [false; 4];
    loop {
        let start = pos;
        let (parameter, end) = match bytes.get(pos) {
            Some(b'd') => {
                let (delta, end) = if v0 {
                    match bytes.get(pos + 1) {
                        Some(b'd') => (Delta::D2, pos + 2),
                        _ => (Delta::D1, pos + 1),
                    }
                } else {
                    match bytes.get(pos + 1) {
                        Some(b'0') => (Delta::D0, pos + 2),
                        Some(b'1') => (Delta::D1, pos + 2),
                        Some(b'2') => (Delta::D2, pos + 2),
                        _ => return Err(syntax(bytes, pos + 1, "0, 1 or 2 after 'd'")),
                    }
                };
                header.delta = delta;
                (Parameter::Delta, end)
            }
            Some(b'b') => {
                let end = match bytes.get(pos + 1) {
                    Some(b'r') => {
                        header.blank = Blank::Repeat;
                        blank = BlankRule::Repeat;
                        pos + 2
                    }
                    Some(b'n') if !v0 => {
                        header.blank = Blank::Null;
                        blank = BlankRule::Null;
                        pos + 2
                    }
                    _ => {
                        let (lit, end) = number::parse(bytes, pos + 1)?;
                        header.blank = Blank::Value(lit.float());
                        blank = BlankRule::Value(lit);
                        end
                    }
                };
                (Parameter::Blank, end)
            }
            Some(&op @ (b'*' | b'/')) => {
                let (lit, end) = number::parse(bytes, pos + 1)?;
                header.affine.scale = if op == b'*' {
                    Scale::Mul(lit.float())
                } else if lit.float() == 0.0 {
                    return Err(XdeltaError::ZeroDivisor { offset: pos });
                } else {
                    Scale::Div(lit.float())
                };
                (Parameter::Scalar, end)
            }
            Some(&op @ (b'+' | b'-')) => {
                let (lit, end) = number::parse(bytes, pos + 1)?;
                header.affine.offset = Some(if op == b'+' {
                    lit.float()
                } else {
                    -lit.float()
                });
                (Parameter::Offset, end)
            }
            _ => {
                let expected = if v0 && pos == 0 {
                    "'v' or a parameter (d, b, *, /, + or -)"
                } else {
                    "a parameter (d, b, *, /, + or -)"
                };
                return Err(syntax(bytes, pos, expected));
            }
        };
        let slot = &mut seen[parameter as usize];
        if *slot {
            return Err(XdeltaError::RepeatedParameter {
                offset: start,
                parameter,
            });
        }
        *slot = true;
        pos = end;
        match bytes.get(pos) {
            Some(b',') => pos += 1,
            Some(b':') => {
                return Ok(Params {
                    header,
                    blank,
                    values_start: pos + 1,
                })
            }
            _ => return Err(syntax(bytes, pos, "',' or ':' after a parameter")),
        }
    }
}

/// One resolved item: a value or a null.
#[derive(Clone, Copy, Debug)]
enum Item {
    Null,
    Num(Literal),
}

/// Receives the runs of the value list, in order.
trait Visit {
    /// `count` copies of `item`, from the value at byte `offset`.
    fn run(&mut self, offset: usize, item: Item, count: u64) -> Result<(), XdeltaError>;
}

/// Walks the value list: tokenises, resolves blanks and repeats, and hands
/// each run to `visit`. One pass, no allocation.
fn walk<V: Visit>(bytes: &[u8], params: &Params, visit: &mut V) -> Result<(), XdeltaError> {
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

/// Appends `count` bits of `value` to an LSB-first bitmap of `*bits` bits.
fn append_bits(bitmap: &mut Vec<u8>, bits: &mut usize, count: usize, value: bool) {
    let mut left = count;
    while left > 0 && !(*bits).is_multiple_of(8) {
        if value {
            if let Some(last) = bitmap.last_mut() {
                *last |= 1 << (*bits % 8);
            }
        }
        *bits += 1;
        left -= 1;
    }
    let whole = left / 8;
    bitmap.resize(bitmap.len() + whole, if value { 0xFF } else { 0 });
    left -= whole * 8;
    if left > 0 {
        bitmap.push(if value { (1u8 << left) - 1 } else { 0 });
    }
    *bits += whole * 8 + left;
}

/// The decoding visitor: non-null values densely into `values` (as `i64`
/// bits while every literal so far is an integer), nulls into the bitmap.
struct Fill<'a> {
    values: &'a mut Vec<f64>,
    validity: &'a mut Vec<u8>,
    /// Bits of `validity` written so far (lags `len` until a null or the end).
    bits: usize,
    /// Output positions so far, nulls included.
    len: usize,
    nulls: usize,
    /// Every literal so far was an integer: `values` holds `i64` bit patterns.
    ints: bool,
    limit: usize,
    scan: &'static IntegrateKernels,
}

impl Fill<'_> {
    /// Leaves the integer path: converts the values so far to doubles.
    fn leave_integer_path(&mut self) {
        self.scan.ints_to_f64(self.values, Affine::IDENTITY);
        self.ints = false;
    }
}

impl Visit for Fill<'_> {
    #[inline]
    fn run(&mut self, offset: usize, item: Item, count: u64) -> Result<(), XdeltaError> {
        let room = self.limit - self.len;
        if count > room as u64 {
            return Err(XdeltaError::TooManyValues {
                offset,
                limit: self.limit,
            });
        }
        let count = count as usize;
        match item {
            Item::Num(lit) => {
                let value = match lit.int() {
                    // The integer's bits, moved but never operated on as a
                    // float until `ints_to_f64` reads them back as an `i64`.
                    Some(i) if self.ints => f64::from_bits(i as u64),
                    _ => {
                        if self.ints {
                            self.leave_integer_path();
                        }
                        lit.float()
                    }
                };
                if count == 1 {
                    self.values.push(value);
                } else {
                    self.values.extend(std::iter::repeat_n(value, count));
                }
            }
            Item::Null => {
                let gap = self.len - self.bits;
                append_bits(self.validity, &mut self.bits, gap, true);
                append_bits(self.validity, &mut self.bits, count, false);
                self.nulls += count;
            }
        }
        self.len += count;
        Ok(())
    }
}

/// Finds the byte offset and output position of the `target`-th non-null
/// value (to report an overflow found after the pass).
struct Locate {
    target: usize,
    seen: usize,
    len: usize,
    found: Option<(usize, usize)>,
}

impl Visit for Locate {
    fn run(&mut self, offset: usize, item: Item, count: u64) -> Result<(), XdeltaError> {
        let count = count as usize;
        if let Item::Num(_) = item {
            if self.found.is_none() && self.target < self.seen + count {
                self.found = Some((offset, self.len + self.target - self.seen));
            }
            self.seen += count;
        }
        self.len += count;
        Ok(())
    }
}

/// Moves the dense values to their output positions (back to front, in
/// place), writing `0.0` into null slots.
fn scatter(values: &mut Vec<f64>, validity: &[u8], len: usize) {
    let mut dense = values.len();
    values.resize(len, 0.0);
    for byte in (0..validity.len()).rev() {
        let lo = byte * 8;
        let hi = (lo + 8).min(len);
        if dense == hi {
            // No null before this point: the rest is already in place.
            return;
        }
        let mask = validity[byte];
        if mask == 0xFF && hi - lo == 8 {
            values.copy_within(dense - 8..dense, lo);
            dense -= 8;
            continue;
        }
        for i in (lo..hi).rev() {
            if mask & (1 << (i - lo)) != 0 {
                dense -= 1;
                values[i] = values[dense];
            } else {
                values[i] = 0.0;
            }
        }
    }
}

/// What [`Decoder::decode_into`] found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The string's parameters.
    pub header: Header,
    /// Number of values, nulls included.
    pub len: usize,
    /// Number of nulls.
    pub null_count: usize,
    /// Whether every literal was an integer, so that integration ran exactly
    /// in `i64` (see the module docs).
    pub integer_path: bool,
}

/// Decoded values: `f64`s and an Arrow-layout validity bitmap.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    summary: Summary,
    values: Vec<f64>,
    validity: Vec<u8>,
}

impl Decoded {
    /// Number of values, nulls included.
    pub fn len(&self) -> usize {
        self.summary.len
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.summary.len == 0
    }

    /// Parameters and counts.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// The values; a null's slot holds `0.0`.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Validity bitmap: bit `i % 8` of byte `i / 8` is set iff value `i` is
    /// not null (Arrow's layout; `ceil(len / 8)` bytes, unused bits zero).
    pub fn validity(&self) -> &[u8] {
        &self.validity
    }

    /// Number of nulls.
    pub fn null_count(&self) -> usize {
        self.summary.null_count
    }

    /// Value `i`, `None` for a null or past the end.
    pub fn get(&self, i: usize) -> Option<f64> {
        let valid = self
            .validity
            .get(i / 8)
            .is_some_and(|b| b & (1 << (i % 8)) != 0);
        if valid {
            self.values.get(i).copied()
        } else {
            None
        }
    }

    /// The values in order, `None` for nulls.
    pub fn iter(&self) -> impl Iterator<Item = Option<f64>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The values as options.
    pub fn to_options(&self) -> Vec<Option<f64>> {
        self.iter().collect()
    }

    /// The buffers: values and validity bitmap.
    pub fn into_parts(self) -> (Vec<f64>, Vec<u8>) {
        (self.values, self.validity)
    }
}

/// Decodes with the default [`Decoder`].
pub fn decode(input: impl AsRef<[u8]>) -> Result<Decoded, XdeltaError> {
    Decoder::new().decode(input)
}

/// A configured XDelta decoder.
#[derive(Clone, Copy, Debug, Default)]
pub struct Decoder {
    backend: Option<Backend>,
    max_values: Option<usize>,
}

impl Decoder {
    /// The smallest default expansion limit, in values.
    pub const DEFAULT_MIN_VALUES: usize = 1 << 20;
    /// The default expansion limit per byte of input, in values.
    pub const DEFAULT_VALUES_PER_BYTE: usize = 1024;

    /// A decoder with the process-wide kernel backend ([`Backend::active`])
    /// and the default expansion limit.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Runs the kernels on `backend` (an error at decode time if this CPU
    /// lacks it).
    pub fn backend(mut self, backend: Backend) -> Decoder {
        self.backend = Some(backend);
        self
    }

    /// Refuses strings that expand beyond `limit` values (nulls included).
    pub fn max_values(mut self, limit: usize) -> Decoder {
        self.max_values = Some(limit);
        self
    }

    /// The expansion limit for an input of `input_len` bytes.
    pub fn limit_for(&self, input_len: usize) -> usize {
        self.max_values.unwrap_or_else(|| {
            input_len
                .saturating_mul(Self::DEFAULT_VALUES_PER_BYTE)
                .max(Self::DEFAULT_MIN_VALUES)
        })
    }

    /// Parses only the header.
    pub fn header(&self, input: impl AsRef<[u8]>) -> Result<Header, XdeltaError> {
        Ok(parse_header(input.as_ref())?.header)
    }

    /// Decodes `input` into new buffers.
    pub fn decode(&self, input: impl AsRef<[u8]>) -> Result<Decoded, XdeltaError> {
        let mut values = Vec::new();
        let mut validity = Vec::new();
        let summary = self.decode_into(input, &mut values, &mut validity)?;
        Ok(Decoded {
            summary,
            values,
            validity,
        })
    }

    /// Decodes `input` into the caller's buffers, which are cleared first and
    /// keep their capacity (so a loop over many strings allocates only until
    /// the buffers are large enough). On return `values` holds one `f64` per
    /// value (`0.0` for nulls) and `validity` the Arrow-layout bitmap. On
    /// error their contents are unspecified.
    pub fn decode_into(
        &self,
        input: impl AsRef<[u8]>,
        values: &mut Vec<f64>,
        validity: &mut Vec<u8>,
    ) -> Result<Summary, XdeltaError> {
        let bytes = input.as_ref();
        let backend = match self.backend {
            Some(b) => b,
            None => Backend::active()?,
        };
        let scan = IntegrateKernels::for_backend(backend)?;
        let params = parse_header(bytes)?;
        values.clear();
        validity.clear();
        let limit = self.limit_for(bytes.len());
        let mut fill = Fill {
            values,
            validity,
            bits: 0,
            len: 0,
            nulls: 0,
            ints: true,
            limit,
            scan,
        };
        walk(bytes, &params, &mut fill)?;
        let (len, nulls, ints) = (fill.len, fill.nulls, fill.ints);
        let gap = len - fill.bits;
        append_bits(fill.validity, &mut fill.bits, gap, true);

        let header = params.header;
        if ints {
            let integrated = match header.delta {
                Delta::D0 => {
                    scan.ints_to_f64(values, header.affine);
                    Ok(())
                }
                Delta::D1 => scan.prefix_sum_to_f64(values, header.affine),
                Delta::D2 => scan.prefix_sum2_to_f64(values, header.affine),
            };
            if let Err(Overflow { index }) = integrated {
                let mut locate = Locate {
                    target: index,
                    seen: 0,
                    len: 0,
                    found: None,
                };
                walk(bytes, &params, &mut locate)?;
                let (offset, index) = locate.found.unwrap_or((bytes.len(), index));
                return Err(XdeltaError::Overflow { offset, index });
            }
        } else {
            match header.delta {
                Delta::D0 => {}
                Delta::D1 => integrate::prefix_sum_f64(values),
                Delta::D2 => integrate::prefix_sum2_f64(values),
            }
            scan.affine_f64(values, header.affine);
        }
        if nulls > 0 {
            scatter(values, validity, len);
        }
        Ok(Summary {
            header,
            len,
            null_count: nulls,
            integer_path: ints,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_appends_across_byte_boundaries() {
        let mut bitmap = Vec::new();
        let mut bits = 0;
        for (count, value) in [
            (3, true),
            (2, false),
            (12, true),
            (0, false),
            (9, false),
            (1, true),
        ] {
            append_bits(&mut bitmap, &mut bits, count, value);
        }
        assert_eq!(bits, 27);
        let want: Vec<bool> = [
            vec![true; 3],
            vec![false; 2],
            vec![true; 12],
            vec![false; 9],
            vec![true],
        ]
        .concat();
        let got: Vec<bool> = (0..27)
            .map(|i| bitmap[i / 8] & (1 << (i % 8)) != 0)
            .collect();
        assert_eq!(got, want);
        assert_eq!(bitmap.len(), 4);
        assert_eq!(bitmap[3] >> 3, 0, "unused bits stay zero");
    }

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

    #[test]
    fn scatter_places_values_around_nulls() {
        let mask: Vec<bool> = (0..21).map(|i| i % 5 != 1 && i != 20).collect();
        let dense: Vec<f64> = (0..mask.iter().filter(|&&m| m).count())
            .map(|i| i as f64 + 1.0)
            .collect();
        let mut bitmap = vec![0u8; 3];
        for (i, &m) in mask.iter().enumerate() {
            bitmap[i / 8] |= u8::from(m) << (i % 8);
        }
        let mut values = dense.clone();
        scatter(&mut values, &bitmap, mask.len());
        let mut it = dense.iter();
        for (i, &m) in mask.iter().enumerate() {
            assert_eq!(values[i], if m { *it.next().unwrap() } else { 0.0 }, "{i}");
        }
    }
}

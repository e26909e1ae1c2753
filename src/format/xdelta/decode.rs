//! The XDelta decoder: the header, then one pass over the values, then the
//! integration and scale/offset kernels.

use super::header::{parse_header, Delta, Header};
use super::values::{walk, Item, Visit};
use super::XdeltaError;
use crate::kernels::integrate::{self, Affine, IntegrateKernels};
use crate::kernels::{Backend, KernelTable};

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

/// 2^53: every integer of at most this magnitude is a double, exactly.
const EXACT_IN_F64: u64 = 1 << 53;

/// Whether integer items whose magnitudes add up to `magnitude`, `n` values
/// in all, integrate under `delta` to running sums that are all integers a
/// double holds exactly (within 2^53: the literals bound the first sums, and
/// the first sums times the count bound the second), so that integer
/// arithmetic gives the bits of the spec's double arithmetic.
pub(super) fn integrates_exactly(delta: Delta, magnitude: u64, n: usize) -> bool {
    let bound = match delta {
        Delta::D0 => 0,
        Delta::D1 => magnitude,
        Delta::D2 => magnitude.saturating_mul(n as u64),
    };
    bound <= EXACT_IN_F64
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
    /// The sum of the integers' magnitudes (saturating): what bounds every
    /// running sum of the integer path.
    magnitude: u64,
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
                    Some(i) if self.ints => {
                        let m = i.unsigned_abs().saturating_mul(count as u64);
                        self.magnitude = self.magnitude.saturating_add(m);
                        f64::from_bits(i as u64)
                    }
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
    /// Set by [`Decoder::backend`]; the process-wide backend otherwise.
    backend: Option<Backend>,
    /// Set by [`Decoder::max_values`]; [`Decoder::limit_for`] has the default.
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
        let scan = IntegrateKernels::chosen(self.backend)?;
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
            magnitude: 0,
            limit,
            scan,
        };
        walk(bytes, &params, &mut fill)?;
        // The integer path gives the bits of the spec's double arithmetic
        // only while every running sum is an integer a double holds exactly:
        // within 2^53 in magnitude, as the literals' magnitudes bound them
        // (times the count of values for the second sums of `d2`). Past that,
        // the doubles round at each step, and so must this decoder.
        let header = params.header;
        // Nulls take no part in the integration: the values are counted.
        let counted = fill.values.len();
        if fill.ints && !integrates_exactly(header.delta, fill.magnitude, counted) {
            fill.leave_integer_path();
        }
        let (len, nulls, ints) = (fill.len, fill.nulls, fill.ints);
        let gap = len - fill.bits;
        append_bits(fill.validity, &mut fill.bits, gap, true);

        if ints {
            let integrated = match header.delta {
                Delta::D0 => {
                    scan.ints_to_f64(values, header.affine);
                    Ok(())
                }
                Delta::D1 => scan.prefix_sum_to_f64(values, header.affine),
                Delta::D2 => scan.prefix_sum2_to_f64(values, header.affine),
            };
            integrated.expect("running sums within 2^53 never leave i64");
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

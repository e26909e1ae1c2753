//! NumPy `.npy` arrays and `.npz` archives: `gene_order.npy`, scipy CSR `.npz`
//! inputs, and the golden expectations in the shared test data.
//!
//! Only what the format needs: little-endian integer and float arrays in C
//! order, format versions 1 to 3. Sizes in the header are checked against the
//! bytes present before anything is allocated. Archive members are read
//! through [`read_npz_member`] and [`NpyStream`], in bounded memory; anything
//! refused is an [`NpyError`].

use std::io::Read;

mod error;
mod npz;

pub use error::NpyError;
pub use npz::{open_npz, read_csr_npz, read_npz_member, NpyStream, NpzCsr};

/// The element types this reader understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `<i4`.
    I32,
    /// `<i8`.
    I64,
    /// `<u4`.
    U32,
    /// `<u8`.
    U64,
    /// `<f4`.
    F32,
    /// `<f8`.
    F64,
    /// `<i2`.
    I16,
    /// `<u2`.
    U16,
    /// `|i1` (or `<i1`).
    I8,
    /// `|u1` (or `<u1`).
    U8,
}

impl Dtype {
    fn parse(descr: &str) -> Option<Dtype> {
        Some(match descr {
            "<i4" => Dtype::I32,
            "<i8" => Dtype::I64,
            "<u4" => Dtype::U32,
            "<u8" => Dtype::U64,
            "<f4" => Dtype::F32,
            "<f8" => Dtype::F64,
            "<i2" => Dtype::I16,
            "<u2" => Dtype::U16,
            "|i1" | "<i1" => Dtype::I8,
            "|u1" | "<u1" => Dtype::U8,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 => 1,
            Dtype::I16 | Dtype::U16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    fn descr(self) -> &'static str {
        match self {
            Dtype::I32 => "<i4",
            Dtype::I64 => "<i8",
            Dtype::U32 => "<u4",
            Dtype::U64 => "<u8",
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
            Dtype::I16 => "<i2",
            Dtype::U16 => "<u2",
            Dtype::I8 => "|i1",
            Dtype::U8 => "|u1",
        }
    }
}

/// A parsed array: its dtype, shape and raw little-endian data.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// The element type.
    pub dtype: Dtype,
    /// The dimensions, outermost first (C order); empty for a scalar.
    pub shape: Vec<usize>,
    /// The elements, little-endian, `dtype.size()` bytes each, in C order.
    pub data: Vec<u8>,
}

fn bad(msg: impl Into<String>) -> NpyError {
    NpyError::Array(msg.into())
}

/// The value of `'key': <value>` in a header dict, up to the next top-level comma.
fn dict_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let start = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[start..].trim_start().strip_prefix(':')?.trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')')? + 1
    } else {
        rest.find([',', '}'])?
    };
    Some(rest[..end].trim())
}

/// The header of an `.npy` file: the element type and the shape. `descr` is
/// kept as written so that byte-string members (`|S3`, scipy's `format`) can
/// be read too; [`Header::dtype`] maps the numeric ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The `descr` entry of the header dict, e.g. `<i4` or `|S3`.
    pub descr: String,
    /// The `shape` entry, outermost dimension first.
    pub shape: Vec<usize>,
}

/// Longest header accepted (numpy writes about a hundred bytes; version 2 and 3
/// headers may declare up to 4 GiB, which nothing legitimate needs).
const MAX_HEADER: usize = 1 << 20;

impl Header {
    /// The numeric element type.
    pub fn dtype(&self) -> Result<Dtype, NpyError> {
        Dtype::parse(&self.descr).ok_or_else(|| bad(format!("unsupported dtype {}", self.descr)))
    }

    /// Bytes per element: numeric types, byte strings `|S<n>` and unicode
    /// strings `<U<n>` (UTF-32, four bytes a character).
    pub fn item_size(&self) -> Result<usize, NpyError> {
        let unsupported = || bad(format!("unsupported dtype {}", self.descr));
        let chars = |n: &str| n.parse::<usize>().map_err(|_| unsupported());
        if let Some(n) = self.descr.strip_prefix("|S") {
            return chars(n);
        }
        if let Some(n) = self.descr.strip_prefix("<U") {
            return chars(n)?.checked_mul(4).ok_or_else(unsupported);
        }
        Ok(self.dtype()?.size())
    }

    /// The text of a string array's `bytes` (`|S<n>` as bytes, `<U<n>` as
    /// UTF-32), each element's trailing NULs dropped as numpy drops them,
    /// elements joined. `None` for other dtypes or invalid characters.
    pub fn text(&self, bytes: &[u8]) -> Option<String> {
        let size = self.item_size().ok().filter(|&s| s > 0)?;
        let mut out = String::new();
        for item in bytes.chunks(size) {
            if self.descr.starts_with("|S") {
                let end = item.iter().rposition(|&b| b != 0).map_or(0, |e| e + 1);
                out.push_str(std::str::from_utf8(&item[..end]).ok()?);
            } else if self.descr.starts_with("<U") {
                let chars: Vec<u32> = item
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                let end = chars.iter().rposition(|&c| c != 0).map_or(0, |e| e + 1);
                for &c in &chars[..end] {
                    out.push(char::from_u32(c)?);
                }
            } else {
                return None;
            }
        }
        Some(out)
    }

    /// Number of elements, `None` if the product overflows.
    pub fn count(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
    }

    /// Bytes of data the header promises, `None` if that overflows.
    pub fn data_bytes(&self) -> Result<usize, NpyError> {
        let size = self.item_size()?;
        self.count()
            .and_then(|c| c.checked_mul(size))
            .ok_or_else(|| bad(format!("shape {:?} overflows", self.shape)))
    }

    fn parse_dict(header: &str) -> Result<Header, NpyError> {
        let descr = dict_value(header, "descr")
            .ok_or_else(|| bad("no descr"))?
            .trim_matches(['\'', '"']);
        if dict_value(header, "fortran_order") != Some("False") {
            return Err(bad("only C-order arrays are supported"));
        }
        let shape_text = dict_value(header, "shape").ok_or_else(|| bad("no shape"))?;
        let shape = shape_text
            .trim_matches(['(', ')'])
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<usize>()
                    .map_err(|_| bad(format!("bad shape {shape_text}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Header {
            descr: descr.to_string(),
            shape,
        })
    }

    /// The header's length in bytes (magic included) from the first 12 bytes
    /// of a file, and where the dictionary starts.
    fn span(prefix: &[u8]) -> Result<(usize, usize), NpyError> {
        if prefix.len() < 10 || &prefix[..6] != b"\x93NUMPY" {
            return Err(bad("not an .npy file"));
        }
        let (hlen, hstart) = match prefix[6] {
            1 => (usize::from(u16::from_le_bytes([prefix[8], prefix[9]])), 10),
            2 | 3 if prefix.len() >= 12 => (
                u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize,
                12,
            ),
            v => return Err(bad(format!("unsupported version {v}"))),
        };
        if hlen > MAX_HEADER {
            return Err(bad(format!("header of {hlen} bytes is too long")));
        }
        Ok((hstart + hlen, hstart))
    }

    /// Parses the header at the start of `bytes`; returns it and where the data starts.
    pub fn parse(bytes: &[u8]) -> Result<(Header, usize), NpyError> {
        let (end, start) = Header::span(&bytes[..bytes.len().min(12)])?;
        let text = bytes
            .get(start..end)
            .and_then(|h| std::str::from_utf8(h).ok())
            .ok_or_else(|| bad("truncated or non-UTF-8 header"))?;
        Ok((Header::parse_dict(text)?, end))
    }

    /// Reads the header from a stream; returns it and its length in bytes.
    pub fn read(r: &mut impl Read) -> Result<(Header, usize), NpyError> {
        let io = |e| NpyError::io("npy header", e);
        let mut prefix = [0u8; 10];
        r.read_exact(&mut prefix).map_err(io)?;
        let mut bytes = prefix.to_vec();
        if prefix[6] >= 2 {
            let mut more = [0u8; 2];
            r.read_exact(&mut more).map_err(io)?;
            bytes.extend_from_slice(&more);
        }
        let (end, _) = Header::span(&bytes)?;
        let have = bytes.len();
        bytes.resize(end, 0);
        r.read_exact(&mut bytes[have..]).map_err(io)?;
        let (header, end) = Header::parse(&bytes)?;
        Ok((header, end))
    }
}

impl Array {
    /// Parses a whole `.npy` file.
    pub fn parse(bytes: &[u8]) -> Result<Array, NpyError> {
        let (header, start) = Header::parse(bytes)?;
        let dtype = header.dtype()?;
        let data = &bytes[start..];
        if header.data_bytes()? != data.len() {
            return Err(bad(format!(
                "shape {:?} of {} does not match {} data bytes",
                header.shape,
                header.descr,
                data.len()
            )));
        }
        Ok(Array {
            dtype,
            shape: header.shape,
            data: data.to_vec(),
        })
    }

    /// Serialises as a version-1 `.npy` file (header padded to 64 bytes).
    pub fn to_npy(&self) -> Vec<u8> {
        let dims = match self.shape.as_slice() {
            [one] => format!("({one},)"),
            s => format!(
                "({})",
                s.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let mut header = format!(
            "{{'descr': '{}', 'fortran_order': False, 'shape': {dims}, }}",
            self.dtype.descr()
        );
        let total = (10 + header.len() + 1).next_multiple_of(64);
        header.push_str(&" ".repeat(total - 10 - header.len() - 1));
        header.push('\n');
        let mut out = Vec::with_capacity(total + self.data.len());
        out.extend_from_slice(b"\x93NUMPY\x01\x00");
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(&self.data);
        out
    }

    /// A 1-D `int32` array.
    pub fn from_i32(values: &[i32]) -> Array {
        Array {
            dtype: Dtype::I32,
            shape: vec![values.len()],
            data: bytemuck::cast_slice(values).to_vec(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn convert<T>(&self, f: impl Fn(&[u8]) -> Option<T>) -> Result<Vec<T>, NpyError> {
        self.data
            .chunks_exact(self.dtype.size())
            .map(|b| {
                f(b).ok_or_else(|| {
                    bad(format!(
                        "a {:?} value does not fit the requested type",
                        self.dtype
                    ))
                })
            })
            .collect()
    }

    /// The elements as `i64` (integer dtypes only).
    pub fn to_i64(&self) -> Result<Vec<i64>, NpyError> {
        let dt = self.dtype;
        self.convert(|b| int_value(dt, b))
    }

    /// The elements as `i32` (integer dtypes whose values fit).
    pub fn to_i32(&self) -> Result<Vec<i32>, NpyError> {
        self.to_i64()?
            .into_iter()
            .map(|v| i32::try_from(v).map_err(|_| bad(format!("{v} does not fit in int32"))))
            .collect()
    }

    /// The elements as `f64` (any dtype; 64-bit integers above 2^53 round).
    pub fn to_f64(&self) -> Result<Vec<f64>, NpyError> {
        let dt = self.dtype;
        self.convert(|b| Some(float_value(dt, b)))
    }
}

pub(super) fn int_value(dtype: Dtype, b: &[u8]) -> Option<i64> {
    Some(match dtype {
        Dtype::I8 => i64::from(b[0] as i8),
        Dtype::U8 => i64::from(b[0]),
        Dtype::I16 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        Dtype::U16 => i64::from(u16::from_le_bytes([b[0], b[1]])),
        Dtype::I32 => i64::from(i32::from_le_bytes(b.try_into().ok()?)),
        Dtype::U32 => i64::from(u32::from_le_bytes(b.try_into().ok()?)),
        Dtype::I64 => i64::from_le_bytes(b.try_into().ok()?),
        Dtype::U64 => i64::try_from(u64::from_le_bytes(b.try_into().ok()?)).ok()?,
        Dtype::F32 | Dtype::F64 => return None,
    })
}

pub(super) fn float_value(dtype: Dtype, b: &[u8]) -> f64 {
    let word = |n: usize| {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(w)
    };
    match dtype {
        Dtype::F32 => f64::from(f32::from_bits(word(4) as u32)),
        Dtype::F64 => f64::from_bits(word(8)),
        Dtype::U64 => word(8) as f64,
        _ => int_value(dtype, b).map_or(f64::NAN, |v| v as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip() {
        let a = Array::from_i32(&[3, -1, 7]);
        let b = Array::parse(&a.to_npy()).unwrap();
        assert_eq!(a, b);
        assert_eq!(b.to_i32().unwrap(), vec![3, -1, 7]);
        assert_eq!(
            a.to_npy().len() % 64,
            12,
            "header padded to a multiple of 64"
        );
    }

    #[test]
    fn rejects_size_lies() {
        let mut bytes = Array::from_i32(&[1, 2]).to_npy();
        bytes.pop();
        assert!(Array::parse(&bytes).is_err());
        assert!(Array::parse(b"\x93NUMPY\x01\x00\xff\xff").is_err());
    }
}

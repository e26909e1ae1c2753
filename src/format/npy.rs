//! NumPy `.npy` arrays and `.npz` archives: `gene_order.npy`, scipy CSR `.npz`
//! inputs, and the golden expectations in the shared test data.
//!
//! Only what the format needs: little-endian integer and float arrays in C
//! order, format versions 1 to 3. Sizes in the header are checked against the
//! bytes present before anything is allocated.

use std::io::Read;

use crate::error::{Error, Result};

/// The element types this reader understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    I16,
    U16,
    I8,
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
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Input(format!("npy: {}", msg.into()))
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

impl Array {
    /// Parses a whole `.npy` file.
    pub fn parse(bytes: &[u8]) -> Result<Array> {
        if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
            return Err(bad("not an .npy file"));
        }
        let (hlen, hstart): (usize, usize) = match bytes[6] {
            1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
            2 | 3 if bytes.len() >= 12 => (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            ),
            v => return Err(bad(format!("unsupported version {v}"))),
        };
        let header = bytes
            .get(hstart..hstart.saturating_add(hlen))
            .and_then(|h| std::str::from_utf8(h).ok())
            .ok_or_else(|| bad("truncated or non-UTF-8 header"))?;
        let descr = dict_value(header, "descr")
            .ok_or_else(|| bad("no descr"))?
            .trim_matches(['\'', '"']);
        let dtype = Dtype::parse(descr).ok_or_else(|| bad(format!("unsupported dtype {descr}")))?;
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
            .collect::<Result<Vec<_>>>()?;
        let data = &bytes[hstart + hlen..];
        let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if count.and_then(|c| c.checked_mul(dtype.size())) != Some(data.len()) {
            return Err(bad(format!(
                "shape {shape:?} of {descr} does not match {} data bytes",
                data.len()
            )));
        }
        Ok(Array {
            dtype,
            shape,
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

    fn convert<T>(&self, f: impl Fn(&[u8]) -> Option<T>) -> Result<Vec<T>> {
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
    pub fn to_i64(&self) -> Result<Vec<i64>> {
        let dt = self.dtype;
        self.convert(|b| {
            Some(match dt {
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
        })
    }

    /// The elements as `i32` (integer dtypes whose values fit).
    pub fn to_i32(&self) -> Result<Vec<i32>> {
        self.to_i64()?
            .into_iter()
            .map(|v| i32::try_from(v).map_err(|_| bad(format!("{v} does not fit in int32"))))
            .collect()
    }

    /// The elements as `f64` (any dtype; 64-bit integers above 2^53 round).
    pub fn to_f64(&self) -> Result<Vec<f64>> {
        match self.dtype {
            Dtype::F32 => self.convert(|b| Some(f64::from(f32::from_le_bytes(b.try_into().ok()?)))),
            Dtype::F64 => self.convert(|b| Some(f64::from_le_bytes(b.try_into().ok()?))),
            _ => Ok(self.to_i64()?.into_iter().map(|v| v as f64).collect()),
        }
    }
}

/// Reads member `name` (without `.npy`) of an `.npz` archive.
pub fn read_npz_member<R: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    name: &str,
) -> Result<Array> {
    let mut file = archive
        .by_name(&format!("{name}.npy"))
        .map_err(|e| Error::Input(format!("npz: member {name}.npy: {e}")))?;
    // The declared size bounds the read; cap the up-front reservation anyway.
    let mut bytes = Vec::with_capacity(file.size().min(1 << 26) as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io(format!("npz member {name}.npy"), e))?;
    Array::parse(&bytes)
}

/// Opens an `.npz` archive at `path`.
pub fn open_npz(path: &std::path::Path) -> Result<zip::ZipArchive<std::fs::File>> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    zip::ZipArchive::new(f)
        .map_err(|e| Error::Input(format!("{}: not a valid .npz archive: {e}", path.display())))
}

/// The members of a CSR `.npz`, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct NpzCsr {
    pub indptr: Vec<i64>,
    pub indices: Vec<i32>,
    /// Values in their stored dtype.
    pub data: Array,
    /// `(rows, columns)`.
    pub shape: [u64; 2],
}

/// A scipy sparse CSR matrix saved with `scipy.sparse.save_npz`, or the golden
/// expectations: `indptr`, `indices`, `data` and `shape` members.
pub fn read_csr_npz(path: &std::path::Path) -> Result<NpzCsr> {
    let mut z = open_npz(path)?;
    let indptr = read_npz_member(&mut z, "indptr")?.to_i64()?;
    let indices = read_npz_member(&mut z, "indices")?.to_i32()?;
    let data = read_npz_member(&mut z, "data")?;
    let shape = read_npz_member(&mut z, "shape")?.to_i64()?;
    let [rows, cols] = shape[..] else {
        return Err(Error::Input(format!(
            "{}: shape must have 2 entries",
            path.display()
        )));
    };
    if rows < 0 || cols < 0 || indptr.len() as i64 != rows + 1 {
        return Err(Error::Input(format!(
            "{}: shape ({rows}, {cols}) disagrees with indptr",
            path.display()
        )));
    }
    Ok(NpzCsr {
        indptr,
        indices,
        data,
        shape: [rows as u64, cols as u64],
    })
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

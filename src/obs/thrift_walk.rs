//! A bounded walk over Thrift compact-protocol structs, run on every Parquet
//! footer and page header before the parquet crate decodes it.
//!
//! The parquet crate skips fields it does not know by their declared shape,
//! and skips a boolean element of a list, set or map without reading
//! anything. So a footer or page header of a hundred bytes can declare lists
//! of two billion booleans, each costing six bytes and seconds of skipping
//! that consumes no byte (found by fuzzing the footer decoder: 98 bytes of
//! such lists held it for 102 s). A hostile obs shard or `var.parquet` would
//! hang a reader of its obs for as long as its footer is long.
//!
//! This walk follows the compact protocol as written: every element of a
//! container takes at least one byte (a boolean element is one byte), so a
//! container that declares more elements than bytes remain is refused at its
//! header, and the walk costs at most a few steps per byte. Nesting is
//! bounded as the parquet crate bounds it. What passes is well formed at the
//! Thrift level; whether it is a valid footer is still the parquet crate's
//! to say.

/// Nesting depth at which the walk gives up, as the parquet crate does.
const MAX_DEPTH: u32 = 64;

/// Top-level field of a Parquet `PageHeader` holding the page's compressed size.
const COMPRESSED_PAGE_SIZE: i16 = 3;

/// Compact-protocol type codes.
mod code {
    pub const STOP: u8 = 0;
    pub const BOOL_TRUE: u8 = 1;
    pub const BOOL_FALSE: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const I16: u8 = 4;
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const DOUBLE: u8 = 7;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const SET: u8 = 10;
    pub const MAP: u8 = 11;
    pub const STRUCT: u8 = 12;
    pub const UUID: u8 = 13;
}

/// What walking one struct found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Walked {
    /// Bytes the struct takes, its stop byte included.
    pub len: usize,
    /// The value of top-level field `want`, when it is present as an i32.
    pub field: Option<i32>,
}

struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Walk<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| format!("thrift: ends inside a value at byte {}", self.at))?;
        self.at += 1;
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<(), String> {
        if n > self.left() {
            return Err(format!(
                "thrift: a value of {n} bytes at byte {} runs past the end",
                self.at
            ));
        }
        self.at += n;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!(
            "thrift: varint longer than 64 bits at byte {}",
            self.at
        ))
    }

    /// A zigzag varint (Thrift's signed integers).
    fn zigzag(&mut self) -> Result<i64, String> {
        let z = self.varint()?;
        Ok((z >> 1) as i64 ^ -((z & 1) as i64))
    }

    /// An element count, refused when the elements (`per` bytes each at
    /// least) cannot fit in what is left.
    fn count(&self, n: u64, per: usize) -> Result<usize, String> {
        usize::try_from(n)
            .ok()
            .filter(|&n| n.checked_mul(per).is_some_and(|b| b <= self.left()))
            .ok_or_else(|| {
                format!(
                    "thrift: {n} elements declared at byte {} but {} bytes remain",
                    self.at,
                    self.left()
                )
            })
    }

    /// Walks one value of type `ty`, `inside` a container or not (a boolean
    /// field's value is in its header; a boolean element is a byte).
    fn value(&mut self, ty: u8, inside: bool, depth: u32) -> Result<(), String> {
        if depth >= MAX_DEPTH {
            return Err(format!(
                "thrift: nested deeper than {MAX_DEPTH} at byte {}",
                self.at
            ));
        }
        match ty {
            code::BOOL_TRUE | code::BOOL_FALSE => self.skip(usize::from(inside)),
            code::BYTE => self.skip(1),
            code::I16 | code::I32 | code::I64 => self.varint().map(drop),
            code::DOUBLE => self.skip(8),
            code::BINARY => {
                let n = self.varint()?;
                self.skip(usize::try_from(n).unwrap_or(usize::MAX))
            }
            code::UUID => self.skip(16),
            code::LIST | code::SET => {
                let header = self.byte()?;
                let n = match header >> 4 {
                    15 => self.varint()?,
                    short => u64::from(short),
                };
                let n = self.count(n, 1)?;
                let element = header & 0x0f;
                for _ in 0..n {
                    self.value(element, true, depth + 1)?;
                }
                Ok(())
            }
            code::MAP => {
                let n = self.varint()?;
                let n = self.count(n, 2)?;
                if n > 0 {
                    let types = self.byte()?;
                    for _ in 0..n {
                        self.value(types >> 4, true, depth + 1)?;
                        self.value(types & 0x0f, true, depth + 1)?;
                    }
                }
                Ok(())
            }
            code::STRUCT => self.fields(None, depth + 1).map(drop),
            other => Err(format!(
                "thrift: unknown type {other} at byte {}",
                self.at - 1
            )),
        }
    }

    /// Walks a struct's fields up to its stop byte; returns the value of
    /// field `want` when it is an i32.
    fn fields(&mut self, want: Option<i16>, depth: u32) -> Result<Option<i32>, String> {
        let mut last = 0i16;
        let mut found = None;
        loop {
            let header = self.byte()?;
            let ty = header & 0x0f;
            if ty == code::STOP {
                return Ok(found);
            }
            let id = match header >> 4 {
                0 => {
                    let id = self.zigzag()?;
                    i16::try_from(id).map_err(|_| {
                        format!("thrift: field id {id} at byte {} is not an i16", self.at)
                    })?
                }
                delta => last.wrapping_add(i16::from(delta)),
            };
            last = id;
            if want == Some(id) && ty == code::I32 {
                let v = self.zigzag()?;
                found = Some(i32::try_from(v).map_err(|_| {
                    format!("thrift: i32 field {id} holds {v} at byte {}", self.at)
                })?);
            } else {
                self.value(ty, false, depth)?;
            }
        }
    }
}

/// Walks the struct at the start of `bytes`, noting top-level i32 field `want`.
pub(crate) fn walk_struct(bytes: &[u8], want: Option<i16>) -> Result<Walked, String> {
    let mut w = Walk { bytes, at: 0 };
    let field = w.fields(want, 0)?;
    Ok(Walked { len: w.at, field })
}

/// Checks a footer's metadata: one struct taking every byte.
pub(crate) fn check_footer(meta: &[u8]) -> Result<(), String> {
    let walked = walk_struct(meta, None).map_err(|e| format!("footer metadata: {e}"))?;
    if walked.len != meta.len() {
        return Err(format!(
            "footer metadata: its struct ends at byte {} of {}",
            walked.len,
            meta.len()
        ));
    }
    Ok(())
}

/// Checks a column chunk's bytes: page header, page, page header, page, ...
/// up to its end exactly, every header well formed.
pub(crate) fn check_pages(chunk: &[u8]) -> Result<(), String> {
    let mut at = 0;
    while at < chunk.len() {
        let walked = walk_struct(&chunk[at..], Some(COMPRESSED_PAGE_SIZE))
            .map_err(|e| format!("page header at byte {at} of the column chunk: {e}"))?;
        let size = walked
            .field
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| {
                format!("page header at byte {at} of the column chunk has no compressed size")
            })?;
        at = (at + walked.len)
            .checked_add(size)
            .filter(|&end| end <= chunk.len())
            .ok_or_else(|| {
                format!(
                    "the page at byte {at} of the column chunk ({size} bytes) runs past its end ({} bytes)",
                    chunk.len()
                )
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A footer the parquet crate spent minutes skipping (a fuzzer's find):
    /// lists of billions of booleans, which take no bytes in its skip.
    const SPINNING_FOOTER: &[u8] = include_bytes!("../../tests/fixtures/footer_endless_bools.bin");

    #[test]
    fn a_list_declaring_more_elements_than_bytes_is_refused_at_its_header() {
        // Struct: field 1 (delta 1) of type list; header 0xf1 (long size,
        // boolean elements), size 2^31 - 1, then nothing.
        let bytes = [0x19, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00];
        let e = walk_struct(&bytes, None).unwrap_err();
        assert!(e.contains("2147483647 elements declared"), "{e}");
        // The fuzzer's footer fails the same way, at once.
        let e = check_footer(SPINNING_FOOTER).unwrap_err();
        assert!(e.contains("elements declared"), "{e}");
    }

    #[test]
    fn boolean_elements_take_a_byte_and_boolean_fields_none() {
        // field 1: list of 3 booleans (3 bytes); field 2: bool true in the
        // header; stop.
        let bytes = [0x19, 0x31, 1, 2, 1, 0x11, 0x00];
        assert_eq!(
            walk_struct(&bytes, None),
            Ok(Walked {
                len: 7,
                field: None
            })
        );
        assert!(walk_struct(&bytes[..4], None).is_err());
    }

    #[test]
    fn nesting_is_bounded() {
        // Field 1 struct, whose field 1 is a struct, ... never closed.
        let bytes = vec![0x1c; 200];
        let e = walk_struct(&bytes, None).unwrap_err();
        assert!(e.contains("nested deeper than 64"), "{e}");
    }

    #[test]
    fn the_wanted_field_is_read_and_long_field_ids_are_followed() {
        // Field 3 (delta 3), i32 300 (zigzag 600: 0xd8 0x04); field 100 in
        // the long form (type i64, id zigzag 200: 0xc8 0x01), value 1; stop.
        let bytes = [0x35, 0xd8, 0x04, 0x06, 0xc8, 0x01, 0x01, 0x00];
        assert_eq!(
            walk_struct(&bytes, Some(3)),
            Ok(Walked {
                len: 8,
                field: Some(300)
            })
        );
    }

    #[test]
    fn pages_must_tile_the_chunk() {
        // Header: field 3 i32 = 2 (zigzag 4), stop; then 2 bytes of page.
        let page = [0x35, 0x04, 0x00, 0xaa, 0xbb];
        let mut chunk = page.to_vec();
        chunk.extend_from_slice(&page);
        assert_eq!(check_pages(&chunk), Ok(()));
        let e = check_pages(&chunk[..chunk.len() - 1]).unwrap_err();
        assert!(e.contains("runs past its end"), "{e}");
        let e = check_pages(&[0x15, 0x04, 0x00]).unwrap_err();
        assert!(e.contains("no compressed size"), "{e}");
    }

    #[test]
    fn every_footer_and_page_header_of_the_shared_parquet_files_passes() {
        use parquet::file::metadata::{FooterTail, ParquetMetaDataReader};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata");
        let mut files = Vec::new();
        let mut dirs = vec![root];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().map(Result::unwrap) {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "parquet") {
                    files.push(p);
                }
            }
        }
        let mut chunks = 0;
        for f in &files {
            let data = std::fs::read(f).unwrap();
            let tail: [u8; 8] = data[data.len() - 8..].try_into().unwrap();
            let Ok(footer) = FooterTail::try_new(&tail) else {
                continue;
            };
            let meta = &data[data.len() - 8 - footer.metadata_length()..data.len() - 8];
            let Ok(decoded) = ParquetMetaDataReader::decode_metadata(meta) else {
                continue;
            };
            check_footer(meta).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            for rg in decoded.row_groups() {
                for col in rg.columns() {
                    let (start, len) = col.byte_range();
                    check_pages(&data[start as usize..(start + len) as usize])
                        .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                    chunks += 1;
                }
            }
        }
        assert!(chunks > 50, "only {chunks} column chunks found");
    }
}

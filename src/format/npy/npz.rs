//! `.npz` archives: members read in bounded memory, never more than the
//! archive's directory declares, and CRC-checked.

use std::io::Read;

use super::{float_value, int_value, Array, Dtype, Header, NpyError};

/// Deflate cannot expand data by more than about 1032 to 1: a member that
/// declares more inflated bytes per compressed byte is lying.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// Where a member's bytes lie in its archive and what they should inflate to.
#[derive(Clone, Debug)]
struct MemberInfo {
    name: String,
    deflated: bool,
    data_start: u64,
    compressed: u64,
    size: u64,
    crc32: u32,
}

impl MemberInfo {
    fn of<R: Read + std::io::Seek>(
        archive: &mut zip::ZipArchive<R>,
        name: &str,
    ) -> Result<Self, NpyError> {
        let name = format!("{name}.npy");
        let index = archive
            .index_for_name(&name)
            .ok_or_else(|| NpyError::Archive(format!("no member {name}")))?;
        let file = archive
            .by_index_raw(index)
            .map_err(|e| NpyError::Archive(format!("member {name}: {e}")))?;
        let deflated = match file.compression() {
            zip::CompressionMethod::Stored => false,
            zip::CompressionMethod::Deflated => true,
            m => {
                return Err(NpyError::Archive(format!(
                    "member {name}: compression {m} is not supported (stored or deflated)"
                )))
            }
        };
        let info = MemberInfo {
            deflated,
            data_start: file.data_start(),
            compressed: file.compressed_size(),
            size: file.size(),
            crc32: file.crc32(),
            name,
        };
        let most = if deflated {
            info.compressed
                .saturating_mul(MAX_DEFLATE_RATIO)
                .saturating_add(64)
        } else {
            info.compressed
        };
        if info.size > most || (!deflated && info.size != info.compressed) {
            return Err(NpyError::Archive(format!(
                "member {}: {} bytes cannot come from {} stored bytes",
                info.name, info.size, info.compressed
            )));
        }
        Ok(info)
    }
}

/// The inflated bytes of one archive member, never more than its directory
/// entry declares, CRC-checked at the end ([`Member::finish`]).
struct Member {
    inner: Box<dyn Read + Send>,
    info: MemberInfo,
    remaining: u64,
    crc: crc32fast::Hasher,
}

impl Member {
    /// `raw` yields the member's stored (compressed) bytes.
    fn new(raw: impl Read + Send + 'static, info: MemberInfo) -> Self {
        let inner: Box<dyn Read + Send> = if info.deflated {
            Box::new(flate2::read::DeflateDecoder::new(std::io::BufReader::new(
                raw,
            )))
        } else {
            Box::new(raw)
        };
        Member {
            inner,
            remaining: info.size,
            info,
            crc: crc32fast::Hasher::new(),
        }
    }
}

impl Read for Member {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.inner.read(&mut buf[..want])?;
        self.crc.update(&buf[..n]);
        self.remaining -= n as u64;
        Ok(n)
    }
}

impl Member {
    /// Checks that the member ends where its directory entry says (a zip
    /// bomb inflates further) and that its CRC-32 matches.
    fn finish(&mut self) -> Result<(), NpyError> {
        let name = &self.info.name;
        if self.remaining > 0 {
            return Err(NpyError::Archive(format!(
                "member {name} ends {} bytes early",
                self.remaining
            )));
        }
        let mut probe = [0u8; 1];
        match self.inner.read(&mut probe) {
            Ok(0) => {}
            Ok(_) => {
                return Err(NpyError::Archive(format!(
                    "member {name} inflates past the {} bytes its directory entry declares",
                    self.info.size
                )))
            }
            Err(e) => return Err(NpyError::io(format!("npz member {name}"), e)),
        }
        if self.crc.clone().finalize() != self.info.crc32 {
            return Err(NpyError::Archive(format!("member {name}: CRC-32 mismatch")));
        }
        Ok(())
    }
}

/// One array of an `.npz` archive read as a stream: its header first, then its
/// elements in order, in bounded memory whatever its size.
pub struct NpyStream {
    member: Member,
    header: Header,
    dtype: Option<Dtype>,
    left: usize,
    buf: Vec<u8>,
}

impl NpyStream {
    /// Opens member `name` (without `.npy`) of the archive at `path`. The
    /// header must promise exactly the bytes the archive declares.
    pub fn open(path: &std::path::Path, name: &str) -> Result<NpyStream, NpyError> {
        let info = MemberInfo::of(&mut open_npz(path)?, name)?;
        let io = |e| NpyError::io(path.display().to_string(), e);
        let mut f = std::fs::File::open(path).map_err(io)?;
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(info.data_start)).map_err(io)?;
        let raw = std::io::BufReader::new(f).take(info.compressed);
        let mut member = Member::new(raw, info);
        let (header, header_len) = Header::read(&mut member)?;
        let data = header.data_bytes()?;
        if (header_len as u64).checked_add(data as u64) != Some(member.info.size) {
            return Err(NpyError::Archive(format!(
                "member {}: header promises {} data bytes, the archive holds {}",
                member.info.name,
                data,
                member.info.size.saturating_sub(header_len as u64)
            )));
        }
        Ok(NpyStream {
            dtype: header.dtype().ok(),
            left: header.count().unwrap_or(0),
            header,
            member,
            buf: Vec::new(),
        })
    }

    /// The member's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Elements not read yet.
    pub fn remaining(&self) -> usize {
        self.left
    }

    fn numeric(&self) -> Result<Dtype, NpyError> {
        self.dtype
            .ok_or_else(|| NpyError::Array(format!("unsupported dtype {}", self.header.descr)))
    }

    /// Reads the raw bytes of the next `n` elements into an internal buffer.
    fn next_bytes(&mut self, n: usize) -> Result<&[u8], NpyError> {
        if n > self.left {
            return Err(NpyError::Archive(format!(
                "member {}: {n} elements wanted, {} left",
                self.member.info.name, self.left
            )));
        }
        let bytes = n * self.header.item_size()?;
        self.buf.resize(bytes, 0);
        self.member
            .read_exact(&mut self.buf)
            .map_err(|e| NpyError::io(format!("npz member {}", self.member.info.name), e))?;
        self.left -= n;
        Ok(&self.buf)
    }

    /// Appends the next `n` elements to `out` as `i64` (integer dtypes).
    pub fn read_i64(&mut self, n: usize, out: &mut Vec<i64>) -> Result<(), NpyError> {
        let dtype = self.numeric()?;
        let bytes = self.next_bytes(n)?;
        out.reserve(n);
        for b in bytes.chunks_exact(dtype.size()) {
            out.push(int_value(dtype, b).ok_or_else(|| {
                NpyError::Array(format!("a {dtype:?} value does not fit the requested type"))
            })?);
        }
        Ok(())
    }

    /// Appends the next `n` elements to `out` as `f64` (64-bit integers above
    /// 2^53 round, which only ever concerns values refused as counts anyway).
    pub fn read_f64(&mut self, n: usize, out: &mut Vec<f64>) -> Result<(), NpyError> {
        let dtype = self.numeric()?;
        let bytes = self.next_bytes(n)?;
        out.reserve(n);
        for b in bytes.chunks_exact(dtype.size()) {
            out.push(float_value(dtype, b));
        }
        Ok(())
    }

    /// The whole remaining data as raw bytes (for small members such as
    /// scipy's `format`).
    pub fn read_rest(&mut self) -> Result<Vec<u8>, NpyError> {
        let n = self.left;
        Ok(self.next_bytes(n)?.to_vec())
    }

    /// Checks that the member ends here and its CRC-32 matches.
    pub fn finish(&mut self) -> Result<(), NpyError> {
        if self.left > 0 {
            return Err(NpyError::Archive(format!(
                "member {}: {} elements were not read",
                self.member.info.name, self.left
            )));
        }
        self.member.finish()
    }
}

/// Reads member `name` (without `.npy`) of an `.npz` archive, reading no
/// more than the archive declares for it.
pub fn read_npz_member<R: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    name: &str,
) -> Result<Array, NpyError> {
    let info = MemberInfo::of(archive, name)?;
    let raw = archive
        .by_index_raw(archive.index_for_name(&info.name).expect("found above"))
        .map_err(|e| NpyError::Archive(format!("member {}: {e}", info.name)))?;
    let mut compressed = Vec::with_capacity(raw.compressed_size().min(1 << 26) as usize);
    raw.take(info.compressed)
        .read_to_end(&mut compressed)
        .map_err(|e| NpyError::io(format!("npz member {}", info.name), e))?;
    let mut member = Member::new(std::io::Cursor::new(compressed), info);
    let (header, header_len) = Header::read(&mut member)?;
    let data = header.data_bytes()?;
    if (header_len as u64).checked_add(data as u64) != Some(member.info.size) {
        return Err(NpyError::Archive(format!(
            "member {}: header promises {data} data bytes, the archive holds {}",
            member.info.name,
            member.info.size.saturating_sub(header_len as u64)
        )));
    }
    let mut bytes = Vec::with_capacity(data);
    (&mut member)
        .take(data as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| NpyError::io(format!("npz member {}", member.info.name), e))?;
    member.finish()?;
    Ok(Array {
        dtype: header.dtype()?,
        shape: header.shape,
        data: bytes,
    })
}

/// Opens an `.npz` archive at `path`.
pub fn open_npz(path: &std::path::Path) -> Result<zip::ZipArchive<std::fs::File>, NpyError> {
    let f = std::fs::File::open(path).map_err(|e| NpyError::io(path.display().to_string(), e))?;
    zip::ZipArchive::new(f)
        .map_err(|e| NpyError::file(path, format!("not a valid .npz archive: {e}")))
}

/// The members of a CSR `.npz`, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct NpzCsr {
    /// Row pointers (`rows + 1` entries), widened to `i64`.
    pub indptr: Vec<i64>,
    /// Column index of each stored value, narrowed to `i32`.
    pub indices: Vec<i32>,
    /// Values in their stored dtype.
    pub data: Array,
    /// `(rows, columns)`.
    pub shape: [u64; 2],
}

/// A scipy sparse CSR matrix saved with `scipy.sparse.save_npz`, or the golden
/// expectations: `indptr`, `indices`, `data` and `shape` members.
pub fn read_csr_npz(path: &std::path::Path) -> Result<NpzCsr, NpyError> {
    let mut z = open_npz(path)?;
    let indptr = read_npz_member(&mut z, "indptr")?.to_i64()?;
    let indices = read_npz_member(&mut z, "indices")?.to_i32()?;
    let data = read_npz_member(&mut z, "data")?;
    let shape = read_npz_member(&mut z, "shape")?.to_i64()?;
    let [rows, cols] = shape[..] else {
        return Err(NpyError::file(path, "shape must have 2 entries"));
    };
    if rows < 0 || cols < 0 || Some(indptr.len() as i64) != rows.checked_add(1) {
        return Err(NpyError::file(
            path,
            format!("shape ({rows}, {cols}) disagrees with indptr"),
        ));
    }
    Ok(NpzCsr {
        indptr,
        indices,
        data,
        shape: [rows as u64, cols as u64],
    })
}

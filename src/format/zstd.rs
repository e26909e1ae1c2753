//! The only module that touches zstd-sys.
//!
//! Every frame the format stores must be a single regular zstd frame that
//! declares its content size, and that size is fixed by the format (2n bytes for
//! a stream, 8k for an exception frame). So decompression here is always into a
//! buffer of exactly the required size: a frame that lies about its size, is
//! followed by junk, or would expand beyond what its compressed length allows is
//! refused before anything is allocated or written past that buffer.

use std::ffi::CStr;
use std::ptr::NonNull;

use zstd_sys as sys;

/// Magic number of a regular zstd frame (skippable frames use 0x184D2A5?).
const FRAME_MAGIC: u32 = 0xFD2F_B528;

/// `ZSTD_CONTENTSIZE_ERROR` (the bindings expose it with the wrong integer type).
const CONTENTSIZE_ERROR: u64 = u64::MAX - 1;

/// Upper bound on how many output bytes one input byte of a frame can produce.
///
/// A zstd block holds at most 128 KiB and costs at least a 3-byte header plus
/// one byte (an RLE block), so no valid frame expands by more than 128 KiB / 4.
/// Checking a declared size against this before allocating turns a lying header
/// into an error instead of a huge allocation.
pub const MAX_EXPANSION: u64 = (128 * 1024) / 4;

/// Why a frame was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The bytes do not start with the magic of a regular zstd frame.
    NotAFrame,
    /// The frame header does not carry its content size.
    NoContentSize,
    /// The declared content size is not the one required.
    Size {
        /// The content size in the frame header.
        declared: u64,
        /// The size the caller requires.
        expected: u64,
    },
    /// The declared content size is more than the compressed bytes can
    /// produce (more than [`MAX_EXPANSION`] times their length).
    Ratio {
        /// The content size in the frame header.
        declared: u64,
        /// The length of the compressed input.
        compressed: u64,
    },
    /// Bytes follow the frame inside the stream.
    Trailing {
        /// How many bytes follow the frame.
        extra: u64,
    },
    /// zstd refused the frame (the reason is zstd's own message).
    Corrupt(String),
}

fn error_name(code: usize) -> String {
    // SAFETY: ZSTD_getErrorName returns a pointer to a static NUL-terminated string
    // for any code, valid for the life of the program.
    unsafe { CStr::from_ptr(sys::ZSTD_getErrorName(code)) }
        .to_string_lossy()
        .into_owned()
}

fn is_error(code: usize) -> bool {
    // SAFETY: ZSTD_isError is a pure function of its argument.
    unsafe { sys::ZSTD_isError(code) != 0 }
}

/// Refuses a compression level outside what the linked zstd takes
/// (`ZSTD_minCLevel()..=ZSTD_maxCLevel()`), which zstd would clamp while a
/// manifest recorded the level asked for.
pub fn check_level(level: i32) -> crate::error::Result<()> {
    // SAFETY: both return constants of the library; they take no pointer.
    let (min, max) = unsafe { (sys::ZSTD_minCLevel(), sys::ZSTD_maxCLevel()) };
    if (min..=max).contains(&level) {
        Ok(())
    } else {
        Err(crate::error::Error::Input(format!(
            "zstd level {level} is outside {min}..={max}"
        )))
    }
}

/// The version of the linked zstd library, e.g. `1.5.7`.
pub fn version() -> String {
    // SAFETY: ZSTD_versionString returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::ZSTD_versionString()) }
        .to_string_lossy()
        .into_owned()
}

/// Reads and checks a frame's header: the single regular frame filling `src`,
/// with a content size that can be produced from `src.len()` bytes. Returns the
/// declared content size. Reads only headers (block headers for the extent).
pub fn frame_content_size(src: &[u8]) -> Result<u64, FrameError> {
    let magic = src
        .get(..4)
        .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    if magic != Some(FRAME_MAGIC) {
        return Err(FrameError::NotAFrame);
    }
    // SAFETY: the pointer and length describe `src`, which zstd only reads.
    let declared = unsafe { sys::ZSTD_getFrameContentSize(src.as_ptr().cast(), src.len()) };
    // zstd's sentinels: (0ULL - 1) for "unknown", (0ULL - 2) for "error".
    match declared {
        u64::MAX => return Err(FrameError::NoContentSize),
        CONTENTSIZE_ERROR => return Err(FrameError::Corrupt("invalid frame header".into())),
        _ => {}
    }
    let compressed = src.len() as u64;
    if declared > compressed.saturating_mul(MAX_EXPANSION) {
        return Err(FrameError::Ratio {
            declared,
            compressed,
        });
    }
    // SAFETY: as above; zstd walks the block headers inside `src` only.
    let extent = unsafe { sys::ZSTD_findFrameCompressedSize(src.as_ptr().cast(), src.len()) };
    if is_error(extent) {
        return Err(FrameError::Corrupt(error_name(extent)));
    }
    if extent < src.len() {
        return Err(FrameError::Trailing {
            extra: (src.len() - extent) as u64,
        });
    }
    Ok(declared)
}

/// A reusable decompression context (one per thread; it is `Send`, not `Sync`).
pub struct Decompressor {
    dctx: NonNull<sys::ZSTD_DCtx>,
}

// SAFETY: a ZSTD_DCtx holds no thread-local state; it may be used from any thread
// as long as only one uses it at a time, which `&mut self` on every use ensures.
unsafe impl Send for Decompressor {}

impl Decompressor {
    /// Creates a context. Aborts like any allocation failure if zstd cannot allocate it.
    pub fn new() -> Decompressor {
        // SAFETY: plain constructor; a null result means allocation failure.
        let raw = unsafe { sys::ZSTD_createDCtx() };
        let dctx = NonNull::new(raw).unwrap_or_else(|| {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<[u8; 1 << 17]>())
        });
        Decompressor { dctx }
    }

    /// Decompresses the single frame `src` into all of `dst`, which must be exactly
    /// the frame's content size. Nothing is written beyond `dst`.
    pub fn decompress_exact(&mut self, src: &[u8], dst: &mut [u8]) -> Result<(), FrameError> {
        let declared = frame_content_size(src)?;
        let expected = dst.len() as u64;
        if declared != expected {
            return Err(FrameError::Size { declared, expected });
        }
        // SAFETY: `dst` is a valid writable region of `dst.len()` bytes and `src` a
        // readable one; zstd writes at most `dst.len()` bytes; the context is ours.
        let written = unsafe {
            sys::ZSTD_decompressDCtx(
                self.dctx.as_ptr(),
                dst.as_mut_ptr().cast(),
                dst.len(),
                src.as_ptr().cast(),
                src.len(),
            )
        };
        if is_error(written) {
            return Err(FrameError::Corrupt(error_name(written)));
        }
        if written != dst.len() {
            return Err(FrameError::Corrupt(format!(
                "frame produced {written} bytes, header declared {declared}"
            )));
        }
        Ok(())
    }
}

impl Default for Decompressor {
    fn default() -> Self {
        Decompressor::new()
    }
}

impl Drop for Decompressor {
    fn drop(&mut self) {
        // SAFETY: the context was created by ZSTD_createDCtx and is freed once.
        unsafe { sys::ZSTD_freeDCtx(self.dctx.as_ptr()) };
    }
}

/// A reusable compression context (one per thread; `Send`, not `Sync`).
pub struct Compressor {
    cctx: NonNull<sys::ZSTD_CCtx>,
}

// SAFETY: as for `Decompressor`: no thread affinity, exclusive use through `&mut self`.
unsafe impl Send for Compressor {}

impl Compressor {
    /// Creates a context. Aborts like any allocation failure if zstd cannot allocate it.
    pub fn new() -> Compressor {
        // SAFETY: plain constructor; a null result means allocation failure.
        let raw = unsafe { sys::ZSTD_createCCtx() };
        let cctx = NonNull::new(raw).unwrap_or_else(|| {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<[u8; 1 << 17]>())
        });
        Compressor { cctx }
    }

    /// Appends one frame holding `src`, with its content size, at `level`, to `out`.
    pub fn compress_into(
        &mut self,
        src: &[u8],
        level: i32,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let set = |param, value| {
            // SAFETY: the context is ours and valid; the parameter is a known enum value.
            let code = unsafe { sys::ZSTD_CCtx_setParameter(self.cctx.as_ptr(), param, value) };
            if is_error(code) {
                Err(error_name(code))
            } else {
                Ok(())
            }
        };
        set(sys::ZSTD_cParameter::ZSTD_c_compressionLevel, level)?;
        set(sys::ZSTD_cParameter::ZSTD_c_contentSizeFlag, 1)?;
        // SAFETY: pure function of its argument.
        let bound = unsafe { sys::ZSTD_compressBound(src.len()) };
        out.reserve(bound);
        let start = out.len();
        let spare = out.spare_capacity_mut();
        // SAFETY: `spare` has room for at least `bound` bytes (reserved above), which
        // zstd never exceeds; `src` is readable; the context is ours.
        let written = unsafe {
            sys::ZSTD_compress2(
                self.cctx.as_ptr(),
                spare.as_mut_ptr().cast(),
                spare.len(),
                src.as_ptr().cast(),
                src.len(),
            )
        };
        if is_error(written) {
            return Err(error_name(written));
        }
        // SAFETY: zstd initialised exactly `written` bytes after `start`.
        unsafe { out.set_len(start + written) };
        Ok(())
    }
}

impl Default for Compressor {
    fn default() -> Self {
        Compressor::new()
    }
}

impl Drop for Compressor {
    fn drop(&mut self) {
        // SAFETY: the context was created by ZSTD_createCCtx and is freed once.
        unsafe { sys::ZSTD_freeCCtx(self.cctx.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_the_librarys() {
        for ok in [1, 19, 22, -5, -(1 << 17)] {
            check_level(ok).unwrap();
        }
        for bad in [23, 99, -(1 << 17) - 1, i32::MIN] {
            let e = check_level(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("zstd level {bad} is outside")), "{e}");
        }
    }

    fn frame(data: &[u8], level: i32) -> Vec<u8> {
        let mut out = Vec::new();
        Compressor::new()
            .compress_into(data, level, &mut out)
            .unwrap();
        out
    }

    #[test]
    fn round_trip_exact_size() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        for level in [-5, 1, 19] {
            let f = frame(&data, level);
            let mut dst = vec![0u8; data.len()];
            Decompressor::new().decompress_exact(&f, &mut dst).unwrap();
            assert_eq!(dst, data);
        }
    }

    #[test]
    fn empty_frame_round_trips() {
        let f = frame(&[], 19);
        assert_eq!(frame_content_size(&f), Ok(0));
        Decompressor::new().decompress_exact(&f, &mut []).unwrap();
    }

    #[test]
    fn wrong_size_trailing_and_garbage_are_refused() {
        let data = vec![7u8; 1000];
        let f = frame(&data, 3);
        let mut d = Decompressor::new();
        let mut small = vec![0u8; 999];
        assert_eq!(
            d.decompress_exact(&f, &mut small),
            Err(FrameError::Size {
                declared: 1000,
                expected: 999
            })
        );
        let mut trailing = f.clone();
        trailing.extend_from_slice(&[0; 8]);
        let mut dst = vec![0u8; 1000];
        assert_eq!(
            d.decompress_exact(&trailing, &mut dst),
            Err(FrameError::Trailing { extra: 8 })
        );
        assert_eq!(
            d.decompress_exact(b"junkjunk", &mut dst),
            Err(FrameError::NotAFrame)
        );
        assert_eq!(
            d.decompress_exact(&f[..f.len() - 1], &mut dst)
                .map_err(|e| matches!(e, FrameError::Corrupt(_))),
            Err(true)
        );
    }

    #[test]
    fn huge_declared_size_is_refused_before_allocation() {
        // A frame header declaring 2^40 bytes from a few bytes of input.
        let mut f = frame(&[1u8; 16], 1);
        // Frame header descriptor: single segment, 8-byte content size field.
        f[4] = 0b1110_0000;
        let fcs = 1u64 << 40;
        let mut hacked = f[..5].to_vec();
        hacked.extend_from_slice(&fcs.to_le_bytes());
        hacked.extend_from_slice(&f[6..]);
        assert!(matches!(
            frame_content_size(&hacked),
            Err(FrameError::Ratio { .. }) | Err(FrameError::Corrupt(_))
        ));
    }

    #[test]
    fn version_is_reported() {
        assert!(version().starts_with("1."));
    }
}

//! Page decoding: headers checked by `wire`, blocks decoded by the kernels.

use crate::kernels::block::{BlockKernels, Divisor};
use crate::kernels::{Backend, KernelTable};

use super::error::Ts2diffError;
use super::wire::{self, Block, Form, Header};
use super::{max_point_value, PageFloat};

/// Deltas decoded per kernel pass. A block larger than this (block sizes are
/// the writer's choice; Java's default is 128) is decoded in slices of this
/// many deltas, so the integer scratch stays small, on the stack and in L1
/// whatever the page says.
const CHUNK: usize = 256;

/// Decodes TS_2DIFF pages. A small `Copy` value of settings: build it once,
/// use it for any number of pages.
///
/// ```
/// use deltacells::format::ts2diff::{Decoder, Encoder};
/// use deltacells::Backend;
///
/// let page = Encoder::new().encode(&[1.5f32, 2.25, 3.0])?;
/// let mut out = [0f32; 8];
/// let n = Decoder::new().backend(Backend::Scalar).decode_into(&page, &mut out)?;
/// assert_eq!(&out[..n], &[1.5, 2.25, 3.0]);
/// # Ok::<(), deltacells::format::ts2diff::Ts2diffError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Decoder {
    /// The backend forced by [`Decoder::backend`], if any.
    backend: Option<Backend>,
    /// The cap of [`Decoder::max_values`]; by default it grows with the page.
    max_values: Option<usize>,
}

impl Decoder {
    /// The smallest value cap [`Decoder::decode`] applies by default (8 MiB
    /// of f64), whatever the page size.
    pub const MIN_VALUE_CAP: usize = 1 << 20;

    /// Values per page byte that [`Decoder::decode`] accepts by default above
    /// [`Decoder::MIN_VALUE_CAP`]: a block of at least one bit per delta
    /// holds at most 8 values per byte, and a Java default block of equal
    /// values 129 per 16-byte header.
    pub const VALUES_PER_BYTE: usize = 9;

    /// Kernels of [`Backend::active`], default value cap.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Forces a kernel backend (an unavailable one makes decoding fail with
    /// [`Ts2diffError::Backend`]).
    pub fn backend(mut self, backend: Backend) -> Decoder {
        self.backend = Some(backend);
        self
    }

    /// The most values [`Decoder::decode`] will allocate for. A page cannot
    /// bound this by its size alone (a 16-byte block of zero-width deltas may
    /// claim 2^31 values), so the default is
    /// `max(MIN_VALUE_CAP, VALUES_PER_BYTE * page.len())`: memory proportional
    /// to the input. [`Decoder::decode_into`] is bounded by the caller's slice
    /// instead.
    pub fn max_values(mut self, max_values: usize) -> Decoder {
        self.max_values = Some(max_values);
        self
    }

    fn kernels(&self) -> Result<&'static BlockKernels, Ts2diffError> {
        Ok(BlockKernels::chosen(self.backend)?)
    }

    /// Decodes `page` into the front of `out` and returns how many values it
    /// holds. Fails with [`Ts2diffError::TooManyValues`] if `out` is too
    /// short; on any error the contents of `out` are unspecified.
    pub fn decode_into<T: PageFloat>(
        &self,
        page: &[u8],
        out: &mut [T],
    ) -> Result<usize, Ts2diffError> {
        decode_page(self.kernels()?, page, out)
    }

    /// Decodes `page` into a new vector, after checking its headers and its
    /// value count against [`Decoder::max_values`].
    pub fn decode<T: PageFloat>(&self, page: &[u8]) -> Result<Vec<T>, Ts2diffError> {
        let kernels = self.kernels()?;
        let info = wire::inspect(page, T::TYPE)?;
        let cap = self.max_values.unwrap_or_else(|| {
            Self::MIN_VALUE_CAP.max(page.len().saturating_mul(Self::VALUES_PER_BYTE))
        });
        let n = usize::try_from(info.values)
            .ok()
            .filter(|&n| n <= cap)
            .ok_or(Ts2diffError::TooManyValues {
                offset: 0,
                limit: cap,
            })?;
        let mut out = vec![T::default(); n];
        let written = decode_page(kernels, page, &mut out)?;
        debug_assert_eq!(written, n);
        Ok(out)
    }
}

fn decode_page<T: PageFloat>(
    k: &BlockKernels,
    page: &[u8],
    out: &mut [T],
) -> Result<usize, Ts2diffError> {
    let Some(h) = wire::header(page)? else {
        return Ok(0);
    };
    if let Some((declared, at)) = h.count {
        if declared as usize > out.len() {
            return Err(Ts2diffError::TooManyValues {
                offset: at,
                limit: out.len(),
            });
        }
    }
    let divisor = Divisor::new(max_point_value(h.mpn));
    let mut scratch = [T::Bits::default(); CHUNK + 1];
    let mut done = 0usize;
    let mut pos = h.blocks;
    while pos < page.len() {
        let b = wire::block::<T>(page, pos)?;
        let m = b.deltas as usize + 1;
        if let Some((declared, _)) = h.count {
            if done + m > declared as usize {
                let found = (done + m) as u64;
                return Err(Ts2diffError::CountMismatch {
                    offset: b.offset,
                    declared,
                    found,
                });
            }
        }
        if m > out.len() - done {
            return Err(Ts2diffError::TooManyValues {
                offset: b.offset,
                limit: out.len(),
            });
        }
        // The slice runs to the page end so the kernels may load past the block.
        decode_block(
            k,
            &h,
            &page[b.packed..],
            &b,
            &divisor,
            done,
            &mut out[done..done + m],
            &mut scratch,
        )?;
        done += m;
        pos = b.end;
    }
    if let Some((declared, _)) = h.count {
        if done != declared as usize {
            return Err(Ts2diffError::CountMismatch {
                offset: page.len(),
                declared,
                found: done as u64,
            });
        }
    }
    Ok(done)
}

/// One block into `out`, `CHUNK` deltas at a time through the scratch: unpack,
/// running sum, scale, then (Form 2/3) [`apply_forms`]. `first` is the page
/// position of the block's first value.
#[allow(clippy::too_many_arguments)]
fn decode_block<T: PageFloat>(
    k: &BlockKernels,
    h: &Header<'_>,
    packed: &[u8],
    b: &Block<T::Bits>,
    divisor: &Divisor,
    first: usize,
    out: &mut [T],
    scratch: &mut [T::Bits; CHUNK + 1],
) -> Result<(), Ts2diffError> {
    let width = b.width as usize;
    let mut prev = b.first;
    let mut td = 0usize;
    let mut at = 0usize;
    loop {
        // The first slice also carries the block's first value in front.
        let lead = usize::from(td == 0);
        let c = (b.deltas as usize - td).min(CHUNK);
        let ints = &mut scratch[..lead + c];
        if lead == 1 {
            ints[0] = b.first;
        }
        // `td` is a multiple of CHUNK, hence of 8: a byte boundary.
        T::unpack(k, &packed[td * width / 8..], b.width, &mut ints[lead..]);
        prev = T::delta(k, prev, b.min_delta, &mut ints[lead..]);
        let dst = &mut out[at..at + lead + c];
        T::scale(k, ints, divisor, dst);
        if h.form != Form::Scaled {
            apply_forms(h, first + at, ints, dst);
        }
        at += lead + c;
        td += c;
        if td == b.deltas as usize {
            return Ok(());
        }
    }
}

/// Form 2/3: replaces the values that are not in scaled form. `first` is the
/// page position of `ints[0]`; the caller checked that every position is below
/// the declared count, so the bitmaps cover it.
fn apply_forms<T: PageFloat>(h: &Header<'_>, first: usize, ints: &[T::Bits], out: &mut [T]) {
    let bit = |map: &[u8], p: usize| map.get(p / 8).is_some_and(|b| b >> (p % 8) & 1 == 1);
    for (i, (o, &int)) in out.iter_mut().zip(ints).enumerate() {
        let p = first + i;
        if bit(h.raw, p) {
            *o = T::from_bits(int);
        } else if !bit(h.scaled, p) {
            *o = T::unscaled(int);
        }
    }
}

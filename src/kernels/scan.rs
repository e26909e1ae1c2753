//! Scan kernels: integer prefix sums with overflow detection, and the
//! elementwise scale/offset pass, for the XDelta codec (and anything else that
//! integrates deltas).
//!
//! # Numerics
//!
//! * [`Scan::prefix_sum_i64`] is an inclusive prefix sum in checked `i64`
//!   arithmetic: `data[k] = data[k-1] + data[k]`, the first element unchanged
//!   (the "static first value" of a delta coding). Integer addition is
//!   associative, so the vector backends may add in a different order (a
//!   log-step scan inside each register, plus a carry) and still produce the
//!   same bits. Overflow is detected exactly: see [`Overflow`].
//! * [`Scan::affine_f64`] and [`Scan::ints_to_f64`] compute `x * s` or `x / s`,
//!   then `+ o`: two roundings, in that order, never a fused multiply-add (Rust
//!   never contracts `a * b + c`, and the vector code uses separate multiply and
//!   add instructions). Elementwise work is order-independent, so every backend
//!   gives the bits of the scalar reference.
//! * [`Scan::prefix_sum_to_f64`] (and its second-order twin) fuses the
//!   integer prefix sum with the conversion and the scale/offset map: the
//!   decoder's whole integer path in one read and one write of the buffer,
//!   which matters because a decoded column is far larger than the caches.
//! * [`prefix_sum_f64`] has no vector backend on purpose: floating-point
//!   addition is not associative, so a SIMD scan would round differently from
//!   the sequential left-to-right sum that the XDelta reference decoders
//!   compute. It stays a plain sequential loop.
//!
//! # Backends
//!
//! The scalar reference is plain code ([`mod@reference`]). The vector backends
//! (AVX2, AVX-512, NEON) share one algorithm, written once over two small
//! traits (`I64s`, `F64s`) and instantiated per ISA by thin
//! `#[target_feature]` wrappers. The only way to run them is through a [`Scan`]
//! built by [`Scan::new`], which calls [`Backend::require`]: holding a `Scan`
//! proves that the CPU has the backend's features, which is the safety argument
//! for every dispatch below.

use super::Backend;
use crate::error::Result;

/// The first position whose running sum left the `i64` range.
///
/// Reported identically by every backend: on overflow at `index`,
/// `data[..index]` holds the prefix sums and `data[index..]` is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// Position (in the slice passed to the kernel) whose sum overflowed.
    pub index: usize,
}

/// The multiplicative part of an [`Affine`] map.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// No scaling.
    None,
    /// `x * s`.
    Mul(f64),
    /// `x / s` (a true division, one rounding; not a multiplication by `1/s`).
    Div(f64),
}

/// `x -> (x scaled) + offset`, each step one IEEE-754 rounding, absent steps
/// skipped (so `-0.0` survives a map without an offset).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Affine {
    /// Applied first.
    pub scale: Scale,
    /// Added second, when present.
    pub offset: Option<f64>,
}

impl Affine {
    /// The map that changes nothing.
    pub const IDENTITY: Affine = Affine {
        scale: Scale::None,
        offset: None,
    };

    /// Whether this map is [`Affine::IDENTITY`].
    pub fn is_identity(&self) -> bool {
        matches!(self.scale, Scale::None) && self.offset.is_none()
    }

    /// The map applied to one value: the definition the vector code matches.
    #[inline(always)]
    pub fn apply(&self, x: f64) -> f64 {
        let y = match self.scale {
            Scale::None => x,
            Scale::Mul(s) => x * s,
            Scale::Div(s) => x / s,
        };
        match self.offset {
            Some(o) => y + o,
            None => y,
        }
    }
}

/// A handle on the scan kernels of one backend that this CPU can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scan {
    backend: Backend,
}

impl Scan {
    /// The kernels of `backend`, or [`crate::Error::BackendUnavailable`] if this
    /// CPU cannot run it.
    pub fn new(backend: Backend) -> Result<Scan> {
        Ok(Scan {
            backend: backend.require()?,
        })
    }

    /// The scalar reference kernels (always available).
    pub fn scalar() -> Scan {
        Scan {
            backend: Backend::Scalar,
        }
    }

    /// The backend these kernels run on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// In-place inclusive prefix sum in checked `i64` arithmetic (one order of
    /// delta decoding: the first element is the static start value).
    pub fn prefix_sum_i64(&self, data: &mut [i64]) -> Result<(), Overflow> {
        match self.backend {
            // SAFETY: `self` was built by `Scan::new`, which checked that the CPU
            // has AVX2 (`Backend::require`).
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => unsafe { x86::prefix_sum_avx2(data) },
            // SAFETY: as above, for AVX-512 F/DQ.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => unsafe { x86::prefix_sum_avx512(data) },
            // SAFETY: as above, for NEON.
            #[cfg(target_arch = "aarch64")]
            Backend::Neon => unsafe { neon::prefix_sum(data) },
            _ => reference::prefix_sum_i64(data),
        }
    }

    /// In-place second-order integration in checked `i64` arithmetic: the first
    /// element is static, the second is a delta from it, every later one a delta
    /// of the delta. Equivalently, a prefix sum of `data[1..]` (the deltas) and
    /// then of `data`.
    ///
    /// On overflow, [`Overflow::index`] is the first position whose delta or
    /// value leaves the `i64` range, as if both were computed position by
    /// position; the contents of `data` are then unspecified (but the same for
    /// every backend).
    pub fn prefix_sum2_i64(&self, data: &mut [i64]) -> Result<(), Overflow> {
        self.integrate_deltas(data)?;
        self.prefix_sum_i64(data)
    }

    /// The first pass of a second-order integration: the deltas `data[1..]`.
    /// On overflow it also runs the second pass up to the bad delta, so that
    /// the reported position is the first bad delta *or value*.
    fn integrate_deltas(&self, data: &mut [i64]) -> Result<(), Overflow> {
        if data.len() < 2 {
            return Ok(());
        }
        self.prefix_sum_i64(&mut data[1..])
            .or_else(|Overflow { index }| {
                // The delta at `index + 1` overflowed; deltas before it are
                // integrated, so a value before it may overflow first.
                let first_bad = index + 1;
                self.prefix_sum_i64(&mut data[..first_bad])?;
                Err(Overflow { index: first_bad })
            })
    }

    /// [`Scan::prefix_sum_i64`] and [`Scan::ints_to_f64`] fused into one pass
    /// over memory: `data` holds `i64` bit patterns (as for `ints_to_f64`);
    /// each running sum is converted and mapped as soon as it is known.
    ///
    /// On overflow at `index`, `data[..index]` holds the mapped doubles and
    /// `data[index..]` the untouched integers, on every backend.
    pub fn prefix_sum_to_f64(&self, data: &mut [f64], affine: Affine) -> Result<(), Overflow> {
        match self.backend {
            // SAFETY: see `prefix_sum_i64`.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => unsafe { x86::prefix_sum_to_f64_avx2(data, affine) },
            // SAFETY: see `prefix_sum_i64`.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => unsafe { x86::prefix_sum_to_f64_avx512(data, affine) },
            // SAFETY: see `prefix_sum_i64`.
            #[cfg(target_arch = "aarch64")]
            Backend::Neon => unsafe { neon::prefix_sum_to_f64(data, affine) },
            _ => reference::prefix_sum_to_f64(data, affine),
        }
    }

    /// [`Scan::prefix_sum2_i64`] with its second pass fused with the
    /// conversion, as in [`Scan::prefix_sum_to_f64`]. Overflow is reported as
    /// by `prefix_sum2_i64`; the contents are then unspecified (but the same
    /// for every backend).
    pub fn prefix_sum2_to_f64(&self, data: &mut [f64], affine: Affine) -> Result<(), Overflow> {
        self.integrate_deltas(bytemuck::cast_slice_mut(data))?;
        self.prefix_sum_to_f64(data, affine)
    }

    /// In-place `x -> affine.apply(x)`.
    pub fn affine_f64(&self, data: &mut [f64], affine: Affine) {
        if affine.is_identity() {
            return;
        }
        match self.backend {
            // SAFETY: see `prefix_sum_i64`.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => unsafe { x86::affine_avx2(data, affine) },
            // SAFETY: see `prefix_sum_i64`.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => unsafe { x86::affine_avx512(data, affine) },
            // SAFETY: see `prefix_sum_i64`.
            #[cfg(target_arch = "aarch64")]
            Backend::Neon => unsafe { neon::affine(data, affine) },
            _ => reference::affine_f64(data, affine),
        }
    }

    /// In-place conversion of integers to floats, then `affine`.
    ///
    /// On entry each element of `data` holds an `i64` stored as its bit pattern
    /// (write it through `bytemuck::cast_slice_mut::<f64, i64>`); on return it
    /// holds `affine.apply(i as f64)`, where `i as f64` rounds to nearest, ties to
    /// even (the same double that parsing the integer's decimal text gives).
    /// Working in place lets a decoder integrate and convert in one buffer.
    pub fn ints_to_f64(&self, data: &mut [f64], affine: Affine) {
        match self.backend {
            // SAFETY: see `prefix_sum_i64`.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => unsafe { x86::ints_to_f64_avx2(data, affine) },
            // SAFETY: see `prefix_sum_i64`.
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => unsafe { x86::ints_to_f64_avx512(data, affine) },
            // SAFETY: see `prefix_sum_i64`.
            #[cfg(target_arch = "aarch64")]
            Backend::Neon => unsafe { neon::ints_to_f64(data, affine) },
            _ => reference::ints_to_f64(data, affine),
        }
    }
}

/// In-place inclusive prefix sum in IEEE-754 double arithmetic, strictly left
/// to right (`data[k] = data[k-1] + data[k]`). Sequential by design: see the
/// module docs.
pub fn prefix_sum_f64(data: &mut [f64]) {
    let Some((first, rest)) = data.split_first_mut() else {
        return;
    };
    let mut acc = *first;
    for x in rest {
        acc += *x;
        *x = acc;
    }
}

/// In-place second-order integration in double arithmetic: deltas
/// `data[1..]` summed first (the second element is a delta from the first),
/// then values, each strictly left to right. This computes the same roundings
/// as interleaving the two sums position by position.
pub fn prefix_sum2_f64(data: &mut [f64]) {
    if data.len() < 2 {
        return;
    }
    prefix_sum_f64(&mut data[1..]);
    prefix_sum_f64(data);
}

/// The scalar reference: plain code that defines what every backend computes,
/// and the tail loops the vector code hands its last few elements to.
pub mod reference {
    use super::{Affine, Overflow};

    /// Reference for [`super::Scan::prefix_sum_i64`].
    pub fn prefix_sum_i64(data: &mut [i64]) -> Result<(), Overflow> {
        prefix_sum_from(data, 1)
    }

    /// Continues a prefix sum at `start`, given that `data[..start]` is done.
    pub(super) fn prefix_sum_from(data: &mut [i64], start: usize) -> Result<(), Overflow> {
        for k in start.max(1)..data.len() {
            data[k] = data[k - 1]
                .checked_add(data[k])
                .ok_or(Overflow { index: k })?;
        }
        Ok(())
    }

    /// Reference for [`super::Scan::prefix_sum_to_f64`].
    pub fn prefix_sum_to_f64(data: &mut [f64], affine: Affine) -> Result<(), Overflow> {
        let Some(first) = data.first_mut() else {
            return Ok(());
        };
        let running = first.to_bits() as i64;
        *first = affine.apply(running as f64);
        prefix_sum_to_f64_from(data, 1, running, affine)
    }

    /// Continues a fused prefix sum at `start`, `running` being the sum of
    /// `data[..start]` (whose elements are already converted).
    pub(super) fn prefix_sum_to_f64_from(
        data: &mut [f64],
        start: usize,
        mut running: i64,
        affine: Affine,
    ) -> Result<(), Overflow> {
        for (k, x) in data.iter_mut().enumerate().skip(start) {
            running = running
                .checked_add(x.to_bits() as i64)
                .ok_or(Overflow { index: k })?;
            *x = affine.apply(running as f64);
        }
        Ok(())
    }

    /// Reference for [`super::Scan::affine_f64`].
    pub fn affine_f64(data: &mut [f64], affine: Affine) {
        for x in data {
            *x = affine.apply(*x);
        }
    }

    /// Reference for [`super::Scan::ints_to_f64`].
    pub fn ints_to_f64(data: &mut [f64], affine: Affine) {
        for x in data {
            *x = affine.apply(x.to_bits() as i64 as f64);
        }
    }
}

/// The vector algorithm, written once over the lane traits.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod generic {
    use super::{reference, Affine, Overflow, Scale};

    /// A register of `i64` lanes. Every method is `unsafe`: it may only run on
    /// a CPU with the implementing ISA, from code compiled with its features.
    pub(super) trait I64s: Copy {
        /// Lanes per register.
        const LANES: usize;
        /// The register of `f64` lanes of the same width.
        type F: F64s;
        /// Loads `LANES` values from `p` (no alignment needed).
        unsafe fn load(p: *const i64) -> Self;
        /// Stores `LANES` values to `p` (no alignment needed).
        unsafe fn store(self, p: *mut i64);
        unsafe fn splat(x: i64) -> Self;
        /// Wrapping lane-wise addition.
        unsafe fn add(self, other: Self) -> Self;
        /// Wrapping lane-wise subtraction.
        unsafe fn sub(self, other: Self) -> Self;
        unsafe fn xor(self, other: Self) -> Self;
        unsafe fn and(self, other: Self) -> Self;
        /// Inclusive prefix sum across the lanes (wrapping).
        unsafe fn scan(self) -> Self;
        /// The last lane copied into every lane.
        unsafe fn broadcast_last(self) -> Self;
        /// Lane 0.
        unsafe fn first_lane(self) -> i64;
        /// Bit `i` set iff lane `i` is negative.
        unsafe fn sign_mask(self) -> u32;
        /// Lane-wise conversion, rounding to nearest even.
        unsafe fn to_f64(self) -> Self::F;
    }

    /// A register of `f64` lanes; same contract as [`I64s`].
    pub(super) trait F64s: Copy {
        unsafe fn load(p: *const f64) -> Self;
        unsafe fn store(self, p: *mut f64);
        unsafe fn splat(x: f64) -> Self;
        unsafe fn mul(self, other: Self) -> Self;
        unsafe fn div(self, other: Self) -> Self;
        unsafe fn add(self, other: Self) -> Self;
    }

    /// Prefix sum, one register per step: scan inside the register, add the
    /// carry (the previous register's last sum), check overflow, store.
    ///
    /// Overflow: the wrapped sums `s` equal the true sums modulo 2^64, so
    /// `s[k] - x[k]` is the previous wrapped sum, and `prev + x[k]` overflowed
    /// exactly when both operands have the sign opposite to `s[k]`. At the
    /// first flagged lane every earlier sum was exact, so the first flag is the
    /// first true overflow. A flagged register is not stored: the scalar
    /// reference redoes it, so the partial output and the reported position
    /// are the reference's by construction.
    ///
    /// # Safety
    /// The CPU must support `V`'s ISA, and the caller must be compiled with it.
    #[inline(always)]
    pub(super) unsafe fn prefix_sum<V: I64s>(data: &mut [i64]) -> Result<(), Overflow> {
        let n = data.len();
        if n < 2 {
            return Ok(());
        }
        // SAFETY: CPU support is the caller's contract (all `V` calls below).
        let mut carry = unsafe { V::splat(data[0]) };
        let p = data.as_mut_ptr();
        let mut i = 1;
        while n - i >= V::LANES {
            // SAFETY: `i + LANES <= n`, so the register lies inside `data`.
            let done = unsafe {
                let x = V::load(p.add(i));
                let s = x.scan().add(carry);
                let flags = s.sub(x).xor(s).and(x.xor(s)).sign_mask();
                if flags == 0 {
                    s.store(p.add(i));
                    carry = s.broadcast_last();
                }
                flags != 0
            };
            if done {
                break;
            }
            i += V::LANES;
        }
        reference::prefix_sum_from(data, i)
    }

    /// [`prefix_sum`] fused with [`ints_to_f64`]: scan, check, convert, map,
    /// store, one register at a time. A flagged register is left for the
    /// reference tail, which continues from the running sum.
    ///
    /// # Safety
    /// As for [`prefix_sum`].
    #[inline(always)]
    pub(super) unsafe fn prefix_sum_to_f64<V: I64s>(
        data: &mut [f64],
        affine: Affine,
    ) -> Result<(), Overflow> {
        let n = data.len();
        let Some(first) = data.first_mut() else {
            return Ok(());
        };
        let mut running = first.to_bits() as i64;
        *first = affine.apply(running as f64);
        let p = data.as_mut_ptr();
        let mut i = 1;
        // SAFETY: CPU support is the caller's contract; `i + LANES <= n`
        // keeps every register inside `data`, whose 8-byte elements are read
        // as `i64` and written as `f64`.
        unsafe {
            let map = Map::<V::F>::new(affine);
            let mut carry = V::splat(running);
            while n - i >= V::LANES {
                let x = V::load(p.add(i).cast::<i64>());
                let s = x.scan().add(carry);
                if s.sub(x).xor(s).and(x.xor(s)).sign_mask() != 0 {
                    break;
                }
                map.apply(s.to_f64()).store(p.add(i));
                carry = s.broadcast_last();
                i += V::LANES;
            }
            running = carry.first_lane();
        }
        reference::prefix_sum_to_f64_from(data, i, running, affine)
    }

    /// `x -> affine(x)` over registers, the tail by the reference.
    ///
    /// # Safety
    /// As for [`prefix_sum`].
    #[inline(always)]
    pub(super) unsafe fn affine<V: I64s>(data: &mut [f64], affine: Affine) {
        let mut chunks = data.chunks_exact_mut(V::LANES);
        // SAFETY: CPU support is the caller's contract; each chunk holds
        // exactly `LANES` elements.
        unsafe {
            let map = Map::<V::F>::new(affine);
            for c in &mut chunks {
                map.apply(V::F::load(c.as_ptr())).store(c.as_mut_ptr());
            }
        }
        reference::affine_f64(chunks.into_remainder(), affine);
    }

    /// Integer bit patterns -> `affine(i as f64)` over registers.
    ///
    /// # Safety
    /// As for [`prefix_sum`].
    #[inline(always)]
    pub(super) unsafe fn ints_to_f64<V: I64s>(data: &mut [f64], affine: Affine) {
        let mut chunks = data.chunks_exact_mut(V::LANES);
        // SAFETY: CPU support is the caller's contract; each chunk holds
        // exactly `LANES` elements of 8 bytes, read as `i64` and written back
        // as `f64` (both plain 8-byte values).
        unsafe {
            let map = Map::<V::F>::new(affine);
            for c in &mut chunks {
                let x = V::load(c.as_ptr().cast::<i64>()).to_f64();
                map.apply(x).store(c.as_mut_ptr());
            }
        }
        reference::ints_to_f64(chunks.into_remainder(), affine);
    }

    /// An [`Affine`] with its constants splatted once.
    struct Map<F> {
        mul: Option<F>,
        div: Option<F>,
        add: Option<F>,
    }

    impl<F: F64s> Map<F> {
        /// # Safety
        /// As for [`prefix_sum`].
        #[inline(always)]
        unsafe fn new(a: Affine) -> Self {
            // SAFETY: CPU support is the caller's contract.
            unsafe {
                let (mul, div) = match a.scale {
                    Scale::None => (None, None),
                    Scale::Mul(s) => (Some(F::splat(s)), None),
                    Scale::Div(s) => (None, Some(F::splat(s))),
                };
                Map {
                    mul,
                    div,
                    add: a.offset.map(|o| F::splat(o)),
                }
            }
        }

        /// The same steps as [`Affine::apply`]; the branches are loop-invariant.
        ///
        /// # Safety
        /// As for [`prefix_sum`].
        #[inline(always)]
        unsafe fn apply(&self, mut x: F) -> F {
            // SAFETY: CPU support is the caller's contract.
            unsafe {
                if let Some(m) = self.mul {
                    x = x.mul(m);
                }
                if let Some(d) = self.div {
                    x = x.div(d);
                }
                if let Some(o) = self.add {
                    x = x.add(o);
                }
            }
            x
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::generic::{self, F64s, I64s};
    use super::{Affine, Overflow};

    #[derive(Clone, Copy)]
    pub(super) struct Avx2I(__m256i);
    #[derive(Clone, Copy)]
    pub(super) struct Avx2F(__m256d);

    // every method is an AVX2/AVX intrinsic; the trait
    // contract says the CPU has AVX2 and the caller is compiled with it.
    impl I64s for Avx2I {
        const LANES: usize = 4;
        type F = Avx2F;
        #[inline(always)]
        unsafe fn load(p: *const i64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { Avx2I(_mm256_loadu_si256(p.cast())) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut i64) {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { _mm256_storeu_si256(p.cast(), self.0) }
        }
        #[inline(always)]
        unsafe fn splat(x: i64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2I(_mm256_set1_epi64x(x)) }
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2I(_mm256_add_epi64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn sub(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2I(_mm256_sub_epi64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn xor(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2I(_mm256_xor_si256(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn and(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2I(_mm256_and_si256(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn scan(self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe {
                let x = self.0;
                let zero = _mm256_setzero_si256();
                // [a b c d] + [0 a b c]: lanes shifted up by one, lane 0 zeroed.
                let up1 = _mm256_blend_epi32::<0b0000_0011>(
                    _mm256_permute4x64_epi64::<0b10_01_00_00>(x),
                    zero,
                );
                let x = _mm256_add_epi64(x, up1);
                // + [0 0 a a+b]: the low 128-bit half moved up, the low half zeroed.
                let up2 = _mm256_permute2x128_si256::<0x08>(x, x);
                Avx2I(_mm256_add_epi64(x, up2))
            }
        }
        #[inline(always)]
        unsafe fn broadcast_last(self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2I(_mm256_permute4x64_epi64::<0b11_11_11_11>(self.0)) }
        }
        #[inline(always)]
        unsafe fn first_lane(self) -> i64 {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { _mm_cvtsi128_si64(_mm256_castsi256_si128(self.0)) }
        }
        #[inline(always)]
        unsafe fn sign_mask(self) -> u32 {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { _mm256_movemask_pd(_mm256_castsi256_pd(self.0)) as u32 }
        }
        /// AVX2 has no `i64 -> f64` instruction. Split the biased value
        /// `u = x + 2^63` into 32-bit halves and place each in the mantissa of
        /// a double with a fixed exponent: `2^84 + hi * 2^32` and `2^52 + lo`.
        /// Subtracting `2^84 + 2^63 + 2^52` from the first is exact (the result
        /// is a multiple of 2^32 below 2^64 in magnitude), and adding the second
        /// gives `x` with a single rounding: the correctly rounded conversion.
        #[inline(always)]
        unsafe fn to_f64(self) -> Avx2F {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe {
                let u = _mm256_xor_si256(self.0, _mm256_set1_epi64x(i64::MIN));
                let hi = _mm256_or_si256(
                    _mm256_srli_epi64::<32>(u),
                    _mm256_set1_epi64x(HI_MAGIC as i64),
                );
                let lo = _mm256_blend_epi32::<0b1010_1010>(u, _mm256_set1_epi64x(LO_MAGIC as i64));
                let hi = _mm256_sub_pd(
                    _mm256_castsi256_pd(hi),
                    _mm256_set1_pd(f64::from_bits(HI_LO_BIAS)),
                );
                Avx2F(_mm256_add_pd(hi, _mm256_castsi256_pd(lo)))
            }
        }
    }

    /// Bits of the double `2^84` (a 32-bit integer in the low mantissa bits
    /// counts units of `2^32`).
    pub(super) const HI_MAGIC: u64 = 0x4530_0000_0000_0000;
    /// Bits of the double `2^52` (low mantissa bits count units of 1).
    pub(super) const LO_MAGIC: u64 = 0x4330_0000_0000_0000;
    /// Bits of the double `2^84 + 2^63 + 2^52`.
    pub(super) const HI_LO_BIAS: u64 = 0x4530_0000_8010_0000;

    // AVX intrinsics; see `Avx2I`.
    impl F64s for Avx2F {
        #[inline(always)]
        unsafe fn load(p: *const f64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { Avx2F(_mm256_loadu_pd(p)) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f64) {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { _mm256_storeu_pd(p, self.0) }
        }
        #[inline(always)]
        unsafe fn splat(x: f64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2F(_mm256_set1_pd(x)) }
        }
        #[inline(always)]
        unsafe fn mul(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2F(_mm256_mul_pd(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn div(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2F(_mm256_div_pd(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx2F(_mm256_add_pd(self.0, o.0)) }
        }
    }

    #[derive(Clone, Copy)]
    pub(super) struct Avx512I(__m512i);
    #[derive(Clone, Copy)]
    pub(super) struct Avx512F(__m512d);

    // AVX-512 F/DQ intrinsics; the trait contract says the
    // CPU has them and the caller is compiled with them.
    impl I64s for Avx512I {
        const LANES: usize = 8;
        type F = Avx512F;
        #[inline(always)]
        unsafe fn load(p: *const i64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { Avx512I(_mm512_loadu_si512(p.cast())) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut i64) {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { _mm512_storeu_si512(p.cast(), self.0) }
        }
        #[inline(always)]
        unsafe fn splat(x: i64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512I(_mm512_set1_epi64(x)) }
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512I(_mm512_add_epi64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn sub(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512I(_mm512_sub_epi64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn xor(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512I(_mm512_xor_si512(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn and(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512I(_mm512_and_si512(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn scan(self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe {
                // `valignq` of (x, zero) by 8 - k lanes shifts x up by k lanes,
                // filling with zeros: three log steps for eight lanes.
                let zero = _mm512_setzero_si512();
                let x = _mm512_add_epi64(self.0, _mm512_alignr_epi64::<7>(self.0, zero));
                let x = _mm512_add_epi64(x, _mm512_alignr_epi64::<6>(x, zero));
                Avx512I(_mm512_add_epi64(x, _mm512_alignr_epi64::<4>(x, zero)))
            }
        }
        #[inline(always)]
        unsafe fn broadcast_last(self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512I(_mm512_permutexvar_epi64(_mm512_set1_epi64(7), self.0)) }
        }
        #[inline(always)]
        unsafe fn first_lane(self) -> i64 {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { _mm_cvtsi128_si64(_mm512_castsi512_si128(self.0)) }
        }
        #[inline(always)]
        unsafe fn sign_mask(self) -> u32 {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { u32::from(_mm512_movepi64_mask(self.0)) }
        }
        #[inline(always)]
        unsafe fn to_f64(self) -> Avx512F {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512F(_mm512_cvtepi64_pd(self.0)) }
        }
    }

    // AVX-512 F intrinsics; see `Avx512I`.
    impl F64s for Avx512F {
        #[inline(always)]
        unsafe fn load(p: *const f64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { Avx512F(_mm512_loadu_pd(p)) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f64) {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { _mm512_storeu_pd(p, self.0) }
        }
        #[inline(always)]
        unsafe fn splat(x: f64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512F(_mm512_set1_pd(x)) }
        }
        #[inline(always)]
        unsafe fn mul(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512F(_mm512_mul_pd(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn div(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512F(_mm512_div_pd(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { Avx512F(_mm512_add_pd(self.0, o.0)) }
        }
    }

    // The per-ISA entry points: the generic body compiled with the features.

    #[target_feature(enable = "avx2")]
    pub(super) fn prefix_sum_avx2(data: &mut [i64]) -> Result<(), Overflow> {
        // SAFETY: compiled with AVX2; callers only get here after `require`.
        unsafe { generic::prefix_sum::<Avx2I>(data) }
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn prefix_sum_to_f64_avx2(data: &mut [f64], affine: Affine) -> Result<(), Overflow> {
        // SAFETY: as in `prefix_sum_avx2`.
        unsafe { generic::prefix_sum_to_f64::<Avx2I>(data, affine) }
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn affine_avx2(data: &mut [f64], affine: Affine) {
        // SAFETY: as in `prefix_sum_avx2`.
        unsafe { generic::affine::<Avx2I>(data, affine) }
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn ints_to_f64_avx2(data: &mut [f64], affine: Affine) {
        // SAFETY: as in `prefix_sum_avx2`.
        unsafe { generic::ints_to_f64::<Avx2I>(data, affine) }
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) fn prefix_sum_avx512(data: &mut [i64]) -> Result<(), Overflow> {
        // SAFETY: compiled with AVX-512 F/DQ; callers only get here after `require`.
        unsafe { generic::prefix_sum::<Avx512I>(data) }
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) fn prefix_sum_to_f64_avx512(
        data: &mut [f64],
        affine: Affine,
    ) -> Result<(), Overflow> {
        // SAFETY: as in `prefix_sum_avx512`.
        unsafe { generic::prefix_sum_to_f64::<Avx512I>(data, affine) }
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) fn affine_avx512(data: &mut [f64], affine: Affine) {
        // SAFETY: as in `prefix_sum_avx512`.
        unsafe { generic::affine::<Avx512I>(data, affine) }
    }

    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) fn ints_to_f64_avx512(data: &mut [f64], affine: Affine) {
        // SAFETY: as in `prefix_sum_avx512`.
        unsafe { generic::ints_to_f64::<Avx512I>(data, affine) }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;

    use super::generic::{self, F64s, I64s};
    use super::{Affine, Overflow};

    #[derive(Clone, Copy)]
    pub(super) struct NeonI(int64x2_t);
    #[derive(Clone, Copy)]
    pub(super) struct NeonF(float64x2_t);

    // NEON intrinsics; the trait contract says the CPU has
    // NEON and the caller is compiled with it.
    impl I64s for NeonI {
        const LANES: usize = 2;
        type F = NeonF;
        #[inline(always)]
        unsafe fn load(p: *const i64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { NeonI(vld1q_s64(p)) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut i64) {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { vst1q_s64(p, self.0) }
        }
        #[inline(always)]
        unsafe fn splat(x: i64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonI(vdupq_n_s64(x)) }
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonI(vaddq_s64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn sub(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonI(vsubq_s64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn xor(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonI(veorq_s64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn and(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonI(vandq_s64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn scan(self) -> Self {
            // [a b] + [0 a].
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonI(vaddq_s64(self.0, vextq_s64::<1>(vdupq_n_s64(0), self.0))) }
        }
        #[inline(always)]
        unsafe fn broadcast_last(self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonI(vdupq_laneq_s64::<1>(self.0)) }
        }
        #[inline(always)]
        unsafe fn first_lane(self) -> i64 {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { vgetq_lane_s64::<0>(self.0) }
        }
        #[inline(always)]
        unsafe fn sign_mask(self) -> u32 {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe {
                let s = vshrq_n_u64::<63>(vreinterpretq_u64_s64(self.0));
                (vgetq_lane_u64::<0>(s) | (vgetq_lane_u64::<1>(s) << 1)) as u32
            }
        }
        #[inline(always)]
        unsafe fn to_f64(self) -> NeonF {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonF(vcvtq_f64_s64(self.0)) }
        }
    }

    // NEON intrinsics; see `NeonI`.
    impl F64s for NeonF {
        #[inline(always)]
        unsafe fn load(p: *const f64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { NeonF(vld1q_f64(p)) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f64) {
            // SAFETY: the trait contract: the CPU has the ISA, and `p` is valid for `LANES` elements.
            unsafe { vst1q_f64(p, self.0) }
        }
        #[inline(always)]
        unsafe fn splat(x: f64) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonF(vdupq_n_f64(x)) }
        }
        #[inline(always)]
        unsafe fn mul(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonF(vmulq_f64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn div(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonF(vdivq_f64(self.0, o.0)) }
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the trait contract: the CPU has the ISA.
            unsafe { NeonF(vaddq_f64(self.0, o.0)) }
        }
    }

    #[target_feature(enable = "neon")]
    pub(super) fn prefix_sum(data: &mut [i64]) -> Result<(), Overflow> {
        // SAFETY: compiled with NEON; callers only get here after `require`.
        unsafe { generic::prefix_sum::<NeonI>(data) }
    }

    #[target_feature(enable = "neon")]
    pub(super) fn prefix_sum_to_f64(data: &mut [f64], affine: Affine) -> Result<(), Overflow> {
        // SAFETY: as in `prefix_sum`.
        unsafe { generic::prefix_sum_to_f64::<NeonI>(data, affine) }
    }

    #[target_feature(enable = "neon")]
    pub(super) fn affine(data: &mut [f64], affine: Affine) {
        // SAFETY: as in `prefix_sum`.
        unsafe { generic::affine::<NeonI>(data, affine) }
    }

    #[target_feature(enable = "neon")]
    pub(super) fn ints_to_f64(data: &mut [f64], affine: Affine) {
        // SAFETY: as in `prefix_sum`.
        unsafe { generic::ints_to_f64::<NeonI>(data, affine) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every backend this CPU runs, scalar included.
    fn scans() -> Vec<Scan> {
        Backend::available()
            .into_iter()
            .map(|b| Scan::new(b).unwrap())
            .collect()
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_conversion_constants() {
        assert_eq!(f64::from_bits(x86::HI_MAGIC), 2f64.powi(84));
        assert_eq!(f64::from_bits(x86::LO_MAGIC), 2f64.powi(52));
        assert_eq!(
            f64::from_bits(x86::HI_LO_BIAS),
            2f64.powi(84) + 2f64.powi(63) + 2f64.powi(52)
        );
    }

    #[test]
    fn overflow_is_reported_at_the_same_place_with_the_same_partial_output() {
        for scan in scans() {
            for at in 1..40 {
                let mut data = vec![1i64; 41];
                data[at] = i64::MAX;
                let mut want = data.clone();
                let r = reference::prefix_sum_i64(&mut want);
                assert_eq!(r, Err(Overflow { index: at }));
                assert_eq!(scan.prefix_sum_i64(&mut data), r, "{}", scan.backend());
                assert_eq!(data, want, "{}", scan.backend());
            }
        }
    }

    #[test]
    fn second_order_reports_the_first_bad_position() {
        // The value overflows at position 2 (MAX - 1 + 1 + 1); no delta does.
        let mut data = vec![i64::MAX - 1, 1, 0, 0];
        assert_eq!(
            Scan::scalar().prefix_sum2_i64(&mut data),
            Err(Overflow { index: 2 })
        );
        // The delta itself overflows at position 2.
        let mut data = vec![0, i64::MAX, 1, 0];
        assert_eq!(
            Scan::scalar().prefix_sum2_i64(&mut data),
            Err(Overflow { index: 2 })
        );
        let mut data = vec![5, 1, 1, 1];
        Scan::scalar().prefix_sum2_i64(&mut data).unwrap();
        assert_eq!(data, [5, 6, 8, 11]);
    }

    #[test]
    fn affine_is_two_roundings_not_a_fused_multiply_add() {
        // x * s rounds away a bit that a fused multiply-add would keep.
        let x = 1.0 + f64::EPSILON;
        let s = 1.0 - f64::EPSILON;
        let o = -1.0;
        let two_roundings = (x * s) + o;
        assert_ne!(two_roundings, x.mul_add(s, o));
        let affine = Affine {
            scale: Scale::Mul(s),
            offset: Some(o),
        };
        for scan in scans() {
            let mut data = vec![x; 19];
            scan.affine_f64(&mut data, affine);
            assert!(
                data.iter().all(|v| v.to_bits() == two_roundings.to_bits()),
                "{}",
                scan.backend()
            );
        }
    }

    #[test]
    fn int_conversion_rounds_like_as() {
        let ints = [
            0,
            -1,
            1,
            i64::MIN,
            i64::MAX,
            (1 << 53) + 1,
            -(1 << 53) - 1,
            (1 << 62) + 513,
            0x7FFF_FFFF_FFFF_FDFF,
        ];
        for scan in scans() {
            let mut data: Vec<f64> = ints
                .iter()
                .cycle()
                .take(37)
                .map(|&i| f64::from_bits(i as u64))
                .collect();
            scan.ints_to_f64(&mut data, Affine::IDENTITY);
            for (got, want) in data.iter().zip(ints.iter().cycle()) {
                assert_eq!(
                    got.to_bits(),
                    (*want as f64).to_bits(),
                    "{}",
                    scan.backend()
                );
            }
        }
    }

    #[test]
    fn float_sums_are_sequential() {
        let mut data = [1e16, 1.0, 1.0, -1e16];
        prefix_sum_f64(&mut data);
        assert_eq!(data, [1e16, 1e16, 1e16, 0.0]);
        let mut data = [1.0, 2.0, 0.5];
        prefix_sum2_f64(&mut data);
        assert_eq!(data, [1.0, 3.0, 5.5]);
    }
}

//! AArch64 Advanced SIMD for the block kernels: 128-bit registers, 2 u64
//! lanes. Each method is one or a few intrinsics; the algorithms are in
//! [`super::generic`].

use std::arch::aarch64::*;

use super::generic::{Isa, Plan};

/// NEON: 128-bit registers.
#[derive(Clone, Copy)]
pub(super) struct Neon;

impl Isa for Neon {
    type U64 = uint64x2_t;
    type U32 = uint32x4_t;
    type F64 = float64x2_t;
    const LANES: usize = 2;

    #[inline(always)]
    unsafe fn words(base: *const u8, plan: &Plan, h: usize) -> uint64x2_t {
        // SAFETY: the trait contract: pair `h/2` exists and its unit lies
        // within `span` bytes of `base`.
        unsafe {
            let q = h / 2;
            let unit = vld1q_u8(base.add(*plan.unit_off.as_ptr().add(q)));
            vreinterpretq_u64_u8(vqtbl1q_u8(unit, vld1q_u8(plan.masks.as_ptr().add(16 * q))))
        }
    }
    #[inline(always)]
    unsafe fn shl_each(v: uint64x2_t, counts: *const u64) -> uint64x2_t {
        // SAFETY: the trait contract: 2 counts are readable.
        unsafe { vshlq_u64(v, vreinterpretq_s64_u64(vld1q_u64(counts))) }
    }
    #[inline(always)]
    unsafe fn shr_each(v: uint64x2_t, counts: *const u64) -> uint64x2_t {
        // SAFETY: the trait contract: 2 counts are readable. USHL shifts right
        // for negative counts.
        unsafe { vshlq_u64(v, vnegq_s64(vreinterpretq_s64_u64(vld1q_u64(counts)))) }
    }
    #[inline(always)]
    unsafe fn shr_all(v: uint64x2_t, n: u32) -> uint64x2_t {
        // SAFETY: register-only NEON operations.
        unsafe { vshlq_u64(v, vdupq_n_s64(-i64::from(n))) }
    }
    #[inline(always)]
    unsafe fn or(a: uint64x2_t, b: uint64x2_t) -> uint64x2_t {
        // SAFETY: register-only NEON operation.
        unsafe { vorrq_u64(a, b) }
    }
    #[inline(always)]
    unsafe fn store_low_u32(v: uint64x2_t, dst: *mut u32) {
        // SAFETY: the trait contract: 2 u32 are writable.
        unsafe { vst1_u32(dst, vmovn_u64(v)) }
    }

    #[inline(always)]
    unsafe fn splat_u32(x: u32) -> uint32x4_t {
        // SAFETY: register-only NEON operation.
        unsafe { vdupq_n_u32(x) }
    }
    #[inline(always)]
    unsafe fn load_u32(src: *const u32) -> uint32x4_t {
        // SAFETY: the trait contract: 4 u32 are readable.
        unsafe { vld1q_u32(src) }
    }
    #[inline(always)]
    unsafe fn store_u32(v: uint32x4_t, dst: *mut u32) {
        // SAFETY: the trait contract: 4 u32 are writable.
        unsafe { vst1q_u32(dst, v) }
    }
    #[inline(always)]
    unsafe fn add_u32(a: uint32x4_t, b: uint32x4_t) -> uint32x4_t {
        // SAFETY: register-only NEON operation.
        unsafe { vaddq_u32(a, b) }
    }
    #[inline(always)]
    unsafe fn scan_u32(v: uint32x4_t) -> uint32x4_t {
        // SAFETY: register-only NEON operations. `ext(0, v, 4 - k)` moves every
        // lane up by `k`, shifting in zeros.
        unsafe {
            let z = vdupq_n_u32(0);
            let v = vaddq_u32(v, vextq_u32::<3>(z, v));
            vaddq_u32(v, vextq_u32::<2>(z, v))
        }
    }
    #[inline(always)]
    unsafe fn last_u32(v: uint32x4_t) -> uint32x4_t {
        // SAFETY: register-only NEON operation.
        unsafe { vdupq_laneq_u32::<3>(v) }
    }

    #[inline(always)]
    unsafe fn splat_u64(x: u64) -> uint64x2_t {
        // SAFETY: register-only NEON operation.
        unsafe { vdupq_n_u64(x) }
    }
    #[inline(always)]
    unsafe fn load_u64(src: *const u64) -> uint64x2_t {
        // SAFETY: the trait contract: 2 u64 are readable.
        unsafe { vld1q_u64(src) }
    }
    #[inline(always)]
    unsafe fn store_u64(v: uint64x2_t, dst: *mut u64) {
        // SAFETY: the trait contract: 2 u64 are writable.
        unsafe { vst1q_u64(dst, v) }
    }
    #[inline(always)]
    unsafe fn add_u64(a: uint64x2_t, b: uint64x2_t) -> uint64x2_t {
        // SAFETY: register-only NEON operation.
        unsafe { vaddq_u64(a, b) }
    }
    #[inline(always)]
    unsafe fn scan_u64(v: uint64x2_t) -> uint64x2_t {
        // SAFETY: register-only NEON operations.
        unsafe { vaddq_u64(v, vextq_u64::<1>(vdupq_n_u64(0), v)) }
    }
    #[inline(always)]
    unsafe fn last_u64(v: uint64x2_t) -> uint64x2_t {
        // SAFETY: register-only NEON operation.
        unsafe { vdupq_laneq_u64::<1>(v) }
    }

    #[inline(always)]
    unsafe fn load_i32_as_f64(src: *const u32) -> float64x2_t {
        // SAFETY: the trait contract: 2 u32 are readable.
        unsafe { vcvtq_f64_s64(vmovl_s32(vld1_s32(src as *const i32))) }
    }
    #[inline(always)]
    unsafe fn load_i64_as_f64(src: *const u64) -> float64x2_t {
        // SAFETY: the trait contract: 2 u64 are readable; SCVTF rounds with
        // the current mode (nearest-even).
        unsafe { vcvtq_f64_s64(vld1q_s64(src as *const i64)) }
    }
    #[inline(always)]
    unsafe fn splat_f64(x: f64) -> float64x2_t {
        // SAFETY: register-only NEON operation.
        unsafe { vdupq_n_f64(x) }
    }
    #[inline(always)]
    unsafe fn mul(a: float64x2_t, b: float64x2_t) -> float64x2_t {
        // SAFETY: register-only NEON operation.
        unsafe { vmulq_f64(a, b) }
    }
    #[inline(always)]
    unsafe fn div(a: float64x2_t, b: float64x2_t) -> float64x2_t {
        // SAFETY: register-only NEON operation.
        unsafe { vdivq_f64(a, b) }
    }
    #[inline(always)]
    unsafe fn mul_add(a: float64x2_t, b: float64x2_t, c: float64x2_t) -> float64x2_t {
        // SAFETY: register-only NEON operation (fused, one rounding).
        unsafe { vfmaq_f64(c, a, b) }
    }
    #[inline(always)]
    unsafe fn neg_mul_add(a: float64x2_t, b: float64x2_t, c: float64x2_t) -> float64x2_t {
        // SAFETY: register-only NEON operation (fused, one rounding).
        unsafe { vfmsq_f64(c, a, b) }
    }
    #[inline(always)]
    unsafe fn store_f64(v: float64x2_t, dst: *mut f64) {
        // SAFETY: the trait contract: 2 f64 are writable.
        unsafe { vst1q_f64(dst, v) }
    }
    #[inline(always)]
    unsafe fn store_f32(v: float64x2_t, dst: *mut f32) {
        // SAFETY: the trait contract: 2 f32 are writable.
        unsafe { vst1_f32(dst, vcvt_f32_f64(v)) }
    }
}

/// The NEON instantiations.
pub(super) mod wrappers {
    super::super::generic::wrappers!(super::Neon, "neon");
}

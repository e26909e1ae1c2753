//! NEON: sixteen `u32` lanes as four `uint32x4_t`, so one step consumes a
//! whole 16-byte register of each byte plane (`ld2`/`st2` do the plane
//! (de)interleave in a single instruction); two `u64` or `f64` lanes in one
//! register.

use std::arch::aarch64::*;

use super::{Units, Vector};

/// Token proving the CPU runs NEON (Advanced SIMD).
#[derive(Clone, Copy)]
pub(crate) struct Neon(());

impl Neon {
    /// # Safety
    /// The CPU must support NEON.
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Neon {
        Neon(())
    }
}

/// Sixteen lanes, four per register, in order.
type U32x16 = [uint32x4_t; 4];

/// `op` applied to each register pair.
#[inline(always)]
fn map2(a: U32x16, b: U32x16, op: impl Fn(uint32x4_t, uint32x4_t) -> uint32x4_t) -> U32x16 {
    [
        op(a[0], b[0]),
        op(a[1], b[1]),
        op(a[2], b[2]),
        op(a[3], b[3]),
    ]
}

/// Lane numbers 0..16, for [`Vector::lanes_below`].
static IOTA: [u32; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

// Every `unsafe` block below that calls intrinsics on registers only is sound
// because `self` is a `Neon` token, which exists only on NEON CPUs; blocks that
// touch memory add the pointer argument.
impl Vector for Neon {
    const LANES: usize = 16;
    const LANES_64: usize = 2;
    const PLANE_BYTES: usize = 16;
    const ALIGN: usize = 16;
    type U32 = U32x16;
    type U64 = uint64x2_t;
    type F64 = float64x2_t;

    #[inline(always)]
    fn splat(self, x: u32) -> U32x16 {
        // SAFETY: NEON token.
        [unsafe { vdupq_n_u32(x) }; 4]
    }

    #[inline(always)]
    fn add(self, a: U32x16, b: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        map2(a, b, |x, y| unsafe { vaddq_u32(x, y) })
    }

    #[inline(always)]
    fn sub(self, a: U32x16, b: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        map2(a, b, |x, y| unsafe { vsubq_u32(x, y) })
    }

    #[inline(always)]
    fn or(self, a: U32x16, b: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        map2(a, b, |x, y| unsafe { vorrq_u32(x, y) })
    }

    #[inline(always)]
    fn and(self, a: U32x16, b: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        map2(a, b, |x, y| unsafe { vandq_u32(x, y) })
    }

    #[inline(always)]
    fn andnot(self, a: U32x16, b: U32x16) -> U32x16 {
        // SAFETY: NEON token (`bic` clears in its first operand the bits of its second).
        map2(a, b, |x, y| unsafe { vbicq_u32(y, x) })
    }

    #[inline(always)]
    fn min(self, a: U32x16, b: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        map2(a, b, |x, y| unsafe { vminq_u32(x, y) })
    }

    #[inline(always)]
    fn shr_each(self, v: U32x16, counts: U32x16) -> U32x16 {
        // SAFETY: NEON token. `ushl` shifts right by negative counts.
        map2(v, counts, |x, n| unsafe {
            vshlq_u32(x, vnegq_s32(vreinterpretq_s32_u32(n)))
        })
    }

    #[inline(always)]
    fn max(self, a: U32x16, b: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        map2(a, b, |x, y| unsafe { vmaxq_u32(x, y) })
    }

    #[inline(always)]
    fn prefix_sum(self, v: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        unsafe {
            let z = vdupq_n_u32(0);
            // Within each register (`ext` with zero shifts lanes up)...
            let [a, b, c, d] = v.map(|r| {
                let r = vaddq_u32(r, vextq_u32::<3>(z, r));
                vaddq_u32(r, vextq_u32::<2>(z, r))
            });
            // ...then each register's total into the next.
            let b = vaddq_u32(b, vdupq_laneq_u32::<3>(a));
            let c = vaddq_u32(c, vdupq_laneq_u32::<3>(b));
            let d = vaddq_u32(d, vdupq_laneq_u32::<3>(c));
            [a, b, c, d]
        }
    }

    #[inline(always)]
    fn broadcast_last(self, v: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        [unsafe { vdupq_laneq_u32::<3>(v[3]) }; 4]
    }

    #[inline(always)]
    fn shift_in_zero(self, v: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        unsafe {
            [
                vextq_u32::<3>(vdupq_n_u32(0), v[0]),
                vextq_u32::<3>(v[0], v[1]),
                vextq_u32::<3>(v[1], v[2]),
                vextq_u32::<3>(v[2], v[3]),
            ]
        }
    }

    #[inline(always)]
    fn to_f32_bits(self, v: U32x16) -> U32x16 {
        // SAFETY: NEON token.
        v.map(|r| unsafe { vreinterpretq_u32_f32(vcvtq_f32_u32(r)) })
    }

    #[inline(always)]
    fn lanes_below(self, len: usize) -> U32x16 {
        // SAFETY: NEON token; `IOTA` holds 16 values.
        unsafe {
            let len = vdupq_n_u32(len as u32);
            let iota = IOTA.as_ptr();
            [
                vcltq_u32(vld1q_u32(iota), len),
                vcltq_u32(vld1q_u32(iota.add(4)), len),
                vcltq_u32(vld1q_u32(iota.add(8)), len),
                vcltq_u32(vld1q_u32(iota.add(12)), len),
            ]
        }
    }

    #[inline(always)]
    fn any_nonzero(self, v: U32x16) -> bool {
        // SAFETY: NEON token.
        unsafe { vmaxvq_u32(vorrq_u32(vorrq_u32(v[0], v[1]), vorrq_u32(v[2], v[3]))) != 0 }
    }

    #[inline(always)]
    fn reduce_min(self, v: U32x16) -> u32 {
        // SAFETY: NEON token.
        unsafe { vminvq_u32(vminq_u32(vminq_u32(v[0], v[1]), vminq_u32(v[2], v[3]))) }
    }

    #[inline(always)]
    fn reduce_max(self, v: U32x16) -> u32 {
        // SAFETY: NEON token.
        unsafe { vmaxvq_u32(vmaxq_u32(vmaxq_u32(v[0], v[1]), vmaxq_u32(v[2], v[3]))) }
    }

    #[inline(always)]
    unsafe fn load_planes(self, lo: *const u8, hi: *const u8) -> U32x16 {
        // SAFETY: NEON token; the caller makes 16 bytes readable at each pointer.
        unsafe {
            let (l, h) = (vld1q_u8(lo), vld1q_u8(hi));
            // Zipping the planes gives little-endian u16: elements 0-7, 8-15.
            let first = vreinterpretq_u16_u8(vzip1q_u8(l, h));
            let second = vreinterpretq_u16_u8(vzip2q_u8(l, h));
            [
                vmovl_u16(vget_low_u16(first)),
                vmovl_high_u16(first),
                vmovl_u16(vget_low_u16(second)),
                vmovl_high_u16(second),
            ]
        }
    }

    #[inline(always)]
    unsafe fn load_u32(self, p: *const u32) -> U32x16 {
        // SAFETY: NEON token; the caller makes 16 values readable at `p`.
        unsafe {
            [
                vld1q_u32(p),
                vld1q_u32(p.add(4)),
                vld1q_u32(p.add(8)),
                vld1q_u32(p.add(12)),
            ]
        }
    }

    #[inline(always)]
    unsafe fn permute_window(self, window: *const u32, index: U32x16) -> U32x16 {
        // The window's 64 bytes in four registers; each lane's index `i`
        // becomes the byte numbers `4 i .. 4 i + 4`, which one table lookup
        // per register of lanes reads.
        // SAFETY: NEON token; the caller makes 16 values readable at
        // `window` and keeps every index below 16, so every byte number is
        // below 64, within the table.
        unsafe {
            let table = vld1q_u8_x4(window.cast());
            index.map(|i| {
                let bytes = vmlaq_n_u32(vdupq_n_u32(0x0302_0100), i, 0x0404_0404);
                vreinterpretq_u32_u8(vqtbl4q_u8(table, vreinterpretq_u8_u32(bytes)))
            })
        }
    }

    #[inline(always)]
    unsafe fn store_u32(self, p: *mut u32, v: U32x16) {
        // SAFETY: NEON token; the caller makes 16 values writable at `p`.
        unsafe {
            vst1q_u32(p, v[0]);
            vst1q_u32(p.add(4), v[1]);
            vst1q_u32(p.add(8), v[2]);
            vst1q_u32(p.add(12), v[3]);
        }
    }

    #[inline(always)]
    unsafe fn store_u16(self, p: *mut u16, v: U32x16) {
        // SAFETY: NEON token; the caller makes 16 values writable at `p`.
        unsafe {
            vst1q_u16(p, vmovn_high_u32(vmovn_u32(v[0]), v[1]));
            vst1q_u16(p.add(8), vmovn_high_u32(vmovn_u32(v[2]), v[3]));
        }
    }

    #[inline(always)]
    unsafe fn interleave(self, lo: *const u8, hi: *const u8, out: *mut u8) {
        // SAFETY: NEON token; the caller makes 16 bytes readable at `lo` and
        // `hi` and 32 writable at `out`.
        unsafe { vst2q_u8(out, uint8x16x2_t(vld1q_u8(lo), vld1q_u8(hi))) }
    }

    #[inline(always)]
    unsafe fn deinterleave(self, src: *const u8, lo: *mut u8, hi: *mut u8) {
        // SAFETY: NEON token; the caller makes 32 bytes readable at `src` and
        // 16 writable at `lo` and `hi`.
        unsafe {
            let planes = vld2q_u8(src);
            vst1q_u8(lo, planes.0);
            vst1q_u8(hi, planes.1);
        }
    }

    #[inline(always)]
    fn splat_u64(self, x: u64) -> uint64x2_t {
        // SAFETY: NEON token.
        unsafe { vdupq_n_u64(x) }
    }

    #[inline(always)]
    fn add_u64(self, a: uint64x2_t, b: uint64x2_t) -> uint64x2_t {
        // SAFETY: NEON token.
        unsafe { vaddq_u64(a, b) }
    }

    #[inline(always)]
    fn sub_u64(self, a: uint64x2_t, b: uint64x2_t) -> uint64x2_t {
        // SAFETY: NEON token.
        unsafe { vsubq_u64(a, b) }
    }

    #[inline(always)]
    fn xor_u64(self, a: uint64x2_t, b: uint64x2_t) -> uint64x2_t {
        // SAFETY: NEON token.
        unsafe { veorq_u64(a, b) }
    }

    #[inline(always)]
    fn and_u64(self, a: uint64x2_t, b: uint64x2_t) -> uint64x2_t {
        // SAFETY: NEON token.
        unsafe { vandq_u64(a, b) }
    }

    #[inline(always)]
    fn or_u64(self, a: uint64x2_t, b: uint64x2_t) -> uint64x2_t {
        // SAFETY: NEON token.
        unsafe { vorrq_u64(a, b) }
    }

    #[inline(always)]
    fn shl_each_u64(self, v: uint64x2_t, counts: uint64x2_t) -> uint64x2_t {
        // SAFETY: NEON token.
        unsafe { vshlq_u64(v, vreinterpretq_s64_u64(counts)) }
    }

    #[inline(always)]
    fn shr_each_u64(self, v: uint64x2_t, counts: uint64x2_t) -> uint64x2_t {
        // SAFETY: NEON token. `ushl` shifts right by negative counts.
        unsafe { vshlq_u64(v, vnegq_s64(vreinterpretq_s64_u64(counts))) }
    }

    #[inline(always)]
    fn shr_u64(self, v: uint64x2_t, n: u32) -> uint64x2_t {
        // SAFETY: NEON token.
        unsafe { vshlq_u64(v, vdupq_n_s64(-i64::from(n))) }
    }

    #[inline(always)]
    fn prefix_sum_u64(self, v: uint64x2_t) -> uint64x2_t {
        // SAFETY: NEON token. [a b] + [0 a].
        unsafe { vaddq_u64(v, vextq_u64::<1>(vdupq_n_u64(0), v)) }
    }

    #[inline(always)]
    fn broadcast_last_u64(self, v: uint64x2_t) -> uint64x2_t {
        // SAFETY: NEON token.
        unsafe { vdupq_laneq_u64::<1>(v) }
    }

    #[inline(always)]
    fn first_u64(self, v: uint64x2_t) -> u64 {
        // SAFETY: NEON token.
        unsafe { vgetq_lane_u64::<0>(v) }
    }

    #[inline(always)]
    fn sign_bits_u64(self, v: uint64x2_t) -> u32 {
        // SAFETY: NEON token.
        unsafe {
            let s = vshrq_n_u64::<63>(v);
            (vgetq_lane_u64::<0>(s) | (vgetq_lane_u64::<1>(s) << 1)) as u32
        }
    }

    #[inline(always)]
    fn i64_to_f64(self, v: uint64x2_t) -> float64x2_t {
        // SAFETY: NEON token; `scvtf` rounds by the current mode (nearest-even).
        unsafe { vcvtq_f64_s64(vreinterpretq_s64_u64(v)) }
    }

    #[inline(always)]
    unsafe fn load_u64(self, p: *const u64) -> uint64x2_t {
        // SAFETY: NEON token; the caller makes 2 values readable at `p`.
        unsafe { vld1q_u64(p) }
    }

    #[inline(always)]
    unsafe fn store_u64(self, p: *mut u64, v: uint64x2_t) {
        // SAFETY: NEON token; the caller makes 2 values writable at `p`.
        unsafe { vst1q_u64(p, v) }
    }

    #[inline(always)]
    unsafe fn store_low_u32(self, p: *mut u32, v: uint64x2_t) {
        // SAFETY: NEON token; the caller makes 2 values writable at `p`.
        unsafe { vst1_u32(p, vmovn_u64(v)) }
    }

    #[inline(always)]
    unsafe fn gather_units(self, base: *const u8, units: &Units, first: usize) -> uint64x2_t {
        // SAFETY: NEON token; the caller makes unit `first` readable, and its
        // shuffle is in `units` (`first < 4`).
        unsafe {
            let unit = vld1q_u8(base.add(units.offsets[first]));
            let shuffle = vld1q_u8(units.shuffle[16 * first..][..16].as_ptr());
            vreinterpretq_u64_u8(vqtbl1q_u8(unit, shuffle))
        }
    }

    #[inline(always)]
    fn splat_f64(self, x: f64) -> float64x2_t {
        // SAFETY: NEON token.
        unsafe { vdupq_n_f64(x) }
    }

    #[inline(always)]
    fn add_f64(self, a: float64x2_t, b: float64x2_t) -> float64x2_t {
        // SAFETY: NEON token.
        unsafe { vaddq_f64(a, b) }
    }

    #[inline(always)]
    fn mul_f64(self, a: float64x2_t, b: float64x2_t) -> float64x2_t {
        // SAFETY: NEON token.
        unsafe { vmulq_f64(a, b) }
    }

    #[inline(always)]
    fn div_f64(self, a: float64x2_t, b: float64x2_t) -> float64x2_t {
        // SAFETY: NEON token.
        unsafe { vdivq_f64(a, b) }
    }

    #[inline(always)]
    fn mul_add_f64(self, a: float64x2_t, b: float64x2_t, c: float64x2_t) -> float64x2_t {
        // SAFETY: NEON token (fused, one rounding).
        unsafe { vfmaq_f64(c, a, b) }
    }

    #[inline(always)]
    fn neg_mul_add_f64(self, a: float64x2_t, b: float64x2_t, c: float64x2_t) -> float64x2_t {
        // SAFETY: NEON token (fused, one rounding).
        unsafe { vfmsq_f64(c, a, b) }
    }

    #[inline(always)]
    unsafe fn load_f64(self, p: *const f64) -> float64x2_t {
        // SAFETY: NEON token; the caller makes 2 values readable at `p`.
        unsafe { vld1q_f64(p) }
    }

    #[inline(always)]
    unsafe fn load_i32_as_f64(self, p: *const u32) -> float64x2_t {
        // SAFETY: NEON token; the caller makes 2 values readable at `p`.
        unsafe { vcvtq_f64_s64(vmovl_s32(vld1_s32(p.cast()))) }
    }

    #[inline(always)]
    unsafe fn store_f64(self, p: *mut f64, v: float64x2_t) {
        // SAFETY: NEON token; the caller makes 2 values writable at `p`.
        unsafe { vst1q_f64(p, v) }
    }

    #[inline(always)]
    unsafe fn store_f32(self, p: *mut f32, v: float64x2_t) {
        // SAFETY: NEON token; the caller makes 2 values writable at `p`.
        unsafe { vst1_f32(p, vcvt_f32_f64(v)) }
    }
}

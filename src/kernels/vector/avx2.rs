//! AVX2 (with BMI2 and FMA): eight `u32`, four `u64` or four `f64` lanes in a
//! 256-bit register.

use std::arch::x86_64::*;

use super::i64_to_f64_bits::{HI_LO_BIAS, HI_MAGIC, LO_MAGIC};
use super::{Units, Vector};

/// The `len < 8` bytes at `p` as the low bytes of a little-endian `u64`,
/// the others 0: two loads of 4 (or 2) bytes, the second ending at the
/// last byte, ORed (the bytes they share are equal). For the partial loads
/// of byte planes (eight lanes): a copy to a zeroed buffer on the stack
/// cost two calls and a load that waited for the copy's narrower stores to
/// retire, 24% of AVX2's `gaps_to_indices` samples on a Zen 3 core for a
/// step or two a cell.
///
/// # Safety
/// `p` is readable for `len` bytes.
#[inline(always)]
pub(super) unsafe fn read_below_8(p: *const u8, len: usize) -> u64 {
    debug_assert!(len < 8);
    // SAFETY: every load lies within the `len` bytes at `p`: the first of
    // 4 (or 2) bytes where `len` is at least that, the second ending at
    // byte `len - 1`.
    unsafe {
        if len >= 4 {
            let first = u64::from(u32::from_le(p.cast::<u32>().read_unaligned()));
            let last = u64::from(u32::from_le(p.add(len - 4).cast::<u32>().read_unaligned()));
            first | last << (8 * (len - 4))
        } else if len >= 2 {
            let first = u64::from(u16::from_le(p.cast::<u16>().read_unaligned()));
            let last = u64::from(u16::from_le(p.add(len - 2).cast::<u16>().read_unaligned()));
            first | last << (8 * (len - 2))
        } else if len == 1 {
            u64::from(p.read())
        } else {
            0
        }
    }
}

/// For each mask of kept lanes, the kept lanes' numbers in increasing
/// order, a byte each from the lowest; the bytes past them 0. Looked up, not
/// computed with BMI2's bit deposit and extract, which Zen 2 and older AMD
/// cores run in microcode (hundreds of cycles for masks with many bits
/// set); on a Zen 3 core, where both are fast, the table was as fast or
/// 1-4% faster (`deltacells bench DIR --loop dense --threads 1`, three
/// alternated pairs).
const KEPT_LANES: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut keep = 0;
    while keep < 256 {
        let (mut packed, mut n, mut lane) = (0u64, 0, 0);
        while lane < 8 {
            if keep >> lane & 1 != 0 {
                packed |= (lane as u64) << (8 * n);
                n += 1;
            }
            lane += 1;
        }
        table[keep] = packed;
        keep += 1;
    }
    table
};

/// Token proving the CPU runs AVX2, BMI2 and FMA.
#[derive(Clone, Copy)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// # Safety
    /// The CPU must support AVX2, BMI2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Avx2 {
        Avx2(())
    }
}

// Every `unsafe` block below that calls intrinsics on registers only is sound
// because `self` is an `Avx2` token, which exists only on AVX2 CPUs; blocks
// that touch memory add the pointer argument.
impl Vector for Avx2 {
    const LANES: usize = 8;
    const LANES_64: usize = 4;
    const PLANE_BYTES: usize = 32;
    const ALIGN: usize = 32;
    const STREAMS: bool = true;
    type U32 = __m256i;
    type U64 = __m256i;
    type F64 = __m256d;

    #[inline(always)]
    fn splat(self, x: u32) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_set1_epi32(x as i32) }
    }

    #[inline(always)]
    fn add(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_add_epi32(a, b) }
    }

    #[inline(always)]
    fn sub(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_sub_epi32(a, b) }
    }

    #[inline(always)]
    fn or(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_or_si256(a, b) }
    }

    #[inline(always)]
    fn and(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_and_si256(a, b) }
    }

    #[inline(always)]
    fn andnot(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_andnot_si256(a, b) }
    }

    #[inline(always)]
    fn min(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_min_epu32(a, b) }
    }

    #[inline(always)]
    fn shr_each(self, v: __m256i, counts: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_srlv_epi32(v, counts) }
    }

    #[inline(always)]
    fn max(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_max_epu32(a, b) }
    }

    #[inline(always)]
    fn prefix_sum(self, v: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe {
            // Within each 128-bit half (byte shifts do not cross halves)...
            let v = _mm256_add_epi32(v, _mm256_slli_si256::<4>(v));
            let v = _mm256_add_epi32(v, _mm256_slli_si256::<8>(v));
            // ...then the low half's total into every lane of the high half:
            // each half's total across it, the low half's moved up, zeros
            // below. (A permute of lanes 3 and 0 blended with zeros compiled
            // to an insert into whatever register was free, in the counting
            // passes the running total, and the sums then waited on the
            // total: starts ran at 2.3 cycles a count on a Zen 3 core.)
            let totals = _mm256_shuffle_epi32::<0xFF>(v);
            _mm256_add_epi32(v, _mm256_permute2x128_si256::<0x08>(totals, totals))
        }
    }

    #[inline(always)]
    fn broadcast_last(self, v: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(7)) }
    }

    #[inline(always)]
    fn shift_in_zero(self, v: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe {
            let up = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6));
            _mm256_blend_epi32::<0x01>(up, _mm256_setzero_si256())
        }
    }

    #[inline(always)]
    fn to_f32_bits(self, v: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_castps_si256(_mm256_cvtepi32_ps(v)) }
    }

    #[inline(always)]
    fn lanes_below(self, len: usize) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe {
            _mm256_cmpgt_epi32(
                _mm256_set1_epi32(len as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            )
        }
    }

    #[inline(always)]
    fn any_nonzero(self, v: __m256i) -> bool {
        // SAFETY: AVX2 token.
        unsafe { _mm256_testz_si256(v, v) == 0 }
    }

    #[inline(always)]
    fn sign_bits(self, v: __m256i) -> u32 {
        // SAFETY: AVX2 token.
        unsafe { _mm256_movemask_ps(_mm256_castsi256_ps(v)) as u32 }
    }

    #[inline(always)]
    unsafe fn gather_u32(self, table: *const u32, index: __m256i) -> __m256i {
        // SAFETY: AVX2 token; the caller makes every lane's index readable
        // at `table`.
        unsafe { _mm256_i32gather_epi32::<4>(table.cast(), index) }
    }

    #[inline(always)]
    unsafe fn permute_window(self, window: *const u32, index: __m256i) -> __m256i {
        // SAFETY: AVX2 token; the caller makes 8 values readable at
        // `window` (the permute reads only each index's low 3 bits).
        unsafe { _mm256_permutevar8x32_epi32(_mm256_loadu_si256(window.cast()), index) }
    }

    #[inline(always)]
    unsafe fn lookup_64(self, table: &[u32; 64], index: __m256i) -> __m256i {
        // Most counts are below 16: a register of them reads the table's
        // first 16 values from two registers, by two lane permutes (index
        // bits 0-2) and bit 3 picking between them, with no memory access
        // per lane. A gather, microcoded on some cores (a load per lane),
        // takes the registers holding a larger count.
        // SAFETY: AVX2 token; the table holds 64 values, the first 16 in
        // two registers; the caller keeps every index below 64.
        unsafe {
            let t = table.as_ptr();
            let large = _mm256_cmpgt_epi32(index, _mm256_set1_epi32(15));
            if _mm256_testz_si256(large, large) == 0 {
                return self.gather_u32(t, index);
            }
            let low = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(t.cast()), index);
            let high = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(t.add(8).cast()), index);
            let upper = _mm256_slli_epi32::<28>(index);
            _mm256_castps_si256(_mm256_blendv_ps(
                _mm256_castsi256_ps(low),
                _mm256_castsi256_ps(high),
                _mm256_castsi256_ps(upper),
            ))
        }
    }

    #[inline(always)]
    unsafe fn compress_store_u32(self, p: *mut u32, v: __m256i, keep: u32) {
        // The kept lanes' numbers, in order, looked up ([`KEPT_LANES`]). A
        // lane permute by them moves the kept lanes down; the lanes past
        // them repeat lane 0.
        // SAFETY: AVX2 token; the caller makes 8 values writable at `p`.
        unsafe {
            let lanes = KEPT_LANES[(keep & 0xFF) as usize];
            let index = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(lanes as i64));
            _mm256_storeu_si256(p.cast(), _mm256_permutevar8x32_epi32(v, index));
        }
    }

    #[inline(always)]
    unsafe fn load_planes(self, lo: *const u8, hi: *const u8) -> __m256i {
        // SAFETY: AVX2 token; the caller makes 8 bytes readable at each pointer.
        unsafe {
            let lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(lo.cast()));
            let hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(hi.cast()));
            _mm256_or_si256(lo, _mm256_slli_epi32::<8>(hi))
        }
    }

    #[inline(always)]
    unsafe fn load_planes_partial(self, lo: *const u8, hi: *const u8, len: usize) -> __m256i {
        debug_assert!(len < 8);
        // SAFETY: AVX2 token; the caller makes `len` bytes readable at each
        // pointer, all that `read_below_8` reads.
        unsafe {
            let lo = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(read_below_8(lo, len) as i64));
            let hi = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(read_below_8(hi, len) as i64));
            _mm256_or_si256(lo, _mm256_slli_epi32::<8>(hi))
        }
    }

    #[inline(always)]
    unsafe fn load_u32(self, p: *const u32) -> __m256i {
        // SAFETY: AVX2 token; the caller makes 8 values readable at `p`.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }

    #[inline(always)]
    unsafe fn store_u32(self, p: *mut u32, v: __m256i) {
        // SAFETY: AVX2 token; the caller makes 8 values writable at `p`.
        unsafe { _mm256_storeu_si256(p.cast(), v) }
    }

    /// Stores of 4, 2 and 1 lanes, as `len` has those bits: no call and no
    /// buffer (see [`read_below_8`]).
    #[inline(always)]
    unsafe fn store_u32_partial(self, p: *mut u32, v: __m256i, len: usize) {
        debug_assert!(len < 8);
        // SAFETY: AVX2 token; the caller makes `len` values writable at `p`,
        // and the stores write `len & 4`, `len & 2` and `len & 1` of them,
        // one after the other from `p`.
        unsafe {
            let (mut p, mut rest) = (p, _mm256_castsi256_si128(v));
            if len & 4 != 0 {
                _mm_storeu_si128(p.cast(), rest);
                rest = _mm256_extracti128_si256::<1>(v);
                p = p.add(4);
            }
            if len & 2 != 0 {
                _mm_storel_epi64(p.cast(), rest);
                rest = _mm_srli_si128::<8>(rest);
                p = p.add(2);
            }
            if len & 1 != 0 {
                p.write_unaligned(_mm_cvtsi128_si32(rest) as u32);
            }
        }
    }

    #[inline(always)]
    unsafe fn stream_u32(self, p: *mut u32, v: __m256i) {
        // SAFETY: AVX2 token; the caller makes 8 values writable at `p`,
        // aligned to 32 bytes.
        unsafe { _mm256_stream_si256(p.cast(), v) }
    }

    #[inline(always)]
    fn fence_streams(self) {
        // SAFETY: SSE is part of every x86_64 CPU.
        unsafe { _mm_sfence() }
    }

    #[inline(always)]
    unsafe fn store_u16(self, p: *mut u16, v: __m256i) {
        // SAFETY: AVX2 token; the caller makes 8 values writable at `p`.
        unsafe {
            // Lanes are below 65536, so the saturating pack keeps them; it
            // works per half, so gather the two halves' results after it.
            let packed = _mm256_packus_epi32(v, v);
            let ordered = _mm256_permute4x64_epi64::<0b00_00_10_00>(packed);
            _mm_storeu_si128(p.cast(), _mm256_castsi256_si128(ordered));
        }
    }

    #[inline(always)]
    unsafe fn interleave(self, lo: *const u8, hi: *const u8, out: *mut u8) {
        // SAFETY: AVX2 token; the caller makes 32 bytes readable at `lo` and
        // `hi` and 64 writable at `out`.
        unsafe {
            let (l, h) = (_mm256_loadu_si256(lo.cast()), _mm256_loadu_si256(hi.cast()));
            // Unpacking works per 128-bit half: elements 0-7 | 16-23 and 8-15 | 24-31.
            let (a, b) = (_mm256_unpacklo_epi8(l, h), _mm256_unpackhi_epi8(l, h));
            _mm256_storeu_si256(out.cast(), _mm256_permute2x128_si256::<0x20>(a, b));
            _mm256_storeu_si256(out.add(32).cast(), _mm256_permute2x128_si256::<0x31>(a, b));
        }
    }

    #[inline(always)]
    unsafe fn deinterleave(self, src: *const u8, lo: *mut u8, hi: *mut u8) {
        // SAFETY: AVX2 token; the caller makes 64 bytes readable at `src` and
        // 32 writable at `lo` and `hi`.
        unsafe {
            // Per 128-bit half: the 8 low bytes, then the 8 high bytes.
            let split = _mm256_setr_epi8(
                0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, //
                0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
            );
            let a = _mm256_shuffle_epi8(_mm256_loadu_si256(src.cast()), split);
            let b = _mm256_shuffle_epi8(_mm256_loadu_si256(src.add(32).cast()), split);
            // 64-bit pieces lo0 hi0 lo1 hi1 -> lo0 lo1 hi0 hi1.
            let a = _mm256_permute4x64_epi64::<0b11_01_10_00>(a);
            let b = _mm256_permute4x64_epi64::<0b11_01_10_00>(b);
            _mm256_storeu_si256(lo.cast(), _mm256_permute2x128_si256::<0x20>(a, b));
            _mm256_storeu_si256(hi.cast(), _mm256_permute2x128_si256::<0x31>(a, b));
        }
    }

    #[inline(always)]
    fn splat_u64(self, x: u64) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_set1_epi64x(x as i64) }
    }

    #[inline(always)]
    fn add_u64(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_add_epi64(a, b) }
    }

    #[inline(always)]
    fn sub_u64(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_sub_epi64(a, b) }
    }

    #[inline(always)]
    fn xor_u64(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_xor_si256(a, b) }
    }

    #[inline(always)]
    fn and_u64(self, a: __m256i, b: __m256i) -> __m256i {
        self.and(a, b)
    }

    #[inline(always)]
    fn or_u64(self, a: __m256i, b: __m256i) -> __m256i {
        self.or(a, b)
    }

    #[inline(always)]
    fn shl_each_u64(self, v: __m256i, counts: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_sllv_epi64(v, counts) }
    }

    #[inline(always)]
    fn shr_each_u64(self, v: __m256i, counts: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_srlv_epi64(v, counts) }
    }

    #[inline(always)]
    fn shr_u64(self, v: __m256i, n: u32) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_srl_epi64(v, _mm_cvtsi32_si128(n as i32)) }
    }

    #[inline(always)]
    fn prefix_sum_u64(self, v: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe {
            // [a, a+b | c, c+d], then the low half's total into the high half.
            let v = _mm256_add_epi64(v, _mm256_slli_si256::<8>(v));
            let low_total = _mm256_shuffle_epi32::<0xEE>(v);
            _mm256_add_epi64(v, _mm256_permute2x128_si256::<0x08>(low_total, low_total))
        }
    }

    #[inline(always)]
    fn broadcast_last_u64(self, v: __m256i) -> __m256i {
        // SAFETY: AVX2 token.
        unsafe { _mm256_permute4x64_epi64::<0xFF>(v) }
    }

    #[inline(always)]
    fn first_u64(self, v: __m256i) -> u64 {
        // SAFETY: AVX2 token.
        unsafe { _mm_cvtsi128_si64(_mm256_castsi256_si128(v)) as u64 }
    }

    #[inline(always)]
    fn sign_bits_u64(self, v: __m256i) -> u32 {
        // SAFETY: AVX2 token.
        unsafe { _mm256_movemask_pd(_mm256_castsi256_pd(v)) as u32 }
    }

    #[inline(always)]
    fn i64_to_f64(self, x: __m256i) -> __m256d {
        // SAFETY: AVX2 token. See `i64_to_f64_bits` for the numerics.
        unsafe {
            let lo = _mm256_blend_epi32::<0b1010_1010>(x, _mm256_set1_epi64x(LO_MAGIC as i64));
            let hi = _mm256_xor_si256(
                _mm256_srli_epi64::<32>(x),
                _mm256_set1_epi64x(HI_MAGIC as i64),
            );
            let hi = _mm256_sub_pd(
                _mm256_castsi256_pd(hi),
                _mm256_set1_pd(f64::from_bits(HI_LO_BIAS)),
            );
            _mm256_add_pd(hi, _mm256_castsi256_pd(lo))
        }
    }

    #[inline(always)]
    unsafe fn load_u64(self, p: *const u64) -> __m256i {
        // SAFETY: AVX2 token; the caller makes 4 values readable at `p`.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }

    #[inline(always)]
    unsafe fn store_u64(self, p: *mut u64, v: __m256i) {
        // SAFETY: AVX2 token; the caller makes 4 values writable at `p`.
        unsafe { _mm256_storeu_si256(p.cast(), v) }
    }

    #[inline(always)]
    unsafe fn store_low_u32(self, p: *mut u32, v: __m256i) {
        // SAFETY: AVX2 token; the caller makes 4 values writable at `p`.
        unsafe {
            let low = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
            _mm_storeu_si128(p.cast(), _mm256_castsi256_si128(low))
        }
    }

    #[inline(always)]
    unsafe fn gather_units(self, base: *const u8, units: &Units, first: usize) -> __m256i {
        // SAFETY: AVX2 token; the caller makes units `first` and `first + 1`
        // readable, and their shuffles are in `units` (`first + 1 < 4`).
        unsafe {
            let lo = _mm_loadu_si128(base.add(units.offsets[first]).cast());
            let hi = _mm_loadu_si128(base.add(units.offsets[first + 1]).cast());
            let shuffle = _mm256_loadu_si256(units.shuffle[16 * first..][..32].as_ptr().cast());
            _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), shuffle)
        }
    }

    #[inline(always)]
    fn splat_f64(self, x: f64) -> __m256d {
        // SAFETY: AVX2 token.
        unsafe { _mm256_set1_pd(x) }
    }

    #[inline(always)]
    fn add_f64(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: AVX2 token.
        unsafe { _mm256_add_pd(a, b) }
    }

    #[inline(always)]
    fn mul_f64(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: AVX2 token.
        unsafe { _mm256_mul_pd(a, b) }
    }

    #[inline(always)]
    fn div_f64(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: AVX2 token.
        unsafe { _mm256_div_pd(a, b) }
    }

    #[inline(always)]
    fn mul_add_f64(self, a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        // SAFETY: AVX2 token (which includes FMA).
        unsafe { _mm256_fmadd_pd(a, b, c) }
    }

    #[inline(always)]
    fn neg_mul_add_f64(self, a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        // SAFETY: AVX2 token (which includes FMA).
        unsafe { _mm256_fnmadd_pd(a, b, c) }
    }

    #[inline(always)]
    unsafe fn load_f64(self, p: *const f64) -> __m256d {
        // SAFETY: AVX2 token; the caller makes 4 values readable at `p`.
        unsafe { _mm256_loadu_pd(p) }
    }

    #[inline(always)]
    unsafe fn load_i32_as_f64(self, p: *const u32) -> __m256d {
        // SAFETY: AVX2 token; the caller makes 4 values readable at `p`.
        unsafe { _mm256_cvtepi32_pd(_mm_loadu_si128(p.cast())) }
    }

    #[inline(always)]
    unsafe fn store_f64(self, p: *mut f64, v: __m256d) {
        // SAFETY: AVX2 token; the caller makes 4 values writable at `p`.
        unsafe { _mm256_storeu_pd(p, v) }
    }

    #[inline(always)]
    unsafe fn store_f32(self, p: *mut f32, v: __m256d) {
        // SAFETY: AVX2 token; the caller makes 4 values writable at `p`.
        unsafe { _mm_storeu_ps(p, _mm256_cvtpd_ps(v)) }
    }
}

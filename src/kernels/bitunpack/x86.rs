//! x86-64 instruction sets for the block kernels: AVX2 (4 u64 lanes) and
//! AVX-512 (8 u64 lanes). Each method is one or a few intrinsics; the
//! algorithms are in [`super::generic`].

use std::arch::x86_64::*;

use super::generic::{Isa, Plan};

/// AVX2 (with FMA): 256-bit registers.
#[derive(Clone, Copy)]
pub(super) struct Avx2;

/// AVX-512 F/BW/VL/DQ: 512-bit registers.
#[derive(Clone, Copy)]
pub(super) struct Avx512;

/// AVX2 has no i64 -> f64 conversion. Split `x = hi * 2^32 + lo` (hi signed,
/// lo unsigned) and build both halves exactly from bit patterns: `lo` as the
/// mantissa of `2^52 + lo`, `hi + 2^31` as the mantissa of
/// `2^84 + (hi + 2^31) * 2^32`. Subtracting `2^84 + 2^63 + 2^52` from the
/// latter is exact (the result `hi * 2^32 - 2^52` is representable), and the
/// final addition is the only rounding, so the result is `x` correctly rounded.
#[inline(always)]
unsafe fn i64_to_f64_avx2(x: __m256i) -> __m256d {
    // SAFETY: register-only AVX2 operations; the caller guarantees AVX2.
    unsafe {
        let lo = _mm256_blend_epi32::<0b1010_1010>(x, _mm256_set1_epi64x(0x4330_0000_0000_0000));
        let hi = _mm256_xor_si256(
            _mm256_srli_epi64::<32>(x),
            _mm256_set1_epi64x(0x4530_0000_8000_0000),
        );
        let hi = _mm256_sub_pd(
            _mm256_castsi256_pd(hi),
            _mm256_set1_pd(f64::from_bits(0x4530_0000_8010_0000)),
        );
        _mm256_add_pd(hi, _mm256_castsi256_pd(lo))
    }
}

/// The low 32 bits of each u64 lane, packed into 128 bits.
#[inline(always)]
unsafe fn low_dwords_avx2(v: __m256i) -> __m128i {
    // SAFETY: register-only AVX2 operations; the caller guarantees AVX2.
    unsafe {
        _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
            v,
            _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6),
        ))
    }
}

impl Isa for Avx2 {
    type U64 = __m256i;
    type U32 = __m256i;
    type F64 = __m256d;
    const LANES: usize = 4;

    #[inline(always)]
    unsafe fn words(base: *const u8, plan: &Plan, h: usize) -> __m256i {
        // SAFETY: the trait contract: `h + 4 <= 8`, so pairs `h/2` and
        // `h/2 + 1` exist, and their units lie within `span` bytes of `base`.
        unsafe {
            let q = h / 2;
            let off = plan.unit_off.as_ptr().add(q);
            let lo = _mm_loadu_si128(base.add(*off) as *const __m128i);
            let hi = _mm_loadu_si128(base.add(*off.add(1)) as *const __m128i);
            let mask = _mm256_loadu_si256(plan.masks.as_ptr().add(16 * q) as *const __m256i);
            _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), mask)
        }
    }
    #[inline(always)]
    unsafe fn shl_each(v: __m256i, counts: *const u64) -> __m256i {
        // SAFETY: the trait contract: 4 counts are readable.
        unsafe { _mm256_sllv_epi64(v, _mm256_loadu_si256(counts as *const __m256i)) }
    }
    #[inline(always)]
    unsafe fn shr_each(v: __m256i, counts: *const u64) -> __m256i {
        // SAFETY: the trait contract: 4 counts are readable.
        unsafe { _mm256_srlv_epi64(v, _mm256_loadu_si256(counts as *const __m256i)) }
    }
    #[inline(always)]
    unsafe fn shr_all(v: __m256i, n: u32) -> __m256i {
        // SAFETY: register-only AVX2 operations.
        unsafe { _mm256_srl_epi64(v, _mm_cvtsi32_si128(n as i32)) }
    }
    #[inline(always)]
    unsafe fn or(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: register-only AVX2 operation.
        unsafe { _mm256_or_si256(a, b) }
    }
    #[inline(always)]
    unsafe fn store_low_u32(v: __m256i, dst: *mut u32) {
        // SAFETY: the trait contract: 4 u32 are writable.
        unsafe { _mm_storeu_si128(dst as *mut __m128i, low_dwords_avx2(v)) }
    }

    #[inline(always)]
    unsafe fn splat_u32(x: u32) -> __m256i {
        // SAFETY: register-only AVX operation.
        unsafe { _mm256_set1_epi32(x as i32) }
    }
    #[inline(always)]
    unsafe fn load_u32(src: *const u32) -> __m256i {
        // SAFETY: the trait contract: 8 u32 are readable.
        unsafe { _mm256_loadu_si256(src as *const __m256i) }
    }
    #[inline(always)]
    unsafe fn store_u32(v: __m256i, dst: *mut u32) {
        // SAFETY: the trait contract: 8 u32 are writable.
        unsafe { _mm256_storeu_si256(dst as *mut __m256i, v) }
    }
    #[inline(always)]
    unsafe fn add_u32(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: register-only AVX2 operation.
        unsafe { _mm256_add_epi32(a, b) }
    }
    #[inline(always)]
    unsafe fn scan_u32(v: __m256i) -> __m256i {
        // SAFETY: register-only AVX2 operations.
        unsafe {
            // Scan each 128-bit half, then add the low half's total to the high half.
            let v = _mm256_add_epi32(v, _mm256_slli_si256::<4>(v));
            let v = _mm256_add_epi32(v, _mm256_slli_si256::<8>(v));
            let low_total = _mm256_shuffle_epi32::<0xFF>(v);
            _mm256_add_epi32(v, _mm256_permute2x128_si256::<0x08>(low_total, low_total))
        }
    }
    #[inline(always)]
    unsafe fn last_u32(v: __m256i) -> __m256i {
        // SAFETY: register-only AVX2 operations.
        unsafe { _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(7)) }
    }

    #[inline(always)]
    unsafe fn splat_u64(x: u64) -> __m256i {
        // SAFETY: register-only AVX operation.
        unsafe { _mm256_set1_epi64x(x as i64) }
    }
    #[inline(always)]
    unsafe fn load_u64(src: *const u64) -> __m256i {
        // SAFETY: the trait contract: 4 u64 are readable.
        unsafe { _mm256_loadu_si256(src as *const __m256i) }
    }
    #[inline(always)]
    unsafe fn store_u64(v: __m256i, dst: *mut u64) {
        // SAFETY: the trait contract: 4 u64 are writable.
        unsafe { _mm256_storeu_si256(dst as *mut __m256i, v) }
    }
    #[inline(always)]
    unsafe fn add_u64(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: register-only AVX2 operation.
        unsafe { _mm256_add_epi64(a, b) }
    }
    #[inline(always)]
    unsafe fn scan_u64(v: __m256i) -> __m256i {
        // SAFETY: register-only AVX2 operations.
        unsafe {
            let v = _mm256_add_epi64(v, _mm256_slli_si256::<8>(v));
            let low_total = _mm256_shuffle_epi32::<0xEE>(v);
            _mm256_add_epi64(v, _mm256_permute2x128_si256::<0x08>(low_total, low_total))
        }
    }
    #[inline(always)]
    unsafe fn last_u64(v: __m256i) -> __m256i {
        // SAFETY: register-only AVX2 operation.
        unsafe { _mm256_permute4x64_epi64::<0xFF>(v) }
    }

    #[inline(always)]
    unsafe fn load_i32_as_f64(src: *const u32) -> __m256d {
        // SAFETY: the trait contract: 4 u32 are readable.
        unsafe { _mm256_cvtepi32_pd(_mm_loadu_si128(src as *const __m128i)) }
    }
    #[inline(always)]
    unsafe fn load_i64_as_f64(src: *const u64) -> __m256d {
        // SAFETY: the trait contract: 4 u64 are readable.
        unsafe { i64_to_f64_avx2(_mm256_loadu_si256(src as *const __m256i)) }
    }
    #[inline(always)]
    unsafe fn splat_f64(x: f64) -> __m256d {
        // SAFETY: register-only AVX operation.
        unsafe { _mm256_set1_pd(x) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: register-only AVX operation.
        unsafe { _mm256_mul_pd(a, b) }
    }
    #[inline(always)]
    unsafe fn div(a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: register-only AVX operation.
        unsafe { _mm256_div_pd(a, b) }
    }
    #[inline(always)]
    unsafe fn mul_add(a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        // SAFETY: register-only FMA operation (the AVX2 backend requires FMA).
        unsafe { _mm256_fmadd_pd(a, b, c) }
    }
    #[inline(always)]
    unsafe fn neg_mul_add(a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        // SAFETY: register-only FMA operation (the AVX2 backend requires FMA).
        unsafe { _mm256_fnmadd_pd(a, b, c) }
    }
    #[inline(always)]
    unsafe fn store_f64(v: __m256d, dst: *mut f64) {
        // SAFETY: the trait contract: 4 f64 are writable.
        unsafe { _mm256_storeu_pd(dst, v) }
    }
    #[inline(always)]
    unsafe fn store_f32(v: __m256d, dst: *mut f32) {
        // SAFETY: the trait contract: 4 f32 are writable.
        unsafe { _mm_storeu_ps(dst, _mm256_cvtpd_ps(v)) }
    }
}

impl Isa for Avx512 {
    type U64 = __m512i;
    type U32 = __m512i;
    type F64 = __m512d;
    const LANES: usize = 8;

    #[inline(always)]
    unsafe fn words(base: *const u8, plan: &Plan, _h: usize) -> __m512i {
        // SAFETY: the trait contract: one register is the whole group
        // (`h == 0`) and every unit or dword read lies within `span` bytes
        // of `base`; the masked load does not even touch the dwords it skips.
        unsafe {
            if plan.dwords_fit {
                let live = ((1u32 << plan.dword_count) - 1) as u16;
                let v = _mm512_maskz_loadu_epi32(live, base as *const i32);
                let v = _mm512_permutexvar_epi32(
                    _mm512_loadu_si512(plan.dwords.as_ptr() as *const __m512i),
                    v,
                );
                _mm512_shuffle_epi8(
                    v,
                    _mm512_loadu_si512(plan.dword_masks.as_ptr() as *const __m512i),
                )
            } else {
                let off = plan.unit_off.as_ptr();
                let unit0 = _mm_loadu_si128(base.add(*off) as *const __m128i);
                let unit1 = _mm_loadu_si128(base.add(*off.add(1)) as *const __m128i);
                let unit2 = _mm_loadu_si128(base.add(*off.add(2)) as *const __m128i);
                let unit3 = _mm_loadu_si128(base.add(*off.add(3)) as *const __m128i);
                let low = _mm256_set_m128i(unit1, unit0);
                let high = _mm256_set_m128i(unit3, unit2);
                let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high);
                _mm512_shuffle_epi8(v, _mm512_loadu_si512(plan.masks.as_ptr() as *const __m512i))
            }
        }
    }
    #[inline(always)]
    unsafe fn shl_each(v: __m512i, counts: *const u64) -> __m512i {
        // SAFETY: the trait contract: 8 counts are readable.
        unsafe { _mm512_sllv_epi64(v, _mm512_loadu_si512(counts as *const __m512i)) }
    }
    #[inline(always)]
    unsafe fn shr_each(v: __m512i, counts: *const u64) -> __m512i {
        // SAFETY: the trait contract: 8 counts are readable.
        unsafe { _mm512_srlv_epi64(v, _mm512_loadu_si512(counts as *const __m512i)) }
    }
    #[inline(always)]
    unsafe fn shr_all(v: __m512i, n: u32) -> __m512i {
        // SAFETY: register-only AVX-512F operations.
        unsafe { _mm512_srl_epi64(v, _mm_cvtsi32_si128(n as i32)) }
    }
    #[inline(always)]
    unsafe fn or(a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_or_si512(a, b) }
    }
    #[inline(always)]
    unsafe fn store_low_u32(v: __m512i, dst: *mut u32) {
        // SAFETY: the trait contract: 8 u32 are writable.
        unsafe { _mm256_storeu_si256(dst as *mut __m256i, _mm512_cvtepi64_epi32(v)) }
    }

    #[inline(always)]
    unsafe fn splat_u32(x: u32) -> __m512i {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_set1_epi32(x as i32) }
    }
    #[inline(always)]
    unsafe fn load_u32(src: *const u32) -> __m512i {
        // SAFETY: the trait contract: 16 u32 are readable.
        unsafe { _mm512_loadu_si512(src as *const __m512i) }
    }
    #[inline(always)]
    unsafe fn store_u32(v: __m512i, dst: *mut u32) {
        // SAFETY: the trait contract: 16 u32 are writable.
        unsafe { _mm512_storeu_si512(dst as *mut __m512i, v) }
    }
    #[inline(always)]
    unsafe fn add_u32(a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_add_epi32(a, b) }
    }
    #[inline(always)]
    unsafe fn scan_u32(v: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F operations. `alignr(v, 0, 16 - k)`
        // moves every lane up by `k`, shifting in zeros.
        unsafe {
            let z = _mm512_setzero_si512();
            let v = _mm512_add_epi32(v, _mm512_alignr_epi32::<15>(v, z));
            let v = _mm512_add_epi32(v, _mm512_alignr_epi32::<14>(v, z));
            let v = _mm512_add_epi32(v, _mm512_alignr_epi32::<12>(v, z));
            _mm512_add_epi32(v, _mm512_alignr_epi32::<8>(v, z))
        }
    }
    #[inline(always)]
    unsafe fn last_u32(v: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F operations.
        unsafe { _mm512_permutexvar_epi32(_mm512_set1_epi32(15), v) }
    }

    #[inline(always)]
    unsafe fn splat_u64(x: u64) -> __m512i {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_set1_epi64(x as i64) }
    }
    #[inline(always)]
    unsafe fn load_u64(src: *const u64) -> __m512i {
        // SAFETY: the trait contract: 8 u64 are readable.
        unsafe { _mm512_loadu_si512(src as *const __m512i) }
    }
    #[inline(always)]
    unsafe fn store_u64(v: __m512i, dst: *mut u64) {
        // SAFETY: the trait contract: 8 u64 are writable.
        unsafe { _mm512_storeu_si512(dst as *mut __m512i, v) }
    }
    #[inline(always)]
    unsafe fn add_u64(a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_add_epi64(a, b) }
    }
    #[inline(always)]
    unsafe fn scan_u64(v: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F operations (see `scan_u32`).
        unsafe {
            let z = _mm512_setzero_si512();
            let v = _mm512_add_epi64(v, _mm512_alignr_epi64::<7>(v, z));
            let v = _mm512_add_epi64(v, _mm512_alignr_epi64::<6>(v, z));
            _mm512_add_epi64(v, _mm512_alignr_epi64::<4>(v, z))
        }
    }
    #[inline(always)]
    unsafe fn last_u64(v: __m512i) -> __m512i {
        // SAFETY: register-only AVX-512F operations.
        unsafe { _mm512_permutexvar_epi64(_mm512_set1_epi64(7), v) }
    }

    #[inline(always)]
    unsafe fn load_i32_as_f64(src: *const u32) -> __m512d {
        // SAFETY: the trait contract: 8 u32 are readable.
        unsafe { _mm512_cvtepi32_pd(_mm256_loadu_si256(src as *const __m256i)) }
    }
    #[inline(always)]
    unsafe fn load_i64_as_f64(src: *const u64) -> __m512d {
        // SAFETY: the trait contract: 8 u64 are readable; AVX-512DQ converts
        // with the current rounding mode (nearest-even).
        unsafe { _mm512_cvtepi64_pd(_mm512_loadu_si512(src as *const __m512i)) }
    }
    #[inline(always)]
    unsafe fn splat_f64(x: f64) -> __m512d {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_set1_pd(x) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_mul_pd(a, b) }
    }
    #[inline(always)]
    unsafe fn div(a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_div_pd(a, b) }
    }
    #[inline(always)]
    unsafe fn mul_add(a: __m512d, b: __m512d, c: __m512d) -> __m512d {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_fmadd_pd(a, b, c) }
    }
    #[inline(always)]
    unsafe fn neg_mul_add(a: __m512d, b: __m512d, c: __m512d) -> __m512d {
        // SAFETY: register-only AVX-512F operation.
        unsafe { _mm512_fnmadd_pd(a, b, c) }
    }
    #[inline(always)]
    unsafe fn store_f64(v: __m512d, dst: *mut f64) {
        // SAFETY: the trait contract: 8 f64 are writable.
        unsafe { _mm512_storeu_pd(dst, v) }
    }
    #[inline(always)]
    unsafe fn store_f32(v: __m512d, dst: *mut f32) {
        // SAFETY: the trait contract: 8 f32 are writable.
        unsafe { _mm256_storeu_ps(dst, _mm512_cvtpd_ps(v)) }
    }
}

/// The AVX2 instantiations.
pub(super) mod avx2 {
    super::super::generic::wrappers!(super::Avx2, "avx2,bmi2,fma");
}

/// The AVX-512 instantiations.
pub(super) mod avx512 {
    super::super::generic::wrappers!(
        super::Avx512,
        "avx512f,avx512bw,avx512vl,avx512dq,avx2,bmi2,fma"
    );
}

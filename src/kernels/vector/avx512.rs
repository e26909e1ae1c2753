//! AVX-512 (F/BW/VL/DQ/CD): sixteen `u32`, eight `u64` or eight `f64` lanes in a
//! 512-bit register, with masked loads and stores for ragged ends. With VBMI,
//! two-source byte permutes do the byte-plane moves: one per 64 bytes of
//! interleave instead of an unpack and a fix-up, and one per 16 values widened
//! from the planes instead of two zero-extensions, a shift and an or.

use std::arch::x86_64::*;

use super::{Units, Vector};

/// Token proving the CPU runs AVX-512 F/BW/VL/DQ/CD, and VBMI if `VBMI`.
#[derive(Clone, Copy)]
pub(crate) struct Avx512<const VBMI: bool>(());

impl<const VBMI: bool> Avx512<VBMI> {
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VL/DQ/CD, and VBMI if `VBMI`.
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Avx512<VBMI> {
        Avx512(())
    }
}

/// The mask of lanes below `len` (`len <= 16`).
#[inline(always)]
fn mask16(len: usize) -> u16 {
    ((1u32 << len) - 1) as u16
}

/// `vpermt2b` indices taking, for output byte `k`, byte `k / 2` of the low
/// plane (even `k`) or of the high plane (odd `k`), from element `first` on.
const fn interleave_index(first: usize) -> [u8; 64] {
    let mut t = [0u8; 64];
    let mut k = 0;
    while k < 64 {
        t[k] = (first + k / 2 + if k % 2 == 1 { 64 } else { 0 }) as u8;
        k += 1;
    }
    t
}

/// `vpermt2b` indices taking byte `2k + odd` of 128 bytes, for output byte `k`.
const fn deinterleave_index(odd: usize) -> [u8; 64] {
    let mut t = [0u8; 64];
    let mut k = 0;
    while k < 64 {
        t[k] = (2 * k + odd) as u8;
        k += 1;
    }
    t
}

/// `vpermt2b` indices taking byte `i` of the low and of the high plane into
/// bytes 0 and 1 of dword `i`, and byte 16 of the zero-extended low plane (a
/// zero) into bytes 2 and 3.
const fn widen_index() -> [u8; 64] {
    let mut t = [16u8; 64];
    let mut i = 0;
    while i < 16 {
        t[4 * i] = i as u8;
        t[4 * i + 1] = 64 + i as u8;
        i += 1;
    }
    t
}

static WIDEN: [u8; 64] = widen_index();
static INTERLEAVE: [[u8; 64]; 2] = [interleave_index(0), interleave_index(32)];
static DEINTERLEAVE: [[u8; 64]; 2] = [deinterleave_index(0), deinterleave_index(1)];

impl<const VBMI: bool> Avx512<VBMI> {
    /// Sixteen low and sixteen high bytes as the `u32` they make.
    #[inline(always)]
    fn widen(self, lo: __m128i, hi: __m128i) -> __m512i {
        // SAFETY: AVX-512 token (with VBMI where `VBMI`); the index table is
        // 64 bytes.
        unsafe {
            if VBMI {
                // One two-source byte permute places both bytes of every
                // value, and fills the rest from the zero extension.
                let index = _mm512_loadu_si512(WIDEN.as_ptr().cast());
                let (lo, hi) = (_mm512_zextsi128_si512(lo), _mm512_zextsi128_si512(hi));
                _mm512_permutex2var_epi8(lo, index, hi)
            } else {
                let (lo, hi) = (_mm512_cvtepu8_epi32(lo), _mm512_cvtepu8_epi32(hi));
                _mm512_or_si512(lo, _mm512_slli_epi32::<8>(hi))
            }
        }
    }
}

// Every `unsafe` block below that calls intrinsics on registers only is sound
// because `self` is an `Avx512` token, which exists only on CPUs with the
// features it names; blocks that touch memory add the pointer argument.
impl<const VBMI: bool> Vector for Avx512<VBMI> {
    const LANES: usize = 16;
    const LANES_64: usize = 8;
    const PLANE_BYTES: usize = 64;
    const ALIGN: usize = 64;
    const STREAMS: bool = true;
    const CONFLICTS: bool = true;
    type U32 = __m512i;
    type U64 = __m512i;
    type F64 = __m512d;

    #[inline(always)]
    fn splat(self, x: u32) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_set1_epi32(x as i32) }
    }

    #[inline(always)]
    fn add(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_add_epi32(a, b) }
    }

    #[inline(always)]
    fn sub(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_sub_epi32(a, b) }
    }

    #[inline(always)]
    fn or(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_or_si512(a, b) }
    }

    #[inline(always)]
    fn and(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_and_si512(a, b) }
    }

    #[inline(always)]
    fn andnot(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_andnot_si512(a, b) }
    }

    #[inline(always)]
    fn min(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_min_epu32(a, b) }
    }

    #[inline(always)]
    fn shr_each(self, v: __m512i, counts: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_srlv_epi32(v, counts) }
    }

    #[inline(always)]
    fn max(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_max_epu32(a, b) }
    }

    #[inline(always)]
    fn prefix_sum(self, v: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe {
            // `valignd` with zero shifts the lanes up by 16 - IMM.
            let z = _mm512_setzero_si512();
            let v = _mm512_add_epi32(v, _mm512_alignr_epi32::<15>(v, z));
            let v = _mm512_add_epi32(v, _mm512_alignr_epi32::<14>(v, z));
            let v = _mm512_add_epi32(v, _mm512_alignr_epi32::<12>(v, z));
            _mm512_add_epi32(v, _mm512_alignr_epi32::<8>(v, z))
        }
    }

    #[inline(always)]
    fn broadcast_last(self, v: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_permutexvar_epi32(_mm512_set1_epi32(15), v) }
    }

    #[inline(always)]
    fn shift_in_zero(self, v: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_alignr_epi32::<15>(v, _mm512_setzero_si512()) }
    }

    #[inline(always)]
    fn to_f32_bits(self, v: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_castps_si512(_mm512_cvtepi32_ps(v)) }
    }

    #[inline(always)]
    fn lanes_below(self, len: usize) -> __m512i {
        // SAFETY: AVX-512 token (`vpmovm2d` is AVX-512 DQ).
        unsafe { _mm512_movm_epi32(mask16(len)) }
    }

    #[inline(always)]
    fn any_nonzero(self, v: __m512i) -> bool {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_test_epi32_mask(v, v) != 0 }
    }

    #[inline(always)]
    fn sign_bits(self, v: __m512i) -> u32 {
        // SAFETY: AVX-512 token (DQ).
        unsafe { u32::from(_mm512_movepi32_mask(v)) }
    }

    #[inline(always)]
    unsafe fn gather_u32(self, table: *const u32, index: __m512i) -> __m512i {
        // SAFETY: AVX-512 token; the caller makes every lane's index
        // readable at `table`.
        unsafe { _mm512_i32gather_epi32::<4>(index, table.cast()) }
    }

    #[inline(always)]
    unsafe fn scatter_u32(self, table: *mut u32, index: __m512i, v: __m512i) {
        // SAFETY: AVX-512 token; the caller makes every lane's index
        // writable at `table`. Lanes sharing an index are written in lane
        // order, as the trait's loop writes them.
        unsafe { _mm512_i32scatter_epi32::<4>(table.cast(), index, v) }
    }

    #[inline(always)]
    fn equal_before(self, v: __m512i) -> __m512i {
        // The conflict mask of each lane (a bit per lower lane holding the
        // same value, 15 bits at most) counted by nibbles: a byte shuffle
        // looks each nibble's bits up, then the two low bytes are added
        // (VPOPCNTD is a later extension than the cores of this table).
        // SAFETY: AVX-512 token (CD for the conflict, BW for the shuffle).
        unsafe {
            let conflicts = _mm512_conflict_epi32(v);
            let bits = _mm512_broadcast_i32x4(_mm_setr_epi8(
                0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
            ));
            let nibble = _mm512_set1_epi8(0x0f);
            let low = _mm512_shuffle_epi8(bits, _mm512_and_si512(conflicts, nibble));
            let high = _mm512_shuffle_epi8(
                bits,
                _mm512_and_si512(_mm512_srli_epi16::<4>(conflicts), nibble),
            );
            let per_byte = _mm512_add_epi8(low, high);
            let sum = _mm512_add_epi32(per_byte, _mm512_srli_epi32::<8>(per_byte));
            _mm512_and_si512(sum, _mm512_set1_epi32(0xff))
        }
    }

    #[inline(always)]
    unsafe fn permute_window(self, window: *const u32, index: __m512i) -> __m512i {
        // SAFETY: AVX-512 token; the caller makes 16 values readable at
        // `window` (the permute reads only each index's low 4 bits).
        unsafe { _mm512_permutexvar_epi32(index, _mm512_loadu_si512(window.cast())) }
    }

    #[inline(always)]
    unsafe fn lookup_64(self, table: &[u32; 64], index: __m512i) -> __m512i {
        // The table in four registers, two lane permutes of 32 values each
        // (index bits 0-4), and bit 5 picking between them: no memory
        // access per lane, where a gather makes one per lane (in profiles
        // of normalized batches, a third of the gather's time).
        // SAFETY: AVX-512 token; the table holds 64 values, four registers.
        unsafe {
            let t = table.as_ptr();
            let part = |i: usize| _mm512_loadu_si512(t.add(16 * i).cast());
            let low = _mm512_permutex2var_epi32(part(0), index, part(1));
            let high = _mm512_permutex2var_epi32(part(2), index, part(3));
            let upper = _mm512_test_epi32_mask(index, _mm512_set1_epi32(32));
            _mm512_mask_blend_epi32(upper, low, high)
        }
    }

    #[inline(always)]
    unsafe fn compress_store_u32(self, p: *mut u32, v: __m512i, keep: u32) {
        // SAFETY: AVX-512 token; the caller makes 16 values writable at `p`.
        // The compress goes to a register and the store is a plain one: a
        // compressing store to memory is microcoded on some cores.
        unsafe { _mm512_storeu_si512(p.cast(), _mm512_maskz_compress_epi32(keep as u16, v)) }
    }

    #[inline(always)]
    fn reduce_min(self, v: __m512i) -> u32 {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_reduce_min_epu32(v) }
    }

    #[inline(always)]
    fn reduce_max(self, v: __m512i) -> u32 {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_reduce_max_epu32(v) }
    }

    #[inline(always)]
    unsafe fn load_planes(self, lo: *const u8, hi: *const u8) -> __m512i {
        // SAFETY: AVX-512 token; the caller makes 16 bytes readable at each pointer.
        unsafe { self.widen(_mm_loadu_si128(lo.cast()), _mm_loadu_si128(hi.cast())) }
    }

    #[inline(always)]
    unsafe fn load_planes_partial(self, lo: *const u8, hi: *const u8, len: usize) -> __m512i {
        // SAFETY: AVX-512 token; masked-off bytes are not read, and the caller
        // makes the first `len` readable.
        unsafe {
            let m = mask16(len);
            self.widen(
                _mm_maskz_loadu_epi8(m, lo.cast()),
                _mm_maskz_loadu_epi8(m, hi.cast()),
            )
        }
    }

    #[inline(always)]
    unsafe fn load_u32(self, p: *const u32) -> __m512i {
        // SAFETY: AVX-512 token; the caller makes 16 values readable at `p`.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }

    #[inline(always)]
    unsafe fn load_u32_partial(self, p: *const u32, len: usize) -> __m512i {
        // SAFETY: AVX-512 token; masked loads read only the first `len` values.
        unsafe { _mm512_maskz_loadu_epi32(mask16(len), p.cast()) }
    }

    #[inline(always)]
    unsafe fn store_u32(self, p: *mut u32, v: __m512i) {
        // SAFETY: AVX-512 token; the caller makes 16 values writable at `p`.
        unsafe { _mm512_storeu_si512(p.cast(), v) }
    }

    #[inline(always)]
    unsafe fn stream_u32(self, p: *mut u32, v: __m512i) {
        // SAFETY: AVX-512 token; the caller makes 16 values writable at `p`,
        // aligned to 64 bytes.
        unsafe { _mm512_stream_si512(p.cast(), v) }
    }

    #[inline(always)]
    fn fence_streams(self) {
        // SAFETY: SSE is part of every x86_64 CPU.
        unsafe { _mm_sfence() }
    }

    #[inline(always)]
    unsafe fn store_u32_partial(self, p: *mut u32, v: __m512i, len: usize) {
        // SAFETY: AVX-512 token; masked stores write only the first `len` values.
        unsafe { _mm512_mask_storeu_epi32(p.cast(), mask16(len), v) }
    }

    #[inline(always)]
    unsafe fn store_u16(self, p: *mut u16, v: __m512i) {
        // SAFETY: AVX-512 token; the caller makes 16 values writable at `p`.
        unsafe { _mm256_storeu_si256(p.cast(), _mm512_cvtepi32_epi16(v)) }
    }

    #[inline(always)]
    unsafe fn store_u16_partial(self, p: *mut u16, v: __m512i, len: usize) {
        // SAFETY: AVX-512 token; masked stores write only the first `len` values.
        unsafe { _mm512_mask_cvtepi32_storeu_epi16(p.cast(), mask16(len), v) }
    }

    #[inline(always)]
    unsafe fn interleave(self, lo: *const u8, hi: *const u8, out: *mut u8) {
        // SAFETY: AVX-512 token (with VBMI where `VBMI`); the caller makes 64
        // bytes readable at `lo` and `hi` and 128 writable at `out`; the index
        // tables are 64 bytes each.
        unsafe {
            let (l, h) = (_mm512_loadu_si512(lo.cast()), _mm512_loadu_si512(hi.cast()));
            let (first, second) = if VBMI {
                let first = _mm512_loadu_si512(INTERLEAVE[0].as_ptr().cast());
                let second = _mm512_loadu_si512(INTERLEAVE[1].as_ptr().cast());
                (
                    _mm512_permutex2var_epi8(l, first, h),
                    _mm512_permutex2var_epi8(l, second, h),
                )
            } else {
                // Unpacking works per 128-bit lane: a holds elements 0-7,
                // 16-23, 32-39, 48-55 and b the 8 after each; pick 64-bit
                // pieces back into order.
                let (a, b) = (_mm512_unpacklo_epi8(l, h), _mm512_unpackhi_epi8(l, h));
                (
                    _mm512_permutex2var_epi64(a, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), b),
                    _mm512_permutex2var_epi64(a, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), b),
                )
            };
            _mm512_storeu_si512(out.cast(), first);
            _mm512_storeu_si512(out.add(64).cast(), second);
        }
    }

    #[inline(always)]
    unsafe fn deinterleave(self, src: *const u8, lo: *mut u8, hi: *mut u8) {
        // SAFETY: AVX-512 token (with VBMI where `VBMI`); the caller makes 128
        // bytes readable at `src` and 64 writable at `lo` and `hi`; the index
        // tables are 64 bytes each.
        unsafe {
            let (a, b) = (
                _mm512_loadu_si512(src.cast()),
                _mm512_loadu_si512(src.add(64).cast()),
            );
            if VBMI {
                let even = _mm512_loadu_si512(DEINTERLEAVE[0].as_ptr().cast());
                let odd = _mm512_loadu_si512(DEINTERLEAVE[1].as_ptr().cast());
                _mm512_storeu_si512(lo.cast(), _mm512_permutex2var_epi8(a, even, b));
                _mm512_storeu_si512(hi.cast(), _mm512_permutex2var_epi8(a, odd, b));
            } else {
                // Truncating word-to-byte moves: low bytes, then the high ones
                // shifted down.
                _mm256_storeu_si256(lo.cast(), _mm512_cvtepi16_epi8(a));
                _mm256_storeu_si256(lo.add(32).cast(), _mm512_cvtepi16_epi8(b));
                _mm256_storeu_si256(hi.cast(), _mm512_cvtepi16_epi8(_mm512_srli_epi16::<8>(a)));
                _mm256_storeu_si256(
                    hi.add(32).cast(),
                    _mm512_cvtepi16_epi8(_mm512_srli_epi16::<8>(b)),
                );
            }
        }
    }

    #[inline(always)]
    fn splat_u64(self, x: u64) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_set1_epi64(x as i64) }
    }

    #[inline(always)]
    fn add_u64(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_add_epi64(a, b) }
    }

    #[inline(always)]
    fn sub_u64(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_sub_epi64(a, b) }
    }

    #[inline(always)]
    fn xor_u64(self, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_xor_si512(a, b) }
    }

    #[inline(always)]
    fn and_u64(self, a: __m512i, b: __m512i) -> __m512i {
        self.and(a, b)
    }

    #[inline(always)]
    fn or_u64(self, a: __m512i, b: __m512i) -> __m512i {
        self.or(a, b)
    }

    #[inline(always)]
    fn shl_each_u64(self, v: __m512i, counts: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_sllv_epi64(v, counts) }
    }

    #[inline(always)]
    fn shr_each_u64(self, v: __m512i, counts: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_srlv_epi64(v, counts) }
    }

    #[inline(always)]
    fn shr_u64(self, v: __m512i, n: u32) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_srl_epi64(v, _mm_cvtsi32_si128(n as i32)) }
    }

    #[inline(always)]
    fn prefix_sum_u64(self, v: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe {
            // `valignq` with zero shifts the lanes up by 8 - IMM.
            let z = _mm512_setzero_si512();
            let v = _mm512_add_epi64(v, _mm512_alignr_epi64::<7>(v, z));
            let v = _mm512_add_epi64(v, _mm512_alignr_epi64::<6>(v, z));
            _mm512_add_epi64(v, _mm512_alignr_epi64::<4>(v, z))
        }
    }

    #[inline(always)]
    fn broadcast_last_u64(self, v: __m512i) -> __m512i {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_permutexvar_epi64(_mm512_set1_epi64(7), v) }
    }

    #[inline(always)]
    fn first_u64(self, v: __m512i) -> u64 {
        // SAFETY: AVX-512 token.
        unsafe { _mm_cvtsi128_si64(_mm512_castsi512_si128(v)) as u64 }
    }

    #[inline(always)]
    fn sign_bits_u64(self, v: __m512i) -> u32 {
        // SAFETY: AVX-512 token (`vpmovq2m` is AVX-512 DQ).
        unsafe { u32::from(_mm512_movepi64_mask(v)) }
    }

    #[inline(always)]
    fn i64_to_f64(self, v: __m512i) -> __m512d {
        // SAFETY: AVX-512 token (`vcvtqq2pd` is AVX-512 DQ; it rounds by the
        // current mode, nearest-even).
        unsafe { _mm512_cvtepi64_pd(v) }
    }

    #[inline(always)]
    unsafe fn load_u64(self, p: *const u64) -> __m512i {
        // SAFETY: AVX-512 token; the caller makes 8 values readable at `p`.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }

    #[inline(always)]
    unsafe fn store_u64(self, p: *mut u64, v: __m512i) {
        // SAFETY: AVX-512 token; the caller makes 8 values writable at `p`.
        unsafe { _mm512_storeu_si512(p.cast(), v) }
    }

    #[inline(always)]
    unsafe fn store_low_u32(self, p: *mut u32, v: __m512i) {
        // SAFETY: AVX-512 token; the caller makes 8 values writable at `p`.
        unsafe { _mm256_storeu_si256(p.cast(), _mm512_cvtepi64_epi32(v)) }
    }

    #[inline(always)]
    unsafe fn gather_units(self, base: *const u8, units: &Units, _first: usize) -> __m512i {
        // SAFETY: AVX-512 token; one register is all four units (`first` is
        // 0), and the caller makes every unit, or the dword window, readable.
        // The masked load does not touch the dwords it skips.
        unsafe {
            if units.window > 0 {
                let live = ((1u32 << units.window) - 1) as u16;
                let v = _mm512_maskz_loadu_epi32(live, base.cast());
                let v =
                    _mm512_permutexvar_epi32(_mm512_loadu_si512(units.dwords.as_ptr().cast()), v);
                _mm512_shuffle_epi8(v, _mm512_loadu_si512(units.dword_shuffle.as_ptr().cast()))
            } else {
                let [u0, u1, u2, u3] = units.offsets;
                let low = _mm256_set_m128i(
                    _mm_loadu_si128(base.add(u1).cast()),
                    _mm_loadu_si128(base.add(u0).cast()),
                );
                let high = _mm256_set_m128i(
                    _mm_loadu_si128(base.add(u3).cast()),
                    _mm_loadu_si128(base.add(u2).cast()),
                );
                let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high);
                _mm512_shuffle_epi8(v, _mm512_loadu_si512(units.shuffle.as_ptr().cast()))
            }
        }
    }

    #[inline(always)]
    fn splat_f64(self, x: f64) -> __m512d {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_set1_pd(x) }
    }

    #[inline(always)]
    fn add_f64(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_add_pd(a, b) }
    }

    #[inline(always)]
    fn mul_f64(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_mul_pd(a, b) }
    }

    #[inline(always)]
    fn div_f64(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_div_pd(a, b) }
    }

    #[inline(always)]
    fn mul_add_f64(self, a: __m512d, b: __m512d, c: __m512d) -> __m512d {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_fmadd_pd(a, b, c) }
    }

    #[inline(always)]
    fn neg_mul_add_f64(self, a: __m512d, b: __m512d, c: __m512d) -> __m512d {
        // SAFETY: AVX-512 token.
        unsafe { _mm512_fnmadd_pd(a, b, c) }
    }

    #[inline(always)]
    unsafe fn load_f64(self, p: *const f64) -> __m512d {
        // SAFETY: AVX-512 token; the caller makes 8 values readable at `p`.
        unsafe { _mm512_loadu_pd(p) }
    }

    #[inline(always)]
    unsafe fn load_i32_as_f64(self, p: *const u32) -> __m512d {
        // SAFETY: AVX-512 token; the caller makes 8 values readable at `p`.
        unsafe { _mm512_cvtepi32_pd(_mm256_loadu_si256(p.cast())) }
    }

    #[inline(always)]
    unsafe fn store_f64(self, p: *mut f64, v: __m512d) {
        // SAFETY: AVX-512 token; the caller makes 8 values writable at `p`.
        unsafe { _mm512_storeu_pd(p, v) }
    }

    #[inline(always)]
    unsafe fn store_f32(self, p: *mut f32, v: __m512d) {
        // SAFETY: AVX-512 token; the caller makes 8 values writable at `p`.
        unsafe { _mm256_storeu_ps(p, _mm512_cvtpd_ps(v)) }
    }
}

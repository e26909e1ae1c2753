//! The one vector vocabulary every kernel family is written in.
//!
//! [`Vector`] is a set of register operations on `u32` lanes (with the
//! byte-plane moves of the tile codec), `u64`/`i64` lanes and `f64` lanes. Each
//! instruction set implements it in its own file with intrinsics and nothing
//! else: `Avx2` (`avx2.rs`), `Avx512` with and without VBMI
//! (`avx512.rs`) and `Neon` (`neon.rs`). The algorithms live in the family
//! modules, written once over this trait.
//!
//! A value of an implementing type is a token: its constructor is `unsafe` and
//! its contract is that the CPU runs the ISA, so the register operations are
//! safe methods. Only the methods that take raw pointers are `unsafe`, and
//! their contract is only about the pointers.

use std::ptr;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;

#[cfg(target_arch = "x86_64")]
pub(crate) use avx2::Avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::Avx512;
#[cfg(target_arch = "aarch64")]
pub(crate) use neon::Neon;

/// The most `u32` lanes any [`Vector`] has; sizes the stack buffers of the
/// default partial loads and stores.
pub(crate) const MAX_LANES: usize = 16;

/// Where each pair of `u64` lanes of [`Vector::gather_units`] takes its bytes
/// from: a byte layout a family computes once, at compile time.
pub(crate) struct Units {
    /// Byte offset (from the base) of the 16-byte unit of each lane pair.
    pub(crate) offsets: [usize; 4],
    /// Byte `k` of lane pair `q` is byte `shuffle[16 q + k]` of its unit.
    pub(crate) shuffle: [u8; 64],
    /// The same lanes from one window of whole dwords at the base, for ISAs
    /// with a cross-lane dword permute: dword `4 q + i` of the register is
    /// dword `dwords[4 q + i]` of the window...
    pub(crate) dwords: [u32; 16],
    /// ...then shuffled within each 16 bytes by this.
    pub(crate) dword_shuffle: [u8; 64],
    /// Dwords of the window; 0 when the window form does not apply.
    pub(crate) window: usize,
}

/// One instruction set's registers, as the kernels use them.
///
/// Lane types: `U32` (`LANES` lanes), `U64` (`LANES_64` lanes, read as `i64`
/// where a method says so) and `F64` (`LANES_64` lanes). Arithmetic wraps.
pub(crate) trait Vector: Copy {
    /// `u32` lanes per [`Vector::U32`] (at most [`MAX_LANES`]).
    const LANES: usize;
    /// Lanes per [`Vector::U64`] and [`Vector::F64`] (2, 4 or 8).
    const LANES_64: usize;
    /// Elements per [`Vector::interleave`] / [`Vector::deinterleave`] step.
    const PLANE_BYTES: usize;
    /// The store alignment (bytes) worth arranging for: the register width.
    const ALIGN: usize;
    /// Whether [`Vector::stream_u32`] bypasses the cache (else it is a plain
    /// store, and kernels need not arrange their stores for it).
    const STREAMS: bool = false;
    /// Whether [`Vector::equal_before`] is a few instructions (else a loop
    /// over pairs of lanes, which kernels avoid).
    const CONFLICTS: bool = false;
    /// A vector of `u32` lanes.
    type U32: Copy;
    /// A vector of `u64` lanes.
    type U64: Copy;
    /// A vector of `f64` lanes.
    type F64: Copy;

    // ---- u32 lanes ----

    /// Every lane `x`.
    fn splat(self, x: u32) -> Self::U32;
    /// Lane-wise `a + b`.
    fn add(self, a: Self::U32, b: Self::U32) -> Self::U32;
    /// Lane-wise `a - b`.
    fn sub(self, a: Self::U32, b: Self::U32) -> Self::U32;
    /// Lane-wise `a | b`.
    fn or(self, a: Self::U32, b: Self::U32) -> Self::U32;
    /// Lane-wise `a & b`.
    fn and(self, a: Self::U32, b: Self::U32) -> Self::U32;
    /// Lane-wise `!a & b`.
    fn andnot(self, a: Self::U32, b: Self::U32) -> Self::U32;
    /// Lane-wise unsigned minimum.
    fn min(self, a: Self::U32, b: Self::U32) -> Self::U32;
    /// Lane-wise unsigned maximum.
    fn max(self, a: Self::U32, b: Self::U32) -> Self::U32;
    /// Lane `i` shifted right (logically) by lane `i` of `counts` (each
    /// below 32).
    fn shr_each(self, v: Self::U32, counts: Self::U32) -> Self::U32;
    /// Inclusive prefix sum across the lanes.
    fn prefix_sum(self, v: Self::U32) -> Self::U32;
    /// The last lane in every lane.
    fn broadcast_last(self, v: Self::U32) -> Self::U32;
    /// The lanes moved up by one, with 0 in lane 0.
    fn shift_in_zero(self, v: Self::U32) -> Self::U32;
    /// Each lane (an integer below `2^31`) as the bits of the `f32` nearest it.
    fn to_f32_bits(self, v: Self::U32) -> Self::U32;
    /// All ones in the lanes below `len` (`len <= LANES`), zero above.
    fn lanes_below(self, len: usize) -> Self::U32;
    /// Whether any lane is nonzero.
    fn any_nonzero(self, v: Self::U32) -> bool;

    /// Elements `0 .. LANES` of two byte planes, recombined into `u32` lanes.
    ///
    /// # Safety
    /// `lo` and `hi` are readable for `LANES` bytes.
    unsafe fn load_planes(self, lo: *const u8, hi: *const u8) -> Self::U32;
    /// `LANES` values from `p`.
    ///
    /// # Safety
    /// `p` is readable for `LANES` values.
    unsafe fn load_u32(self, p: *const u32) -> Self::U32;
    /// Stores `LANES` values at `p`.
    ///
    /// # Safety
    /// `p` is writable for `LANES` values.
    unsafe fn store_u32(self, p: *mut u32, v: Self::U32);
    /// Stores `LANES` values at `p` past the caches where the ISA can
    /// (non-temporal stores, see [`Vector::STREAMS`]), for output nobody
    /// reads before it would have left them; [`Vector::fence_streams`] must
    /// follow before the output is handed to another thread. By default a
    /// plain store.
    ///
    /// # Safety
    /// `p` is writable for `LANES` values and aligned to [`Vector::ALIGN`].
    #[inline(always)]
    unsafe fn stream_u32(self, p: *mut u32, v: Self::U32) {
        // SAFETY: the caller's promise is `store_u32`'s.
        unsafe { self.store_u32(p, v) }
    }
    /// Orders every [`Vector::stream_u32`] before later stores (they are
    /// weakly ordered), so that whoever next sees the output sees them.
    #[inline(always)]
    fn fence_streams(self) {}
    /// Stores the lanes, each below 65536, as `LANES` `u16` values at `p`.
    ///
    /// # Safety
    /// `p` is writable for `LANES` values.
    unsafe fn store_u16(self, p: *mut u16, v: Self::U32);
    /// Interleaves `PLANE_BYTES` low and high bytes into as many little-endian
    /// `u16` (`2 * PLANE_BYTES` bytes at `out`).
    ///
    /// # Safety
    /// `lo` and `hi` are readable for `PLANE_BYTES` bytes, `out` writable for
    /// twice that.
    unsafe fn interleave(self, lo: *const u8, hi: *const u8, out: *mut u8);
    /// Splits `PLANE_BYTES` little-endian `u16` at `src` into their low and
    /// high bytes.
    ///
    /// # Safety
    /// `src` is readable for `2 * PLANE_BYTES` bytes, `lo` and `hi` writable
    /// for `PLANE_BYTES` each.
    unsafe fn deinterleave(self, src: *const u8, lo: *mut u8, hi: *mut u8);

    // ---- u64 / i64 lanes ----

    /// Every lane `x`.
    fn splat_u64(self, x: u64) -> Self::U64;
    /// Lane-wise `a + b`.
    fn add_u64(self, a: Self::U64, b: Self::U64) -> Self::U64;
    /// Lane-wise `a - b`.
    fn sub_u64(self, a: Self::U64, b: Self::U64) -> Self::U64;
    /// Lane-wise `a ^ b`.
    fn xor_u64(self, a: Self::U64, b: Self::U64) -> Self::U64;
    /// Lane-wise `a & b`.
    fn and_u64(self, a: Self::U64, b: Self::U64) -> Self::U64;
    /// Lane-wise `a | b`.
    fn or_u64(self, a: Self::U64, b: Self::U64) -> Self::U64;
    /// Lane `i` shifted left by lane `i` of `counts` (each below 64).
    fn shl_each_u64(self, v: Self::U64, counts: Self::U64) -> Self::U64;
    /// Lane `i` shifted right (logically) by lane `i` of `counts` (each below
    /// 64).
    fn shr_each_u64(self, v: Self::U64, counts: Self::U64) -> Self::U64;
    /// Every lane shifted right (logically) by `n` (below 64).
    fn shr_u64(self, v: Self::U64, n: u32) -> Self::U64;
    /// Inclusive prefix sum across the lanes.
    fn prefix_sum_u64(self, v: Self::U64) -> Self::U64;
    /// The last lane in every lane.
    fn broadcast_last_u64(self, v: Self::U64) -> Self::U64;
    /// Lane 0.
    fn first_u64(self, v: Self::U64) -> u64;
    /// Bit `i` set iff lane `i`, read as `i64`, is negative.
    fn sign_bits_u64(self, v: Self::U64) -> u32;
    /// Each lane, read as `i64`, converted to the nearest `f64` (ties to even).
    fn i64_to_f64(self, v: Self::U64) -> Self::F64;

    /// `LANES_64` values from `p`.
    ///
    /// # Safety
    /// `p` is readable for `LANES_64` values.
    unsafe fn load_u64(self, p: *const u64) -> Self::U64;
    /// Stores `LANES_64` values at `p`.
    ///
    /// # Safety
    /// `p` is writable for `LANES_64` values.
    unsafe fn store_u64(self, p: *mut u64, v: Self::U64);
    /// Stores the low 32 bits of each lane as `LANES_64` `u32` at `p`.
    ///
    /// # Safety
    /// `p` is writable for `LANES_64` values.
    unsafe fn store_low_u32(self, p: *mut u32, v: Self::U64);
    /// Gathers bytes into `u64` lanes by `units`: lanes `2 p` and `2 p + 1`
    /// are the 16 bytes of unit `first + p` (at `base + units.offsets[first +
    /// p]`), each byte placed by the unit's shuffle. An ISA with a cross-lane
    /// dword permute may instead read the dword window (when `units.window >
    /// 0`; then `first` is 0 and `LANES_64` is 8): the same lanes result.
    ///
    /// # Safety
    /// Every unit read (`first .. first + LANES_64 / 2`) is readable for 16
    /// bytes at its offset, and, when `units.window > 0`, the window for
    /// `4 * units.window` bytes.
    unsafe fn gather_units(self, base: *const u8, units: &Units, first: usize) -> Self::U64;

    // ---- f64 lanes ----

    /// Every lane `x`.
    fn splat_f64(self, x: f64) -> Self::F64;
    /// Lane-wise `a + b`, rounded.
    fn add_f64(self, a: Self::F64, b: Self::F64) -> Self::F64;
    /// Lane-wise `a * b`, rounded.
    fn mul_f64(self, a: Self::F64, b: Self::F64) -> Self::F64;
    /// Lane-wise `a / b`, rounded.
    fn div_f64(self, a: Self::F64, b: Self::F64) -> Self::F64;
    /// Lane-wise `a * b + c` with one rounding.
    fn mul_add_f64(self, a: Self::F64, b: Self::F64, c: Self::F64) -> Self::F64;
    /// Lane-wise `c - a * b` with one rounding.
    fn neg_mul_add_f64(self, a: Self::F64, b: Self::F64, c: Self::F64) -> Self::F64;

    /// `LANES_64` values from `p`.
    ///
    /// # Safety
    /// `p` is readable for `LANES_64` values.
    unsafe fn load_f64(self, p: *const f64) -> Self::F64;
    /// `LANES_64` `u32` from `p`, read as `i32` and converted (exactly).
    ///
    /// # Safety
    /// `p` is readable for `LANES_64` values.
    unsafe fn load_i32_as_f64(self, p: *const u32) -> Self::F64;
    /// Stores `LANES_64` values at `p`.
    ///
    /// # Safety
    /// `p` is writable for `LANES_64` values.
    unsafe fn store_f64(self, p: *mut f64, v: Self::F64);
    /// Rounds each lane to `f32` (ties to even) and stores `LANES_64` values
    /// at `p`.
    ///
    /// # Safety
    /// `p` is writable for `LANES_64` values.
    unsafe fn store_f32(self, p: *mut f32, v: Self::F64);

    // ---- provided: partial loads and stores, reductions ----

    /// [`Vector::load_planes`] of the first `len < LANES` elements; the other
    /// lanes are 0.
    ///
    /// # Safety
    /// `lo` and `hi` are readable for `len` bytes.
    #[inline(always)]
    unsafe fn load_planes_partial(self, lo: *const u8, hi: *const u8, len: usize) -> Self::U32 {
        debug_assert!(len < Self::LANES && Self::LANES <= MAX_LANES);
        let (mut l, mut h) = ([0u8; MAX_LANES], [0u8; MAX_LANES]);
        // SAFETY: the caller makes `len` bytes readable at `lo` and `hi`;
        // `len < LANES <= MAX_LANES` fits the buffers, which the full load
        // then reads in bounds.
        unsafe {
            ptr::copy_nonoverlapping(lo, l.as_mut_ptr(), len);
            ptr::copy_nonoverlapping(hi, h.as_mut_ptr(), len);
            self.load_planes(l.as_ptr(), h.as_ptr())
        }
    }

    /// [`Vector::load_u32`] of the first `len < LANES` values; the other
    /// lanes are 0.
    ///
    /// # Safety
    /// `p` is readable for `len` values.
    #[inline(always)]
    unsafe fn load_u32_partial(self, p: *const u32, len: usize) -> Self::U32 {
        debug_assert!(len < Self::LANES && Self::LANES <= MAX_LANES);
        let mut buf = [0u32; MAX_LANES];
        // SAFETY: as in `load_planes_partial`.
        unsafe {
            ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), len);
            self.load_u32(buf.as_ptr())
        }
    }

    /// [`Vector::store_u32`] of the first `len < LANES` lanes.
    ///
    /// # Safety
    /// `p` is writable for `len` values.
    #[inline(always)]
    unsafe fn store_u32_partial(self, p: *mut u32, v: Self::U32, len: usize) {
        debug_assert!(len < Self::LANES && Self::LANES <= MAX_LANES);
        let mut buf = [0u32; MAX_LANES];
        // SAFETY: the full store fits the buffer (`LANES <= MAX_LANES`); the
        // caller makes `len` values writable at `p`.
        unsafe {
            self.store_u32(buf.as_mut_ptr(), v);
            ptr::copy_nonoverlapping(buf.as_ptr(), p, len);
        }
    }

    /// [`Vector::store_u16`] of the first `len < LANES` lanes.
    ///
    /// # Safety
    /// `p` is writable for `len` values.
    #[inline(always)]
    unsafe fn store_u16_partial(self, p: *mut u16, v: Self::U32, len: usize) {
        debug_assert!(len < Self::LANES && Self::LANES <= MAX_LANES);
        let mut buf = [0u16; MAX_LANES];
        // SAFETY: as in `store_u32_partial`.
        unsafe {
            self.store_u16(buf.as_mut_ptr(), v);
            ptr::copy_nonoverlapping(buf.as_ptr(), p, len);
        }
    }

    /// The sum of the lanes, exactly (as `usize`, so lanes of counts never
    /// wrap in the sum).
    #[inline(always)]
    fn sum_lanes(self, v: Self::U32) -> usize {
        self.lanes(v)
            .into_iter()
            .take(Self::LANES)
            .map(|x| x as usize)
            .sum()
    }

    /// The smallest lane.
    #[inline(always)]
    fn reduce_min(self, v: Self::U32) -> u32 {
        self.lanes(v)
            .into_iter()
            .take(Self::LANES)
            .min()
            .unwrap_or(u32::MAX)
    }

    /// The largest lane.
    #[inline(always)]
    fn reduce_max(self, v: Self::U32) -> u32 {
        self.lanes(v)
            .into_iter()
            .take(Self::LANES)
            .max()
            .unwrap_or(0)
    }

    /// Bit `i` set iff lane `i`, read as `i32`, is negative.
    #[inline(always)]
    fn sign_bits(self, v: Self::U32) -> u32 {
        self.lanes(v)
            .into_iter()
            .take(Self::LANES)
            .enumerate()
            .fold(0, |bits, (i, x)| bits | (x >> 31) << i)
    }

    /// Lane `i` is `table[index[i]]`.
    ///
    /// # Safety
    /// Every lane of `index` is below the number of values readable at
    /// `table`.
    #[inline(always)]
    unsafe fn gather_u32(self, table: *const u32, index: Self::U32) -> Self::U32 {
        let mut buf = [0u32; MAX_LANES];
        for (b, i) in buf.iter_mut().zip(self.lanes(index)).take(Self::LANES) {
            // SAFETY: the caller makes every lane's index readable at `table`.
            *b = unsafe { *table.add(i as usize) };
        }
        // SAFETY: the buffer holds `MAX_LANES >= LANES` values.
        unsafe { self.load_u32(buf.as_ptr()) }
    }

    /// Lane `i` is `window[index[i]]`, from a register's worth of values
    /// (`LANES`) at `window`: a cross-lane permute of one load where the
    /// ISA has one, else a gather. A gather costs about a load per lane
    /// however few cache lines its lanes touch; the permute costs one.
    ///
    /// # Safety
    /// `window` is readable for `LANES` values and every lane of `index` is
    /// below `LANES`.
    #[inline(always)]
    unsafe fn permute_window(self, window: *const u32, index: Self::U32) -> Self::U32 {
        // SAFETY: the caller keeps every index below `LANES`, within the
        // window.
        unsafe { self.gather_u32(window, index) }
    }

    /// Lane `i` is `table[index[i]]`, from a table of 64 values (a row's
    /// memo of values by count): a gather unless the ISA has a faster way.
    ///
    /// # Safety
    /// Every lane of `index` is below 64.
    #[inline(always)]
    unsafe fn lookup_64(self, table: &[u32; 64], index: Self::U32) -> Self::U32 {
        // SAFETY: the caller keeps every index below 64, within the table.
        unsafe { self.gather_u32(table.as_ptr(), index) }
    }

    /// Lane `i` is how many lanes below it hold the value it holds: where a
    /// register of keys scatters to a table, each lane's rank among the
    /// lanes that share its slot.
    #[inline(always)]
    fn equal_before(self, v: Self::U32) -> Self::U32 {
        let lanes = self.lanes(v);
        let mut before = [0u32; MAX_LANES];
        for i in 0..Self::LANES {
            before[i] = lanes[..i].iter().filter(|&&x| x == lanes[i]).count() as u32;
        }
        // SAFETY: the buffer holds `MAX_LANES >= LANES` values.
        unsafe { self.load_u32(before.as_ptr()) }
    }

    /// Stores lane `i` of `v` at `table[index[i]]`, lane after lane (where
    /// two lanes share an index, the later lane's value stays).
    ///
    /// # Safety
    /// Every lane of `index` is below the number of values writable at
    /// `table`.
    #[inline(always)]
    unsafe fn scatter_u32(self, table: *mut u32, index: Self::U32, v: Self::U32) {
        for (i, x) in self
            .lanes(index)
            .into_iter()
            .zip(self.lanes(v))
            .take(Self::LANES)
        {
            // SAFETY: the caller makes every lane's index writable at `table`.
            unsafe { *table.add(i as usize) = x };
        }
    }

    /// Stores the lanes whose bit is set in `keep`, in lane order, at `p`;
    /// the values past them, up to `LANES`, are unspecified.
    ///
    /// # Safety
    /// `p` is writable for `LANES` values.
    #[inline(always)]
    unsafe fn compress_store_u32(self, p: *mut u32, v: Self::U32, keep: u32) {
        let mut n = 0;
        for (i, x) in self.lanes(v).into_iter().take(Self::LANES).enumerate() {
            // SAFETY: `n <= i < LANES`, and the caller makes `LANES` values
            // writable at `p`.
            unsafe { *p.add(n) = x };
            n += (keep >> i & 1) as usize;
        }
    }

    /// The lanes, in the first `LANES` entries.
    #[inline(always)]
    fn lanes(self, v: Self::U32) -> [u32; MAX_LANES] {
        let mut buf = [0u32; MAX_LANES];
        // SAFETY: the buffer holds `MAX_LANES >= LANES` values.
        unsafe { self.store_u32(buf.as_mut_ptr(), v) };
        buf
    }
}

/// AVX2 has no `i64 -> f64` conversion; its implementation builds both 32-bit
/// halves of `x = hi * 2^32 + lo` (`hi` signed, `lo` unsigned) exactly from
/// bit patterns and rounds once. The constants, as `f64` bits:
#[cfg(target_arch = "x86_64")]
pub(crate) mod i64_to_f64_bits {
    /// `2^52`: `lo` in the low mantissa bits counts units of 1.
    pub(crate) const LO_MAGIC: u64 = 0x4330_0000_0000_0000;
    /// `2^84 + 2^63`: `hi + 2^31` (`hi` with its sign bit flipped) in the low
    /// mantissa bits counts units of `2^32`, offset by `2^63`.
    pub(crate) const HI_MAGIC: u64 = 0x4530_0000_8000_0000;
    /// `2^84 + 2^63 + 2^52`: subtracting it from the `HI_MAGIC` double is
    /// exact and leaves `hi * 2^32 - 2^52`; adding the `LO_MAGIC` double then
    /// rounds once, to `x`.
    pub(crate) const HI_LO_BIAS: u64 = 0x4530_0000_8010_0000;

    #[test]
    fn the_constants_are_the_doubles_they_name() {
        assert_eq!(f64::from_bits(LO_MAGIC), 2f64.powi(52));
        assert_eq!(f64::from_bits(HI_MAGIC), 2f64.powi(84) + 2f64.powi(63));
        assert_eq!(
            f64::from_bits(HI_LO_BIAS),
            2f64.powi(84) + 2f64.powi(63) + 2f64.powi(52)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Backend;

    /// Runs `$check` with `$v` each vector token the CPU runs.
    macro_rules! on_every_backend {
        ($v:ident => $check:expr) => {
            #[cfg(target_arch = "x86_64")]
            {
                if Backend::Avx2.is_available() {
                    // SAFETY: the CPU runs AVX2 (checked above).
                    let $v = unsafe { Avx2::new_unchecked() };
                    $check;
                }
                if Backend::Avx512.is_available() {
                    // SAFETY: the CPU runs AVX-512 F/BW/VL/DQ/CD (checked above).
                    let $v = unsafe { Avx512::<false>::new_unchecked() };
                    $check;
                }
            }
            #[cfg(target_arch = "aarch64")]
            if Backend::Neon.is_available() {
                // SAFETY: the CPU runs NEON (checked above).
                let $v = unsafe { Neon::new_unchecked() };
                $check;
            }
        };
    }

    /// `v.equal_before` over `keys`, lane by lane, against a count written
    /// here.
    fn check_ranks<V: Vector>(v: V, keys: &[u32; MAX_LANES]) {
        // SAFETY: the keys hold `MAX_LANES >= LANES` values.
        let ranked = v.equal_before(unsafe { v.load_u32(keys.as_ptr()) });
        let want: Vec<u32> = (0..V::LANES)
            .map(|i| keys[..i].iter().filter(|&&k| k == keys[i]).count() as u32)
            .collect();
        assert_eq!(v.lanes(ranked)[..V::LANES], want[..]);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn bytes_below_8_read_as_their_little_endian_u64() {
        let bytes = [0x81u8, 0x02, 0xf3, 0x04, 0x65, 0xa6, 0x07];
        for len in 0..8 {
            // A buffer of exactly `len` bytes: nothing past it is read.
            let exact = bytes[..len].to_vec();
            let mut want = [0u8; 8];
            want[..len].copy_from_slice(&exact);
            // SAFETY: `exact` holds `len` bytes.
            let got = unsafe { avx2::read_below_8(exact.as_ptr(), len) };
            assert_eq!(got, u64::from_le_bytes(want), "{len} bytes");
        }
    }

    /// `load_planes_partial` of every length below a register, against the
    /// planes' values written here.
    fn check_partial_planes<V: Vector>(v: V) {
        let lo: Vec<u8> = (0..MAX_LANES as u8).map(|i| 0x90 + i).collect();
        let hi: Vec<u8> = (0..MAX_LANES as u8).map(|i| 0x0f ^ i).collect();
        for len in 0..V::LANES {
            let (lo, hi) = (lo[..len].to_vec(), hi[..len].to_vec());
            // SAFETY: both planes hold `len` bytes.
            let got = unsafe { v.load_planes_partial(lo.as_ptr(), hi.as_ptr(), len) };
            let want: Vec<u32> = (0..V::LANES)
                .map(|i| {
                    if i < len {
                        u32::from(lo[i]) | u32::from(hi[i]) << 8
                    } else {
                        0
                    }
                })
                .collect();
            assert_eq!(v.lanes(got)[..V::LANES], want[..], "{len} lanes");
        }
    }

    /// `store_u32_partial` of every length below a register writes those
    /// lanes and nothing past them.
    fn check_partial_stores<V: Vector>(v: V) {
        let values: [u32; MAX_LANES] =
            std::array::from_fn(|i| 0x8000_0000 | ((i as u32 + 1) * 0x1_0001));
        // SAFETY: the values hold `MAX_LANES >= LANES` of them.
        let register = unsafe { v.load_u32(values.as_ptr()) };
        for len in 0..V::LANES {
            let mut out = vec![u32::MAX; len + 1];
            // SAFETY: `out` holds `len + 1` values.
            unsafe { v.store_u32_partial(out.as_mut_ptr(), register, len) };
            assert_eq!(out[..len], values[..len], "{len} lanes");
            assert_eq!(out[len], u32::MAX, "{len} lanes: the value after them");
        }
    }

    /// `compress_store_u32` of every mask of lanes stores the kept lanes
    /// first, in order.
    fn check_compress<V: Vector>(v: V) {
        let values: [u32; MAX_LANES] = std::array::from_fn(|i| 100 + i as u32);
        // SAFETY: the values hold `MAX_LANES >= LANES` of them.
        let register = unsafe { v.load_u32(values.as_ptr()) };
        for keep in 0..1u32 << V::LANES {
            let mut out = [0u32; MAX_LANES];
            // SAFETY: `out` holds `MAX_LANES >= LANES` values.
            unsafe { v.compress_store_u32(out.as_mut_ptr(), register, keep) };
            let want: Vec<u32> = (0..V::LANES)
                .filter(|&i| keep >> i & 1 != 0)
                .map(|i| values[i])
                .collect();
            assert_eq!(out[..want.len()], want[..], "mask {keep:#b}");
        }
    }

    /// `lookup_64` of registers of indices below each bound from 1 to 64
    /// (all within the table's first 16 values, then past them), against
    /// the table read lane by lane.
    fn check_lookup<V: Vector>(v: V) {
        let table: [u32; 64] = std::array::from_fn(|i| 0xA5A5_0000 ^ (i as u32 * 0x0101));
        for below in 1..=64u32 {
            for first in 0..below {
                let index: [u32; MAX_LANES] =
                    std::array::from_fn(|lane| (first + 7 * lane as u32) % below);
                // SAFETY: the index holds `MAX_LANES >= LANES` values, each
                // below 64.
                let got = unsafe { v.lookup_64(&table, v.load_u32(index.as_ptr())) };
                let want: Vec<u32> = index[..V::LANES]
                    .iter()
                    .map(|&i| table[i as usize])
                    .collect();
                assert_eq!(v.lanes(got)[..V::LANES], want[..], "indices {index:?}");
            }
        }
    }

    #[test]
    fn lookup_64_reads_every_slot_of_the_table() {
        on_every_backend!(v => check_lookup(v));
    }

    #[test]
    fn partial_loads_stores_and_compression_touch_their_lanes_alone() {
        on_every_backend!(v => {
            check_partial_planes(v);
            check_partial_stores(v);
            check_compress(v);
        });
    }

    #[test]
    fn equal_before_ranks_the_lanes_that_share_a_value() {
        // Runs, values apart and back, a value in the first and last lanes.
        let keys: [u32; MAX_LANES] = [5, 5, 1, 5, 2, 1, 9, 9, 9, 0, 5, 2, 7, 7, 1, 5];
        on_every_backend!(v => check_ranks(v, &keys));
    }
}

//! The block algorithms, written once over the [`Isa`] trait.
//!
//! Each instruction set (AVX2, AVX-512, NEON) implements [`Isa`]: a handful of
//! register operations, most of them one intrinsic. The bodies below are
//! `#[inline(always)]` and generic; the per-ISA modules instantiate them inside
//! thin `#[target_feature]` wrappers (the [`wrappers!`] macro), so each body is
//! compiled once per instruction set with that set enabled. Ragged ends go to
//! the scalar reference, which is also what the backends are tested against.
//!
//! # Unpacking MSB-first bit streams
//!
//! Eight values of `w` bits occupy exactly `w` bytes, so the stream is a
//! sequence of `w`-byte *groups* with the same shape: value `j` of a group
//! starts at byte `b_j = j*w / 8`, bit `s_j = j*w % 8` (counted from the most
//! significant bit). With `W(b)` the big-endian 64-bit word at byte `b`:
//!
//! ```text
//! value_j = (W(b_j) << s_j) >> (64 - w)                          if s_j + w <= 64
//! value_j = ((W(b_j) << s_j) | (W(b_j + 1) >> (8 - s_j))) >> (64 - w)   otherwise
//! ```
//!
//! (the second form pulls the ninth byte a wide value can straddle into the low
//! bits; both words agree on the bits they share, so OR is exact). A vector
//! register is filled with the words of consecutive values by loading one
//! 16-byte unit per *pair* of values (pair `p` starts at `b_{2p}`; both words
//! lie within the next 16 bytes because `b_{2p+1} - b_{2p} <= 8`) and reversing
//! bytes with an in-lane byte shuffle. AVX-512 can instead build all four
//! units of a group from one masked load with a cross-lane dword permute,
//! when each pair's bytes fit in dword-aligned 16 bytes (every width up to
//! 32, the FLOAT range, and more). The per-width shape (unit offsets, dword
//! indices, shuffle masks, shift counts) is computed at compile time into
//! [`PLANS`].

use super::{scalar, Divisor, DivisorKind, Word};

/// One SIMD instruction set, as the operations the block kernels need.
///
/// `LANES` is the number of 64-bit lanes in one register (2, 4 or 8); `U32`
/// registers have the same width and so twice as many lanes. All methods are
/// `unsafe` because they execute instructions the CPU must support (the caller
/// runs inside a `#[target_feature]` wrapper reached only after
/// [`crate::Backend::require`]) and because pointer arguments must be valid
/// for the bytes or lanes each method names.
pub(super) trait Isa: Copy {
    /// `LANES` lanes of u64.
    type U64: Copy;
    /// `2 * LANES` lanes of u32.
    type U32: Copy;
    /// `LANES` lanes of f64.
    type F64: Copy;
    /// 64-bit lanes per register; a multiple of 2 that divides 8.
    const LANES: usize;

    /// The big-endian 64-bit words of values `h .. h + LANES` of the group
    /// at `base`: lane `i` holds the 8 bytes at `base + b_{h+i}`, built from
    /// [`Plan`]'s units. Reads fewer than `plan.span` bytes from `base`; `h`
    /// is a multiple of `LANES` below 8.
    unsafe fn words(base: *const u8, plan: &Plan, h: usize) -> Self::U64;
    /// Lane `i` shifted left by `counts[i]` (each below 64; `LANES` counts read).
    unsafe fn shl_each(v: Self::U64, counts: *const u64) -> Self::U64;
    /// Lane `i` shifted right by `counts[i]` (each in 1..=8; `LANES` counts read).
    unsafe fn shr_each(v: Self::U64, counts: *const u64) -> Self::U64;
    /// Every lane shifted right by `n` (below 64).
    unsafe fn shr_all(v: Self::U64, n: u32) -> Self::U64;
    /// Bitwise OR.
    unsafe fn or(a: Self::U64, b: Self::U64) -> Self::U64;
    /// Stores the low 32 bits of each lane to `LANES` u32 at `dst`.
    unsafe fn store_low_u32(v: Self::U64, dst: *mut u32);

    /// Every u32 lane set to `x`.
    unsafe fn splat_u32(x: u32) -> Self::U32;
    /// Loads `2 * LANES` u32.
    unsafe fn load_u32(src: *const u32) -> Self::U32;
    /// Stores `2 * LANES` u32.
    unsafe fn store_u32(v: Self::U32, dst: *mut u32);
    /// Lane-wise wrapping addition.
    unsafe fn add_u32(a: Self::U32, b: Self::U32) -> Self::U32;
    /// Inclusive prefix sum across the lanes (wrapping).
    unsafe fn scan_u32(v: Self::U32) -> Self::U32;
    /// Every lane set to the last lane.
    unsafe fn last_u32(v: Self::U32) -> Self::U32;

    /// Every u64 lane set to `x`.
    unsafe fn splat_u64(x: u64) -> Self::U64;
    /// Loads `LANES` u64.
    unsafe fn load_u64(src: *const u64) -> Self::U64;
    /// Stores `LANES` u64.
    unsafe fn store_u64(v: Self::U64, dst: *mut u64);
    /// Lane-wise wrapping addition.
    unsafe fn add_u64(a: Self::U64, b: Self::U64) -> Self::U64;
    /// Inclusive prefix sum across the lanes (wrapping).
    unsafe fn scan_u64(v: Self::U64) -> Self::U64;
    /// Every lane set to the last lane.
    unsafe fn last_u64(v: Self::U64) -> Self::U64;
    /// Loads `LANES` u32, reads them as i32 and converts to f64 (exact).
    unsafe fn load_i32_as_f64(src: *const u32) -> Self::F64;
    /// Loads `LANES` u64, reads them as i64 and converts to f64, rounding to
    /// nearest-even as Java's `(double) long` does.
    unsafe fn load_i64_as_f64(src: *const u64) -> Self::F64;
    /// Every lane set to `x`.
    unsafe fn splat_f64(x: f64) -> Self::F64;
    /// `a * b`, rounded.
    unsafe fn mul(a: Self::F64, b: Self::F64) -> Self::F64;
    /// `a / b`, rounded.
    unsafe fn div(a: Self::F64, b: Self::F64) -> Self::F64;
    /// `a * b + c` with one rounding.
    unsafe fn mul_add(a: Self::F64, b: Self::F64, c: Self::F64) -> Self::F64;
    /// `c - a * b` with one rounding.
    unsafe fn neg_mul_add(a: Self::F64, b: Self::F64, c: Self::F64) -> Self::F64;
    /// Stores `LANES` f64.
    unsafe fn store_f64(v: Self::F64, dst: *mut f64);
    /// Rounds each lane to f32 (nearest-even) and stores `LANES` f32.
    unsafe fn store_f32(v: Self::F64, dst: *mut f32);
}

/// The per-word-type face of an [`Isa`]: lets one generic body serve FLOAT
/// pages (u32 integers, f32 values) and DOUBLE pages (u64, f64).
pub(super) trait Lane<I: Isa>: Word {
    /// A register of these words.
    type V: Copy;
    /// Words per register.
    const N: usize;
    unsafe fn splat(x: Self) -> Self::V;
    unsafe fn load(src: *const Self) -> Self::V;
    unsafe fn store(v: Self::V, dst: *mut Self);
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn scan(v: Self::V) -> Self::V;
    unsafe fn last(v: Self::V) -> Self::V;
    /// Stores `I::LANES` unpacked values (each fits this word).
    unsafe fn store_unpacked(v: I::U64, dst: *mut Self);
    /// Loads `I::LANES` words as signed integers converted to f64.
    unsafe fn load_as_f64(src: *const Self) -> I::F64;
    /// Stores `I::LANES` results as this word's float type.
    unsafe fn store_float(v: I::F64, dst: *mut Self::Float);
}

impl<I: Isa> Lane<I> for u32 {
    type V = I::U32;
    const N: usize = 2 * I::LANES;
    #[inline(always)]
    unsafe fn splat(x: u32) -> I::U32 {
        I::splat_u32(x)
    }
    #[inline(always)]
    unsafe fn load(src: *const u32) -> I::U32 {
        I::load_u32(src)
    }
    #[inline(always)]
    unsafe fn store(v: I::U32, dst: *mut u32) {
        I::store_u32(v, dst)
    }
    #[inline(always)]
    unsafe fn add(a: I::U32, b: I::U32) -> I::U32 {
        I::add_u32(a, b)
    }
    #[inline(always)]
    unsafe fn scan(v: I::U32) -> I::U32 {
        I::scan_u32(v)
    }
    #[inline(always)]
    unsafe fn last(v: I::U32) -> I::U32 {
        I::last_u32(v)
    }
    #[inline(always)]
    unsafe fn store_unpacked(v: I::U64, dst: *mut u32) {
        I::store_low_u32(v, dst)
    }
    #[inline(always)]
    unsafe fn load_as_f64(src: *const u32) -> I::F64 {
        I::load_i32_as_f64(src)
    }
    #[inline(always)]
    unsafe fn store_float(v: I::F64, dst: *mut f32) {
        I::store_f32(v, dst)
    }
}

impl<I: Isa> Lane<I> for u64 {
    type V = I::U64;
    const N: usize = I::LANES;
    #[inline(always)]
    unsafe fn splat(x: u64) -> I::U64 {
        I::splat_u64(x)
    }
    #[inline(always)]
    unsafe fn load(src: *const u64) -> I::U64 {
        I::load_u64(src)
    }
    #[inline(always)]
    unsafe fn store(v: I::U64, dst: *mut u64) {
        I::store_u64(v, dst)
    }
    #[inline(always)]
    unsafe fn add(a: I::U64, b: I::U64) -> I::U64 {
        I::add_u64(a, b)
    }
    #[inline(always)]
    unsafe fn scan(v: I::U64) -> I::U64 {
        I::scan_u64(v)
    }
    #[inline(always)]
    unsafe fn last(v: I::U64) -> I::U64 {
        I::last_u64(v)
    }
    #[inline(always)]
    unsafe fn store_unpacked(v: I::U64, dst: *mut u64) {
        I::store_u64(v, dst)
    }
    #[inline(always)]
    unsafe fn load_as_f64(src: *const u64) -> I::F64 {
        I::load_i64_as_f64(src)
    }
    #[inline(always)]
    unsafe fn store_float(v: I::F64, dst: *mut f64) {
        I::store_f64(v, dst)
    }
}

/// The shape of one `w`-byte group of eight `w`-bit values (see the module docs).
pub(super) struct Plan {
    /// Byte offset, from the group start, of the 16-byte unit of each pair.
    pub(super) unit_off: [usize; 4],
    /// In-lane byte shuffle per pair: lane 0 <- bytes 7..=0, lane 1 <- bytes
    /// `d+7..=d` where `d = b_{2p+1} - b_{2p}`.
    pub(super) masks: [u8; 64],
    /// The units as a whole-register permute, for instruction sets with a
    /// cross-lane dword permute (one load and two shuffles instead of a load
    /// and an insert per unit): dword `4q + i` of the register is dword
    /// `b_{2q} / 4 + i` of the group.
    pub(super) dwords: [u32; 16],
    /// The in-lane byte shuffle for `dwords`' units (offsets shifted by
    /// `b_{2q} % 4`).
    pub(super) dword_masks: [u8; 64],
    /// Whether `dwords` works for this width: every pair's bytes, plus the
    /// ninth byte when `two_words`, lie within its dword-aligned 16 bytes.
    pub(super) dwords_fit: bool,
    /// Dwords a `dwords` register reads from the group start.
    pub(super) dword_count: usize,
    /// `s_j`, the bit offset of value `j` within its first byte.
    shl: [u64; 8],
    /// `8 - s_j`, the right shift of the second word.
    shr: [u64; 8],
    /// Whether some value straddles nine bytes (`s_j + w > 64`).
    two_words: bool,
    /// Bytes read from the group start, at most (either unit layout).
    span: usize,
}

impl Plan {
    const EMPTY: Plan = Plan {
        unit_off: [0; 4],
        masks: [0; 64],
        dwords: [0; 16],
        dword_masks: [0; 64],
        dwords_fit: true,
        dword_count: 0,
        shl: [0; 8],
        shr: [0; 8],
        two_words: false,
        span: 0,
    };
}

const fn plan(w: usize) -> Plan {
    let mut p = Plan::EMPTY;
    let mut j = 0;
    while j < 8 {
        let s = (j * w) % 8;
        p.shl[j] = s as u64;
        p.shr[j] = 8 - s as u64;
        if s + w > 64 {
            p.two_words = true;
        }
        j += 1;
    }
    let mut q = 0;
    while q < 4 {
        let b0 = 2 * q * w / 8;
        let d = (2 * q + 1) * w / 8 - b0;
        let skew = b0 % 4;
        p.unit_off[q] = b0;
        let mut k = 0;
        while k < 8 {
            p.masks[16 * q + k] = (7 - k) as u8;
            p.masks[16 * q + 8 + k] = (d + 7 - k) as u8;
            p.dword_masks[16 * q + k] = (skew + 7 - k) as u8;
            p.dword_masks[16 * q + 8 + k] = (skew + d + 7 - k) as u8;
            k += 1;
        }
        let mut i = 0;
        while i < 4 {
            p.dwords[4 * q + i] = (b0 / 4 + i) as u32;
            i += 1;
        }
        if skew + d + 8 + p.two_words as usize > 16 {
            p.dwords_fit = false;
        }
        q += 1;
    }
    p.dword_count = p.unit_off[3] / 4 + 4;
    // Units read `[b_{2q}, b_{2q} + 16)`, dwords `[0, 4 * dword_count)`, which
    // ends no later; the second word reads one byte further.
    p.span = p.unit_off[3] + 16 + p.two_words as usize;
    p
}

/// [`Plan`] for every width 0..=64 (width 0 is never used: it unpacks to zeros).
pub(super) static PLANS: [Plan; 65] = {
    let mut plans = [Plan::EMPTY; 65];
    let mut w = 1;
    while w <= 64 {
        plans[w] = plan(w);
        w += 1;
    }
    plans
};

/// How many of the first `wanted` groups of `packed` can be read through
/// whole 16-byte units without leaving it. Group `g` reads
/// `[g*w, g*w + span)`; the division only runs near the end of a page.
#[inline(always)]
fn safe_groups(packed: &[u8], plan: &Plan, w: usize, wanted: usize) -> usize {
    if wanted == 0 || (wanted - 1) * w + plan.span <= packed.len() {
        return wanted;
    }
    match packed.len().checked_sub(plan.span) {
        Some(room) => (room / w + 1).min(wanted),
        None => 0,
    }
}

/// The two-diffs `8g + h .. 8g + h + LANES` of a `w`-bit stream (`w >= 1`),
/// one per u64 lane. `MODE` is 1 when every value fits one 64-bit word, 2
/// when some straddle nine bytes (`plan.two_words`).
///
/// # Safety
/// Group `g` must be readable: `g * w + plan.span <= packed.len()`; `h` is a
/// multiple of `LANES` below 8.
#[inline(always)]
unsafe fn group_words<I: Isa, const MODE: u8>(
    src: *const u8,
    plan: &Plan,
    w: usize,
    g: usize,
    h: usize,
) -> I::U64 {
    // SAFETY: the caller's contract (`words` reads below `span - 1` bytes
    // from `base`, and below `span` from `base + 1`); the shift counts
    // `h .. h + LANES <= 8` stay within the plan's arrays.
    unsafe {
        let base = src.add(g * w);
        let mut v = I::shl_each(I::words(base, plan, h), plan.shl.as_ptr().add(h));
        if MODE == 2 {
            let next = I::words(base.add(1), plan, h);
            v = I::or(v, I::shr_each(next, plan.shr.as_ptr().add(h)));
        }
        I::shr_all(v, (64 - w) as u32)
    }
}

/// Unpacks `out.len()` values of `width` bits (`width <= W::BITS`) from
/// `packed`, which must hold at least `ceil(out.len() * width / 8)` bytes.
///
/// Whole groups whose 16-byte unit loads stay inside `packed` go through the
/// registers; the rest (at most the last few groups before the end of
/// `packed`) through the scalar reference. Callers pass the packed area with
/// whatever bytes follow it in the page, so only a page's last block has a
/// scalar tail.
#[inline(always)]
pub(super) unsafe fn unpack<I: Isa, W: Lane<I>>(packed: &[u8], width: u32, out: &mut [W]) {
    let w = width as usize;
    if w == 0 {
        out.fill(W::default());
        return;
    }
    let plan = &PLANS[w];
    let groups = safe_groups(packed, plan, w, out.len() / 8);
    // SAFETY: group `g < groups` is readable (`safe_groups`) and its values
    // `[8g, 8g + 8)` lie inside `out` (`groups <= out.len() / 8`).
    unsafe {
        if plan.two_words {
            unpack_groups::<I, W, 2>(packed.as_ptr(), plan, w, out.as_mut_ptr(), groups);
        } else {
            unpack_groups::<I, W, 1>(packed.as_ptr(), plan, w, out.as_mut_ptr(), groups);
        }
    }
    scalar::unpack(&packed[groups * w..], width, &mut out[groups * 8..]);
}

#[inline(always)]
unsafe fn unpack_groups<I: Isa, W: Lane<I>, const MODE: u8>(
    src: *const u8,
    plan: &Plan,
    w: usize,
    dst: *mut W,
    groups: usize,
) {
    for g in 0..groups {
        let mut h = 0;
        while h < 8 {
            // SAFETY: see `unpack`.
            unsafe {
                W::store_unpacked(
                    group_words::<I, MODE>(src, plan, w, g, h),
                    dst.add(g * 8 + h),
                )
            };
            h += I::LANES;
        }
    }
}

/// The running sum `buf[k] = prev + min_delta + buf[k]` (wrapping), returning
/// the last value. One register at a time: add `min_delta`, scan the lanes,
/// add the carry (the sum so far, broadcast). The carry advances by the
/// scan's last lane, computed off the carry's dependency chain, so that chain
/// is one addition per register rather than an addition plus a permute.
#[inline(always)]
pub(super) unsafe fn delta<I: Isa, W: Lane<I>>(prev: W, min_delta: W, buf: &mut [W]) -> W {
    let n = buf.len();
    let ptr = buf.as_mut_ptr();
    let mut i = 0;
    // SAFETY: every load/store covers `[i, i + N)` with `i + N <= n`.
    unsafe {
        let md = W::splat(min_delta);
        let mut carry = W::splat(prev);
        while i + W::N <= n {
            let x = W::scan(W::add(W::load(ptr.add(i)), md));
            W::store(W::add(x, carry), ptr.add(i));
            carry = W::add(carry, W::last(x));
            i += W::N;
        }
    }
    let prev = if i == 0 { prev } else { buf[i - 1] };
    scalar::delta(prev, min_delta, &mut buf[i..])
}

/// `a / p`, correctly rounded, given `y = 1/p` correctly rounded.
///
/// Division is the slow instruction here (about 2 cycles per lane on current
/// x86), so a [`DivisorKind::Reciprocal`] divisor uses the reciprocal `y` with
/// two FMA correction steps: `q = a*y`, then twice `r = a - q*p` (exact),
/// `q = q + r*y`. After the first step `q` is within one ulp of `a/p`; from
/// there Markstein's theorem (`y` = `1/p` correctly rounded, `q` within one
/// ulp) makes the second step's result the correctly rounded quotient, i.e.
/// exactly what the division instruction returns. [`Divisor::new`] picks this
/// path only for `1 < p <= 1e280`, where nothing overflows or goes subnormal.
#[inline(always)]
unsafe fn divide<I: Isa>(a: I::F64, p: I::F64, y: I::F64, kind: DivisorKind) -> I::F64 {
    // SAFETY: register-only operations of the running instruction set.
    unsafe {
        match kind {
            DivisorKind::One => a,
            DivisorKind::Reciprocal => {
                let q = I::mul(a, y);
                let q = I::mul_add(I::neg_mul_add(q, p, a), y, q);
                I::mul_add(I::neg_mul_add(q, p, a), y, q)
            }
            DivisorKind::Divide => I::div(a, p),
        }
    }
}

/// `out[k] = ints[k] / divisor` (Java's conversion; `out.len() == ints.len()`).
#[inline(always)]
pub(super) unsafe fn scale<I: Isa, W: Lane<I>>(
    ints: &[W],
    divisor: &Divisor,
    out: &mut [W::Float],
) {
    let n = ints.len().min(out.len());
    let src = ints.as_ptr();
    let dst = out.as_mut_ptr();
    if n < I::LANES {
        scalar::scale(&ints[..n], divisor, &mut out[..n]);
        return;
    }
    // SAFETY: every load/store covers `[i, i + LANES)` with `i + LANES <= n`.
    unsafe {
        let p = I::splat_f64(divisor.value());
        let y = I::splat_f64(divisor.reciprocal());
        let mut i = 0;
        while i + I::LANES <= n {
            scale_at::<I, W>(src, dst, i, p, y, divisor.kind());
            i += I::LANES;
        }
        // A ragged end is the last full register again, overlapping: the
        // values are recomputed identically (a 129-value block would
        // otherwise pay a scalar division for its last value).
        if i < n {
            scale_at::<I, W>(src, dst, n - I::LANES, p, y, divisor.kind());
        }
    }
}

/// Scales the register of words at `src + i` into `dst + i`.
///
/// # Safety
/// `LANES` words at `src + i` are readable and `LANES` floats at `dst + i`
/// writable.
#[inline(always)]
unsafe fn scale_at<I: Isa, W: Lane<I>>(
    src: *const W,
    dst: *mut W::Float,
    i: usize,
    p: I::F64,
    y: I::F64,
    kind: DivisorKind,
) {
    // SAFETY: the caller's contract.
    unsafe {
        W::store_float(
            divide::<I>(W::load_as_f64(src.add(i)), p, y, kind),
            dst.add(i),
        )
    }
}

/// The kernel table of one backend: function pointers to its instantiations.
///
/// Safety contract of every entry: the CPU supports the backend, `width <=`
/// the word's bits, `packed` holds `ceil(out.len() * width / 8)` bytes, and
/// `ints.len() == out.len()`. [`super::BlockKernels`] checks all of it.
pub(super) struct Table {
    pub unpack32: unsafe fn(&[u8], u32, &mut [u32]),
    pub unpack64: unsafe fn(&[u8], u32, &mut [u64]),
    pub delta32: unsafe fn(u32, u32, &mut [u32]) -> u32,
    pub delta64: unsafe fn(u64, u64, &mut [u64]) -> u64,
    pub scale32: unsafe fn(&[u32], &Divisor, &mut [f32]),
    pub scale64: unsafe fn(&[u64], &Divisor, &mut [f64]),
}

/// Instantiates the generic bodies for one [`Isa`] inside `#[target_feature]`
/// wrappers and collects them in a `TABLE`.
macro_rules! wrappers {
    ($isa:ty, $features:literal) => {
        use $crate::kernels::bitunpack::generic::{self, Table};
        use $crate::kernels::bitunpack::Divisor;

        #[target_feature(enable = $features)]
        unsafe fn unpack32(packed: &[u8], width: u32, out: &mut [u32]) {
            // SAFETY: the table's contract (see `Table`).
            unsafe { generic::unpack::<$isa, u32>(packed, width, out) }
        }
        #[target_feature(enable = $features)]
        unsafe fn unpack64(packed: &[u8], width: u32, out: &mut [u64]) {
            // SAFETY: the table's contract (see `Table`).
            unsafe { generic::unpack::<$isa, u64>(packed, width, out) }
        }
        #[target_feature(enable = $features)]
        unsafe fn delta32(prev: u32, min_delta: u32, buf: &mut [u32]) -> u32 {
            // SAFETY: the table's contract (see `Table`).
            unsafe { generic::delta::<$isa, u32>(prev, min_delta, buf) }
        }
        #[target_feature(enable = $features)]
        unsafe fn delta64(prev: u64, min_delta: u64, buf: &mut [u64]) -> u64 {
            // SAFETY: the table's contract (see `Table`).
            unsafe { generic::delta::<$isa, u64>(prev, min_delta, buf) }
        }
        #[target_feature(enable = $features)]
        unsafe fn scale32(ints: &[u32], divisor: &Divisor, out: &mut [f32]) {
            // SAFETY: the table's contract (see `Table`).
            unsafe { generic::scale::<$isa, u32>(ints, divisor, out) }
        }
        #[target_feature(enable = $features)]
        unsafe fn scale64(ints: &[u64], divisor: &Divisor, out: &mut [f64]) {
            // SAFETY: the table's contract (see `Table`).
            unsafe { generic::scale::<$isa, u64>(ints, divisor, out) }
        }

        pub(in $crate::kernels::bitunpack) static TABLE: Table = Table {
            unpack32,
            unpack64,
            delta32,
            delta64,
            scale32,
            scale64,
        };
    };
}
pub(super) use wrappers;

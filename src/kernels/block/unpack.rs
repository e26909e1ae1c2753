//! Unpacking MSB-first bit streams, written once over [`Vector`].
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
//! bits; both words agree on the bits they share, so OR is exact). A register
//! is filled with the words of consecutive values by [`Vector::gather_units`]:
//! one 16-byte unit per *pair* of values (pair `p` starts at `b_{2p}`; both
//! words lie within the next 16 bytes because `b_{2p+1} - b_{2p} <= 8`), bytes
//! reversed by an in-unit shuffle. An ISA with a cross-lane dword permute can
//! instead build all four units of a group from one masked load, when each
//! pair's bytes fit in dword-aligned 16 bytes (every width up to 32, the FLOAT
//! range, and more). The per-width shape is computed at compile time into
//! [`PLANS`].

use super::{scalar, Word};
use crate::kernels::vector::{Units, Vector};

/// The shape of one `w`-byte group of eight `w`-bit values.
struct Plan {
    /// Where each lane pair's bytes come from.
    units: Units,
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
        units: Units {
            offsets: [0; 4],
            shuffle: [0; 64],
            dwords: [0; 16],
            dword_shuffle: [0; 64],
            window: 0,
        },
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
    let mut dwords_fit = true;
    let mut q = 0;
    while q < 4 {
        let b0 = 2 * q * w / 8;
        let d = (2 * q + 1) * w / 8 - b0;
        let skew = b0 % 4;
        p.units.offsets[q] = b0;
        let mut k = 0;
        while k < 8 {
            // Lane 0 of the pair <- bytes 7..=0, lane 1 <- bytes d+7..=d.
            p.units.shuffle[16 * q + k] = (7 - k) as u8;
            p.units.shuffle[16 * q + 8 + k] = (d + 7 - k) as u8;
            p.units.dword_shuffle[16 * q + k] = (skew + 7 - k) as u8;
            p.units.dword_shuffle[16 * q + 8 + k] = (skew + d + 7 - k) as u8;
            k += 1;
        }
        let mut i = 0;
        while i < 4 {
            p.units.dwords[4 * q + i] = (b0 / 4 + i) as u32;
            i += 1;
        }
        if skew + d + 8 + p.two_words as usize > 16 {
            dwords_fit = false;
        }
        q += 1;
    }
    if dwords_fit {
        p.units.window = p.units.offsets[3] / 4 + 4;
    }
    // Units read `[b_{2q}, b_{2q} + 16)`, the window `[0, 4 * window)`, which
    // ends no later; the second word reads one byte further.
    p.span = p.units.offsets[3] + 16 + p.two_words as usize;
    p
}

/// [`Plan`] for every width 0..=64 (width 0 is never used: it unpacks to zeros).
static PLANS: [Plan; 65] = {
    let mut plans = [Plan::EMPTY; 65];
    let mut w = 1;
    while w <= 64 {
        plans[w] = plan(w);
        w += 1;
    }
    plans
};

/// How a word type takes unpacked `u64` lanes.
pub(super) trait Unpacked: Word {
    /// Stores `S::LANES_64` unpacked values (each fits this word).
    ///
    /// # Safety
    /// `dst` is writable for `S::LANES_64` words.
    unsafe fn store_unpacked<S: Vector>(s: S, v: S::U64, dst: *mut Self);
}

impl Unpacked for u32 {
    #[inline(always)]
    unsafe fn store_unpacked<S: Vector>(s: S, v: S::U64, dst: *mut u32) {
        // SAFETY: the caller's contract.
        unsafe { s.store_low_u32(dst, v) }
    }
}

impl Unpacked for u64 {
    #[inline(always)]
    unsafe fn store_unpacked<S: Vector>(s: S, v: S::U64, dst: *mut u64) {
        // SAFETY: the caller's contract.
        unsafe { s.store_u64(dst, v) }
    }
}

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

/// The two-diffs `8g + h .. 8g + h + LANES_64` of a `w`-bit stream (`w >=
/// 1`), one per lane. `TWO_WORDS` when some value straddles nine bytes.
///
/// # Safety
/// Group `g` must be readable: `g * w + plan.span <= packed.len()`; `h` is a
/// multiple of `LANES_64` below 8.
#[inline(always)]
unsafe fn group_words<S: Vector, const TWO_WORDS: bool>(
    s: S,
    src: *const u8,
    plan: &Plan,
    w: usize,
    g: usize,
    h: usize,
) -> S::U64 {
    // SAFETY: the caller's contract (units read below `span - 1` bytes from
    // `base`, and below `span` from `base + 1`); the shift counts
    // `h .. h + LANES_64 <= 8` lie within the plan's arrays.
    unsafe {
        let base = src.add(g * w);
        let shl = s.load_u64(plan.shl.as_ptr().add(h));
        let mut v = s.shl_each_u64(s.gather_units(base, &plan.units, h / 2), shl);
        if TWO_WORDS {
            let shr = s.load_u64(plan.shr.as_ptr().add(h));
            let next = s.gather_units(base.add(1), &plan.units, h / 2);
            v = s.or_u64(v, s.shr_each_u64(next, shr));
        }
        s.shr_u64(v, (64 - w) as u32)
    }
}

/// Unpacks `out.len()` values of `width` bits (`width <= W::BITS`) from
/// `packed` (see [`scalar::unpack`]).
///
/// Whole groups whose unit loads stay inside `packed` go through the
/// registers; the rest (at most the last few groups before the end of
/// `packed`) through the reference. Callers pass the packed area with whatever
/// bytes follow it in the page, so only a page's last block has a scalar tail.
#[inline(always)]
pub(super) fn unpack<S: Vector, W: Unpacked>(s: S, packed: &[u8], width: u32, out: &mut [W]) {
    let w = width as usize;
    if w == 0 {
        out.fill(W::default());
        return;
    }
    let plan = &PLANS[w];
    let groups = safe_groups(packed, plan, w, out.len() / 8);
    let (src, dst) = (packed.as_ptr(), out.as_mut_ptr());
    // SAFETY: group `g < groups` is readable (`safe_groups`) and its values
    // `[8g, 8g + 8)` lie inside `out` (`groups <= out.len() / 8`).
    unsafe {
        if plan.two_words {
            groups_into::<S, W, true>(s, src, plan, w, dst, groups);
        } else {
            groups_into::<S, W, false>(s, src, plan, w, dst, groups);
        }
    }
    scalar::unpack(&packed[groups * w..], width, &mut out[groups * 8..]);
}

/// Unpacks the first `groups` groups at `src` into `dst`.
///
/// # Safety
/// Those groups are readable (see [`group_words`]) and `dst` is writable for
/// `8 * groups` words.
#[inline(always)]
unsafe fn groups_into<S: Vector, W: Unpacked, const TWO_WORDS: bool>(
    s: S,
    src: *const u8,
    plan: &Plan,
    w: usize,
    dst: *mut W,
    groups: usize,
) {
    for g in 0..groups {
        let mut h = 0;
        while h < 8 {
            // SAFETY: the caller's contract; `h + LANES_64 <= 8`.
            unsafe {
                let v = group_words::<S, TWO_WORDS>(s, src, plan, w, g, h);
                W::store_unpacked(s, v, dst.add(g * 8 + h));
            }
            h += S::LANES_64;
        }
    }
}

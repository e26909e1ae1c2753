//! The tile kernels' vector bodies, written once over [`Vector`].
//!
//! Faults follow one rule: the vector pass only *detects* that some rule is
//! broken (a running `min` or `max` of the lanes, reduced once at the end), and
//! on detection the scalar reference reruns over the whole input to report
//! exactly the fault it defines. Inputs are never faulty on the hot path, so
//! the rerun costs nothing there, and the reference stays the one definition of
//! which fault comes first. After a fault the output is unspecified, as it is
//! for the reference.

use crate::kernels::reference::tile as scalar;
use crate::kernels::vector::Vector;

use super::{CellBounds, Count, CountSpan, Exceptions, Fault, GapSpan, Planes, SpanFault, Stores};

/// Above this `n_genes`, the wrapping `u32` prefix sum could hide a range fault.
///
/// A cell of at most [`NO_WRAP_CELL`] nonzeros cannot wrap, and its sums never
/// decrease, so its total is its largest index: that is what the range check
/// takes. A longer cell folds every index it stores into the check instead.
/// Its true (`u64`) running sum can pass `2^32` only after some index `j - 1`
/// whose exact sum is `>= 2^32 - 65535` (each gap adds at most 65535, and a
/// cell's first sum is a single gap); that sum is stored and checked, so
/// whenever `n_genes <= 2^32 - 65535` a cell that wraps is always flagged,
/// and the `u64` reference rerun reports its fault. Every valid tile is far
/// below this (`n_genes <= 2^31`); larger `n_genes` go straight to the
/// reference.
const WRAP_SAFE_GENES: u32 = u32::MAX - (u16::MAX as u32 - 1);

/// A count type the vector kernels write: how recombined lanes become its bits.
pub(crate) trait CountBits: Count {
    /// `v` (counts below 65536) as the bits of `Self`.
    fn encode<S: Vector>(s: S, v: S::U32) -> S::U32;
}

impl CountBits for i32 {
    #[inline(always)]
    fn encode<S: Vector>(_: S, v: S::U32) -> S::U32 {
        v
    }
}

impl CountBits for f32 {
    #[inline(always)]
    fn encode<S: Vector>(s: S, v: S::U32) -> S::U32 {
        s.to_f32_bits(v)
    }
}

/// Pointers to the low and high plane of `planes` (`n` values each).
///
/// Panics, with the reference's message, unless `planes` holds `n` values.
#[inline(always)]
fn plane_ptrs(planes: Planes<'_>, n: usize) -> (*const u8, *const u8) {
    planes.expect_len(n);
    (planes.lo().as_ptr(), planes.hi().as_ptr())
}

/// The start of every step of an element-wise kernel over `0..n` (`n >=
/// width`), `width` elements a step, so that stores mostly land aligned.
///
/// The first step is at 0; the next starts at `aligned`, the first element
/// whose output address is a multiple of [`Vector::ALIGN`], and the rest
/// follow `width` apart; the last is pulled back to end at `n`. Steps may
/// overlap, which element-wise kernels tolerate: they rewrite equal values.
/// A store that straddles a cache line costs about twice an aligned one, and
/// pure data movement (plane interleave) is bound by exactly that.
struct Steps {
    next: usize,
    aligned: usize,
    width: usize,
    last: usize,
    done: bool,
}

impl Steps {
    /// Steps over `n` elements whose output (elements of type `T`) starts at
    /// `dst`.
    #[inline(always)]
    fn new<S: Vector, T>(n: usize, width: usize, dst: *const T) -> Steps {
        let size = std::mem::size_of::<T>();
        let misaligned = dst as usize % S::ALIGN;
        // An output not even aligned to its element size cannot be aligned
        // by skipping elements.
        let aligned = if misaligned.is_multiple_of(size) {
            (S::ALIGN - misaligned) % S::ALIGN / size
        } else {
            0
        };
        debug_assert!(n >= width && aligned < width);
        Steps {
            next: 0,
            aligned,
            width,
            last: n - width,
            done: false,
        }
    }
}

impl Iterator for Steps {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.done {
            return None;
        }
        let at = self.next.min(self.last);
        self.done = at == self.last;
        self.next = if at == 0 && self.aligned > 0 {
            self.aligned
        } else {
            at + self.width
        };
        Some(at)
    }
}

/// Planes -> `u16` (see [`scalar::recombine_u16`]).
#[inline(always)]
pub(crate) fn recombine_u16<S: Vector>(s: S, planes: &[u8], out: &mut [u16]) {
    let n = out.len();
    if n < S::PLANE_BYTES {
        return scalar::recombine_u16(planes, out);
    }
    let (lo, hi) = plane_ptrs(Planes::split(planes), n);
    let dst = out.as_mut_ptr();
    for at in Steps::new::<S, u16>(n, S::PLANE_BYTES, dst) {
        // SAFETY: `at + PLANE_BYTES <= n`: in bounds of both planes (`n`
        // bytes each) and of `out` (`2n` bytes).
        unsafe { s.interleave(lo.add(at), hi.add(at), dst.add(at).cast()) };
    }
}

/// `u16` -> planes (see [`scalar::split_planes`]).
#[inline(always)]
pub(crate) fn split_planes<S: Vector>(s: S, values: &[u16], out: &mut [u8]) {
    let n = values.len();
    if n < S::PLANE_BYTES {
        return scalar::split_planes(values, out);
    }
    assert_eq!(out.len(), 2 * n, "byte planes must hold 2n bytes");
    let src = values.as_ptr();
    let (lo, hi) = out.split_at_mut(n);
    let (lo, hi) = (lo.as_mut_ptr(), hi.as_mut_ptr());
    // Aligns the low plane's stores; the high plane's align too when `n`
    // is a multiple of the alignment.
    for at in Steps::new::<S, u8>(n, S::PLANE_BYTES, lo) {
        // SAFETY: `at + PLANE_BYTES <= n`: in bounds of `values` and of both
        // planes.
        unsafe { s.deinterleave(src.add(at).cast(), lo.add(at), hi.add(at)) };
    }
}

/// Stores `v` at `p`, streamed when `STREAM`.
///
/// # Safety
/// `p` is writable for `LANES` values, and aligned to [`Vector::ALIGN`]
/// when `STREAM`.
#[inline(always)]
unsafe fn store<S: Vector, const STREAM: bool>(s: S, p: *mut u32, v: S::U32) {
    if STREAM {
        debug_assert!((p as usize).is_multiple_of(S::ALIGN));
        // SAFETY: the caller's promise.
        unsafe { s.stream_u32(p, v) }
    } else {
        // SAFETY: the caller's promise.
        unsafe { s.store_u32(p, v) }
    }
}

/// How many `u32` lie between `p` and the next address aligned to
/// [`Vector::ALIGN`] (fewer than `LANES`): what a streaming kernel writes
/// plainly, as a partial step, before its aligned steps.
#[inline(always)]
fn lanes_to_aligned<S: Vector>(p: *const u32) -> usize {
    (S::ALIGN - p as usize % S::ALIGN) % S::ALIGN / std::mem::size_of::<u32>()
}

/// A kernel over the spans of one chunk's planes, run by [`each_span`].
/// (Methods of a trait rather than closures: a closure does not take the
/// target features of the kernel entry it is written in, so the vector
/// code inlined into it would call each intrinsic.)
trait SpanPass<S: Vector, Span> {
    /// The vector pass over `span`: whether its checks pass. Streamed
    /// stores are left unfenced.
    fn pass<const STREAM: bool>(&self, s: S, span: &mut Span) -> bool;
    /// The reference over `span`, which finds its fault (and writes the
    /// span as far as it).
    fn reference(&self, span: &mut Span) -> Result<(), Fault>;
}

/// Runs `kernel`'s pass over each span in turn, with one fence after them
/// when `stream`; at the first span whose checks fail, after the fence,
/// runs the reference over it and stops there with that span's index and
/// fault (or goes on past it if the reference finds none).
#[inline(always)]
fn each_span<S: Vector, Span, K: SpanPass<S, Span>>(
    s: S,
    kernel: K,
    spans: &mut [Span],
    stream: bool,
) -> Result<(), SpanFault> {
    let mut from = 0;
    loop {
        let failed = if stream {
            spans[from..]
                .iter_mut()
                .position(|span| !kernel.pass::<true>(s, span))
        } else {
            spans[from..]
                .iter_mut()
                .position(|span| !kernel.pass::<false>(s, span))
        };
        if stream {
            s.fence_streams();
        }
        let Some(i) = failed.map(|i| from + i) else {
            return Ok(());
        };
        kernel.reference(&mut spans[i]).map_err(|f| (i, f))?;
        from = i + 1;
    }
}

/// [`counts`] over the spans of the chunk's planes it holds.
struct CountsPass<'p, V>(Planes<'p>, std::marker::PhantomData<V>);

impl<S: Vector, V: CountBits> SpanPass<S, CountSpan<'_, V>> for CountsPass<'_, V> {
    #[inline(always)]
    fn pass<const STREAM: bool>(&self, s: S, (start, out): &mut CountSpan<'_, V>) -> bool {
        counts_pass::<S, V, STREAM>(s, self.0.range(*start..*start + out.len()), out)
    }

    fn reference(&self, (start, out): &mut CountSpan<'_, V>) -> Result<(), Fault> {
        scalar::counts(self.0.range(*start..*start + out.len()), out)
    }
}

/// Planes -> counts over each span, refusing a stored 0 (see
/// [`scalar::counts`]), written as `stores` says, streamed stores fenced
/// once after the last span.
#[inline(always)]
pub(crate) fn counts<S: Vector, V: CountBits>(
    s: S,
    planes: Planes<'_>,
    spans: &mut [CountSpan<'_, V>],
    stores: Stores,
) -> Result<(), SpanFault> {
    let stream = stores == Stores::Streaming && S::STREAMS;
    each_span(
        s,
        CountsPass(planes, std::marker::PhantomData),
        spans,
        stream,
    )
}

/// One span of [`counts`], with plain stores (steps as [`Steps`] lays them
/// out) or, when `STREAM`, partial steps up to the first and from the last
/// aligned output address and streamed aligned steps between them, so that
/// no line is written both plainly and streamed (a plain store to a line
/// being streamed makes the core read it from memory again). Returns
/// whether its checks pass; streamed stores are left unfenced.
#[inline(always)]
fn counts_pass<S: Vector, V: CountBits, const STREAM: bool>(
    s: S,
    planes: Planes<'_>,
    out: &mut [V],
) -> bool {
    let n = out.len();
    if n < S::LANES {
        return scalar::counts(planes, out).is_ok();
    }
    let (lo, hi) = plane_ptrs(planes, n);
    // `V` is `i32` or `f32`: `CountBits::encode` gives its bits.
    let io = (lo, hi, out.as_mut_ptr().cast::<u32>());
    let mut least = s.splat(u32::MAX);
    if STREAM {
        let head = lanes_to_aligned::<S>(io.2);
        // SAFETY: `head < LANES <= n`.
        unsafe { counts_partial::<S, V>(s, io, 0, head, &mut least) };
        let mut at = head;
        while n - at >= S::LANES {
            // SAFETY: `at + LANES <= n`: in bounds of both planes and of
            // `out`; `at` is aligned, `head` being.
            unsafe { counts_step::<S, V, true>(s, io, at, &mut least) };
            at += S::LANES;
        }
        // SAFETY: `at + (n - at) = n`.
        unsafe { counts_partial::<S, V>(s, io, at, n - at, &mut least) };
    } else {
        for at in Steps::new::<S, u32>(n, S::LANES, io.2) {
            // SAFETY: `at + LANES <= n`: in bounds of both planes and of `out`.
            unsafe { counts_step::<S, V, false>(s, io, at, &mut least) };
        }
    }
    s.reduce_min(least) != 0
}

/// One step of [`counts_pass`] at `at`, folding the counts into `least`.
///
/// # Safety
/// `at + LANES` is within both planes and the output; `at`'s output is
/// aligned when `STREAM`.
#[inline(always)]
unsafe fn counts_step<S: Vector, V: CountBits, const STREAM: bool>(
    s: S,
    (lo, hi, dst): (*const u8, *const u8, *mut u32),
    at: usize,
    least: &mut S::U32,
) {
    // SAFETY: the caller's promise.
    let v = unsafe { s.load_planes(lo.add(at), hi.add(at)) };
    *least = s.min(*least, v);
    // SAFETY: the caller's promise.
    unsafe { store::<S, STREAM>(s, dst.add(at), V::encode(s, v)) };
}

/// `len` (below `LANES`, maybe 0) counts at `at` of [`counts_pass`], stored
/// plainly; padding lanes are left out of `least`.
///
/// # Safety
/// `at + len` is within both planes and the output.
#[inline(always)]
unsafe fn counts_partial<S: Vector, V: CountBits>(
    s: S,
    (lo, hi, dst): (*const u8, *const u8, *mut u32),
    at: usize,
    len: usize,
    least: &mut S::U32,
) {
    if len == 0 {
        return;
    }
    // SAFETY: the caller's promise.
    let v = unsafe { s.load_planes_partial(lo.add(at), hi.add(at), len) };
    *least = s.min(*least, with_padding(s, v, len));
    // SAFETY: the caller's promise.
    unsafe { s.store_u32_partial(dst.add(at), V::encode(s, v), len) };
}

/// The most nonzeros a cell can hold without its `u32` sum wrapping: 65,537
/// gaps of 65535 sum to exactly `2^32 - 1`.
const NO_WRAP_CELL: usize = 65_537;

/// Running state of [`gaps_to_indices`]: what the reduction at the end checks.
struct ScanChecks<S: Vector> {
    /// Lane-wise minimum of every gap that must be nonzero (a cell's first gap
    /// and padding lanes are ORed with 1 first): 0 flags a zero gap.
    least_gap: S::U32,
    /// Lane-wise maximum of the indices: `>= n_genes` flags a range fault (or
    /// a wrap; see [`WRAP_SAFE_GENES`]).
    most_index: S::U32,
}

/// One vector of one cell: the indices for gaps `g`, given the cell's running
/// sum `carry` (every lane) before them. `checked` is `g` with 1 ORed into the
/// lanes whose gap may be 0 (a cell's first, padding). With `EVERY_INDEX`, each
/// index is folded into the maximum (cells that may wrap); otherwise the cell's
/// total stands for them all.
#[inline(always)]
fn scan_step<S: Vector, const EVERY_INDEX: bool>(
    s: S,
    g: S::U32,
    checked: S::U32,
    carry: &mut S::U32,
    checks: &mut ScanChecks<S>,
) -> S::U32 {
    checks.least_gap = s.min(checks.least_gap, checked);
    let sums = s.prefix_sum(g);
    let v = s.add(sums, *carry);
    // The next carry depends on `carry` through one add only.
    *carry = s.add(*carry, s.broadcast_last(sums));
    if EVERY_INDEX {
        checks.most_index = s.max(checks.most_index, v);
    }
    v
}

/// `v` with 1 ORed into the lanes from `len` on: padding lanes (a partial
/// step's, read as 0) then pass a check for zero gaps or counts.
#[inline(always)]
fn with_padding<S: Vector>(s: S, v: S::U32, len: usize) -> S::U32 {
    s.or(v, s.andnot(s.lanes_below(len), s.splat(1)))
}

/// Scans cell `start..end` of the planes into the output (`io`), and returns
/// its total in every lane. With `STREAM`, the values before the first
/// aligned output address go first as a partial step, so that every full
/// step's store is aligned and streams.
///
/// # Safety
/// `end` is within both planes and the output.
#[inline(always)]
unsafe fn scan_cell<S: Vector, const EVERY_INDEX: bool, const STREAM: bool>(
    s: S,
    (lo, hi, dst): (*const u8, *const u8, *mut u32),
    (start, end): (usize, usize),
    first_lane: S::U32,
    checks: &mut ScanChecks<S>,
) -> S::U32 {
    let mut carry = s.splat(0);
    // Lanes whose gap may be 0: the cell's first, until a step has taken it.
    let mut exempt = first_lane;
    let mut j = start;
    if STREAM {
        let head = lanes_to_aligned::<S>(dst.wrapping_add(j));
        if head > 0 && end - j > head {
            // SAFETY: `j + head < end` (and `head < LANES`).
            let g = unsafe { s.load_planes_partial(lo.add(j), hi.add(j), head) };
            let checked = s.or(g, with_padding(s, exempt, head));
            let v = scan_step::<S, EVERY_INDEX>(s, g, checked, &mut carry, checks);
            // SAFETY: as above.
            unsafe { s.store_u32_partial(dst.add(j), v, head) };
            exempt = s.splat(0);
            j += head;
        }
    }
    if end - j >= S::LANES {
        // The first full step is peeled: only it (or the head) may hold a
        // zero gap, so the loop checks the gaps as they are.
        // SAFETY: `j + LANES <= end`, in bounds by the caller's promise.
        let g = unsafe { s.load_planes(lo.add(j), hi.add(j)) };
        let v = scan_step::<S, EVERY_INDEX>(s, g, s.or(g, exempt), &mut carry, checks);
        // SAFETY: as above.
        unsafe { store::<S, STREAM>(s, dst.add(j), v) };
        exempt = s.splat(0);
        j += S::LANES;
        while end - j >= S::LANES {
            // SAFETY: as above.
            let g = unsafe { s.load_planes(lo.add(j), hi.add(j)) };
            let v = scan_step::<S, EVERY_INDEX>(s, g, g, &mut carry, checks);
            // SAFETY: as above.
            unsafe { store::<S, STREAM>(s, dst.add(j), v) };
            j += S::LANES;
        }
    }
    if j < end {
        let len = end - j;
        // SAFETY: `j + len = end`.
        let g = unsafe { s.load_planes_partial(lo.add(j), hi.add(j), len) };
        let checked = s.or(g, with_padding(s, exempt, len));
        let v = scan_step::<S, EVERY_INDEX>(s, g, checked, &mut carry, checks);
        // SAFETY: as above.
        unsafe { s.store_u32_partial(dst.add(j), v, len) };
    }
    carry
}

/// Per-cell prefix sum of gaps -> gene indices over each span of one
/// chunk's planes, with the zero-gap and range checks in the same pass (see
/// [`scalar::gaps_to_indices`]), written as `stores` says, streamed stores
/// fenced once after the last span.
///
/// Lanes sum in wrapping `u32`; that the result still equals the reference's
/// `u64` sums for every input is argued at [`WRAP_SAFE_GENES`].
#[inline(always)]
pub(crate) fn gaps_to_indices<S: Vector>(
    s: S,
    planes: Planes<'_>,
    spans: &mut [GapSpan<'_, '_>],
    n_genes: u32,
    stores: Stores,
) -> Result<(), SpanFault> {
    let stream = stores == Stores::Streaming && S::STREAMS;
    each_span(s, GapsPass { planes, n_genes }, spans, stream)
}

/// [`gaps_to_indices`] over the spans of `planes`.
struct GapsPass<'p> {
    planes: Planes<'p>,
    n_genes: u32,
}

impl<S: Vector> SpanPass<S, GapSpan<'_, '_>> for GapsPass<'_> {
    #[inline(always)]
    fn pass<const STREAM: bool>(&self, s: S, (start, cells, out): &mut GapSpan<'_, '_>) -> bool {
        let planes = self.planes.range(*start..*start + out.len());
        gaps_pass::<S, STREAM>(s, planes, *cells, self.n_genes, out)
    }

    fn reference(&self, (start, cells, out): &mut GapSpan<'_, '_>) -> Result<(), Fault> {
        let planes = self.planes.range(*start..*start + out.len());
        scalar::gaps_to_indices(planes, *cells, self.n_genes, out)
    }
}

/// One span of [`gaps_to_indices`], streaming its full steps' stores when
/// `STREAM` (left unfenced); returns whether its checks pass.
#[inline(always)]
fn gaps_pass<S: Vector, const STREAM: bool>(
    s: S,
    planes: Planes<'_>,
    cells: CellBounds<'_>,
    n_genes: u32,
    out: &mut [i32],
) -> bool {
    let n = out.len();
    if n_genes > WRAP_SAFE_GENES {
        return scalar::gaps_to_indices(planes, cells, n_genes, out).is_ok();
    }
    let (lo, hi) = plane_ptrs(planes, n);
    cells.expect_within(n);
    let io = (lo, hi, out.as_mut_ptr().cast::<u32>());
    let first_lane = s.and(s.splat(1), s.lanes_below(1));
    let mut checks = ScanChecks::<S> {
        least_gap: s.splat(u32::MAX),
        most_index: s.splat(0),
    };
    for cell in cells.iter() {
        if cell.1 - cell.0 <= NO_WRAP_CELL {
            // Its sums are exact and increase: the total is the largest.
            // SAFETY: `cell.1 <= cells.nnz() <= n`.
            let total =
                unsafe { scan_cell::<S, false, STREAM>(s, io, cell, first_lane, &mut checks) };
            checks.most_index = s.max(checks.most_index, total);
        } else {
            // SAFETY: as above.
            unsafe { scan_cell::<S, true, STREAM>(s, io, cell, first_lane, &mut checks) };
        }
    }
    s.reduce_min(checks.least_gap) != 0 && s.reduce_max(checks.most_index) < n_genes
}

/// Adds `payload` to every value of `xs` (wrapping, as the reference's `+=`
/// cannot overflow on its documented inputs).
#[inline(always)]
fn add_to_all<S: Vector>(s: S, xs: &mut [i32], payload: u32) {
    let (n, p) = (xs.len(), xs.as_mut_ptr().cast::<u32>());
    let d = s.splat(payload);
    let mut j = 0;
    while n - j >= S::LANES {
        // SAFETY: `j + LANES <= n`.
        unsafe { s.store_u32(p.add(j), s.add(s.load_u32(p.add(j)), d)) };
        j += S::LANES;
    }
    if j < n {
        // SAFETY: `j + (n - j) = n`.
        unsafe {
            s.store_u32_partial(
                p.add(j),
                s.add(s.load_u32_partial(p.add(j), n - j), d),
                n - j,
            )
        };
    }
}

/// `gexc` application: the walk and checks of the scalar reference, shared
/// (see [`scalar::apply_gap_exceptions`]); only the add over the rest of the
/// cell is vectorised, since exceptions are rare.
#[inline(always)]
pub(crate) fn gap_exceptions<S: Vector>(
    s: S,
    exceptions: Exceptions<'_>,
    cells: CellBounds<'_>,
    n_genes: u32,
    out: &mut [i32],
) -> Result<(), Fault> {
    scalar::gap_exceptions_with(exceptions, cells, n_genes, out, |rest, payload| {
        add_to_all(s, rest, payload)
    })
}

/// Sorted gene indices -> per-cell gaps and gap exceptions (see
/// [`scalar::indices_to_gaps`]).
#[inline(always)]
pub(crate) fn indices_to_gaps<S: Vector>(
    s: S,
    indices: &[i32],
    cells: CellBounds<'_>,
    out: &mut [u16],
    exceptions: &mut Vec<(u32, u32)>,
) {
    scalar::expect_gap_shapes(indices, cells, out);
    let src = indices.as_ptr().cast::<u32>();
    let high = s.splat(0xFFFF_0000);
    for (start, end) in cells.iter() {
        let mut j = start;
        while end - j >= S::LANES {
            // SAFETY: `j + LANES <= end <= indices.len()`, and `j - 1 >= start`
            // where it is read.
            let (cur, prev) = unsafe {
                let cur = s.load_u32(src.add(j));
                (
                    cur,
                    if j == start {
                        s.shift_in_zero(cur)
                    } else {
                        s.load_u32(src.add(j - 1))
                    },
                )
            };
            let d = s.sub(cur, prev);
            if s.any_nonzero(s.and(d, high)) {
                scalar::gaps_of(indices, j..j + S::LANES, start, out, exceptions);
            } else {
                // SAFETY: `j + LANES <= out.len()`.
                unsafe { s.store_u16(out.as_mut_ptr().add(j), d) };
            }
            j += S::LANES;
        }
        if j < end {
            let len = end - j;
            // SAFETY: `j + len = end`, and `j - 1 >= start` where it is read.
            let (cur, prev) = unsafe {
                let cur = s.load_u32_partial(src.add(j), len);
                (
                    cur,
                    if j == start {
                        s.shift_in_zero(cur)
                    } else {
                        s.load_u32_partial(src.add(j - 1), len)
                    },
                )
            };
            let d = s.and(s.sub(cur, prev), s.lanes_below(len));
            if s.any_nonzero(s.and(d, high)) {
                scalar::gaps_of(indices, j..end, start, out, exceptions);
            } else {
                // SAFETY: `j + len <= out.len()`.
                unsafe { s.store_u16_partial(out.as_mut_ptr().add(j), d, len) };
            }
        }
    }
}

//! Tile kernels: the deltacells chunk codec's compute.
//!
//! A chunk stores `n` nonzeros as two `u16` streams, each as byte planes (`2n`
//! bytes: all low bytes, then all high bytes, so the almost-always-zero high
//! bytes compress to nearly nothing): the stored counts and the gene *gaps*.
//! Decoding recombines the planes and, for the gaps, takes a per-cell prefix
//! sum: a cell's first gap is its first gene index, each later one the step to
//! the next. Exceptions ([`Exceptions`]) patch what 16 bits cannot hold:
//! `vexc` replaces a count, `gexc` adds to an index and every later one of its
//! cell.
//!
//! The strict reader's checks ride along in the same pass: no stored count of
//! 0, no gap of 0 but a cell's first, every cell's last index below
//! `n_genes`, a 65535 marker at every exception. The vector bodies
//! (`simd.rs`) recombine a register of lanes at a time and run the prefix
//! sum in wrapping `u32` lanes with a carry per cell; they only *detect* a
//! broken rule (a running lane-wise `min` of the gaps that must be nonzero and
//! `max` of the indices) and let the reference ([`crate::kernels::reference::tile`])
//! rerun to report it, so the reference alone defines which fault comes first.
//! Why the wrapping sum can never hide a range fault is argued at
//! `WRAP_SAFE_GENES` in `simd.rs`. Encoding is the inverse: gaps from sorted
//! indices (collecting gap exceptions) and planes from values.
//!
//! Every table computes exactly what the scalar table computes: the same
//! output and the same `Result` for every input (the property tests in
//! `proptests/tile_kernels.rs` check it). When a kernel returns a fault, what it
//! wrote to `out` is unspecified, as it is for the reference.

use super::dispatch::{kernel_entry, kernel_tables, Isa, Level};
use super::reference::tile as scalar;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod simd;

/// A stream's byte planes: the low and the high byte of each of `n` values.
///
/// A decompressed frame holds them back to back ([`Planes::split`]); a
/// [`range`](Planes::range) of them is the values of some consecutive cells,
/// which the kernels can decode straight into those rows' own place (a
/// training batch's buffers, say) instead of through a whole-chunk buffer.
#[derive(Clone, Copy, Debug)]
pub struct Planes<'a> {
    lo: &'a [u8],
    hi: &'a [u8],
}

impl<'a> Planes<'a> {
    /// The planes of `2n` bytes: all low bytes, then all high bytes.
    ///
    /// Panics if the length is odd.
    pub fn split(bytes: &'a [u8]) -> Planes<'a> {
        assert!(
            bytes.len().is_multiple_of(2),
            "byte planes must hold 2n bytes"
        );
        let (lo, hi) = bytes.split_at(bytes.len() / 2);
        Planes { lo, hi }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.lo.len()
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.lo.is_empty()
    }

    /// The planes of values `range` (panics if it is out of bounds).
    pub fn range(&self, range: std::ops::Range<usize>) -> Planes<'a> {
        Planes {
            lo: &self.lo[range.clone()],
            hi: &self.hi[range],
        }
    }

    /// The low bytes.
    pub fn lo(&self) -> &'a [u8] {
        self.lo
    }

    /// The high bytes.
    pub fn hi(&self) -> &'a [u8] {
        self.hi
    }

    /// Value `j` (panics if out of bounds).
    pub fn get(&self, j: usize) -> u16 {
        u16::from_le_bytes([self.lo[j], self.hi[j]])
    }

    /// Panics, with the message every kernel gives, unless there are `n`
    /// values.
    pub(crate) fn expect_len(&self, n: usize) {
        assert_eq!(self.len(), n, "byte planes must hold 2n bytes");
    }
}

/// The cells of one chunk as offsets into its nonzeros: cell `c` holds
/// `bounds[c] - bounds[0] .. bounds[c + 1] - bounds[0]`.
///
/// Built only through [`CellBounds::new`], which checks that the bounds are
/// non-decreasing and end exactly at the chunk's nonzero count, so kernels
/// (vector ones included) can rely on every segment lying inside the chunk.
#[derive(Clone, Copy, Debug)]
pub struct CellBounds<'a> {
    bounds: &'a [i64],
}

impl<'a> CellBounds<'a> {
    /// Checks `bounds` (an `indptr` slice, `cells + 1` entries) against a chunk of
    /// `n` nonzeros. `None` if it is empty, decreases, or does not span exactly `n`.
    pub fn new(bounds: &'a [i64], n: usize) -> Option<CellBounds<'a>> {
        let first = *bounds.first()?;
        let last = *bounds.last()?;
        if last.checked_sub(first)? != i64::try_from(n).ok()?
            || bounds.windows(2).any(|w| w[1] < w[0])
        {
            return None;
        }
        Some(CellBounds { bounds })
    }

    /// Number of cells.
    pub fn n_cells(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Number of nonzeros spanned.
    pub fn nnz(&self) -> usize {
        (self.bounds[self.bounds.len() - 1] - self.bounds[0]) as usize
    }

    /// The raw `indptr` slice.
    pub fn raw(&self) -> &'a [i64] {
        self.bounds
    }

    /// Panics, with the message every kernel gives, unless the cells lie
    /// inside `n` values.
    pub(crate) fn expect_within(&self, n: usize) {
        assert!(self.nnz() <= n, "cell bounds must lie inside the chunk");
    }

    /// `(start, end)` of each cell, relative to the chunk.
    pub fn iter(&self) -> impl Iterator<Item = (usize, usize)> + 'a {
        let base = self.bounds[0];
        self.bounds
            .windows(2)
            .map(move |w| ((w[0] - base) as usize, (w[1] - base) as usize))
    }
}

/// One kind of exception over consecutive nonzeros (a chunk, or a span of
/// it): the byte planes of the stream they patch, and a payload for each
/// position. The stored value at every position must be the 65535 marker.
///
/// Positions are strictly increasing and below the planes' length, and the
/// payloads in range for their kind: the reader checks both before a list
/// gets here.
#[derive(Clone, Copy, Debug)]
pub struct Exceptions<'a> {
    planes: Planes<'a>,
    positions: &'a [u32],
    payloads: &'a [u32],
}

impl<'a> Exceptions<'a> {
    /// The exceptions at `positions` of `planes`, with their `payloads`.
    ///
    /// Panics unless there is one payload per position.
    pub fn new(planes: Planes<'a>, positions: &'a [u32], payloads: &'a [u32]) -> Exceptions<'a> {
        assert_eq!(
            positions.len(),
            payloads.len(),
            "one payload per exception position"
        );
        Exceptions {
            planes,
            positions,
            payloads,
        }
    }

    /// The planes of the stream the exceptions patch.
    pub fn planes(&self) -> Planes<'a> {
        self.planes
    }

    /// Number of exceptions.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Each position (a nonzero of the planes) with its payload, in order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, u32)> + 'a {
        self.positions
            .iter()
            .zip(self.payloads)
            .map(|(&p, &v)| (p as usize, v))
    }
}

/// A strict-reader rule broken inside a chunk, at a nonzero position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A stored count of 0 ([`TileRule::ZeroCount`](crate::TileRule::ZeroCount)).
    ZeroCount {
        /// Index of the nonzero within the chunk.
        position: u64,
    },
    /// A gap of 0 that is not a cell's first
    /// ([`TileRule::ZeroGap`](crate::TileRule::ZeroGap)).
    ZeroGap {
        /// Index of the nonzero within the chunk.
        position: u64,
    },
    /// A gene index (the cell's last) not below `n_genes`
    /// ([`TileRule::GeneIndex`](crate::TileRule::GeneIndex)).
    GeneIndex {
        /// Index of the nonzero within the chunk.
        position: u64,
        /// The gene index decoded there.
        index: u64,
    },
    /// An exception at a nonzero whose stored value is not 65535
    /// ([`TileRule::ExceptionUnmarked`](crate::TileRule::ExceptionUnmarked)).
    Unmarked {
        /// Index of the nonzero within the chunk.
        position: u64,
        /// The value stored there.
        stored: u16,
    },
}

impl Fault {
    /// The same fault `by` nonzeros further on: a fault found in a span of
    /// a chunk, placed in the chunk.
    pub fn moved(self, by: usize) -> Fault {
        let by = by as u64;
        match self {
            Fault::ZeroCount { position } => Fault::ZeroCount {
                position: position + by,
            },
            Fault::ZeroGap { position } => Fault::ZeroGap {
                position: position + by,
            },
            Fault::GeneIndex { position, index } => Fault::GeneIndex {
                position: position + by,
                index,
            },
            Fault::Unmarked { position, stored } => Fault::Unmarked {
                position: position + by,
                stored,
            },
        }
    }
}

/// How a decoding kernel writes its output.
///
/// A tile decodes to 8 bytes a nonzero, far more than any cache holds once
/// it is past a few megabytes: written by plain stores, each line is first
/// read from memory, then written back when it is evicted, and one core
/// writes only about a third as fast as it can stream (measured on a
/// 2-core Xeon: 6-8 GB/s into a 70 MB buffer, 20-23 GB/s with
/// non-temporal stores). Streaming stores skip that read, and keep the
/// output from evicting the planes the kernels read; but output read again
/// soon (a row tokenized as soon as it is decoded) is then read from memory,
/// so the caller chooses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stores {
    /// Plain stores: the output stays in the cache for whoever reads it
    /// next.
    #[default]
    Cached,
    /// Non-temporal stores where the ISA has them (AVX2, AVX-512; NEON and
    /// the reference store plainly), fenced before the kernel returns: for
    /// output larger than the cache, or not read before it would have left
    /// it.
    Streaming,
}

impl Stores {
    /// Both ways, plain first: what a test or bench runs every kernel with.
    pub const ALL: [Stores; 2] = [Stores::Cached, Stores::Streaming];

    /// `Streaming` when `stream`, else `Cached`.
    pub fn streaming_if(stream: bool) -> Stores {
        if stream {
            Stores::Streaming
        } else {
            Stores::Cached
        }
    }

    /// Asks the core to bring the cache lines at either end of `out` in
    /// now, when `out` is to be written by streaming stores later (a hint:
    /// nothing is read or written, and it does nothing with `Cached` or
    /// off x86-64). A streaming kernel writes the partial lines at either
    /// end of its output plainly, and a plain store to a line not in the
    /// cache waits for the line to be read from memory: a row of a batch
    /// shares its edge lines with rows written long before or after it.
    /// Called before work that takes longer than a read from memory (a
    /// chunk's frames decompressed), the stores find the lines there: in a
    /// profile of CSR batches, the first step's masked store had taken 22%
    /// of the prefix sum's samples and 27% of the counts kernel's, and both
    /// kernels together went from 16.5% to 13.2% of the samples. Rows
    /// composed in the cache and streamed (`RowKernels::stream`) ask for a
    /// whole chunk's rows before the chunk is decoded
    /// ([`SinkPart::prefetch_edges`](crate::engine::SinkPart::prefetch_edges)):
    /// asked row by row, just before each row's copy, the prefetches had
    /// waited on the page walks themselves (3.8% of a profile of normalized
    /// batches, for the 4.8% of partial-line copies they saved); asked
    /// ahead, the copies of partial lines went from 4.9-5.7% to 1.7% of the
    /// samples, and the stream from 6.7-7.4% to 4.4-4.9%.
    #[inline]
    pub fn prefetch_edges<T>(self, out: &[T]) {
        #[cfg(target_arch = "x86_64")]
        if let (Stores::Streaming, Some(first), Some(last)) = (self, out.first(), out.last()) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: a prefetch is a hint that never faults nor changes
            // memory, and both addresses are of elements of `out`.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(first).cast());
                _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(last).cast());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = out;
    }
}

/// One row's part of a chunk for [`DecodedCount::counts`]: where its
/// values start in the chunk's planes, and its output (as many values as
/// it holds).
pub type CountSpan<'o, V> = (usize, &'o mut [V]);

/// One row's part of a chunk for the gene kernel over several rows: where
/// its gaps start in the chunk's planes, its cells (relative to that
/// start), and its output.
pub(crate) type GapSpan<'c, 'o> = (usize, CellBounds<'c>, &'o mut [i32]);

/// Where a kernel over several spans stopped: the span's index, and its
/// fault (positions within the span).
pub type SpanFault = (usize, Fault);

type CountsFn<V> = fn(Planes<'_>, &mut [CountSpan<'_, V>], Stores) -> Result<(), SpanFault>;
type GapsFn = fn(Planes<'_>, &mut [GapSpan<'_, '_>], u32, Stores) -> Result<(), SpanFault>;
type GapExcFn = fn(Exceptions<'_>, CellBounds<'_>, u32, &mut [i32]) -> Result<(), Fault>;
type IndicesToGapsFn = fn(&[i32], CellBounds<'_>, &mut [u16], &mut Vec<(u32, u32)>);

/// The tile kernels of one [`Isa`]; reach one through
/// [`KernelTable`](super::KernelTable).
///
/// Value exceptions (`vexc`) are not here: each touches one value, so the
/// reference ([`scalar::apply_value_exceptions`]) is as fast as any vector
/// version could be, and every caller uses it.
#[derive(Debug)]
pub struct TileKernels {
    isa: Isa,
    recombine_u16: fn(&[u8], &mut [u16]),
    counts_i32: CountsFn<i32>,
    counts_f32: CountsFn<f32>,
    gaps_to_indices: GapsFn,
    gap_exceptions: GapExcFn,
    split_planes: fn(&[u16], &mut [u8]),
    indices_to_gaps: IndicesToGapsFn,
}

impl TileKernels {
    /// Planes (`2n` bytes) -> `n` `u16` values.
    pub fn recombine_u16(&self, planes: &[u8], out: &mut [u16]) {
        (self.recombine_u16)(planes, out)
    }

    /// Planes -> `i32` counts, refusing a stored 0, written as `stores`
    /// says.
    pub fn counts_i32(
        &self,
        planes: Planes<'_>,
        out: &mut [i32],
        stores: Stores,
    ) -> Result<(), Fault> {
        planes.expect_len(out.len());
        (self.counts_i32)(planes, &mut [(0, out)], stores).map_err(|(_, f)| f)
    }

    /// Planes -> `f32` counts, refusing a stored 0, written as `stores`
    /// says.
    pub fn counts_f32(
        &self,
        planes: Planes<'_>,
        out: &mut [f32],
        stores: Stores,
    ) -> Result<(), Fault> {
        planes.expect_len(out.len());
        (self.counts_f32)(planes, &mut [(0, out)], stores).map_err(|(_, f)| f)
    }

    /// Per-cell prefix sum of the gaps in `planes` -> gene indices, with the
    /// zero-gap and range checks (see [`scalar::gaps_to_indices`]), written
    /// as `stores` says.
    pub fn gaps_to_indices(
        &self,
        planes: Planes<'_>,
        cells: CellBounds<'_>,
        n_genes: u32,
        out: &mut [i32],
        stores: Stores,
    ) -> Result<(), Fault> {
        planes.expect_len(out.len());
        (self.gaps_to_indices)(planes, &mut [(0, cells, out)], n_genes, stores).map_err(|(_, f)| f)
    }

    /// [`TileKernels::gaps_to_indices`] over each of `spans` (parts of one
    /// chunk's `planes`) in turn, stopping at the first fault; streaming
    /// stores are fenced once, after the last span (the rows of a chunk
    /// that a batch's build decodes pay one wait rather than one each).
    pub(crate) fn gaps_to_indices_each(
        &self,
        planes: Planes<'_>,
        spans: &mut [GapSpan<'_, '_>],
        n_genes: u32,
        stores: Stores,
    ) -> Result<(), SpanFault> {
        (self.gaps_to_indices)(planes, spans, n_genes, stores)
    }

    /// `gexc` application (see [`scalar::apply_gap_exceptions`]).
    pub fn gap_exceptions(
        &self,
        exceptions: Exceptions<'_>,
        cells: CellBounds<'_>,
        n_genes: u32,
        out: &mut [i32],
    ) -> Result<(), Fault> {
        (self.gap_exceptions)(exceptions, cells, n_genes, out)
    }

    /// `u16` values -> planes.
    pub fn split_planes(&self, values: &[u16], out: &mut [u8]) {
        (self.split_planes)(values, out)
    }

    /// Sorted gene indices -> per-cell gaps, collecting gap exceptions (see
    /// [`scalar::indices_to_gaps`]).
    pub fn indices_to_gaps(
        &self,
        indices: &[i32],
        cells: CellBounds<'_>,
        out: &mut [u16],
        exceptions: &mut Vec<(u32, u32)>,
    ) {
        (self.indices_to_gaps)(indices, cells, out, exceptions)
    }
}

/// The reference table.
static SCALAR: TileKernels = TileKernels {
    isa: Isa::PORTABLE,
    recombine_u16: scalar::recombine_u16,
    counts_i32: scalar_counts::<i32>,
    counts_f32: scalar_counts::<f32>,
    gaps_to_indices: |planes, spans, n_genes, _| {
        scalar_spans(spans, |(at, cells, out)| {
            scalar::gaps_to_indices(planes.range(*at..*at + out.len()), *cells, n_genes, out)
        })
    },
    gap_exceptions: scalar::apply_gap_exceptions,
    split_planes: scalar::split_planes,
    indices_to_gaps: scalar::indices_to_gaps,
};

/// The reference's counts over each span in turn (what the table's
/// `counts_i32` and `counts_f32` are).
fn scalar_counts<V: Count>(
    planes: Planes<'_>,
    spans: &mut [CountSpan<'_, V>],
    _: Stores,
) -> Result<(), SpanFault> {
    scalar_spans(spans, |(at, out)| {
        scalar::counts(planes.range(*at..*at + out.len()), out)
    })
}

/// The reference over each span in turn, stopping at the first fault.
fn scalar_spans<T>(
    spans: &mut [T],
    mut kernel: impl FnMut(&mut T) -> Result<(), Fault>,
) -> Result<(), SpanFault> {
    spans
        .iter_mut()
        .enumerate()
        .try_for_each(|(i, span)| kernel(span).map_err(|f| (i, f)))
}

/// Defines the table `$name`: the bodies of `simd.rs` for one ISA.
macro_rules! tile_table {
    ($name:ident, $level:ident, $features:literal, $token:ty) => {
        static $name: TileKernels = {
            kernel_entry!($features, $token, fn recombine_u16(planes: &[u8], out: &mut [u16]) = simd::recombine_u16);
            kernel_entry!($features, $token, fn counts_i32(planes: Planes<'_>, spans: &mut [CountSpan<'_, i32>], stores: Stores) -> Result<(), SpanFault> = simd::counts);
            kernel_entry!($features, $token, fn counts_f32(planes: Planes<'_>, spans: &mut [CountSpan<'_, f32>], stores: Stores) -> Result<(), SpanFault> = simd::counts);
            kernel_entry!($features, $token, fn gaps_to_indices(
                planes: Planes<'_>, spans: &mut [GapSpan<'_, '_>], n_genes: u32, stores: Stores
            ) -> Result<(), SpanFault> = simd::gaps_to_indices);
            kernel_entry!($features, $token, fn gap_exceptions(
                exceptions: Exceptions<'_>, cells: CellBounds<'_>, n_genes: u32, out: &mut [i32]
            ) -> Result<(), Fault> = simd::gap_exceptions);
            kernel_entry!($features, $token, fn split_planes(values: &[u16], out: &mut [u8]) = simd::split_planes);
            kernel_entry!($features, $token, fn indices_to_gaps(
                indices: &[i32], cells: CellBounds<'_>, out: &mut [u16], exceptions: &mut Vec<(u32, u32)>
            ) = simd::indices_to_gaps);
            TileKernels {
                isa: Isa::compiled_for(Level::$level),
                recombine_u16,
                counts_i32,
                counts_f32,
                gaps_to_indices,
                gap_exceptions,
                split_planes,
                indices_to_gaps,
            }
        };
    };
}

kernel_tables!(TileKernels, SCALAR, tile_table);

/// A decoded count type: `i32` keeps exact counts, `f32` is what training code
/// feeds to a model (exact up to 2^24). Four bytes of plain data, so that
/// kernels that only move counts (the row kernels) take any of them as bits.
pub trait Count: bytemuck::Pod + Default + Send + Sync + 'static {
    /// Converts a count (at most 2^31 - 1).
    fn from_u32(v: u32) -> Self;
}

impl Count for i32 {
    #[inline(always)]
    fn from_u32(v: u32) -> i32 {
        v as i32
    }
}

impl Count for f32 {
    #[inline(always)]
    fn from_u32(v: u32) -> f32 {
        v as f32
    }
}

impl Count for u32 {
    #[inline(always)]
    fn from_u32(v: u32) -> u32 {
        v
    }
}

/// A decoded count type, with its count kernel picked from a table.
pub trait DecodedCount: Count {
    /// Planes -> counts of this type over each of `spans` (parts of one
    /// chunk's `planes`) in turn, refusing a stored 0 and stopping at the
    /// first; streaming stores are fenced once, after the last span.
    fn counts(
        k: &TileKernels,
        planes: Planes<'_>,
        spans: &mut [CountSpan<'_, Self>],
        stores: Stores,
    ) -> Result<(), SpanFault>;
}

impl DecodedCount for i32 {
    fn counts(
        k: &TileKernels,
        planes: Planes<'_>,
        spans: &mut [CountSpan<'_, i32>],
        stores: Stores,
    ) -> Result<(), SpanFault> {
        (k.counts_i32)(planes, spans, stores)
    }
}

impl DecodedCount for f32 {
    fn counts(
        k: &TileKernels,
        planes: Planes<'_>,
        spans: &mut [CountSpan<'_, f32>],
        stores: Stores,
    ) -> Result<(), SpanFault> {
        (k.counts_f32)(planes, spans, stores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::KernelTable;

    /// Planes of `values`: every low byte, then every high byte.
    fn planes_of(values: &[u16]) -> Vec<u8> {
        let lo = values.iter().map(|v| v.to_le_bytes()[0]);
        let hi = values.iter().map(|v| v.to_le_bytes()[1]);
        lo.chain(hi).collect()
    }

    /// Three spans of one chunk's 127 values (40, 37 and 50 of them).
    const SPANS: [(usize, usize); 3] = [(0, 40), (40, 37), (77, 50)];

    #[test]
    fn spans_of_a_chunk_decode_as_each_alone_and_stop_at_the_first_fault() {
        for zero_in in [None, Some(1), Some(2)] {
            let mut values: Vec<u16> = (0..127u16).map(|i| 1 + i % 3).collect();
            if let Some(s) = zero_in {
                // Not a cell's first value, so a fault for gaps as for counts.
                values[SPANS[s].0 + 5] = 0;
            }
            let bytes = planes_of(&values);
            let planes = Planes::split(&bytes);
            let bounds: Vec<[i64; 2]> = SPANS.iter().map(|&(_, n)| [0, n as i64]).collect();
            for k in TileKernels::available() {
                for stores in Stores::ALL {
                    let what = format!("{} {stores:?}, zero in span {zero_in:?}", k.isa());
                    // Outputs at odd places in one buffer, so rows share lines.
                    let mut counts = vec![-1f32; 140];
                    let mut genes = vec![-1i32; 140];
                    let (got_counts, got_genes) = {
                        let mut count_rest = &mut counts[1..];
                        let mut gene_rest = &mut genes[1..];
                        let (mut count_spans, mut gene_spans) = (Vec::new(), Vec::new());
                        for (&(start, n), b) in SPANS.iter().zip(&bounds) {
                            let (c, cr) = std::mem::take(&mut count_rest).split_at_mut(n + 1);
                            let (g, gr) = std::mem::take(&mut gene_rest).split_at_mut(n + 1);
                            count_spans.push((start, &mut c[..n]));
                            let cells = CellBounds::new(b, n).expect("one cell");
                            gene_spans.push((start, cells, &mut g[..n]));
                            (count_rest, gene_rest) = (cr, gr);
                        }
                        (
                            f32::counts(k, planes, &mut count_spans, stores),
                            k.gaps_to_indices_each(planes, &mut gene_spans, 1 << 20, stores),
                        )
                    };
                    let fault = zero_in.map(|s| {
                        let position = 5;
                        (
                            s,
                            Fault::ZeroCount { position },
                            Fault::ZeroGap { position },
                        )
                    });
                    assert_eq!(
                        got_counts,
                        fault.map_or(Ok(()), |f| Err((f.0, f.1))),
                        "{what}"
                    );
                    assert_eq!(
                        got_genes,
                        fault.map_or(Ok(()), |f| Err((f.0, f.2))),
                        "{what}"
                    );
                    // Each span as the reference leaves it alone (the
                    // faulting one up to its fault); spans past it untouched.
                    let mut at = 1;
                    for (s, (&(start, n), b)) in SPANS.iter().zip(&bounds).enumerate() {
                        let span = planes.range(start..start + n);
                        let (mut want_counts, mut want_genes) = (vec![-1f32; n], vec![-1i32; n]);
                        if zero_in.is_none_or(|z| s <= z) {
                            let cells = CellBounds::new(b, n).expect("one cell");
                            let _ = scalar::counts(span, &mut want_counts);
                            let _ = scalar::gaps_to_indices(span, cells, 1 << 20, &mut want_genes);
                        }
                        let upto = if zero_in == Some(s) { 5 } else { n };
                        let (counts, genes) = (&counts[at..at + upto], &genes[at..at + upto]);
                        assert_eq!(counts, &want_counts[..upto], "{what}, span {s}");
                        assert_eq!(genes, &want_genes[..upto], "{what}, span {s}");
                        at += n + 1;
                    }
                }
            }
        }
    }
}

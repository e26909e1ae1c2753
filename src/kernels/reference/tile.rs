//! The tile kernels' reference: plain code that defines "correct".
//!
//! Every vector backend must produce exactly these outputs and report exactly
//! these faults (the same kind at the same position) for every input. Where an
//! input breaks several rules, the reported fault is the first in this order:
//! cells in order; within a cell, a zero gap before an out-of-range index;
//! exceptions in position order, an unmarked exception before a range error.
//! Once a kernel reports a fault, what it wrote to its output is unspecified
//! (vector backends write ahead of their checks), so callers discard it.
//!
//! Byte planes: `n` values are stored as `2n` bytes, all low bytes then all high
//! bytes, so the almost-always-zero high bytes compress to nearly nothing.

use crate::kernels::tile::{CellBounds, Count, Exceptions, Fault, Planes};

/// Low and high plane of `planes`, each `n` bytes.
///
/// Panics if `planes.len() != 2 * n`.
#[inline]
fn split(planes: &[u8], n: usize) -> (&[u8], &[u8]) {
    let p = Planes::split(planes);
    p.expect_len(n);
    (p.lo(), p.hi())
}

/// Planes -> `u16` values.
pub fn recombine_u16(planes: &[u8], out: &mut [u16]) {
    let (lo, hi) = split(planes, out.len());
    for ((o, &l), &h) in out.iter_mut().zip(lo).zip(hi) {
        *o = u16::from_le_bytes([l, h]);
    }
}

/// Planes -> `u32` values, without checks (e.g. for re-encoding).
pub fn recombine_u32(planes: &[u8], out: &mut [u32]) {
    let (lo, hi) = split(planes, out.len());
    for ((o, &l), &h) in out.iter_mut().zip(lo).zip(hi) {
        *o = u32::from(u16::from_le_bytes([l, h]));
    }
}

/// Planes -> counts, refusing a stored 0 (zeros are never stored).
pub fn counts<V: Count>(planes: Planes<'_>, out: &mut [V]) -> Result<(), Fault> {
    planes.expect_len(out.len());
    let (lo, hi) = (planes.lo(), planes.hi());
    for (j, ((o, &l), &h)) in out.iter_mut().zip(lo).zip(hi).enumerate() {
        let v = u16::from_le_bytes([l, h]);
        if v == 0 {
            return Err(Fault::ZeroCount { position: j as u64 });
        }
        *o = V::from_u32(u32::from(v));
    }
    Ok(())
}

/// Per-cell prefix sum of the gaps in `planes` -> gene indices.
///
/// A cell's first gap is its first gene index; every later gap must be nonzero
/// (indices strictly increase), and the cell's last index must be below
/// `n_genes` (it is the largest, so that bounds them all). Sums run in 64 bits,
/// so no input can wrap. Indices written before a fault are unspecified.
pub fn gaps_to_indices(
    planes: Planes<'_>,
    cells: CellBounds<'_>,
    n_genes: u32,
    out: &mut [i32],
) -> Result<(), Fault> {
    planes.expect_len(out.len());
    cells.expect_within(out.len());
    let (lo, hi) = (planes.lo(), planes.hi());
    for (start, end) in cells.iter() {
        let mut acc: u64 = 0;
        for j in start..end {
            let gap = u16::from_le_bytes([lo[j], hi[j]]);
            if gap == 0 && j > start {
                return Err(Fault::ZeroGap { position: j as u64 });
            }
            acc += u64::from(gap);
            out[j] = acc as i32;
        }
        if end > start && acc >= u64::from(n_genes) {
            return Err(Fault::GeneIndex {
                position: (end - 1) as u64,
                index: acc,
            });
        }
    }
    Ok(())
}

/// `Ok` if the stored `u16` at `position` of `planes` is the 65535
/// exception marker.
#[inline]
fn marked(planes: Planes<'_>, position: usize) -> Result<(), Fault> {
    match planes.get(position) {
        u16::MAX => Ok(()),
        stored => Err(Fault::Unmarked {
            position: position as u64,
            stored,
        }),
    }
}

/// Replaces counts with their true values from a `vexc` list.
///
/// Positions are below `out.len()`; the stored value at each must be the
/// 65535 marker.
pub fn apply_value_exceptions<V: Count>(
    exceptions: Exceptions<'_>,
    out: &mut [V],
) -> Result<(), Fault> {
    for (p, v) in exceptions.iter() {
        marked(exceptions.planes(), p)?;
        out[p] = V::from_u32(v);
    }
    Ok(())
}

/// Adds `gexc` payloads to the index at each position and every later index of
/// the same cell, then checks that the cell's last index stays below `n_genes`.
///
/// Positions are below `out.len()`; the stored gap at each must be the 65535
/// marker. `out` holds the output of [`gaps_to_indices`], so every index is
/// below `n_genes` on entry.
pub fn apply_gap_exceptions(
    exceptions: Exceptions<'_>,
    cells: CellBounds<'_>,
    n_genes: u32,
    out: &mut [i32],
) -> Result<(), Fault> {
    gap_exceptions_with(exceptions, cells, n_genes, out, |rest, payload| {
        for x in rest {
            *x += payload as i32;
        }
    })
}

/// The walk and checks of [`apply_gap_exceptions`], in its order, with the add
/// of a payload to the rest of a cell supplied by the caller: the vector
/// backends pass their vectorised add and share everything else.
pub(crate) fn gap_exceptions_with(
    exceptions: Exceptions<'_>,
    cells: CellBounds<'_>,
    n_genes: u32,
    out: &mut [i32],
    mut add: impl FnMut(&mut [i32], u32),
) -> Result<(), Fault> {
    let mut cell_iter = cells.iter();
    let mut cell = (0, 0);
    for (p, payload) in exceptions.iter() {
        while p >= cell.1 {
            cell = cell_iter
                .next()
                .expect("exception positions lie inside the chunk");
        }
        marked(exceptions.planes(), p)?;
        let last = cell.1 - 1;
        let new_last = out[last] as u64 + u64::from(payload);
        if new_last >= u64::from(n_genes) {
            return Err(Fault::GeneIndex {
                position: last as u64,
                index: new_last,
            });
        }
        add(&mut out[p..cell.1], payload);
    }
    Ok(())
}

/// `u16` values -> planes (the encode side of [`recombine_u16`]).
pub fn split_planes(values: &[u16], out: &mut [u8]) {
    assert_eq!(
        out.len(),
        2 * values.len(),
        "byte planes must hold 2n bytes"
    );
    let (lo, hi) = out.split_at_mut(values.len());
    for ((&v, l), h) in values.iter().zip(lo).zip(hi) {
        [*l, *h] = v.to_le_bytes();
    }
}

/// Sorted gene indices -> per-cell gaps, capped at 65535 with the excess
/// collected as gap exceptions `(position, gap - 65535)`.
///
/// Indices must be strictly increasing within each cell and non-negative (the
/// writer checks that first, with an error naming the cell).
pub fn indices_to_gaps(
    indices: &[i32],
    cells: CellBounds<'_>,
    out: &mut [u16],
    exceptions: &mut Vec<(u32, u32)>,
) {
    expect_gap_shapes(indices, cells, out);
    for (start, end) in cells.iter() {
        gaps_of(indices, start..end, start, out, exceptions);
    }
}

/// Panics, with the message every backend gives, unless `out` holds one gap
/// per index and the cells lie inside the indices.
#[inline]
pub(crate) fn expect_gap_shapes(indices: &[i32], cells: CellBounds<'_>, out: &[u16]) {
    assert_eq!(out.len(), indices.len(), "one gap per index");
    cells.expect_within(indices.len());
}

/// The gap rule of [`indices_to_gaps`] for `indices[range]`, inside the cell
/// that starts at `cell_start` (the vector bodies send here the few registers
/// holding a gap above 65535).
pub(crate) fn gaps_of(
    indices: &[i32],
    range: std::ops::Range<usize>,
    cell_start: usize,
    out: &mut [u16],
    exceptions: &mut Vec<(u32, u32)>,
) {
    let mut prev = if range.start == cell_start {
        0
    } else {
        indices[range.start - 1] as u32
    };
    for j in range {
        let g = indices[j] as u32 - prev;
        prev = indices[j] as u32;
        if g > u32::from(u16::MAX) {
            out[j] = u16::MAX;
            exceptions.push((j as u32, g - u32::from(u16::MAX)));
        } else {
            out[j] = g as u16;
        }
    }
}

/// Counts -> `u16` stream values, capped at 65535 with the true counts collected
/// as value exceptions `(position, count)`. Counts are in `1 ..= 2^31 - 1`.
pub fn counts_to_stream(counts: &[u32], out: &mut [u16], exceptions: &mut Vec<(u32, u32)>) {
    assert_eq!(out.len(), counts.len(), "one stream value per count");
    for (j, (&c, o)) in counts.iter().zip(out.iter_mut()).enumerate() {
        if c > u32::from(u16::MAX) {
            *o = u16::MAX;
            exceptions.push((j as u32, c));
        } else {
            *o = c as u16;
        }
    }
}

//! The row kernels' reference: plain code that defines what every backend
//! computes (the vector tables run this very code, compiled for their
//! instruction set).

#[cfg(doc)]
use crate::kernels::rows::RowKernels;

/// Reference for [`RowKernels::place`].
#[inline(always)]
pub fn place(
    marks: &[u64],
    before: &mut [u32],
    (columns, counts): (&[u32], &[u32]),
    (out_columns, out_counts): (&mut [i32], &mut [u32]),
) {
    assert_eq!(
        before.len(),
        marks.len(),
        "place: `before` needs one entry per word of `marks`"
    );
    let n = columns.len();
    assert!(
        counts.len() == n && out_columns.len() == n && out_counts.len() == n,
        "place: the columns, their counts and both outputs must be as long"
    );
    let mut total = 0u32;
    for (b, &word) in before.iter_mut().zip(marks) {
        *b = total;
        total += word.count_ones();
    }
    for (&col, &c) in columns.iter().zip(counts) {
        let w = (col >> 6) as usize;
        let below = marks[w] & ((1u64 << (col & 63)) - 1);
        let at = (before[w] + below.count_ones()) as usize;
        out_columns[at] = col as i32;
        out_counts[at] = c;
    }
}

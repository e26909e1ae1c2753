//! The row kernels' reference: plain code that defines what every backend
//! computes (the vector tables run this very code, compiled for their
//! instruction set).

#[cfg(doc)]
use crate::kernels::rows::RowKernels;

/// Reference for [`RowKernels::ranks`].
#[inline(always)]
pub fn ranks(marks: &[u64], before: &mut [u32], columns: &[u32], at: &mut [u32]) {
    assert_eq!(
        before.len(),
        marks.len(),
        "ranks: `before` needs one entry per word of `marks`"
    );
    assert_eq!(
        at.len(),
        columns.len(),
        "ranks: `at` needs one entry per column"
    );
    let mut total = 0u32;
    for (b, &word) in before.iter_mut().zip(marks) {
        *b = total;
        total += word.count_ones();
    }
    for (a, &col) in at.iter_mut().zip(columns) {
        let w = (col >> 6) as usize;
        let below = marks[w] & ((1u64 << (col & 63)) - 1);
        *a = before[w] + below.count_ones();
    }
}

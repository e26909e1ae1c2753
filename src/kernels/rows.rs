//! Row kernels: where each gene of a row lands once the row is put in
//! column order (a corpus member's genes mapped into the vocabulary, whose
//! order is not the member's).
//!
//! A row's output columns are marked in a bitmap, a bit per column;
//! [`RowKernels::ranks`] then counts, for each column, the marked columns
//! before it: the bits of the words before its word (a running count over
//! the words), plus the bits below it in its own word. That is a fixed
//! amount of work per gene and per 64 columns, with no branch on the data,
//! and almost all of it is counting the bits of a word.
//!
//! # Backends
//!
//! The vector tables run the reference's own code, compiled for their
//! instruction set: on x86-64 that brings `popcnt` (a word's bits counted in
//! one instruction, where the portable build spends a dozen), on AArch64 the
//! NEON bit count. The ranks are integers, so every table gives the
//! reference's result; the property tests check it anyway, as for every
//! family.
//!
//! The reference is [`crate::kernels::reference::rows`].

use super::dispatch::{kernel_entry, kernel_tables, Isa, Level};
use super::reference::rows as scalar;

/// The row kernels of one [`Isa`]; reach one through
/// [`KernelTable`](super::KernelTable).
#[derive(Debug)]
pub struct RowKernels {
    isa: Isa,
    ranks: fn(&[u64], &mut [u32], &[u32], &mut [u32]),
}

impl RowKernels {
    /// The place of each of `columns` in its row put in column order:
    /// `at[i]` is the number of bits of `marks` (a bit per column, every one
    /// of `columns` marked) below bit `columns[i]`. `before[w]` is left
    /// holding the bits of the words before word `w`.
    ///
    /// # Panics
    ///
    /// If `before` is not as long as `marks`, `at` not as long as `columns`,
    /// or a column lies past the bits of `marks` (on every backend alike).
    pub fn ranks(&self, marks: &[u64], before: &mut [u32], columns: &[u32], at: &mut [u32]) {
        (self.ranks)(marks, before, columns, at)
    }
}

/// The reference table.
static SCALAR: RowKernels = RowKernels {
    isa: Isa::PORTABLE,
    ranks: scalar::ranks,
};

/// The reference's code, compiled for the ISA of the token (unused but for
/// its type: holding one proves the CPU runs the ISA).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn ranks<S>(_: S, marks: &[u64], before: &mut [u32], columns: &[u32], at: &mut [u32]) {
    scalar::ranks(marks, before, columns, at)
}

/// Defines the table `$name`: the reference compiled for one ISA.
macro_rules! rows_table {
    ($name:ident, $level:ident, $features:literal, $token:ty) => {
        static $name: RowKernels = {
            kernel_entry!($features, $token, fn ranks_entry(marks: &[u64], before: &mut [u32], columns: &[u32], at: &mut [u32]) = ranks);
            RowKernels {
                isa: Isa::compiled_for(Level::$level),
                ranks: ranks_entry,
            }
        };
    };
}

kernel_tables!(RowKernels, SCALAR, rows_table);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::KernelTable;

    #[test]
    fn ranks_count_the_marked_columns_before_each() {
        // Columns 3, 64, 70 and 200 marked; asked in any order.
        let mut marks = [0u64; 4];
        for c in [3u32, 64, 70, 200] {
            marks[(c >> 6) as usize] |= 1 << (c & 63);
        }
        for k in RowKernels::available() {
            let (mut before, mut at) = ([9u32; 4], [9u32; 4]);
            k.ranks(&marks, &mut before, &[200, 3, 70, 64], &mut at);
            assert_eq!(at, [3, 0, 2, 1], "{}", k.isa());
            assert_eq!(before, [0, 1, 3, 3], "{}", k.isa());
        }
    }
}

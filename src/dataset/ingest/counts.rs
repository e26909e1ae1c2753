//! What every input shares: turning stored values into counts, bounding
//! declared sizes by the bytes behind them, and the [`Rows`] that the writer
//! is fed from.

use std::path::Path;

use crate::csr::Csr;
use crate::error::{Error, Result};

/// A stored value as a count: `Some(0)` for a stored zero (dropped), `None`
/// for anything that is not a non-negative integer up to 2^31 - 1 (a float
/// that is exactly integral is a count).
pub(crate) fn count(v: f64) -> Option<u32> {
    (v.fract() == 0.0 && (0.0..=i32::MAX as f64).contains(&v)).then_some(v as u32)
}

/// The error for a value that is not a count, naming where it is.
pub(crate) fn not_a_count(source: &str, cell: u64, gene: u64, value: f64) -> Error {
    Error::Input(format!(
        "{source}: cell {cell}, gene {gene}: value {value} is not a count (a non-negative integer up to 2^31-1)"
    ))
}

/// Declared numbers of cells (or elements of a dataset read whole) below
/// this are believed whatever the input's size (a table of this many
/// 8-byte entries costs 128 MiB).
const CLAIM_FLOOR: u64 = 1 << 24;

/// Declared numbers of genes below this are believed whatever the input's
/// size. A build keeps about 220 bytes per gene (totals, statistics, the
/// vocabulary), so this many cost about 230 MiB, where [`CLAIM_FLOOR`]'s
/// 2^24 cost 3.7 GiB; real inputs have tens of thousands of genes, and a
/// peak matrix of millions has the bytes to show for them.
const GENE_CLAIM_FLOOR: u64 = 1 << 20;

/// Refuses a declared number of cells or elements that the input's bytes
/// cannot back: every item above [`CLAIM_FLOOR`] must be paid for by at
/// least one byte of input. A 60-byte file declaring four billion cells
/// would otherwise make the converter allocate or write per claimed item.
pub(crate) fn check_claim(source: &str, what: &str, claimed: u64, input_bytes: u64) -> Result<()> {
    claim_within(
        source,
        what,
        claimed,
        CLAIM_FLOOR.max(input_bytes),
        input_bytes,
    )
}

/// [`check_claim`] for genes (or features), above [`GENE_CLAIM_FLOOR`]: a
/// 300-byte `.npz` declaring 2^31 genes made the converter ask for 16 GiB.
pub(crate) fn check_gene_claim(
    source: &str,
    what: &str,
    claimed: u64,
    input_bytes: u64,
) -> Result<()> {
    claim_within(
        source,
        what,
        claimed,
        GENE_CLAIM_FLOOR.max(input_bytes),
        input_bytes,
    )
}

fn claim_within(source: &str, what: &str, claimed: u64, most: u64, input_bytes: u64) -> Result<()> {
    if claimed > most {
        return Err(Error::Input(format!(
            "{source}: declares {claimed} {what}, more than its {input_bytes} bytes can describe"
        )));
    }
    Ok(())
}

/// The size of a file, for [`check_claim`].
pub(crate) fn file_bytes(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| Error::io(path.display().to_string(), e))
}

/// Blocks of consecutive cells, in cell order, as CSR over source genes with
/// stored zeros dropped.
pub(crate) trait Rows {
    /// The next block, `None` after the last cell.
    fn next_block(&mut self) -> Result<Option<Csr<u32>>>;

    /// Before the first block: moves to cell `cell` where the input can get
    /// there without reading what lies before, and returns the cell the next
    /// block starts at (at most `cell`; 0 where the input cannot seek).
    fn seek(&mut self, cell: u64) -> Result<u64> {
        let _ = cell;
        Ok(0)
    }
}

/// Adds each nonzero of `block` to its gene's total.
pub(crate) fn add_totals(totals: &mut [f64], block: &Csr<u32>) {
    for (&g, &v) in block.indices.iter().zip(&block.values) {
        totals[g as usize] += f64::from(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_non_negative_integral_and_int32() {
        assert_eq!(count(0.0), Some(0));
        assert_eq!(count(7.0), Some(7));
        assert_eq!(count(i32::MAX as f64), Some(i32::MAX as u32));
        for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY, 2f64.powi(31)] {
            assert_eq!(count(bad), None, "{bad}");
        }
    }

    #[test]
    fn claims_need_bytes_above_the_floor() {
        assert!(check_claim("f", "cells", CLAIM_FLOOR, 10).is_ok());
        assert!(check_claim("f", "cells", CLAIM_FLOOR + 1, CLAIM_FLOOR + 1).is_ok());
        let err = check_claim("f", "cells", 4_294_967_295, 60).unwrap_err();
        assert!(err.to_string().contains("4294967295 cells"), "{err}");
        assert!(check_gene_claim("f", "genes", GENE_CLAIM_FLOOR, 10).is_ok());
        assert!(check_gene_claim("f", "genes", GENE_CLAIM_FLOOR + 1, 10).is_err());
        assert!(check_gene_claim("f", "genes", 3 << 20, 3 << 20).is_ok());
    }
}

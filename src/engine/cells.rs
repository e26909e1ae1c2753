//! Cell selections: which cells a read or a batch wants, in what order.
//!
//! A selection is a list of runs of consecutive cell ids, so a range is one
//! run however many cells it holds, and a scan of 10^8 cells costs a few
//! words. Order and duplicates are kept: row `i` of the output is the
//! selection's `i`-th cell.

use std::ops::Range;

/// Cells to read, in output order (duplicates allowed), as runs of
/// consecutive ids. Build one from a list of ids, a range or a boolean mask;
/// `&[u64]`, `Vec<u64>` and `Range<u64>` convert into one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CellSelection {
    /// `(first id, number of cells)` of each run; no run is empty.
    runs: Vec<(u64, u64)>,
}

impl CellSelection {
    /// The cells of `list`, in order (duplicates kept): each id that follows
    /// its predecessor extends the run.
    pub fn ids(list: &[u64]) -> CellSelection {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &c in list {
            match runs.last_mut() {
                Some((first, len)) if first.checked_add(*len) == Some(c) => *len += 1,
                _ => runs.push((c, 1)),
            }
        }
        CellSelection { runs }
    }

    /// The cells `range` (none when it is empty).
    pub fn range(range: Range<u64>) -> CellSelection {
        CellSelection {
            runs: if range.end > range.start {
                vec![(range.start, range.end - range.start)]
            } else {
                Vec::new()
            },
        }
    }

    /// The cells whose entry of `mask` is true, in id order (`mask[i]` is
    /// cell `i`; a mask shorter than the dataset selects none of the rest).
    pub fn mask(mask: &[bool]) -> CellSelection {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut at = 0usize;
        while at < mask.len() {
            let Some(start) = mask[at..].iter().position(|&m| m).map(|p| at + p) else {
                break;
            };
            let len = mask[start..].iter().take_while(|&&m| m).count();
            runs.push((start as u64, len as u64));
            at = start + len;
        }
        CellSelection { runs }
    }

    /// Adds the run of `len` cells from `first` after the others (extending
    /// the last run where it continues it).
    pub(crate) fn push_run(&mut self, first: u64, len: u64) {
        if len == 0 {
            return;
        }
        match self.runs.last_mut() {
            Some((f, l)) if f.checked_add(*l) == Some(first) => *l += len,
            _ => self.runs.push((first, len)),
        }
    }

    /// Number of cells (rows of the output).
    pub fn len(&self) -> u64 {
        self.runs.iter().map(|&(_, len)| len).sum()
    }

    /// Whether no cell is selected.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The runs: `(first id, number of cells)`, in output order.
    pub fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }

    /// The first cell id at or past `n_cells`, if any.
    pub fn first_outside(&self, n_cells: u64) -> Option<u64> {
        self.runs
            .iter()
            .find(|&&(first, len)| first.saturating_add(len) > n_cells)
            .map(|&(first, _)| first.max(n_cells))
    }

    /// Every cell id, in output order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs
            .iter()
            .flat_map(|&(first, len)| (first..=u64::MAX).take(len as usize))
    }
}

impl From<&[u64]> for CellSelection {
    fn from(ids: &[u64]) -> CellSelection {
        CellSelection::ids(ids)
    }
}

impl<const N: usize> From<&[u64; N]> for CellSelection {
    fn from(ids: &[u64; N]) -> CellSelection {
        CellSelection::ids(ids)
    }
}

impl<const N: usize> From<[u64; N]> for CellSelection {
    fn from(ids: [u64; N]) -> CellSelection {
        CellSelection::ids(&ids)
    }
}

impl From<&Vec<u64>> for CellSelection {
    fn from(ids: &Vec<u64>) -> CellSelection {
        CellSelection::ids(ids)
    }
}

impl From<Vec<u64>> for CellSelection {
    fn from(ids: Vec<u64>) -> CellSelection {
        CellSelection::ids(&ids)
    }
}

impl From<Range<u64>> for CellSelection {
    fn from(range: Range<u64>) -> CellSelection {
        CellSelection::range(range)
    }
}

impl From<&CellSelection> for CellSelection {
    fn from(cells: &CellSelection) -> CellSelection {
        cells.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_consecutive_ids_and_keep_order_and_duplicates() {
        let cells = CellSelection::ids(&[5, 6, 7, 3, 3, 4, 9, u64::MAX]);
        assert_eq!(cells.runs, [(5, 3), (3, 1), (3, 2), (9, 1), (u64::MAX, 1)]);
        assert_eq!(
            cells.iter().collect::<Vec<_>>(),
            [5, 6, 7, 3, 3, 4, 9, u64::MAX]
        );
        assert_eq!(cells.len(), 8);
        assert_eq!(cells.first_outside(10), Some(u64::MAX));
        assert_eq!(CellSelection::ids(&[1, 2]).first_outside(3), None);
        assert_eq!(CellSelection::ids(&[1, 2]).first_outside(2), Some(2));
        // A range is one run, however long.
        assert_eq!(
            CellSelection::range(10..1 << 40).runs,
            [(10, (1 << 40) - 10)]
        );
        assert_eq!(CellSelection::range(4..4), CellSelection::default());
    }

    #[test]
    fn masks_select_the_true_entries_as_runs() {
        let mask = [
            false, true, true, false, true, false, false, true, true, true,
        ];
        let cells = CellSelection::mask(&mask);
        assert_eq!(cells.runs(), [(1, 2), (4, 1), (7, 3)]);
        let expected: Vec<u64> = (0..10).filter(|&i| mask[i as usize]).collect();
        assert_eq!(cells.iter().collect::<Vec<_>>(), expected);
        assert!(CellSelection::mask(&[false; 4]).is_empty());
        assert_eq!(CellSelection::mask(&[true; 3]), CellSelection::range(0..3));
    }
}

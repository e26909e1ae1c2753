//! [`RowMapper`]: rows through a [`GeneSelection`], put in the order of
//! their output columns.

use std::sync::OnceLock;

use super::{GeneSelection, Lookup};
use crate::kernels::rows::RowKernels;
use crate::kernels::{Count, KernelTable};

/// Rows through a gene selection: each row's kept genes renumbered to their
/// output columns and put in column order, with scratch reused row after row.
///
/// A row is taken in ([`RowMapper::take`]), then written out
/// ([`RowMapper::emit`]), so the output may overwrite the row it came from
/// (a decoded chunk mapped in place, or a row decoded into its batch). A
/// selection in gene order (a monotone one) keeps the row's order, and is
/// taken by the row kernels' `select`, which looks a register of genes up at
/// a time. Any other is taken the same way, then marks each kept gene's
/// column in a bitmap, a bit per output column; a running count of the
/// bits before each word then gives every gene its place in the row (the
/// bits below its column), and it is written there.
/// Every step is a fixed amount of work per gene and per 64 columns, with no
/// branch on the data: sorting the pairs costs a log factor per gene, and
/// reading the bits back one by one a mispredicted branch per word (each
/// several times the decode of a gene). Rows spread thinly over many columns
/// are sorted instead.
#[derive(Debug)]
pub(crate) struct RowMapper<V = i32> {
    /// Places the marked columns ([`RowKernels::place`]).
    kernels: &'static RowKernels,
    /// Marked output columns, a bit each; clear outside `take .. emit`.
    marks: Vec<u64>,
    /// The number of marked columns before each word of `marks`.
    before: Vec<u32>,
    /// Words of `marks` the row taken spans.
    words: usize,
    /// Output column of each kept gene of the row taken, in the row's order
    /// (when selected or marked).
    columns: Vec<u32>,
    /// The count of each of `columns`.
    counts: Vec<V>,
    /// Where the row taken is.
    taken: Taken,
    /// `(column, count)` of the row taken, in column order, when sorted.
    pairs: Vec<(i32, V)>,
}

/// Where a [`RowMapper`] holds the row it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Taken {
    /// In `pairs`, in column order.
    Pairs,
    /// In `columns` and `counts`, in column order (a monotone selection's).
    Selected,
    /// In `columns` and `counts`, in the row's order, their columns marked.
    Marked,
}

impl<V> Default for RowMapper<V> {
    /// A mapper on the best row kernels this CPU runs (every table gives
    /// the same rows; the choice changes only the speed).
    fn default() -> Self {
        RowMapper::new(best_row_kernels())
    }
}

/// The richest row kernel table this CPU runs, found once (every table
/// gives the same results; the choice changes only the speed).
pub(crate) fn best_row_kernels() -> &'static RowKernels {
    static BEST: OnceLock<&'static RowKernels> = OnceLock::new();
    BEST.get_or_init(|| {
        RowKernels::available()
            .last()
            .copied()
            .unwrap_or_else(RowKernels::scalar)
    })
}

impl<V> RowMapper<V> {
    /// A mapper whose ranks `kernels` count.
    pub(crate) fn new(kernels: &'static RowKernels) -> RowMapper<V> {
        RowMapper {
            kernels,
            marks: Vec::new(),
            before: Vec::new(),
            words: 0,
            columns: Vec::new(),
            counts: Vec::new(),
            taken: Taken::Pairs,
            pairs: Vec::new(),
        }
    }
}

impl<V: Count> RowMapper<V> {
    /// Takes in a row (`genes` ascending, with `counts`) through
    /// `selection`; returns how many of its genes are kept.
    pub(crate) fn take(&mut self, selection: &GeneSelection, genes: &[i32], counts: &[V]) -> usize {
        let n_cols = selection.n_cols as usize;
        let n = genes.len().min(counts.len());
        self.pairs.clear();
        if selection.monotone {
            self.taken = Taken::Selected;
            return self.select(selection, &genes[..n], &counts[..n]);
        }
        self.taken = Taken::Pairs;
        if n_cols / 64 > 4 * genes.len() {
            self.pairs.extend(
                genes
                    .iter()
                    .zip(counts)
                    .filter_map(|(&g, &c)| selection.column(g).map(|col| (col, c))),
            );
            self.pairs.sort_unstable_by_key(|p| p.0);
            return self.pairs.len();
        }
        self.words = n_cols.div_ceil(64);
        if self.marks.len() < self.words {
            self.marks.resize(self.words, 0);
            self.before.resize(self.words, 0);
        }
        if self.take_every_gene(selection, &genes[..n], &counts[..n]) {
            return n;
        }
        // The kept genes found as for a monotone selection, then only
        // their columns marked. Looked up and marked one by one, with a
        // branch on each gene's column, CSR batches over a vocabulary of
        // 2,000 genes out of gene order ran 10% slower.
        let kept = self.select(selection, &genes[..n], &counts[..n]);
        let marks = &mut self.marks[..self.words];
        for &col in &self.columns {
            marks[(col >> 6) as usize] |= 1u64 << (col & 63);
        }
        self.taken = Taken::Marked;
        kept
    }

    /// Keeps the row's genes that `selection` keeps, in the row's order,
    /// as `columns` and `counts`: the row kernels' `select`, a register of
    /// genes looked up at a time. Returns how many.
    fn select(&mut self, selection: &GeneSelection, genes: &[i32], counts: &[V]) -> usize {
        self.columns.resize(genes.len(), 0);
        self.counts.resize(genes.len(), V::default());
        let kept = selection.keep_row(
            genes,
            bytemuck::cast_slice(counts),
            bytemuck::cast_slice_mut(&mut self.columns),
            bytemuck::cast_slice_mut(&mut self.counts),
        );
        self.columns.truncate(kept);
        self.counts.truncate(kept);
        kept
    }

    /// Takes in a row through a mapping that keeps every gene (a corpus
    /// member's genes all in the vocabulary, the common case): no gene is
    /// dropped, so the counts are copied whole and every column is marked.
    /// `false` (nothing taken) for any other selection, or a gene outside
    /// the dataset.
    fn take_every_gene(&mut self, selection: &GeneSelection, genes: &[i32], counts: &[V]) -> bool {
        let Lookup::Dense {
            first: 0, table, ..
        } = &selection.lookup
        else {
            return false;
        };
        if !selection.total {
            return false;
        }
        let mut outside = false;
        self.columns.clear();
        self.columns.extend(genes.iter().map(|&g| {
            let col = table.get(g as u32 as usize).copied().unwrap_or(-1);
            outside |= col < 0;
            col as u32
        }));
        if outside {
            return false;
        }
        let marks = &mut self.marks[..self.words];
        for &col in &self.columns {
            marks[(col >> 6) as usize] |= 1u64 << (col & 63);
        }
        self.counts.clear();
        self.counts.extend_from_slice(counts);
        self.taken = Taken::Marked;
        true
    }

    /// Writes the row taken last to the front of `out_genes` and
    /// `out_counts` (each at least as long as the genes kept), in column order.
    pub(crate) fn emit(&mut self, out_genes: &mut [i32], out_counts: &mut [V]) {
        let kept = match self.taken {
            Taken::Pairs => self.pairs.len(),
            Taken::Selected | Taken::Marked => self.columns.len(),
        };
        let (out_genes, out_counts) = (&mut out_genes[..kept], &mut out_counts[..kept]);
        match std::mem::replace(&mut self.taken, Taken::Pairs) {
            Taken::Pairs => {
                for ((g, c), &(col, count)) in out_genes
                    .iter_mut()
                    .zip(out_counts.iter_mut())
                    .zip(&self.pairs)
                {
                    *g = col;
                    *c = count;
                }
            }
            Taken::Selected => {
                out_genes.copy_from_slice(bytemuck::cast_slice(&self.columns));
                out_counts.copy_from_slice(&self.counts);
            }
            Taken::Marked => {
                let marks = &mut self.marks[..self.words];
                self.kernels.place(
                    marks,
                    &mut self.before[..self.words],
                    (&self.columns, bytemuck::cast_slice(&self.counts)),
                    (out_genes, bytemuck::cast_slice_mut(out_counts)),
                );
                marks.fill(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_map_into_column_order_whichever_way() {
        // A mapping of 200 genes onto 5000 columns, in reverse and with
        // every third gene dropped; rows dense (the bitmap) and sparse (the
        // sort).
        let columns: Vec<Option<u32>> = (0..200u32)
            .map(|g| (g % 3 != 0).then_some(4999 - 20 * g))
            .collect();
        let reverse = GeneSelection::mapping(200, &columns, 5000).unwrap();
        let forward = GeneSelection::new(200, &(0..200).step_by(2).collect::<Vec<_>>()).unwrap();
        let mut mapper = RowMapper::default();
        for selection in [&reverse, &forward] {
            for row in [(0..200).collect::<Vec<i32>>(), vec![1, 7, 198]] {
                let counts: Vec<i32> = row.iter().map(|g| g * 10 + 1).collect();
                let mut want: Vec<(i32, i32)> = row
                    .iter()
                    .zip(&counts)
                    .filter_map(|(&g, &c)| selection.column(g).map(|col| (col, c)))
                    .collect();
                want.sort_unstable();
                let kept = mapper.take(selection, &row, &counts);
                let (mut genes, mut values) = (vec![-5; kept + 1], vec![-5; kept + 1]);
                mapper.emit(&mut genes, &mut values);
                let got: Vec<(i32, i32)> = genes[..kept]
                    .iter()
                    .copied()
                    .zip(values[..kept].iter().copied())
                    .collect();
                assert_eq!(got, want);
                assert_eq!((genes[kept], values[kept]), (-5, -5));
                // In place, with float counts: the row overwritten by itself.
                let mut floats = RowMapper::<f32>::default();
                let (mut genes, mut values): (Vec<i32>, Vec<f32>) =
                    (row.clone(), counts.iter().map(|&c| c as f32).collect());
                assert_eq!(floats.take(selection, &genes, &values), kept);
                floats.emit(&mut genes, &mut values);
                let got: Vec<(i32, i32)> = genes[..kept]
                    .iter()
                    .zip(&values[..kept])
                    .map(|(&g, &v)| (g, v as i32))
                    .collect();
                assert_eq!(got, want);
            }
        }
        // The marks are clear again: a second row sees none of the first.
        let (mut genes, mut values) = ([0; 1], [0; 1]);
        assert_eq!(mapper.take(&reverse, &[2], &[9]), 1);
        mapper.emit(&mut genes, &mut values);
        assert_eq!((genes, values), ([4959], [9]));
    }
}

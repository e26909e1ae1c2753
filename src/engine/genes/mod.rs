//! Gene selections: keep some output columns, renumbered `0..k` in the order
//! given, or mapped into a wider space of columns (a corpus vocabulary) where
//! the columns no gene lands on read as zeros.

mod mapper;

use crate::error::{Error, Result};

pub(crate) use mapper::{best_row_kernels, RowMapper};

/// Which genes to keep and where each lands.
///
/// Sized by the selection, never by the dataset: a few genes of a 2^31-gene
/// dataset cost a few words, not a table entry per dataset gene.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneSelection {
    /// Gene -> output column.
    lookup: Lookup,
    /// The kept genes, in output column order.
    genes: Vec<u32>,
    /// Output columns: `genes.len()` for a selection, the width of the
    /// space for a mapping.
    n_cols: u32,
    /// Genes of the dataset this selection was built for.
    n_genes: u32,
    /// Whether output columns increase with gene index (rows then need no re-sort).
    monotone: bool,
    /// Whether every gene of the dataset has a column (rows keep their length).
    total: bool,
}

/// Gene -> output column, in memory proportional to the selection.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Lookup {
    /// A direct table over the selection's span `first..first + table.len()`
    /// (-1: dropped), used while the span is at most [`DENSE_SPAN_PER_GENE`]
    /// times the selection (or [`DENSE_SPAN_MIN`]): one load per lookup.
    /// `marks` has a bit per gene of the span, set where it is kept: a
    /// 32nd of the table, so that counting a row's kept genes reads memory
    /// that stays in L1.
    Dense {
        first: u32,
        table: Vec<i32>,
        marks: Vec<u32>,
        /// Whether the selection keeps at most [`THIN`] of its span: rows
        /// are then looked up through the marks first (see
        /// [`GeneSelection::keep_row`]).
        thin: bool,
    },
    /// `(gene, column)` sorted by gene, searched: for selections spread thinly
    /// over a wide dataset.
    Sparse(Vec<(u32, i32)>),
}

/// A dense selection keeping at most one gene in this many of its span
/// is thin. A 2,000-gene vocabulary of a 36,000-gene dataset keeps one in
/// 18, and about two in five of a cell's genes (highly variable genes are
/// expressed a lot): on such rows the row kernels' `select_marked` took
/// 0.33-0.36 ns a gene against `select`'s 0.42-0.45 (AVX-512), 0.41 against
/// 0.52 (AVX2).
const THIN: usize = 4;

/// A dense table may span this many genes per selected gene...
const DENSE_SPAN_PER_GENE: usize = 16;
/// ...or this many in all, whichever is larger (512 KiB of table): any
/// selection from a dataset of up to 131,072 genes (every gene space of the
/// field) is looked up directly, in a table that stays in L2, whereas a
/// search per nonzero costs more than decoding it.
const DENSE_SPAN_MIN: usize = 1 << 17;

impl GeneSelection {
    /// Keeps `genes` (columns of the dataset), which become output columns `0..k`
    /// in the order given. Duplicates and out-of-range genes are errors.
    pub fn new(n_genes: u32, genes: &[u32]) -> Result<GeneSelection> {
        if let Some(&g) = genes.iter().find(|&&g| g >= n_genes) {
            return Err(Error::Input(format!("gene {g} is outside 0..{n_genes}")));
        }
        let pairs: Vec<(u32, i32)> = genes
            .iter()
            .enumerate()
            .map(|(k, &g)| (g, k as i32))
            .collect();
        GeneSelection::from_pairs(n_genes, genes.len() as u32, pairs)
    }

    /// Maps the dataset's genes into `n_cols` output columns: gene `g` lands
    /// on column `columns[g]`, or is dropped where that is `None`; a column
    /// no gene lands on is zero in every row. How a dataset reads in a
    /// corpus vocabulary wider than its genes. Two genes on one column, a
    /// column past `n_cols`, or `columns` not one entry per gene are errors.
    pub fn mapping(n_genes: u32, columns: &[Option<u32>], n_cols: u32) -> Result<GeneSelection> {
        if columns.len() != n_genes as usize {
            return Err(Error::Input(format!(
                "a gene mapping of {} entries for {n_genes} genes",
                columns.len()
            )));
        }
        if let Some(c) = columns.iter().flatten().find(|&&c| c >= n_cols) {
            return Err(Error::Input(format!(
                "gene mapping column {c} is outside 0..{n_cols}"
            )));
        }
        let pairs: Vec<(u32, i32)> = columns
            .iter()
            .enumerate()
            .filter_map(|(g, c)| c.map(|c| (g as u32, c as i32)))
            .collect();
        GeneSelection::from_pairs(n_genes, n_cols, pairs)
    }

    /// The selection of `(gene, column)` pairs (genes in range, columns
    /// below `n_cols`): repeated genes or columns are errors.
    fn from_pairs(n_genes: u32, n_cols: u32, mut pairs: Vec<(u32, i32)>) -> Result<GeneSelection> {
        let mut by_column = pairs.clone();
        by_column.sort_unstable_by_key(|p| p.1);
        if let Some(w) = by_column.windows(2).find(|w| w[0].1 == w[1].1) {
            return Err(Error::Input(format!(
                "genes {} and {} both land on column {}",
                w[0].0, w[1].0, w[0].1
            )));
        }
        let genes: Vec<u32> = by_column.iter().map(|p| p.0).collect();
        pairs.sort_unstable();
        if let Some(w) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Error::Input(format!("gene {} is selected twice", w[0].0)));
        }
        let monotone = pairs.windows(2).all(|w| w[0].1 < w[1].1);
        let total = pairs.len() == n_genes as usize;
        let dense_limit = (DENSE_SPAN_PER_GENE * pairs.len()).max(DENSE_SPAN_MIN);
        let lookup = match (pairs.first(), pairs.last()) {
            (Some(&(first, _)), Some(&(last, _))) if ((last - first) as usize) < dense_limit => {
                let span = (last - first) as usize + 1;
                let mut table = vec![-1i32; span];
                let mut marks = vec![0u32; span.div_ceil(32)];
                for &(g, k) in &pairs {
                    let i = (g - first) as usize;
                    table[i] = k;
                    marks[i >> 5] |= 1 << (i & 31);
                }
                Lookup::Dense {
                    first,
                    table,
                    marks,
                    thin: pairs.len() * THIN <= span,
                }
            }
            _ => Lookup::Sparse(pairs),
        };
        Ok(GeneSelection {
            lookup,
            genes,
            n_cols,
            n_genes,
            monotone,
            total,
        })
    }

    /// This mapping followed by `then` (a selection over this one's output
    /// columns): each kept gene lands where `then` puts its column.
    pub fn then(&self, then: &GeneSelection) -> Result<GeneSelection> {
        if then.n_genes() != self.len() {
            return Err(Error::Input(format!(
                "gene selection built for {} genes, the columns are {}",
                then.n_genes(),
                self.len()
            )));
        }
        let pairs = self
            .kept()
            .into_iter()
            .filter_map(|(g, c)| then.column(c).map(|k| (g, k)))
            .collect();
        GeneSelection::from_pairs(self.n_genes, then.n_cols, pairs)
    }

    /// Every kept `(gene, output column)`, by gene.
    fn kept(&self) -> Vec<(u32, i32)> {
        match &self.lookup {
            Lookup::Dense { first, table, .. } => table
                .iter()
                .enumerate()
                .filter(|&(_, &k)| k >= 0)
                .map(|(i, &k)| (first + i as u32, k))
                .collect(),
            Lookup::Sparse(pairs) => pairs.clone(),
        }
    }

    /// Keeps the genes named `names`, looked up in `var_names` (the dataset's
    /// gene names in column order). Unknown or ambiguous names are errors.
    pub fn by_names(var_names: &[String], names: &[&str]) -> Result<GeneSelection> {
        let genes = names_to_genes(var_names, names)?
            .into_iter()
            .zip(names)
            .map(|(g, n)| g.ok_or_else(|| Error::Input(format!("no gene named {n:?}"))))
            .collect::<Result<Vec<_>>>()?;
        GeneSelection::new(var_names.len() as u32, &genes)
    }

    /// The vocabulary `names` (output column `k` is `names[k]`) over the
    /// genes `var_names`: a name the dataset lacks is a column of zeros
    /// (a [`GeneSelection::mapping`]), where [`GeneSelection::by_names`]
    /// refuses it. Ambiguous or repeated names are errors.
    pub fn by_names_or_zero(var_names: &[String], names: &[&str]) -> Result<GeneSelection> {
        let mut columns = vec![None; var_names.len()];
        for (k, (gene, name)) in names_to_genes(var_names, names)?
            .into_iter()
            .zip(names)
            .enumerate()
        {
            if let Some(g) = gene {
                if columns[g as usize].replace(k as u32).is_some() {
                    return Err(Error::Input(format!("gene name {name:?} is listed twice")));
                }
            }
        }
        GeneSelection::mapping(var_names.len() as u32, &columns, names.len() as u32)
    }

    /// Number of output columns (for a mapping, more than the genes kept).
    pub fn len(&self) -> usize {
        self.n_cols as usize
    }

    /// Whether there is no output column.
    pub fn is_empty(&self) -> bool {
        self.n_cols == 0
    }

    /// The kept genes in output column order.
    pub fn genes(&self) -> &[u32] {
        &self.genes
    }

    /// Keeps the selected genes of a row's `genes`, with their `counts`, at
    /// the front of `columns` (their output columns) and `kept` (their
    /// counts), in the row's order; returns how many. Both outputs hold at
    /// least `genes.len()`. The kind of lookup is chosen once per row; a
    /// dense table is looked up by the row kernels' `select` (a register of
    /// genes gathered and compressed at a time), or `select_marked` when
    /// thin (the marks read first, and only the kept genes gathered), a
    /// sparse one a gene at a time, every gene written and the next written
    /// over it unless kept, so there is no branch per gene. A negative gene, read as `u32`, lies
    /// past every selected gene (all below `2^31`), so it is dropped with no
    /// check of its own.
    pub(crate) fn keep_row(
        &self,
        genes: &[i32],
        counts: &[u32],
        columns: &mut [i32],
        kept: &mut [u32],
    ) -> usize {
        match &self.lookup {
            Lookup::Dense {
                first,
                table,
                marks,
                thin,
            } => {
                let kernels = best_row_kernels();
                let out = (columns, kept);
                if *thin && kernels.selects_by_marks() {
                    kernels.select_marked(table, marks, *first, genes, counts, out)
                } else {
                    kernels.select(table, *first, genes, counts, out)
                }
            }
            Lookup::Sparse(pairs) => {
                let (columns, kept) = (&mut columns[..genes.len()], &mut kept[..genes.len()]);
                let mut n = 0;
                for (&g, &c) in genes.iter().zip(counts) {
                    let k = sparse_column(pairs, g as u32);
                    columns[n] = k;
                    kept[n] = c;
                    n += usize::from(k >= 0);
                }
                n
            }
        }
    }

    /// [`GeneSelection::keep_row`] for a caller that looks each kept gene's
    /// column up as it places it (a dense row's scatter): where the lookup
    /// is a thin dense table read by its marks, the kept genes' offsets
    /// into the table go to the front of `offsets` (their columns are
    /// `table[offset]`) and their counts to `kept`, and the table and their
    /// number are returned; `None` otherwise (nothing written; `keep_row`
    /// then). Both outputs hold at least `genes.len()`.
    pub(crate) fn keep_offsets(
        &self,
        genes: &[i32],
        counts: &[u32],
        offsets: &mut [i32],
        kept: &mut [u32],
    ) -> Option<(&[i32], usize)> {
        let kernels = best_row_kernels();
        match &self.lookup {
            Lookup::Dense {
                first,
                table,
                marks,
                thin: true,
            } if kernels.selects_by_marks() => {
                let k = kernels.marked(table.len(), marks, *first, genes, counts, (offsets, kept));
                Some((table, k))
            }
            _ => None,
        }
    }

    /// How many of a row's `genes` are kept: a bit of the marks per gene
    /// for a dense lookup, counted by the row kernels a register of genes
    /// at a time (a negative gene, read as `u32`, lies past the span), a
    /// search per gene for a sparse one.
    pub(crate) fn count_kept(&self, genes: &[i32]) -> usize {
        match &self.lookup {
            Lookup::Dense { first, marks, .. } => {
                best_row_kernels().count_marked(marks, *first, genes)
            }
            Lookup::Sparse(pairs) => genes
                .iter()
                .filter(|&&g| sparse_column(pairs, g as u32) >= 0)
                .count(),
        }
    }

    /// Output column of `gene`, or -1 when it is not kept: the form a loop
    /// that keeps genes without a branch per gene takes.
    #[inline]
    pub(crate) fn column_or_dropped(&self, gene: i32) -> i32 {
        let Ok(gene) = u32::try_from(gene) else {
            return -1;
        };
        match &self.lookup {
            Lookup::Dense { first, table, .. } => dense_column(*first, table, gene),
            Lookup::Sparse(pairs) => sparse_column(pairs, gene),
        }
    }

    /// Output column of `gene`, if kept.
    #[inline]
    pub fn column(&self, gene: i32) -> Option<i32> {
        let column = self.column_or_dropped(gene);
        (column >= 0).then_some(column)
    }

    /// Whether output columns increase with gene index.
    pub fn is_monotone(&self) -> bool {
        self.monotone
    }

    /// Whether every gene of the dataset is kept, so that a mapped row is as
    /// long as stored (and can be mapped where it was decoded).
    pub(crate) fn keeps_every_gene(&self) -> bool {
        self.total
    }

    /// Number of dataset genes this selection was built for.
    pub fn n_genes(&self) -> usize {
        self.n_genes as usize
    }
}

/// The column of each of `names` in `var_names` (`None`: no such gene);
/// a name `var_names` holds twice is an error.
fn names_to_genes(var_names: &[String], names: &[&str]) -> Result<Vec<Option<u32>>> {
    let mut index = std::collections::HashMap::with_capacity(var_names.len());
    for (i, n) in var_names.iter().enumerate() {
        index
            .entry(n.as_str())
            .and_modify(|v: &mut Option<u32>| *v = None)
            .or_insert(Some(i as u32));
    }
    names
        .iter()
        .map(|&n| match index.get(n) {
            Some(Some(i)) => Ok(Some(*i)),
            Some(None) => Err(Error::Input(format!(
                "gene name {n:?} appears more than once in var_names"
            ))),
            None => Ok(None),
        })
        .collect()
}

/// The column of `gene` in a dense table over genes `first..` (-1: dropped,
/// or outside the table, which `gene - first` wraps past when below it).
#[inline]
fn dense_column(first: u32, table: &[i32], gene: u32) -> i32 {
    table
        .get(gene.wrapping_sub(first) as usize)
        .copied()
        .unwrap_or(-1)
}

/// The column of `gene` in sorted `(gene, column)` pairs (-1: not there).
#[inline]
fn sparse_column(pairs: &[(u32, i32)], gene: u32) -> i32 {
    pairs
        .binary_search_by_key(&gene, |p| p.0)
        .map_or(-1, |i| pairs[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_and_refuses() {
        let s = GeneSelection::new(10, &[7, 2]).unwrap();
        assert_eq!(
            (s.column(7), s.column(2), s.column(3)),
            (Some(0), Some(1), None)
        );
        assert!(!s.is_monotone());
        assert!(GeneSelection::new(10, &[10]).is_err());
        assert!(GeneSelection::new(10, &[1, 1]).is_err());
        let names: Vec<String> = ["A", "B", "A", "C"].iter().map(|s| s.to_string()).collect();
        assert_eq!(
            GeneSelection::by_names(&names, &["C", "B"])
                .unwrap()
                .genes(),
            &[3, 1]
        );
        assert!(GeneSelection::by_names(&names, &["A"]).is_err());
        assert!(GeneSelection::by_names(&names, &["Z"]).is_err());
        let vocab = GeneSelection::by_names_or_zero(&names, &["Z", "C", "B"]).unwrap();
        assert_eq!(
            (vocab.len(), vocab.column(3), vocab.column(1)),
            (3, Some(1), Some(2))
        );
        assert_eq!((vocab.column(0), vocab.column(2)), (None, None));
        assert!(GeneSelection::by_names_or_zero(&names, &["A"]).is_err());
        assert!(GeneSelection::by_names_or_zero(&names, &["C", "C"]).is_err());
    }

    #[test]
    fn wide_and_narrow_selections_map_alike() {
        // The last gene of the widest dataset (2^31 genes) and a few others:
        // the sparse form; a run of neighbours: the dense form.
        let last = (1u32 << 31) - 1;
        let wide = GeneSelection::new(1 << 31, &[last, 5, 1 << 30]).unwrap();
        assert!(matches!(wide.lookup, Lookup::Sparse(_)));
        let narrow = GeneSelection::new(1 << 31, &[last, last - 7, last - 3]).unwrap();
        assert!(matches!(narrow.lookup, Lookup::Dense { .. }));
        for (s, want) in [
            (&wide, [(last, 0), (5, 1), (1 << 30, 2)]),
            (&narrow, [(last, 0), (last - 7, 1), (last - 3, 2)]),
        ] {
            for (g, k) in want {
                assert_eq!(s.column(g as i32), Some(k), "gene {g}");
            }
            for g in [0u32, 4, 6, last - 1, last - 4, (1 << 30) + 1] {
                assert_eq!(s.column(g as i32), None, "gene {g}");
            }
            assert_eq!(s.column(-1), None);
            assert_eq!(s.n_genes(), 1 << 31);
        }
        // A row through each form: the kept genes, in the row's order, with
        // their counts; genes outside the selection (negative, past the
        // dense table either way) dropped.
        let row: Vec<i32> = [0, 5, last - 7, last - 4, last - 3, 1 << 30, last]
            .iter()
            .map(|&g| g as i32)
            .chain([-1])
            .collect();
        let counts: Vec<u32> = (1..=row.len() as u32).collect();
        for s in [&wide, &narrow] {
            let (mut columns, mut kept) = (vec![9; row.len()], vec![9; row.len()]);
            let n = s.keep_row(&row, &counts, &mut columns, &mut kept);
            let want: Vec<(i32, u32)> = row
                .iter()
                .zip(&counts)
                .filter_map(|(&g, &c)| s.column(g).map(|k| (k, c)))
                .collect();
            assert_eq!(n, want.len());
            assert_eq!(s.count_kept(&row), n);
            let got: Vec<(i32, u32)> = columns[..n]
                .iter()
                .copied()
                .zip(kept[..n].iter().copied())
                .collect();
            assert_eq!(got, want);
        }
        assert!(GeneSelection::new(1 << 31, &[1 << 31]).is_err());
        assert!(GeneSelection::new(1 << 31, &[last, 3, last]).is_err());
        let empty = GeneSelection::new(1 << 31, &[]).unwrap();
        assert!(empty.is_empty() && empty.column(0).is_none());
        assert_eq!(empty.count_kept(&row), 0);
    }

    #[test]
    fn count_kept_counts_the_genes_keep_row_keeps() {
        // Dense spans of several words, their first and last genes and the
        // genes just outside them, and every gene of a small dataset; thin
        // selections (looked up through their marks) and others.
        let n_genes = 1_000;
        let every: Vec<i32> = (-3..n_genes as i32 + 3).collect();
        let mut thin = 0;
        for genes in [
            vec![0u32],
            vec![999],
            vec![64, 63, 127, 128],
            (100..300).step_by(3).collect(),
            (5..n_genes).step_by(7).rev().collect(),
            (0..n_genes).rev().collect(),
        ] {
            let s = GeneSelection::new(n_genes, &genes).unwrap();
            let Lookup::Dense { thin: is_thin, .. } = s.lookup else {
                panic!("a dense table");
            };
            thin += usize::from(is_thin);
            let mut scratch = (vec![0; every.len()], vec![0; every.len()]);
            let counts = bytemuck::cast_slice(&every);
            let kept = s.keep_row(&every, counts, &mut scratch.0, &mut scratch.1);
            assert_eq!((s.count_kept(&every), kept), (genes.len(), genes.len()));
            let want: Vec<(i32, u32)> = every
                .iter()
                .filter_map(|&g| s.column(g).map(|k| (k, g as u32)))
                .collect();
            let got: Vec<(i32, u32)> = scratch.0[..kept]
                .iter()
                .copied()
                .zip(scratch.1[..kept].iter().copied())
                .collect();
            assert_eq!(got, want);
            for &g in &every {
                let one = usize::from(genes.contains(&(g as u32)) && g >= 0);
                assert_eq!(s.count_kept(&[g]), one, "gene {g}");
            }
        }
        assert_eq!(thin, 2);
    }

    #[test]
    fn mappings_are_wider_than_their_genes_and_compose() {
        // Genes 0..4 into 6 columns: gene 1 dropped, columns 0, 2 and 5 empty.
        let m = GeneSelection::mapping(4, &[Some(4), None, Some(1), Some(3)], 6).unwrap();
        assert_eq!((m.len(), m.genes()), (6, &[2, 3, 0][..]));
        let columns: Vec<Option<i32>> = (0..4).map(|g| m.column(g)).collect();
        assert_eq!(columns, [Some(4), None, Some(1), Some(3)]);
        assert!(!m.is_monotone());
        assert!(GeneSelection::mapping(2, &[Some(0), Some(1)], 2)
            .unwrap()
            .is_monotone());
        // Then columns 3 and 4, swapped: gene 0 -> 1, gene 3 -> 0.
        let pick = GeneSelection::new(6, &[3, 4]).unwrap();
        let both = m.then(&pick).unwrap();
        let columns: Vec<Option<i32>> = (0..4).map(|g| both.column(g)).collect();
        assert_eq!(columns, [Some(1), None, None, Some(0)]);
        assert_eq!((both.len(), both.n_genes()), (2, 4));
        assert!(m.then(&GeneSelection::new(5, &[0]).unwrap()).is_err());
        assert!(GeneSelection::mapping(2, &[Some(1), Some(1)], 3).is_err());
        assert!(GeneSelection::mapping(2, &[Some(3), None], 3).is_err());
        assert!(GeneSelection::mapping(3, &[None], 3).is_err());
    }
}

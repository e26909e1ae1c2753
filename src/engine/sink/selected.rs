//! Any output over a gene selection: each row's kept genes, renumbered
//! into the selection's columns, sized before the rows are decoded.

use rayon::prelude::*;

use crate::engine::genes::{GeneSelection, RowMapper};
use crate::engine::transform::count_total;
use crate::error::{Error, Result};

use super::{AddedRows, Sink, SinkPart};

/// The offsets of `rows` once `selection` keeps some of their genes (a
/// first 0, then the running total of kept genes after each row), into
/// `kept`: what sizes the rows of an output over a selection. The output
/// is sized before its rows are decoded in parallel, so this would hold
/// every decode thread up: the rows are counted in parallel (on the
/// engine's pool, where a read of many rows is sized), each with the
/// selection's marks (a bit per gene, in L1) rather than its table of
/// columns. Counted one by one, on the thread laying out the batches, with
/// a lookup per gene in the table, the count took 15-18% of a profile of
/// normalized CSR batches over 2,000 genes.
pub(crate) fn kept_offsets(
    selection: &GeneSelection,
    rows: &AddedRows<'_>,
    kept: &mut Vec<i64>,
) -> Result<()> {
    kept.clear();
    kept.resize(rows.len() + 1, 0);
    let count = |(r, k): (usize, &mut i64)| {
        let genes = rows.genes(r).ok_or_else(|| {
            Error::Input("a gene selection needs each row's genes to size its rows".into())
        })?;
        *k = selection.count_kept(genes) as i64;
        Ok::<(), Error>(())
    };
    // In parallel only on a pool's thread (a large read is sized on the
    // engine's pool), never handing a small read's rows to another pool.
    if rayon::current_thread_index().is_some() {
        kept[1..]
            .par_iter_mut()
            .enumerate()
            .with_min_len(ROWS_PER_COUNT)
            .try_for_each(count)?;
    } else {
        kept[1..].iter_mut().enumerate().try_for_each(count)?;
    }
    for r in 1..kept.len() {
        kept[r] += kept[r - 1];
    }
    Ok(())
}

/// Rows [`kept_offsets`] counts in one piece of work: a few thousand
/// genes each, so a piece outweighs handing it to a thread.
const ROWS_PER_COUNT: usize = 16;

/// Any output over a gene selection: each row keeps the selected genes,
/// renumbered to their output columns (`0..k` in the selection's order) and
/// sorted by column, and goes on to `inner`, which sees `k` columns.
pub struct Selected<'g, S> {
    inner: S,
    genes: &'g GeneSelection,
    kept: Vec<i64>,
}

impl<'g, S: Sink> Selected<'g, S> {
    /// `inner` over the genes of `genes`.
    pub fn new(inner: S, genes: &'g GeneSelection) -> Selected<'g, S> {
        Selected {
            inner,
            genes,
            kept: Vec::new(),
        }
    }

    /// The output rows went to.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Sink> Sink for Selected<'_, S> {
    type Part<'p>
        = SelectedPart<'p, S::Part<'p>>
    where
        Self: 'p;

    fn stores_rows(&self) -> bool {
        false
    }

    fn start(&mut self, _n_cols: u32) {
        self.inner.start(self.genes.len() as u32);
    }

    fn sizes_rows(&self) -> bool {
        self.inner.sizes_rows()
    }

    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        if self.genes.keeps_every_gene() || !self.inner.sizes_rows() {
            // Every row keeps its stored length, or the output's rows have
            // a fixed width: no row needs counting.
            return self.inner.extend(&AddedRows::new(rows.stored_offsets()));
        }
        kept_offsets(self.genes, rows, &mut self.kept)?;
        self.inner.extend(&AddedRows::new(&self.kept))
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<Self::Part<'_>> {
        let genes = self.genes;
        self.inner
            .split(cuts)
            .into_iter()
            .map(|inner| SelectedPart {
                inner,
                genes,
                columns: Vec::new(),
                counts: Vec::new(),
                mapper: RowMapper::default(),
            })
            .collect()
    }
}

/// Rows of a [`Selected`] output.
pub struct SelectedPart<'g, P> {
    inner: P,
    genes: &'g GeneSelection,
    columns: Vec<i32>,
    counts: Vec<i32>,
    mapper: RowMapper,
}

impl<P: SinkPart> SinkPart for SelectedPart<'_, P> {
    type Value = P::Value;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [P::Value])> {
        None
    }

    /// The row over the selected genes; an inner part that divides by the
    /// cells' totals gets the whole row's, which the kept genes may fall
    /// short of (a corpus member's tokens, read through its mapping).
    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        let total = self.inner.uses_totals().then(|| count_total(counts));
        self.write_selected(row, (genes, counts), total);
    }

    fn uses_totals(&self) -> bool {
        self.inner.uses_totals()
    }

    fn write_mapped_row(&mut self, row: usize, genes: &[i32], counts: &[i32], total: u64) {
        self.write_selected(row, (genes, counts), Some(total));
    }

    fn prefetch_edges(&self) {
        self.inner.prefetch_edges()
    }
}

impl<P: SinkPart> SelectedPart<'_, P> {
    /// Writes the selected genes of a row to the inner part, with `total`
    /// when it takes one.
    fn write_selected(
        &mut self,
        row: usize,
        (genes, counts): (&[i32], &[i32]),
        total: Option<u64>,
    ) {
        self.columns.resize(genes.len(), 0);
        self.counts.resize(genes.len(), 0);
        let kept = self.mapper.take(self.genes, genes, counts);
        self.mapper.emit(&mut self.columns, &mut self.counts);
        let (columns, counts) = (&self.columns[..kept], &self.counts[..kept]);
        match total {
            Some(total) => self.inner.write_mapped_row(row, columns, counts, total),
            None => self.inner.write_row(row, columns, counts),
        }
    }
}

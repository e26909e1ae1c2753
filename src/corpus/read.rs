//! Reading any cells of a corpus: the request of [`Dataset::read`], made of
//! one read per member the cells come from, all into one output.
//!
//! The output is started once over the vocabulary's genes (or the selected
//! ones). The cells are cut into *groups*: consecutive output rows from one
//! member. Each group is a read of that member's cells through its gene
//! mapping ([`GeneSelection::mapping`], composed with the request's gene
//! selection), appended to the output by the one read pipeline. Before the
//! first group runs, every later group's tiles are handed to its member's
//! I/O stage, so the members' fetches overlap each other and the decoding;
//! each group decodes on the whole shared pool.
//!
//! [`Dataset::read`]: crate::Dataset::read

use std::borrow::Cow;

use super::Corpus;
use crate::csr::Csr;
use crate::dataset::Dataset;
use crate::dataset::{as_f32, csr_batch, dense_batch, CsrBatch, DenseBatch, ReadStats};
use crate::engine::{CellSelection, Dense, GeneSelection, Sink, Transform, Transformed, ValueSink};
use crate::error::{Error, Result};
use crate::kernels::DecodedCount;

/// A read request over a corpus: cells, options, then the output (see the
/// module docs).
#[must_use = "a read does nothing until its output is chosen"]
pub struct CorpusRead<'a> {
    corpus: &'a Corpus,
    cells: CellSelection,
    genes: Option<&'a GeneSelection>,
    transform: Transform,
    cached: bool,
}

impl<'a> CorpusRead<'a> {
    /// Keeps only the vocabulary genes of `genes` (renumbered `0..k` in its
    /// order); `None` keeps every gene.
    pub fn genes(mut self, genes: impl Into<Option<&'a GeneSelection>>) -> CorpusRead<'a> {
        self.genes = genes.into();
        self
    }

    /// Divides each cell by its total over all of its member's genes (before
    /// the vocabulary mapping and the gene selection, which may drop some)
    /// and multiplies by `target_sum`, as [`crate::dataset::Read::normalize`]
    /// does for a dataset: the output holds `f32` values.
    pub fn normalize(mut self, target_sum: f64) -> CorpusRead<'a> {
        self.transform = self.transform.normalize(target_sum);
        self
    }

    /// Takes `ln(1 + x)` of every value (after normalizing): the output
    /// holds `f32` values.
    pub fn log1p(mut self) -> CorpusRead<'a> {
        self.transform = self.transform.log1p();
        self
    }

    /// Neither reads nor fills the members' caches.
    pub fn uncached(mut self) -> CorpusRead<'a> {
        self.cached = false;
        self
    }

    /// The rows as CSR with counts of type `V` (`f32` or `i32`).
    pub fn csr<V: DecodedCount>(self) -> Result<CsrBatch<V>> {
        csr_batch(&self.cells, |out| self.csr_into(out))
    }

    /// The rows into `out`, reusing its allocations.
    pub fn csr_into<V: DecodedCount>(&self, out: &mut Csr<V>) -> Result<ReadStats> {
        if self.transform.is_identity() {
            return self.run(out);
        }
        self.run_transformed(as_f32::<Csr<V>, Csr<f32>>(out)?)
    }

    /// The rows as dense row-major values of type `V`.
    pub fn dense<V: DecodedCount>(self) -> Result<DenseBatch<V>> {
        dense_batch(&self.cells, |out| {
            if self.transform.is_identity() {
                return self.run(out);
            }
            self.run_transformed(as_f32::<Dense<V>, Dense<f32>>(out)?)
        })
    }

    /// The rows into any output (see [`Sink`]). Counts as stored: a
    /// transform writes into [`CorpusRead::csr`] or [`CorpusRead::dense`]
    /// outputs only.
    pub fn into_sink<S: Sink>(self, sink: S) -> Result<ReadStats> {
        if !self.transform.is_identity() {
            return Err(Error::Input(
                "a normalized or log1p read writes CSR or dense f32 rows, not a custom output"
                    .into(),
            ));
        }
        self.run(sink)
    }

    /// Whether the read normalizes or takes logs of the counts.
    pub(crate) fn transformed(&self) -> bool {
        !self.transform.is_identity()
    }

    /// The corpus, the cells, and whether a gene selection is set.
    pub(crate) fn request(&self) -> (&'a Corpus, &CellSelection, bool) {
        (self.corpus, &self.cells, self.genes.is_some())
    }

    fn run<S: Sink>(&self, mut sink: S) -> Result<ReadStats> {
        sink.start(self.width()?);
        self.each_group(|dataset, cells, genes| {
            dataset.read_started(cells, genes, self.cached, &mut sink)
        })
    }

    /// The output's columns: the selection's, else the vocabulary's (the
    /// selection checked against the vocabulary).
    fn width(&self) -> Result<u32> {
        let corpus = self.corpus;
        if let Some(g) = self.genes {
            corpus.check_selection(g)?;
        }
        Ok(self.genes.map_or(corpus.n_genes(), |g| g.len() as u32))
    }

    /// Runs `read` on each group (see the module docs) with its member's
    /// dataset, its cells and the member's genes into the output's columns
    /// (`None`: the vocabulary's first, in order), the later groups' tiles
    /// handed to their members' I/O stages first.
    fn each_group(
        &self,
        mut read: impl FnMut(&Dataset, &CellSelection, Option<&GeneSelection>) -> Result<ReadStats>,
    ) -> Result<ReadStats> {
        let corpus = self.corpus;
        let groups = corpus.groups(&self.cells)?;
        if self.cached {
            for (m, cells) in groups.iter().skip(1) {
                corpus.members()[*m].dataset().prefetch_cells(cells);
            }
        }
        // Each member's genes into the output, made once per read.
        let mut mappings: Vec<Option<Option<Cow<'_, GeneSelection>>>> =
            vec![None; corpus.members().len()];
        let mut stats = ReadStats::default();
        for (m, cells) in &groups {
            let member = &corpus.members()[*m];
            if mappings[*m].is_none() {
                mappings[*m] = Some(corpus.member_genes(*m, self.genes)?);
            }
            let genes = mappings[*m].as_ref().and_then(|g| g.as_deref());
            let done = read(member.dataset(), cells, genes);
            stats.add(done.map_err(Error::in_member(member.location()))?);
        }
        Ok(stats)
    }
}

impl CorpusRead<'_> {
    /// The transformed rows into `out`, started once: each group's rows
    /// reach it whole, over all of their member's genes (so each cell's
    /// total counts every one of them), and are mapped into the output's
    /// columns and transformed there, as a dataset's transformed read
    /// selects its genes.
    fn run_transformed<S: ValueSink>(&self, mut out: S) -> Result<ReadStats> {
        self.transform.check()?;
        out.start_values(self.width()?);
        self.each_group(|dataset, cells, genes| {
            let sink = Transformed::new(&mut out, genes, self.transform);
            dataset.read_started(cells, None, self.cached, sink)
        })
    }
}

impl Corpus {
    /// A read of `cells` (corpus cell ids in any order, duplicates kept; a
    /// range; a mask): choose its options, then its output, as for
    /// [`crate::Dataset::read`]. Columns are the vocabulary's genes.
    pub fn read(&self, cells: impl Into<CellSelection>) -> CorpusRead<'_> {
        CorpusRead {
            corpus: self,
            cells: cells.into(),
            genes: None,
            transform: Transform::NONE,
            cached: true,
        }
    }

    /// Checks that `genes` was built for the vocabulary.
    pub(crate) fn check_selection(&self, genes: &GeneSelection) -> Result<()> {
        if genes.n_genes() != self.n_genes() as usize {
            return Err(Error::Input(format!(
                "gene selection built for {} genes, the corpus has {}",
                genes.n_genes(),
                self.n_genes()
            )));
        }
        Ok(())
    }

    /// Member `m`'s genes into the output: its mapping into the vocabulary,
    /// then `genes` (a selection of vocabulary genes) when given; `None`
    /// when it reads unmapped.
    pub(crate) fn member_genes<'a>(
        &'a self,
        m: usize,
        genes: Option<&'a GeneSelection>,
    ) -> Result<Option<Cow<'a, GeneSelection>>> {
        let mapping = self.members()[m].mapping();
        Ok(match (mapping, genes) {
            (None, None) => None,
            (None, Some(g)) => Some(Cow::Borrowed(g)),
            (Some(map), None) => Some(Cow::Borrowed(map)),
            (Some(map), Some(g)) => Some(Cow::Owned(map.then(g)?)),
        })
    }

    /// `cells` cut into groups of consecutive output rows from one member,
    /// in output order: `(member, its local cells)`.
    pub(crate) fn groups(&self, cells: &CellSelection) -> Result<Vec<(usize, CellSelection)>> {
        let limits = self.limits();
        if let Some(cell) = cells.first_outside(self.n_cells()) {
            return Err(Error::Input(format!(
                "cell {cell} is outside 0..{}",
                self.n_cells()
            )));
        }
        let mut groups: Vec<(usize, CellSelection)> = Vec::new();
        for &(first, len) in cells.runs() {
            let (mut at, end) = (first, first + len);
            while at < end {
                let m = limits.partition_point(|&l| l <= at) - 1;
                let stop = end.min(limits[m + 1]);
                match groups.last_mut() {
                    Some((last, group)) if *last == m => group.push_run(at - limits[m], stop - at),
                    _ => {
                        let mut group = CellSelection::default();
                        group.push_run(at - limits[m], stop - at);
                        groups.push((m, group));
                    }
                }
                at = stop;
            }
        }
        Ok(groups)
    }
}

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
use crate::dataset::source;
use crate::dataset::{Dataset, Read, ReadStats};
use crate::engine::{CellSelection, GeneSelection};
use crate::error::{Error, Result};

/// A read request over a corpus: a [`Read`] whose source is the corpus
/// (see the module docs).
pub type CorpusRead<'a> = Read<'a, Corpus>;

impl source::Source for Corpus {
    const KIND: &'static str = "corpus";

    /// The vocabulary's.
    fn n_genes(&self) -> u32 {
        Corpus::n_genes(self)
    }

    /// One read a group (see the module docs), each with its member's
    /// genes into the output's columns (`None`: the vocabulary's first, in
    /// order), the later groups' tiles handed to their members' I/O stages
    /// first.
    fn each_group(
        &self,
        cells: &CellSelection,
        genes: Option<&GeneSelection>,
        cached: bool,
        read: &mut source::Groups<'_>,
    ) -> Result<ReadStats> {
        let groups = self.groups(cells)?;
        if cached {
            for (m, cells) in groups.iter().skip(1) {
                self.members()[*m].dataset().prefetch_cells(cells);
            }
        }
        // Each member's genes into the output, made once per read.
        let mut mappings: Vec<Option<Option<Cow<'_, GeneSelection>>>> =
            vec![None; self.members().len()];
        let mut stats = ReadStats::default();
        for (m, cells) in &groups {
            let member = &self.members()[*m];
            if mappings[*m].is_none() {
                mappings[*m] = Some(self.member_genes(*m, genes)?);
            }
            let genes = mappings[*m].as_ref().and_then(|g| g.as_deref());
            let done = read(member.dataset(), cells, genes);
            stats.add(done.map_err(Error::in_member(member.location()))?);
        }
        Ok(stats)
    }

    fn as_dataset(&self) -> Option<&Dataset> {
        None
    }
}

impl Corpus {
    /// A read of `cells` (corpus cell ids in any order, duplicates kept; a
    /// range; a mask): choose its options, then its output, as for
    /// [`crate::Dataset::read`]. Columns are the vocabulary's genes.
    pub fn read(&self, cells: impl Into<CellSelection>) -> CorpusRead<'_> {
        Read::new(self, cells.into())
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

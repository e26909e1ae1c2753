//! Per-gene statistics of a corpus ([`Corpus::gene_stats`]): each member's,
//! over its own genes, placed in the vocabulary's columns and merged.

use super::Corpus;
use crate::dataset::gene_stats::{GeneStats, VAR_NAMES_KEY};
use crate::error::{Error, Result};

impl Corpus {
    /// The statistics of every cell of every member over the vocabulary's
    /// genes, with the formulas of [`crate::dataset::gene_stats`]: each
    /// member's cells are counted over its own genes (a cell's normalized
    /// counts divide by its total over all of them, as in that member's
    /// own statistics), then put in the vocabulary's columns
    /// ([`GeneStats::into_columns`]: a gene a member lacks counts its cells
    /// as zeros) and merged, exactly.
    pub fn gene_stats(&self) -> Result<GeneStats> {
        let own = self
            .members()
            .iter()
            .map(|member| {
                member
                    .dataset()
                    .gene_stats()
                    .map_err(Error::in_member(member.location()))
            })
            .collect::<Result<Vec<_>>>()?;
        self.gene_stats_from(&own)
    }

    /// The gene key column of the corpus's statistics: its name (the
    /// corpus's gene key, else [`VAR_NAMES_KEY`], as for a dataset's var
    /// names) and the vocabulary, in column order.
    pub fn gene_keys(&self) -> (String, Vec<String>) {
        let key = self.spec().gene_key.as_deref().unwrap_or(VAR_NAMES_KEY);
        (key.to_string(), self.var_names().to_vec())
    }

    /// [`Corpus::gene_stats`] from each member's statistics over its own
    /// genes (in member order), computed elsewhere: by tasks on other
    /// processes, say, whose shares of a member were merged first.
    pub fn gene_stats_from(&self, members: &[GeneStats]) -> Result<GeneStats> {
        if members.len() != self.members().len() {
            return Err(Error::Input(format!(
                "statistics of {} members given for a corpus of {}",
                members.len(),
                self.members().len()
            )));
        }
        let mut all = GeneStats::new(self.n_genes());
        for (m, own) in members.iter().enumerate() {
            let member = &self.members()[m];
            let n_genes = member.dataset().n_genes() as usize;
            if own.n_genes() != n_genes {
                return Err(Error::Input(format!(
                    "statistics of {} genes given for member {} of {n_genes}",
                    own.n_genes(),
                    member.location()
                )));
            }
            // An unmapped member's genes are the vocabulary's first ones.
            let placed = match self.member_genes(m, None)? {
                Some(mapping) => own.into_columns(self.n_genes(), |g| {
                    mapping.column(g as i32).map(|c| c as u32)
                })?,
                None => own.into_columns(self.n_genes(), Some)?,
            };
            all.merge(&placed)?;
        }
        Ok(all)
    }
}

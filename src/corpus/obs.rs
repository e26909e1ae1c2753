//! The obs of a corpus for any cells: each member's columns localized as a
//! single dataset's are, then converted into the unified columns (global
//! category codes, widened types, missing where a member lacks a column, the
//! source column) and gathered in the cells' order.

use std::path::Path;

use arrow_array::{Array, ArrayRef};
use arrow_select::interleave::interleave;

use super::Corpus;
use crate::error::{Error, Result};
use crate::obs::{Label, Labels, LocalObs};

/// Unified obs columns localized for every member: cheap to query for any
/// cells ([`CorpusObs::labels`]).
pub struct CorpusObs {
    corpus: Corpus,
    /// The requested global columns.
    columns: Vec<usize>,
    /// Per member: its localized columns (`None`: it has none of them).
    local: Vec<Option<LocalObs>>,
    /// Per member, per requested column: where in its localized columns
    /// the member's values are (`None`: missing, or the source column).
    at: Vec<Vec<Option<usize>>>,
}

impl Corpus {
    /// Makes the unified obs columns `columns` available for
    /// [`CorpusObs::labels`]: every member's columns among them are
    /// localized (see [`crate::obs::ObsReader::localize`]).
    pub fn localize<S: AsRef<str>>(
        &self,
        columns: &[S],
        cache_dir: Option<&Path>,
    ) -> Result<CorpusObs> {
        let union = self.obs_union();
        let schema = union.schema();
        let mut wanted = Vec::with_capacity(columns.len());
        for name in columns {
            let name = name.as_ref();
            let (c, _) = schema.column(name).ok_or_else(|| {
                Error::Input(format!(
                    "no obs column {name:?} in the corpus (columns: {:?})",
                    schema.names()
                ))
            })?;
            if wanted.contains(&c) {
                return Err(Error::Input(format!("obs column {name:?} requested twice")));
            }
            wanted.push(c);
        }
        let mut local = Vec::with_capacity(self.members().len());
        let mut at = Vec::with_capacity(self.members().len());
        for (m, member) in self.members().iter().enumerate() {
            let reader = member.dataset().obs();
            let mut names: Vec<&str> = Vec::new();
            let mut places = Vec::with_capacity(wanted.len());
            for &c in &wanted {
                let place = match (union.input_column(m, c), reader) {
                    (Some(k), Some(reader)) => {
                        names.push(reader.schema().columns[k].name.as_str());
                        Some(names.len() - 1)
                    }
                    _ => None,
                };
                places.push(place);
            }
            let localized = match reader {
                Some(reader) if !names.is_empty() => Some(
                    reader
                        .localize(&names, cache_dir)
                        .map_err(Error::in_member(member.location()))?,
                ),
                _ => None,
            };
            local.push(localized);
            at.push(places);
        }
        Ok(CorpusObs {
            corpus: self.clone(),
            columns: wanted,
            local,
            at,
        })
    }
}

impl CorpusObs {
    /// The localized columns for exactly `cells` (corpus cell ids, in that
    /// order, duplicates allowed), in the unified columns' types and
    /// vocabularies.
    pub fn labels(&self, cells: &[u64]) -> Result<Labels> {
        let corpus = &self.corpus;
        let n = corpus.members().len();
        // Per member: its local cells; per cell: (member, row among them).
        let mut locals: Vec<Vec<u64>> = vec![Vec::new(); n];
        let mut index = Vec::with_capacity(cells.len());
        for &cell in cells {
            let (m, local) = corpus.locate(cell)?;
            index.push((m, locals[m].len()));
            locals[m].push(local);
        }
        let used: Vec<usize> = (0..n).filter(|&m| !locals[m].is_empty()).collect();
        let mut member_labels = Vec::with_capacity(used.len());
        for &m in &used {
            member_labels.push(match &self.local[m] {
                Some(local) => Some(
                    local
                        .labels(&locals[m])
                        .map_err(Error::in_member(corpus.members()[m].location()))?,
                ),
                None => None,
            });
        }
        let slot: Vec<usize> = {
            let mut slot = vec![0; n];
            for (s, &m) in used.iter().enumerate() {
                slot[m] = s;
            }
            slot
        };
        let index: Vec<(usize, usize)> = index.into_iter().map(|(m, r)| (slot[m], r)).collect();
        let union = corpus.obs_union();
        let columns = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let global = &union.schema().columns[c];
                let parts = used
                    .iter()
                    .zip(&member_labels)
                    .map(|(&m, labels)| {
                        let values = self.at[m][i]
                            .zip(labels.as_ref())
                            .map(|(k, l)| l.columns()[k].values.as_ref());
                        union.remap_values(m, c, values, locals[m].len())
                    })
                    .collect::<Result<Vec<ArrayRef>>>()?;
                let values = match parts.as_slice() {
                    [one] => one.clone(),
                    [] => arrow_array::new_empty_array(&global.arrow_type.data_type()),
                    _ => {
                        let sources: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
                        interleave(&sources, &index).map_err(|e| {
                            Error::Input(format!("gathering obs column {:?}: {e}", global.name))
                        })?
                    }
                };
                Ok(Label {
                    name: global.name.clone(),
                    kind: global.kind,
                    values,
                    categories: global.categories.clone(),
                })
            })
            .collect::<Result<Vec<Label>>>()?;
        Ok(Labels::new(columns))
    }
}

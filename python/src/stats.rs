//! `_deltacells.gene_stats`: a dataset's per-gene statistics as numpy columns
//! (the library's `Dataset::gene_stats`; the package builds the DataFrame),
//! `gene_stats_part`: one task's share as bytes, for tasks on other
//! processes (Dask workers) whose shares `gene_stats` merges, and
//! `corpus_gene_stats`: a corpus's, over its vocabulary.

use deltacells::dataset::gene_stats::gene_keys;
use deltacells::dataset::gene_stats::GeneTable;
use deltacells::dataset::GeneStats;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::corpus::PyCorpus;
use crate::dataset::PyDataset;
use crate::errors::OrRaise;

/// The statistics' columns, in file order, by name.
type Columns<'py> = Vec<(&'static str, Bound<'py, PyAny>)>;

/// `(key name, keys, [(column name, array)])`: the gene key column (the
/// `var.parquet` column `gene_key`, else the var names) and the statistics
/// of every cell, or the merge of `parts` (from [`gene_stats_part`]) when
/// given, computed with the GIL released.
#[pyfunction]
#[pyo3(signature = (dataset, gene_key=None, parts=None))]
pub fn gene_stats<'py>(
    py: Python<'py>,
    dataset: &PyDataset,
    gene_key: Option<String>,
    parts: Option<Vec<Vec<u8>>>,
) -> PyResult<(String, Vec<String>, Columns<'py>)> {
    let ds = dataset.0.get(py)?.clone();
    let (key, keys, table) = py
        .detach(|| {
            // The statistics first: their pass (or each part's) checks the
            // tiles against the manifest before its gene count sizes anything.
            let stats = match parts {
                None => ds.gene_stats()?,
                Some(parts) => merged(ds.n_genes(), &parts)?,
            };
            let (key, keys) = gene_keys(&ds, gene_key.as_deref())?;
            Ok::<_, deltacells::Error>((key, keys, stats.table()))
        })
        .or_raise(py)?;
    Ok((key, keys, columns(py, table)))
}

/// The statistics of cells `start..stop` as bytes, to merge with the other
/// tasks' in [`gene_stats`].
#[pyfunction]
pub fn gene_stats_part<'py>(
    py: Python<'py>,
    dataset: &PyDataset,
    start: u64,
    stop: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let ds = dataset.0.get(py)?.clone();
    let bytes = py
        .detach(|| ds.gene_stats_of(start..stop).map(|s| s.to_bytes()))
        .or_raise(py)?;
    Ok(PyBytes::new(py, &bytes))
}

/// The statistics of `n_genes` genes merged from `parts` (from
/// [`gene_stats_part`]), exactly as one pass over their cells.
fn merged(n_genes: u32, parts: &[Vec<u8>]) -> deltacells::Result<GeneStats> {
    let mut all = GeneStats::new(n_genes);
    for p in parts {
        all.merge(&GeneStats::from_bytes(p)?)?;
    }
    Ok(all)
}

/// The statistics' columns as numpy arrays, in file order.
fn columns(py: Python<'_>, table: GeneTable) -> Columns<'_> {
    let u = |v: Vec<u64>| v.into_pyarray(py).into_any();
    let f = |v: Vec<f64>| v.into_pyarray(py).into_any();
    vec![
        ("n_cells", u(table.n_cells)),
        ("sum", u(table.sum)),
        ("mean", f(table.mean)),
        ("var", f(table.var)),
        ("norm_mean", f(table.norm_mean)),
        ("norm_var", f(table.norm_var)),
        ("norm_median", f(table.norm_median)),
    ]
}

/// `(key name, keys, [(column name, array)])` of a corpus over its
/// vocabulary (keyed as the corpus keys its genes: its `gene_key`, else
/// the var names, in a column named `gene`): every member's statistics
/// placed in the vocabulary's columns and merged, each member's computed
/// here or, when `parts` is given, merged from its shares (`parts[m]`, from
/// [`gene_stats_part`] over member `m`'s own dataset).
#[pyfunction]
#[pyo3(signature = (corpus, parts=None))]
pub fn corpus_gene_stats<'py>(
    py: Python<'py>,
    corpus: &PyCorpus,
    parts: Option<Vec<Vec<Vec<u8>>>>,
) -> PyResult<(String, Vec<String>, Columns<'py>)> {
    let corpus = corpus.0.get(py)?.clone();
    let (key, keys, table) = py
        .detach(|| {
            let stats = match parts {
                None => corpus.gene_stats()?,
                Some(parts) => {
                    if parts.len() != corpus.members().len() {
                        return Err(deltacells::Error::Input(format!(
                            "shares of {} members given for a corpus of {}",
                            parts.len(),
                            corpus.members().len()
                        )));
                    }
                    let members = parts
                        .iter()
                        .zip(corpus.members())
                        .map(|(shares, member)| merged(member.dataset().n_genes(), shares))
                        .collect::<deltacells::Result<Vec<_>>>()?;
                    corpus.gene_stats_from(&members)?
                }
            };
            let (key, keys) = corpus.gene_keys();
            Ok::<_, deltacells::Error>((key, keys, stats.table()))
        })
        .or_raise(py)?;
    Ok((key, keys, columns(py, table)))
}

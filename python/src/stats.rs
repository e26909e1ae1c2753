//! `_deltacells.gene_stats`: a dataset's per-gene statistics as numpy columns
//! (the library's `Dataset::gene_stats`; the package builds the DataFrame),
//! and `gene_stats_part`: one task's share as bytes, for tasks on other
//! processes (Dask workers) whose shares `gene_stats` merges.

use deltacells::dataset::gene_stats::gene_keys;
use deltacells::dataset::GeneStats;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

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
            let (key, keys) = gene_keys(&ds, gene_key.as_deref())?;
            let stats = match parts {
                None => ds.gene_stats()?,
                Some(parts) => {
                    let mut all = GeneStats::new(ds.n_genes());
                    for p in &parts {
                        all.merge(&GeneStats::from_bytes(p)?)?;
                    }
                    all
                }
            };
            Ok::<_, deltacells::Error>((key, keys, stats.table()))
        })
        .or_raise(py)?;
    let u = |v: Vec<u64>| -> Bound<'py, PyAny> { v.into_pyarray(py).into_any() };
    let f = |v: Vec<f64>| -> Bound<'py, PyAny> { v.into_pyarray(py).into_any() };
    let columns = vec![
        ("n_cells", u(table.n_cells)),
        ("sum", u(table.sum)),
        ("mean", f(table.mean)),
        ("var", f(table.var)),
        ("norm_mean", f(table.norm_mean)),
        ("norm_var", f(table.norm_var)),
        ("norm_median", f(table.norm_median)),
    ];
    Ok((key, keys, columns))
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

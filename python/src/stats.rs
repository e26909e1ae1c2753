//! `_deltacells.gene_stats`: a dataset's per-gene statistics as numpy columns
//! (the library's `Dataset::gene_stats`; the package builds the DataFrame).

use deltacells::dataset::gene_stats::gene_keys;
use numpy::IntoPyArray;
use pyo3::prelude::*;

use crate::dataset::PyDataset;
use crate::errors::OrRaise;

/// The statistics' columns, in file order, by name.
type Columns<'py> = Vec<(&'static str, Bound<'py, PyAny>)>;

/// `(key name, keys, [(column name, array)])`: the gene key column (the
/// `var.parquet` column `gene_key`, else the var names) and the statistics
/// of every cell, computed with the GIL released.
#[pyfunction]
#[pyo3(signature = (dataset, gene_key=None))]
pub fn gene_stats<'py>(
    py: Python<'py>,
    dataset: &PyDataset,
    gene_key: Option<String>,
) -> PyResult<(String, Vec<String>, Columns<'py>)> {
    let ds = dataset.get(py)?.clone();
    let (key, keys, table) = py
        .detach(|| {
            let (key, keys) = gene_keys(&ds, gene_key.as_deref())?;
            Ok::<_, deltacells::Error>((key, keys, ds.gene_stats()?.table()))
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

//! `_deltacells.Dataset`: an open dataset and its reads (a [`Handle`]:
//! see `matrix` for what a dataset and a corpus share, and on processes).

use deltacells::dataset::{Dataset, OpenOptions, DEFAULT_CACHE_BYTES};
use deltacells::engine::EngineConfig;
use deltacells::Error;
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::columns;
use crate::errors::OrRaise;
use crate::matrix::{matrix_methods, Handle};

/// An open dataset (see the module docs on processes).
#[pyclass(module = "deltacells._deltacells", name = "Dataset", frozen)]
pub struct PyDataset(pub Handle<Dataset>);

/// `var.parquet` as `(index columns, [(name, column)], [names of the
/// categorical columns whose categories are ordered])`.
type VarColumns<'py> = (Vec<String>, Vec<(String, Bound<'py, PyTuple>)>, Vec<String>);

matrix_methods!(PyDataset {
    /// Opens the dataset at `location` (passed to the engine as given).
    /// `threads`: decode threads (default: all cores); `pin`: pin them to
    /// cores; `cache_bytes`: bound of the cache shared by reads.
    #[new]
    #[pyo3(signature = (location, threads=None, pin=false, cache_bytes=None))]
    fn new(
        py: Python<'_>,
        location: String,
        threads: Option<usize>,
        pin: bool,
        cache_bytes: Option<usize>,
    ) -> PyResult<PyDataset> {
        let options = open_options(threads, pin, cache_bytes);
        let ds = py
            .detach(|| Dataset::open_with(&location, options))
            .or_raise(py)?;
        Ok(PyDataset(Handle::new(ds)))
    }

    /// The manifest's free-form `metadata` object, as JSON text.
    #[getter]
    fn metadata(&self, py: Python<'_>) -> PyResult<String> {
        let metadata = self.0.get(py)?.manifest().metadata.clone();
        Ok(serde_json::Value::Object(metadata).to_string())
    }

    #[getter]
    fn var_names(&self, py: Python<'_>) -> PyResult<Option<Vec<String>>> {
        Ok(self.0.get(py)?.var_names().map(<[String]>::to_vec))
    }

    #[getter]
    fn gene_order<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<i32>>>> {
        Ok(self
            .0
            .get(py)?
            .gene_order()
            .map(|o| o.to_vec().into_pyarray(py)))
    }

    /// `var.parquet` as `(index columns, [(name, column)], [ordered
    /// categorical columns])`, or `None`.
    fn var_table<'py>(&self, py: Python<'py>) -> PyResult<Option<VarColumns<'py>>> {
        let ds = self.0.get(py)?.clone();
        let Some(frame) = py.detach(move || ds.var_table()).or_raise(py)? else {
            return Ok(None);
        };
        let schema = frame.table.schema();
        let cols = schema
            .fields()
            .iter()
            .zip(frame.table.columns())
            .map(|(f, a)| Ok((f.name().clone(), columns::column(py, None, None, a)?)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Some((frame.index_columns, cols, frame.ordered)))
    }

    /// Checks every tile, obs shard and side file; `(tiles, cells, nonzeros, bytes)`.
    fn verify(&self, py: Python<'_>) -> PyResult<(usize, u64, u64, u64)> {
        let ds = self.0.get(py)?.clone();
        let r = py.detach(move || ds.verify()).or_raise(py)?;
        Ok((r.tiles, r.cells, r.nonzeros, r.bytes))
    }
});

/// The options of an open: `threads` decode threads (default: all cores),
/// pinned to cores when `pin`, a cache of `cache_bytes` shared by reads.
pub fn open_options(threads: Option<usize>, pin: bool, cache_bytes: Option<usize>) -> OpenOptions {
    let mut engine = EngineConfig::default().with_pin(pin);
    if let Some(t) = threads {
        engine.threads = t;
    }
    OpenOptions::default()
        .with_engine(engine)
        .with_cache_bytes(cache_bytes.unwrap_or(DEFAULT_CACHE_BYTES))
}

/// Obs column `name` for `cells` (or every cell), in order.
pub fn read_obs_column(
    ds: &Dataset,
    name: &str,
    cells: Option<&[u64]>,
) -> deltacells::Result<(deltacells::obs::ColumnSchema, arrow_array::ArrayRef)> {
    let obs = ds
        .obs()
        .ok_or_else(|| Error::Input("the dataset has no obs".into()))?;
    let schema = obs
        .schema()
        .column(name)
        .map(|(_, c)| c.clone())
        .ok_or_else(|| Error::Input(format!("no obs column {name:?}")))?;
    let tiles = match cells {
        None => 0..ds.n_tiles(),
        Some(cells) => {
            let located = cells
                .iter()
                .map(|&c| ds.locate(c).map(|(t, _)| t))
                .collect::<deltacells::Result<Vec<_>>>()?;
            match (located.iter().min(), located.iter().max()) {
                (Some(&lo), Some(&hi)) => lo..hi + 1,
                _ => 0..0,
            }
        }
    };
    let parts = obs.read_column(name, tiles.clone())?;
    let refs: Vec<&dyn arrow_array::Array> = parts.iter().map(|a| a.as_ref()).collect();
    let whole = if refs.is_empty() {
        arrow_array::new_empty_array(&schema.arrow_type.data_type())
    } else {
        arrow_select::concat::concat(&refs).map_err(|e| Error::Config(e.to_string()))?
    };
    let Some(cells) = cells else {
        return Ok((schema, whole));
    };
    let base = ds.limits()[tiles.start];
    let rows = arrow_array::UInt64Array::from_iter_values(cells.iter().map(|&c| c - base));
    let taken =
        arrow_select::take::take(&whole, &rows, None).map_err(|e| Error::Config(e.to_string()))?;
    Ok((schema, taken))
}

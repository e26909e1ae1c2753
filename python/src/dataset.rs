//! `_deltacells.Dataset`: an open dataset and its reads.
//!
//! A handle belongs to the process that opened it: its decode pool's threads
//! do not survive `fork`, so a forked child that used it would wait forever
//! for work that no thread runs. Every method checks the process id and
//! raises instead; the package's `Dataset` reopens transparently in a child
//! (and never drops the inherited handle there, whose teardown would talk to
//! the missing threads).

use std::sync::{Arc, Mutex, PoisonError};

use deltacells::dataset::{
    BatchConfig, Dataset, GeneSelection, OpenOptions, Pick, Recycler, Shuffle, DEFAULT_CACHE_BYTES,
};
use deltacells::engine::EngineConfig;
use deltacells::kernels::DecodedCount;
use deltacells::Error;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrays;
use crate::batches::PyBatchIter;
use crate::columns;
use crate::errors::{to_py, OrRaise};
use crate::pool::{Buffers, Pooled};

/// An open dataset (see the module docs on processes).
#[pyclass(module = "deltacells._deltacells", name = "Dataset", frozen)]
pub struct PyDataset {
    inner: Arc<Dataset>,
    pid: u32,
    /// Output buffers of range and tile reads, recycled (see [`crate::pool`]).
    buffers: Buffers,
    /// The last batch iterator's recycler: the next epoch starts in the
    /// buffers its batches gave back (see `BatchConfig::recycler`).
    batch_buffers: Mutex<Option<Recycler>>,
}

/// `(name, kind, categories)` of an obs column.
type ObsColumnInfo = (String, &'static str, Option<Vec<String>>);

/// `var.parquet` as `(index columns, [(name, column)])`.
type VarColumns<'py> = (Vec<String>, Vec<(String, Bound<'py, PyTuple>)>);

/// What a read asks for.
enum Rows {
    Cells(Vec<u64>),
    Range(u64, u64),
    Tile(usize),
}

/// Values as float32 (what training wants) or int32 (exact counts).
#[derive(Clone, Copy)]
enum Dtype {
    F32,
    I32,
}

impl Dtype {
    fn parse(name: &str) -> PyResult<Dtype> {
        match name {
            "float32" => Ok(Dtype::F32),
            "int32" => Ok(Dtype::I32),
            other => Err(PyValueError::new_err(format!(
                "dtype must be float32 or int32, not {other:?}"
            ))),
        }
    }
}

/// Non-negative ids from an int64 array.
pub(crate) fn ids(a: &PyReadonlyArray1<'_, i64>, what: &str) -> PyResult<Vec<u64>> {
    a.as_array()
        .iter()
        .map(|&c| {
            u64::try_from(c).map_err(|_| PyValueError::new_err(format!("{what} {c} is negative")))
        })
        .collect()
}

fn read<'py, V: DecodedCount + Pooled>(
    py: Python<'py>,
    ds: &Arc<Dataset>,
    buffers: &Buffers,
    rows: Rows,
    genes: Option<GeneSelection>,
) -> PyResult<Bound<'py, PyTuple>> {
    let range = match rows {
        Rows::Cells(cells) => {
            let batch = py
                .detach(|| ds.read(&cells).genes(genes.as_ref()).csr::<V>())
                .or_raise(py)?;
            return arrays::csr(py, batch.csr).into_pyobject(py);
        }
        Rows::Range(a, b) => a..b,
        Rows::Tile(t) => ds.tile_cells(t).or_raise(py)?,
    };
    // Ranges and tiles (the scans) read into recycled buffers.
    let mut csr = buffers.csr::<V>();
    py.detach(|| ds.read(range).genes(genes.as_ref()).csr_into(&mut csr))
        .or_raise(py)?;
    buffers.arrays(py, csr)?.into_pyobject(py)
}

impl PyDataset {
    /// The dataset, if this process opened it.
    pub fn get(&self, py: Python<'_>) -> PyResult<&Arc<Dataset>> {
        if std::process::id() != self.pid {
            return Err(to_py(
                py,
                Error::Config(
                    "this dataset handle was opened in another process (before a fork); \
                     open the dataset again in this process"
                        .into(),
                ),
            ));
        }
        Ok(&self.inner)
    }

    fn last_batch_buffers(&self) -> std::sync::MutexGuard<'_, Option<Recycler>> {
        self.batch_buffers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn selection(
        &self,
        py: Python<'_>,
        genes: Option<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<Option<GeneSelection>> {
        let Some(genes) = genes else { return Ok(None) };
        let n_genes = self.get(py)?.n_genes();
        let genes: Vec<u32> = ids(&genes, "gene")?
            .into_iter()
            .map(|g| u32::try_from(g).unwrap_or(u32::MAX))
            .collect();
        GeneSelection::new(n_genes, &genes).or_raise(py).map(Some)
    }

    fn read_rows<'py>(
        &self,
        py: Python<'py>,
        rows: Rows,
        genes: Option<PyReadonlyArray1<'_, i64>>,
        dtype: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let genes = self.selection(py, genes)?;
        let ds = self.get(py)?;
        match Dtype::parse(dtype)? {
            Dtype::F32 => read::<f32>(py, ds, &self.buffers, rows, genes),
            Dtype::I32 => read::<i32>(py, ds, &self.buffers, rows, genes),
        }
    }
}

#[pymethods]
impl PyDataset {
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
        let mut engine = EngineConfig::default().with_pin(pin);
        if let Some(t) = threads {
            engine.threads = t;
        }
        let options = OpenOptions::default()
            .with_engine(engine)
            .with_cache_bytes(cache_bytes.unwrap_or(DEFAULT_CACHE_BYTES));
        let ds = py
            .detach(|| Dataset::open_with(&location, options))
            .or_raise(py)?;
        Ok(PyDataset {
            inner: Arc::new(ds),
            pid: std::process::id(),
            buffers: Buffers::default(),
            batch_buffers: Mutex::default(),
        })
    }

    #[getter]
    fn n_obs(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.get(py)?.n_cells())
    }

    #[getter]
    fn n_vars(&self, py: Python<'_>) -> PyResult<u32> {
        Ok(self.get(py)?.n_genes())
    }

    #[getter]
    fn n_tiles(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.get(py)?.n_tiles())
    }

    /// The manifest's free-form `metadata` object, as JSON text.
    #[getter]
    fn metadata(&self, py: Python<'_>) -> PyResult<String> {
        let metadata = self.get(py)?.manifest().metadata.clone();
        Ok(serde_json::Value::Object(metadata).to_string())
    }

    /// First cell of each tile, then `n_obs`.
    #[getter]
    fn limits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        Ok(arrays::cells(py, self.get(py)?.limits().to_vec()))
    }

    #[getter]
    fn var_names(&self, py: Python<'_>) -> PyResult<Option<Vec<String>>> {
        Ok(self.get(py)?.var_names().map(<[String]>::to_vec))
    }

    #[getter]
    fn gene_order<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray1<i32>>>> {
        Ok(self
            .get(py)?
            .gene_order()
            .map(|o| o.to_vec().into_pyarray(py)))
    }

    /// `(name, kind, categories)` of each obs column, in schema order.
    #[getter]
    fn obs_schema(&self, py: Python<'_>) -> PyResult<Vec<ObsColumnInfo>> {
        Ok(self.get(py)?.obs().map_or_else(Vec::new, |o| {
            o.schema()
                .columns
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        c.kind.name(),
                        c.categories.as_ref().map(|v| v.to_vec()),
                    )
                })
                .collect()
        }))
    }

    /// `(threads, pinned, kernel backend)` of the decode pool.
    #[getter]
    fn engine(&self, py: Python<'_>) -> PyResult<(usize, bool, String)> {
        let e = self.get(py)?.engine();
        Ok((e.threads(), e.pinned(), e.backend().to_string()))
    }

    /// `cells` (any order, duplicates allowed; order kept) as CSR arrays
    /// `(indptr, indices, data, n_cols)`, keeping only `genes` when given.
    #[pyo3(signature = (cells, genes=None, dtype="float32"))]
    fn read_cells<'py>(
        &self,
        py: Python<'py>,
        cells: PyReadonlyArray1<'_, i64>,
        genes: Option<PyReadonlyArray1<'_, i64>>,
        dtype: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let cells = ids(&cells, "cell")?;
        self.read_rows(py, Rows::Cells(cells), genes, dtype)
    }

    /// Cells `start..stop` as CSR arrays.
    #[pyo3(signature = (start, stop, genes=None, dtype="float32"))]
    fn read_range<'py>(
        &self,
        py: Python<'py>,
        start: u64,
        stop: u64,
        genes: Option<PyReadonlyArray1<'_, i64>>,
        dtype: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.read_rows(py, Rows::Range(start, stop), genes, dtype)
    }

    /// Every cell of tile `tile` as CSR arrays.
    #[pyo3(signature = (tile, genes=None, dtype="float32"))]
    fn read_tile<'py>(
        &self,
        py: Python<'py>,
        tile: usize,
        genes: Option<PyReadonlyArray1<'_, i64>>,
        dtype: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.read_rows(py, Rows::Tile(tile), genes, dtype)
    }

    /// Obs column `name` for `cells` (all cells when `None`), as
    /// `(kind, values, mask, categories)` (see `columns`).
    #[pyo3(signature = (name, cells=None))]
    fn obs_column<'py>(
        &self,
        py: Python<'py>,
        name: String,
        cells: Option<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let ds = self.get(py)?.clone();
        let cells = cells.map(|c| ids(&c, "cell")).transpose()?;
        let (schema, array) = py
            .detach(move || read_obs_column(&ds, &name, cells.as_deref()))
            .or_raise(py)?;
        columns::column(py, Some(schema.kind), schema.categories.as_ref(), &array)
    }

    /// `var.parquet` as `(index columns, [(name, column)])`, or `None`.
    fn var_table<'py>(&self, py: Python<'py>) -> PyResult<Option<VarColumns<'py>>> {
        let ds = self.get(py)?.clone();
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
        Ok(Some((frame.index_columns, cols)))
    }

    /// Checks every tile, obs shard and side file; `(tiles, cells, nonzeros, bytes)`.
    fn verify(&self, py: Python<'_>) -> PyResult<(usize, u64, u64, u64)> {
        let ds = self.get(py)?.clone();
        let r = py.detach(move || ds.verify()).or_raise(py)?;
        Ok((r.tiles, r.cells, r.nonzeros, r.bytes))
    }

    /// One rank's batches of one epoch, with `dtype` counts (`"float32"` or
    /// `"int32"`): all of them from position `first`, or the `count` batches
    /// from there (how a data-loader worker takes its span). `shuffle` is
    /// what [`Shuffle`] parses (`"none"`, `"block"`, `"random"`); a block
    /// shuffle's windows hold `window_tiles` tiles.
    #[pyo3(signature = (*, batch_size, seed, epoch, shuffle, window_tiles, rank, world_size,
                        drop_last, prefetch, cache_bytes, genes=None, dense=false,
                        obs_columns=Vec::new(), obs_cache_dir=None, first=0, count=None,
                        dtype="float32"))]
    #[allow(clippy::too_many_arguments)]
    fn batches(
        &self,
        py: Python<'_>,
        batch_size: usize,
        seed: u64,
        epoch: u64,
        shuffle: &str,
        window_tiles: usize,
        rank: usize,
        world_size: usize,
        drop_last: bool,
        prefetch: usize,
        cache_bytes: usize,
        genes: Option<PyReadonlyArray1<'_, i64>>,
        dense: bool,
        obs_columns: Vec<String>,
        obs_cache_dir: Option<std::path::PathBuf>,
        first: usize,
        count: Option<usize>,
        dtype: &str,
    ) -> PyResult<PyBatchIter> {
        let dtype = Dtype::parse(dtype)?;
        let shuffle = match shuffle.parse::<Shuffle>() {
            Ok(Shuffle::Block { .. }) => Shuffle::Block { window_tiles },
            Ok(other) => other,
            Err(e) => return Err(PyValueError::new_err(e.to_string())),
        };
        let genes = self.selection(py, genes)?;
        let ds = self.get(py)?.clone();
        let config = BatchConfig::default()
            .with_batch_size(batch_size)
            .with_seed(seed)
            .with_epoch(epoch)
            .with_shuffle(shuffle)
            .with_rank(rank, world_size)
            .with_drop_last(drop_last)
            .with_prefetch(prefetch)
            .with_cache_bytes(cache_bytes)
            .with_genes(genes)
            .with_dense(dense)
            .with_obs_columns(obs_columns)
            .with_obs_cache_dir(obs_cache_dir)
            .with_recycler(self.last_batch_buffers().clone())
            .with_pick(match count {
                Some(count) => Pick::Range(first..first.saturating_add(count)),
                None => Pick::Strided { first, step: 1 },
            });
        let iter = py
            .detach(move || match dtype {
                Dtype::F32 => ds.batches_of::<f32>(config).map(PyBatchIter::from),
                Dtype::I32 => ds.batches_of::<i32>(config).map(PyBatchIter::from),
            })
            .or_raise(py)?;
        *self.last_batch_buffers() = Some(iter.recycler());
        Ok(iter)
    }
}

/// Obs column `name` for `cells` (or every cell), in order.
fn read_obs_column(
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

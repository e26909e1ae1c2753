//! What `_deltacells.Dataset` and `_deltacells.Corpus` share: a [`Matrix`]
//! (a dataset or a corpus, read and batched through the library's own
//! request types) behind a process-bound [`Handle`] that turns Python's
//! arguments into those requests.
//!
//! A handle belongs to the process that opened it: its decode pool's threads
//! do not survive `fork`, so a forked child that used it would wait forever
//! for work that no thread runs. Every method checks the process id and
//! raises instead; the package's classes reopen transparently in a child
//! (and never drop the inherited handle there, whose teardown would talk to
//! the missing threads).

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use deltacells::dataset::{
    BatchConfig, BatchIter, CellSelection, CsrBatch, GeneSelection, ReadStats, Recycler,
};
use deltacells::engine::Engine;
use deltacells::kernels::DecodedCount;
use deltacells::obs::{Label, ObsSchema};
use deltacells::{Corpus, Csr, Dataset, Error};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrays;
use crate::columns;
use crate::errors::{input_error, to_py, OrRaise};
use crate::pool::{Buffers, Pooled};
use crate::tokenize::{PyTokenizer, TokenMatrix};

/// A count matrix Python reads and batches: a dataset, or a corpus of them.
/// Each method is the library's request of that name, so nothing here
/// decodes on its own.
pub trait Matrix: TokenMatrix + Send + Sync + 'static {
    /// Number of rows.
    fn n_cells(&self) -> u64;
    /// Number of columns.
    fn n_genes(&self) -> u32;
    /// The obs schema (`None`: no obs).
    fn obs_schema(&self) -> Option<&ObsSchema>;
    /// Obs column `name` for `cells` (every cell when `None`), in order.
    fn obs_column(&self, name: &str, cells: Option<&[u64]>) -> deltacells::Result<Label>;
    /// First cell of each tile, then the number of cells.
    fn tile_limits(&self) -> Vec<u64>;
    /// The decode pool.
    fn engine(&self) -> &Engine;
    /// `cells` as CSR.
    fn csr<V: DecodedCount>(
        &self,
        cells: CellSelection,
        genes: Option<&GeneSelection>,
    ) -> deltacells::Result<CsrBatch<V>>;
    /// `cells` into `out`, reusing its allocations.
    fn csr_into<V: DecodedCount>(
        &self,
        cells: Range<u64>,
        genes: Option<&GeneSelection>,
        out: &mut Csr<V>,
    ) -> deltacells::Result<ReadStats>;
    /// One rank's batches of one epoch.
    fn batches_of<V: DecodedCount + bytemuck::Pod>(
        &self,
        config: BatchConfig,
    ) -> deltacells::Result<BatchIter<V>>;
}

/// [`Matrix::csr`] and [`Matrix::csr_into`]: the same request, `read`, on a
/// dataset and on a corpus.
macro_rules! reads {
    () => {
        fn csr<V: DecodedCount>(
            &self,
            cells: CellSelection,
            genes: Option<&GeneSelection>,
        ) -> deltacells::Result<CsrBatch<V>> {
            self.read(cells).genes(genes).csr()
        }

        fn csr_into<V: DecodedCount>(
            &self,
            cells: Range<u64>,
            genes: Option<&GeneSelection>,
            out: &mut Csr<V>,
        ) -> deltacells::Result<ReadStats> {
            self.read(cells).genes(genes).csr_into(out)
        }
    };
}

impl Matrix for Dataset {
    fn n_cells(&self) -> u64 {
        Dataset::n_cells(self)
    }

    fn n_genes(&self) -> u32 {
        Dataset::n_genes(self)
    }

    fn obs_schema(&self) -> Option<&ObsSchema> {
        self.obs().map(|o| o.schema())
    }

    fn obs_column(&self, name: &str, cells: Option<&[u64]>) -> deltacells::Result<Label> {
        let (schema, values) = crate::dataset::read_obs_column(self, name, cells)?;
        Ok(Label {
            name: schema.name,
            kind: schema.kind,
            values,
            categories: schema.categories,
        })
    }

    fn tile_limits(&self) -> Vec<u64> {
        self.limits().to_vec()
    }

    fn engine(&self) -> &Engine {
        Dataset::engine(self)
    }

    reads!();

    fn batches_of<V: DecodedCount + bytemuck::Pod>(
        &self,
        config: BatchConfig,
    ) -> deltacells::Result<BatchIter<V>> {
        Dataset::batches_of(self, config)
    }
}

impl Matrix for Corpus {
    fn n_cells(&self) -> u64 {
        Corpus::n_cells(self)
    }

    fn n_genes(&self) -> u32 {
        Corpus::n_genes(self)
    }

    fn obs_schema(&self) -> Option<&ObsSchema> {
        Some(Corpus::obs_schema(self))
    }

    /// The unified column: global categories, widened types, missing where
    /// a member lacks it.
    fn obs_column(&self, name: &str, cells: Option<&[u64]>) -> deltacells::Result<Label> {
        let every: Vec<u64>;
        let cells = match cells {
            Some(cells) => cells,
            None => {
                every = (0..self.n_cells()).collect();
                &every
            }
        };
        let labels = self.localize(&[name], None)?.labels(cells)?;
        let mut columns = labels.columns().to_vec();
        Ok(columns.remove(0))
    }

    /// The members' tiles one after another, as corpus batches see them.
    fn tile_limits(&self) -> Vec<u64> {
        let mut limits = vec![0];
        for (member, base) in self.members().iter().zip(self.limits()) {
            limits.extend(member.dataset().limits()[1..].iter().map(|l| base + l));
        }
        limits
    }

    fn engine(&self) -> &Engine {
        Corpus::engine(self)
    }

    reads!();

    fn batches_of<V: DecodedCount + bytemuck::Pod>(
        &self,
        config: BatchConfig,
    ) -> deltacells::Result<BatchIter<V>> {
        Corpus::batches_of(self, config)
    }
}

/// What a read asks for.
pub enum Rows {
    /// These cells, in this order.
    Cells(Vec<u64>),
    /// Cells `start..stop`.
    Range(u64, u64),
    /// Every cell of one tile.
    Tile(usize),
}

/// Values as float32 (what training wants) or int32 (exact counts).
#[derive(Clone, Copy)]
pub(crate) enum Dtype {
    F32,
    I32,
}

impl Dtype {
    pub(crate) fn parse(name: &str) -> PyResult<Dtype> {
        match name {
            "float32" => Ok(Dtype::F32),
            "int32" => Ok(Dtype::I32),
            other => Err(input_error(format!(
                "dtype must be float32 or int32, not {other:?}"
            ))),
        }
    }
}

/// Non-negative ids from an int64 array.
pub fn ids(a: &PyReadonlyArray1<'_, i64>, what: &str) -> PyResult<Vec<u64>> {
    a.as_array()
        .iter()
        .map(|&c| u64::try_from(c).map_err(|_| input_error(format!("{what} {c} is negative"))))
        .collect()
}

/// `(name, kind, categories)` of an obs column.
pub type ObsColumnInfo = (String, &'static str, Option<Vec<String>>);

/// An open matrix, bound to the process that opened it (see the module docs).
pub struct Handle<M> {
    inner: Arc<M>,
    pid: u32,
    /// Output buffers of range and tile reads, recycled (see [`crate::pool`]).
    buffers: Buffers,
    /// The last batch iterator's recycler: the next epoch starts in the
    /// buffers its batches gave back (see `BatchConfig::recycler`).
    batch_buffers: Mutex<Option<Recycler>>,
}

impl<M: Matrix> Handle<M> {
    /// A handle on `inner`, opened in this process.
    pub fn new(inner: M) -> Handle<M> {
        Handle {
            inner: Arc::new(inner),
            pid: std::process::id(),
            buffers: Buffers::default(),
            batch_buffers: Mutex::default(),
        }
    }

    /// The matrix, if this process opened it.
    pub fn get(&self, py: Python<'_>) -> PyResult<&Arc<M>> {
        if std::process::id() != self.pid {
            return Err(to_py(
                py,
                Error::Config(
                    "this handle was opened in another process (before a fork); \
                     open it again in this process"
                        .into(),
                ),
            ));
        }
        Ok(&self.inner)
    }

    pub(crate) fn last_batch_buffers(&self) -> MutexGuard<'_, Option<Recycler>> {
        self.batch_buffers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `(threads, pinned, kernel backend)` of the decode pool.
    pub fn engine(&self, py: Python<'_>) -> PyResult<(usize, bool, String)> {
        let e = self.get(py)?.engine();
        Ok((e.threads(), e.pinned(), e.backend().to_string()))
    }

    /// `(name, kind, categories)` of each obs column, in schema order.
    pub fn obs_schema(&self, py: Python<'_>) -> PyResult<Vec<ObsColumnInfo>> {
        Ok(self.get(py)?.obs_schema().map_or_else(Vec::new, |schema| {
            schema
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

    /// Obs column `name` for `cells` (every cell when `None`) as
    /// `(kind, values, mask, categories)` (see `columns`).
    pub fn obs_column<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        cells: Option<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let m = self.get(py)?;
        let cells = cells.map(|c| ids(&c, "cell")).transpose()?;
        let label = py
            .detach(|| m.obs_column(name, cells.as_deref()))
            .or_raise(py)?;
        columns::column(
            py,
            Some(label.kind),
            label.categories.as_ref(),
            &label.values,
        )
    }

    pub(crate) fn selection(
        &self,
        py: Python<'_>,
        genes: Option<&[i64]>,
    ) -> PyResult<Option<GeneSelection>> {
        let Some(genes) = genes else { return Ok(None) };
        // A negative gene is refused as such; one past u32 as out of range.
        let genes: Vec<u32> = genes
            .iter()
            .map(|&g| match u64::try_from(g) {
                Ok(g) => Ok(u32::try_from(g).unwrap_or(u32::MAX)),
                Err(_) => Err(input_error(format!("gene {g} is negative"))),
            })
            .collect::<PyResult<_>>()?;
        GeneSelection::new(self.get(py)?.n_genes(), &genes)
            .or_raise(py)
            .map(Some)
    }

    /// `rows` as CSR arrays `(indptr, indices, data, n_cols)`, keeping only
    /// `genes` when given, with `dtype` values; with a tokenizer, its dict.
    pub fn read<'py>(
        &self,
        py: Python<'py>,
        rows: Rows,
        genes: Option<PyReadonlyArray1<'_, i64>>,
        dtype: &str,
        tokenizer: Option<&PyTokenizer>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let genes = genes.map(|g| g.as_array().to_vec());
        let genes = self.selection(py, genes.as_deref())?;
        if let Some(tokenizer) = tokenizer {
            return self.tokens(py, rows, genes, tokenizer);
        }
        Ok(match Dtype::parse(dtype)? {
            Dtype::F32 => self.read_as::<f32>(py, rows, genes)?.into_any(),
            Dtype::I32 => self.read_as::<i32>(py, rows, genes)?.into_any(),
        })
    }
    /// The cells of tile `t`.
    pub(crate) fn tile_range(&self, py: Python<'_>, t: usize) -> PyResult<Range<u64>> {
        let limits = self.get(py)?.tile_limits();
        if t + 1 >= limits.len() {
            return Err(to_py(
                py,
                Error::Input(format!("tile {t} is outside 0..{}", limits.len() - 1)),
            ));
        }
        Ok(limits[t]..limits[t + 1])
    }

    fn read_as<'py, V: DecodedCount + Pooled>(
        &self,
        py: Python<'py>,
        rows: Rows,
        genes: Option<GeneSelection>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let m = self.get(py)?;
        let range = match rows {
            Rows::Cells(cells) => {
                let batch = py
                    .detach(|| m.csr::<V>(cells.into(), genes.as_ref()))
                    .or_raise(py)?;
                return arrays::csr(py, batch.csr).into_pyobject(py);
            }
            Rows::Range(a, b) => a..b,
            Rows::Tile(t) => self.tile_range(py, t)?,
        };
        // Ranges and tiles (the scans) read into recycled buffers.
        let mut csr = self.buffers.csr::<V>();
        py.detach(|| m.csr_into(range, genes.as_ref(), &mut csr))
            .or_raise(py)?;
        self.buffers.arrays(py, csr)?.into_pyobject(py)
    }
}

/// The methods `_deltacells.Dataset` and `_deltacells.Corpus` share, over
/// the class's [`Handle`] (its field `0`), then the class's own `$extra`
/// methods, as the class's one `#[pymethods]` block.
macro_rules! matrix_methods {
    ($class:ty { $($extra:tt)* }) => {
        #[pyo3::pymethods]
        impl $class {
            #[getter]
            fn n_obs(&self, py: Python<'_>) -> PyResult<u64> {
                Ok($crate::matrix::Matrix::n_cells(self.0.get(py)?.as_ref()))
            }

            #[getter]
            fn n_vars(&self, py: Python<'_>) -> PyResult<u32> {
                Ok($crate::matrix::Matrix::n_genes(self.0.get(py)?.as_ref()))
            }

            #[getter]
            fn n_tiles(&self, py: Python<'_>) -> PyResult<usize> {
                Ok($crate::matrix::Matrix::tile_limits(self.0.get(py)?.as_ref()).len() - 1)
            }

            /// First cell of each tile, then `n_obs`.
            #[getter]
            fn limits<'py>(
                &self,
                py: Python<'py>,
            ) -> PyResult<Bound<'py, numpy::PyArray1<i64>>> {
                let limits = $crate::matrix::Matrix::tile_limits(self.0.get(py)?.as_ref());
                Ok($crate::arrays::cells(py, limits))
            }

            /// `(threads, pinned, kernel backend)` of the decode pool.
            #[getter]
            fn engine(&self, py: Python<'_>) -> PyResult<(usize, bool, String)> {
                self.0.engine(py)
            }

            /// `(name, kind, categories)` of each obs column, in schema order.
            #[getter]
            fn obs_schema(&self, py: Python<'_>) -> PyResult<Vec<$crate::matrix::ObsColumnInfo>> {
                self.0.obs_schema(py)
            }

            /// `cells` (any order, duplicates allowed; order kept) as CSR
            /// arrays `(indptr, indices, data, n_cols)`, keeping only `genes`
            /// when given; with a `tokenizer`, the dict of its arrays.
            #[pyo3(signature = (cells, genes=None, dtype="float32", tokenizer=None))]
            fn read_cells<'py>(
                &self,
                py: Python<'py>,
                cells: numpy::PyReadonlyArray1<'_, i64>,
                genes: Option<numpy::PyReadonlyArray1<'_, i64>>,
                dtype: &str,
                tokenizer: Option<PyRef<'_, $crate::tokenize::PyTokenizer>>,
            ) -> PyResult<Bound<'py, PyAny>> {
                let cells = $crate::matrix::ids(&cells, "cell")?;
                let rows = $crate::matrix::Rows::Cells(cells);
                self.0.read(py, rows, genes, dtype, tokenizer.as_deref())
            }

            /// Cells `start..stop` as CSR arrays (or tokens, as `read_cells`).
            #[pyo3(signature = (start, stop, genes=None, dtype="float32", tokenizer=None))]
            fn read_range<'py>(
                &self,
                py: Python<'py>,
                start: u64,
                stop: u64,
                genes: Option<numpy::PyReadonlyArray1<'_, i64>>,
                dtype: &str,
                tokenizer: Option<PyRef<'_, $crate::tokenize::PyTokenizer>>,
            ) -> PyResult<Bound<'py, PyAny>> {
                let rows = $crate::matrix::Rows::Range(start, stop);
                self.0.read(py, rows, genes, dtype, tokenizer.as_deref())
            }

            /// Every cell of tile `tile` as CSR arrays.
            #[pyo3(signature = (tile, genes=None, dtype="float32"))]
            fn read_tile<'py>(
                &self,
                py: Python<'py>,
                tile: usize,
                genes: Option<numpy::PyReadonlyArray1<'_, i64>>,
                dtype: &str,
            ) -> PyResult<Bound<'py, PyAny>> {
                self.0.read(py, $crate::matrix::Rows::Tile(tile), genes, dtype, None)
            }

            /// Obs column `name` for `cells` (all cells when `None`), as
            /// `(kind, values, mask, categories)` (see `columns`).
            #[pyo3(signature = (name, cells=None))]
            fn obs_column<'py>(
                &self,
                py: Python<'py>,
                name: String,
                cells: Option<numpy::PyReadonlyArray1<'_, i64>>,
            ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
                self.0.obs_column(py, &name, cells)
            }

            /// One rank's batches of one epoch with the `options` the
            /// package's `batches` passes (every setting of `BatchArgs`, by
            /// name): all of them from position `first`, or the `count`
            /// batches from there (how a data-loader worker takes its span).
            #[pyo3(signature = (*, first=0, count=None, **options))]
            fn batches(
                &self,
                py: Python<'_>,
                first: usize,
                count: Option<usize>,
                options: Option<&Bound<'_, pyo3::types::PyDict>>,
            ) -> PyResult<$crate::batches::PyBatchIter> {
                let args = $crate::batches::BatchArgs::from_dict(options)?;
                self.0.batches(py, args, first, count)
            }

            $($extra)*
        }
    };
}

pub(crate) use matrix_methods;

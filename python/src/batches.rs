//! `_deltacells.BatchIter`: one rank's (or one loader worker's) training
//! batches, decoded ahead by the engine while Python works; and
//! `_deltacells.RankShare`, how a rank's batches split among loader workers.

use std::sync::Mutex;

use deltacells::dataset::{Batch, BatchIter, BatchRows, RankShare, Recycler};
use deltacells::kernels::DecodedCount;
use numpy::{Element, IntoPyArray, PyArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrays;
use crate::columns;
use crate::errors::OrRaise;
use crate::pool;

/// A batch iterator of either count type.
enum Counts {
    F32(BatchIter<f32>),
    I32(BatchIter<i32>),
}

/// A batch of either count type.
enum Counted {
    F32(Batch<f32>),
    I32(Batch<i32>),
}

impl Counts {
    fn next(&mut self) -> Option<deltacells::Result<Counted>> {
        match self {
            Counts::F32(it) => it.next().map(|b| b.map(Counted::F32)),
            Counts::I32(it) => it.next().map(|b| b.map(Counted::I32)),
        }
    }
}

/// Iterator of batches as `(index, cells, rows, labels)`: `rows` is
/// `("csr", indptr, indices, data, n_cols)` or `("dense", matrix)`, `labels` a
/// list of `(name, column)` (see `columns`).
#[pyclass(module = "deltacells._deltacells", name = "BatchIter")]
pub struct PyBatchIter {
    // A Mutex makes the iterator (which owns a channel receiver) shareable;
    // Python calls `__next__` from one thread at a time anyway.
    inner: Mutex<Counts>,
    len: usize,
    /// Where a batch's buffers go when Python lets go of its arrays: back to
    /// the iterator, which builds later batches in them.
    recycler: Recycler,
}

impl From<BatchIter<f32>> for PyBatchIter {
    fn from(iter: BatchIter<f32>) -> PyBatchIter {
        PyBatchIter::new(iter.len(), iter.recycler(), Counts::F32(iter))
    }
}

impl From<BatchIter<i32>> for PyBatchIter {
    fn from(iter: BatchIter<i32>) -> PyBatchIter {
        PyBatchIter::new(iter.len(), iter.recycler(), Counts::I32(iter))
    }
}

impl PyBatchIter {
    fn new(len: usize, recycler: Recycler, counts: Counts) -> PyBatchIter {
        PyBatchIter {
            len,
            recycler,
            inner: Mutex::new(counts),
        }
    }

    /// The recycler the batches' buffers go back to.
    pub fn recycler(&self) -> Recycler {
        self.recycler.clone()
    }
}

fn to_python<'py, V>(
    py: Python<'py>,
    batch: Batch<V>,
    recycler: &Recycler,
) -> PyResult<Bound<'py, PyTuple>>
where
    V: DecodedCount + bytemuck::Pod + Element + Send + Sync + 'static,
{
    let n = batch.cells.len();
    let rows = match batch.rows {
        BatchRows::Csr(csr) => {
            let (r1, r2, r3) = (recycler.clone(), recycler.clone(), recycler.clone());
            let indptr = pool::lend(py, csr.indptr, move |b| r1.give_indptr(b))?;
            let indices = pool::lend(py, csr.indices, move |b| r2.give_indices(b))?;
            let data = pool::lend(py, csr.values, move |b| r3.give_values(b))?;
            ("csr", indptr, indices, data, csr.n_cols)
                .into_pyobject(py)?
                .into_any()
        }
        BatchRows::Dense(dense) => {
            let (n_cols, data) = dense.into_parts();
            let matrix = data.into_pyarray(py).reshape([n, n_cols])?;
            ("dense", matrix).into_pyobject(py)?.into_any()
        }
    };
    let labels = batch
        .labels
        .columns()
        .iter()
        .map(|l| {
            Ok((
                l.name.clone(),
                columns::column(py, Some(l.kind), l.categories.as_ref(), &l.values)?,
            ))
        })
        .collect::<PyResult<Vec<_>>>()?;
    (batch.index, arrays::cells(py, batch.cells), rows, labels).into_pyobject(py)
}

#[pymethods]
impl PyBatchIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let next = py.detach(|| {
            self.inner
                .lock()
                .map(|mut it| it.next())
                .map_err(|_| "batch iterator poisoned")
        });
        match next.map_err(PyRuntimeError::new_err)? {
            None => Ok(None),
            Some(batch) => match batch.or_raise(py)? {
                Counted::F32(b) => to_python(py, b, &self.recycler).map(Some),
                Counted::I32(b) => to_python(py, b, &self.recycler).map(Some),
            },
        }
    }

    fn __len__(&self) -> usize {
        self.len
    }
}

/// One rank's batches of an epoch (the core's `RankShare`): how many there
/// are, and which of them each data-loader worker yields.
#[pyclass(module = "deltacells._deltacells", name = "RankShare", frozen)]
pub struct PyRankShare(RankShare);

#[pymethods]
impl PyRankShare {
    /// The batches of rank `rank` of `world_size` over an epoch of `n_obs` cells.
    #[new]
    fn new(
        n_obs: u64,
        batch_size: usize,
        rank: usize,
        world_size: usize,
        drop_last: bool,
    ) -> PyResult<PyRankShare> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        if rank >= world_size {
            return Err(PyValueError::new_err(format!(
                "rank {rank} is outside 0..{world_size}"
            )));
        }
        Ok(PyRankShare(RankShare::new(
            n_obs, batch_size, rank, world_size, drop_last,
        )))
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }

    /// `(first, stop)`: the batches worker `worker` of `workers` still yields
    /// once a loader taking one batch from each worker in turn has delivered
    /// `delivered` batches (see `RankShare::worker_resume`).
    fn worker_resume(&self, worker: usize, workers: usize, delivered: usize) -> (usize, usize) {
        let span = self.0.worker_resume(worker, workers, delivered);
        (span.start, span.end)
    }
}

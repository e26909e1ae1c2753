//! `_deltacells.BatchIter`: one rank's (or one loader worker's) training
//! batches, decoded ahead by the engine while Python works.

use std::sync::Mutex;

use deltacells::dataset::{Batch, BatchIter, BatchRows, Recycler};
use numpy::{IntoPyArray, PyArrayMethods};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrays;
use crate::columns;
use crate::errors::OrRaise;
use crate::pool;

/// Iterator of batches as `(index, cells, rows, labels)`: `rows` is
/// `("csr", indptr, indices, data, n_cols)` or `("dense", matrix)`, `labels` a
/// list of `(name, column)` (see `columns`).
#[pyclass(module = "deltacells._deltacells", name = "BatchIter")]
pub struct PyBatchIter {
    // A Mutex makes the iterator (which owns a channel receiver) shareable;
    // Python calls `__next__` from one thread at a time anyway.
    inner: Mutex<BatchIter>,
    len: usize,
    /// Where a batch's buffers go when Python lets go of its arrays: back to
    /// the iterator, which builds later batches in them.
    recycler: Recycler,
}

impl PyBatchIter {
    pub fn new(iter: BatchIter) -> PyBatchIter {
        PyBatchIter {
            len: iter.len(),
            recycler: iter.recycler(),
            inner: Mutex::new(iter),
        }
    }
}

fn to_python<'py>(
    py: Python<'py>,
    batch: Batch,
    recycler: &Recycler,
) -> PyResult<Bound<'py, PyTuple>> {
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
            Some(batch) => to_python(py, batch.or_raise(py)?, &self.recycler).map(Some),
        }
    }

    fn __len__(&self) -> usize {
        self.len
    }
}

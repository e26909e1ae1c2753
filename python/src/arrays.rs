//! Handing decoded buffers to numpy without copying them.
//!
//! `IntoPyArray` for a `Vec` moves the allocation into a Python object that
//! owns it (the array's `base`); numpy then reads the Rust buffer in place and
//! frees it through Rust when the last array over it goes away, whatever
//! happened to the dataset that produced it.

use deltacells::Csr;
use numpy::{Element, IntoPyArray, PyArray1};
use pyo3::prelude::*;

/// CSR rows as numpy arrays: `(indptr int64, indices int32, data, n_cols)`.
pub type CsrArrays<'py, V> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<V>>,
    u64,
);

/// Moves a CSR block's buffers into numpy arrays.
pub fn csr<V: Element>(py: Python<'_>, csr: Csr<V>) -> CsrArrays<'_, V> {
    (
        csr.indptr.into_pyarray(py),
        csr.indices.into_pyarray(py),
        csr.values.into_pyarray(py),
        csr.n_cols,
    )
}

/// Global cell ids as int64, what torch and pandas index with (a cell id is
/// far below 2^63). Collecting a `Vec<u64>` into a `Vec<i64>` reuses its
/// allocation.
pub fn cells(py: Python<'_>, cells: Vec<u64>) -> Bound<'_, PyArray1<i64>> {
    cells
        .into_iter()
        .map(|c| c as i64)
        .collect::<Vec<i64>>()
        .into_pyarray(py)
}

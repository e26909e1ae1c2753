//! `_deltacells.read_transformed`: reads with a vocabulary that may name
//! genes the dataset lacks, normalized and/or log1p (the library's
//! `Read::normalize`, `Read::log1p` and `GeneSelection::mapping`), as CSR
//! arrays or dense rows straight from the engine.

use deltacells::dataset::Dataset;
use deltacells::kernels::DecodedCount;
use deltacells::{CellSelection, GeneSelection, Result};
use numpy::{Element, IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrays;
use crate::dataset::PyDataset;
use crate::errors::OrRaise;
use crate::matrix::ids as ids_of;

/// Cells `start..stop` (when `cells` is `None`) or `cells`; `genes`: output
/// column `k` is gene `genes[k]`, or a column of zeros where it is -1;
/// `normalize`: the target sum; `dense`: a `(values, n_rows, n_cols)` of
/// row-major values, else CSR arrays `(indptr, indices, data, n_cols)`.
#[pyfunction]
#[pyo3(signature = (dataset, start, stop, cells=None, genes=None, normalize=None, log1p=false, dense=false, dtype="float32"))]
#[allow(clippy::too_many_arguments)]
pub fn read_transformed<'py>(
    py: Python<'py>,
    dataset: &PyDataset,
    start: u64,
    stop: u64,
    cells: Option<PyReadonlyArray1<'_, i64>>,
    genes: Option<PyReadonlyArray1<'_, i64>>,
    normalize: Option<f64>,
    log1p: bool,
    dense: bool,
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let ds = dataset.0.get(py)?.clone();
    let cells = match cells {
        None => CellSelection::from(start..stop),
        Some(ids) => CellSelection::from(&ids_of(&ids, "cell")?[..]),
    };
    let genes = match genes {
        None => None,
        Some(g) => Some(vocabulary(ds.n_genes(), &g).or_raise(py)?),
    };
    let request = Request {
        ds: &ds,
        cells,
        genes: genes.as_ref(),
        normalize,
        log1p,
    };
    match (dtype, dense) {
        ("float32", false) => request.csr::<f32>(py),
        ("float32", true) => request.dense::<f32>(py),
        ("int32", false) => request.csr::<i32>(py),
        ("int32", true) => request.dense::<i32>(py),
        (other, _) => Err(PyValueError::new_err(format!(
            "dtype must be float32 or int32, not {other:?}"
        ))),
    }
}

/// What to read and how.
struct Request<'a> {
    ds: &'a Dataset,
    cells: CellSelection,
    genes: Option<&'a GeneSelection>,
    normalize: Option<f64>,
    log1p: bool,
}

impl Request<'_> {
    fn read(&self) -> deltacells::dataset::Read<'_> {
        let mut read = self.ds.read(self.cells.clone()).genes(self.genes);
        if let Some(t) = self.normalize {
            read = read.normalize(t);
        }
        if self.log1p {
            read = read.log1p();
        }
        read
    }

    fn csr<'py, V: DecodedCount + Element>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let batch = py.detach(|| self.read().csr::<V>()).or_raise(py)?;
        Ok(arrays::csr(py, batch.csr).into_pyobject(py)?.into_any())
    }

    fn dense<'py, V: DecodedCount + Element>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let batch = py.detach(|| self.read().dense::<V>()).or_raise(py)?;
        let n_rows = batch.rows.n_rows();
        let (n_cols, values) = batch.rows.into_parts();
        Ok((values.into_pyarray(py), n_rows, n_cols)
            .into_pyobject(py)?
            .into_any())
    }
}

/// Output column `k` is gene `genes[k]` (or zeros where it is -1).
fn vocabulary(n_genes: u32, genes: &PyReadonlyArray1<'_, i64>) -> Result<GeneSelection> {
    let mut columns = vec![None; n_genes as usize];
    let genes = genes.as_array();
    for (k, &g) in genes.iter().enumerate() {
        if g == -1 {
            continue;
        }
        let slot = usize::try_from(g)
            .ok()
            .and_then(|g| columns.get_mut(g))
            .ok_or_else(|| deltacells::Error::Input(format!("gene {g} is outside 0..{n_genes}")))?;
        if slot.replace(k as u32).is_some() {
            return Err(deltacells::Error::Input(format!(
                "gene {g} is selected twice"
            )));
        }
    }
    GeneSelection::mapping(n_genes, &columns, genes.len() as u32)
}

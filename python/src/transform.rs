//! `_deltacells.read_transformed`: reads of a dataset or a corpus with a
//! vocabulary that may name genes it lacks, normalized and/or log1p (the
//! library's `Read::normalize` and `Read::log1p`, of a dataset or a corpus, and
//! `GeneSelection::mapping`), as CSR arrays or dense rows straight from the
//! engine.

use std::sync::Arc;

use deltacells::dataset::{CsrBatch, Dataset, DenseBatch};
use deltacells::kernels::DecodedCount;
use deltacells::Corpus;
use deltacells::{CellSelection, GeneSelection, Read, ReadSource, Result};
use numpy::{Element, IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::arrays;
use crate::corpus::PyCorpus;
use crate::dataset::PyDataset;
use crate::errors::{input_error, OrRaise};
use crate::matrix::ids as ids_of;

/// What a transformed read reads: a dataset, or a corpus over its vocabulary.
#[derive(FromPyObject)]
pub enum Source<'py> {
    Dataset(PyRef<'py, PyDataset>),
    Corpus(PyRef<'py, PyCorpus>),
}

/// Cells `start..stop` (when `cells` is `None`) or `cells` of `source` (a
/// dataset or a corpus); `genes`: output column `k` is gene `genes[k]`, or
/// a column of zeros where it is -1; `normalize`: the target sum (each
/// cell's total over all the genes it has, a corpus cell's over all of its
/// member's); `dense`: a `(values, n_rows, n_cols)` of row-major values,
/// else CSR arrays `(indptr, indices, data, n_cols)`.
#[pyfunction]
#[pyo3(signature = (source, start, stop, cells=None, genes=None, normalize=None, log1p=false, dense=false, dtype="float32"))]
#[allow(clippy::too_many_arguments)]
pub fn read_transformed<'py>(
    py: Python<'py>,
    source: Source<'_>,
    start: u64,
    stop: u64,
    cells: Option<PyReadonlyArray1<'_, i64>>,
    genes: Option<PyReadonlyArray1<'_, i64>>,
    normalize: Option<f64>,
    log1p: bool,
    dense: bool,
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let source = match source {
        Source::Dataset(ds) => Opened::Dataset(ds.0.get(py)?.clone()),
        Source::Corpus(c) => Opened::Corpus(c.0.get(py)?.clone()),
    };
    let cells = match cells {
        None => CellSelection::from(start..stop),
        Some(ids) => CellSelection::from(&ids_of(&ids, "cell")?[..]),
    };
    let genes = match genes {
        None => None,
        Some(g) => Some(vocabulary(source.n_genes(), &g.as_array().to_vec()).or_raise(py)?),
    };
    let request = Request {
        source: &source,
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
        (other, _) => Err(input_error(format!(
            "dtype must be float32 or int32, not {other:?}"
        ))),
    }
}

/// An open dataset or corpus.
enum Opened {
    Dataset(Arc<Dataset>),
    Corpus(Arc<Corpus>),
}

impl Opened {
    fn n_genes(&self) -> u32 {
        match self {
            Opened::Dataset(ds) => ds.n_genes(),
            Opened::Corpus(c) => c.n_genes(),
        }
    }
}

/// What to read and how.
struct Request<'a> {
    source: &'a Opened,
    cells: CellSelection,
    genes: Option<&'a GeneSelection>,
    normalize: Option<f64>,
    log1p: bool,
}

impl Request<'_> {
    /// `read` (of the dataset or of the corpus) over the request's genes,
    /// with its transform.
    fn configured<'r, S: ReadSource>(&'r self, read: Read<'r, S>) -> Read<'r, S> {
        let mut read = read.genes(self.genes);
        if let Some(t) = self.normalize {
            read = read.normalize(t);
        }
        if self.log1p {
            read = read.log1p();
        }
        read
    }

    fn csr_batch<V: DecodedCount>(&self) -> Result<CsrBatch<V>> {
        let cells = self.cells.clone();
        match self.source {
            Opened::Dataset(ds) => self.configured(ds.read(cells)).csr::<V>(),
            Opened::Corpus(c) => self.configured(c.read(cells)).csr::<V>(),
        }
    }

    fn dense_batch<V: DecodedCount>(&self) -> Result<DenseBatch<V>> {
        let cells = self.cells.clone();
        match self.source {
            Opened::Dataset(ds) => self.configured(ds.read(cells)).dense::<V>(),
            Opened::Corpus(c) => self.configured(c.read(cells)).dense::<V>(),
        }
    }

    fn csr<'py, V: DecodedCount + Element>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let batch = py.detach(|| self.csr_batch::<V>()).or_raise(py)?;
        Ok(arrays::csr(py, batch.csr).into_pyobject(py)?.into_any())
    }

    fn dense<'py, V: DecodedCount + Element>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let batch = py.detach(|| self.dense_batch::<V>()).or_raise(py)?;
        let n_rows = batch.rows.n_rows();
        let (n_cols, values) = batch.rows.into_parts();
        Ok((values.into_pyarray(py), n_rows, n_cols)
            .into_pyobject(py)?
            .into_any())
    }
}

/// Output column `k` is gene `genes[k]` (or zeros where it is -1).
pub(crate) fn vocabulary(n_genes: u32, genes: &[i64]) -> Result<GeneSelection> {
    let mut columns = vec![None; n_genes as usize];
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

//! `_deltacells.Tokenizer`: the library's Geneformer and scGPT tokenizers
//! (`deltacells::tokenize`), and the dict of numpy arrays a tokenized read
//! returns.

use std::any::Any;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use deltacells::dataset::GeneSelection;
use deltacells::tokenize::{
    GeneMap, Geneformer, ScGpt, TokenBatch, TokenColumns, TokenRows, Tokenizer,
};
use numpy::{IntoPyArray, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use deltacells::dataset::CellSelection;
use deltacells::{Corpus, Dataset};

use crate::errors::{input_error, OrRaise};
use crate::matrix::{Handle, Matrix, Rows};

/// A mapping by gene key: given as a dict, or a two-column file (medians
/// also a `gene_stats.parquet`).
#[derive(FromPyObject)]
pub enum MapArg<V> {
    /// Key -> value.
    Pairs(HashMap<String, V>),
    /// A TSV or CSV file of `key, value` lines.
    File(PathBuf),
}

impl<V: Copy + std::str::FromStr> MapArg<V> {
    fn load(self) -> deltacells::Result<GeneMap<V>> {
        match self {
            MapArg::Pairs(pairs) => GeneMap::new(pairs),
            MapArg::File(path) => GeneMap::from_file(&path),
        }
    }
}

/// Token ids from Python ints, each an int32.
fn token_map(py: Python<'_>, tokens: MapArg<i64>) -> PyResult<GeneMap<i32>> {
    let tokens = tokens.load().or_raise(py)?;
    let pairs = tokens
        .iter()
        .map(|(k, t)| match i32::try_from(t) {
            Ok(t) => Ok((k.to_string(), t)),
            Err(_) => Err(input_error(format!(
                "token of gene {k:?} is {t}, outside int32"
            ))),
        })
        .collect::<PyResult<Vec<_>>>()?;
    GeneMap::new(pairs).or_raise(py)
}

/// A tokenizer, and its table for the last matrix it read (resolving one
/// costs a lookup per gene, so repeated reads of one matrix reuse it).
#[pyclass(name = "Tokenizer", module = "deltacells._deltacells", frozen)]
pub struct PyTokenizer {
    tokenizer: Tokenizer,
    /// The last table made.
    last: Mutex<Option<Resolved>>,
}

/// A table and the matrix it was made for (a `Weak` keeps the matrix's
/// address from being reused while held).
type Resolved = (Weak<dyn Any + Send + Sync>, Arc<TokenColumns>);

impl PyTokenizer {
    /// The tokenizer's settings.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn new(tokenizer: Tokenizer) -> PyTokenizer {
        PyTokenizer {
            tokenizer,
            last: Mutex::new(None),
        }
    }

    /// The table for `matrix`, made by `resolve` unless it is the last one's.
    pub fn columns<M: Send + Sync + 'static>(
        &self,
        matrix: &Arc<M>,
        resolve: impl FnOnce(&Tokenizer, &M) -> deltacells::Result<TokenColumns>,
    ) -> deltacells::Result<Arc<TokenColumns>> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let key: Arc<dyn Any + Send + Sync> = matrix.clone();
        if let Some((weak, columns)) = last.as_ref() {
            if weak.upgrade().is_some_and(|m| Arc::ptr_eq(&m, &key)) {
                return Ok(columns.clone());
            }
        }
        let columns = Arc::new(resolve(&self.tokenizer, matrix)?);
        *last = Some((Arc::downgrade(&key), columns.clone()));
        Ok(columns)
    }
}

#[pymethods]
impl PyTokenizer {
    /// Geneformer's rank-value tokens.
    #[staticmethod]
    #[pyo3(signature = (tokens, medians, max_len, special_tokens, gene_key))]
    fn geneformer(
        py: Python<'_>,
        tokens: MapArg<i64>,
        medians: MapArg<f64>,
        max_len: usize,
        special_tokens: bool,
        gene_key: Option<String>,
    ) -> PyResult<PyTokenizer> {
        let tokens = token_map(py, tokens)?;
        let medians = match medians {
            MapArg::File(path) => GeneMap::medians_from_file(&path),
            pairs => pairs.load(),
        }
        .or_raise(py)?;
        let g = Geneformer::new(tokens, medians)
            .and_then(|g| g.with_max_len(max_len, special_tokens))
            .or_raise(py)?;
        Ok(PyTokenizer::new(Tokenizer::Geneformer(
            g.with_gene_key(gene_key),
        )))
    }

    /// scGPT's binned values.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (tokens, n_bins, max_len, log1p, normalize, gene_key, seed, epoch))]
    fn scgpt(
        py: Python<'_>,
        tokens: MapArg<i64>,
        n_bins: usize,
        max_len: usize,
        log1p: bool,
        normalize: Option<f64>,
        gene_key: Option<String>,
        seed: u64,
        epoch: u64,
    ) -> PyResult<PyTokenizer> {
        let tokens = token_map(py, tokens)?;
        let s = ScGpt::new(tokens)
            .and_then(|s| s.with_n_bins(n_bins))
            .and_then(|s| s.with_max_len(max_len))
            .and_then(|s| s.with_transform(normalize, log1p))
            .or_raise(py)?;
        let s = s.with_seed(seed, epoch).with_gene_key(gene_key);
        Ok(PyTokenizer::new(Tokenizer::ScGpt(s)))
    }

    /// Tokens per row.
    #[getter]
    fn max_len(&self) -> usize {
        match &self.tokenizer {
            Tokenizer::Geneformer(g) => g.max_len(),
            Tokenizer::ScGpt(s) => s.max_len(),
        }
    }
}

/// A tokenized read as `{"input_ids", "values" (scGPT), "attention_mask"}`,
/// each `[cells, max_len]`.
pub fn token_dict(py: Python<'_>, batch: TokenBatch) -> PyResult<Bound<'_, PyDict>> {
    token_rows_dict(py, batch.rows, batch.cells.len())
}

/// `n` tokenized rows as [`token_dict`] gives them.
pub fn token_rows_dict(py: Python<'_>, rows: TokenRows, n: usize) -> PyResult<Bound<'_, PyDict>> {
    let shape = [n, rows.max_len];
    let dict = PyDict::new(py);
    dict.set_item("input_ids", rows.input_ids.into_pyarray(py).reshape(shape)?)?;
    if let Some(values) = rows.values {
        dict.set_item("values", values.into_pyarray(py).reshape(shape)?)?;
    }
    let mask: Vec<bool> = rows.attention_mask.iter().map(|&m| m != 0).collect();
    dict.set_item("attention_mask", mask.into_pyarray(py).reshape(shape)?)?;
    Ok(dict)
}

/// What a matrix adds to be tokenized: its tokenizer tables and tokenized
/// reads, the library's own on a dataset and on a corpus.
pub trait TokenMatrix {
    /// `tokenizer`'s table for this matrix's genes.
    fn token_columns(&self, tokenizer: &Tokenizer) -> deltacells::Result<TokenColumns>;
    /// `cells` tokenized by `columns` (made by [`TokenMatrix::token_columns`]).
    fn tokens(
        &self,
        cells: CellSelection,
        columns: &TokenColumns,
    ) -> deltacells::Result<TokenBatch>;
}

impl TokenMatrix for Dataset {
    fn token_columns(&self, tokenizer: &Tokenizer) -> deltacells::Result<TokenColumns> {
        tokenizer.for_dataset(self)
    }

    fn tokens(
        &self,
        cells: CellSelection,
        columns: &TokenColumns,
    ) -> deltacells::Result<TokenBatch> {
        self.read(cells).tokens(columns)
    }
}

impl TokenMatrix for Corpus {
    fn token_columns(&self, tokenizer: &Tokenizer) -> deltacells::Result<TokenColumns> {
        tokenizer.for_corpus(self)
    }

    fn tokens(
        &self,
        cells: CellSelection,
        columns: &TokenColumns,
    ) -> deltacells::Result<TokenBatch> {
        self.read(cells).tokens(columns)
    }
}

impl<M: Matrix> Handle<M> {
    /// `rows` tokenized by `tokenizer` (see [`token_dict`]).
    pub(crate) fn tokens<'py>(
        &self,
        py: Python<'py>,
        rows: Rows,
        genes: Option<GeneSelection>,
        tokenizer: &PyTokenizer,
    ) -> PyResult<Bound<'py, PyAny>> {
        if genes.is_some() {
            return Err(input_error(
                "a tokenizer reads every gene of a row: read without genes",
            ));
        }
        let m = self.get(py)?;
        let cells = self.cells_of(py, rows)?;
        let batch = py
            .detach(|| {
                let columns = tokenizer.columns(m, |t, m| m.token_columns(t))?;
                m.tokens(cells, &columns)
            })
            .or_raise(py)?;
        Ok(token_dict(py, batch)?.into_any())
    }

    /// The cells `rows` names.
    fn cells_of(&self, py: Python<'_>, rows: Rows) -> PyResult<CellSelection> {
        Ok(match rows {
            Rows::Cells(cells) => cells.into(),
            Rows::Range(a, b) => (a..b).into(),
            Rows::Tile(t) => self.tile_range(py, t)?.into(),
        })
    }
}

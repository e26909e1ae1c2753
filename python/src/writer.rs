//! `_deltacells.Writer`: CSR row blocks from Python into a `DatasetWriter`.
//!
//! The package's `deltacells.write` reads the source (scipy, dense, AnnData,
//! backed or not) in row blocks and pushes each one here, so memory stays
//! bounded by a block plus the tiles being encoded. The GIL is released while
//! a block is checked and tiles are encoded.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{ArrayRef, ArrowPrimitiveType, PrimitiveArray};
use arrow_buffer::{NullBuffer, ScalarBuffer};
use deltacells::dataset::{DatasetWriter, WriterConfig};
use deltacells::obs::{ObsColumn, ObsConfig, VarTable};
use deltacells::CsrRef;
use numpy::{Element, PyReadonlyArray1};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::{input_error, OrRaise};

/// A dataset being written.
#[pyclass(module = "deltacells._deltacells", name = "Writer")]
pub struct PyWriter {
    /// `None` once finished or aborted.
    inner: Mutex<Option<DatasetWriter>>,
}

/// One obs column as the package passes it: `(name, kind, values, mask, categories)`.
type ObsSpec<'py> = (
    String,
    String,
    Bound<'py, PyAny>,
    Option<PyReadonlyArray1<'py, bool>>,
    Option<Vec<String>>,
);

/// The gene table: `(index name, index, [column as an obs column], [names of
/// the categorical columns whose categories are ordered])`.
type VarSpec<'py> = (String, Vec<String>, Vec<ObsSpec<'py>>, Vec<String>);

fn validity(mask: Option<&PyReadonlyArray1<'_, bool>>, len: usize) -> PyResult<Option<NullBuffer>> {
    let Some(mask) = mask else { return Ok(None) };
    let mask = mask.as_slice()?;
    if mask.len() != len {
        return Err(input_error("mask and values differ in length"));
    }
    Ok(Some(NullBuffer::from_iter(mask.iter().map(|&m| !m))))
}

fn numeric<T>(
    values: &Bound<'_, PyAny>,
    mask: Option<&PyReadonlyArray1<'_, bool>>,
) -> PyResult<Option<ArrayRef>>
where
    T: ArrowPrimitiveType,
    T::Native: Element,
{
    let Ok(values) = values.extract::<PyReadonlyArray1<'_, T::Native>>() else {
        return Ok(None);
    };
    let values = values.as_slice()?;
    let nulls = validity(mask, values.len())?;
    let array = PrimitiveArray::<T>::new(ScalarBuffer::from(values.to_vec()), nulls);
    Ok(Some(Arc::new(array)))
}

fn obs_column(spec: ObsSpec<'_>) -> PyResult<ObsColumn> {
    let (name, kind, values, mask, categories) = spec;
    let input = |e: deltacells::Error| input_error(e.to_string());
    match kind.as_str() {
        "category" => {
            let codes: Vec<i32> = values
                .extract::<PyReadonlyArray1<'_, i32>>()?
                .as_slice()?
                .to_vec();
            ObsColumn::category(name, categories.unwrap_or_default(), codes).map_err(input)
        }
        "string" => Ok(ObsColumn::string(
            name,
            values.extract::<Vec<Option<String>>>()?,
        )),
        "bool" => {
            let values = values.extract::<PyReadonlyArray1<'_, bool>>()?;
            let values = values.as_slice()?;
            let nulls = validity(mask.as_ref(), values.len())?;
            Ok(ObsColumn::bool(
                name,
                values
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| nulls.as_ref().is_none_or(|n| n.is_valid(i)).then_some(v)),
            ))
        }
        "numeric" => {
            let mask = mask.as_ref();
            let array = [
                numeric::<Int8Type>,
                numeric::<Int16Type>,
                numeric::<Int32Type>,
                numeric::<Int64Type>,
                numeric::<UInt8Type>,
                numeric::<UInt16Type>,
                numeric::<UInt32Type>,
                numeric::<UInt64Type>,
                numeric::<Float32Type>,
                numeric::<Float64Type>,
            ]
            .iter()
            .find_map(|f| f(&values, mask).transpose())
            .transpose()?
            .ok_or_else(|| {
                input_error(format!("obs column {name:?}: unsupported numeric dtype"))
            })?;
            ObsColumn::from_arrow(name, array).map_err(input)
        }
        other => Err(input_error(format!(
            "obs column {name:?}: unknown kind {other:?}"
        ))),
    }
}

fn var_table(spec: VarSpec<'_>) -> PyResult<VarTable> {
    let (index_name, index, columns, ordered) = spec;
    columns
        .into_iter()
        .try_fold(VarTable::new(index_name, index), |t, column| {
            let column = obs_column(column)?;
            let o = ordered.iter().any(|n| n == column.name());
            t.with_typed_column(column, o)
                .map_err(|e| input_error(e.to_string()))
        })
}

/// The manifest's free-form metadata from JSON text (an object).
fn manifest_metadata(text: &str) -> PyResult<serde_json::Map<String, serde_json::Value>> {
    serde_json::from_str(text)
        .map_err(|e| input_error(format!("metadata is not a JSON object: {e}")))
}

fn push<V: deltacells::format::tile_writer::CountSource + Element>(
    py: Python<'_>,
    writer: &mut DatasetWriter,
    n_cols: u64,
    indptr: &[i64],
    indices: &[i32],
    data: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let Ok(values) = data.extract::<PyReadonlyArray1<'_, V>>() else {
        return Ok(false);
    };
    let values = values.as_slice()?;
    let block = CsrRef {
        n_cols,
        indptr,
        indices,
        values,
    };
    py.detach(|| writer.push(block)).or_raise(py)?;
    Ok(true)
}

impl PyWriter {
    fn with<R>(&self, f: impl FnOnce(&mut DatasetWriter) -> PyResult<R>) -> PyResult<R> {
        let mut slot = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("writer poisoned"))?;
        let writer = slot
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("the writer is finished"))?;
        f(writer)
    }
}

#[pymethods]
impl PyWriter {
    /// Starts a dataset of `n_vars` genes in `out_dir`; `metadata` (JSON
    /// text of an object) becomes the manifest's free-form metadata.
    #[new]
    #[pyo3(signature = (out_dir, n_vars, *, tile_size, n_chunks, level, gene_totals=None,
                        var_names=None, obs=Vec::new(), var=None, metadata=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        out_dir: PathBuf,
        n_vars: u32,
        tile_size: usize,
        n_chunks: usize,
        level: i32,
        gene_totals: Option<Vec<f64>>,
        var_names: Option<Vec<String>>,
        obs: Vec<ObsSpec<'_>>,
        var: Option<VarSpec<'_>>,
        metadata: Option<&str>,
    ) -> PyResult<PyWriter> {
        let obs = obs
            .into_iter()
            .map(obs_column)
            .collect::<PyResult<Vec<_>>>()?;
        let config = WriterConfig::default()
            .with_tile_size(tile_size)
            .with_n_chunks(n_chunks)
            .with_level(level)
            .with_gene_totals(gene_totals)
            .with_var_names(var_names)
            .with_obs((!obs.is_empty()).then(|| ObsConfig::new(obs)))
            .with_var_table(var.map(var_table).transpose()?)
            .with_metadata(
                metadata
                    .map(manifest_metadata)
                    .transpose()?
                    .unwrap_or_default(),
            );
        let writer = DatasetWriter::create(out_dir, n_vars, config).or_raise(py)?;
        Ok(PyWriter {
            inner: Mutex::new(Some(writer)),
        })
    }

    /// Appends a CSR block of rows (`data` of any integer or float dtype).
    fn push(
        &self,
        py: Python<'_>,
        n_cols: u64,
        indptr: PyReadonlyArray1<'_, i64>,
        indices: PyReadonlyArray1<'_, i32>,
        data: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (indptr, indices) = (indptr.as_slice()?, indices.as_slice()?);
        self.with(|w| {
            for f in [
                push::<f32>,
                push::<f64>,
                push::<i32>,
                push::<i64>,
                push::<u32>,
                push::<u64>,
                push::<u16>,
            ] {
                if f(py, w, n_cols, indptr, indices, &data)? {
                    return Ok(());
                }
            }
            Err(input_error(
                "data must be a 1-D array of float32/64, int32/64 or uint16/32/64",
            ))
        })
    }

    /// Writes the remaining tiles, the side files and the manifest (last).
    /// Returns `(cells, tiles)`.
    fn finish(&self, py: Python<'_>) -> PyResult<(u64, usize)> {
        let writer = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("writer poisoned"))?
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("the writer is finished"))?;
        let manifest = py.detach(|| writer.finish()).or_raise(py)?;
        Ok((manifest.n_cells, manifest.n_tiles()))
    }

    /// Drops the writer, removing its temporary files.
    fn abort(&self) -> PyResult<()> {
        self.inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("writer poisoned"))?
            .take();
        Ok(())
    }
}

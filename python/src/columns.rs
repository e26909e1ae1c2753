//! Obs and var columns (Arrow arrays) as plain Python values that the package
//! turns into pandas columns.
//!
//! A column crosses as `(kind, values, mask, categories)`:
//! * `"category"`: `values` are int32 codes (`-1` missing), `categories` the vocabulary;
//! * `"numeric"` / `"bool"`: `values` a numpy array of the stored type, `mask` a
//!   boolean array marking missing entries (or `None` when none is missing);
//! * `"string"`: `values` a list of `str` or `None`.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType};
use arrow_schema::DataType;
use deltacells::obs::Kind;
use numpy::{Element, IntoPyArray};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::format_error;

fn mask<'py>(py: Python<'py>, a: &dyn Array) -> PyResult<Bound<'py, PyAny>> {
    if a.null_count() == 0 {
        return Ok(py.None().into_bound(py));
    }
    let m: Vec<bool> = (0..a.len()).map(|i| a.is_null(i)).collect();
    Ok(m.into_pyarray(py).into_any())
}

fn primitive<'py, T>(py: Python<'py>, a: &dyn Array) -> PyResult<Bound<'py, PyTuple>>
where
    T: ArrowPrimitiveType,
    T::Native: Element,
{
    let values = a.as_primitive::<T>().values().to_vec().into_pyarray(py);
    ("numeric", values, mask(py, a)?, py.None()).into_pyobject(py)
}

fn strings(a: &dyn Array) -> Option<Vec<Option<String>>> {
    let own = |v: Option<&str>| v.map(str::to_string);
    match a.data_type() {
        DataType::Utf8 => Some(a.as_string::<i32>().iter().map(own).collect()),
        DataType::LargeUtf8 => Some(a.as_string::<i64>().iter().map(own).collect()),
        DataType::Utf8View => Some(a.as_string_view().iter().map(own).collect()),
        _ => None,
    }
}

/// Category codes of an int8/16/32 array widened to int32, `-1` for nulls.
fn codes(a: &dyn Array) -> Option<Vec<i32>> {
    fn widen<T: ArrowPrimitiveType>(a: &dyn Array) -> Vec<i32>
    where
        T::Native: Into<i64>,
    {
        let p = a.as_primitive::<T>();
        (0..p.len())
            .map(|i| {
                if p.is_null(i) {
                    -1
                } else {
                    i32::try_from(p.value(i).into()).unwrap_or(-1)
                }
            })
            .collect()
    }
    match a.data_type() {
        DataType::Int8 => Some(widen::<Int8Type>(a)),
        DataType::Int16 => Some(widen::<Int16Type>(a)),
        DataType::Int32 => Some(widen::<Int32Type>(a)),
        _ => None,
    }
}

/// One column as `(kind, values, mask, categories)`. `kind` and
/// `categories` come from the obs schema for obs columns; a dictionary
/// array (var.parquet's categoricals) carries its own.
pub fn column<'py>(
    py: Python<'py>,
    kind: Option<Kind>,
    categories: Option<&Arc<[String]>>,
    a: &ArrayRef,
) -> PyResult<Bound<'py, PyTuple>> {
    let a = a.as_ref();
    if kind == Some(Kind::Category) {
        let codes = codes(a)
            .ok_or_else(|| format_error(format!("category codes of type {}", a.data_type())))?;
        let vocabulary: Vec<String> = categories.map(|c| c.to_vec()).unwrap_or_default();
        return ("category", codes.into_pyarray(py), py.None(), vocabulary).into_pyobject(py);
    }
    if let DataType::Dictionary(_, _) = a.data_type() {
        let dict = a.as_any_dictionary();
        let vocabulary: Vec<String> = strings(dict.values().as_ref())
            .ok_or_else(|| format_error("dictionary values are not strings"))?
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        let codes = deltacells::obs::dictionary_codes(dict);
        return ("category", codes.into_pyarray(py), py.None(), vocabulary).into_pyobject(py);
    }
    if let Some(values) = strings(a) {
        return ("string", values, py.None(), py.None()).into_pyobject(py);
    }
    match a.data_type() {
        DataType::Boolean => {
            let b = a.as_boolean();
            let values: Vec<bool> = (0..b.len()).map(|i| b.value(i)).collect();
            ("bool", values.into_pyarray(py), mask(py, a)?, py.None()).into_pyobject(py)
        }
        DataType::Int8 => primitive::<Int8Type>(py, a),
        DataType::Int16 => primitive::<Int16Type>(py, a),
        DataType::Int32 => primitive::<Int32Type>(py, a),
        DataType::Int64 => primitive::<Int64Type>(py, a),
        DataType::UInt8 => primitive::<UInt8Type>(py, a),
        DataType::UInt16 => primitive::<UInt16Type>(py, a),
        DataType::UInt32 => primitive::<UInt32Type>(py, a),
        DataType::UInt64 => primitive::<UInt64Type>(py, a),
        DataType::Float32 => primitive::<Float32Type>(py, a),
        DataType::Float64 => primitive::<Float64Type>(py, a),
        t => Err(format_error(format!(
            "columns of Arrow type {t} are not supported"
        ))),
    }
}

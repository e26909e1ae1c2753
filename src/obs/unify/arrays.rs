//! Arrays converted between an input's stored obs columns and the global ones.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type,
    UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, StringArray,
};

use crate::error::{Error, Result};
use crate::obs::schema::{ColumnSchema, ObsType};

/// Codes as the array type of a category column.
pub(super) fn codes_array(arrow_type: ObsType, codes: Vec<i32>) -> ArrayRef {
    match arrow_type {
        ObsType::Int8 => Arc::new(codes.iter().map(|&c| c as i8).collect::<Int8Array>()),
        ObsType::Int16 => Arc::new(codes.iter().map(|&c| c as i16).collect::<Int16Array>()),
        _ => Arc::new(Int32Array::from(codes)),
    }
}

/// The codes of a stored category column, widened to `i32`.
pub(super) fn stored_codes(a: &dyn Array) -> Option<Vec<i32>> {
    Some(match a.data_type() {
        arrow_schema::DataType::Int8 => a
            .as_primitive::<Int8Type>()
            .values()
            .iter()
            .map(|&c| i32::from(c))
            .collect(),
        arrow_schema::DataType::Int16 => a
            .as_primitive::<Int16Type>()
            .values()
            .iter()
            .map(|&c| i32::from(c))
            .collect(),
        arrow_schema::DataType::Int32 => a.as_primitive::<Int32Type>().values().to_vec(),
        _ => return None,
    })
}

/// A numeric column's values as `f64` or `i64` (nulls kept).
macro_rules! numeric_as {
    ($a:expr, $out:ty, $native:ty, [$($t:ty),*]) => {{
        let a: &dyn Array = $a;
        let mut done: Option<ArrayRef> = None;
        $(
            if done.is_none() && a.data_type() == &<$t as arrow_array::types::ArrowPrimitiveType>::DATA_TYPE {
                let p = a.as_primitive::<$t>();
                let values: $out = p.iter().map(|v| v.map(|v| v as $native)).collect();
                done = Some(Arc::new(values));
            }
        )*
        done
    }};
}

/// Converts one stored input column to the global column's type.
pub(super) fn convert(
    a: &dyn Array,
    global: &ColumnSchema,
    codes: Option<&[i32]>,
    categories: Option<&[String]>,
) -> Result<ArrayRef> {
    let bad = |what: &str| {
        Error::Input(format!(
            "obs column {:?}: stored as {}, not {what}",
            global.name,
            a.data_type()
        ))
    };
    if let Some(map) = codes {
        let own = stored_codes(a).ok_or_else(|| bad("category codes"))?;
        let global_codes = own
            .into_iter()
            .map(|c| match usize::try_from(c) {
                Ok(c) => map.get(c).copied().ok_or_else(|| {
                    Error::Input(format!(
                        "obs column {:?}: code {c} outside its {} categories",
                        global.name,
                        map.len()
                    ))
                }),
                Err(_) => Ok(-1),
            })
            .collect::<Result<Vec<i32>>>()?;
        return Ok(codes_array(global.arrow_type, global_codes));
    }
    if let Some(vocab) = categories {
        let own = stored_codes(a).ok_or_else(|| bad("category codes"))?;
        let strings: StringArray = own
            .into_iter()
            .map(|c| usize::try_from(c).ok().and_then(|c| vocab.get(c)))
            .collect();
        return Ok(Arc::new(strings));
    }
    widened(a, global.arrow_type).ok_or_else(|| bad(global.arrow_type.name()))
}

/// A numeric array as `to` where [`super::widen`] may give `to` for its
/// type (the same type, `Int64` from narrower integers, `Float64` from any
/// number), nulls kept; `None` otherwise.
pub(in crate::obs) fn widened(a: &dyn Array, to: ObsType) -> Option<ArrayRef> {
    if a.data_type() == &to.data_type() {
        return Some(arrow_array::make_array(a.to_data()));
    }
    match to {
        ObsType::Int64 => numeric_as!(
            a,
            Int64Array,
            i64,
            [Int8Type, Int16Type, Int32Type, UInt8Type, UInt16Type, UInt32Type]
        ),
        ObsType::Float64 => numeric_as!(
            a,
            Float64Array,
            f64,
            [
                Int8Type,
                Int16Type,
                Int32Type,
                Int64Type,
                UInt8Type,
                UInt16Type,
                UInt32Type,
                UInt64Type,
                Float32Type
            ]
        ),
        _ => None,
    }
}

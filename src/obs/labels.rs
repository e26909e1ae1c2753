//! Labels: the requested obs columns for exactly the cells of a read, in order.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, PrimitiveArray};
use arrow_schema::DataType;
use serde_json::{Number, Value};

use super::schema::Kind;
use crate::error::{Error, Result};

/// One obs column for the cells of a batch.
#[derive(Clone, Debug)]
pub struct Label {
    /// The column name.
    pub name: String,
    /// What the column holds.
    pub kind: Kind,
    /// One value per cell, in the batch's order, with validity: category codes
    /// (int8/int16/int32, `-1` = missing) or the numeric, bool or string values.
    pub values: ArrayRef,
    /// The vocabulary of a category column (the same `Arc` for every batch).
    pub categories: Option<Arc<[String]>>,
}

impl PartialEq for Label {
    fn eq(&self, other: &Label) -> bool {
        self.name == other.name
            && self.kind == other.kind
            && self.categories == other.categories
            && self.values.as_ref() == other.values.as_ref()
    }
}

impl Label {
    /// Number of cells.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the batch has no cells.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// A category column's codes widened to `i32` (`-1` = missing); `None` for
    /// other kinds.
    pub fn codes(&self) -> Option<Vec<i32>> {
        if self.kind != Kind::Category {
            return None;
        }
        let a = self.values.as_ref();
        (0..a.len())
            .map(|i| code(a, i).and_then(|c| i32::try_from(c).ok()))
            .collect()
    }

    /// A category column's codes widened to `i32`, a missing value as `-1`;
    /// `None` for other kinds.
    pub fn codes_or_missing(&self) -> Option<Vec<i32>> {
        if self.kind != Kind::Category {
            return None;
        }
        let a = self.values.as_ref();
        Some(
            (0..a.len())
                .map(|i| code(a, i).and_then(|c| i32::try_from(c).ok()).unwrap_or(-1))
                .collect(),
        )
    }

    /// The category of cell `row` (`None` if missing or not a category column).
    pub fn category(&self, row: usize) -> Option<&str> {
        let code = usize::try_from(code(self.values.as_ref(), row)?).ok()?;
        self.categories.as_ref()?.get(code).map(String::as_str)
    }

    /// Cell `row` as JSON: categories as their string, numbers as numbers,
    /// missing values and NaN as null.
    pub fn json_value(&self, row: usize) -> Value {
        json_value(self.values.as_ref(), self.categories.as_deref(), row)
    }
}

/// The labels of a batch: the requested columns, in request order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Labels {
    columns: Vec<Label>,
}

impl Labels {
    pub(crate) fn new(columns: Vec<Label>) -> Labels {
        Labels { columns }
    }

    /// The columns, in request order (empty when no obs was requested).
    pub fn columns(&self) -> &[Label] {
        &self.columns
    }

    /// The column called `name`.
    pub fn get(&self, name: &str) -> Option<&Label> {
        self.columns.iter().find(|l| l.name == name)
    }

    /// Whether no column was requested.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }
}

/// Code at `row` of an int8/int16/int32 array, `None` if null or not codes.
fn code(a: &dyn Array, row: usize) -> Option<i64> {
    if row >= a.len() || a.is_null(row) {
        return None;
    }
    match a.data_type() {
        DataType::Int8 => Some(i64::from(a.as_primitive::<Int8Type>().value(row))),
        DataType::Int16 => Some(i64::from(a.as_primitive::<Int16Type>().value(row))),
        DataType::Int32 => Some(i64::from(a.as_primitive::<Int32Type>().value(row))),
        _ => None,
    }
}

fn first_bad_code<T: ArrowPrimitiveType>(a: &PrimitiveArray<T>, n: i64) -> Option<(usize, i64)>
where
    T::Native: Into<i64>,
{
    let bad = |c: i64| c < -1 || c >= n;
    a.values()
        .iter()
        .enumerate()
        .find(|&(i, &c)| bad(c.into()) && a.is_valid(i))
        .map(|(i, &c)| (i, c.into()))
}

/// Checks that every code of a category column lies in `-1..n`.
pub(crate) fn check_codes(a: &dyn Array, n: usize) -> Result<(), String> {
    let n = n as i64;
    let bad = match a.data_type() {
        DataType::Int8 => first_bad_code(a.as_primitive::<Int8Type>(), n),
        DataType::Int16 => first_bad_code(a.as_primitive::<Int16Type>(), n),
        DataType::Int32 => first_bad_code(a.as_primitive::<Int32Type>(), n),
        t => return Err(format!("category codes of type {t}")),
    };
    match bad {
        Some((row, c)) => Err(format!("category code {c} at row {row} is outside -1..{n}")),
        None => Ok(()),
    }
}

fn float(v: f64) -> Value {
    Number::from_f64(v).map_or(Value::Null, Value::Number)
}

/// Value `row` of an obs array as JSON, as [`Label::json_value`] gives it for
/// a localized column: categories as their string, numbers as numbers,
/// missing values and NaN as null. For the arrays of
/// [`ObsReader::read_column`](super::ObsReader::read_column), which hold
/// category codes without their vocabulary, pass the column's
/// [`ColumnSchema::categories`](super::ColumnSchema::categories).
pub fn json_value(a: &dyn Array, categories: Option<&[String]>, row: usize) -> Value {
    if row >= a.len() || a.is_null(row) {
        return Value::Null;
    }
    if let Some(categories) = categories {
        let category = code(a, row)
            .and_then(|c| usize::try_from(c).ok())
            .and_then(|c| categories.get(c));
        return category.map_or(Value::Null, |c| Value::String(c.clone()));
    }
    match a.data_type() {
        DataType::Int8 => a.as_primitive::<Int8Type>().value(row).into(),
        DataType::Int16 => a.as_primitive::<Int16Type>().value(row).into(),
        DataType::Int32 => a.as_primitive::<Int32Type>().value(row).into(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(row).into(),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(row).into(),
        DataType::UInt16 => a.as_primitive::<UInt16Type>().value(row).into(),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(row).into(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(row).into(),
        DataType::Float32 => float(f64::from(a.as_primitive::<Float32Type>().value(row))),
        DataType::Float64 => float(a.as_primitive::<Float64Type>().value(row)),
        DataType::Boolean => a.as_boolean().value(row).into(),
        DataType::Utf8 => a.as_string::<i32>().value(row).into(),
        _ => Value::Null,
    }
}

/// Where the cells of a request live.
pub(crate) struct Located {
    /// The distinct tiles touched, in order of first use.
    pub tiles: Vec<usize>,
    /// For each cell, (position in `tiles`, row in the tile): the index form
    /// `arrow_select::interleave` takes.
    pub index: Vec<(usize, usize)>,
}

/// Locates `cells` in tiles starting at `limits` (`n_tiles + 1` entries).
pub(crate) fn locate(limits: &[u64], cells: &[u64]) -> Result<Located> {
    let n_cells = limits.last().copied().unwrap_or(0);
    let mut tiles = Vec::new();
    let mut slot_of: HashMap<usize, usize> = HashMap::new();
    let mut index = Vec::with_capacity(cells.len());
    for &c in cells {
        if c >= n_cells {
            return Err(Error::Input(format!("cell {c} is outside 0..{n_cells}")));
        }
        let tile = limits.partition_point(|&l| l <= c) - 1;
        let slot = *slot_of.entry(tile).or_insert_with(|| {
            tiles.push(tile);
            tiles.len() - 1
        });
        index.push((slot, (c - limits[tile]) as usize));
    }
    Ok(Located { tiles, index })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BooleanArray, Float32Array, Int16Array, StringArray};

    #[test]
    fn json_values_follow_the_cli_rules() {
        let cats: Vec<String> = vec!["a".into(), "b".into()];
        let codes = Int16Array::from(vec![Some(1), Some(-1), None]);
        assert_eq!(json_value(&codes, Some(&cats), 0), Value::from("b"));
        assert_eq!(json_value(&codes, Some(&cats), 1), Value::Null);
        assert_eq!(json_value(&codes, Some(&cats), 2), Value::Null);
        let f = Float32Array::from(vec![Some(2.5), Some(f32::NAN), None]);
        assert_eq!(json_value(&f, None, 0), Value::from(2.5));
        assert_eq!(json_value(&f, None, 1), Value::Null);
        assert_eq!(json_value(&f, None, 2), Value::Null);
        assert_eq!(
            json_value(&BooleanArray::from(vec![Some(true)]), None, 0),
            Value::Bool(true)
        );
        assert_eq!(
            json_value(&StringArray::from(vec![Some("")]), None, 0),
            Value::from("")
        );
    }

    #[test]
    fn codes_outside_the_vocabulary_are_found() {
        assert!(check_codes(&Int16Array::from(vec![-1, 0, 1]), 2).is_ok());
        assert!(check_codes(&Int16Array::from(vec![Some(0), None]), 1).is_ok());
        assert!(check_codes(&Int16Array::from(vec![0, 2]), 2)
            .unwrap_err()
            .contains("row 1"));
        assert!(check_codes(&Int16Array::from(vec![-2]), 2).is_err());
    }

    #[test]
    fn locate_groups_cells_by_tile() {
        let at = locate(&[0, 3, 6, 7], &[6, 0, 4, 1]).unwrap();
        assert_eq!(at.tiles, vec![2, 0, 1]);
        assert_eq!(at.index, vec![(0, 0), (1, 0), (2, 1), (1, 1)]);
        assert!(locate(&[0, 3], &[3]).is_err());
    }
}

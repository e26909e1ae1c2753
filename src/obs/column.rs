//! Obs columns handed to the writer, and their encoding into shard columns.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{
    AnyDictionaryArray, Array, ArrayRef, BooleanArray, Int16Array, Int32Array, Int8Array,
    StringArray,
};
use arrow_schema::DataType;

use super::schema::{ColumnSchema, Kind, ObsType};
use crate::error::{Error, Result};

/// One obs column for the dataset writer (`DatasetWriter`): one value per cell, in
/// the order the cells are pushed.
#[derive(Clone, Debug)]
pub struct ObsColumn {
    name: String,
    data: ColumnData,
}

/// A column's values: what the obs shards and the gene table store.
#[derive(Clone, Debug)]
pub(super) enum ColumnData {
    /// `codes[i]` indexes `categories`; `-1` is missing.
    Category {
        categories: Vec<String>,
        codes: Vec<i32>,
    },
    /// A numeric, boolean or Utf8 array, stored as given.
    Plain(ArrayRef),
}

fn input(name: &str, msg: impl std::fmt::Display) -> Error {
    Error::Input(format!("obs column {name:?}: {msg}"))
}

/// The strings of a Utf8, LargeUtf8 or Utf8View array (`None` for nulls).
fn strings(array: &dyn Array) -> Option<Vec<Option<&str>>> {
    match array.data_type() {
        DataType::Utf8 => Some(array.as_string::<i32>().iter().collect()),
        DataType::LargeUtf8 => Some(array.as_string::<i64>().iter().collect()),
        DataType::Utf8View => Some(array.as_string_view().iter().collect()),
        _ => None,
    }
}

/// Each key of a dictionary array as the index of its value, `-1` where
/// null (pandas' categorical codes). A dictionary with no values has only
/// null keys, where arrow's `normalized_keys` would assert.
pub fn dictionary_codes(dict: &dyn AnyDictionaryArray) -> Vec<i32> {
    if dict.values().is_empty() {
        return vec![-1; dict.len()];
    }
    dict.normalized_keys()
        .iter()
        .enumerate()
        .map(|(i, &k)| if dict.is_null(i) { -1 } else { k as i32 })
        .collect()
}

impl ObsColumn {
    /// A string column (`None` = missing), e.g. cell barcodes.
    pub fn string<S: AsRef<str>>(
        name: impl Into<String>,
        values: impl IntoIterator<Item = Option<S>>,
    ) -> ObsColumn {
        let array: StringArray = values.into_iter().collect();
        ObsColumn {
            name: name.into(),
            data: ColumnData::Plain(Arc::new(array)),
        }
    }

    /// A boolean column (`None` = missing).
    pub fn bool(
        name: impl Into<String>,
        values: impl IntoIterator<Item = Option<bool>>,
    ) -> ObsColumn {
        let array: BooleanArray = values.into_iter().collect();
        ObsColumn {
            name: name.into(),
            data: ColumnData::Plain(Arc::new(array)),
        }
    }

    /// A categorical column from its values (`None` = missing). The vocabulary
    /// is the distinct values sorted, as pandas' `astype("category")` makes it.
    pub fn categorical<S: AsRef<str>>(
        name: impl Into<String>,
        values: impl IntoIterator<Item = Option<S>>,
    ) -> ObsColumn {
        let values: Vec<Option<S>> = values.into_iter().collect();
        let vocabulary: BTreeSet<&str> = values.iter().flatten().map(AsRef::as_ref).collect();
        let index: HashMap<&str, i32> = vocabulary
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as i32))
            .collect();
        let codes = values
            .iter()
            .map(|v| v.as_ref().map_or(-1, |s| index[s.as_ref()]))
            .collect();
        let categories = vocabulary.into_iter().map(str::to_string).collect();
        ObsColumn {
            name: name.into(),
            data: ColumnData::Category { categories, codes },
        }
    }

    /// A categorical column from its vocabulary and codes (`-1` = missing),
    /// like a pandas `Categorical`'s `categories` and `codes`.
    pub fn category(
        name: impl Into<String>,
        categories: Vec<String>,
        codes: Vec<i32>,
    ) -> Result<ObsColumn> {
        let name = name.into();
        let mut seen = HashSet::with_capacity(categories.len());
        if let Some(dup) = categories.iter().find(|c| !seen.insert(c.as_str())) {
            return Err(input(&name, format!("category {dup:?} appears twice")));
        }
        let n = categories.len() as i64;
        if let Some(bad) = codes.iter().find(|&&c| c < -1 || i64::from(c) >= n) {
            return Err(input(&name, format!("code {bad} is outside -1..{n}")));
        }
        Ok(ObsColumn {
            name,
            data: ColumnData::Category { categories, codes },
        })
    }

    /// A column from an Arrow array: a dictionary of strings is a category
    /// column (its dictionary is the vocabulary, null keys are missing),
    /// integers and floats are numeric, booleans bool, strings string.
    pub fn from_arrow(name: impl Into<String>, array: ArrayRef) -> Result<ObsColumn> {
        let name = name.into();
        match array.data_type() {
            DataType::Dictionary(_, _) => {
                let dict = array.as_any_dictionary();
                let values = strings(dict.values().as_ref()).ok_or_else(|| {
                    input(
                        &name,
                        format!(
                            "dictionary values of type {} are not strings",
                            dict.values().data_type()
                        ),
                    )
                })?;
                let categories = values
                    .into_iter()
                    .map(|v| v.map(str::to_string))
                    .collect::<Option<Vec<String>>>()
                    .ok_or_else(|| input(&name, "the dictionary holds a null category"))?;
                ObsColumn::category(name, categories, dictionary_codes(dict))
            }
            DataType::LargeUtf8 | DataType::Utf8View => {
                let values = strings(array.as_ref()).unwrap_or_default();
                Ok(ObsColumn::string(name, values))
            }
            t if ObsType::from_data_type(t).is_some() => Ok(ObsColumn {
                name,
                data: ColumnData::Plain(array),
            }),
            t => Err(input(
                &name,
                format!("Arrow type {t} is not supported (categorical, numeric, bool or string)"),
            )),
        }
    }

    /// The column's values.
    pub(super) fn data(&self) -> &ColumnData {
        &self.data
    }

    /// A column of `data` named `name`.
    pub(super) fn from_data(name: String, data: ColumnData) -> ObsColumn {
        ObsColumn { name, data }
    }

    /// The column name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        match &self.data {
            ColumnData::Category { codes, .. } => codes.len(),
            ColumnData::Plain(a) => a.len(),
        }
    }

    /// Whether the column has no cells.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cells `start..start + len` of the column, with the same vocabulary
    /// (`None` past its end).
    pub(crate) fn slice(&self, start: usize, len: usize) -> Option<ObsColumn> {
        if start.checked_add(len)? > self.len() {
            return None;
        }
        let data = match &self.data {
            ColumnData::Category { categories, codes } => ColumnData::Category {
                categories: categories.clone(),
                codes: codes[start..start + len].to_vec(),
            },
            ColumnData::Plain(a) => ColumnData::Plain(a.slice(start, len)),
        };
        Some(ObsColumn {
            name: self.name.clone(),
            data,
        })
    }

    /// The column's schema entry and the array stored in the shards: category
    /// codes in the smallest signed type that holds the largest code, or
    /// strings when the vocabulary exceeds `max_categories`.
    pub(crate) fn encode(&self, max_categories: usize) -> Result<(ColumnSchema, ArrayRef)> {
        let schema = |kind, arrow_type, categories| ColumnSchema {
            name: self.name.clone(),
            kind,
            arrow_type,
            categories,
        };
        match &self.data {
            ColumnData::Category { categories, codes } if categories.len() > max_categories => {
                let array: StringArray = codes
                    .iter()
                    .map(|&c| usize::try_from(c).ok().map(|c| categories[c].as_str()))
                    .collect();
                Ok((schema(Kind::String, ObsType::String, None), Arc::new(array)))
            }
            ColumnData::Category { categories, codes } => {
                let arrow_type = ObsType::codes_for(categories.len()).ok_or_else(|| {
                    input(
                        &self.name,
                        format!(
                            "{} categories is too many for int32 codes",
                            categories.len()
                        ),
                    )
                })?;
                // Codes were checked against the vocabulary, so every narrowing fits.
                let array: ArrayRef = match arrow_type {
                    ObsType::Int8 => {
                        Arc::new(codes.iter().map(|&c| c as i8).collect::<Int8Array>())
                    }
                    ObsType::Int16 => {
                        Arc::new(codes.iter().map(|&c| c as i16).collect::<Int16Array>())
                    }
                    _ => Arc::new(Int32Array::from(codes.clone())),
                };
                Ok((
                    schema(Kind::Category, arrow_type, Some(categories.clone().into())),
                    array,
                ))
            }
            ColumnData::Plain(array) => {
                let arrow_type = ObsType::from_data_type(array.data_type()).ok_or_else(|| {
                    input(
                        &self.name,
                        format!("Arrow type {} is not supported", array.data_type()),
                    )
                })?;
                let kind = match arrow_type {
                    ObsType::Bool => Kind::Bool,
                    ObsType::String => Kind::String,
                    _ => Kind::Numeric,
                };
                Ok((schema(kind, arrow_type, None), array.clone()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int16Type;
    use arrow_array::{DictionaryArray, Float32Array};

    #[test]
    fn categorical_sorts_its_vocabulary_like_pandas() {
        let c = ObsColumn::categorical("ct", [Some("b"), None, Some("a"), Some("b")]);
        let (s, a) = c.encode(20_000).unwrap();
        assert_eq!(
            s.categories.as_deref(),
            Some(&["a".to_string(), "b".to_string()][..])
        );
        assert_eq!(
            a.as_primitive::<arrow_array::types::Int8Type>()
                .values()
                .to_vec(),
            vec![1, -1, 0, 1]
        );
    }

    #[test]
    fn code_width_follows_the_vocabulary_and_falls_back_to_strings() {
        let cats = |n: usize| (0..n).map(|i| format!("c{i}")).collect::<Vec<_>>();
        let col = |n: usize| ObsColumn::category("x", cats(n), vec![n as i32 - 1, -1]).unwrap();
        assert_eq!(col(128).encode(20_000).unwrap().0.arrow_type, ObsType::Int8);
        assert_eq!(
            col(129).encode(20_000).unwrap().0.arrow_type,
            ObsType::Int16
        );
        assert_eq!(
            col(40_000).encode(50_000).unwrap().0.arrow_type,
            ObsType::Int32
        );
        let (s, a) = col(129).encode(100).unwrap();
        assert_eq!(
            (s.kind, s.arrow_type, s.categories),
            (Kind::String, ObsType::String, None)
        );
        assert_eq!(
            a.as_string::<i32>().iter().collect::<Vec<_>>(),
            vec![Some("c128"), None]
        );
    }

    #[test]
    fn from_arrow_classifies_and_refuses() {
        let dict: DictionaryArray<Int16Type> = [Some("x"), None, Some("y")].into_iter().collect();
        let (s, a) = ObsColumn::from_arrow("d", Arc::new(dict))
            .unwrap()
            .encode(10)
            .unwrap();
        assert_eq!(s.kind, Kind::Category);
        assert_eq!(
            a.as_primitive::<arrow_array::types::Int8Type>()
                .values()
                .to_vec(),
            vec![0, -1, 1]
        );
        let (s, _) = ObsColumn::from_arrow("f", Arc::new(Float32Array::from(vec![1.0])))
            .unwrap()
            .encode(10)
            .unwrap();
        assert_eq!((s.kind, s.arrow_type), (Kind::Numeric, ObsType::Float32));
        let dates = Arc::new(arrow_array::Date32Array::from(vec![1]));
        assert!(ObsColumn::from_arrow("t", dates).is_err());
        assert!(ObsColumn::category("c", vec!["a".into()], vec![1]).is_err());
        assert!(ObsColumn::category("c", vec!["a".into(), "a".into()], vec![]).is_err());
    }
}

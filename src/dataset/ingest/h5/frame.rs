//! AnnData dataframes (`obs`, `var`): encoding-type `dataframe`, the index
//! named by the `_index` attribute, columns listed by `column-order`, each a
//! numeric `array`, a `string-array`, a `categorical` group (`codes`,
//! `categories`, `ordered`) or a nullable group (`values`, `mask`) of
//! integers, booleans or strings.

use std::sync::Arc;

use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{ArrayRef, BooleanArray, PrimitiveArray};
use arrow_buffer::NullBuffer;
use hdf5_metno::types::{FloatSize, IntSize, TypeDescriptor};

use super::H5;
use crate::error::{Error, Result};

/// One dataframe column.
pub(crate) enum Column {
    /// Strings, `None` where missing (nullable strings).
    Strings(Vec<Option<String>>),
    /// pandas `Categorical`: `codes[i]` indexes `categories`, -1 is missing.
    Categorical {
        categories: Vec<String>,
        codes: Vec<i32>,
        ordered: bool,
    },
    /// Numbers or booleans, nulls where missing.
    Arrow(ArrayRef),
}

impl Column {
    /// The values as strings (categories decoded), for the gene table.
    pub(crate) fn strings(&self) -> Option<Vec<String>> {
        match self {
            Column::Strings(v) => Some(v.iter().map(|s| s.clone().unwrap_or_default()).collect()),
            Column::Categorical {
                categories, codes, ..
            } => Some(
                codes
                    .iter()
                    .map(|&c| {
                        usize::try_from(c)
                            .ok()
                            .and_then(|c| categories.get(c))
                            .cloned()
                            .unwrap_or_default()
                    })
                    .collect(),
            ),
            Column::Arrow(_) => None,
        }
    }

    fn len(&self) -> usize {
        match self {
            Column::Strings(v) => v.len(),
            Column::Categorical { codes, .. } => codes.len(),
            Column::Arrow(a) => a.len(),
        }
    }
}

/// A dataframe: its index and the columns asked for, in `column-order`.
pub(crate) struct Frame {
    /// The name of the index's dataset (`_index` where pandas' index had
    /// none, as anndata writes it).
    pub index_name: String,
    pub index: Vec<String>,
    pub columns: Vec<(String, Column)>,
    /// The names of the columns not asked for (not read).
    pub unread: Vec<String>,
}

impl Frame {
    /// The rows `keep` marks, in order (a gene table narrowed to the genes
    /// a conversion keeps).
    pub(crate) fn rows(self, keep: &[bool]) -> Result<Frame> {
        fn pick<T>(v: Vec<T>, keep: &[bool]) -> Vec<T> {
            v.into_iter()
                .zip(keep)
                .filter_map(|(x, &k)| k.then_some(x))
                .collect()
        }
        let mask = BooleanArray::from(keep.to_vec());
        let columns = self
            .columns
            .into_iter()
            .map(|(name, column)| {
                let column = match column {
                    Column::Strings(v) => Column::Strings(pick(v, keep)),
                    Column::Categorical {
                        categories,
                        codes,
                        ordered,
                    } => Column::Categorical {
                        categories,
                        codes: pick(codes, keep),
                        ordered,
                    },
                    Column::Arrow(a) => Column::Arrow(
                        arrow_select::filter::filter(a.as_ref(), &mask)
                            .map_err(|e| Error::Input(format!("column {name:?}: {e}")))?,
                    ),
                };
                Ok((name, column))
            })
            .collect::<Result<_>>()?;
        Ok(Frame {
            index_name: self.index_name,
            index: pick(self.index, keep),
            columns,
            unread: self.unread,
        })
    }
}

/// The numeric or boolean dataset at `at` as an Arrow array, nulls where `mask` is true.
fn numeric(h5: &H5, at: &str, mask: Option<Vec<bool>>) -> Result<ArrayRef> {
    let ds = h5.whole(at)?;
    let nulls = mask.map(|m| NullBuffer::from(m.into_iter().map(|m| !m).collect::<Vec<_>>()));
    let e = |e: hdf5_metno::Error| h5.err(at, e);
    macro_rules! prim {
        ($ty:ty, $native:ty) => {
            Arc::new(PrimitiveArray::<$ty>::new(
                ds.read_raw::<$native>().map_err(e)?.into(),
                nulls,
            )) as ArrayRef
        };
    }
    Ok(match h5.descriptor(at)? {
        TypeDescriptor::Integer(IntSize::U1) => prim!(Int8Type, i8),
        TypeDescriptor::Integer(IntSize::U2) => prim!(Int16Type, i16),
        TypeDescriptor::Integer(IntSize::U4) => prim!(Int32Type, i32),
        TypeDescriptor::Integer(IntSize::U8) => prim!(Int64Type, i64),
        TypeDescriptor::Unsigned(IntSize::U1) => prim!(UInt8Type, u8),
        TypeDescriptor::Unsigned(IntSize::U2) => prim!(UInt16Type, u16),
        TypeDescriptor::Unsigned(IntSize::U4) => prim!(UInt32Type, u32),
        TypeDescriptor::Unsigned(IntSize::U8) => prim!(UInt64Type, u64),
        TypeDescriptor::Float(FloatSize::U4) => prim!(Float32Type, f32),
        TypeDescriptor::Float(FloatSize::U8) => prim!(Float64Type, f64),
        TypeDescriptor::Boolean => Arc::new(BooleanArray::new(
            ds.read_raw::<bool>().map_err(e)?.into(),
            nulls,
        )),
        t => return Err(h5.err(at, format!("unexpected dtype {t} for a numeric column"))),
    })
}

/// Categories may be strings or numbers; numbers are written out.
fn categories(h5: &H5, at: &str) -> Result<Vec<String>> {
    match h5.descriptor(at)? {
        TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => {
            let ds = h5.whole(at)?;
            let v = ds.read_raw::<i64>().map_err(|e| h5.err(at, e))?;
            Ok(v.iter().map(i64::to_string).collect())
        }
        TypeDescriptor::Float(_) => {
            let ds = h5.whole(at)?;
            let v = ds.read_raw::<f64>().map_err(|e| h5.err(at, e))?;
            Ok(v.iter().map(f64::to_string).collect())
        }
        // As Python spells them (what `deltacells.write` stores of such
        // categories): a doublet flag made categorical.
        TypeDescriptor::Boolean => {
            let ds = h5.whole(at)?;
            let v = ds.read_raw::<bool>().map_err(|e| h5.err(at, e))?;
            Ok(v.iter()
                .map(|&b| if b { "True" } else { "False" }.to_string())
                .collect())
        }
        _ => h5.strings(at),
    }
}

fn mask(h5: &H5, at: &str) -> Result<Vec<bool>> {
    let ds = h5.whole(at)?;
    ds.read_raw::<bool>().map_err(|e| h5.err(at, e))
}

/// The column at `at`, by its encoding.
fn column(h5: &H5, at: &str) -> Result<Column> {
    let encoding = h5.encoding(at)?;
    let Some(encoding) = encoding else {
        return Err(h5.err(
            at,
            "no encoding-type attribute (written by anndata before 0.8?); \
             re-save the file with a current anndata: anndata.read_h5ad(path).write_h5ad(new_path)",
        ));
    };
    Ok(match encoding.as_str() {
        "array" => Column::Arrow(numeric(h5, at, None)?),
        "string-array" => Column::Strings(h5.strings(at)?.into_iter().map(Some).collect()),
        "categorical" => {
            let codes_at = format!("{at}/codes");
            let codes_ds = h5.whole(&codes_at)?;
            if !matches!(h5.descriptor(&codes_at)?, TypeDescriptor::Integer(_)) {
                return Err(h5.err(&codes_at, "category codes must be signed integers"));
            }
            let codes = codes_ds
                .read_raw::<i32>()
                .map_err(|e| h5.err(&codes_at, e))?;
            let categories = categories(h5, &format!("{at}/categories"))?;
            let ordered = match h5.group(at)?.attr("ordered") {
                Ok(a) => a
                    .read_scalar::<bool>()
                    .map_err(|e| h5.err(at, format!("attribute ordered: {e}")))?,
                Err(_) => false,
            };
            let n = categories.len() as i64;
            if let Some(bad) = codes.iter().find(|&&c| c < -1 || i64::from(c) >= n) {
                return Err(h5.err(&codes_at, format!("code {bad} is outside -1..{n}")));
            }
            Column::Categorical {
                categories,
                codes,
                ordered,
            }
        }
        "nullable-integer" | "nullable-boolean" => {
            let mask = mask(h5, &format!("{at}/mask"))?;
            Column::Arrow(numeric(h5, &format!("{at}/values"), Some(mask))?)
        }
        "nullable-string-array" => {
            let mask = mask(h5, &format!("{at}/mask"))?;
            let values = h5.strings(&format!("{at}/values"))?;
            if mask.len() != values.len() {
                return Err(h5.err(at, "mask and values differ in length"));
            }
            Column::Strings(
                values
                    .into_iter()
                    .zip(mask)
                    .map(|(v, m)| (!m).then_some(v))
                    .collect(),
            )
        }
        other => {
            return Err(h5.err(
                at,
                format!(
                    "encoding-type {other:?} is not supported (categorical, numeric, boolean, \
                     string and their nullable forms are); leave the column out with --obs-columns"
                ),
            ))
        }
    })
}

/// The column names of the dataframe at `at`, in order.
pub(crate) fn column_order(h5: &H5, at: &str) -> Result<Vec<String>> {
    let group = h5.group(at)?;
    let Ok(attr) = group.attr("column-order") else {
        return Ok(Vec::new());
    };
    // An empty list is stored as an empty float array.
    if attr.size() == 0 {
        return Ok(Vec::new());
    }
    super::read_strings(&attr).map_err(|e| h5.err(at, format!("attribute column-order: {e}")))
}

/// Reads the dataframe at `at`: its index, and the columns in `keep` (all
/// when `None`; names not in the frame are left for the caller to report).
pub(crate) fn read(h5: &H5, at: &str, keep: Option<&[String]>) -> Result<Frame> {
    if !h5.is_group(at) {
        return Err(h5.err(
            at,
            "not a group (a dataframe written by anndata before 0.7); \
             re-save the file with a current anndata",
        ));
    }
    if h5.exists(&format!("{at}/__categories")) {
        return Err(h5.err(
            at,
            "categories stored in __categories (anndata before 0.8) are not supported; \
             re-save the file with a current anndata: anndata.read_h5ad(path).write_h5ad(new_path)",
        ));
    }
    match h5.encoding(at)?.as_deref() {
        Some("dataframe") => {}
        other => {
            return Err(h5.err(
                at,
                format!("encoding-type {other:?}, expected \"dataframe\""),
            ))
        }
    }
    let index_name = h5
        .attr_string(at, "_index")?
        .ok_or_else(|| h5.err(at, "no _index attribute"))?;
    let index = h5.strings(&format!("{at}/{index_name}"))?;
    let mut columns = Vec::new();
    let mut unread = Vec::new();
    for name in column_order(h5, at)? {
        if keep.is_some_and(|k| !k.contains(&name)) {
            unread.push(name);
            continue;
        }
        let col_at = format!("{at}/{name}");
        let col = column(h5, &col_at)?;
        if col.len() != index.len() {
            return Err(h5.err(
                &col_at,
                format!("{} values for an index of {}", col.len(), index.len()),
            ));
        }
        columns.push((name, col));
    }
    Ok(Frame {
        index_name,
        index,
        columns,
        unread,
    })
}

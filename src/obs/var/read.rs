//! `var.parquet` read back and checked: the table, its index columns and
//! its categories as the writer listed them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use serde_json::Value;

use crate::error::Result;
use crate::obs::reader::{
    check_chunk_ranges, check_row_group_pages, guarded, read_footer, to_bytes, Fetched,
};
use crate::storage::Store;

use super::{dictionary, string_values, var_rule, CATEGORIES_KEY, VAR_KEY};

/// The gene table read back.
#[derive(Clone, Debug, PartialEq)]
pub struct VarFrame {
    /// Every column, the index columns included, as stored.
    pub table: RecordBatch,
    /// The columns pandas uses as the index (from the `pandas` metadata).
    pub index_columns: Vec<String>,
    /// The categorical columns whose categories are ordered (from the
    /// `pandas` metadata).
    pub ordered: Vec<String>,
}

/// What a Parquet file's key-value metadata says of its columns: pandas'
/// entry, and the categories [`CATEGORIES_KEY`] lists.
#[derive(Clone, Debug, Default)]
pub(crate) struct TableMeta {
    /// The columns pandas uses as the index.
    pub index_columns: Vec<String>,
    /// The categorical columns whose categories are ordered.
    pub ordered: Vec<String>,
    /// Each categorical column's categories, in order, where listed.
    pub categories: HashMap<String, Vec<String>>,
}

impl TableMeta {
    /// The metadata in the entries `pandas` and `categories` (JSON text);
    /// none of an entry that does not parse.
    fn parse(pandas: Option<&str>, categories: Option<&str>) -> TableMeta {
        let categories = categories
            .and_then(|t| serde_json::from_str::<HashMap<String, Vec<String>>>(t).ok())
            .unwrap_or_default();
        let Some(v) = pandas.and_then(|t| serde_json::from_str::<Value>(t).ok()) else {
            return TableMeta {
                categories,
                ..TableMeta::default()
            };
        };
        let names = |list: Option<&Value>| -> Vec<Value> {
            list.and_then(Value::as_array).cloned().unwrap_or_default()
        };
        let index_columns = names(v.get("index_columns"))
            .iter()
            .filter_map(|c| c.as_str().map(str::to_string))
            .collect();
        let ordered = names(v.get("columns"))
            .iter()
            .filter(|c| {
                c.get("pandas_type").and_then(Value::as_str) == Some("categorical")
                    && c.pointer("/metadata/ordered").and_then(Value::as_bool) == Some(true)
            })
            .filter_map(|c| {
                c.get("field_name")
                    .or_else(|| c.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        TableMeta {
            index_columns,
            ordered,
            categories,
        }
    }
}

/// Reads and checks `var.parquet` of a dataset of `n_genes` genes.
pub(crate) fn read_var_table(store: &dyn Store, n_genes: u32) -> Result<VarFrame> {
    let bytes = store
        .get(VAR_KEY)?
        .ok_or_else(|| var_rule("has_var_table is true but var.parquet is missing"))?;
    var_frame(to_bytes(bytes), Some(u64::from(n_genes))).map_err(var_rule)
}

/// The gene table in `data` (a `var.parquet`, of `rows` rows where given),
/// its categorical columns over the categories the file lists.
pub(super) fn var_frame(
    data: bytes::Bytes,
    rows: Option<u64>,
) -> std::result::Result<VarFrame, String> {
    let (table, meta) = read_whole_parquet(data, rows)?;
    let schema = table.schema();
    let names: HashSet<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if let Some(missing) = meta
        .index_columns
        .iter()
        .find(|c| !names.contains(c.as_str()))
    {
        return Err(format!(
            "the pandas index column {missing:?} is not in the file"
        ));
    }
    Ok(VarFrame {
        table: with_categories(table, &meta.categories)?,
        index_columns: meta.index_columns,
        ordered: meta.ordered,
    })
}

/// `table` with each dictionary column that `lists` names re-keyed over
/// its listed categories, in their order; a value the list lacks is an
/// error (a damaged file).
fn with_categories(
    table: RecordBatch,
    lists: &HashMap<String, Vec<String>>,
) -> std::result::Result<RecordBatch, String> {
    if lists.is_empty() {
        return Ok(table);
    }
    let schema = table.schema();
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for (field, array) in schema.fields().iter().zip(table.columns()) {
        let list = lists
            .get(field.name())
            .filter(|_| matches!(array.data_type(), DataType::Dictionary(_, _)));
        let (field, array) = match (list, string_values(array.as_ref())) {
            (Some(list), Some(values)) => {
                let at: HashMap<&str, i32> = list
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.as_str(), i as i32))
                    .collect();
                if at.len() != list.len() {
                    return Err(format!(
                        "var column {:?} lists a category twice",
                        field.name()
                    ));
                }
                let codes = values
                    .iter()
                    .map(|v| match v {
                        None => Ok(-1),
                        Some(v) => at.get(v.as_str()).copied().ok_or_else(|| {
                            format!(
                                "var column {:?} holds {v:?}, which its categories do not list",
                                field.name()
                            )
                        }),
                    })
                    .collect::<std::result::Result<Vec<i32>, String>>()?;
                let (array, _) = dictionary(list, &codes).map_err(|e| e.to_string())?;
                let field = Field::new(field.name(), array.data_type().clone(), true);
                (Arc::new(field), array)
            }
            _ => (field.clone(), array.clone()),
        };
        fields.push(field);
        arrays.push(array);
    }
    let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
    RecordBatch::try_new(Arc::new(schema), arrays).map_err(|e| e.to_string())
}

/// Decodes a whole small Parquet file (a gene table) from `data`, checked
/// before anything is allocated from it: the footer walked, every column
/// chunk's range and page headers checked against the bytes present, and
/// with `rows`, the row count; the third-party decoders run guarded. Gives
/// the table as one batch and what its pandas metadata says.
pub(crate) fn read_whole_parquet(
    data: bytes::Bytes,
    rows: Option<u64>,
) -> std::result::Result<(RecordBatch, TableMeta), String> {
    let len = data.len() as u64;
    let meta = read_footer(len, |r| Ok(data.slice(r.start as usize..r.end as usize)))?;
    // Everything that walks the decoded metadata (row counts, chunk ranges,
    // key-value entries, the Arrow schema conversion) runs guarded.
    let (meta, pandas) = guarded(|| {
        let n = meta.file_metadata().num_rows();
        if let Some(rows) = rows.filter(|&r| u64::try_from(n).ok() != Some(r)) {
            return Err(format!(
                "{n} rows for {rows} genes (one row per output column)"
            ));
        }
        check_chunk_ranges(&meta, len)?;
        let entry = |key: &str| {
            meta.file_metadata()
                .key_value_metadata()
                .and_then(|kv| kv.iter().find(|e| e.key == key))
                .and_then(|e| e.value.as_deref())
        };
        let pandas = TableMeta::parse(entry("pandas"), entry(CATEGORIES_KEY));
        let meta = ArrowReaderMetadata::try_new(Arc::new(meta), ArrowReaderOptions::new())
            .map_err(|e| e.to_string())?;
        Ok((meta, pandas))
    })?;
    let schema = meta.schema().clone();
    let n_rows = usize::try_from(meta.metadata().file_metadata().num_rows().max(0))
        .map_err(|e| e.to_string())?;
    let input = Fetched::whole(data);
    for rg in 0..meta.metadata().num_row_groups() {
        check_row_group_pages(&input, meta.metadata(), rg, None)?;
    }
    let table = guarded(|| {
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(input, meta)
            .with_batch_size(n_rows.clamp(1, 1 << 16))
            .build()
            .map_err(|e| e.to_string())?;
        let batches = reader
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| e.to_string())
    })?;
    if table.num_rows() != n_rows {
        return Err(format!(
            "decoded {} rows, the footer says {n_rows}",
            table.num_rows()
        ));
    }
    Ok((table, pandas))
}

//! `var.parquet`: the gene table, one row per output column, pandas index kept.
//!
//! Written the way pyarrow writes a pandas DataFrame: the data columns, then
//! the index column, and a `pandas` entry in the file's key-value metadata
//! naming the index, so `pandas.read_parquet` gives back the same frame with
//! its index. Categorical columns are Arrow dictionaries, which pandas reads
//! as `category`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int8Type};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Int16Array, Int32Array, Int8Array, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde_json::{json, Value};

use super::reader::{
    check_chunk_ranges, check_row_group_pages, guarded, read_footer, to_bytes, Fetched,
};
use super::schema::ObsType;
use crate::error::{Error, Result};
use crate::format::manifest::DatasetRule;
use crate::format::EncodeError;
use crate::storage::Store;

/// Object key of the gene table.
pub(crate) const VAR_KEY: &str = "var.parquet";

fn var_rule(msg: impl Into<String>) -> Error {
    Error::Dataset(DatasetRule::VarTable(msg.into()))
}

#[derive(Clone, Debug)]
enum VarValues {
    String(Vec<String>),
    Category(Vec<String>),
}

/// A gene table for the dataset writer's `WriterConfig`, in source column order
/// (the writer reorders it by `gene_order`).
#[derive(Clone, Debug)]
pub struct VarTable {
    index_name: String,
    index: Vec<String>,
    columns: Vec<(String, VarValues)>,
}

impl VarTable {
    /// A table whose pandas index is the column `index_name` with values `index`.
    pub fn new(index_name: impl Into<String>, index: Vec<String>) -> VarTable {
        VarTable {
            index_name: index_name.into(),
            index,
            columns: Vec::new(),
        }
    }

    /// The table a 10x `features.tsv` describes: gene ids as the index
    /// (`gene_ids`), names as `gene_name`, feature types as the categorical
    /// `feature_types`.
    pub fn from_features(
        gene_ids: Vec<String>,
        names: Vec<String>,
        feature_types: Vec<String>,
    ) -> Result<VarTable> {
        VarTable::new("gene_ids", gene_ids)
            .with_column("gene_name", names)?
            .with_category_column("feature_types", feature_types)
    }

    fn push(mut self, name: String, values: VarValues, len: usize) -> Result<VarTable> {
        if len != self.index.len() {
            return Err(Error::Input(format!(
                "var column {name:?} has {len} values for {} genes",
                self.index.len()
            )));
        }
        if name == self.index_name || self.columns.iter().any(|(n, _)| *n == name) {
            return Err(Error::Input(format!("var column {name:?} appears twice")));
        }
        self.columns.push((name, values));
        Ok(self)
    }

    /// Adds a string column.
    pub fn with_column(self, name: impl Into<String>, values: Vec<String>) -> Result<VarTable> {
        let len = values.len();
        self.push(name.into(), VarValues::String(values), len)
    }

    /// Adds a categorical column (vocabulary: the distinct values, sorted).
    pub fn with_category_column(
        self,
        name: impl Into<String>,
        values: Vec<String>,
    ) -> Result<VarTable> {
        let len = values.len();
        self.push(name.into(), VarValues::Category(values), len)
    }

    /// Number of genes.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the table has no genes.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The values of column `name`, or of the index when `name` names it.
    pub fn values(&self, name: &str) -> Option<&[String]> {
        if name == self.index_name {
            return Some(&self.index);
        }
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| match v {
                VarValues::String(v) | VarValues::Category(v) => &v[..],
            })
    }

    /// The names of the index and the columns.
    pub fn column_names(&self) -> Vec<&str> {
        std::iter::once(self.index_name.as_str())
            .chain(self.columns.iter().map(|(n, _)| n.as_str()))
            .collect()
    }

    /// The table a dataset's `var.parquet` holds: its pandas index, its text
    /// columns (dictionaries as categorical ones); other columns are left out.
    pub fn from_frame(frame: &VarFrame) -> Result<VarTable> {
        let table = &frame.table;
        let text = |name: &str| -> Option<(bool, Vec<String>)> {
            let a = table.column_by_name(name)?;
            let category = matches!(a.data_type(), DataType::Dictionary(_, _));
            let values = string_values(a.as_ref())?;
            Some((
                category,
                values.into_iter().map(Option::unwrap_or_default).collect(),
            ))
        };
        let index_name = frame.index_columns.first().map_or("_index", String::as_str);
        let index = match text(index_name) {
            Some((_, v)) => v,
            None => (0..table.num_rows()).map(|i| i.to_string()).collect(),
        };
        let mut out = VarTable::new(index_name, index);
        for field in table.schema_ref().fields() {
            let name = field.name();
            if frame.index_columns.contains(name) {
                continue;
            }
            if let Some((category, values)) = text(name) {
                out = if category {
                    out.with_category_column(name.clone(), values)?
                } else {
                    out.with_column(name.clone(), values)?
                };
            }
        }
        Ok(out)
    }

    /// The table as JSON (a build's statistics carry it to the commit).
    pub(crate) fn to_value(&self) -> Value {
        let columns: Vec<Value> = self
            .columns
            .iter()
            .map(|(name, v)| match v {
                VarValues::String(v) => json!({"name": name, "kind": "string", "values": v}),
                VarValues::Category(v) => json!({"name": name, "kind": "category", "values": v}),
            })
            .collect();
        json!({"index_name": self.index_name, "index": self.index, "columns": columns})
    }

    /// The table [`VarTable::to_value`] wrote.
    pub(crate) fn from_value(v: &Value) -> Result<VarTable> {
        let bad = || Error::Input("a var table in a build plan is malformed".into());
        let strings = |v: Option<&Value>| -> Result<Vec<String>> {
            v.and_then(Value::as_array)
                .ok_or_else(bad)?
                .iter()
                .map(|s| s.as_str().map(str::to_string).ok_or_else(bad))
                .collect()
        };
        let name = v
            .get("index_name")
            .and_then(Value::as_str)
            .ok_or_else(bad)?;
        let mut table = VarTable::new(name, strings(v.get("index"))?);
        for c in v.get("columns").and_then(Value::as_array).ok_or_else(bad)? {
            let name = c.get("name").and_then(Value::as_str).ok_or_else(bad)?;
            let values = strings(c.get("values"))?;
            table = match c.get("kind").and_then(Value::as_str) {
                Some("string") => table.with_column(name, values)?,
                Some("category") => table.with_category_column(name, values)?,
                _ => return Err(bad()),
            };
        }
        Ok(table)
    }

    /// One table over `keys` (a vocabulary) from several inputs' tables:
    /// `tables[i]` is input `i`'s table and where each of its rows lands in
    /// the vocabulary. Each gene's row comes from the first input that has it
    /// (a column that input lacks, from the next that has both); a value no
    /// input gives is empty, and a gene no input has gets its key as index.
    /// The index is named as the first table's, columns are in order first
    /// seen, each of the kind it first had; the column the keys came from
    /// (`key_column`, when the keys are a column's) holds the key of every
    /// gene, those no input has included. One table mapped one to one gives
    /// back that table.
    pub(crate) fn merge(
        tables: &[(&VarTable, &[Option<u32>])],
        keys: &[String],
        key_column: Option<&str>,
    ) -> VarTable {
        let n = keys.len();
        let index_name = tables.first().map_or("_index", |t| t.0.index_name.as_str());
        let mut index: Vec<Option<String>> = vec![None; n];
        let mut columns: Vec<(String, bool, Vec<Option<String>>)> = Vec::new();
        for (table, rows) in tables {
            for (own, column) in rows.iter().enumerate() {
                let Some(g) = column.map(|g| g as usize) else {
                    continue;
                };
                index[g].get_or_insert_with(|| table.index[own].clone());
            }
            for (name, values) in &table.columns {
                let (category, values) = match values {
                    VarValues::String(v) => (false, v),
                    VarValues::Category(v) => (true, v),
                };
                let at = match columns.iter().position(|c| c.0 == *name) {
                    Some(at) => at,
                    None => {
                        columns.push((name.clone(), category, vec![None; n]));
                        columns.len() - 1
                    }
                };
                for (own, column) in rows.iter().enumerate() {
                    if let Some(g) = column.map(|g| g as usize) {
                        columns[at].2[g].get_or_insert_with(|| values[own].clone());
                    }
                }
            }
        }
        let fill = |v: Vec<Option<String>>| v.into_iter().map(Option::unwrap_or_default).collect();
        let index = index
            .into_iter()
            .zip(keys)
            .map(|(v, k)| v.unwrap_or_else(|| k.clone()))
            .collect();
        VarTable {
            index_name: index_name.to_string(),
            index,
            columns: columns
                .into_iter()
                .map(|(name, category, v)| {
                    let v = if key_column == Some(name.as_str()) {
                        v.into_iter()
                            .zip(keys)
                            .map(|(v, k)| v.unwrap_or_else(|| k.clone()))
                            .collect()
                    } else {
                        fill(v)
                    };
                    (
                        name,
                        if category {
                            VarValues::Category(v)
                        } else {
                            VarValues::String(v)
                        },
                    )
                })
                .collect(),
        }
    }

    /// `var.parquet` with rows in output order: row `j` is source row `order[j]`.
    pub fn to_parquet(&self, order: Option<&[i32]>) -> Result<Vec<u8>> {
        let n = self.index.len();
        let rows: Vec<usize> = match order {
            None => (0..n).collect(),
            Some(o) => {
                let rows: Vec<usize> = o
                    .iter()
                    .filter_map(|&g| usize::try_from(g).ok().filter(|&g| g < n))
                    .collect();
                if o.len() != n || rows.len() != n {
                    return Err(Error::Input(format!(
                        "gene order of {} entries does not permute {n} var rows",
                        o.len()
                    )));
                }
                rows
            }
        };
        let strings = |v: &[String]| -> ArrayRef {
            Arc::new(
                rows.iter()
                    .map(|&r| Some(v[r].as_str()))
                    .collect::<StringArray>(),
            )
        };
        let mut fields = Vec::new();
        let mut arrays = Vec::new();
        let mut described = Vec::new();
        for (name, values) in &self.columns {
            let (array, description) = match values {
                VarValues::String(v) => (strings(v), unicode_column(name)),
                VarValues::Category(v) => {
                    let (array, key_type, n_categories) = dictionary(v, &rows)?;
                    let description = json!({
                        "name": name, "field_name": name, "pandas_type": "categorical", "numpy_type": key_type,
                        "metadata": {"num_categories": n_categories, "ordered": false}
                    });
                    (array, description)
                }
            };
            fields.push(Field::new(name, array.data_type().clone(), false));
            arrays.push(array);
            described.push(description);
        }
        fields.push(Field::new(&self.index_name, DataType::Utf8, false));
        arrays.push(strings(&self.index));
        described.push(unicode_column(&self.index_name));
        let pandas = json!({
            "index_columns": [self.index_name],
            "column_indexes": [{"name": null, "field_name": null, "pandas_type": "unicode", "numpy_type": "object",
                                "metadata": {"encoding": "UTF-8"}}],
            "columns": described,
            "attributes": {},
            "creator": {"library": "deltacells", "version": crate::build_info::VERSION},
        })
        .to_string();
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            HashMap::from([("pandas".to_string(), pandas.clone())]),
        ));
        let level = ZstdLevel::try_new(3).map_err(|e| EncodeError::Compress(e.to_string()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_statistics_enabled(EnabledStatistics::None)
            .set_key_value_metadata(Some(vec![KeyValue::new("pandas".into(), pandas)]))
            .build();
        let err =
            |e: parquet::errors::ParquetError| Error::Input(format!("writing var.parquet: {e}"));
        let batch = RecordBatch::try_new(schema.clone(), arrays)
            .map_err(|e| Error::Input(format!("building var.parquet: {e}")))?;
        let mut writer = ArrowWriter::try_new(Vec::new(), schema, Some(props)).map_err(err)?;
        writer.write(&batch).map_err(err)?;
        writer.into_inner().map_err(err)
    }
}

fn unicode_column(name: &str) -> Value {
    json!({"name": name, "field_name": name, "pandas_type": "unicode", "numpy_type": "object", "metadata": null})
}

/// A dictionary array over the sorted distinct values, keys of the smallest
/// signed type (as pandas stores categorical codes): (array, numpy key type, categories).
fn dictionary(values: &[String], rows: &[usize]) -> Result<(ArrayRef, &'static str, usize)> {
    let vocabulary: BTreeSet<&str> = values.iter().map(String::as_str).collect();
    let code: HashMap<&str, usize> = vocabulary
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, i))
        .collect();
    let dict: ArrayRef = Arc::new(vocabulary.iter().map(|&v| Some(v)).collect::<StringArray>());
    let codes = rows.iter().map(|&r| code[values[r].as_str()]);
    let n = vocabulary.len();
    let bad =
        |e: arrow_schema::ArrowError| Error::Input(format!("building a var category column: {e}"));
    Ok(match ObsType::codes_for(n) {
        Some(ObsType::Int8) => {
            let keys: Int8Array = codes.map(|c| c as i8).collect();
            (
                Arc::new(DictionaryArray::<Int8Type>::try_new(keys, dict).map_err(bad)?),
                "int8",
                n,
            )
        }
        Some(ObsType::Int16) => {
            let keys: Int16Array = codes.map(|c| c as i16).collect();
            (
                Arc::new(DictionaryArray::<Int16Type>::try_new(keys, dict).map_err(bad)?),
                "int16",
                n,
            )
        }
        _ => {
            let keys: Int32Array = codes.map(|c| c as i32).collect();
            (
                Arc::new(DictionaryArray::<Int32Type>::try_new(keys, dict).map_err(bad)?),
                "int32",
                n,
            )
        }
    })
}

/// A string or dictionary-of-strings Arrow column as optional strings.
pub(crate) fn string_values(a: &dyn Array) -> Option<Vec<Option<String>>> {
    match a.data_type() {
        DataType::Utf8 => Some(
            a.as_string::<i32>()
                .iter()
                .map(|v| v.map(str::to_string))
                .collect(),
        ),
        DataType::LargeUtf8 => Some(
            a.as_string::<i64>()
                .iter()
                .map(|v| v.map(str::to_string))
                .collect(),
        ),
        DataType::Dictionary(_, _) => {
            let dict = a.as_any_dictionary();
            let values = string_values(dict.values().as_ref())?;
            Some(
                dict.normalized_keys()
                    .into_iter()
                    .enumerate()
                    .map(|(i, k)| {
                        if a.is_null(i) {
                            None
                        } else {
                            values[k].clone()
                        }
                    })
                    .collect(),
            )
        }
        _ => None,
    }
}

/// The gene table read back.
#[derive(Clone, Debug, PartialEq)]
pub struct VarFrame {
    /// Every column, the index columns included, as stored.
    pub table: RecordBatch,
    /// The columns pandas uses as the index (from the `pandas` metadata).
    pub index_columns: Vec<String>,
}

/// Reads and checks `var.parquet` of a dataset of `n_genes` genes.
pub(crate) fn read_var_table(store: &dyn Store, n_genes: u32) -> Result<VarFrame> {
    let bytes = store
        .get(VAR_KEY)?
        .ok_or_else(|| var_rule("has_var_table is true but var.parquet is missing"))?;
    let (table, index_columns) =
        read_whole_parquet(to_bytes(bytes), Some(u64::from(n_genes))).map_err(var_rule)?;
    let schema = table.schema();
    let names: HashSet<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if let Some(missing) = index_columns.iter().find(|c| !names.contains(c.as_str())) {
        return Err(var_rule(format!(
            "the pandas index column {missing:?} is not in the file"
        )));
    }
    Ok(VarFrame {
        table,
        index_columns,
    })
}

/// Decodes a whole small Parquet file (a gene table) from `data`, checked
/// before anything is allocated from it: the footer walked, every column
/// chunk's range and page headers checked against the bytes present, and
/// with `rows`, the row count; the third-party decoders run guarded. Gives
/// the table as one batch and the pandas index columns its metadata names.
pub(crate) fn read_whole_parquet(
    data: bytes::Bytes,
    rows: Option<u64>,
) -> std::result::Result<(RecordBatch, Vec<String>), String> {
    let len = data.len() as u64;
    let meta = read_footer(len, |r| Ok(data.slice(r.start as usize..r.end as usize)))?;
    // Everything that walks the decoded metadata (row counts, chunk ranges,
    // key-value entries, the Arrow schema conversion) runs guarded.
    let (meta, index_columns) = guarded(|| {
        let n = meta.file_metadata().num_rows();
        if let Some(rows) = rows.filter(|&r| u64::try_from(n).ok() != Some(r)) {
            return Err(format!(
                "{n} rows for {rows} genes (one row per output column)"
            ));
        }
        check_chunk_ranges(&meta, len)?;
        let index_columns = meta
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|e| e.key == "pandas"))
            .and_then(|e| e.value.as_deref())
            .and_then(|v| serde_json::from_str::<Value>(v).ok())
            .and_then(|v| {
                let list: Vec<String> = v
                    .get("index_columns")?
                    .as_array()?
                    .iter()
                    .filter_map(|c| c.as_str().map(str::to_string))
                    .collect();
                Some(list)
            })
            .unwrap_or_default();
        let meta = ArrowReaderMetadata::try_new(Arc::new(meta), ArrowReaderOptions::new())
            .map_err(|e| e.to_string())?;
        Ok((meta, index_columns))
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
    Ok((table, index_columns))
}

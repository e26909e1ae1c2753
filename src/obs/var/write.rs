//! `var.parquet` written as pyarrow writes a pandas frame: the columns,
//! the index, and the pandas metadata that restores their dtypes.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::format::EncodeError;
use crate::obs::column::ColumnData;

use super::{dictionary, VarColumn, VarTable, CATEGORIES_KEY};

impl VarTable {
    /// `var.parquet` with rows in output order: row `j` is source row `order[j]`.
    pub fn to_parquet(&self, order: Option<&[i32]>) -> Result<Vec<u8>> {
        let n = self.index.len();
        let rows: Vec<u32> = match order {
            None => (0..n as u32).collect(),
            Some(o) => {
                let rows: Vec<u32> = o
                    .iter()
                    .filter_map(|&g| u32::try_from(g).ok().filter(|&g| (g as usize) < n))
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
        let taken = arrow_array::UInt32Array::from(rows);
        let bad = |e: arrow_schema::ArrowError| Error::Input(format!("building var.parquet: {e}"));
        let mut fields = Vec::new();
        let mut arrays = Vec::new();
        let mut described = Vec::new();
        let mut lists = serde_json::Map::new();
        for VarColumn { column, ordered } in &self.columns {
            let name = column.name();
            let (array, description) = match column.data() {
                ColumnData::Category { categories, codes } => {
                    let codes: Vec<i32> =
                        taken.values().iter().map(|&r| codes[r as usize]).collect();
                    let (array, key_type) = dictionary(categories, &codes).map_err(bad)?;
                    lists.insert(name.to_string(), json!(categories));
                    let description = json!({
                        "name": name, "field_name": name, "pandas_type": "categorical", "numpy_type": key_type,
                        "metadata": {"num_categories": categories.len(), "ordered": ordered}
                    });
                    (array, description)
                }
                ColumnData::Plain(a) => {
                    let array = arrow_select::take::take(a.as_ref(), &taken, None).map_err(bad)?;
                    let description = plain_description(name, &array);
                    (array, description)
                }
            };
            // No order flag in the Arrow schema: pyarrow, which reads the
            // categories the values use in the order they first appear,
            // would compare them in that order; unordered is the lesser loss.
            fields.push(Field::new(name, array.data_type().clone(), true));
            arrays.push(array);
            described.push(description);
        }
        let index: ArrayRef = Arc::new(
            taken
                .values()
                .iter()
                .map(|&r| Some(self.index[r as usize].as_str()))
                .collect::<StringArray>(),
        );
        fields.push(Field::new(&self.index_name, DataType::Utf8, false));
        arrays.push(index);
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
            .set_key_value_metadata(Some(vec![
                KeyValue::new("pandas".into(), pandas),
                KeyValue::new(CATEGORIES_KEY.into(), Value::Object(lists).to_string()),
            ]))
            .build();
        let err =
            |e: parquet::errors::ParquetError| Error::Input(format!("writing var.parquet: {e}"));
        let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(bad)?;
        let mut writer = ArrowWriter::try_new(Vec::new(), schema, Some(props)).map_err(err)?;
        writer.write(&batch).map_err(err)?;
        writer.into_inner().map_err(err)
    }
}

fn unicode_column(name: &str) -> Value {
    json!({"name": name, "field_name": name, "pandas_type": "unicode", "numpy_type": "object", "metadata": null})
}

/// The pandas metadata of a plain column, as pyarrow writes it: numbers and
/// booleans with missing values name pandas' nullable dtypes (`Int64`,
/// `boolean`), which `pandas.read_parquet` then restores.
fn plain_description(name: &str, array: &ArrayRef) -> Value {
    let t = array.data_type();
    let (pandas_type, numpy_type) = match t {
        DataType::Utf8 => ("unicode", "object".to_string()),
        DataType::Boolean => (
            "bool",
            if array.null_count() > 0 {
                "boolean"
            } else {
                "bool"
            }
            .to_string(),
        ),
        _ => {
            let numpy = match t {
                DataType::Int8 => "int8",
                DataType::Int16 => "int16",
                DataType::Int32 => "int32",
                DataType::Int64 => "int64",
                DataType::UInt8 => "uint8",
                DataType::UInt16 => "uint16",
                DataType::UInt32 => "uint32",
                DataType::UInt64 => "uint64",
                DataType::Float32 => "float32",
                _ => "float64",
            };
            let nullable = array.null_count() > 0 && t.is_integer();
            let extension = if nullable {
                let mut e = numpy.to_string();
                // pandas' nullable integer dtypes: `Int64`, `UInt8`, ...
                if let Some(rest) = e.strip_prefix("uint") {
                    e = format!("UInt{rest}");
                } else if let Some(rest) = e.strip_prefix("int") {
                    e = format!("Int{rest}");
                }
                e
            } else {
                numpy.to_string()
            };
            (numpy, extension)
        }
    };
    json!({"name": name, "field_name": name, "pandas_type": pandas_type, "numpy_type": numpy_type, "metadata": null})
}

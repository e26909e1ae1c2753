//! `var.parquet`: the gene table, one row per output column, pandas index kept.
//!
//! Written the way pyarrow writes a pandas DataFrame: the data columns, then
//! the index column, and a `pandas` entry in the file's key-value metadata
//! naming the index, so `pandas.read_parquet` gives back the same frame with
//! its index. Categorical columns are Arrow dictionaries, which pandas reads
//! as `category`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Int16Array, Int32Array, Int8Array, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde_json::{json, Value};

use super::column::{dictionary_codes, ColumnData, ObsColumn};
use super::reader::{
    check_chunk_ranges, check_row_group_pages, guarded, read_footer, to_bytes, Fetched,
};
use super::schema::ObsType;
use super::unify::{natural_cmp, widen, widened};
use crate::error::{Error, Result};
use crate::format::manifest::DatasetRule;
use crate::format::EncodeError;
use crate::storage::Store;

/// Object key of the gene table.
pub(crate) const VAR_KEY: &str = "var.parquet";

fn var_rule(msg: impl Into<String>) -> Error {
    Error::Dataset(DatasetRule::VarTable(msg.into()))
}

/// One column of the gene table: anything an obs column can hold, and for
/// a categorical one whether its categories are ordered.
#[derive(Clone, Debug)]
struct VarColumn {
    column: ObsColumn,
    ordered: bool,
}

/// A gene table for the dataset writer's `WriterConfig`, in source column order
/// (the writer reorders it by `gene_order`). Its columns are typed as obs
/// columns are (strings, categories, booleans, integers and floats, each
/// with missing values), so a table read from an h5ad or a pandas frame
/// comes back with its dtypes.
#[derive(Clone, Debug)]
pub struct VarTable {
    index_name: String,
    index: Vec<String>,
    columns: Vec<VarColumn>,
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

    /// Adds a string column.
    pub fn with_column(self, name: impl Into<String>, values: Vec<String>) -> Result<VarTable> {
        self.with_typed_column(ObsColumn::string(name, values.into_iter().map(Some)), false)
    }

    /// Adds a categorical column (vocabulary: the distinct values, sorted).
    pub fn with_category_column(
        self,
        name: impl Into<String>,
        values: Vec<String>,
    ) -> Result<VarTable> {
        self.with_typed_column(
            ObsColumn::categorical(name, values.into_iter().map(Some)),
            false,
        )
    }

    /// Adds a column of any type an obs column has; `ordered` marks a
    /// categorical column whose categories are ordered (pandas'
    /// `ordered=True`), and is refused for any other.
    pub fn with_typed_column(mut self, column: ObsColumn, ordered: bool) -> Result<VarTable> {
        let name = column.name();
        if column.len() != self.index.len() {
            return Err(Error::Input(format!(
                "var column {name:?} has {} values for {} genes",
                column.len(),
                self.index.len()
            )));
        }
        if name == self.index_name || self.columns.iter().any(|c| c.column.name() == name) {
            return Err(Error::Input(format!("var column {name:?} appears twice")));
        }
        if ordered && !matches!(column.data(), ColumnData::Category { .. }) {
            return Err(Error::Input(format!(
                "var column {name:?} is not categorical, so its categories cannot be ordered"
            )));
        }
        self.columns.push(VarColumn { column, ordered });
        Ok(self)
    }

    /// Number of genes.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the table has no genes.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The values of column `name` as text (numbers as Rust prints them,
    /// booleans as pandas does), `None` where missing; or of the index when
    /// `name` names it.
    pub fn values(&self, name: &str) -> Option<Vec<Option<String>>> {
        if name == self.index_name {
            return Some(self.index.iter().cloned().map(Some).collect());
        }
        self.column(name).map(text)
    }

    /// Whether column `name` (or the index) holds text: strings or
    /// categories, as gene keys must.
    pub fn is_text(&self, name: &str) -> bool {
        name == self.index_name
            || self.column(name).is_some_and(|c| match c.data() {
                ColumnData::Category { .. } => true,
                ColumnData::Plain(a) => a.data_type() == &DataType::Utf8,
            })
    }

    fn column(&self, name: &str) -> Option<&ObsColumn> {
        self.columns
            .iter()
            .map(|c| &c.column)
            .find(|c| c.name() == name)
    }

    /// The names of the index and the columns.
    pub fn column_names(&self) -> Vec<&str> {
        std::iter::once(self.index_name.as_str())
            .chain(self.columns.iter().map(|c| c.column.name()))
            .collect()
    }

    /// The table a dataset's `var.parquet` holds: its pandas index and every
    /// column an obs column could be (dictionaries as categorical ones,
    /// ordered where the pandas metadata says so); others are left out.
    pub fn from_frame(frame: &VarFrame) -> Result<VarTable> {
        let table = &frame.table;
        let index_name = frame.index_columns.first().map_or("_index", String::as_str);
        let index = match table.column_by_name(index_name) {
            Some(a) => ObsColumn::from_arrow(index_name, a.clone())
                .map(|c| {
                    text(&c)
                        .into_iter()
                        .map(Option::unwrap_or_default)
                        .collect()
                })
                .ok(),
            None => None,
        }
        .unwrap_or_else(|| (0..table.num_rows()).map(|i| i.to_string()).collect());
        let mut out = VarTable::new(index_name, index);
        for (field, array) in table.schema_ref().fields().iter().zip(table.columns()) {
            let name = field.name();
            if frame.index_columns.contains(name) {
                continue;
            }
            if let Ok(column) = ObsColumn::from_arrow(name.clone(), array.clone()) {
                let ordered = frame.ordered.contains(name)
                    && matches!(column.data(), ColumnData::Category { .. });
                out = out.with_typed_column(column, ordered)?;
            }
        }
        Ok(out)
    }

    /// The table as JSON (a build's statistics carry it to the commit): its
    /// `var.parquet`, base64-encoded, so the one writer and reader of the
    /// table carry every type.
    pub(crate) fn to_value(&self) -> Result<Value> {
        Ok(json!({"parquet": BASE64.encode(self.to_parquet(None)?)}))
    }

    /// The table [`VarTable::to_value`] wrote.
    pub(crate) fn from_value(v: &Value) -> Result<VarTable> {
        let bad =
            |why: String| Error::Input(format!("a var table in a build plan is malformed: {why}"));
        let text = v
            .get("parquet")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no parquet".into()))?;
        let bytes = BASE64.decode(text).map_err(|e| bad(e.to_string()))?;
        VarTable::from_frame(&var_frame(bytes::Bytes::from(bytes), None).map_err(bad)?)
    }

    /// One table over `keys` (a vocabulary) from several inputs' tables:
    /// `tables[i]` is input `i`'s table and where each of its rows lands in
    /// the vocabulary. Each gene's row comes from the first input that has it
    /// (a column that input lacks, from the next that has both); a value no
    /// input gives is missing, and a gene no input has gets its key as index.
    /// The index is named as the first table's, columns are in order first
    /// seen. A column keeps its type where every input that has it agrees,
    /// and merges as obs columns do otherwise: categories are the inputs'
    /// own where all have the same set (the first input's order, ordered
    /// where each orders them so), else their union in natural order,
    /// unordered; integers widen to `int64`, integers and floats to
    /// `float64`. Any other mix (numbers here, text there) is text, where
    /// obs refuses it: a gene table describes genes, and one input's
    /// descriptive column should not stop a build. The column the keys came from (`key_column`, when the keys
    /// are a column's) holds the key of every gene, those no input has
    /// included. One table mapped one to one gives back that table.
    pub(crate) fn merge(
        tables: &[(&VarTable, &[Option<u32>])],
        keys: &[String],
        key_column: Option<&str>,
    ) -> Result<VarTable> {
        let n = keys.len();
        let index_name = tables.first().map_or("_index", |t| t.0.index_name.as_str());
        let mut index: Vec<Option<String>> = vec![None; n];
        // Per column: its pieces (an input's column) and, per gene, the
        // piece and row its value comes from.
        let mut columns: Vec<(&str, Vec<&VarColumn>, Vec<Source>)> = Vec::new();
        for (table, rows) in tables {
            for (own, column) in rows.iter().enumerate() {
                let Some(g) = column.map(|g| g as usize) else {
                    continue;
                };
                index[g].get_or_insert_with(|| table.index[own].clone());
            }
            for column in &table.columns {
                let name = column.column.name();
                let at = match columns.iter().position(|c| c.0 == name) {
                    Some(at) => at,
                    None => {
                        columns.push((name, Vec::new(), vec![None; n]));
                        columns.len() - 1
                    }
                };
                let (_, pieces, from) = &mut columns[at];
                pieces.push(column);
                let piece = pieces.len() - 1;
                for (own, g) in rows.iter().enumerate() {
                    if let Some(g) = g.map(|g| g as usize) {
                        from[g].get_or_insert((piece, own));
                    }
                }
            }
        }
        let index = index
            .into_iter()
            .zip(keys)
            .map(|(v, k)| v.unwrap_or_else(|| k.clone()))
            .collect();
        let mut out = VarTable::new(index_name, index);
        for (name, pieces, from) in columns {
            let fill = (key_column == Some(name)).then_some(keys);
            let (column, ordered) = merge_column(name, &pieces, &from, fill)?;
            out = out.with_typed_column(column, ordered)?;
        }
        Ok(out)
    }

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

/// Where a merged table's value of a gene comes from: `(piece, row)`, the
/// row of one input's column; `None` where no input gives one.
type Source = Option<(usize, usize)>;

/// An input's categorical column: its categories, codes (`-1` missing) and
/// whether the categories are ordered.
type CategoryPiece<'c> = (&'c [String], &'c [i32], bool);

/// The merged column `name` from `pieces` (the inputs' columns of that
/// name), gene `g` taking row `from[g] = (piece, row)` (missing where
/// `None`); with `fill`, a gene no piece gives takes its key. Returns the
/// column and whether its categories are ordered.
fn merge_column(
    name: &str,
    pieces: &[&VarColumn],
    from: &[Source],
    fill: Option<&[String]>,
) -> Result<(ObsColumn, bool)> {
    let categories: Option<Vec<CategoryPiece<'_>>> = pieces
        .iter()
        .map(|p| match p.column.data() {
            ColumnData::Category { categories, codes } => {
                Some((&categories[..], &codes[..], p.ordered))
            }
            ColumnData::Plain(_) => None,
        })
        .collect();
    if let Some(cats) = categories {
        return merge_categories(name, &cats, from, fill);
    }
    let arrays: Vec<&ArrayRef> = pieces
        .iter()
        .filter_map(|p| match p.column.data() {
            ColumnData::Plain(a) => Some(a),
            ColumnData::Category { .. } => None,
        })
        .collect();
    let types: Vec<Option<ObsType>> = arrays
        .iter()
        .map(|a| ObsType::from_data_type(a.data_type()))
        .collect();
    let numeric = arrays.len() == pieces.len()
        && types
            .iter()
            .all(|t| t.is_some_and(|t| !matches!(t, ObsType::Bool | ObsType::String)));
    let one_type = arrays.len() == pieces.len()
        && arrays
            .windows(2)
            .all(|w| w[0].data_type() == w[1].data_type());
    let needs_fill = fill.is_some() && from.iter().any(Option::is_none);
    // Where the keys fill the column, it is text.
    let keyed_text = needs_fill && !(one_type && arrays[0].data_type() == &DataType::Utf8);
    let merged: ArrayRef = if one_type && !keyed_text {
        gather(&arrays, from)?
    } else if numeric && !keyed_text {
        let wide = types
            .iter()
            .flatten()
            .copied()
            .reduce(widen)
            .unwrap_or(ObsType::Float64);
        let converted = arrays
            .iter()
            .map(|a| widened(a.as_ref(), wide))
            .collect::<Option<Vec<ArrayRef>>>()
            .ok_or_else(|| Error::Input(format!("var column {name:?}: no common type")))?;
        gather(&converted.iter().collect::<Vec<_>>(), from)?
    } else {
        Arc::new(
            merged_text(pieces, from)
                .into_iter()
                .collect::<StringArray>(),
        )
    };
    let merged = match fill {
        Some(keys) if needs_fill => {
            let strings = merged.as_string::<i32>();
            let filled: StringArray = (0..from.len())
                .map(|g| match from[g] {
                    None => Some(keys[g].as_str()),
                    Some(_) => strings.is_valid(g).then(|| strings.value(g)),
                })
                .collect();
            Arc::new(filled) as ArrayRef
        }
        _ => merged,
    };
    Ok((
        ObsColumn::from_data(name.to_string(), ColumnData::Plain(merged)),
        false,
    ))
}

/// The merged categorical column `name` (see [`merge_column`]): the
/// pieces' categories where every piece has the same set (the first
/// piece's order; ordered where every piece orders them so), else their
/// union in natural order (`c2` before `c10`, as obs columns merge),
/// unordered; unused categories kept. Keys that fill the column are
/// categories after those (and the column then unordered).
fn merge_categories(
    name: &str,
    cats: &[CategoryPiece<'_>],
    from: &[Source],
    fill: Option<&[String]>,
) -> Result<(ObsColumn, bool)> {
    fn set(list: &[String]) -> HashSet<&str> {
        list.iter().map(String::as_str).collect()
    }
    let first = cats.first().map_or(&[][..], |c| c.0);
    let same = cats.iter().all(|c| set(c.0) == set(first));
    let mut union: Vec<String> = if same {
        first.to_vec()
    } else {
        let mut all: Vec<String> = cats
            .iter()
            .flat_map(|c| c.0.iter())
            .map(String::as_str)
            .collect::<HashSet<_>>()
            .into_iter()
            .map(str::to_string)
            .collect();
        all.sort_by(|a, b| natural_cmp(a, b));
        all
    };
    let listed = union.len();
    let mut at: HashMap<String, i32> = union
        .iter()
        .enumerate()
        .map(|(i, c)| (c.clone(), i as i32))
        .collect();
    let mut codes: Vec<i32> = from
        .iter()
        .map(|f| {
            f.and_then(|(p, r)| {
                let (list, codes, _) = cats[p];
                usize::try_from(codes[r]).ok().map(|c| at[&list[c]])
            })
            .unwrap_or(-1)
        })
        .collect();
    if let Some(keys) = fill {
        for (code, (key, f)) in codes.iter_mut().zip(keys.iter().zip(from)) {
            if f.is_none() {
                *code = *at.entry(key.clone()).or_insert_with(|| {
                    union.push(key.clone());
                    union.len() as i32 - 1
                });
            }
        }
    }
    // Keys appended after ordered categories have no place in their order.
    let ordered = same && union.len() == listed && cats.iter().all(|c| c.2 && c.0 == first);
    Ok((ObsColumn::category(name, union, codes)?, ordered))
}

/// Each gene's value of the pieces as text, missing where no piece gives one.
fn merged_text(pieces: &[&VarColumn], from: &[Source]) -> Vec<Option<String>> {
    let texts: Vec<Vec<Option<String>>> = pieces.iter().map(|p| text(&p.column)).collect();
    from.iter()
        .map(|f| f.and_then(|(p, r)| texts[p][r].clone()))
        .collect()
}

/// Rows `from` of `arrays` (one type), null where `from` gives none.
fn gather(arrays: &[&ArrayRef], from: &[Source]) -> Result<ArrayRef> {
    let null = arrow_array::new_null_array(arrays[0].data_type(), 1);
    let mut sources: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
    sources.push(null.as_ref());
    let picks: Vec<(usize, usize)> = from
        .iter()
        .map(|f| f.unwrap_or((arrays.len(), 0)))
        .collect();
    arrow_select::interleave::interleave(&sources, &picks)
        .map_err(|e| Error::Input(format!("merging var columns: {e}")))
}

/// A column's values as text: categories and strings as they are, numbers
/// and booleans as Rust prints them; `None` where missing.
fn text(column: &ObsColumn) -> Vec<Option<String>> {
    match column.data() {
        ColumnData::Category { categories, codes } => codes
            .iter()
            .map(|&c| usize::try_from(c).ok().map(|c| categories[c].clone()))
            .collect(),
        ColumnData::Plain(a) => {
            macro_rules! print {
                ($($t:ty),*) => {
                    $(if let Some(p) = a.as_primitive_opt::<$t>() {
                        return p.iter().map(|v| v.map(|v| v.to_string())).collect();
                    })*
                };
            }
            print!(
                Int8Type,
                Int16Type,
                Int32Type,
                Int64Type,
                UInt8Type,
                UInt16Type,
                UInt32Type,
                UInt64Type,
                Float32Type,
                Float64Type
            );
            if let Some(b) = a.as_boolean_opt() {
                return b
                    .iter()
                    .map(|v| v.map(|v| if v { "True" } else { "False" }.to_string()))
                    .collect();
            }
            string_values(a.as_ref()).unwrap_or_else(|| vec![None; a.len()])
        }
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

/// A dictionary array of `categories` and `codes` (`-1` null), keys of the
/// smallest signed type (as pandas stores categorical codes): (array, numpy
/// key type).
fn dictionary(
    categories: &[String],
    codes: &[i32],
) -> std::result::Result<(ArrayRef, &'static str), arrow_schema::ArrowError> {
    let dict: ArrayRef = Arc::new(
        categories
            .iter()
            .map(|v| Some(v.as_str()))
            .collect::<StringArray>(),
    );
    let codes = codes.iter().map(|&c| (c >= 0).then_some(c));
    Ok(match ObsType::codes_for(categories.len()) {
        Some(ObsType::Int8) => {
            let keys: Int8Array = codes.map(|c| c.map(|c| c as i8)).collect();
            (
                Arc::new(DictionaryArray::<Int8Type>::try_new(keys, dict)?),
                "int8",
            )
        }
        Some(ObsType::Int16) => {
            let keys: Int16Array = codes.map(|c| c.map(|c| c as i16)).collect();
            (
                Arc::new(DictionaryArray::<Int16Type>::try_new(keys, dict)?),
                "int16",
            )
        }
        _ => {
            let keys: Int32Array = codes.collect();
            (
                Arc::new(DictionaryArray::<Int32Type>::try_new(keys, dict)?),
                "int32",
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
                dictionary_codes(dict)
                    .into_iter()
                    .map(|c| usize::try_from(c).ok().and_then(|c| values[c].clone()))
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
    /// The categorical columns whose categories are ordered (from the
    /// `pandas` metadata).
    pub ordered: Vec<String>,
}

/// Key of the file metadata entry in which `var.parquet` lists each
/// categorical column's categories: Parquet keeps only the values a column
/// holds, in the order they first appear, so unused categories and the
/// order of ordered ones would otherwise be lost.
const CATEGORIES_KEY: &str = "deltacells.categories";

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
fn var_frame(data: bytes::Bytes, rows: Option<u64>) -> std::result::Result<VarFrame, String> {
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

#[cfg(test)]
mod tests {
    use arrow_array::{
        BooleanArray, Float32Array, Float64Array, Int64Array, UInt16Array, UInt8Array,
    };

    use super::*;

    fn typed(name: &str, array: impl Array + 'static) -> ObsColumn {
        ObsColumn::from_arrow(name, Arc::new(array)).unwrap()
    }

    /// The table's column `name` as (its Arrow array, its categories and
    /// codes where categorical, whether ordered).
    fn column<'t>(table: &'t VarTable, name: &str) -> &'t VarColumn {
        table
            .columns
            .iter()
            .find(|c| c.column.name() == name)
            .unwrap()
    }

    fn plain(table: &VarTable, name: &str) -> ArrayRef {
        match column(table, name).column.data() {
            ColumnData::Plain(a) => a.clone(),
            ColumnData::Category { .. } => panic!("{name} is categorical"),
        }
    }

    fn categories(table: &VarTable, name: &str) -> (Vec<String>, Vec<i32>, bool) {
        let c = column(table, name);
        match c.column.data() {
            ColumnData::Category { categories, codes } => {
                (categories.clone(), codes.clone(), c.ordered)
            }
            ColumnData::Plain(a) => panic!("{name} is {}", a.data_type()),
        }
    }

    fn sample() -> VarTable {
        let index: Vec<String> = ["g0", "g1", "g2", "g3"].map(String::from).to_vec();
        VarTable::new("gene", index)
            .with_typed_column(
                typed(
                    "n_cells",
                    Int64Array::from(vec![Some(3), None, Some(0), Some(7)]),
                ),
                false,
            )
            .unwrap()
            .with_typed_column(
                typed("mean", Float64Array::from(vec![0.5, f64::NAN, 2.0, -1.0])),
                false,
            )
            .unwrap()
            .with_typed_column(
                typed(
                    "hvg",
                    BooleanArray::from(vec![Some(true), Some(false), None, Some(true)]),
                ),
                false,
            )
            .unwrap()
            .with_typed_column(
                ObsColumn::category(
                    "level",
                    ["low", "mid", "high", "unused"].map(String::from).to_vec(),
                    vec![2, 0, -1, 1],
                )
                .unwrap(),
                true,
            )
            .unwrap()
            .with_typed_column(
                ObsColumn::string("symbol", [Some("A"), None, Some("C"), Some("D")]),
                false,
            )
            .unwrap()
    }

    /// The table read back from its own `var.parquet`.
    fn reread(table: &VarTable, order: Option<&[i32]>) -> VarTable {
        let bytes = table.to_parquet(order).unwrap();
        VarTable::from_frame(&var_frame(bytes::Bytes::from(bytes), None).unwrap()).unwrap()
    }

    #[test]
    fn every_type_round_trips_through_var_parquet_and_a_plan() {
        let t = sample();
        for back in [
            reread(&t, None),
            VarTable::from_value(&t.to_value().unwrap()).unwrap(),
        ] {
            assert_eq!(back.column_names(), t.column_names());
            assert_eq!(back.index, t.index);
            assert_eq!(
                plain(&back, "n_cells").as_ref(),
                plain(&t, "n_cells").as_ref()
            );
            let mean = plain(&back, "mean");
            let mean = mean.as_primitive::<Float64Type>();
            assert_eq!(mean.value(0), 0.5);
            assert!(mean.value(1).is_nan() && mean.is_valid(1));
            assert_eq!(plain(&back, "hvg").as_ref(), plain(&t, "hvg").as_ref());
            assert_eq!(
                plain(&back, "symbol").as_ref(),
                plain(&t, "symbol").as_ref()
            );
            // Every category kept in its order (the unused one too), the
            // missing value missing, the order flag kept.
            assert_eq!(categories(&back, "level"), categories(&t, "level"));
        }
        // Rows in output order: each column permuted alike.
        let back = reread(&t, Some(&[3, 1, 0, 2]));
        assert_eq!(back.index, ["g3", "g1", "g0", "g2"]);
        assert_eq!(
            plain(&back, "n_cells").as_ref(),
            &Int64Array::from(vec![Some(7), None, Some(3), Some(0)]) as &dyn Array
        );
        assert_eq!(categories(&back, "level").1, [1, 0, 2, -1]);
        assert_eq!(
            back.values("hvg").unwrap(),
            [
                Some("True".into()),
                Some("False".into()),
                Some("True".into()),
                None
            ]
        );
        assert!(back.is_text("symbol") && back.is_text("level") && back.is_text("gene"));
        assert!(!back.is_text("hvg") && !back.is_text("n_cells") && !back.is_text("none"));
    }

    #[test]
    fn pandas_metadata_names_the_dtypes_pandas_restores() {
        let bytes = sample().to_parquet(None).unwrap();
        let (table, _) = read_whole_parquet(bytes::Bytes::from(bytes), None).unwrap();
        let pandas: Value = serde_json::from_str(&table.schema().metadata()["pandas"]).unwrap();
        let described: HashMap<&str, (&str, &str)> = pandas["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap(),
                    (
                        c["pandas_type"].as_str().unwrap(),
                        c["numpy_type"].as_str().unwrap(),
                    ),
                )
            })
            .collect();
        assert_eq!(described["n_cells"], ("int64", "Int64"));
        assert_eq!(described["mean"], ("float64", "float64"));
        assert_eq!(described["hvg"], ("bool", "boolean"));
        assert_eq!(described["level"], ("categorical", "int8"));
        assert_eq!(described["symbol"], ("unicode", "object"));
        assert_eq!(described["gene"], ("unicode", "object"));
    }

    #[test]
    fn merge_keeps_types_where_inputs_agree_and_widens_where_they_do_not() {
        let keys: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let first = VarTable::new("gene", vec!["a".into(), "b".into()])
            .with_typed_column(typed("n", Int64Array::from(vec![1, 2])), false)
            .unwrap()
            .with_typed_column(typed("x", Int64Array::from(vec![5, 6])), false)
            .unwrap()
            .with_typed_column(typed("mixed", UInt8Array::from(vec![1, 2])), false)
            .unwrap()
            .with_typed_column(typed("small", Int32Array::from(vec![1, 2])), false)
            .unwrap()
            .with_typed_column(
                ObsColumn::category("same", vec!["lo".into(), "hi".into()], vec![1, 0]).unwrap(),
                true,
            )
            .unwrap()
            .with_typed_column(
                ObsColumn::category("cat", vec!["p".into(), "q".into()], vec![0, 1]).unwrap(),
                true,
            )
            .unwrap();
        let second = VarTable::new("id", vec!["b2".into(), "c".into()])
            .with_typed_column(typed("n", Int64Array::from(vec![20, 30])), false)
            .unwrap()
            .with_typed_column(typed("x", Float32Array::from(vec![0.5, 1.5])), false)
            .unwrap()
            .with_typed_column(ObsColumn::string("mixed", [Some("u"), Some("v")]), false)
            .unwrap()
            .with_typed_column(typed("small", UInt16Array::from(vec![3, 4])), false)
            .unwrap()
            .with_typed_column(
                ObsColumn::category("same", vec!["lo".into(), "hi".into()], vec![0, 0]).unwrap(),
                true,
            )
            .unwrap()
            .with_typed_column(
                ObsColumn::category("cat", vec!["r".into(), "p".into()], vec![0, 1]).unwrap(),
                true,
            )
            .unwrap();
        // Input 0 has genes a, b; input 1 has b and c; nobody has d.
        let rows0 = [Some(0), Some(1)];
        let rows1 = [Some(1), Some(2)];
        let merged =
            VarTable::merge(&[(&first, &rows0[..]), (&second, &rows1[..])], &keys, None).unwrap();
        assert_eq!(merged.index_name, "gene");
        assert_eq!(merged.index, ["a", "b", "c", "d"]);
        // One type: kept; b from the first input; d missing.
        assert_eq!(
            plain(&merged, "n").as_ref(),
            &Int64Array::from(vec![Some(1), Some(2), Some(30), None]) as &dyn Array
        );
        // Integers and floats: float64.
        assert_eq!(
            plain(&merged, "x").as_ref(),
            &Float64Array::from(vec![Some(5.0), Some(6.0), Some(1.5), None]) as &dyn Array
        );
        // Integers of different types: int64.
        assert_eq!(
            plain(&merged, "small").as_ref(),
            &Int64Array::from(vec![Some(1), Some(2), Some(4), None]) as &dyn Array
        );
        // Numbers and text: text.
        assert_eq!(
            merged.values("mixed").unwrap(),
            [Some("1".into()), Some("2".into()), Some("v".into()), None]
        );
        // The same ordered categories: kept, ordered.
        assert_eq!(
            categories(&merged, "same"),
            (vec!["lo".into(), "hi".into()], vec![1, 0, 0, -1], true)
        );
        // Other categories: their union in natural order, unordered.
        assert_eq!(
            categories(&merged, "cat"),
            (
                vec!["p".into(), "q".into(), "r".into()],
                vec![0, 1, 0, -1],
                false
            )
        );
        // The key column holds every gene's key, those no input has included.
        let by_key = VarTable::merge(
            &[(&first, &rows0[..]), (&second, &rows1[..])],
            &keys,
            Some("mixed"),
        )
        .unwrap();
        let filled: Vec<String> = by_key
            .values("mixed")
            .unwrap()
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(filled, ["1", "2", "v", "d"]);
        // A key filling ordered categories joins them, and they are then unordered.
        let by_level = VarTable::merge(
            &[(&first, &rows0[..]), (&second, &rows1[..])],
            &keys,
            Some("same"),
        )
        .unwrap();
        assert_eq!(
            categories(&by_level, "same"),
            (
                vec!["lo".into(), "hi".into(), "d".into()],
                vec![1, 0, 0, 2],
                false
            )
        );
        // One table mapped one to one gives back that table.
        let same = VarTable::merge(&[(&first, &rows0[..])], &keys[..2], None).unwrap();
        assert_eq!(
            same.to_parquet(None).unwrap(),
            first.to_parquet(None).unwrap()
        );
    }

    #[test]
    fn a_categorical_column_without_categories_round_trips() {
        let t = VarTable::new("gene", vec!["a".into(), "b".into()])
            .with_typed_column(
                ObsColumn::category("unset", vec![], vec![-1, -1]).unwrap(),
                false,
            )
            .unwrap();
        let back = reread(&t, None);
        assert_eq!(categories(&back, "unset"), (vec![], vec![-1, -1], false));
        assert_eq!(back.values("unset").unwrap(), [None, None]);
        let empty = DictionaryArray::<Int8Type>::try_new(
            Int8Array::from(vec![None, None]),
            Arc::new(StringArray::from(Vec::<&str>::new())),
        )
        .unwrap();
        assert_eq!(string_values(&empty).unwrap(), [None, None]);
    }

    #[test]
    fn a_column_of_the_wrong_length_or_order_flag_is_refused() {
        let t = VarTable::new("gene", vec!["a".into(), "b".into()]);
        let err = t
            .clone()
            .with_typed_column(typed("n", Int64Array::from(vec![1])), false)
            .unwrap_err();
        assert!(err.to_string().contains("1 values for 2 genes"), "{err}");
        let err = t
            .with_typed_column(typed("n", Int64Array::from(vec![1, 2])), true)
            .unwrap_err();
        assert!(err.to_string().contains("not categorical"), "{err}");
    }
}

//! `var.parquet`: the gene table, one row per output column, pandas index kept.
//!
//! Written the way pyarrow writes a pandas DataFrame: the data columns, then
//! the index column, and a `pandas` entry in the file's key-value metadata
//! naming the index, so `pandas.read_parquet` gives back the same frame with
//! its index. Categorical columns are Arrow dictionaries, which pandas reads
//! as `category`.
//!
//! The table is built here ([`VarTable`]); `merge` makes one from several
//! inputs' tables, `write` writes it as Parquet and `read` reads a file
//! back and checks it.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Int16Array, Int32Array, Int8Array, StringArray,
};
use arrow_schema::DataType;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};

use super::column::{dictionary_codes, ColumnData, ObsColumn};
use super::schema::ObsType;
use crate::error::{Error, Result};
use crate::format::manifest::DatasetRule;

mod merge;
mod read;
mod write;

use read::var_frame;
pub use read::VarFrame;
pub(crate) use read::{read_var_table, read_whole_parquet};

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

/// Key of the file metadata entry in which `var.parquet` lists each
/// categorical column's categories: Parquet keeps only the values a column
/// holds, in the order they first appear, so unused categories and the
/// order of ordered ones would otherwise be lost.
const CATEGORIES_KEY: &str = "deltacells.categories";

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

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

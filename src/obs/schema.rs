//! `obs/schema.json`: the obs columns, their kinds, Arrow types and vocabularies.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use serde_json::{Map, Value};

use super::json;

/// The `format` value of `obs/schema.json`.
pub const OBS_FORMAT: &str = "deltacells-obs";
/// The obs schema version this crate reads and writes.
pub const OBS_VERSION: u64 = 1;

/// What a column holds (spec table "Obs / Schema").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Integer codes into a global vocabulary; `-1` is missing.
    Category,
    /// Integers or floats; missing values are nulls.
    Numeric,
    /// Booleans; missing values are nulls.
    Bool,
    /// Strings; missing values are nulls.
    String,
}

impl Kind {
    /// The name used in schema.json.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Category => "category",
            Kind::Numeric => "numeric",
            Kind::Bool => "bool",
            Kind::String => "string",
        }
    }

    fn from_name(name: &str) -> Option<Kind> {
        Some(match name {
            "category" => Kind::Category,
            "numeric" => Kind::Numeric,
            "bool" => Kind::Bool,
            "string" => Kind::String,
            _ => return None,
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The Arrow types an obs column may have, named as pyarrow prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObsType {
    /// `int8`: category codes of up to 128 categories, or numbers.
    Int8,
    /// `int16`: category codes of up to 2^15 categories, or numbers.
    Int16,
    /// `int32`: category codes of up to 2^31 categories, or numbers.
    Int32,
    /// `int64`: numbers.
    Int64,
    /// `uint8`: numbers.
    UInt8,
    /// `uint16`: numbers.
    UInt16,
    /// `uint32`: numbers.
    UInt32,
    /// `uint64`: numbers.
    UInt64,
    /// `float` (float32): numbers.
    Float32,
    /// `double` (float64): numbers.
    Float64,
    /// `bool`: the type of a `bool` column.
    Bool,
    /// `string`: the type of a `string` column.
    String,
}

impl ObsType {
    const ALL: [ObsType; 12] = [
        ObsType::Int8,
        ObsType::Int16,
        ObsType::Int32,
        ObsType::Int64,
        ObsType::UInt8,
        ObsType::UInt16,
        ObsType::UInt32,
        ObsType::UInt64,
        ObsType::Float32,
        ObsType::Float64,
        ObsType::Bool,
        ObsType::String,
    ];

    /// The `arrow_type` string of schema.json.
    pub fn name(self) -> &'static str {
        match self {
            ObsType::Int8 => "int8",
            ObsType::Int16 => "int16",
            ObsType::Int32 => "int32",
            ObsType::Int64 => "int64",
            ObsType::UInt8 => "uint8",
            ObsType::UInt16 => "uint16",
            ObsType::UInt32 => "uint32",
            ObsType::UInt64 => "uint64",
            ObsType::Float32 => "float",
            ObsType::Float64 => "double",
            ObsType::Bool => "bool",
            ObsType::String => "string",
        }
    }

    /// The type named `name` in schema.json.
    pub fn from_name(name: &str) -> Option<ObsType> {
        ObsType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The Arrow data type.
    pub fn data_type(self) -> DataType {
        match self {
            ObsType::Int8 => DataType::Int8,
            ObsType::Int16 => DataType::Int16,
            ObsType::Int32 => DataType::Int32,
            ObsType::Int64 => DataType::Int64,
            ObsType::UInt8 => DataType::UInt8,
            ObsType::UInt16 => DataType::UInt16,
            ObsType::UInt32 => DataType::UInt32,
            ObsType::UInt64 => DataType::UInt64,
            ObsType::Float32 => DataType::Float32,
            ObsType::Float64 => DataType::Float64,
            ObsType::Bool => DataType::Boolean,
            ObsType::String => DataType::Utf8,
        }
    }

    /// The obs type of an Arrow data type, if it is one.
    pub fn from_data_type(data_type: &DataType) -> Option<ObsType> {
        ObsType::ALL
            .into_iter()
            .find(|t| &t.data_type() == data_type)
    }

    /// For a category code type, how many categories its codes can address
    /// (the largest code is `len - 1`).
    pub fn max_categories(self) -> Option<usize> {
        match self {
            ObsType::Int8 => Some(1 << 7),
            ObsType::Int16 => Some(1 << 15),
            ObsType::Int32 => Some(1 << 31),
            _ => None,
        }
    }

    /// The smallest signed code type for a vocabulary of `n` categories.
    pub fn codes_for(n: usize) -> Option<ObsType> {
        [ObsType::Int8, ObsType::Int16, ObsType::Int32]
            .into_iter()
            .find(|t| t.max_categories().is_some_and(|m| n <= m))
    }

    /// Whether a column of kind `kind` may be stored as this type.
    pub fn allowed_for(self, kind: Kind) -> bool {
        match kind {
            Kind::Category => self.max_categories().is_some(),
            Kind::Numeric => !matches!(self, ObsType::Bool | ObsType::String),
            Kind::Bool => self == ObsType::Bool,
            Kind::String => self == ObsType::String,
        }
    }
}

impl fmt::Display for ObsType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One column of the obs schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSchema {
    /// The column name, as in the source table (unique within the schema).
    pub name: String,
    /// What the column holds.
    pub kind: Kind,
    /// How it is stored in the shards ([`ObsType::allowed_for`] its kind).
    pub arrow_type: ObsType,
    /// The global vocabulary of a category column (shared, not copied, by labels).
    pub categories: Option<Arc<[String]>>,
}

/// The parsed `obs/schema.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObsSchema {
    /// The columns, in the order the shards store them.
    pub columns: Vec<ColumnSchema>,
}

impl ObsSchema {
    /// Parses and checks schema.json; the error names the rule broken.
    pub fn parse(bytes: &[u8]) -> Result<ObsSchema, String> {
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| format!("schema.json is not valid JSON: {e}"))?;
        let obj = value
            .as_object()
            .ok_or("schema.json is not a JSON object")?;
        match obj.get("format") {
            Some(Value::String(s)) if s == OBS_FORMAT => {}
            other => {
                return Err(format!(
                    "schema format is {}, expected \"{OBS_FORMAT}\"",
                    show(other)
                ))
            }
        }
        match obj.get("version") {
            Some(Value::Number(n)) if n.as_u64() == Some(OBS_VERSION) => {}
            other => {
                return Err(format!(
                    "schema version is {}, this reader knows version {OBS_VERSION}",
                    show(other)
                ))
            }
        }
        let list = obj
            .get("columns")
            .and_then(Value::as_array)
            .ok_or("schema `columns` is missing or not a list")?;
        let mut names = HashSet::new();
        let mut columns = Vec::with_capacity(list.len());
        for (i, c) in list.iter().enumerate() {
            let column = parse_column(c).map_err(|e| format!("schema column {i}: {e}"))?;
            if !names.insert(column.name.clone()) {
                return Err(format!(
                    "schema column {i}: name {:?} appears twice",
                    column.name
                ));
            }
            columns.push(column);
        }
        Ok(ObsSchema { columns })
    }

    /// The schema as a JSON value (keys in the spec's order).
    pub fn to_value(&self) -> Value {
        let columns = self
            .columns
            .iter()
            .map(|c| {
                let mut m = Map::new();
                m.insert("name".into(), c.name.clone().into());
                m.insert("kind".into(), c.kind.name().into());
                m.insert("arrow_type".into(), c.arrow_type.name().into());
                m.insert(
                    "categories".into(),
                    c.categories
                        .as_ref()
                        .map_or(Value::Null, |v| v.iter().cloned().collect()),
                );
                Value::Object(m)
            })
            .collect();
        let mut m = Map::new();
        m.insert("format".into(), OBS_FORMAT.into());
        m.insert("version".into(), OBS_VERSION.into());
        m.insert("columns".into(), Value::Array(columns));
        Value::Object(m)
    }

    /// The text of schema.json as the Python reference writes it
    /// (`json.dumps(schema, indent=2)` and a newline): the fingerprint hashes
    /// this text, so it must not depend on who wrote the dataset.
    pub fn to_json_text(&self) -> String {
        let mut text = json::dumps(&self.to_value(), Some(2), false);
        text.push('\n');
        text
    }

    /// The columns' names, in schema order.
    pub fn names(&self) -> Vec<&str> {
        self.columns.iter().map(|c| c.name.as_str()).collect()
    }

    /// The column called `name` and its position.
    pub fn column(&self, name: &str) -> Option<(usize, &ColumnSchema)> {
        self.columns
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == name)
    }

    /// The Arrow schema of the shards: every column nullable, in order.
    pub fn arrow_schema(&self) -> Schema {
        Schema::new(
            self.columns
                .iter()
                .map(|c| Field::new(&c.name, c.arrow_type.data_type(), true))
                .collect::<Vec<_>>(),
        )
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "missing".into(), Value::to_string)
}

fn parse_column(c: &Value) -> Result<ColumnSchema, String> {
    let obj = c.as_object().ok_or("not a JSON object")?;
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or("`name` is missing or not a string")?
        .to_string();
    let kind_name = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("`kind` is missing or not a string")?;
    let kind = Kind::from_name(kind_name).ok_or_else(|| {
        format!("{name:?}: kind {kind_name:?} is not category, numeric, bool or string")
    })?;
    let type_name = obj
        .get("arrow_type")
        .and_then(Value::as_str)
        .ok_or("`arrow_type` is missing or not a string")?;
    let arrow_type = ObsType::from_name(type_name)
        .ok_or_else(|| format!("{name:?}: arrow_type {type_name:?} is not a supported type"))?;
    if !arrow_type.allowed_for(kind) {
        return Err(format!(
            "{name:?}: a {kind} column cannot be stored as {arrow_type}"
        ));
    }
    let categories = match (kind, obj.get("categories")) {
        (Kind::Category, Some(Value::Array(list))) => {
            let cats = list
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<String>>>()
                .ok_or_else(|| format!("{name:?}: categories must be strings"))?;
            let mut seen = HashSet::with_capacity(cats.len());
            if let Some(dup) = cats.iter().find(|c| !seen.insert(c.as_str())) {
                return Err(format!("{name:?}: category {dup:?} appears twice"));
            }
            let limit = arrow_type.max_categories().unwrap_or(0);
            if cats.len() > limit {
                return Err(format!(
                    "{name:?}: {arrow_type} codes cannot address more than {limit} categories, the vocabulary has {}",
                    cats.len()
                ));
            }
            Some(cats.into())
        }
        (Kind::Category, _) => {
            return Err(format!(
                "{name:?}: a category column needs a `categories` list"
            ))
        }
        (_, None | Some(Value::Null)) => None,
        (_, Some(_)) => {
            return Err(format!(
                "{name:?}: only category columns have categories (must be null)"
            ))
        }
    };
    Ok(ColumnSchema {
        name,
        kind,
        arrow_type,
        categories,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(columns: &str) -> String {
        format!(r#"{{"format": "deltacells-obs", "version": 1, "columns": [{columns}]}}"#)
    }

    #[test]
    fn round_trips_through_its_text() {
        let t = text(
            r#"{"name": "ct", "kind": "category", "arrow_type": "int8", "categories": ["a", "é"]},
               {"name": "n", "kind": "numeric", "arrow_type": "float", "categories": null}"#,
        );
        let s = ObsSchema::parse(t.as_bytes()).unwrap();
        assert_eq!(ObsSchema::parse(s.to_json_text().as_bytes()).unwrap(), s);
        assert!(s.to_json_text().contains("\"\\u00e9\""));
    }

    #[test]
    fn refuses_what_the_spec_forbids() {
        let cases = [
            (
                text("").replace("deltacells-obs", "deltacells-ob"),
                "format",
            ),
            (
                text("").replace("\"version\": 1", "\"version\": 2"),
                "version",
            ),
            (
                text(
                    r#"{"name": "c", "kind": "category", "arrow_type": "int64", "categories": []}"#,
                ),
                "cannot be stored",
            ),
            (
                text(r#"{"name": "c", "kind": "bool", "arrow_type": "int8", "categories": null}"#),
                "cannot be stored",
            ),
            (
                text(
                    r#"{"name": "c", "kind": "category", "arrow_type": "int8", "categories": null}"#,
                ),
                "needs",
            ),
            (
                text(
                    r#"{"name": "c", "kind": "string", "arrow_type": "string", "categories": ["a"]}"#,
                ),
                "only category",
            ),
            (
                text(
                    r#"{"name": "c", "kind": "time", "arrow_type": "string", "categories": null}"#,
                ),
                "kind",
            ),
            (
                text(
                    r#"{"name": "c", "kind": "category", "arrow_type": "int8", "categories": ["a", "a"]}"#,
                ),
                "twice",
            ),
            (
                text(
                    r#"{"name": "c", "kind": "bool", "arrow_type": "bool", "categories": null},
                       {"name": "c", "kind": "bool", "arrow_type": "bool", "categories": null}"#,
                ),
                "twice",
            ),
        ];
        for (t, rule) in cases {
            let e = ObsSchema::parse(t.as_bytes()).unwrap_err();
            assert!(e.contains(rule), "{e} (expected {rule})");
        }
    }

    #[test]
    fn int8_addresses_at_most_128_categories() {
        let cats = |n: usize| {
            (0..n)
                .map(|i| format!("\"c{i}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let col = |n: usize, t: &str| {
            text(&format!(
                r#"{{"name": "c", "kind": "category", "arrow_type": "{t}", "categories": [{}]}}"#,
                cats(n)
            ))
        };
        assert!(ObsSchema::parse(col(128, "int8").as_bytes()).is_ok());
        assert!(ObsSchema::parse(col(129, "int8").as_bytes())
            .unwrap_err()
            .contains("128"));
        assert!(ObsSchema::parse(col(129, "int16").as_bytes()).is_ok());
        assert_eq!(ObsType::codes_for(0), Some(ObsType::Int8));
        assert_eq!(ObsType::codes_for(128), Some(ObsType::Int8));
        assert_eq!(ObsType::codes_for(129), Some(ObsType::Int16));
        assert_eq!(ObsType::codes_for(32769), Some(ObsType::Int32));
    }
}

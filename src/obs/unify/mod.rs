//! Several obs tables made one: what a corpus of inputs shows as its obs.
//!
//! The columns are the union of the inputs' columns, in the order first seen.
//! A column an input lacks is missing for its cells (null, or code `-1`).
//! Each category column gets one global vocabulary: the inputs' own when they
//! all have the same set of categories (the first input's order), else the
//! union in natural order (`c2` before `c10`), unused categories kept (what
//! `anndata.concat` does). Columns
//! that agree in kind but not in type are widened: integers to `int64`,
//! integers and floats to `double`; a category column that is a string column
//! elsewhere (a vocabulary past the writer's limit) becomes a string column,
//! as does one whose merged vocabulary passes `max_categories`. Any other
//! disagreement (a number here, text there) is an error naming both inputs.
//! An optional *source column* is a category column naming, for every cell,
//! the input it came from.
//!
//! [`ObsUnion::remap`] turns a column as one input stores it into the global
//! column, for the cells of that input.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef};

mod arrays;
mod natural;

use super::schema::{ColumnSchema, Kind, ObsSchema, ObsType};
use crate::error::{Error, Result};
pub(super) use arrays::widened;
use arrays::{codes_array, convert};
pub(super) use natural::natural_cmp;

/// The obs schema of one input, with what errors call the input.
#[derive(Clone, Debug)]
pub struct InputObs<'a> {
    /// The input's name (its file or location).
    pub name: &'a str,
    /// Its columns as it stores them.
    pub schema: &'a ObsSchema,
}

/// Default name of the source column: the obs column naming each cell's
/// input (a corpus's member, a build's input).
pub const DEFAULT_SOURCE_COLUMN: &str = "dataset_id";

/// A category column naming each cell's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceColumn {
    /// The column's name (`dataset_id` by default in the tools).
    pub name: String,
    /// One category per input, in input order.
    pub values: Vec<String>,
}

/// Where a global column's values come from for one input.
#[derive(Clone, Debug, PartialEq, Eq)]
enum From {
    /// The input lacks the column: every value missing.
    Missing,
    /// The input's column at this position, converted to the global type.
    Column {
        position: usize,
        /// For category -> category: input code -> global code.
        codes: Option<Vec<i32>>,
        /// For category -> string: the input's vocabulary.
        categories: Option<Arc<[String]>>,
    },
    /// The source column: every cell is this input's code.
    Source(i32),
}

/// The union of several inputs' obs: columns unioned in the order first
/// seen, category vocabularies merged as `anndata.concat` merges them,
/// numeric types widened, and an optional source column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObsUnion {
    schema: ObsSchema,
    /// `from[input][global column]`.
    from: Vec<Vec<From>>,
}

/// The type two numeric columns widen to.
pub(super) fn widen(a: ObsType, b: ObsType) -> ObsType {
    let int = |t: ObsType| {
        matches!(
            t,
            ObsType::Int8
                | ObsType::Int16
                | ObsType::Int32
                | ObsType::Int64
                | ObsType::UInt8
                | ObsType::UInt16
                | ObsType::UInt32
        )
    };
    if a == b {
        a
    } else if int(a) && int(b) {
        ObsType::Int64
    } else {
        ObsType::Float64
    }
}

/// How one global column is stored, gathered over the inputs.
struct Merged {
    kind: Kind,
    arrow_type: ObsType,
    /// Each input's vocabulary, for category columns.
    vocabularies: Vec<Option<Arc<[String]>>>,
    /// The first input that has the column, for messages.
    first: usize,
}

impl ObsUnion {
    /// Unifies `inputs` (as [`ObsUnion`] says); `source` adds the
    /// source column last. Category vocabularies larger than `max_categories`
    /// become strings.
    pub fn new(
        inputs: &[InputObs<'_>],
        source: Option<&SourceColumn>,
        max_categories: usize,
    ) -> Result<ObsUnion> {
        let mut order: Vec<String> = Vec::new();
        let mut merged: HashMap<String, Merged> = HashMap::new();
        for (i, input) in inputs.iter().enumerate() {
            for c in &input.schema.columns {
                let Some(m) = merged.get_mut(&c.name) else {
                    order.push(c.name.clone());
                    merged.insert(
                        c.name.clone(),
                        Merged {
                            kind: c.kind,
                            arrow_type: c.arrow_type,
                            vocabularies: vec![c.categories.clone()],
                            first: i,
                        },
                    );
                    continue;
                };
                m.vocabularies.push(c.categories.clone());
                let text = |k: Kind| matches!(k, Kind::Category | Kind::String);
                match (m.kind, c.kind) {
                    (a, b) if a == b && a != Kind::Numeric => {}
                    (Kind::Numeric, Kind::Numeric) => {
                        m.arrow_type = widen(m.arrow_type, c.arrow_type)
                    }
                    (a, b) if text(a) && text(b) => {
                        m.kind = Kind::String;
                        m.arrow_type = ObsType::String;
                    }
                    (a, b) => {
                        return Err(Error::Input(format!(
                            "obs column {:?} is {a} ({}) in {} but {b} ({}) in {}",
                            c.name, m.arrow_type, inputs[m.first].name, c.arrow_type, input.name
                        )))
                    }
                }
            }
        }
        let mut columns = Vec::with_capacity(order.len() + 1);
        for name in &order {
            let m = &merged[name];
            let mut column = ColumnSchema {
                name: name.clone(),
                kind: m.kind,
                arrow_type: m.arrow_type,
                categories: None,
            };
            if m.kind == Kind::Category {
                let vocab = merge_vocabularies(&m.vocabularies);
                match ObsType::codes_for(vocab.len()).filter(|_| vocab.len() <= max_categories) {
                    Some(t) => {
                        column.arrow_type = t;
                        column.categories = Some(vocab.into());
                    }
                    None => {
                        column.kind = Kind::String;
                        column.arrow_type = ObsType::String;
                    }
                }
            }
            columns.push(column);
        }
        if let Some(s) = source {
            if s.values.len() != inputs.len() {
                return Err(Error::Input(format!(
                    "source column {:?}: {} names for {} inputs",
                    s.name,
                    s.values.len(),
                    inputs.len()
                )));
            }
            if merged.contains_key(&s.name) {
                return Err(Error::Input(format!(
                    "source column {:?} is already an obs column of {} (choose another name)",
                    s.name, inputs[merged[&s.name].first].name
                )));
            }
            if let Some(dup) = s
                .values
                .iter()
                .enumerate()
                .find(|(i, v)| s.values[..*i].contains(v))
            {
                return Err(Error::Input(format!(
                    "two inputs would both be {:?} in the source column {:?} (rename one)",
                    dup.1, s.name
                )));
            }
            let arrow_type = ObsType::codes_for(s.values.len())
                .ok_or_else(|| Error::Input("too many inputs for a source column".into()))?;
            columns.push(ColumnSchema {
                name: s.name.clone(),
                kind: Kind::Category,
                arrow_type,
                categories: Some(s.values.clone().into()),
            });
        }
        let from = inputs
            .iter()
            .enumerate()
            .map(|(i, input)| {
                columns
                    .iter()
                    .map(|global| {
                        if source.is_some_and(|s| s.name == global.name) {
                            return From::Source(i as i32);
                        }
                        let Some((position, own)) = input.schema.column(&global.name) else {
                            return From::Missing;
                        };
                        let (codes, categories) = match (own.kind, global.kind) {
                            (Kind::Category, Kind::Category) => (Some(code_map(own, global)), None),
                            (Kind::Category, _) => (None, own.categories.clone()),
                            _ => (None, None),
                        };
                        From::Column {
                            position,
                            codes,
                            categories,
                        }
                    })
                    .collect()
            })
            .collect();
        Ok(ObsUnion {
            schema: ObsSchema { columns },
            from,
        })
    }

    /// The same union with the columns named in `listed` in that order,
    /// after the columns it does not name (the inputs' obs indexes when a
    /// build keeps only some columns) and before the source column.
    pub fn listed_first(mut self, listed: &[String]) -> ObsUnion {
        let is_source = |j: usize| {
            self.from
                .first()
                .is_some_and(|f| matches!(f[j], From::Source(_)))
        };
        let rank = |j: usize| {
            let name = &self.schema.columns[j].name;
            match listed.iter().position(|l| l == name) {
                _ if is_source(j) => (2, 0),
                Some(p) => (1, p),
                None => (0, j),
            }
        };
        let mut order: Vec<usize> = (0..self.schema.columns.len()).collect();
        order.sort_by_key(|&j| rank(j));
        self.schema.columns = order
            .iter()
            .map(|&j| self.schema.columns[j].clone())
            .collect();
        for from in &mut self.from {
            *from = order.iter().map(|&j| from[j].clone()).collect();
        }
        self
    }

    /// The global schema.
    pub fn schema(&self) -> &ObsSchema {
        &self.schema
    }

    /// Global column `column` for `len` cells of input `input`, given the
    /// input's stored columns for those cells (`stored[k]` is the input's
    /// column `k`, as its schema types it).
    pub fn remap(
        &self,
        input: usize,
        column: usize,
        stored: &[ArrayRef],
        len: usize,
    ) -> Result<ArrayRef> {
        let values = match self.input_column(input, column) {
            Some(k) => Some(stored.get(k).ok_or_else(|| {
                Error::Input(format!(
                    "obs column {:?}: the input gave {} columns",
                    self.schema.columns[column].name,
                    stored.len()
                ))
            })?),
            None => None,
        };
        self.remap_values(input, column, values.map(|a| a.as_ref()), len)
    }

    /// Which of input `input`'s columns global column `column` is made of
    /// (`None`: the input lacks it, or it is the source column): what a
    /// reader of a few columns reads.
    pub fn input_column(&self, input: usize, column: usize) -> Option<usize> {
        match &self.from[input][column] {
            From::Column { position, .. } => Some(*position),
            From::Missing | From::Source(_) => None,
        }
    }

    /// As [`ObsUnion::remap`], given only the input's column that
    /// [`ObsUnion::input_column`] names (`None` where it names none).
    pub fn remap_values(
        &self,
        input: usize,
        column: usize,
        values: Option<&dyn Array>,
        len: usize,
    ) -> Result<ArrayRef> {
        let global = &self.schema.columns[column];
        match &self.from[input][column] {
            From::Missing if global.kind == Kind::Category => {
                Ok(codes_array(global.arrow_type, vec![-1; len]))
            }
            From::Missing => Ok(new_null_array(&global.arrow_type.data_type(), len)),
            From::Source(code) => Ok(codes_array(global.arrow_type, vec![*code; len])),
            From::Column {
                codes, categories, ..
            } => {
                let array = values.ok_or_else(|| {
                    Error::Input(format!("obs column {:?}: no values given", global.name))
                })?;
                if array.len() != len {
                    return Err(Error::Input(format!(
                        "obs column {:?}: {} values for {len} cells",
                        global.name,
                        array.len()
                    )));
                }
                convert(array, global, codes.as_deref(), categories.as_deref())
            }
        }
    }
}

/// The global vocabulary of one column: the inputs' common set in the first
/// input's order, or the union in natural order.
fn merge_vocabularies(vocabularies: &[Option<Arc<[String]>>]) -> Vec<String> {
    let present: Vec<&[String]> = vocabularies.iter().flatten().map(|v| &v[..]).collect();
    let Some(first) = present.first() else {
        return Vec::new();
    };
    fn set(v: &[String]) -> BTreeSet<&String> {
        v.iter().collect()
    }
    let first_set = set(first);
    if present.iter().all(|v| set(v) == first_set) {
        return first.to_vec();
    }
    let mut union: Vec<String> = present
        .iter()
        .flat_map(|v| v.iter())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .cloned()
        .collect();
    union.sort_by(|a, b| natural::natural_cmp(a, b));
    union
}

/// Input code -> global code of one category column.
fn code_map(own: &ColumnSchema, global: &ColumnSchema) -> Vec<i32> {
    let position: HashMap<&str, i32> = global
        .categories
        .iter()
        .flat_map(|c| c.iter())
        .enumerate()
        .map(|(k, c)| (c.as_str(), k as i32))
        .collect();
    own.categories
        .iter()
        .flat_map(|c| c.iter())
        .map(|c| position[c.as_str()])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::arrays::stored_codes;
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Int64Type};
    use arrow_array::BooleanArray;
    use arrow_array::{Int32Array, Int8Array};

    fn category(name: &str, cats: &[&str]) -> ColumnSchema {
        ColumnSchema {
            name: name.into(),
            kind: Kind::Category,
            arrow_type: ObsType::codes_for(cats.len()).unwrap(),
            categories: Some(
                cats.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .into(),
            ),
        }
    }

    fn plain(name: &str, kind: Kind, t: ObsType) -> ColumnSchema {
        ColumnSchema {
            name: name.into(),
            kind,
            arrow_type: t,
            categories: None,
        }
    }

    fn schema(columns: Vec<ColumnSchema>) -> ObsSchema {
        ObsSchema { columns }
    }

    fn union(schemas: &[ObsSchema], source: Option<&SourceColumn>) -> Result<ObsUnion> {
        let names = ["a", "b", "c"];
        let inputs: Vec<InputObs> = schemas
            .iter()
            .zip(names)
            .map(|(schema, name)| InputObs { name, schema })
            .collect();
        ObsUnion::new(&inputs, source, 20_000)
    }

    fn codes(a: &ArrayRef) -> Vec<i32> {
        stored_codes(a.as_ref()).unwrap()
    }

    #[test]
    fn vocabularies_merge_like_anndata_concat() {
        // The same set in another order: the first input's order.
        let same = union(
            &[
                schema(vec![category("ct", &["b", "a"])]),
                schema(vec![category("ct", &["a", "b"])]),
            ],
            None,
        )
        .unwrap();
        let cats = same.schema().columns[0].categories.clone().unwrap();
        assert_eq!(&cats[..], ["b", "a"]);
        // Different sets: the sorted union, unused categories kept.
        let u = union(
            &[
                schema(vec![category("ct", &["b", "a", "z"])]),
                schema(vec![category("ct", &["c", "a"])]),
            ],
            None,
        )
        .unwrap();
        let cats = u.schema().columns[0].categories.clone().unwrap();
        assert_eq!(&cats[..], ["a", "b", "c", "z"]);
        let stored: ArrayRef = Arc::new(Int8Array::from(vec![0, 1, -1]));
        let out = u.remap(1, 0, &[stored], 3).unwrap();
        assert_eq!(codes(&out), [2, 0, -1]);
    }

    #[test]
    fn missing_columns_are_missing_and_the_source_column_names_inputs() {
        let source = SourceColumn {
            name: "dataset_id".into(),
            values: vec!["p1".into(), "p2".into()],
        };
        let u = union(
            &[
                schema(vec![category("ct", &["x"])]),
                schema(vec![plain("n", Kind::Numeric, ObsType::Float32)]),
            ],
            Some(&source),
        )
        .unwrap();
        let names: Vec<&str> = u.schema().names();
        assert_eq!(names, ["ct", "n", "dataset_id"]);
        let n: ArrayRef = Arc::new(arrow_array::Float32Array::from(vec![1.5, 2.5]));
        assert_eq!(
            codes(&u.remap(1, 0, std::slice::from_ref(&n), 2).unwrap()),
            [-1, -1]
        );
        let own = u.remap(1, 1, &[n], 2).unwrap();
        assert_eq!(
            own.as_primitive::<Float32Type>().values().to_vec(),
            [1.5, 2.5]
        );
        let absent = u.remap(0, 1, &[], 3).unwrap();
        assert_eq!((absent.len(), absent.null_count()), (3, 3));
        assert_eq!(codes(&u.remap(1, 2, &[], 2).unwrap()), [1, 1]);
    }

    #[test]
    fn types_widen_within_a_kind_and_refuse_across_kinds() {
        let u = union(
            &[
                schema(vec![
                    plain("i", Kind::Numeric, ObsType::Int32),
                    plain("f", Kind::Numeric, ObsType::Int64),
                    category("t", &["a"]),
                ]),
                schema(vec![
                    plain("i", Kind::Numeric, ObsType::UInt8),
                    plain("f", Kind::Numeric, ObsType::Float32),
                    plain("t", Kind::String, ObsType::String),
                ]),
            ],
            None,
        )
        .unwrap();
        let types: Vec<ObsType> = u.schema().columns.iter().map(|c| c.arrow_type).collect();
        assert_eq!(types, [ObsType::Int64, ObsType::Float64, ObsType::String]);
        let i: ArrayRef = Arc::new(arrow_array::UInt8Array::from(vec![Some(7), None]));
        let out = u.remap(1, 0, &[i], 2).unwrap();
        assert_eq!(
            out.as_primitive::<Int64Type>().iter().collect::<Vec<_>>(),
            [Some(7), None]
        );
        let t: ArrayRef = Arc::new(Int8Array::from(vec![0, -1]));
        let out = u
            .remap(
                0,
                2,
                &[
                    Arc::new(Int32Array::from(vec![1, 2])),
                    Arc::new(Int32Array::from(vec![1, 2])),
                    t,
                ],
                2,
            )
            .unwrap();
        assert_eq!(
            out.as_string::<i32>().iter().collect::<Vec<_>>(),
            [Some("a"), None]
        );

        let err = union(
            &[
                schema(vec![plain("x", Kind::Numeric, ObsType::Float64)]),
                schema(vec![plain("x", Kind::Bool, ObsType::Bool)]),
            ],
            None,
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("\"x\"") && msg.contains(" a") && msg.contains(" b"),
            "{msg}"
        );
        let bools: ArrayRef = Arc::new(BooleanArray::from(vec![true]));
        let ok = union(&[schema(vec![plain("x", Kind::Bool, ObsType::Bool)])], None).unwrap();
        assert_eq!(ok.remap(0, 0, &[bools], 1).unwrap().len(), 1);
    }

    #[test]
    fn the_source_column_must_not_clash() {
        let source = |name: &str, values: &[&str]| SourceColumn {
            name: name.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        let s = [schema(vec![category("ct", &["x"])]), schema(vec![])];
        assert!(union(&s, Some(&source("ct", &["a", "b"]))).is_err());
        assert!(union(&s, Some(&source("id", &["a", "a"]))).is_err());
        assert!(union(&s, Some(&source("id", &["a"]))).is_err());
    }
}

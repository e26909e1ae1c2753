//! One gene table from several inputs' (a build's or a corpus's
//! vocabulary): each column merged as obs columns merge, text where the
//! inputs' types do not mix.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, StringArray};
use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::obs::column::{ColumnData, ObsColumn};
use crate::obs::schema::ObsType;
use crate::obs::unify::{natural_cmp, widen, widened};

use super::{text, VarColumn, VarTable};

impl VarTable {
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

//! Gene vocabularies: the genes of several inputs, matched by a key, made one.
//!
//! Every input of a corpus has its own genes in its own order. A *gene key*
//! names what matches them: the var index (the default: `var_names`) or a var
//! column such as Ensembl ids. A [`GeneSpace`] says which genes the result has:
//! every gene of any input ([`GeneSpace::Union`], in the order first seen, input
//! by input), the genes of every input ([`GeneSpace::Intersection`], in the
//! first input's order), or exactly a given list ([`GeneSpace::Listed`]).
//! [`Vocabulary`] holds the result and, for each input, where each of its genes
//! lands (or that it is dropped). A vocabulary gene an input lacks is zero for
//! that input's cells.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::Path;

use crate::dataset::Dataset;
use crate::error::{Error, Result};

/// Which genes a vocabulary holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GeneSpace {
    /// Every gene of any input, in the order first seen (input by input).
    Union,
    /// The genes every input has, in the first input's order.
    Intersection,
    /// Exactly these keys, in this order; a key no input has is a zero column.
    Listed(Vec<String>),
}

impl GeneSpace {
    /// `union`, `intersection`, or the path of a file of keys, one per line.
    pub fn parse_arg(arg: &str) -> Result<GeneSpace> {
        match arg {
            "union" => Ok(GeneSpace::Union),
            "intersection" => Ok(GeneSpace::Intersection),
            path => GeneSpace::from_file(Path::new(path)),
        }
    }

    /// Reads a gene list: one key per line (a trailing `\r` is dropped, blank
    /// lines are errors), each key once.
    pub fn from_file(path: &Path) -> Result<GeneSpace> {
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        let keys: Vec<String> = text
            .lines()
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
            .collect();
        GeneSpace::listed(keys).map_err(|e| Error::Input(format!("{}: {e}", path.display())))
    }

    /// A listed space, checked: at least one key, none empty or repeated.
    pub fn listed(keys: Vec<String>) -> Result<GeneSpace> {
        if keys.is_empty() {
            return Err(Error::Input("the gene list is empty".into()));
        }
        if let Some(line) = keys.iter().position(String::is_empty) {
            return Err(Error::Input(format!(
                "gene list line {} is empty",
                line + 1
            )));
        }
        check_unique("the gene list", positions(&keys), "")?;
        Ok(GeneSpace::Listed(keys))
    }

    /// The name of the space in messages and plans.
    pub fn describe(&self) -> String {
        match self {
            GeneSpace::Union => "union".into(),
            GeneSpace::Intersection => "intersection".into(),
            GeneSpace::Listed(keys) => format!("a list of {} genes", keys.len()),
        }
    }
}

/// The genes of one input, as keys in its column order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputGenes {
    /// What errors call the input (its file or location).
    pub name: String,
    /// The key of each of its genes, in its column order.
    pub keys: Vec<String>,
}

/// One gene space over several inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vocabulary {
    keys: Vec<String>,
    /// Per input: input column -> vocabulary gene, `None` when dropped.
    columns: Columns,
}

/// Per input: input column -> vocabulary gene, `None` when dropped.
type Columns = Vec<Vec<Option<u32>>>;

/// Refuses a key that appears twice among `keys` (each with its
/// position), naming `what` and both positions; `hint` follows the message
/// (the way out).
pub(crate) fn check_unique<'a>(
    what: &str,
    keys: impl IntoIterator<Item = (usize, &'a str)>,
    hint: &str,
) -> Result<()> {
    let mut seen = HashMap::new();
    for (i, k) in keys {
        if let Some(first) = seen.insert(k, i) {
            return Err(Error::Input(format!(
                "{what}: gene key {k:?} appears twice (positions {first} and {i}){hint}"
            )));
        }
    }
    Ok(())
}

/// Each of `keys` with its position.
fn positions(keys: &[String]) -> impl Iterator<Item = (usize, &str)> {
    keys.iter().map(String::as_str).enumerate()
}

/// Why a repeated key stops a match, and the ways out.
pub(crate) const MATCH_HINT: &str = "; genes matched by key need unique keys: match them by a var \
     column of unique values (a gene key such as gene_ids) or make the names unique \
     (as anndata's var_names_make_unique does)";

impl Vocabulary {
    /// Matches the inputs' genes by key into `space`. Errors name the input:
    /// a key repeated within an input, an empty intersection, more than 2^31 genes.
    ///
    /// One input in its own genes (the union or the intersection) is matched
    /// with nothing, so its keys are kept as they are, repeated ones
    /// included: real references name genes twice (10x features, an AnnData
    /// before `var_names_make_unique`), and such a file converts as anndata
    /// reads it.
    pub fn build(inputs: &[InputGenes], space: &GeneSpace) -> Result<Vocabulary> {
        let (keys, columns) = match (inputs, space) {
            ([], _) => return Err(Error::Input("no inputs".into())),
            ([only], GeneSpace::Union | GeneSpace::Intersection) => {
                let identity = (0..only.keys.len() as u32).map(Some).collect();
                (only.keys.clone(), vec![identity])
            }
            _ => Vocabulary::matched(inputs, space)?,
        };
        if keys.is_empty() || keys.len() > 1 << 31 {
            return Err(Error::Input(format!(
                "a vocabulary of {} genes is outside 1..=2^31",
                keys.len()
            )));
        }
        Ok(Vocabulary { keys, columns })
    }

    /// The keys of `space` over `inputs`, and each input's columns in them.
    fn matched(inputs: &[InputGenes], space: &GeneSpace) -> Result<(Vec<String>, Columns)> {
        for input in inputs {
            // A missing value in a key column reads as "": matched, it would
            // merge unrelated genes of different inputs into one.
            if let Some(g) = input.keys.iter().position(String::is_empty) {
                return Err(Error::Input(format!(
                    "{}: the gene key of gene {g} is empty (a missing value?); genes matched \
                     by key need one each: fill it in or match by another var column",
                    input.name
                )));
            }
            check_unique(&input.name, positions(&input.keys), MATCH_HINT)?;
        }
        let keys: Vec<String> = match space {
            GeneSpace::Listed(keys) => keys.clone(),
            GeneSpace::Union => {
                let mut seen = HashMap::new();
                let mut keys = Vec::new();
                for k in inputs.iter().flat_map(|i| &i.keys) {
                    if let Entry::Vacant(v) = seen.entry(k.as_str()) {
                        v.insert(());
                        keys.push(k.clone());
                    }
                }
                keys
            }
            GeneSpace::Intersection => {
                let mut count: HashMap<&str, usize> = HashMap::new();
                for k in inputs.iter().flat_map(|i| &i.keys) {
                    *count.entry(k.as_str()).or_default() += 1;
                }
                let keys: Vec<String> = inputs[0]
                    .keys
                    .iter()
                    .filter(|k| count[k.as_str()] == inputs.len())
                    .cloned()
                    .collect();
                if keys.is_empty() {
                    return Err(Error::Input(format!(
                        "the inputs have no gene in common (intersection of {})",
                        inputs
                            .iter()
                            .map(|i| i.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                keys
            }
        };
        let position: HashMap<&str, u32> = keys
            .iter()
            .enumerate()
            .map(|(j, k)| (k.as_str(), j as u32))
            .collect();
        let columns = inputs
            .iter()
            .map(|i| {
                i.keys
                    .iter()
                    .map(|k| position.get(k.as_str()).copied())
                    .collect()
            })
            .collect();
        Ok((keys, columns))
    }

    /// The vocabulary's keys, in vocabulary order.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// Number of genes.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the vocabulary is empty (never, once built).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Input `input`'s columns: column -> vocabulary gene, `None` when dropped.
    pub fn columns(&self, input: usize) -> &[Option<u32>] {
        &self.columns[input]
    }

    /// Whether input `input` maps onto the vocabulary one to one in order
    /// (its reads need no remapping).
    pub fn is_identity(&self, input: usize) -> bool {
        let cols = &self.columns[input];
        cols.len() == self.keys.len() && cols.iter().enumerate().all(|(j, c)| *c == Some(j as u32))
    }
}

/// The gene keys of a dataset, in its column order: `var_names.txt` when
/// `key` is `None`, else the `var.parquet` column `key` (or its index column).
pub fn dataset_keys(ds: &Dataset, key: Option<&str>, name: &str) -> Result<Vec<String>> {
    let Some(key) = key else {
        return ds.var_names().map(<[String]>::to_vec).ok_or_else(|| {
            Error::Input(format!(
                "{name}: has no var_names.txt to match genes by (give a gene key column)"
            ))
        });
    };
    let frame = ds.var_table()?.ok_or_else(|| {
        Error::Input(format!(
            "{name}: has no var.parquet, so no gene key column {key:?}"
        ))
    })?;
    let table = &frame.table;
    let column = table.column_by_name(key).ok_or_else(|| {
        let names: Vec<&str> = table
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        Error::Input(format!(
            "{name}: no var column {key:?} to match genes by (var has {})",
            names.join(", ")
        ))
    })?;
    crate::obs::string_values(column.as_ref())
        .ok_or_else(|| Error::Input(format!("{name}: var column {key:?} is not a text column")))?
        .into_iter()
        .enumerate()
        .map(|(g, v)| {
            v.ok_or_else(|| Error::Input(format!("{name}: var column {key:?} is null at gene {g}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(name: &str, keys: &[&str]) -> InputGenes {
        InputGenes {
            name: name.into(),
            keys: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn union_keeps_first_seen_order_and_maps_every_input() {
        let inputs = [input("a", &["g3", "g1"]), input("b", &["g2", "g1", "g0"])];
        let v = Vocabulary::build(&inputs, &GeneSpace::Union).unwrap();
        assert_eq!(v.keys(), ["g3", "g1", "g2", "g0"]);
        assert_eq!(v.columns(0), [Some(0), Some(1)]);
        assert_eq!(v.columns(1), [Some(2), Some(1), Some(3)]);
        assert!(!v.is_identity(0) && !v.is_identity(1));
    }

    #[test]
    fn intersection_follows_the_first_input_and_drops_the_rest() {
        let inputs = [input("a", &["g3", "g1", "g2"]), input("b", &["g2", "g3"])];
        let v = Vocabulary::build(&inputs, &GeneSpace::Intersection).unwrap();
        assert_eq!(v.keys(), ["g3", "g2"]);
        assert_eq!(v.columns(0), [Some(0), None, Some(1)]);
        assert_eq!(v.columns(1), [Some(1), Some(0)]);
        let disjoint = [input("a", &["x"]), input("b", &["y"])];
        let err = Vocabulary::build(&disjoint, &GeneSpace::Intersection).unwrap_err();
        assert!(err.to_string().contains("no gene in common"), "{err}");
    }

    #[test]
    fn a_list_is_exact_and_may_name_genes_no_input_has() {
        let space = GeneSpace::listed(vec!["g9".into(), "g1".into()]).unwrap();
        let v = Vocabulary::build(&[input("a", &["g1", "g2"])], &space).unwrap();
        assert_eq!(v.keys(), ["g9", "g1"]);
        assert_eq!(v.columns(0), [Some(1), None]);
        assert!(GeneSpace::listed(vec![]).is_err());
        assert!(GeneSpace::listed(vec!["a".into(), "".into()]).is_err());
        let err = GeneSpace::listed(vec!["a".into(), "a".into()]).unwrap_err();
        assert!(err.to_string().contains("appears twice"), "{err}");
    }

    #[test]
    fn one_input_in_its_own_order_is_the_identity() {
        let v = Vocabulary::build(&[input("a", &["x", "y"])], &GeneSpace::Union).unwrap();
        assert!(v.is_identity(0));
    }

    #[test]
    fn a_key_repeated_within_an_input_is_refused_naming_the_input_and_the_way_out() {
        let inputs = [input("a.h5ad", &["g1"]), input("b.h5ad", &["g2", "g2"])];
        let err = Vocabulary::build(&inputs, &GeneSpace::Union).unwrap_err();
        assert!(err.to_string().contains("b.h5ad"), "{err}");
        assert!(err.to_string().contains("\"g2\" appears twice"), "{err}");
        assert!(err.to_string().contains("gene_ids"), "{err}");
    }

    #[test]
    fn one_input_keeps_its_repeated_keys_unless_matched_to_a_list() {
        let one = [input("a", &["g1", "g2", "g1"])];
        for space in [GeneSpace::Union, GeneSpace::Intersection] {
            let v = Vocabulary::build(&one, &space).unwrap();
            assert_eq!(v.keys(), ["g1", "g2", "g1"]);
            assert!(v.is_identity(0), "{space:?}");
        }
        let listed = GeneSpace::listed(vec!["g2".into()]).unwrap();
        let err = Vocabulary::build(&one, &listed).unwrap_err();
        assert!(err.to_string().contains("\"g1\" appears twice"), "{err}");
    }

    #[test]
    fn an_empty_key_is_refused_where_keys_are_matched() {
        let inputs = [input("a.dc", &["", "K1"]), input("b.dc", &["K0", "K1"])];
        for space in [GeneSpace::Union, GeneSpace::Intersection] {
            let err = Vocabulary::build(&inputs, &space).unwrap_err().to_string();
            assert!(
                err.contains("a.dc") && err.contains("gene 0 is empty"),
                "{err}"
            );
        }
        let listed = GeneSpace::listed(vec!["K1".into()]).unwrap();
        assert!(Vocabulary::build(&inputs[..1], &listed).is_err());
        // Alone in its own genes, nothing is matched.
        assert!(Vocabulary::build(&inputs[..1], &GeneSpace::Union).is_ok());
    }

    #[test]
    fn gene_list_files_parse_one_key_per_line() {
        let dir = std::env::temp_dir().join(format!("dc-vocab-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("genes.txt");
        std::fs::write(&path, "g1\r\ng2\n").unwrap();
        assert_eq!(
            GeneSpace::parse_arg(path.to_str().unwrap()).unwrap(),
            GeneSpace::Listed(vec!["g1".into(), "g2".into()])
        );
        std::fs::write(&path, "g1\n\ng2\n").unwrap();
        let err = GeneSpace::from_file(&path).unwrap_err();
        assert!(err.to_string().contains("line 2 is empty"), "{err}");
        assert!(GeneSpace::from_file(&dir.join("missing.txt")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

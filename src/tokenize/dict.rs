//! Token dictionaries and gene medians: mappings keyed by a dataset's gene
//! key, given directly or loaded from two-column text files.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Values keyed by gene key (a var name, or a `var` column's value): a
/// token dictionary (`GeneMap<i32>`) or gene medians (`GeneMap<f64>`).
///
/// A file holds one `key<TAB>value` or `key,value` pair a line (the
/// separator is the first non-blank line's: a tab if it has one, else a
/// comma); blank lines are skipped, and so is a first non-blank line whose
/// value is not a number (a header such as `gene,token`). A UTF-8 byte order
/// mark before the first line (what spreadsheet programs write) is not part
/// of the first key. Every other line must parse, and a key may appear once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GeneMap<V> {
    values: HashMap<String, V>,
}

impl<V: Copy + FromStr> GeneMap<V> {
    /// The pairs `pairs`; a key given twice is an error.
    pub fn new<K: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Result<GeneMap<V>> {
        let mut values = HashMap::new();
        for (k, v) in pairs {
            let k = k.into();
            if values.insert(k.clone(), v).is_some() {
                return Err(Error::Input(format!("gene key {k:?} is given twice")));
            }
        }
        Ok(GeneMap { values })
    }

    /// The pairs of the two-column file at `path` (see the type's docs).
    pub fn from_file(path: &Path) -> Result<GeneMap<V>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
        Self::parse(&text).map_err(|e| Error::Input(format!("{}: {e}", path.display())))
    }

    /// The pairs of a two-column text (see the type's docs); the error
    /// names the line.
    pub fn parse(text: &str) -> std::result::Result<GeneMap<V>, String> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let blank = |line: &str| line.trim().is_empty();
        let first = text.lines().position(|line| !blank(line));
        let sep = match first.and_then(|i| text.lines().nth(i)) {
            Some(line) if line.contains('\t') => '\t',
            _ => ',',
        };
        let mut values = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if blank(line) {
                continue;
            }
            let mut fields = line.split(sep);
            let (Some(key), Some(value), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(format!(
                    "line {}: expected two fields separated by {sep:?}, found {line:?}",
                    i + 1
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            let Ok(value) = value.parse::<V>() else {
                if Some(i) == first {
                    continue;
                }
                return Err(format!("line {}: {value:?} is not a number", i + 1));
            };
            if key.is_empty() {
                return Err(format!("line {}: empty gene key", i + 1));
            }
            // A file's first mark is dropped above; one elsewhere would read
            // as part of a key that no gene has (and such a key, written
            // first in a file, would lose it when read back).
            if key.starts_with('\u{feff}') {
                return Err(format!(
                    "line {}: gene key {key:?} starts with a byte order mark",
                    i + 1
                ));
            }
            if values.insert(key.to_string(), value).is_some() {
                return Err(format!("line {}: gene key {key:?} is given twice", i + 1));
            }
        }
        Ok(GeneMap { values })
    }
}

impl<V: Copy> GeneMap<V> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<V> {
        self.values.get(key).copied()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no key is mapped.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Every `(key, value)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, V)> {
        self.values.iter().map(|(k, &v)| (k.as_str(), v))
    }
}

impl GeneMap<f64> {
    /// Gene medians from a gene statistics file (`gene_stats.parquet`, as
    /// [`crate::dataset::GeneTable::to_parquet`] writes it): its first
    /// column the gene keys (strings), `norm_median` the medians. Genes
    /// without a median (NaN: never expressed) are left out; a file that is
    /// not such a table is an error.
    pub fn from_gene_stats(bytes: &[u8]) -> Result<GeneMap<f64>> {
        use arrow_array::cast::AsArray;
        use arrow_array::types::Float64Type;
        use arrow_schema::DataType;

        let bad = |e: String| Error::Input(format!("gene statistics: {e}"));
        let (table, _) = crate::obs::read_whole_parquet(bytes::Bytes::copy_from_slice(bytes), None)
            .map_err(bad)?;
        let keys = table
            .columns()
            .first()
            .ok_or_else(|| bad("the file has no columns".into()))?;
        let keys: Vec<Option<&str>> = match keys.data_type() {
            DataType::Utf8 => keys.as_string::<i32>().iter().collect(),
            DataType::LargeUtf8 => keys.as_string::<i64>().iter().collect(),
            _ => return Err(bad("the first column is not the gene keys (strings)".into())),
        };
        let medians = table
            .column_by_name("norm_median")
            .ok_or_else(|| bad("no norm_median column".into()))?;
        let medians = medians
            .as_primitive_opt::<Float64Type>()
            .ok_or_else(|| bad("norm_median is not float64".into()))?;
        let mut pairs = Vec::new();
        for (k, m) in keys.into_iter().zip(medians.iter()) {
            let k = k.ok_or_else(|| bad("a gene key is missing".into()))?;
            if let Some(m) = m.filter(|m| !m.is_nan()) {
                pairs.push((k.to_string(), m));
            }
        }
        GeneMap::new(pairs)
    }

    /// Gene medians from the file at `path`: a gene statistics file when it
    /// ends in `.parquet` ([`GeneMap::from_gene_stats`]), else a two-column
    /// text file ([`GeneMap::from_file`]).
    pub fn medians_from_file(path: &Path) -> Result<GeneMap<f64>> {
        if path.extension().is_some_and(|e| e == "parquet") {
            let bytes = std::fs::read(path)
                .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
            return GeneMap::from_gene_stats(&bytes)
                .map_err(|e| Error::Input(format!("{}: {e}", path.display())));
        }
        GeneMap::from_file(path)
    }
}

/// The token of special token `name` (`<pad>`, `<cls>`, `<eos>`), which
/// `tokens` must hold, and no other key: a gene with `<pad>`'s id would
/// read as padding (its attention mask says otherwise), one with `<cls>`'s
/// as the start of a row.
pub(crate) fn special(tokens: &GeneMap<i32>, name: &str, why: &str) -> Result<i32> {
    let id = tokens.get(name).ok_or_else(|| {
        Error::Input(format!(
            "the token dictionary has no {name} token, which {why} needs"
        ))
    })?;
    match tokens.iter().find(|&(k, t)| t == id && k != name) {
        Some((other, _)) => Err(Error::Input(format!(
            "{other:?} has the token of {name} ({id}): a row could not tell them apart"
        ))),
        None => Ok(id),
    }
}

/// Checks that every token id is non-negative (an embedding row).
pub(crate) fn check_tokens(tokens: &GeneMap<i32>) -> Result<()> {
    match tokens.iter().find(|&(_, t)| t < 0) {
        Some((k, t)) => Err(Error::Input(format!(
            "token of gene {k:?} is {t}: token ids are non-negative"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_special_token_is_its_own() {
        let m = GeneMap::<i32>::parse("<pad>\t0\n<cls>\t1\nA\t2\nB\t3").unwrap();
        assert_eq!(special(&m, "<cls>", "scGPT").unwrap(), 1);
        let m = GeneMap::<i32>::parse("<pad>\t0\n<cls>\t1\nA\t2\nB\t0").unwrap();
        let e = special(&m, "<pad>", "padding").unwrap_err().to_string();
        assert!(e.contains("\"B\" has the token of <pad> (0)"), "{e}");
        assert!(special(&m, "<eos>", "special tokens").is_err());
    }

    #[test]
    fn parses_tabs_commas_and_a_header() {
        let m = GeneMap::<i32>::parse("gene\ttoken\nA\t3\n\nB\t4\r\n").unwrap();
        assert_eq!((m.get("A"), m.get("B"), m.len()), (Some(3), Some(4), 2));
        let m = GeneMap::<f64>::parse("A,1.5\nB,2").unwrap();
        assert_eq!((m.get("A"), m.get("B")), (Some(1.5), Some(2.0)));
        // A byte order mark is no part of the first key; the separator and
        // the header come from the first line that is not blank.
        for text in [
            "\u{feff}A\t3\nB\t4\n",
            "\u{feff}gene\ttoken\nA\t3\nB\t4\n",
            "\n \r\ngene\ttoken\nA\t3\n\nB\t4\n",
        ] {
            let m = GeneMap::<i32>::parse(text).unwrap();
            assert_eq!(
                (m.get("A"), m.get("B"), m.len()),
                (Some(3), Some(4), 2),
                "{text:?}"
            );
        }
        // A mark past the file's start is no key's.
        let e = GeneMap::<f64>::parse("\n\n\u{feff}m,0").unwrap_err();
        assert!(e.contains("line 3") && e.contains("byte order mark"), "{e}");
        // Only that line may be a header.
        let e = GeneMap::<i32>::parse("\nA\t3\ngene\ttoken\n").unwrap_err();
        assert!(e.contains("line 3"), "{e}");
    }

    #[test]
    fn medians_come_from_gene_statistics() {
        let table = crate::dataset::GeneTable {
            n_cells: vec![3, 0, 1],
            sum: vec![9, 0, 2],
            mean: vec![0.0; 3],
            var: vec![0.0; 3],
            norm_mean: vec![0.0; 3],
            norm_var: vec![0.0; 3],
            norm_median: vec![2.5, f64::NAN, 0.75],
        };
        let keys = ["A", "B", "C"].map(String::from);
        let bytes = table.to_parquet("gene_ids", &keys).unwrap();
        let m = GeneMap::from_gene_stats(&bytes).unwrap();
        assert_eq!(
            (m.get("A"), m.get("B"), m.get("C"), m.len()),
            (Some(2.5), None, Some(0.75), 2)
        );
        assert!(GeneMap::from_gene_stats(b"PAR1 not a file").is_err());
        assert!(GeneMap::from_gene_stats(&bytes[..bytes.len() / 2]).is_err());
    }

    #[test]
    fn refuses_bad_lines_and_duplicates() {
        let e = GeneMap::<i32>::parse("A,1\nB,x\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        let e = GeneMap::<i32>::parse("A,1\nB\n").unwrap_err();
        assert!(e.contains("two fields"), "{e}");
        let e = GeneMap::<i32>::parse("A,1\nA,2\n").unwrap_err();
        assert!(e.contains("twice"), "{e}");
        assert!(GeneMap::new([("A", 1), ("A", 2)]).is_err());
    }
}

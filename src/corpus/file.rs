//! The corpus file: a small JSON description of a corpus (its members'
//! locations, gene space, gene key and source column), which
//! [`Corpus::save`] writes and [`Corpus::open`] reads. The format is
//! documented in `docs/corpus-format.md`.
//!
//! Local member paths are written relative to the file's directory when they
//! can be, and relative paths are read against it, so a directory holding a
//! corpus file and its datasets can move as a whole. Parsing
//! ([`parse_corpus_file`]) is pure: it reads no file and opens no member.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::spec::CorpusSpec;
use super::{Corpus, GeneSpace};
use crate::dataset::OpenOptions;
use crate::error::{Error, Result};
use crate::storage::{resolved, write_atomically, Location};

/// The `format` field of every corpus file.
pub const CORPUS_FORMAT: &str = "deltacells-corpus";

/// The version of the corpus file this build writes and reads.
pub const CORPUS_VERSION: u64 = 1;

/// What is wrong with a corpus file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CorpusRule {
    /// Not JSON, or not a JSON object: most often an input file (an h5ad,
    /// an `.npz`) given where a dataset or a corpus file is read.
    #[error("not a JSON object ({0}); a dataset is a directory or a URL, and an input file (.h5ad, .npz, .h5, .mtx) is read after `deltacells convert IN OUT` has made one")]
    Json(String),
    /// The `format` field is missing or names another format.
    #[error("format is {0}, not \"deltacells-corpus\"")]
    Format(String),
    /// The file is a dataset's manifest: its directory is the dataset.
    #[error("the manifest of a dataset, not a corpus file: open the dataset's directory, {0}")]
    DatasetManifest(String),
    /// A version this build does not read.
    #[error("version {0} (this build reads version 1)")]
    Version(String),
    /// A field is missing, unknown or of the wrong kind.
    #[error("{0}")]
    Field(String),
}

fn field(msg: impl Into<String>) -> CorpusRule {
    CorpusRule::Field(msg.into())
}

/// Parses a corpus file's bytes; relative member paths are resolved against
/// `base` (the file's directory).
pub fn parse_corpus_file(bytes: &[u8], base: &Path) -> Result<CorpusSpec, CorpusRule> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| CorpusRule::Json(e.to_string()))?;
    let Value::Object(object) = value else {
        return Err(CorpusRule::Json(format!(
            "the top level is {}",
            kind(&value)
        )));
    };
    match object.get("format") {
        Some(Value::String(f)) if f == CORPUS_FORMAT => {}
        Some(Value::String(f)) if f == crate::format::manifest::FORMAT => {
            let dir = if base.as_os_str().is_empty() {
                Path::new(".")
            } else {
                base
            };
            return Err(CorpusRule::DatasetManifest(dir.display().to_string()));
        }
        other => return Err(CorpusRule::Format(shown(other))),
    }
    match object.get("version") {
        Some(v) if v.as_u64() == Some(CORPUS_VERSION) => {}
        other => return Err(CorpusRule::Version(shown(other))),
    }
    const KNOWN: [&str; 6] = [
        "format",
        "version",
        "members",
        "genes",
        "gene_key",
        "source_column",
    ];
    if let Some(unknown) = object.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(field(format!("unknown field {unknown:?}")));
    }
    let members = match object.get("members") {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, m)| match m {
                Value::String(s) if !s.is_empty() => Ok(resolve(s, base)),
                Value::String(_) => Err(field(format!("members[{i}] is empty"))),
                other => Err(field(format!(
                    "members[{i}] is {}, not a location",
                    kind(other)
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(Value::Array(_)) => return Err(field("members is empty")),
        other => return Err(field(format!("members is {}, not a list", shown(other)))),
    };
    let genes = match object.get("genes") {
        None => GeneSpace::Union,
        Some(Value::String(s)) if s == "union" => GeneSpace::Union,
        Some(Value::String(s)) if s == "intersection" => GeneSpace::Intersection,
        Some(Value::Array(items)) => {
            let keys = items
                .iter()
                .map(|k| k.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| field("genes: a list of genes holds only strings"))?;
            GeneSpace::listed(keys).map_err(|e| field(format!("genes: {e}")))?
        }
        Some(other) => {
            return Err(field(format!(
                "genes is {}, not \"union\", \"intersection\" or a list",
                kind(other)
            )))
        }
    };
    let text = |name: &str| match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Err(field(format!("{name} is empty"))),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(field(format!("{name} is {}, not a name", kind(other)))),
    };
    let gene_key = text("gene_key")?;
    let mut spec = CorpusSpec::new(members)
        .with_genes(genes)
        .with_gene_key(gene_key);
    if let Some(source) = text("source_column")? {
        spec = spec.with_source_column(source);
    }
    Ok(spec)
}

/// The JSON text of `spec` as a corpus file in directory `base`.
pub fn corpus_file_text(spec: &CorpusSpec, base: &Path) -> String {
    let mut object = Map::new();
    object.insert("format".into(), json!(CORPUS_FORMAT));
    object.insert("version".into(), json!(CORPUS_VERSION));
    let members: Vec<Value> = spec
        .locations
        .iter()
        .map(|l| Value::String(relative(l, base)))
        .collect();
    object.insert("members".into(), Value::Array(members));
    let genes = match &spec.genes {
        GeneSpace::Union => json!("union"),
        GeneSpace::Intersection => json!("intersection"),
        GeneSpace::Listed(keys) => json!(keys),
    };
    object.insert("genes".into(), genes);
    object.insert("gene_key".into(), json!(spec.gene_key));
    object.insert("source_column".into(), json!(spec.source_column));
    let mut text = serde_json::to_string_pretty(&Value::Object(object)).expect("JSON of values");
    text.push('\n');
    text
}

impl Corpus {
    /// Opens the corpus a corpus file describes, with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Corpus> {
        Corpus::open_with(path, OpenOptions::default())
    }

    /// Opens the corpus a corpus file describes (see [`Corpus::open_spec_with`]).
    pub fn open_with(path: impl AsRef<Path>, options: OpenOptions) -> Result<Corpus> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        let base = path.parent().unwrap_or(Path::new(""));
        let spec = parse_corpus_file(&bytes, base).map_err(|rule| Error::CorpusFile {
            file: path.display().to_string(),
            rule,
        })?;
        Corpus::open_spec_with(spec, options)
    }

    /// Writes this corpus's description to `path` (atomically: a temporary
    /// file renamed over it). Adding a dataset to a corpus is converting it
    /// alone and saving a corpus that lists it too.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        save_spec(self.spec(), path.as_ref())
    }
}

/// Writes `spec` as the corpus file `path`, atomically: a reader sees the
/// old file or the new one whole, and two writers of one path (threads or
/// processes) each write a temporary file of their own.
pub fn save_spec(spec: &CorpusSpec, path: &Path) -> Result<()> {
    let base = path.parent().unwrap_or(Path::new(""));
    let text = corpus_file_text(spec, base);
    write_atomically(path, |file| file.write_all(text.as_bytes()))
}

/// A member location read from a file in `base`: URLs and absolute paths as
/// they are, relative paths joined to `base`.
fn resolve(location: &str, base: &Path) -> String {
    match Location::parse(location) {
        Location::Local(p) if p.is_relative() => base.join(p).display().to_string(),
        _ => location.to_string(),
    }
}

/// A member location as a file in `base` writes it: a local path below
/// `base` or beside it (below its parent) relative to `base`, any other as
/// an absolute path, URLs as they are. Paths are compared as the file system
/// resolves them where they exist (symbolic links followed): a reader joins
/// `..` to `base` through its links, so a relative path worked out by name
/// alone named another directory when `base` was reached through a link.
fn relative(location: &str, base: &Path) -> String {
    let Location::Local(path) = Location::parse(location) else {
        return location.to_string();
    };
    let (path, base) = (resolved(&path), resolved(base));
    let common = path
        .components()
        .zip(base.components())
        .take_while(|(a, b)| a == b)
        .count();
    let ups = base.components().count() - common;
    if ups > 1 || common <= 1 {
        return path.display().to_string();
    }
    let mut out = PathBuf::new();
    if ups == 1 {
        out.push("..");
    }
    for c in path.components().skip(common) {
        out.push(c);
    }
    if out.as_os_str().is_empty() {
        ".".into()
    } else {
        out.display().to_string()
    }
}

/// A JSON value's kind, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A field's value for messages (`missing` when absent).
fn shown(v: Option<&Value>) -> String {
    match v {
        None => "missing".into(),
        Some(v) => {
            let text = v.to_string();
            if text.chars().count() > 40 {
                format!("{}...", text.chars().take(40).collect::<String>())
            } else {
                text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_round_trips_with_paths_relative_to_its_directory() {
        let base = Path::new("/data/corpora");
        let spec = CorpusSpec::new([
            "/data/corpora/a.dc",
            "/data/plates/b.dc",
            "s3://bucket/c.dc",
            "/archive/2024/d.dc",
        ])
        .with_genes(GeneSpace::listed(vec!["g1".into(), "g0".into()]).unwrap())
        .with_gene_key(Some("gene_ids".into()));
        let text = corpus_file_text(&spec, base);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value["members"],
            json!([
                "a.dc",
                "../plates/b.dc",
                "s3://bucket/c.dc",
                "/archive/2024/d.dc"
            ])
        );
        let back = parse_corpus_file(text.as_bytes(), base).unwrap();
        assert_eq!(back.genes, spec.genes);
        assert_eq!(back.gene_key, spec.gene_key);
        assert_eq!(back.source_column, "dataset_id");
        assert_eq!(
            back.locations,
            [
                "/data/corpora/a.dc",
                "/data/corpora/../plates/b.dc",
                "s3://bucket/c.dc",
                "/archive/2024/d.dc"
            ]
        );
    }

    #[test]
    fn a_file_saved_through_a_symbolic_link_names_the_members_it_was_saved_with() {
        // root/link -> root/deep/x. By name, root/A.dc is "../A.dc" from
        // root/link; read back, root/link/.. is root/deep.
        let root =
            std::env::temp_dir().join(format!("deltacells-corpus-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("deep/x")).unwrap();
        std::fs::create_dir_all(root.join("A.dc")).unwrap();
        std::fs::create_dir_all(root.join("deep/x/B.dc")).unwrap();
        std::os::unix::fs::symlink(root.join("deep/x"), root.join("link")).unwrap();
        let base = root.join("link");
        let members = [root.join("A.dc"), root.join("link/B.dc")];
        let spec = CorpusSpec::new(members.iter().map(|m| m.display().to_string()));
        let text = corpus_file_text(&spec, &base);
        let back = parse_corpus_file(text.as_bytes(), &base).unwrap();
        for (saved, read) in members.iter().zip(&back.locations) {
            assert_eq!(
                std::fs::canonicalize(saved).unwrap(),
                std::fs::canonicalize(read).unwrap(),
                "{text}"
            );
        }
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let parse = |text: &str| parse_corpus_file(text.as_bytes(), Path::new("d")).unwrap_err();
        assert!(matches!(parse("{"), CorpusRule::Json(_)));
        assert!(matches!(parse("[]"), CorpusRule::Json(_)));
        assert!(matches!(parse(r#"{"format":"x"}"#), CorpusRule::Format(_)));
        assert!(matches!(
            parse(r#"{"format":"deltacells-dataset","version":1}"#),
            CorpusRule::DatasetManifest(_)
        ));
        let head = r#""format":"deltacells-corpus","version""#;
        assert!(matches!(
            parse(&format!("{{{head}:2,\"members\":[\"a\"]}}")),
            CorpusRule::Version(v) if v == "2"
        ));
        for (body, says) in [
            (r#""members":[]"#, "members is empty"),
            (r#""members":"a""#, "not a list"),
            (r#""members":["a", 3]"#, "members[1]"),
            (r#""members":["a"],"genes":"all""#, "genes is a string"),
            (r#""members":["a"],"genes":[]"#, "empty"),
            (r#""members":["a"],"genes":["x","x"]"#, "twice"),
            (r#""members":["a"],"gene_key":4"#, "gene_key"),
            (r#""members":["a", ""]"#, "members[1] is empty"),
            (
                r#""members":["a"],"source_column":"""#,
                "source_column is empty",
            ),
            (r#""members":["a"],"extra":1"#, "unknown field \"extra\""),
        ] {
            let err = parse(&format!("{{{head}:1,{body}}}"));
            assert!(err.to_string().contains(says), "{body}: {err}");
        }
        let ok = parse_corpus_file(
            format!("{{{head}:1,\"members\":[\"a\",\"/abs/b\"]}}").as_bytes(),
            Path::new("d"),
        )
        .unwrap();
        assert_eq!(ok.locations, ["d/a", "/abs/b"]);
        assert_eq!(ok.genes, GeneSpace::Union);
    }
}

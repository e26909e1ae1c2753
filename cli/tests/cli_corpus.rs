//! The command line on a corpus file: `info` (the corpus's shape, gene
//! space, obs columns and a line per member; a corpus file naming a missing
//! dataset fails naming it), `cat` (every cell's counts in the vocabulary's
//! columns, checked against what each member was written with) and
//! `bench --json`.

mod common;
#[path = "../../tests/corpus_common/mod.rs"]
mod corpus_common;

use common::run_cli as deltacells;
use corpus_common::{write_member, ObsPlan, Scratch, Written};
use deltacells::corpus::CorpusSpec;
use deltacells::Corpus;

#[test]
fn info_describes_a_corpus_and_names_a_missing_member() {
    let dir = Scratch::new("cli-corpus");
    let plan = ObsPlan {
        categories: vec![("cell_type", vec!["T", "B"])],
        floats: vec![],
    };
    let a = write_member(
        &dir.path().join("a.dc"),
        &["g0", "g1"],
        30,
        16,
        false,
        &plan,
        1,
    );
    let b = write_member(
        &dir.path().join("b.dc"),
        &["g2", "g1"],
        20,
        16,
        false,
        &plan,
        2,
    );
    let spec = CorpusSpec::new([
        a.location.display().to_string(),
        b.location.display().to_string(),
    ]);
    let file = dir.path().join("ab.json");
    Corpus::open_spec(spec).unwrap().save(&file).unwrap();
    let (ok, out, err) = deltacells(&["info", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.contains("corpus of 2 datasets, 50 cells x 3 genes"),
        "{out}"
    );
    assert!(out.contains("obs: cell_type, dataset_id"), "{out}");
    assert!(
        out.contains("member 1 b: 20 cells x 2 genes, cells from 30"),
        "{out}"
    );

    std::fs::remove_dir_all(&b.location).unwrap();
    let (ok, _, err) = deltacells(&["info", file.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("b.dc"), "{err}");
}

/// Two members with different genes in different orders (the second's
/// sorted by totals), saved as a corpus file; the file and the members.
fn two_members(dir: &Scratch) -> (std::path::PathBuf, Vec<Written>) {
    let plan = ObsPlan {
        categories: vec![("cell_type", vec!["T", "B", "NK"])],
        floats: vec!["score"],
    };
    let a = write_member(
        &dir.path().join("a.dc"),
        &["g0", "g1", "g2"],
        40,
        16,
        false,
        &plan,
        3,
    );
    let b = write_member(
        &dir.path().join("b.dc"),
        &["g3", "g1", "g0", "g4"],
        30,
        8,
        true,
        &plan,
        4,
    );
    let spec = CorpusSpec::new([
        a.location.display().to_string(),
        b.location.display().to_string(),
    ]);
    let file = dir.path().join("ab.json");
    Corpus::open_spec(spec).unwrap().save(&file).unwrap();
    (file, vec![a, b])
}

/// `(cell, column, count)` of every nonzero of `cat`'s TSV output.
fn tsv_entries(out: &str) -> Vec<(u64, u32, u32)> {
    out.lines()
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 3, "{line}");
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn cat_prints_a_corpus_in_the_vocabulary_s_columns() {
    let dir = Scratch::new("cli-corpus-cat");
    let (file, members) = two_members(&dir);
    let corpus = Corpus::open(&file).unwrap();
    let vocabulary = corpus.var_names().to_vec();
    // The expected entries, from what each member was written with.
    let mut want = Vec::new();
    let mut cell = 0u64;
    for m in &members {
        for counts in &m.cells {
            for (column, gene) in vocabulary.iter().enumerate() {
                if let Some(&v) = counts.get(gene) {
                    want.push((cell, column as u32, v));
                }
            }
            cell += 1;
        }
    }
    let path = file.to_str().unwrap();
    let (ok, out, err) = deltacells(&["cat", path, "--cells", "0:70"]);
    assert!(ok, "{err}");
    assert_eq!(tsv_entries(&out), want);

    // `verify` checks each member whole; a command that reads datasets only
    // says the corpus file is a file, not a dataset directory.
    let (ok, out, err) = deltacells(&["verify", path]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), members.len(), "{out}");
    assert!(out.lines().all(|l| l.contains(": ok (")), "{out}");
    let (ok, _, err) = deltacells(&["obs", path]);
    assert!(
        !ok && err.contains("a file, not a dataset directory"),
        "{err}"
    );

    // Spans across the members' edge, single cells, and genes by name,
    // each printed under its own column of the vocabulary.
    let (ok, out, err) = deltacells(&["cat", path, "--cells", "38:42,69", "--genes", "g4,g0"]);
    assert!(ok, "{err}");
    let g4 = vocabulary.iter().position(|g| g == "g4").unwrap() as u32;
    let mut picked: Vec<(u64, u32, u32)> = want
        .iter()
        .filter(|(c, _, _)| (38..42).contains(c) || *c == 69)
        .filter(|&&(_, g, _)| g == g4 || g == 0)
        .copied()
        .collect();
    // A row's entries in column order, as its stored order need not be.
    let mut got = tsv_entries(&out);
    got.sort_by_key(|&(c, g, _)| (c, g));
    picked.sort_by_key(|&(c, g, _)| (c, g));
    assert_eq!(got, picked);

    // Matrix Market: the size line counts the whole selection.
    let (ok, out, err) = deltacells(&["cat", path, "--cells", "0:70", "--format", "mtx"]);
    assert!(ok, "{err}");
    let size = out.lines().find(|l| !l.starts_with('%')).unwrap();
    assert_eq!(size, format!("70 {} {}", vocabulary.len(), want.len()));

    let (ok, _, err) = deltacells(&["cat", path, "--genes", "NOT_A_GENE"]);
    assert!(!ok);
    assert!(err.contains("NOT_A_GENE"), "{err}");
}

#[test]
fn bench_json_on_a_corpus_file_reports_the_corpus() {
    let dir = Scratch::new("cli-corpus-bench");
    let (file, _) = two_members(&dir);
    let (ok, out, err) = deltacells(&[
        "bench",
        file.to_str().unwrap(),
        "--reps",
        "1",
        "--threads",
        "2",
        "--batch-size",
        "16",
        "--random",
        "--json",
    ]);
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    let dataset = &report["dataset"];
    assert_eq!(dataset["datasets"], 2);
    assert_eq!(dataset["cells"], 70);
    assert_eq!(dataset["genes"], 5);
    let scans = report["full_scan"].as_array().unwrap();
    assert!(!scans.is_empty());
    assert!(scans
        .iter()
        .all(|s| s["cells_per_s"].as_f64().unwrap() > 0.0));
    for key in ["batches", "random_batches"] {
        assert!(report[key]["cells_per_s"].as_f64().unwrap() > 0.0, "{key}");
    }
    assert!(report["build"]["zstd"].is_string());
}

#[test]
fn stats_of_a_corpus_cover_its_vocabulary() {
    use arrow_array::{StringArray, UInt64Array};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let dir = Scratch::new("cli-corpus-stats");
    let (file, members) = two_members(&dir);
    let vocabulary = Corpus::open(&file).unwrap().var_names().to_vec();
    let out = dir.path().join("stats.parquet");
    let (ok, stdout, err) = deltacells(&[
        "stats",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        stdout.contains(&format!("{} genes over 70 cells", vocabulary.len())),
        "{stdout}"
    );
    let bytes = bytes::Bytes::from(std::fs::read(&out).unwrap());
    let batch = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let column = |name: &str| batch.column_by_name(name).unwrap().clone();
    let genes = column("gene");
    let genes = genes.as_any().downcast_ref::<StringArray>().unwrap();
    let sums = column("sum");
    let sums = sums.as_any().downcast_ref::<UInt64Array>().unwrap();
    for (g, name) in vocabulary.iter().enumerate() {
        assert_eq!(genes.value(g), name);
        let want: u64 = members
            .iter()
            .flat_map(|m| &m.cells)
            .filter_map(|cell| cell.get(name))
            .map(|&c| u64::from(c))
            .sum();
        assert_eq!(sums.value(g), want, "gene {name}");
    }
    let (ok, _, err) = deltacells(&["stats", file.to_str().unwrap(), "--gene-key", "ids"]);
    assert!(!ok && err.contains("keyed"), "{err}");
    // --out never replaces the corpus file nor lands in a member (through a
    // directory not made yet and `..` too); the file is left as it was.
    let before = std::fs::read(&file).unwrap();
    let missing = dir.path().join("missing/../a.dc/stats.parquet");
    for out in [file.clone(), dir.path().join("a.dc/stats.parquet"), missing] {
        let (ok, _, err) = deltacells(&[
            "stats",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            !ok && err.contains("what it describes"),
            "{}: {err}",
            out.display()
        );
    }
    assert_eq!(std::fs::read(&file).unwrap(), before);
    assert!(!dir.path().join("missing").exists());
    assert!(!dir.path().join("a.dc/stats.parquet").exists());
}

//! The dataset commands end to end: `verify` exit status and named rules on
//! the corpus, `cat` output, `info`, `convert`.

mod common;

use common::{expected_csr, run_cli as deltacells, run_cli_code, testdata};

#[test]
fn verify_exits_non_zero_and_names_the_rule_on_every_rejected_case() {
    let dir = testdata().join("deltacells/corpus");
    // Words of each case's rule that the message must contain. Exhaustive: a
    // new corpus case fails here until its rule is listed.
    let words = |name: &str| -> &'static str {
        match name {
            "manifest_missing" => "no manifest.json",
            "manifest_wrong_format" => "format",
            "manifest_version_string" => "version",
            "manifest_list_length_mismatch" => "entries",
            "manifest_obs_fields_missing" => "obs_",
            "manifest_empty_last_tile" => "last tile",
            "tile_bytes_mismatch" => "bytes, the manifest says",
            "tile_corrupt" => "CRC-32",
            "gene_order_missing" | "gene_order_not_permutation" => "gene_order.npy",
            "var_names_wrong_count" => "var_names.txt",
            "var_table_missing" => "var.parquet is missing",
            "obs_schema_wrong_format" => "schema format",
            "obs_category_too_many_for_int8" => "int8 codes cannot address",
            "obs_shard_bytes_mismatch" => "obs_shard_bytes[0]",
            "obs_fingerprint_mismatch" => "obs_fingerprint",
            "obs_shard_count_mismatch" => "obs_shard_bytes has 3 entries",
            "obs_row_group_rows_mismatch" => "row group 0 has 17 rows",
            "obs_column_missing" => "columns are",
            "obs_category_code_out_of_range" => "category code",
            "obs_unexpected" => "has_obs is false",
            other => panic!("corpus case {other}: list the words its rejection must contain"),
        }
    };
    let mut rejected = 0;
    for case in common::corpus_cases("dataset") {
        let name = case["name"].as_str().unwrap();
        let path = dir.join(case["path"].as_str().unwrap());
        let (code, _, stderr) = run_cli_code(&["verify", path.to_str().unwrap()]);
        match case["expect"].as_str().unwrap() {
            "accept" => assert_eq!(code, Some(0), "{name}: {stderr}"),
            _ => {
                // 1 is a refusal; 101 would be a panic, and no code a signal.
                assert_eq!(code, Some(1), "{name}: not a clean refusal: {stderr}");
                assert!(
                    stderr.contains(words(name)),
                    "{name}: {stderr:?} does not name the rule"
                );
                rejected += 1;
            }
        }
    }
    assert!(rejected >= 20, "only {rejected} rejected cases checked");
}

#[test]
fn cat_prints_global_cells_in_order_and_info_summarises() {
    let ds = testdata().join("deltacells/datasets/exceptions_70k");
    let want = expected_csr(&testdata().join("deltacells/datasets/exceptions_70k.expected.npz"));
    let (ok, stdout, stderr) = deltacells(&["cat", ds.to_str().unwrap(), "--cells", "126:131"]);
    assert!(ok, "{stderr}");
    let mut lines = stdout.lines();
    for cell in 126..131usize {
        for j in want.indptr[cell] as usize..want.indptr[cell + 1] as usize {
            let line = format!("{cell}\t{}\t{}", want.indices[j], want.values[j]);
            assert_eq!(lines.next(), Some(line.as_str()));
        }
    }
    assert_eq!(lines.next(), None);
    let (ok, stdout, _) = deltacells(&[
        "cat",
        ds.to_str().unwrap(),
        "--cells",
        "0",
        "--format",
        "mtx",
    ]);
    assert!(ok);
    let n0 = (want.indptr[1] - want.indptr[0]) as usize;
    assert!(stdout.starts_with("%%MatrixMarket matrix coordinate integer general\n"));
    assert!(
        stdout.contains(&format!("\n1 70000 {n0}\n")),
        "{}",
        &stdout[..200.min(stdout.len())]
    );
    let (ok, stdout, _) = deltacells(&["info", "-v", ds.to_str().unwrap()]);
    assert!(ok);
    assert!(
        stdout.contains("300 cells x 70000 genes") && stdout.contains("kernel backend:"),
        "{stdout}"
    );
    let (ok, _, stderr) = deltacells(&["cat", ds.to_str().unwrap(), "--genes", "NOT_A_GENE"]);
    assert!(!ok && stderr.contains("NOT_A_GENE"), "{stderr}");

    // With --genes, TSV still names each gene by its own column.
    let (ok, stdout, stderr) = deltacells(&[
        "cat",
        ds.to_str().unwrap(),
        "--cells",
        "126:131",
        "--genes",
        "69999,3",
    ]);
    assert!(ok, "{stderr}");
    let mut want_kept = Vec::new();
    for cell in 126..131usize {
        for j in want.indptr[cell] as usize..want.indptr[cell + 1] as usize {
            if [69_999, 3].contains(&want.indices[j]) {
                want_kept.push(format!("{cell}\t{}\t{}", want.indices[j], want.values[j]));
            }
        }
    }
    let mut got: Vec<&str> = stdout.lines().collect();
    got.sort_unstable();
    want_kept.sort_unstable();
    assert_eq!(got, want_kept);
    // Spans past the last cell or reversed are refused, not clipped to
    // nothing; open ends and spaces are taken.
    for spec in ["1000:2000", "299:301", "300", "5:2", "18446744073709551615"] {
        let (ok, _, stderr) = deltacells(&["cat", ds.to_str().unwrap(), "--cells", spec]);
        assert!(!ok && stderr.contains("--cells"), "{spec}: {stderr}");
    }
    let (ok, stdout, stderr) = deltacells(&["cat", ds.to_str().unwrap(), "--cells", " 299 , 298:"]);
    assert!(ok, "{stderr}");
    let cells: std::collections::BTreeSet<&str> = stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert!(cells.iter().all(|c| ["298", "299"].contains(c)) && !cells.is_empty());
}

/// Copies a dataset directory (files and one level of subdirectories) to a
/// fresh temporary directory.
fn copy_dataset(from: &std::path::Path, name: &str) -> std::path::PathBuf {
    let to = std::env::temp_dir().join(format!("deltacells-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&to);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            for inner in std::fs::read_dir(&path).unwrap() {
                let inner = inner.unwrap().path();
                std::fs::copy(&inner, target.join(inner.file_name().unwrap())).unwrap();
            }
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
    to
}

#[test]
fn open_and_verify_refuse_a_gene_order_that_is_not_int32() {
    use deltacells::format::npy::{Array, Dtype};
    let source = testdata().join("deltacells/datasets/exceptions_70k");
    let order = Array::parse(&std::fs::read(source.join("gene_order.npy")).unwrap()).unwrap();
    assert_eq!(order.dtype, Dtype::I32);
    let values = order.to_i64().unwrap();
    for (dtype, data) in [
        (
            Dtype::I64,
            values
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>(),
        ),
        (
            Dtype::U32,
            values
                .iter()
                .flat_map(|&v| (v as u32).to_le_bytes())
                .collect(),
        ),
    ] {
        let dir = copy_dataset(&source, &format!("gene-order-{dtype:?}"));
        let wrong = Array {
            dtype,
            shape: order.shape.clone(),
            data,
        };
        std::fs::write(dir.join("gene_order.npy"), wrong.to_npy()).unwrap();
        let err = deltacells::dataset::Dataset::open(&dir).expect_err("refused");
        assert!(
            matches!(
                err,
                deltacells::Error::Dataset(deltacells::format::manifest::DatasetRule::GeneOrder(ref m)) if m.contains("int32")
            ),
            "{dtype:?}: {err}"
        );
        let (code, _, stderr) = run_cli_code(&["verify", dir.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains("gene_order.npy") && stderr.contains("int32"),
            "{stderr}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn bench_json_and_report_carry_every_figure_of_the_tables() {
    let ds = testdata().join("deltacells/datasets/exceptions_70k");
    let report_dir =
        std::env::temp_dir().join(format!("deltacells-bench-report-{}", std::process::id()));
    let (ok, stdout, stderr) = deltacells(&[
        "bench",
        ds.to_str().unwrap(),
        "--reps",
        "1",
        "--threads",
        "2",
        "--batch-size",
        "16",
        "--random",
        "--json",
        "--report",
        report_dir.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(report["dataset"]["cells"], 300);
    for section in ["tile_decode", "full_scan", "concurrent_readers"] {
        let rows = report[section].as_array().unwrap();
        assert!(!rows.is_empty(), "{section}");
    }
    // Each ratio to zstd-only, and each model-ready kind's to plain CSR
    // batches, comes with the least and greatest of its rounds' ratios,
    // between which the ratio of the best times lies.
    for (section, key) in [
        ("/tile_decode", "vs_zstd_only"),
        ("/full_scan", "vs_zstd_only"),
        ("/model_batches/kinds", "vs_plain_csr"),
    ] {
        let rows = report.pointer(section).and_then(|s| s.as_array()).unwrap();
        assert!(!rows.is_empty(), "{section}");
        for row in rows {
            let best = row[key].as_f64().unwrap();
            let range = row[format!("{key}_each_round")].as_array().unwrap();
            let range: Vec<f64> = range.iter().map(|v| v.as_f64().unwrap()).collect();
            let within = range.len() == 2 && range[0] <= best && best <= range[1];
            assert!(within, "{section}: {row}");
        }
    }
    let readers = report["concurrent_readers"].as_array().unwrap();
    assert_eq!(readers[1]["threads"], 2);
    assert!(readers
        .iter()
        .all(|r| r["cells_per_s"].as_f64().unwrap() > 0.0));
    for key in ["batches", "random_batches"] {
        assert!(report[key]["cells_per_s"].as_f64().unwrap() > 0.0, "{key}");
    }
    assert!(report["build"]["zstd"].is_string());
    // The report: the same JSON, the tables, and every chart it links exists as a PNG.
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report_dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(saved, report);
    let md = std::fs::read_to_string(report_dir.join("report.md")).unwrap();
    for heading in [
        "## Single-thread tile decode",
        "## Full scan",
        "## Reads by path",
        "## Model-ready batches",
        "## Charts",
    ] {
        assert!(md.contains(heading), "{heading}\n{md}");
    }
    for kind in report["model_batches"]["kinds"].as_array().unwrap() {
        let row = format!("| {} |", kind["kind"].as_str().unwrap());
        assert!(md.contains(&row), "{row}\n{md}");
    }
    assert!(md.contains("concurrent readers: 2 thread(s)"), "{md}");
    assert!(md.contains("| vs zstd-only | (each round) |"), "{md}");
    let charts: Vec<&str> = md
        .lines()
        .filter_map(|l| l.strip_prefix("![")?.split_once("](")?.1.strip_suffix(')'))
        .collect();
    assert!(
        !charts.is_empty() || md.contains("chart not drawn:"),
        "charts drawn, or the reason they were not: {md}"
    );
    for chart in charts {
        let png = std::fs::read(report_dir.join(chart)).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{chart}");
    }
    std::fs::remove_dir_all(report_dir).unwrap();
}

/// `bench --loop` with a batch workload runs whole epochs (at least one),
/// each delivering every cell once, and says so.
#[test]
fn bench_loop_batch_workloads_run_whole_epochs() {
    let ds = testdata().join("deltacells/datasets/small_obs");
    for workload in [
        "batches",
        "geneformer",
        "geneformer-own",
        "scgpt",
        "normalized",
        "selected",
        "dense",
    ] {
        let (ok, stdout, stderr) = deltacells(&[
            "bench",
            ds.to_str().unwrap(),
            "--loop",
            workload,
            "--seconds",
            "0",
            "--batch-size",
            "64",
        ]);
        assert!(ok, "{workload}: {stderr}");
        assert!(
            stdout.starts_with(&format!("{workload} on 1 thread(s)"))
                && stdout.contains(": 1 epochs (700 cells) in "),
            "{stdout}"
        );
    }
    // Counts of zero measure nothing and are refused by the parser (exit 2).
    for option in ["--reps", "--threads", "--window", "--batch-size"] {
        let args = ["bench", ds.to_str().unwrap(), option, "0"];
        let (code, _, stderr) = run_cli_code(&args);
        assert_eq!(code, Some(2), "{option}: {stderr}");
        assert!(stderr.contains("0 is not in 1.."), "{option}: {stderr}");
    }
}

/// `convert A B OUT` builds one dataset from the two shared datasets, a gene
/// list keeps exactly its genes, and `--plan-only` prints the plan and writes
/// no tile.
#[test]
fn convert_of_several_inputs_builds_one_dataset() {
    let data = testdata().join("deltacells/datasets");
    let (a, b) = (data.join("small_obs"), data.join("exceptions_70k"));
    let dir = std::env::temp_dir().join(format!("dc-cli-build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("both");
    let paths = [
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        out.to_str().unwrap(),
    ];
    let (ok, stdout, stderr) = deltacells(&["convert", paths[0], paths[1], paths[2], "-q"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("1000 cells x"), "{stdout}");
    let (ok, stdout, _) = deltacells(&["obs", out.to_str().unwrap()]);
    assert!(ok && stdout.contains("dataset_id"), "{stdout}");

    // The first three genes of the first input, as a gene list.
    let names = std::fs::read_to_string(a.join("var_names.txt")).unwrap();
    let list: Vec<&str> = names.lines().take(3).collect();
    let file = dir.join("genes.txt");
    std::fs::write(&file, list.join("\n") + "\n").unwrap();
    let listed = dir.join("listed");
    let (ok, _, stderr) = deltacells(&[
        "convert",
        paths[0],
        paths[1],
        listed.to_str().unwrap(),
        "--genes",
        file.to_str().unwrap(),
        "--keep-gene-order",
        "-q",
    ]);
    assert!(ok, "{stderr}");
    let written = std::fs::read_to_string(listed.join("var_names.txt")).unwrap();
    assert_eq!(written.lines().collect::<Vec<_>>(), list);

    let planned = dir.join("planned");
    let (ok, stdout, stderr) = deltacells(&[
        "convert",
        paths[0],
        paths[1],
        planned.to_str().unwrap(),
        "--plan-only",
        "-q",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("{\"format\":\"deltacells-build-plan\""));
    assert!(!planned.join("manifest.json").exists() && !planned.join("tiles").exists());

    let (ok, _, stderr) = deltacells(&["convert", paths[0], paths[1], paths[2], "-q"]);
    assert!(
        !ok && stderr.contains("already holds a dataset"),
        "{stderr}"
    );
    // A size of 0 is refused, not taken as 1, and nothing is written.
    let zero = dir.join("zero");
    for option in ["--chunks", "--tile-size", "--tiles-per-task"] {
        let (ok, _, stderr) = deltacells(&[
            "convert",
            paths[0],
            zero.to_str().unwrap(),
            option,
            "0",
            "-q",
        ]);
        assert!(
            !ok && stderr.contains("must be at least 1"),
            "{option}: {stderr}"
        );
        assert!(!zero.join("manifest.json").exists());
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn stats_writes_gene_stats_parquet_with_the_column_sums() {
    use arrow_array::{Array, UInt64Array};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let ds = testdata().join("deltacells/datasets/exceptions_70k");
    // `stats DATASET --out OUT`: (success, stdout, stderr).
    let stats_to = |dataset: &std::path::Path, out: &std::path::Path| {
        deltacells(&[
            "stats",
            dataset.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let want = expected_csr(&testdata().join("deltacells/datasets/exceptions_70k.expected.npz"));
    let out = std::env::temp_dir().join(format!(
        "deltacells-cli-{}-stats.parquet",
        std::process::id()
    ));
    let (ok, stdout, stderr) = stats_to(&ds, &out);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("70000 genes over 300 cells"), "{stdout}");
    let bytes = bytes::Bytes::from(std::fs::read(&out).unwrap());
    std::fs::remove_file(&out).ok();
    let batch = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .with_batch_size(70_000)
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let mut sums = vec![0u64; 70_000];
    for (&g, &c) in want.indices.iter().zip(&want.values) {
        sums[g as usize] += u64::from(c as u32);
    }
    let col = batch.column_by_name("sum").unwrap();
    let got = col.as_any().downcast_ref::<UInt64Array>().unwrap().values();
    assert!(
        got[..] == sums[..],
        "the sums differ from the matrix's column sums"
    );
    assert_eq!((batch.num_rows(), batch.num_columns()), (70_000, 8));
    let (ok, _, stderr) = deltacells(&["stats", ds.to_str().unwrap(), "--gene-key", "nope"]);
    assert!(!ok && stderr.contains("nope"), "{stderr}");
    // A directory for --out is refused before the pass over the cells, and
    // a file in a directory not made yet is written there whole.
    let (ok, _, stderr) = stats_to(&ds, &ds);
    assert!(
        !ok && stderr.contains("is a directory, not a file"),
        "{stderr}"
    );
    let fresh = std::env::temp_dir().join(format!("dc-cli-stats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    let nested = fresh.join("stats/genes.parquet");
    let (ok, _, stderr) = stats_to(&ds, &nested);
    assert!(ok, "{stderr}");
    assert_eq!(
        std::fs::read_dir(nested.parent().unwrap()).unwrap().count(),
        1
    );
    // The temporary file of a run killed while it wrote is removed by the
    // next (it had stayed beside the output); a live writer's stays.
    let gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    let mut gone = gone;
    gone.wait().unwrap();
    let left = nested.with_file_name(format!(".genes.parquet.{dead}-0a-0.tmp"));
    let live = nested.with_file_name(format!(".genes.parquet.{}-0b-0.tmp", std::process::id()));
    for f in [&left, &live] {
        std::fs::write(f, b"partial").unwrap();
    }
    let (ok, _, stderr) = stats_to(&ds, &nested);
    assert!(ok, "{stderr}");
    assert!(!left.exists() && live.exists());
    std::fs::remove_file(&live).unwrap();
    // A link is written through (the file it names replaced, the link
    // kept); a FIFO, a link to nothing and a file inside the dataset are
    // refused: the rename had put a regular file in place of each (a
    // device too, run as root), or over the dataset's manifest.
    let real = fresh.join("real.parquet");
    let link = fresh.join("link.parquet");
    std::fs::write(&real, "old").unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (ok, _, stderr) = stats_to(&ds, &link);
    assert!(ok, "{stderr}");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(&std::fs::read(&real).unwrap()[..4], b"PAR1");
    let fifo = fresh.join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let dangling = fresh.join("dangling.parquet");
    std::os::unix::fs::symlink(fresh.join("nothing"), &dangling).unwrap();
    let copy = copy_dataset(&ds, "stats-copy");
    let manifest = copy.join("manifest.json");
    for (out, want) in [
        (&fifo, "not a regular file"),
        (&dangling, "a link to nothing"),
        (&manifest, "lies inside, what it describes"),
    ] {
        let (ok, _, stderr) = stats_to(&copy, out);
        assert!(!ok && stderr.contains(want), "{}: {stderr}", out.display());
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    let (ok, _, stderr) = deltacells(&["verify", copy.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    std::fs::remove_dir_all(fresh).unwrap();
    std::fs::remove_dir_all(copy).unwrap();
}

/// The demo runs end to end on a handful of genes (the generator's gene
/// programmes overflowed their weights below 450 genes and panicked), and
/// refuses sizes of zero before writing anything.
#[test]
fn demo_runs_on_a_handful_of_genes_and_refuses_empty_sizes() {
    let dir = std::env::temp_dir().join(format!("dc-cli-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("tiny");
    let (code, stdout, stderr) = run_cli_code(&[
        "demo",
        "--cells",
        "40",
        "--genes",
        "3",
        "--tile-size",
        "16",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("every chunk decoded and checked"),
        "{stdout}"
    );
    for option in ["--cells", "--genes", "--tile-size", "--chunks"] {
        let fresh = dir.join(option.trim_start_matches('-'));
        let args = ["demo", option, "0", "--out", fresh.to_str().unwrap()];
        let (code, _, stderr) = run_cli_code(&args);
        assert_eq!(code, Some(1), "{option}: {stderr}");
        assert!(
            stderr.contains("must be at least 1") && !fresh.exists(),
            "{stderr}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bench_names_a_missing_or_damaged_tile() {
    let source = testdata().join("deltacells/datasets/exceptions_70k");
    let dir = std::env::temp_dir().join(format!("deltacells-bench-tiles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tiles")).unwrap();
    for entry in walk(&source) {
        let to = dir.join(entry.strip_prefix(&source).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, to).unwrap();
    }
    let tile = dir.join("tiles/tile_000001.dct");
    let bytes = std::fs::read(&tile).unwrap();
    let bench = |dir: &std::path::Path| {
        let args = [
            "bench",
            dir.to_str().unwrap(),
            "--loop",
            "tile",
            "--seconds",
            "0",
        ];
        let (ok, _, stderr) = deltacells(&args);
        assert!(!ok);
        stderr
    };
    std::fs::remove_file(&tile).unwrap();
    let stderr = bench(&dir);
    assert!(
        stderr.contains("tile 1 is missing (tiles/tile_000001.dct)"),
        "{stderr}"
    );
    let mut damaged = bytes;
    damaged[0] ^= 0xff;
    std::fs::write(&tile, damaged).unwrap();
    let stderr = bench(&dir);
    assert!(
        stderr.contains("tile 1 (tiles/tile_000001.dct): ") && stderr.contains("magic"),
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flat_map(|e| {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

/// `convert` takes options anywhere among its paths (between them they had
/// split the paths and failed), refuses a level zstd does not have, and
/// leaves no directory behind for a conversion refused before its first file.
#[test]
fn convert_takes_options_between_its_paths_and_leaves_nothing_when_refused() {
    let input = testdata().join("deltacells/datasets/exceptions_70k.expected.npz");
    let dir = std::env::temp_dir().join(format!("dc-cli-convert-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let (ok, _, stderr) = deltacells(&[
        "convert",
        input.to_str().unwrap(),
        "--level",
        "3",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = deltacells(&["verify", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = deltacells(&["convert", "-q", out.to_str().unwrap()]);
    assert!(!ok && stderr.contains("give both"), "{stderr}");
    for (args, want) in [
        (vec!["--level", "23"], "zstd level 23 is outside"),
        (vec!["--tile-size", "0"], "at least 1"),
    ] {
        let refused = dir.join("refused");
        let mut all = vec!["convert", "-q", input.to_str().unwrap()];
        all.extend(args);
        all.push(refused.to_str().unwrap());
        let (ok, _, stderr) = deltacells(&all);
        assert!(!ok && stderr.contains(want), "{stderr}");
        assert!(!refused.exists(), "{want}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bench_of_a_dataset_without_counts_says_there_is_nothing_to_decode() {
    let dir = std::env::temp_dir().join(format!("deltacells-bench-empty-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let empty = dir.join("empty");
    deltacells::DatasetWriter::create(&empty, 5, deltacells::WriterConfig::default())
        .unwrap()
        .finish()
        .unwrap();
    let (ok, _, stderr) = deltacells(&["bench", empty.to_str().unwrap(), "--reps", "1"]);
    assert!(!ok && stderr.contains("nothing to decode"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

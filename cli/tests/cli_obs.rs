//! `deltacells obs` end to end: the golden `small_obs` dataset's obs printed
//! as the expected JSON lines, eight processes localizing the same columns at
//! once fetch each column once, and the cache directory comes from the
//! argument, then the environment, in order.

// The runner alone: obs_common brings the test data helpers.
#[path = "../../tests/obs_common/mod.rs"]
mod obs_common;
#[path = "common/runner.rs"]
mod runner;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use deltacells::dataset::Dataset;
use obs_common::{
    all_kinds, assert_rows_match, check_labels, expected_rows, small_obs, write_dataset, Scratch,
};
use serde_json::{Map, Value};

const COLUMNS: &str = "cluster,barcode,note,score,is_doublet";

fn cli() -> Command {
    runner::deltacells()
}

#[test]
fn the_cli_prints_the_expected_jsonl() {
    let ds = Dataset::open(small_obs()).unwrap();
    let names: Vec<String> = ds
        .obs()
        .unwrap()
        .schema()
        .names()
        .into_iter()
        .map(String::from)
        .collect();
    let out = cli()
        .args([
            "obs",
            &small_obs().display().to_string(),
            "--columns",
            &names.join(","),
            "--format",
            "jsonl",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<Map<String, Value>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_rows_match(&got, &expected_rows());

    let out = cli()
        .args([
            "obs",
            &small_obs().display().to_string(),
            "--columns",
            "cluster,note",
            "--cells",
            "250:260",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines: Vec<Map<String, Value>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let want = expected_rows();
    assert_eq!(lines.len(), 10);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["cluster"], want[250 + i]["cluster"]);
        assert_eq!(line["note"], want[250 + i]["note"]);
    }
    // Cells as `cat` takes them: single cells and lists, in the order
    // given; a span past the last cell is refused.
    let run = |cells: &str| {
        cli()
            .args([
                "obs",
                &small_obs().display().to_string(),
                "--columns",
                "cluster",
                "--cells",
                cells,
            ])
            .output()
            .unwrap()
    };
    let out = run("7,3:5");
    assert!(out.status.success());
    let got: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Map<String, Value>>(l).unwrap()["cluster"].clone())
        .collect();
    assert_eq!(got, [7, 3, 4].map(|c| want[c]["cluster"].clone()));
    let n = want.len();
    let out = run(&format!("0:{}", n + 1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        !out.status.success() && stderr.contains("past the last cell"),
        "{stderr}"
    );

    let out = cli()
        .args(["obs", &small_obs().display().to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("8d98b8e0e0a709fa88a6216a")
            && text.contains("cluster")
            && text.contains("int16"),
        "{text}"
    );
}

#[test]
fn eight_processes_fetch_each_column_once() {
    let dir = Scratch::new("obs-procs");
    let (columns, expected) = all_kinds(3000);
    // Many small tiles, so each fetch takes a while and the processes overlap.
    let ds = write_dataset(&dir.path().join("ds"), 3000, 16, 50, columns);
    let cache = dir.path().join("cache");
    let children: Vec<_> = (0..8)
        .map(|_| {
            cli()
                .args(["obs", "localize"])
                .arg(dir.path().join("ds"))
                .args(["--columns", COLUMNS, "--cache-dir"])
                .arg(&cache)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut status: HashMap<String, Vec<String>> = HashMap::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let mut parts = line.split('\t');
            let (what, name) = (
                parts.next().unwrap().to_string(),
                parts.next().unwrap().to_string(),
            );
            status.entry(name).or_default().push(what);
        }
    }
    assert_eq!(status.len(), 5);
    for (name, what) in &status {
        assert_eq!(what.len(), 8, "{name}: {what:?}");
        assert_eq!(
            what.iter().filter(|w| *w == "fetched").count(),
            1,
            "{name} was fetched {what:?}"
        );
        assert_eq!(
            what.iter().filter(|w| *w == "reused").count(),
            7,
            "{name}: {what:?}"
        );
    }
    // Only the column files and their lock files remain: no temporaries.
    let obs_dir = cache.join(ds.obs().unwrap().fingerprint()).join("obs");
    let mut files: Vec<String> = std::fs::read_dir(&obs_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut want: Vec<String> = COLUMNS
        .split(',')
        .flat_map(|c| [format!("{c}.arrow"), format!("{c}.arrow.lock")])
        .collect();
    want.sort();
    assert_eq!(files, want);
    let names: Vec<&str> = COLUMNS.split(',').collect();
    let again = ds.obs().unwrap().localize(&names, Some(&cache)).unwrap();
    assert_eq!(again.report().reused.len(), 5);
    check_labels(&ds, &cache, &names, &expected);
}

fn all<'p>(
    dc: Option<&'p Path>,
    xdg: Option<&'p Path>,
    home: Option<&'p Path>,
) -> [(&'static str, Option<&'p Path>); 3] {
    [
        ("DELTACELLS_CACHE", dc),
        ("XDG_CACHE_HOME", xdg),
        ("HOME", home),
    ]
}

fn localized_under(env: &[(&str, Option<&Path>)], ds_dir: &Path) -> PathBuf {
    let mut cmd = cli();
    cmd.args(["obs", "localize"])
        .arg(ds_dir)
        .args(["--columns", "lane"]);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(line.trim_end().split('\t').nth(2).unwrap())
}

#[test]
fn the_cache_directory_comes_from_the_argument_then_the_environment() {
    let dir = Scratch::new("obs-env");
    let (columns, _) = all_kinds(40);
    let ds = write_dataset(&dir.path().join("ds"), 40, 16, 2, columns);
    let fp = ds.obs().unwrap().fingerprint();
    let ds_dir = dir.path().join("ds");
    let [a, b, c] = ["a", "b", "c"].map(|s| dir.path().join(s));
    let file = |root: PathBuf| root.join(&fp).join("obs").join("lane.arrow");
    assert_eq!(
        localized_under(&all(Some(&a), Some(&b), Some(&c)), &ds_dir),
        file(a.clone())
    );
    assert_eq!(
        localized_under(&all(None, Some(&b), Some(&c)), &ds_dir),
        file(b.join("deltacells"))
    );
    assert_eq!(
        localized_under(&all(None, None, Some(&c)), &ds_dir),
        file(c.join(".cache/deltacells"))
    );
    let out = cli()
        .args(["obs", "localize"])
        .arg(&ds_dir)
        .args(["--columns", "lane", "--cache-dir"])
        .arg(&b)
        .output()
        .unwrap();
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains(&file(b.clone()).display().to_string()));
    for (_, root) in all(Some(&a), Some(&b), Some(&c)) {
        assert!(root.unwrap().exists());
    }
}

//! Crash safety of `deltacells convert`: the CLI runs in a child process and
//! is killed with SIGKILL at random points of its run (tile encoding, tile
//! renames, obs, var and manifest writes). After every kill the directory
//! has no manifest and opens as incomplete, no file under a final name is
//! partial (each is byte for byte what a complete run writes), and a re-run
//! into the same directory succeeds and verifies.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use deltacells::dataset::Dataset;
use deltacells::format::manifest::DatasetRule;
use deltacells::synth::{Synth, SynthConfig};
use deltacells::Error;

/// Kills per run of the test: enough to land in every phase, few enough to
/// keep the test to seconds.
const KILLS: usize = 8;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("deltacells-crash-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A 10x folder (matrix.mtx, features.tsv, barcodes.tsv) of synthetic cells:
/// big enough for tens of tiles, small enough to convert in a fraction of a second.
fn write_10x(dir: &Path) {
    let (cells, genes) = (800usize, 600u32);
    let data = Synth::new(SynthConfig {
        n_genes: genes,
        median_umis: 300.0,
        ..SynthConfig::default()
    })
    .block(0, cells);
    std::fs::create_dir_all(dir).unwrap();
    let mut mtx = std::io::BufWriter::new(std::fs::File::create(dir.join("matrix.mtx")).unwrap());
    writeln!(mtx, "%%MatrixMarket matrix coordinate integer general").unwrap();
    writeln!(mtx, "{genes} {cells} {}", data.indices.len()).unwrap();
    for c in 0..cells {
        for j in data.indptr[c] as usize..data.indptr[c + 1] as usize {
            writeln!(mtx, "{} {} {}", data.indices[j] + 1, c + 1, data.values[j]).unwrap();
        }
    }
    mtx.flush().unwrap();
    let features: String = (0..genes)
        .map(|g| format!("ENSG{g:05}\tGENE{g}\tGene Expression\n"))
        .collect();
    std::fs::write(dir.join("features.tsv"), features).unwrap();
    let barcodes: String = (0..cells).map(|c| format!("CELL{c:06}-1\n")).collect();
    std::fs::write(dir.join("barcodes.tsv"), barcodes).unwrap();
}

fn convert(input: &Path, out: &Path) -> std::process::Command {
    let mut cmd = common::runner::deltacells();
    cmd.args([
        "convert",
        "--quiet",
        "--tile-size",
        "32",
        "--chunks",
        "2",
        "--level",
        "1",
    ])
    .arg(input)
    .arg(out)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped());
    cmd
}

/// Every file under a final (non-temporary) name, by path relative to `dir`.
/// Final names are those a complete dataset has; anything else is a leftover.
fn final_files(dir: &Path, complete: &BTreeMap<PathBuf, Vec<u8>>) -> BTreeMap<PathBuf, Vec<u8>> {
    complete
        .keys()
        .filter_map(|rel| std::fs::read(dir.join(rel)).ok().map(|b| (rel.clone(), b)))
        .collect()
}

/// Every file under `dir`, recursively, by relative path.
fn all_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn run_to_completion(input: &Path, out: &Path) {
    let output = convert(input, out).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Dataset::open(out).unwrap().verify().unwrap();
}

#[test]
fn convert_killed_anywhere_leaves_an_incomplete_dataset_that_a_rerun_completes() {
    let input = scratch("input");
    write_10x(&input);
    // A complete run: how long it takes, and the bytes every final file has.
    let reference = scratch("reference");
    let start = Instant::now();
    run_to_completion(&input, &reference);
    let full = start.elapsed();
    let complete = all_files(&reference);
    assert!(complete.keys().any(|p| p.starts_with("obs")), "obs written");
    assert!(complete.len() > 20, "tens of tiles: {}", complete.len());

    // Kill points: half anywhere in the run, half in its last fifth (renames,
    // obs, var and the manifest). A fixed seed, so a failure can be replayed.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut uniform = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut finished = 0;
    for k in 0..KILLS {
        let mut at = if k % 2 == 0 {
            uniform()
        } else {
            0.8 + 0.2 * uniform()
        };
        // A run whose manifest was renamed into place before the kill landed
        // (timing varies; the writer still syncs the directory after that
        // rename, so the process may die without exiting successfully) must
        // be complete; then the kill is tried earlier, so every kill
        // interrupts.
        let (out, what) = loop {
            let delay = full.mul_f64(at);
            let out = scratch("killed");
            let mut child = convert(&input, &out).spawn().unwrap();
            std::thread::sleep(delay);
            let _ = child.kill();
            let status = child.wait().unwrap();
            let what = format!("kill {k} at {delay:?} of {full:?}");
            if !out.join("manifest.json").exists() {
                break (out, what);
            }
            let ds = Dataset::open(&out).unwrap_or_else(|e| panic!("{what} ({status}): {e}"));
            ds.verify().unwrap_or_else(|e| {
                panic!("{what} ({status}): a manifest over an incomplete dataset: {e}")
            });
            std::fs::remove_dir_all(&out).unwrap();
            finished += 1;
            at *= 0.75;
        };
        // Killed before its first object, the output holds nothing: no
        // dataset there, rather than an unfinished one.
        if out.exists() {
            assert!(
                matches!(
                    Dataset::open(&out),
                    Err(Error::Dataset(
                        DatasetRule::ManifestMissing(_) | DatasetRule::NothingStored(_)
                    ))
                ),
                "{what}: not reported as incomplete"
            );
        }
        // Whatever lies under a final name is whole: exactly the bytes of the
        // complete run (the writer is deterministic).
        let left = if out.exists() {
            final_files(&out, &complete)
        } else {
            BTreeMap::new()
        };
        for (rel, bytes) in &left {
            assert!(
                bytes == &complete[rel],
                "{what}: {} is partial or differs",
                rel.display()
            );
        }
        // A re-run into the same directory completes, over any leftovers.
        run_to_completion(&input, &out);
        let again = final_files(&out, &complete);
        assert_eq!(
            again.len(),
            complete.len(),
            "{what}: files after the re-run"
        );
        for (rel, bytes) in &again {
            assert!(
                bytes == &complete[rel],
                "{what}: {} after re-run",
                rel.display()
            );
        }
        eprintln!(
            "{what}: {} of {} final files were there",
            left.len(),
            complete.len()
        );
        std::fs::remove_dir_all(&out).unwrap();
    }
    eprintln!("{KILLS} runs interrupted ({finished} finished before their kill, retried earlier)");
    std::fs::remove_dir_all(&input).unwrap();
    std::fs::remove_dir_all(&reference).unwrap();
}

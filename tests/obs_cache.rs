//! The local obs cache: damaged cache files are detected and replaced, and
//! another column's intact file is not taken for this one. (Processes
//! localizing at once, and where the cache directory comes from, are tested
//! through the command-line tool in cli/tests/cli_obs.rs.)

mod obs_common;

use std::path::Path;
use std::sync::Arc;

use arrow_array::{Float32Array, RecordBatch};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{Field, Schema};
use deltacells::dataset::Dataset;
use deltacells::obs::ObsColumn;
use obs_common::{all_kinds, check_labels, write_dataset, Scratch};

/// Writes a valid IPC file for `name` holding only the first `keep` tiles.
fn write_partial(path: &Path, ds: &Dataset, name: &str, keep: usize) {
    let obs = ds.obs().unwrap();
    let tiles = obs.read_column(name, 0..keep).unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new(
        name,
        tiles[0].data_type().clone(),
        true,
    )]));
    let mut w = FileWriter::try_new(std::fs::File::create(path).unwrap(), &schema).unwrap();
    for t in tiles {
        w.write(&RecordBatch::try_new(schema.clone(), vec![t]).unwrap())
            .unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn damaged_cache_files_are_detected_and_replaced() {
    let dir = Scratch::new("obs-damage");
    let (columns, expected) = all_kinds(500);
    let ds = write_dataset(&dir.path().join("ds"), 500, 32, 4, columns);
    let cache = dir.path().join("cache");
    let obs = ds.obs().unwrap();
    let names = ["cluster", "note", "score"];
    let first = obs.localize(&names, Some(&cache)).unwrap();
    assert_eq!(first.report().fetched.len(), 3);
    let path = |name: &str| first.path(name).unwrap().to_path_buf();
    let (cluster, note, score) = (path("cluster"), path("note"), path("score"));
    // Damaging a file in place under a live mapping would fault its reader
    // (as with any mmap); this crate never does it, and neither does the test.
    drop(first);

    // Truncated to half its length.
    let len = std::fs::metadata(&cluster).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cluster)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    // A complete IPC file that lacks the last tiles.
    write_partial(&note, &ds, "note", ds.n_tiles() - 2);
    // Empty.
    std::fs::write(&score, b"").unwrap();

    let second = obs.localize(&names, Some(&cache)).unwrap();
    assert_eq!(second.report().replaced, names.map(String::from).to_vec());
    assert_eq!(second.report().fetched, names.map(String::from).to_vec());
    check_labels(&ds, &cache, &names, &expected);

    // A damaged file that appears under a live mapping (renamed into place, as
    // a replacement is) is replaced while the mapping keeps its old file.
    let bytes = std::fs::read(&cluster).unwrap();
    let tmp = cluster.with_extension("damaged");
    std::fs::write(&tmp, &bytes[..bytes.len() - 100]).unwrap();
    std::fs::rename(&tmp, &cluster).unwrap();
    let third = obs.localize(&names, Some(&cache)).unwrap();
    assert_eq!(third.report().replaced, vec!["cluster".to_string()]);
    assert_eq!(
        third.report().reused,
        vec!["note".to_string(), "score".to_string()]
    );
    assert_eq!(
        second.labels(&[0, 499]).unwrap(),
        third.labels(&[0, 499]).unwrap()
    );
    check_labels(&ds, &cache, &names, &expected);
    drop((second, third));

    // One byte of the last tile's values changed, the file otherwise intact
    // (what fuzzing found accepted with wrong values when only the spec's
    // batch and row counts were checked): the checksum sees it.
    let mut bytes = std::fs::read(&score).unwrap();
    let n = bytes.len();
    let footer_len = u32::from_le_bytes(bytes[n - 10..n - 6].try_into().unwrap()) as usize;
    let end_of_stream = n - 10 - footer_len - 8;
    bytes[end_of_stream - 4] ^= 0x40;
    std::fs::write(&tmp, &bytes).unwrap();
    std::fs::rename(&tmp, &score).unwrap();
    let fourth = obs.localize(&names, Some(&cache)).unwrap();
    assert_eq!(fourth.report().replaced, vec!["score".to_string()]);
    check_labels(&ds, &cache, &names, &expected);
    drop(fourth);

    // A FIFO where a file belongs: opening it waited for a writer forever.
    std::fs::remove_file(&note).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&note)
        .status()
        .unwrap();
    assert!(made.success());
    let fifth = obs.localize(&names, Some(&cache)).unwrap();
    assert_eq!(fifth.report().replaced, vec!["note".to_string()]);
    check_labels(&ds, &cache, &names, &expected);
}

#[test]
fn another_columns_intact_cache_file_is_not_taken_for_this_one() {
    // Two columns of one type, each file intact with its own valid checksum:
    // copied over the other's name, it must be refetched (fuzzing found it
    // accepted when only type, counts and checksum were checked).
    let dir = Scratch::new("obs-swap");
    let n = 300;
    let column = |name: &str, scale: f32| {
        let values: Vec<f32> = (0..n).map(|i| i as f32 * scale).collect();
        ObsColumn::from_arrow(name, Arc::new(Float32Array::from(values))).unwrap()
    };
    let ds = write_dataset(
        &dir.path().join("ds"),
        n,
        64,
        2,
        vec![column("a", 1.0), column("b", -2.0)],
    );
    let cache = dir.path().join("cache");
    let obs = ds.obs().unwrap();
    let first = obs.localize(&["a", "b"], Some(&cache)).unwrap();
    let (a, b) = (
        first.path("a").unwrap().to_path_buf(),
        first.path("b").unwrap().to_path_buf(),
    );
    let cells: Vec<u64> = (0..n as u64).collect();
    let truth = first.labels(&cells).unwrap();
    drop(first);
    let tmp = b.with_extension("copy");
    std::fs::copy(&a, &tmp).unwrap();
    std::fs::rename(&tmp, &b).unwrap();
    let second = obs.localize(&["a", "b"], Some(&cache)).unwrap();
    assert_eq!(second.report().replaced, vec!["b".to_string()]);
    assert_eq!(second.labels(&cells).unwrap(), truth);
}

#[test]
fn another_datasets_intact_cache_file_is_not_taken_for_this_ones() {
    // Two datasets whose column "a" has the same name, type and tiles but
    // other values: each cache file is intact, with its own valid checksum,
    // so only the obs fingerprint it records tells them apart.
    let dir = Scratch::new("obs-other-dataset");
    let n = 300;
    let column = |scale: f32| {
        let values: Vec<f32> = (0..n).map(|i| i as f32 * scale).collect();
        ObsColumn::from_arrow("a", Arc::new(Float32Array::from(values))).unwrap()
    };
    let ds = write_dataset(&dir.path().join("ds"), n, 64, 2, vec![column(1.0)]);
    let other = write_dataset(&dir.path().join("other"), n, 64, 2, vec![column(3.0)]);
    let cache = dir.path().join("cache");
    let cells: Vec<u64> = (0..n as u64).collect();
    let mine = ds.obs().unwrap().localize(&["a"], Some(&cache)).unwrap();
    let truth = mine.labels(&cells).unwrap();
    let theirs = other.obs().unwrap().localize(&["a"], Some(&cache)).unwrap();
    assert_ne!(mine.path("a"), theirs.path("a"));
    let tmp = mine.path("a").unwrap().with_extension("copy");
    std::fs::copy(theirs.path("a").unwrap(), &tmp).unwrap();
    std::fs::rename(&tmp, mine.path("a").unwrap()).unwrap();
    drop((mine, theirs));
    let again = ds.obs().unwrap().localize(&["a"], Some(&cache)).unwrap();
    assert_eq!(again.report().replaced, vec!["a".to_string()]);
    assert_eq!(again.labels(&cells).unwrap(), truth);
}

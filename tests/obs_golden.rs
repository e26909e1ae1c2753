//! The golden `small_obs` dataset (written by the Python reference): every obs
//! column equals `small_obs.expected_obs.jsonl` (through the cache and
//! through ranged reads; cli/tests/cli_obs.rs checks the command-line tool's
//! output), the fingerprint is recomputed exactly, and our writer given the
//! same obs writes the same schema.json.

mod obs_common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Float64Array, Int32Array, Int64Array};
use deltacells::dataset::{Dataset, DatasetWriter, WriterConfig};
use deltacells::obs::{
    fingerprint, json_value, sha256_hex, Kind, ObsColumn, ObsConfig, ObsSchema, ObsType,
};
use obs_common::{assert_rows_match, expected_rows, small_obs};
use serde_json::{Map, Value};

/// A fresh scratch directory under the system temp dir.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "deltacells-obs-golden-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn every_column_equals_the_expected_jsonl_through_the_cache() {
    let ds = Arc::new(Dataset::open(small_obs()).unwrap());
    let obs = ds.obs().expect("small_obs has obs");
    let names: Vec<String> = obs.schema().names().into_iter().map(String::from).collect();
    assert_eq!(names.len(), 13);
    let cache = scratch("cache");
    let local = obs.localize(&names, Some(&cache)).unwrap();
    assert_eq!(local.report().fetched, names);
    let cells: Vec<u64> = (0..ds.n_cells()).collect();
    let labels = local.labels(&cells).unwrap();
    let got: Vec<Map<String, Value>> = (0..cells.len())
        .map(|row| {
            labels
                .columns()
                .iter()
                .map(|l| (l.name.clone(), l.json_value(row)))
                .collect()
        })
        .collect();
    assert_rows_match(&got, &expected_rows());
    // Category labels keep codes and the shared vocabulary.
    let cluster = labels.get("cluster").unwrap();
    assert_eq!(cluster.values.data_type(), &arrow_schema::DataType::Int16);
    assert_eq!(cluster.category(0), Some("c043"));
    std::fs::remove_dir_all(cache).unwrap();
}

#[test]
fn ranged_reads_give_the_same_values() {
    let ds = Dataset::open(small_obs()).unwrap();
    let obs = ds.obs().unwrap();
    let want = expected_rows();
    let mut got: Vec<Map<String, Value>> = vec![Map::new(); want.len()];
    for c in &obs.schema().columns {
        let tiles = obs.read_column(&c.name, 0..ds.n_tiles()).unwrap();
        for (cell, row) in got.iter_mut().enumerate() {
            let (t, local) = ds.locate(cell as u64).unwrap();
            row.insert(
                c.name.clone(),
                json_value(tiles[t].as_ref(), c.categories.as_deref(), local),
            );
        }
    }
    assert_rows_match(&got, &want);
}

/// Copies `small_obs` (read only in the shared test data) into `dir`, its
/// files writable.
fn copy_small_obs(dir: &Path) {
    for sub in ["", "obs", "tiles"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for entry in std::fs::read_dir(small_obs().join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::write(
                    dir.join(sub).join(path.file_name().unwrap()),
                    std::fs::read(&path).unwrap(),
                )
                .unwrap();
            }
        }
    }
}

#[test]
fn a_value_changed_in_a_local_shard_is_refused_not_read() {
    // Byte 3,261 of the first shard lies in the data of n_counts: flipped,
    // cell 26 reads 3,409 where it holds 3,408, and every check of the
    // column's structure passes. Only the shard's SHA-256 tells.
    let dir = scratch("flipped");
    copy_small_obs(&dir);
    let shard = dir.join("obs/obs_0000.parquet");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[3261] ^= 0x01;
    std::fs::write(&shard, bytes).unwrap();
    let ds = Dataset::open(&dir).unwrap();
    let obs = ds.obs().unwrap();
    for c in &obs.schema().columns {
        let err = obs.read_column(&c.name, 0..1).unwrap_err().to_string();
        assert!(err.contains("obs_shard_sha256[0]"), "{}: {err}", c.name);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_fingerprint_is_recomputed_exactly() {
    let dir = small_obs();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let schema = std::fs::read_to_string(dir.join("obs/schema.json")).unwrap();
    let tile_cells: Vec<u64> = manifest["tile_cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let shards: Vec<String> = (0..2)
        .map(|s| sha256_hex(&std::fs::read(dir.join(format!("obs/obs_{s:04}.parquet"))).unwrap()))
        .collect();
    let listed: Vec<&str> = manifest["obs_shard_sha256"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(shards, listed);
    assert_eq!(
        fingerprint(&schema, &tile_cells, &shards),
        manifest["obs_fingerprint"].as_str().unwrap()
    );
    assert_eq!(
        Dataset::open(&dir).unwrap().obs().unwrap().fingerprint(),
        "8d98b8e0e0a709fa88a6216a"
    );
    Dataset::open(&dir).unwrap().verify().unwrap();
}

/// The golden obs as writer input: vocabularies from the golden schema, values
/// from the expected JSON lines, numeric types as the schema names them.
fn golden_columns(schema: &ObsSchema, rows: &[Map<String, Value>]) -> Vec<ObsColumn> {
    schema
        .columns
        .iter()
        .map(|c| {
            let values = || rows.iter().map(|r| &r[&c.name]);
            let name = c.name.clone();
            let array: ArrayRef = match (c.kind, c.arrow_type) {
                (Kind::Category, _) => {
                    let categories = c.categories.as_deref().unwrap().to_vec();
                    let index: HashMap<&str, i32> = categories
                        .iter()
                        .enumerate()
                        .map(|(i, s)| (s.as_str(), i as i32))
                        .collect();
                    let codes = values()
                        .map(|v| v.as_str().map_or(-1, |s| index[s]))
                        .collect();
                    return ObsColumn::category(name, categories, codes).unwrap();
                }
                (Kind::String, _) => return ObsColumn::string(name, values().map(Value::as_str)),
                (Kind::Bool, _) => return ObsColumn::bool(name, values().map(Value::as_bool)),
                (_, ObsType::Int64) => {
                    Arc::new(values().map(Value::as_i64).collect::<Int64Array>())
                }
                (_, ObsType::Int32) => Arc::new(
                    values()
                        .map(|v| v.as_i64().map(|x| x as i32))
                        .collect::<Int32Array>(),
                ),
                (_, ObsType::Float32) => Arc::new(
                    values()
                        .map(|v| v.as_f64().map(|x| x as f32))
                        .collect::<Float32Array>(),
                ),
                (_, ObsType::Float64) => {
                    Arc::new(values().map(Value::as_f64).collect::<Float64Array>())
                }
                (_, t) => panic!("no {t} column in small_obs"),
            };
            ObsColumn::from_arrow(name, array).unwrap()
        })
        .collect()
}

fn rewrite_small_obs(out: &Path) -> Dataset {
    let golden = Dataset::open(small_obs()).unwrap();
    let schema = golden.obs().unwrap().schema().clone();
    let config = WriterConfig::default()
        .with_tile_size(256)
        .with_n_chunks(4)
        .with_obs(Some(
            ObsConfig::new(golden_columns(&schema, &expected_rows())).with_tiles_per_file(2),
        ));
    let mut writer = DatasetWriter::create(out, golden.n_genes(), config).unwrap();
    let counts = golden.read(0..golden.n_cells()).csr::<i32>().unwrap();
    writer.push(counts.csr.as_ref()).unwrap();
    writer.finish().unwrap();
    Dataset::open(out).unwrap()
}

/// Our shards are not byte-identical to pyarrow's (different writer, encodings
/// and `created_by`), and the fingerprint hashes the shards, so the fingerprint
/// is compared the only way it can be: our schema.json text is byte-identical,
/// and our fingerprint function over our schema text, the tile sizes and the
/// golden shard hashes gives the golden fingerprint. Our own manifest's
/// fingerprint is that same function over our shard hashes.
#[test]
fn our_writer_reproduces_schema_json_and_the_fingerprint() {
    let dir = scratch("rewrite");
    let ours = rewrite_small_obs(&dir.join("ds"));
    let golden = small_obs();
    let our_schema = std::fs::read_to_string(dir.join("ds/obs/schema.json")).unwrap();
    assert_eq!(
        our_schema,
        std::fs::read_to_string(golden.join("obs/schema.json")).unwrap()
    );

    let golden_manifest = Dataset::open(&golden).unwrap().manifest().clone();
    let golden_obs = golden_manifest.obs.as_ref().unwrap();
    assert_eq!(ours.manifest().tile_cells, golden_manifest.tile_cells);
    assert_eq!(
        fingerprint(
            &our_schema,
            &ours.manifest().tile_cells,
            &golden_obs.shard_sha256
        ),
        golden_obs.fingerprint
    );
    let our_obs = ours.manifest().obs.as_ref().unwrap();
    assert_eq!(our_obs.tiles_per_file, 2);
    assert_eq!(
        fingerprint(
            &our_schema,
            &ours.manifest().tile_cells,
            &our_obs.shard_sha256
        ),
        our_obs.fingerprint
    );
    ours.verify().unwrap();

    // And our shards hold the same values.
    let names: Vec<String> = ours
        .obs()
        .unwrap()
        .schema()
        .names()
        .into_iter()
        .map(String::from)
        .collect();
    let local = ours
        .obs()
        .unwrap()
        .localize(&names, Some(&dir.join("cache")))
        .unwrap();
    let labels = local
        .labels(&(0..ours.n_cells()).collect::<Vec<_>>())
        .unwrap();
    let got: Vec<Map<String, Value>> = (0..ours.n_cells() as usize)
        .map(|row| {
            labels
                .columns()
                .iter()
                .map(|l| (l.name.clone(), l.json_value(row)))
                .collect()
        })
        .collect();
    assert_rows_match(&got, &expected_rows());
    std::fs::remove_dir_all(dir).unwrap();
}

//! Obs: any columns, tile sizes and shard sizes round-trip through the shard
//! writer and the ranged reader (and pass verification); Python-style JSON
//! and column-name quoting hold for any string.

use std::sync::Arc;

use arrow_array::Float64Array;
use deltacells::dataset::MemoryStore;
use deltacells::format::manifest::Manifest;
use deltacells::obs::{
    encode_obs, json_value, quote_name, shard_key, ObsColumn, ObsConfig, ObsReader, SCHEMA_KEY,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::config;

#[derive(Debug, Clone)]
struct Case {
    tile_cells: Vec<u64>,
    tiles_per_file: usize,
    max_categories: usize,
    vocabulary: usize,
    codes: Vec<i32>,
    texts: Vec<Option<String>>,
    numbers: Vec<Option<f64>>,
    flags: Vec<Option<bool>>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..200, 1usize..40, 1usize..5, 0usize..300, 0usize..300)
        .prop_flat_map(
            |(n, tile_size, tiles_per_file, vocabulary, max_categories)| {
                let mut tile_cells = vec![tile_size as u64; n / tile_size];
                if n % tile_size != 0 {
                    tile_cells.push((n % tile_size) as u64);
                }
                (
                    Just(tile_cells),
                    Just(tiles_per_file),
                    Just(max_categories),
                    Just(vocabulary),
                    prop::collection::vec(-1..vocabulary as i32, n),
                    prop::collection::vec(prop::option::of("\\PC{0,6}"), n),
                    prop::collection::vec(prop::option::of(any::<f64>()), n),
                    prop::collection::vec(prop::option::of(any::<bool>()), n),
                )
            },
        )
        .prop_map(
            |(
                tile_cells,
                tiles_per_file,
                max_categories,
                vocabulary,
                codes,
                texts,
                numbers,
                flags,
            )| Case {
                tile_cells,
                tiles_per_file,
                max_categories,
                vocabulary,
                codes,
                texts,
                numbers,
                flags,
            },
        )
}

fn manifest(tile_cells: &[u64], obs: deltacells::format::manifest::ObsManifest) -> Manifest {
    Manifest {
        n_cells: tile_cells.iter().sum(),
        n_genes: 1,
        tile_size: tile_cells.first().copied().unwrap_or(1),
        tile_cells: tile_cells.to_vec(),
        tile_nnz: vec![0; tile_cells.len()],
        tile_bytes: vec![0; tile_cells.len()],
        n_chunks: 1,
        zstd_level: 3,
        has_gene_order: false,
        has_var_names: false,
        has_var_table: false,
        obs: Some(obs),
        metadata: Map::new(),
    }
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn shards_round_trip_through_ranged_reads(c in case()) {
        let categories: Vec<String> = (0..c.vocabulary).map(|i| format!("k{i}")).collect();
        let columns = vec![
            ObsColumn::category("cat", categories.clone(), c.codes.clone()).unwrap(),
            ObsColumn::string("text", c.texts.iter().map(Option::as_deref)),
            ObsColumn::from_arrow("num", Arc::new(Float64Array::from(c.numbers.clone()))).unwrap(),
            ObsColumn::bool("flag", c.flags.iter().copied()),
        ];
        let config = ObsConfig::new(columns).with_tiles_per_file(c.tiles_per_file).with_max_categories(c.max_categories);
        let files = encode_obs(&config, &c.tile_cells).unwrap();
        prop_assert_eq!(files.shards.len(), c.tile_cells.len().div_ceil(c.tiles_per_file));
        let store = MemoryStore::new();
        store.insert(SCHEMA_KEY, files.schema_json.as_bytes());
        for (s, shard) in files.shards.iter().enumerate() {
            store.insert(shard_key(s), shard);
        }
        let manifest = manifest(&c.tile_cells, files.manifest.clone());
        let reader = ObsReader::open(Arc::new(store), &manifest).unwrap();
        reader.verify().unwrap();
        let cat = &reader.schema().columns[0];
        prop_assert_eq!(cat.categories.is_some(), c.vocabulary <= c.max_categories);

        let expected: [Vec<Value>; 4] = [
            c.codes.iter().map(|&k| usize::try_from(k).map_or(Value::Null, |k| Value::from(categories[k].as_str()))).collect(),
            c.texts.iter().map(|t| t.as_deref().map_or(Value::Null, Value::from)).collect(),
            c.numbers.iter().map(|v| v.and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number)).collect(),
            c.flags.iter().map(|f| f.map_or(Value::Null, Value::Bool)).collect(),
        ];
        for (column, want) in reader.schema().columns.iter().zip(&expected) {
            let tiles = reader.read_column(&column.name, 0..c.tile_cells.len()).unwrap();
            let mut cell = 0;
            for (t, array) in tiles.iter().enumerate() {
                prop_assert_eq!(array.len() as u64, c.tile_cells[t]);
                for row in 0..array.len() {
                    prop_assert_eq!(&json_value(array.as_ref(), column.categories.as_deref(), row), &want[cell]);
                    cell += 1;
                }
            }
        }
    }

    #[test]
    fn python_json_escapes_any_string_to_ascii(s in "\\PC{0,20}|[\\x00-\\x7f]{0,20}") {
        let schema = deltacells::obs::ObsSchema {
            columns: vec![deltacells::obs::ColumnSchema {
                name: s.clone(),
                kind: deltacells::obs::Kind::Category,
                arrow_type: deltacells::obs::ObsType::Int8,
                categories: Some(vec![s.clone()].into()),
            }],
        };
        let text = schema.to_json_text();
        prop_assert!(text.is_ascii());
        prop_assert_eq!(deltacells::obs::ObsSchema::parse(text.as_bytes()).unwrap(), schema);
        let fp = deltacells::obs::fingerprint(&text, &[1], &[]);
        prop_assert_eq!(fp.len(), 24);
    }

    #[test]
    fn quoted_names_are_safe_and_reversible(s in "\\PC{0,20}") {
        let q = quote_name(&s);
        prop_assert!(q.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-~%".contains(&b)));
        let mut bytes = Vec::new();
        let mut it = q.bytes();
        while let Some(b) = it.next() {
            if b == b'%' {
                let hex: String = [it.next().unwrap(), it.next().unwrap()].iter().map(|&c| char::from(c)).collect();
                bytes.push(u8::from_str_radix(&hex, 16).unwrap());
            } else {
                bytes.push(b);
            }
        }
        prop_assert_eq!(String::from_utf8(bytes).unwrap(), s);
    }
}

/// Encoded obs of 3 columns over 5 tiles of 7 cells, 2 tiles per shard.
fn sample_files() -> (deltacells::obs::ObsFiles, Vec<u64>) {
    let n = 35;
    let columns = vec![
        ObsColumn::categorical("cat", (0..n).map(|i| Some(["a", "b", "c"][i % 3]))),
        ObsColumn::string("text", (0..n).map(|i| Some(format!("cell-{i}")))),
        ObsColumn::from_arrow(
            "num",
            Arc::new(Float64Array::from(
                (0..n).map(|i| i as f64).collect::<Vec<_>>(),
            )),
        )
        .unwrap(),
    ];
    let tile_cells = vec![7; 5];
    let config = ObsConfig::new(columns).with_tiles_per_file(2);
    (encode_obs(&config, &tile_cells).unwrap(), tile_cells)
}

proptest! {
    #![proptest_config(config(64))]

    /// A damaged shard (hashes and fingerprint recomputed, so only the
    /// Parquet content is wrong) gives errors or values, never a panic.
    #[test]
    fn damaged_shards_never_panic(
        shard in 0usize..3,
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let (mut files, tile_cells) = sample_files();
        let bytes = &mut files.shards[shard];
        for (at, value) in &flips {
            let i = at.index(bytes.len());
            bytes[i] ^= value | 1;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len()));
        }
        files.manifest.shard_bytes[shard] = bytes.len() as u64;
        files.manifest.shard_sha256[shard] = deltacells::obs::sha256_hex(bytes);
        files.manifest.fingerprint =
            deltacells::obs::fingerprint(&files.schema_json, &tile_cells, &files.manifest.shard_sha256);
        let store = MemoryStore::new();
        store.insert(SCHEMA_KEY, files.schema_json.as_bytes());
        for (s, shard) in files.shards.iter().enumerate() {
            store.insert(shard_key(s), shard);
        }
        let reader = ObsReader::open(Arc::new(store), &manifest(&tile_cells, files.manifest.clone())).unwrap();
        let _ = reader.verify();
        for name in ["cat", "text", "num"] {
            let _ = reader.read_column(name, 0..tile_cells.len());
        }
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// Any damage to a cached column file gives a valid localization (the
    /// file is refetched when its structure is wrong), never a panic.
    #[test]
    fn damaged_cache_files_never_panic(
        column in 0usize..3,
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let (files, tile_cells) = sample_files();
        let store = MemoryStore::new();
        store.insert(SCHEMA_KEY, files.schema_json.as_bytes());
        for (s, shard) in files.shards.iter().enumerate() {
            store.insert(shard_key(s), shard);
        }
        let reader = ObsReader::open(Arc::new(store), &manifest(&tile_cells, files.manifest.clone())).unwrap();
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let cache = std::env::temp_dir().join(format!(
            "deltacells-prop-cache-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let names = ["cat", "text", "num"];
        let path = reader.localize(&names, Some(&cache)).unwrap().path(names[column]).unwrap().to_path_buf();
        let mut bytes = std::fs::read(&path).unwrap();
        for (at, value) in &flips {
            let i = at.index(bytes.len());
            bytes[i] ^= value | 1;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len()));
        }
        // A new file renamed into place: no mapping of the old one is live anyway.
        let tmp = path.with_extension("damaged");
        std::fs::write(&tmp, &bytes).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let again = reader.localize(&names, Some(&cache));
        std::fs::remove_dir_all(&cache).unwrap();
        let again = again.unwrap();
        prop_assert_eq!(again.labels(&[0, 34]).unwrap().columns().len(), 3);
    }
}

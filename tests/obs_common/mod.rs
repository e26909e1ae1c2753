//! Helpers shared by the obs integration tests (the library's, and the
//! command-line tool's in cli/tests, which include this file): where the
//! shared test data lies, the golden `small_obs` dataset and its expected
//! rows, scratch folders, small count matrices, and obs columns of every kind
//! with the JSON each cell must give.
#![allow(dead_code)]

#[path = "../common/scratch.rs"]
mod scratch;
#[path = "../common/testdata.rs"]
mod testdata;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Float32Array, Float64Array, Int32Array, Int64Array, UInt8Array};
use deltacells::dataset::{Dataset, DatasetWriter, WriterConfig};
use deltacells::obs::{ObsColumn, ObsConfig};
use deltacells::Csr;
#[allow(unused_imports)] // not every test that includes this module makes folders
pub use scratch::Scratch;
use serde_json::{Map, Value};

pub use testdata::testdata;

/// The golden dataset whose obs the Python reference wrote.
pub fn small_obs() -> PathBuf {
    testdata().join("deltacells/datasets/small_obs")
}

/// `small_obs`'s obs as the reference printed it: one JSON object per cell.
pub fn expected_rows() -> Vec<Map<String, Value>> {
    let path = testdata().join("deltacells/datasets/small_obs.expected_obs.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect()
}

/// Whether two JSON values are the same obs value. Floats are compared as the
/// stored type: the expected file prints float32 values through float64 with
/// a formatter that is not always shortest-exact (cell 5's `pct_mito` is the
/// float32 3.8003385066986084, printed 3.800338506698608), and serde_json's
/// default parser may be one ULP off, so doubles agree to within one ULP.
pub fn same(got: &Value, want: &Value, column: &str) -> bool {
    match (got.as_f64(), want.as_f64()) {
        (Some(a), Some(b)) if !(got.is_i64() || got.is_u64()) => {
            if column == "pct_mito" {
                a as f32 == b as f32
            } else {
                (a.to_bits() as i64 - b.to_bits() as i64).abs() <= 1
            }
        }
        _ => got == want,
    }
}

pub fn assert_rows_match(got: &[Map<String, Value>], want: &[Map<String, Value>]) {
    assert_eq!(got.len(), want.len());
    for (cell, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            g.keys().collect::<Vec<_>>(),
            w.keys().collect::<Vec<_>>(),
            "cell {cell}"
        );
        for (key, value) in w {
            assert!(
                same(&g[key], value, key),
                "cell {cell}, column {key}: {} != {value}",
                g[key]
            );
        }
    }
}

/// Checks that the localized `names` under `cache` give `expected` for every
/// cell of `ds`, read in reverse order.
pub fn check_labels(ds: &Dataset, cache: &Path, names: &[&str], expected: &[(String, Vec<Value>)]) {
    let local = ds.obs().unwrap().localize(names, Some(cache)).unwrap();
    let cells: Vec<u64> = (0..ds.n_cells()).rev().collect();
    let labels = local.labels(&cells).unwrap();
    for label in labels.columns() {
        let want = &expected.iter().find(|(n, _)| *n == label.name).unwrap().1;
        for (row, &c) in cells.iter().enumerate() {
            assert_eq!(
                label.json_value(row),
                want[c as usize],
                "{} cell {c}",
                label.name
            );
        }
    }
}

/// `n_cells` cells of 1 to 3 nonzeros over `n_genes` genes.
pub fn counts(n_cells: usize, n_genes: u32) -> Csr<u32> {
    let mut csr = Csr::empty(u64::from(n_genes));
    for c in 0..n_cells {
        let k = 1 + c % 3;
        for j in 0..k {
            csr.indices
                .push(((c * 7 + j * 11) % n_genes as usize) as i32);
            csr.values.push(1 + (c + j) as u32 % 40);
        }
        let row = csr.indptr.len() - 1;
        let start = csr.indptr[row] as usize;
        let mut pairs: Vec<(i32, u32)> = csr.indices[start..]
            .iter()
            .copied()
            .zip(csr.values[start..].iter().copied())
            .collect();
        pairs.sort_unstable();
        pairs.dedup_by_key(|p| p.0);
        csr.indices.truncate(start);
        csr.values.truncate(start);
        for (g, v) in pairs {
            csr.indices.push(g);
            csr.values.push(v);
        }
        csr.indptr.push(csr.indices.len() as i64);
    }
    csr
}

/// Obs columns of every kind, and the JSON value each cell must come back as.
pub fn all_kinds(n: usize) -> (Vec<ObsColumn>, Vec<(String, Vec<Value>)>) {
    let mut columns = Vec::new();
    let mut expected = Vec::new();
    let mut add = |column: ObsColumn, values: Vec<Value>| {
        expected.push((column.name().to_string(), values));
        columns.push(column);
    };
    let opt_str = |v: &Option<String>| v.as_ref().map_or(Value::Null, |s| Value::String(s.clone()));

    // 200 categories: int16 codes (int8 holds at most 128).
    let cats: Vec<String> = (0..200).map(|i| format!("cluster {i:03}")).collect();
    let codes: Vec<i32> = (0..n)
        .map(|c| {
            if c % 13 == 0 {
                -1
            } else {
                (c * 7 % 200) as i32
            }
        })
        .collect();
    let values = codes
        .iter()
        .map(|&c| usize::try_from(c).map_or(Value::Null, |c| Value::String(cats[c].clone())))
        .collect();
    add(ObsColumn::category("cluster", cats, codes).unwrap(), values);

    // 300 distinct values with max_categories = 250: stored as strings.
    let wide: Vec<Option<String>> = (0..n)
        .map(|c| (c % 17 != 5).then(|| format!("BC{:04}-1", c % 300)))
        .collect();
    add(
        ObsColumn::categorical("barcode", wide.iter().map(Option::as_deref)),
        wide.iter().map(opt_str).collect(),
    );

    // A small vocabulary with an empty, a non-ASCII and an astral category.
    let small = ["", "β-cell ✓", "𝔘nicode"];
    let vals: Vec<Option<&str>> = (0..n)
        .map(|c| (c % 5 != 4).then_some(small[c % 3]))
        .collect();
    add(
        ObsColumn::categorical("kind", vals.iter().copied()),
        vals.iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
    );

    // Every value missing: an empty vocabulary.
    add(
        ObsColumn::categorical("nothing", (0..n).map(|_| None::<&str>)),
        vec![Value::Null; n],
    );

    let texts = [
        "",
        "tab\there",
        "naïve \"quoted\" \\ back",
        "line\nbreak",
        "😀 astral",
        "plain",
    ];
    let text: Vec<Option<String>> = (0..n)
        .map(|c| (c % 7 != 3).then(|| texts[c % texts.len()].to_string()))
        .collect();
    add(
        ObsColumn::string("note", text.iter().map(Option::as_deref)),
        text.iter().map(opt_str).collect(),
    );

    let nulls = Float64Array::from(vec![None::<f64>; n]);
    add(
        ObsColumn::from_arrow("no_numbers", Arc::new(nulls)).unwrap(),
        vec![Value::Null; n],
    );

    let score: Vec<Option<f32>> = (0..n)
        .map(|c| {
            if c % 11 == 0 {
                None
            } else if c % 11 == 1 {
                Some(f32::NAN)
            } else {
                Some(c as f32 / 8.0)
            }
        })
        .collect();
    let values = score
        .iter()
        .map(|v| {
            v.filter(|x| !x.is_nan())
                .map_or(Value::Null, |x| Value::from(f64::from(x)))
        })
        .collect();
    add(
        ObsColumn::from_arrow("score", Arc::new(Float32Array::from(score))).unwrap(),
        values,
    );

    let big: Vec<Option<i64>> = (0..n)
        .map(|c| (c % 9 != 0).then(|| (c as i64 - 500) * 1_000_000_007))
        .collect();
    let values = big
        .iter()
        .map(|v| v.map_or(Value::Null, Value::from))
        .collect();
    add(
        ObsColumn::from_arrow("n_counts", Arc::new(Int64Array::from(big))).unwrap(),
        values,
    );

    let small_uint: Vec<u8> = (0..n).map(|c| (c % 256) as u8).collect();
    let values = small_uint.iter().map(|&v| Value::from(v)).collect();
    add(
        ObsColumn::from_arrow("lane", Arc::new(UInt8Array::from(small_uint))).unwrap(),
        values,
    );

    let flags: Vec<Option<bool>> = (0..n)
        .map(|c| (c % 10 != 9).then_some(c % 3 == 0))
        .collect();
    add(
        ObsColumn::bool("is_doublet", flags.iter().copied()),
        flags
            .iter()
            .map(|v| v.map_or(Value::Null, Value::Bool))
            .collect(),
    );

    let escape: Vec<i32> = (0..n).map(|c| c as i32).collect();
    let values = escape.iter().map(|&v| Value::from(v)).collect();
    add(
        ObsColumn::from_arrow("../x", Arc::new(Int32Array::from(escape))).unwrap(),
        values,
    );

    (columns, expected)
}

/// Writes a dataset of `n_cells` cells (40 genes) with `columns` as obs.
pub fn write_dataset(
    dir: &Path,
    n_cells: usize,
    tile_size: usize,
    tiles_per_file: usize,
    columns: Vec<ObsColumn>,
) -> Dataset {
    let config = WriterConfig::default()
        .with_tile_size(tile_size)
        .with_n_chunks(2)
        .with_level(3)
        .with_obs(Some(
            ObsConfig::new(columns)
                .with_tiles_per_file(tiles_per_file)
                .with_max_categories(250),
        ));
    let mut writer = DatasetWriter::create(dir, 40, config).unwrap();
    writer.push(counts(n_cells, 40).as_ref()).unwrap();
    writer.finish().unwrap();
    Dataset::open(dir).unwrap()
}

//! `convert` from AnnData `.h5ad` and Cell Ranger `.h5` files (feature
//! `hdf5`). The fixtures are written at test time by the real anndata and
//! h5py (`tests/fixtures/write_h5.py`), with what anndata reads back; every
//! converted dataset must hold the same counts, obs and var.
//!
//! The Python comes from `DELTACELLS_PYTHON` or else the CI venv
//! (`bash .ci/venv`); without one these tests fail rather than pass.
#![cfg(feature = "hdf5")]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arrow_array::cast::AsArray;
use arrow_array::Array;
use deltacells::dataset::ingest::{
    convert, ConvertOptions, Input, Layer, OBS_INDEX_IS_COLUMN_KEY, OBS_INDEX_KEY,
};
use deltacells::dataset::Dataset;
use deltacells::obs::json_value;
use serde_json::Value;

/// The fixture directory and expectations, written once per test run.
fn fixtures() -> &'static (PathBuf, Value) {
    static FIXTURES: OnceLock<(PathBuf, Value)> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let python = std::env::var_os("DELTACELLS_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target/ci-venv/bin/python"));
        assert!(
            python.exists(),
            "no Python with anndata at {} (run `bash .ci/venv` or set DELTACELLS_PYTHON)",
            python.display()
        );
        let dir = std::env::temp_dir().join(format!("deltacells-h5-{}", std::process::id()));
        let status = std::process::Command::new(&python)
            .arg(root.join("tests/fixtures/write_h5.py"))
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "the fixture writer failed");
        let expected = std::fs::read_to_string(dir.join("expected.json")).unwrap();
        (dir, serde_json::from_str(&expected).unwrap())
    })
}

fn fixture(name: &str) -> PathBuf {
    fixtures().0.join(name)
}

fn expected(key: &str) -> &'static Value {
    &fixtures().1[key]
}

fn out_dir(name: &str) -> PathBuf {
    let d = fixtures().0.join(format!("out-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(input: &Path, out: &Path, options: ConvertOptions) -> deltacells::Result<()> {
    convert(&Input::detect(input).unwrap(), out, options, &|_| {}).map(|_| ())
}

/// Small blocks and runs so that every fixture takes several of each.
fn options() -> ConvertOptions {
    ConvertOptions::default()
        .with_block_nonzeros(40)
        .with_run_nonzeros(64)
        .with_writer(deltacells::dataset::WriterConfig::default().with_tile_size(16))
}

/// The dataset's counts as a dense cells x source genes matrix.
fn dense(ds: &Dataset) -> Vec<Vec<i64>> {
    let csr = ds.read(0..ds.n_cells()).csr::<i32>().unwrap().csr;
    let n = ds.n_genes() as usize;
    let order: Vec<usize> = match ds.gene_order() {
        Some(o) => o.iter().map(|&g| g as usize).collect(),
        None => (0..n).collect(),
    };
    csr.indptr
        .windows(2)
        .map(|w| {
            let mut row = vec![0i64; n];
            for j in w[0] as usize..w[1] as usize {
                row[order[csr.indices[j] as usize]] = i64::from(csr.values[j]);
            }
            row
        })
        .collect()
}

fn counts(v: &Value) -> Vec<Vec<i64>> {
    serde_json::from_value(v.clone()).unwrap()
}

/// Every value of obs column `name`, as JSON.
fn obs_column(ds: &Dataset, name: &str) -> Vec<Value> {
    let obs = ds.obs().unwrap();
    let (_, schema) = obs.schema().column(name).unwrap();
    let categories = schema.categories.clone();
    let parts = obs.read_column(name, 0..ds.manifest().n_tiles()).unwrap();
    parts
        .iter()
        .flat_map(|a| {
            let categories = categories.clone();
            (0..a.len()).map(move |r| json_value(a.as_ref(), categories.as_deref(), r))
        })
        .collect()
}

fn var_column(ds: &Dataset, name: &str) -> Vec<String> {
    let var = ds.var_table().unwrap().unwrap();
    let col = var.table.column_by_name(name).unwrap();
    let order = ds.gene_order().map(<[i32]>::to_vec);
    let values: Vec<String> = match col.data_type() {
        arrow_schema::DataType::Dictionary(_, _) => {
            let dict = col.as_any_dictionary();
            let names = dict.values().as_string::<i32>();
            dict.normalized_keys()
                .iter()
                .map(|&k| names.value(k).to_string())
                .collect()
        }
        _ => col
            .as_string::<i32>()
            .iter()
            .map(|v| v.unwrap().to_string())
            .collect(),
    };
    // Back to source order.
    let mut source = values.clone();
    if let Some(order) = order {
        for (j, &g) in order.iter().enumerate() {
            source[g as usize] = values[j].clone();
        }
    }
    source
}

/// Equal JSON values; numbers within the last digit serde_json's parser may
/// round (the fixture's floats are written by Python with 17 digits).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs()),
        _ => a == b,
    }
}

fn check_h5ad(out: &Path, key: &str) {
    let want = expected(key);
    let ds = Dataset::open(out).unwrap();
    ds.verify().unwrap();
    assert_eq!(dense(&ds), counts(&want["counts"]), "{key}: counts");
    for (name, values) in want["obs"].as_object().unwrap() {
        let got = obs_column(&ds, name);
        let values = values.as_array().unwrap();
        assert_eq!(got.len(), values.len(), "{key}: obs column {name}");
        for (row, (a, b)) in got.iter().zip(values).enumerate() {
            assert!(same(a, b), "{key}: obs column {name} row {row}: {a} != {b}");
        }
    }
    for (name, values) in want["var"].as_object().unwrap() {
        let values: Vec<String> = serde_json::from_value(values.clone()).unwrap();
        assert_eq!(var_column(&ds, name), values, "{key}: var column {name}");
    }
    let names: Vec<String> = serde_json::from_value(want["var"]["_index"].clone()).unwrap();
    let order = ds.gene_order().unwrap();
    let in_order: Vec<&str> = order.iter().map(|&g| names[g as usize].as_str()).collect();
    assert_eq!(
        ds.var_names().unwrap(),
        in_order.as_slice(),
        "{key}: var_names"
    );
    let ordered = &ds.manifest().metadata["source"]["ordered_categories"];
    assert_eq!(ordered, &want["ordered"], "{key}: ordered categoricals");
    // The obs index is recorded as the column holding the cell ids.
    assert_eq!(
        ds.manifest().metadata[OBS_INDEX_KEY],
        "cell_id",
        "{key}: obs index"
    );
}

#[test]
fn h5ad_csr_csc_dense_int_and_float_convert_to_what_anndata_reads() {
    for name in ["csr_f32_gzip", "csc_i64", "csr_i32_idx64", "dense_i32"] {
        let out = out_dir(name);
        run(&fixture(&format!("{name}.h5ad")), &out, options()).unwrap();
        check_h5ad(&out, name);
    }
}

#[test]
fn h5ad_layers_raw_and_named() {
    let input = fixture("csr_f32_gzip.h5ad");
    for (layer, key) in [
        (Layer::Raw, "csr_f32_gzip.raw"),
        (Layer::Named("spliced".into()), "csr_f32_gzip.spliced"),
    ] {
        let out = out_dir(key);
        let opts = options().with_layer(layer.clone());
        run(&input, &out, opts).unwrap();
        check_h5ad(&out, key);
    }
    let err = run(
        &input,
        &out_dir("nolayer"),
        options().with_layer(Layer::Named("unspliced".into())),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("/layers/unspliced") && err.contains("spliced"),
        "{err}"
    );
}

#[test]
fn obs_columns_are_selected_in_the_order_given() {
    let out = out_dir("select");
    let opts = options().with_obs_columns(Some(vec!["stage".into(), "cell_id".into()]));
    run(&fixture("csc_i64.h5ad"), &out, opts).unwrap();
    let ds = Dataset::open(&out).unwrap();
    let names: Vec<&str> = ds.obs().unwrap().schema().names();
    assert_eq!(names, ["stage", "cell_id"]);
    let err = run(
        &fixture("csc_i64.h5ad"),
        &out_dir("select-bad"),
        options().with_obs_columns(Some(vec!["nope".into()])),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("\"nope\""), "{err}");
    // Every column of the input is listed, not only those asked for.
    assert!(
        err.contains("\"alias\"") && err.contains("\"note\""),
        "{err}"
    );

    // The obs index names the cells: kept (first) when not listed.
    let out = out_dir("select-index");
    let opts = options().with_obs_columns(Some(vec!["stage".into()]));
    run(&fixture("csc_i64.h5ad"), &out, opts).unwrap();
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(ds.obs().unwrap().schema().names(), ["cell_id", "stage"]);
    assert_eq!(ds.manifest().metadata[OBS_INDEX_KEY], "cell_id");
    let want: Vec<Value> = (0..50).map(|i| format!("cell-{i}").into()).collect();
    assert_eq!(obs_column(&ds, "cell_id"), want);

    let err = run(
        &fixture("csc_i64.h5ad"),
        &out_dir("select-twice"),
        options().with_obs_columns(Some(vec!["stage".into(), "stage".into()])),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("lists \"stage\" twice"), "{err}");
}

#[test]
fn an_obs_column_named_cell_id_is_kept_beside_the_index() {
    // The obs index is stored as `cell_id`; a column of that name had been
    // dropped without a word.
    let out = out_dir("own-cell-id");
    run(&fixture("own_cell_id.h5ad"), &out, options()).unwrap();
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(ds.manifest().metadata[OBS_INDEX_KEY], "obs_names");
    let ids: Vec<Value> = (0..50).map(|i| format!("cell-{i}").into()).collect();
    assert_eq!(obs_column(&ds, "obs_names"), ids);
    let own: Vec<Value> = (0..50)
        .map(|i| format!("donor-{}-{i}", i % 3).into())
        .collect();
    assert_eq!(obs_column(&ds, "cell_id"), own);
    // Categories of booleans are their names (the file had been refused).
    let doublets: Vec<Value> = (0..50)
        .map(|i| if i % 4 == 0 { "True" } else { "False" }.into())
        .collect();
    assert_eq!(obs_column(&ds, "is_doublet"), doublets);

    // A `cell_id` column holding the index's names is the index, stored once.
    let out = out_dir("cell-id-is-index");
    run(&fixture("cell_id_is_index.h5ad"), &out, options()).unwrap();
    let ds = Dataset::open(&out).unwrap();
    let meta = &ds.manifest().metadata;
    assert_eq!(meta[OBS_INDEX_KEY], "cell_id");
    assert_eq!(meta[OBS_INDEX_IS_COLUMN_KEY], true);
    let names = ds.obs().unwrap().schema().names();
    assert_eq!(names.iter().filter(|n| **n == "cell_id").count(), 1);
    assert_eq!(obs_column(&ds, "cell_id"), ids);
}

#[test]
fn non_counts_are_refused_with_cell_gene_and_value_before_any_tile() {
    for (name, want) in [
        ("bad_fraction", "cell 4, gene 7: value 2.5"),
        ("bad_negative", "cell 9, gene 1: value -3"),
    ] {
        let out = out_dir(name);
        let err = run(&fixture(&format!("{name}.h5ad")), &out, options())
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{name}: {err}");
        assert!(err.contains(&format!("{name}.h5ad: /X")), "{name}: {err}");
        assert!(!out.join("tiles").exists(), "{name}: a tile was written");
    }
}

#[test]
fn a_gene_name_with_a_line_break_is_refused_before_any_tile() {
    // It converted, and the dataset's var_names.txt then held one line more
    // than it had genes: no reader could open it.
    let out = out_dir("bad_gene_name");
    let err = run(&fixture("bad_gene_name.h5ad"), &out, options())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(r#"gene name "two\nlines" contains a line break"#),
        "{err}"
    );
    assert!(!out.join("tiles").exists(), "a tile was written");
}

#[test]
fn old_truncated_corrupt_and_hollow_files_are_errors_naming_file_and_path() {
    for (name, want) in [
        (
            "old_categories.h5ad",
            "/obs: categories stored in __categories",
        ),
        ("truncated.h5ad", "truncated.h5ad"),
        ("corrupt.h5ad", "corrupt.h5ad: /X/data"),
    ] {
        let err = run(&fixture(name), &out_dir(name), options())
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{name}: {err}");
    }
}

/// `--feature-type` on an AnnData holding genes and antibodies: the genes of
/// that type in their order, in CSR, CSC (transposed) and dense layouts; a
/// type absent, or an AnnData without `feature_types`, is refused.
#[test]
fn h5ad_with_a_feature_type_filter_keeps_those_features() {
    for name in ["types_csr", "types_csc", "types_dense"] {
        let want = expected(name);
        let all = counts(&want["counts"]);
        let var =
            |c: &str| -> Vec<String> { serde_json::from_value(want["var"][c].clone()).unwrap() };
        let types = var("feature_types");
        for filter in ["Gene Expression", "Antibody Capture"] {
            let out = out_dir(&format!("{name}-{filter}"));
            let opts = options().with_feature_type(Some(filter.to_string()));
            run(&fixture(&format!("{name}.h5ad")), &out, opts).unwrap();
            let ds = Dataset::open(&out).unwrap();
            ds.verify().unwrap();
            let keep: Vec<usize> = (0..types.len()).filter(|&g| types[g] == filter).collect();
            assert!(!keep.is_empty() && keep.len() < types.len());
            let want_counts: Vec<Vec<i64>> = all
                .iter()
                .map(|row| keep.iter().map(|&g| row[g]).collect())
                .collect();
            assert_eq!(dense(&ds), want_counts, "{name} {filter}");
            let pick = |v: &[String]| keep.iter().map(|&g| v[g].clone()).collect::<Vec<_>>();
            assert_eq!(var_column(&ds, "_index"), pick(&var("_index")), "{name}");
            assert_eq!(var_column(&ds, "gene_ids"), pick(&var("gene_ids")));
            assert_eq!(var_column(&ds, "feature_types"), pick(&types));
            assert_eq!(ds.manifest().metadata["source"]["feature_type"], filter);
        }
    }
    let err = run(
        &fixture("types_csr.h5ad"),
        &out_dir("types-none"),
        options().with_feature_type(Some("Peaks".into())),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("/var/feature_types") && err.contains("Antibody Capture, Gene Expression"),
        "{err}"
    );
    let out = out_dir("types-no-column");
    let err = run(
        &fixture("no_types.h5ad"),
        &out,
        options().with_feature_type(Some("Gene Expression".into())),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("needs a column feature_types (var has \"gene_ids\", \"mean\")"),
        "{err}"
    );
    assert!(!out.join("manifest.json").exists());
}

#[test]
fn cell_ranger_h5_with_a_feature_type_filter() {
    let want = expected("cellranger");
    let all = counts(&want["counts"]);
    let types: Vec<String> = serde_json::from_value(want["types"].clone()).unwrap();
    let names: Vec<String> = serde_json::from_value(want["names"].clone()).unwrap();
    let ids: Vec<String> = serde_json::from_value(want["ids"].clone()).unwrap();
    for filter in [None, Some("Gene Expression"), Some("Antibody Capture")] {
        let out = out_dir(&format!("cr-{filter:?}"));
        let opts = options().with_feature_type(filter.map(str::to_string));
        run(&fixture("cellranger.h5"), &out, opts).unwrap();
        let ds = Dataset::open(&out).unwrap();
        ds.verify().unwrap();
        let keep: Vec<usize> = (0..types.len())
            .filter(|&g| filter.is_none_or(|f| types[g] == f))
            .collect();
        let want_counts: Vec<Vec<i64>> = all
            .iter()
            .map(|row| keep.iter().map(|&g| row[g]).collect())
            .collect();
        assert_eq!(dense(&ds), want_counts, "{filter:?}");
        let pick = |v: &[String]| keep.iter().map(|&g| v[g].clone()).collect::<Vec<_>>();
        assert_eq!(var_column(&ds, "gene_ids"), pick(&ids));
        assert_eq!(var_column(&ds, "gene_name"), pick(&names));
        assert_eq!(var_column(&ds, "feature_types"), pick(&types));
        let barcodes: Vec<Value> = serde_json::from_value(want["barcodes"].clone()).unwrap();
        assert_eq!(obs_column(&ds, "barcode"), barcodes);
        assert_eq!(ds.manifest().metadata[OBS_INDEX_KEY], "barcode");
    }
    let err = run(
        &fixture("cellranger.h5"),
        &out_dir("cr-none"),
        options().with_feature_type(Some("CRISPR Guide Capture".into())),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("Antibody Capture, Gene Expression"), "{err}");
}

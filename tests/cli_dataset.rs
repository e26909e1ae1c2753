//! The dataset commands end to end: `verify` exit status and named rules on
//! the corpus, `cat` output, `info`, `convert`.

mod common;

use common::{expected_csr, run_cli as deltacells, testdata};

#[test]
fn verify_exits_non_zero_and_names_the_rule_on_every_rejected_case() {
    let dir = testdata().join("deltacells/corpus");
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
            _ => "",
        }
    };
    for case in common::corpus_cases("dataset") {
        let name = case["name"].as_str().unwrap();
        let path = dir.join(case["path"].as_str().unwrap());
        let (ok, _, stderr) = deltacells(&["verify", path.to_str().unwrap()]);
        match case["expect"].as_str().unwrap() {
            "accept" => assert!(ok, "{name}: {stderr}"),
            _ => {
                assert!(!ok, "{name}: verify accepted a broken dataset");
                assert!(
                    stderr.contains(words(name)),
                    "{name}: {stderr:?} does not name the rule"
                );
            }
        }
    }
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
}

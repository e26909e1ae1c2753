//! The `deltacells tile` commands end to end: exit status, output, error text.

mod common;

use common::{expected_csr, run_cli as deltacells, testdata};

fn path(rel: &str) -> String {
    testdata().join(rel).display().to_string()
}

#[test]
fn verify_accepts_golden_tiles_and_names_the_broken_rule() {
    let (ok, stdout, _) = deltacells(&[
        "tile",
        "verify",
        "--verbose",
        &path("deltacells/tiles/gap_exceptions_70k.dct"),
    ]);
    assert!(ok);
    assert!(
        stdout.contains("kernel backend:")
            && stdout.contains("ok (120 cells, 295621 nonzeros, 70000 genes, 8 chunks)"),
        "{stdout}"
    );
    let (ok, _, stderr) = deltacells(&[
        "tile",
        "verify",
        &path("deltacells/corpus/exc_positions_duplicate.dct"),
    ]);
    assert!(!ok);
    assert!(
        stderr.contains("not above the previous one") && stderr.contains("chunk"),
        "{stderr}"
    );
    let (ok, _, stderr) = deltacells(&[
        "tile",
        "verify",
        "--genes",
        "100",
        &path("deltacells/tiles/one_cell.dct"),
    ]);
    assert!(!ok && stderr.contains("n_genes = 36601"), "{stderr}");
    let (ok, _, stderr) = deltacells(&["tile", "verify", "/nonexistent/tile.dct"]);
    assert!(!ok && stderr.contains("/nonexistent/tile.dct"), "{stderr}");
}

#[test]
fn every_backend_verifies_and_unknown_ones_are_refused() {
    for b in deltacells::Backend::available() {
        let (ok, stdout, stderr) = deltacells(&[
            "--kernel",
            b.name(),
            "tile",
            "verify",
            "-v",
            &path("deltacells/tiles/heavy_values.dct"),
        ]);
        assert!(ok, "{b}: {stderr}");
        assert!(stdout.contains(&format!("kernel backend: {b}")));
    }
    let (ok, _, stderr) = deltacells(&[
        "--kernel",
        "sse9",
        "tile",
        "verify",
        &path("deltacells/tiles/one_cell.dct"),
    ]);
    assert!(!ok && stderr.contains("sse9"), "{stderr}");
}

#[test]
fn cat_prints_every_nonzero_in_cell_then_gene_order() {
    let (ok, stdout, _) = deltacells(&["tile", "cat", &path("deltacells/tiles/empty_cells.dct")]);
    assert!(ok);
    let expected = expected_csr(&testdata().join("deltacells/tiles/empty_cells.npz"));
    let mut lines = stdout.lines();
    for (cell, w) in expected.indptr.windows(2).enumerate() {
        for j in w[0] as usize..w[1] as usize {
            let want = format!("{cell}\t{}\t{}", expected.indices[j], expected.values[j]);
            assert_eq!(lines.next(), Some(want.as_str()));
        }
    }
    assert_eq!(lines.next(), None);
}

#[test]
fn inspect_reports_exceptions_and_ratio() {
    let (ok, stdout, _) = deltacells(&[
        "tile",
        "inspect",
        &path("deltacells/tiles/gap_exceptions_70k.dct"),
    ]);
    assert!(ok);
    assert!(stdout.contains("exceptions: 5 value, 3 gap"), "{stdout}");
    assert!(stdout.contains("bytes per nonzero"), "{stdout}");
}

/// A device or a directory is refused before anything is read: `/dev/zero`
/// had been read whole, without end.
#[test]
fn files_that_are_not_regular_are_refused() {
    for sub in ["inspect", "verify", "cat"] {
        for file in ["/dev/zero", "/tmp"] {
            let (ok, _, stderr) = deltacells(&["tile", sub, file]);
            assert!(
                !ok && stderr.contains("not a regular file"),
                "{sub} {file}: {stderr}"
            );
        }
    }
}

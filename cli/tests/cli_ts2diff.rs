//! `deltacells ts2diff` end to end: pages encoded from text equal the Java
//! reference's, decoding prints the reference's values, and bad input fails
//! with the position named.

// The runner alone: ts2diff_vectors brings the test data helpers.
#[path = "common/runner.rs"]
mod runner;
#[path = "../../tests/ts2diff_vectors/mod.rs"]
mod ts2diff_vectors;

use ts2diff_vectors::vectors;

fn cli(args: &[&str], stdin: &[u8]) -> (bool, Vec<u8>, String) {
    let args: Vec<&str> = std::iter::once("ts2diff")
        .chain(args.iter().copied())
        .collect();
    let out = runner::with_stdin(&args, stdin);
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_encodes_and_decodes_like_the_library() {
    let v = vectors()
        .into_iter()
        .find(|v| v.id == "mixed_forms_small_f64")
        .unwrap();
    let input: String = v.values.iter().map(|b| format!("0x{b:016x}\n")).collect();
    let (ok, page, err) = cli(
        &[
            "encode",
            "--type",
            "double",
            "--mpn",
            &v.mpn.to_string(),
            "-",
        ],
        input.as_bytes(),
    );
    assert!(ok, "{err}");
    assert_eq!(page, v.zero_padding);

    let (ok, out, err) = cli(&["decode", "--type", "double", "--bits"], &v.encoded);
    assert!(ok, "{err}");
    let expected: String = v.decoded.iter().map(|b| format!("0x{b:016x}\n")).collect();
    assert_eq!(String::from_utf8(out).unwrap(), expected);

    // Decimal output is the shortest round-trip form, and reads back.
    let (ok, page, err) = cli(
        &["encode", "--type", "float", "--block-size", "3"],
        b"1.5\n-2.25\n\n1e10\nNaN\n0.1\n",
    );
    assert!(ok, "{err}");
    let (ok, out, err) = cli(&["decode", "--type", "float"], &page);
    assert!(ok, "{err}");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "1.5\n-2.25\n10000000000\nNaN\n0.1\n"
    );

    let (ok, _, err) = cli(&["decode", "--type", "float"], &[0x82]);
    assert!(!ok);
    assert!(
        err.contains("truncated page marker varint at byte 0"),
        "{err}"
    );
    let (ok, _, err) = cli(&["encode", "--type", "float"], b"1.5\nabc\n");
    assert!(!ok);
    assert!(err.contains("line 2"), "{err}");
}

//! `deltacells xdelta` end to end: strings decode to the values they hold,
//! numbers in text encode to the expected strings, and bad input or a value
//! limit fails with the reason named.

mod common;

fn cli(args: &[&str], stdin: &str) -> (bool, String, String) {
    let out = common::runner::with_stdin(args, stdin.as_bytes());
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn cli_decodes_and_encodes() {
    let (ok, out, _) = cli(&["xdelta", "decode", "v1,d1,/10,+50:0,1,n,2"], "");
    assert!(ok);
    assert_eq!(out, "50\n50.1\nnull\n50.3\n");
    let (ok, out, _) = cli(&["xdelta", "decode", "--kernel", "scalar"], "d,b0:1,,n2\n");
    assert!(ok);
    assert_eq!(out, "1\n1\n1\n1\n");
    // A string may start with `-`: it is the positional argument, not a flag.
    let (ok, out, err) = cli(&["xdelta", "decode", "-7,b0:-45,-23,,n1,32,,"], "");
    assert!(ok, "{err}");
    assert_eq!(out, "-52\n-30\n-7\n-7\n25\n-7\n-7\n");
    let (ok, _, err) = cli(
        &[
            "xdelta",
            "decode",
            "--max-values",
            "2",
            "-7,b0:-45,-23,,n1,32,,",
        ],
        "",
    );
    assert!(!ok && err.contains("limit of 2"), "{err}");
    let (ok, _, err) = cli(&["xdelta", "decode", "v1:01"], "");
    assert!(!ok && err.contains("byte 4"), "{err}");
    let (ok, _, err) = cli(&["xdelta", "decode", "--max-values", "5", "v1:0n6"], "");
    assert!(!ok && err.contains("limit of 5"), "{err}");
    let (ok, out, _) = cli(
        &["xdelta", "encode", "--precision", "1"],
        "50 50.1, 50.3\n50.2 49.9 50.1\n",
    );
    assert!(ok);
    assert_eq!(out, "v1,/10:500,1,2,-1,-3,2\n");
    let (ok, out, _) = cli(&["xdelta", "encode"], "null\n1\n2\nnull\n3\n");
    assert!(ok);
    assert_eq!(out, "v1:n,1,,n,1\n");
    let (ok, _, err) = cli(&["xdelta", "encode"], "1 x\n");
    assert!(!ok && err.contains("`x`"), "{err}");
    // An empty field is no value dropped in silence; a comma at the end is.
    for empty in ["1,2,,3", "1, ,2\n", ",1"] {
        let (ok, _, err) = cli(&["xdelta", "encode"], empty);
        assert!(!ok && err.contains("empty field"), "{empty:?}: {err}");
    }
    let (ok, out, _) = cli(&["xdelta", "encode"], "1,2,3,\n");
    assert!(ok);
    assert_eq!(out, "v1:1,,\n");
}

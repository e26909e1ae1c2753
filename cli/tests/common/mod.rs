//! Helpers of the command-line tool's integration tests: the binary as a
//! child process, and the library's own test helpers (where the shared test
//! data lies, the golden `.npz` expectations), included from its tests/.
#![allow(dead_code)]

#[path = "../../../tests/common/mod.rs"]
mod library;
pub mod runner;

// Every helper of the library's tests, whichever a test uses.
#[allow(unused_imports)]
pub use library::*;

/// Runs the `deltacells` binary: (success, stdout, stderr).
pub fn run_cli(args: &[&str]) -> (bool, String, String) {
    let (code, stdout, stderr) = run_cli_code(args);
    (code == Some(0), stdout, stderr)
}

/// Runs the `deltacells` binary: (exit code, `None` when killed by a signal; stdout; stderr).
pub fn run_cli_code(args: &[&str]) -> (Option<i32>, String, String) {
    let out = runner::deltacells().args(args).output().expect("runs");
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

//! The `deltacells` binary as a child process of a test. When cargo runs the
//! tests through a target runner (`CARGO_TARGET_<TRIPLE>_RUNNER`, as the NEON
//! CI part does with qemu-user for aarch64), the child goes through the same
//! runner: a binary built for another architecture cannot be executed directly.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// A command that runs the `deltacells` binary built with these tests.
pub fn deltacells() -> Command {
    let runner = std::env::var(concat!(
        "CARGO_TARGET_",
        env!("DELTACELLS_TARGET_ENV"),
        "_RUNNER"
    ))
    .unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut cmd = Command::new(program);
            cmd.args(words).arg(env!("CARGO_BIN_EXE_deltacells"));
            cmd
        }
        None => Command::new(env!("CARGO_BIN_EXE_deltacells")),
    }
}

/// Runs the `deltacells` binary with `args`, `stdin` as its standard input,
/// and waits for it (the codec tests' use; other test crates load the runner
/// without calling it).
#[allow(dead_code)]
pub fn with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = deltacells()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

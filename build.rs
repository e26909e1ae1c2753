//! Records the git revision and the compiler version for `deltacells --version`
//! and bench reports (the zstd version is asked of the linked library at run
//! time instead). Both are read, never guessed: "unknown" when unavailable.

use std::process::Command;

fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

fn main() {
    let rev = first_line("git", &["rev-parse", "--short=12", "HEAD"]);
    println!("cargo:rustc-env=DELTACELLS_GIT_REVISION={rev}");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    println!(
        "cargo:rustc-env=DELTACELLS_RUSTC_VERSION={}",
        first_line(&rustc, &["--version"])
    );
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
}

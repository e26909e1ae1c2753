//! The `deltacells` command-line tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod ts2diff_cmd;
mod xdelta_cmd;

#[derive(Parser, Debug)]
#[command(name = "deltacells", version = LONG_VERSION, about = "Store and decode huge single-cell count matrices")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// TsFile FLOAT/DOUBLE TS_2DIFF pages.
    #[command(subcommand)]
    Ts2diff(ts2diff_cmd::Command),
    /// XDelta text-encoded number lists.
    #[command(subcommand)]
    Xdelta(xdelta_cmd::Command),
}

const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("DELTACELLS_GIT_REVISION"),
    ", ",
    env!("DELTACELLS_RUSTC_VERSION"),
    ")"
);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ts2diff(cmd) => ts2diff_cmd::run(cmd),
        Command::Xdelta(cmd) => xdelta_cmd::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("deltacells: {e}");
            ExitCode::FAILURE
        }
    }
}

//! The `deltacells` command-line tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use deltacells::Backend;

mod demo_cmd;
mod output;
mod tile_cmd;
mod ts2diff_cmd;
mod xdelta_cmd;

const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("DELTACELLS_GIT_REVISION"),
    ", ",
    env!("DELTACELLS_RUSTC_VERSION"),
    ")"
);

#[derive(Parser, Debug)]
#[command(name = "deltacells", version = LONG_VERSION, about = "Store and decode huge single-cell count matrices")]
struct Cli {
    /// Kernel backend: scalar, avx2, avx512 or neon (default: DELTACELLS_KERNEL, else the best this CPU has).
    #[arg(long, global = true)]
    kernel: Option<Backend>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate a realistic synthetic block, encode, verify and time it.
    Demo(demo_cmd::DemoArgs),
    /// Inspect, verify or print one tile file.
    #[command(subcommand)]
    Tile(tile_cmd::Command),
    /// TsFile FLOAT/DOUBLE TS_2DIFF pages.
    #[command(subcommand)]
    Ts2diff(ts2diff_cmd::Command),
    /// XDelta text-encoded number lists.
    #[command(subcommand)]
    Xdelta(xdelta_cmd::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = (|| {
        let backend = match cli.kernel {
            Some(b) => b.require()?,
            None => Backend::active()?,
        };
        match cli.command {
            Command::Demo(args) => demo_cmd::run(args, backend),
            Command::Tile(cmd) => tile_cmd::run(cmd, backend),
            Command::Ts2diff(cmd) => ts2diff_cmd::run(cmd),
            Command::Xdelta(cmd) => xdelta_cmd::run(cmd),
        }
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("deltacells: {e}");
            ExitCode::FAILURE
        }
    }
}

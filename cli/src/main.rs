//! The `deltacells` command-line tool.

use std::process::ExitCode;
use std::sync::LazyLock;

use clap::{Parser, Subcommand};
use deltacells::{build_info, Backend};

mod bench_cmd;
mod bench_loop;
mod corpus_bench;
mod corpus_cmd;
mod dataset_cmd;
mod demo_cmd;
mod matrix;
mod model_bench;
mod obs_cmd;
mod output;
mod report;
mod stats_cmd;
mod tile_cmd;
mod ts2diff_cmd;
mod xdelta_cmd;

/// `deltacells --version`: the library's version, git revision and compiler,
/// as its build recorded them.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} (git {}, {})",
        build_info::VERSION,
        build_info::GIT_REVISION,
        build_info::RUSTC_VERSION
    )
});

#[derive(Parser, Debug)]
#[command(name = "deltacells", version = VERSION.as_str(), about = "Store and decode huge single-cell count matrices")]
struct Cli {
    /// Kernel backend: scalar, avx2, avx512 or neon (default: DELTACELLS_KERNEL, else the best this CPU has).
    #[arg(long, global = true)]
    kernel: Option<Backend>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate a realistic synthetic dataset, write it, verify it, and bench it.
    Demo(demo_cmd::DemoArgs),
    /// Summary of a dataset.
    Info(dataset_cmd::InfoArgs),
    /// Check a dataset completely: manifest, side files, every tile decoded.
    Verify(dataset_cmd::VerifyArgs),
    /// Per-gene statistics of a dataset (cells expressing, sums, means, variances, lower medians of normalized counts) as Parquet.
    Stats(stats_cmd::StatsArgs),
    /// Print cells of a dataset as TSV or Matrix Market.
    Cat(dataset_cmd::CatArgs),
    /// Convert 10x folders, .npz, .h5ad, Cell Ranger .h5 files or datasets into one dataset.
    Convert(dataset_cmd::ConvertArgs),
    /// Decode throughput of a dataset against zstd-only, scans and batches.
    Bench(bench_cmd::BenchArgs),
    /// Inspect, verify or print one tile file.
    #[command(subcommand)]
    Tile(tile_cmd::Command),
    /// TsFile FLOAT/DOUBLE TS_2DIFF pages.
    #[command(subcommand)]
    Ts2diff(ts2diff_cmd::Command),
    /// XDelta text-encoded number lists.
    #[command(subcommand)]
    Xdelta(xdelta_cmd::Command),
    /// Per-cell metadata: schema summary, values as JSON lines, localize columns.
    Obs(obs_cmd::ObsArgs),
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
            Command::Info(args) => dataset_cmd::info(args, backend),
            Command::Verify(args) => dataset_cmd::verify(args, backend),
            Command::Stats(args) => stats_cmd::run(args, backend),
            Command::Cat(args) => dataset_cmd::cat(args, backend),
            Command::Convert(args) => dataset_cmd::convert_cmd(args),
            Command::Bench(args) => bench_cmd::run(args, backend),
            Command::Tile(cmd) => tile_cmd::run(cmd, backend),
            Command::Ts2diff(cmd) => ts2diff_cmd::run(cmd, backend),
            Command::Xdelta(cmd) => xdelta_cmd::run(cmd, backend),
            Command::Obs(args) => obs_cmd::run(args),
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

//! `deltacells stats`: per-gene statistics of a dataset as `gene_stats.parquet`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use deltacells::dataset::gene_stats::gene_keys;
use deltacells::{Backend, Error, Result};

use crate::dataset_cmd::open;
use crate::output::{out_err, Out};

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Dataset location: a directory or a URL (s3://bucket/prefix, gs://, az://, https://).
    dir: PathBuf,
    /// Where to write the statistics (Parquet).
    #[arg(long, default_value = "gene_stats.parquet")]
    out: PathBuf,
    /// The var.parquet column that keys the genes (default: the var names).
    #[arg(long)]
    gene_key: Option<String>,
    /// Decode threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

/// Computes the statistics of every cell and writes them to `--out`.
pub fn run(args: StatsArgs, backend: Backend) -> Result<()> {
    let ds = open(&args.dir, backend, args.threads)?;
    let (key, keys) = gene_keys(&ds, args.gene_key.as_deref())?;
    let stats = ds.gene_stats()?;
    let bytes = stats.table().to_parquet(&key, &keys)?;
    std::fs::write(&args.out, bytes)
        .map_err(|e| Error::io(format!("writing {}", args.out.display()), e))?;
    let mut out = Out::stdout();
    writeln!(
        out,
        "{}: statistics of {} genes over {} cells written to {}",
        args.dir.display(),
        stats.n_genes(),
        stats.n_obs(),
        args.out.display()
    )
    .map_err(out_err)?;
    out.finish()
}

//! `deltacells stats`: per-gene statistics of a dataset or a corpus as
//! `gene_stats.parquet`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use deltacells::dataset::gene_stats::gene_keys;
use deltacells::{Backend, Error, Result};

use crate::corpus_cmd::{self, is_corpus_file};
use crate::dataset_cmd::open;
use crate::output::{out_err, Out};

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Dataset location: a directory or a URL (s3://bucket/prefix, gs://, az://, https://); or a
    /// corpus file (statistics over its vocabulary, each member's cells normalized by their totals
    /// over all of that member's genes).
    dir: PathBuf,
    /// Where to write the statistics (Parquet).
    #[arg(long, default_value = "gene_stats.parquet")]
    out: PathBuf,
    /// The var.parquet column that keys the genes (default: the var names). A corpus's genes are
    /// keyed as the corpus keys them.
    #[arg(long)]
    gene_key: Option<String>,
    /// Decode threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

/// Computes the statistics of every cell and writes them to `--out`.
pub fn run(args: StatsArgs, backend: Backend) -> Result<()> {
    let ((key, keys), stats) = if is_corpus_file(&args.dir) {
        let corpus = corpus_cmd::open(&args.dir, backend, args.threads)?;
        let own = corpus.spec().gene_key.clone();
        if args.gene_key.is_some() && args.gene_key != own {
            return Err(Error::Input(format!(
                "a corpus's genes are keyed as the corpus keys them ({}): --gene-key applies to datasets",
                own.as_deref().unwrap_or("its members' var names")
            )));
        }
        (corpus.gene_keys(), corpus.gene_stats()?)
    } else {
        let ds = open(&args.dir, backend, args.threads)?;
        (gene_keys(&ds, args.gene_key.as_deref())?, ds.gene_stats()?)
    };
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

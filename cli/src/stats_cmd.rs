//! `deltacells stats`: per-gene statistics of a dataset or a corpus as
//! `gene_stats.parquet`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use deltacells::dataset::gene_stats::gene_keys;
use deltacells::storage::{resolved, Location, Store};
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
    /// Where to write the statistics (Parquet): a file, or an object's URL (s3://bucket/key).
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
    let corpus = is_corpus_file(&args.dir)
        .then(|| corpus_cmd::open(&args.dir, backend, args.threads))
        .transpose()?;
    // What --out must not replace or land in: the corpus file and its
    // members, or the dataset.
    let read: Vec<PathBuf> = match &corpus {
        Some(c) => std::iter::once(args.dir.clone())
            .chain(c.spec().locations.iter().map(PathBuf::from))
            .collect(),
        None => vec![args.dir.clone()],
    };
    // Before the pass over every cell, not after it.
    let (store, name, local_dir) = destination(&args.out, &read)?;
    let ((key, keys), stats) = match &corpus {
        Some(corpus) => {
            let own = corpus.spec().gene_key.clone();
            if args.gene_key.is_some() && args.gene_key != own {
                return Err(Error::Input(format!(
                    "a corpus's genes are keyed as the corpus keys them ({}): --gene-key applies to datasets",
                    own.as_deref().unwrap_or("its members' var names")
                )));
            }
            (corpus.gene_keys(), corpus.gene_stats()?)
        }
        None => {
            let ds = open(&args.dir, backend, args.threads)?;
            // The statistics first: their pass checks the tiles against the
            // manifest before its gene count sizes anything.
            let stats = ds.gene_stats()?;
            (gene_keys(&ds, args.gene_key.as_deref())?, stats)
        }
    };
    let bytes = stats.table().to_parquet(&key, &keys)?;
    store.put(&name, &bytes)?;
    // A run killed while it wrote left its temporary file beside the output.
    if let Some(dir) = local_dir {
        deltacells::storage::remove_abandoned_temporaries(&dir, &name)?;
    }
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

/// The store and key `--out` names, and for a local file its directory: the
/// object at a URL, or a local file,
/// which the store writes under a temporary name and renames (a killed run
/// leaves no half-written file). A symbolic link is followed (the file it
/// names is replaced, not the link). A directory or any other file that is
/// not a regular one (a FIFO, a device) is refused, since the rename would
/// put a regular file in its place, as is any of the files read (`read`: a
/// corpus file and its members, or a dataset) or a file inside one of them,
/// and a URL that names no object.
fn destination(out: &Path, read: &[PathBuf]) -> Result<(Arc<dyn Store>, String, Option<PathBuf>)> {
    let bad = |why: &str| Error::Input(format!("--out {}: {why}", out.display()));
    match Location::parse(out) {
        Location::Local(path) => {
            if path.is_symlink() && !path.exists() {
                return Err(bad("is a link to nothing"));
            }
            let path = resolved(&path);
            if path.is_dir() {
                return Err(bad("is a directory, not a file"));
            }
            if path.exists() && !path.is_file() {
                return Err(bad("is not a regular file (a FIFO or a device?)"));
            }
            let local = read.iter().filter_map(|r| match Location::parse(r) {
                Location::Local(p) => Some(resolved(&p)),
                Location::Url(_) => None,
            });
            for r in local {
                if path == r || path.starts_with(&r) {
                    return Err(bad("is, or lies inside, what it describes"));
                }
            }
            let name = path
                .file_name()
                .ok_or_else(|| bad("names no file"))?
                .to_string_lossy()
                .into_owned();
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
            let dir = parent.unwrap_or(Path::new(".")).to_path_buf();
            Ok((Location::Local(dir.clone()).store()?, name, Some(dir)))
        }
        Location::Url(url) => {
            let (dir, name) = url
                .rsplit_once('/')
                .filter(|(dir, name)| !name.is_empty() && !dir.ends_with('/'))
                .ok_or_else(|| bad("names no object"))?;
            Ok((Location::parse(dir).store()?, name.to_string(), None))
        }
    }
}

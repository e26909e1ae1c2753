//! `deltacells info` on a corpus file: several datasets read as one.

use std::io::Write;
use std::path::Path;

use deltacells::dataset::OpenOptions;
use deltacells::engine::EngineConfig;
use deltacells::{Backend, Corpus, Result};

use crate::output::{out_err, Out};

/// Whether `location` names a corpus file (a dataset is a directory or a URL).
pub fn is_corpus_file(location: &Path) -> bool {
    location.is_file()
}

/// Opens the corpus file `path` with the chosen kernel backend (and
/// `threads` decode threads, default all cores).
pub fn open(path: &Path, backend: Backend, threads: Option<usize>) -> Result<Corpus> {
    let mut engine = EngineConfig::default().with_backend(Some(backend));
    if let Some(t) = threads {
        engine.threads = t;
    }
    Corpus::open_with(path, OpenOptions::default().with_engine(engine))
}

/// Prints the corpus's shape, its gene space and obs columns, and a line
/// per member.
pub fn info(path: &Path, backend: Backend) -> Result<()> {
    let corpus = open(path, backend, None)?;
    let spec = corpus.spec();
    let mut out = Out::stdout();
    let w = &mut out;
    writeln!(
        w,
        "{}: corpus of {} datasets, {} cells x {} genes",
        path.display(),
        corpus.members().len(),
        corpus.n_cells(),
        corpus.n_genes()
    )
    .map_err(out_err)?;
    writeln!(
        w,
        "genes: {}, matched by {}",
        spec.genes.describe(),
        spec.gene_key.as_deref().unwrap_or("var_names")
    )
    .map_err(out_err)?;
    writeln!(w, "obs: {}", corpus.obs_schema().names().join(", ")).map_err(out_err)?;
    for (m, member) in corpus.members().iter().enumerate() {
        let ds = member.dataset();
        let mapped = member.mapping().map_or("unmapped".to_string(), |g| {
            format!("{} of its genes mapped", g.genes().len())
        });
        writeln!(
            w,
            "member {m} {}: {} cells x {} genes, cells from {}, {mapped}: {}",
            member.name(),
            ds.n_cells(),
            ds.n_genes(),
            corpus.limits()[m],
            member.location()
        )
        .map_err(out_err)?;
    }
    out.finish()
}

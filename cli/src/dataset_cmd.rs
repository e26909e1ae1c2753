//! `deltacells info|verify|cat|convert`: whole datasets.

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use clap::{Args, ValueEnum};
use deltacells::dataset::build::{build, plan_inputs, BuildInput};
use deltacells::dataset::ingest::{ConvertOptions, Layer, Phase, Progress};
use deltacells::dataset::vocab::GeneSpace;
use deltacells::dataset::{Dataset, GeneSelection, OpenOptions, WriterConfig};
use deltacells::engine::EngineConfig;
use deltacells::{Backend, Csr, Error, Result};
use indicatif::{ProgressBar, ProgressState, ProgressStyle};

use crate::matrix::Matrix;
use crate::output::{out_err, Out};

/// Opens `dir` with the chosen kernel backend (and default threads).
pub fn open(dir: &Path, backend: Backend, threads: Option<usize>) -> Result<Dataset> {
    let mut engine = EngineConfig::default().with_backend(Some(backend));
    if let Some(t) = threads {
        engine.threads = t;
    }
    Dataset::open_with(dir, OpenOptions::default().with_engine(engine))
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Dataset location: a directory or a URL (s3://bucket/prefix, gs://, az://, https://); or a
    /// corpus file (see docs/corpus-format.md).
    dir: PathBuf,
    /// Also print the kernel backend and per-tile figures.
    #[arg(long, short)]
    verbose: bool,
}

pub fn info(args: InfoArgs, backend: Backend) -> Result<()> {
    if crate::corpus_cmd::is_corpus_file(&args.dir) {
        return crate::corpus_cmd::info(&args.dir, backend);
    }
    let ds = open(&args.dir, backend, None)?;
    let m = ds.manifest();
    let nnz: u64 = m.tile_nnz.iter().sum();
    let bytes: u64 = m.tile_bytes.iter().sum();
    let mut out = Out::stdout();
    let w = &mut out;
    writeln!(
        w,
        "{}: {} cells x {} genes, {nnz} nonzeros",
        args.dir.display(),
        m.n_cells,
        m.n_genes
    )
    .map_err(out_err)?;
    writeln!(
        w,
        "tiles: {} of {} cells, {} chunks each, zstd level {}",
        m.n_tiles(),
        m.tile_size,
        m.n_chunks,
        m.zstd_level
    )
    .map_err(out_err)?;
    let per_cell = if m.n_cells > 0 {
        nnz as f64 / m.n_cells as f64
    } else {
        0.0
    };
    let per_nz = if nnz > 0 {
        bytes as f64 / nnz as f64
    } else {
        0.0
    };
    writeln!(w, "size: {bytes} bytes of tiles, {per_nz:.3} bytes per nonzero, {per_cell:.1} nonzeros per cell").map_err(out_err)?;
    writeln!(
        w,
        "side files: gene_order {}, var_names {}, var.parquet {}, obs {}",
        m.has_gene_order,
        m.has_var_names,
        m.has_var_table,
        m.obs.as_ref().map_or("no".to_string(), |o| format!(
            "{} shards, fingerprint {}",
            o.shard_bytes.len(),
            o.fingerprint
        ))
    )
    .map_err(out_err)?;
    if !m.metadata.is_empty() {
        writeln!(
            w,
            "metadata: {}",
            serde_json::Value::Object(m.metadata.clone())
        )
        .map_err(out_err)?;
    }
    if args.verbose {
        writeln!(
            w,
            "kernel backend: {} ({} threads, pinned: {})",
            ds.engine().backend(),
            ds.engine().threads(),
            ds.engine().pinned()
        )
        .map_err(out_err)?;
        for t in 0..m.n_tiles() {
            writeln!(
                w,
                "tile {t:>6}: {:>8} cells {:>12} nonzeros {:>12} bytes",
                m.tile_cells[t], m.tile_nnz[t], m.tile_bytes[t]
            )
            .map_err(out_err)?;
        }
    }
    out.finish()
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Dataset location: a directory or a URL (s3://bucket/prefix, gs://, az://, https://); or a
    /// corpus file, whose members are verified in turn.
    dir: PathBuf,
}

pub fn verify(args: VerifyArgs, backend: Backend) -> Result<()> {
    let mut out = Out::stdout();
    if crate::corpus_cmd::is_corpus_file(&args.dir) {
        // A corpus is its members: each is verified whole, in turn.
        let corpus = crate::corpus_cmd::open(&args.dir, backend, None)?;
        for member in corpus.members() {
            verified(&mut out, member.location(), member.dataset())?;
        }
    } else {
        let ds = open(&args.dir, backend, None)?;
        verified(&mut out, &args.dir.display().to_string(), &ds)?;
    }
    out.finish()
}

/// Verifies `ds` (at `location`) and prints its line.
fn verified(out: &mut Out, location: &str, ds: &Dataset) -> Result<()> {
    let r = ds.verify()?;
    writeln!(
        out,
        "{location}: ok ({} tiles, {} cells, {} nonzeros, {} bytes; kernel {})",
        r.tiles,
        r.cells,
        r.nonzeros,
        r.bytes,
        ds.engine().backend()
    )
    .map_err(out_err)
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CatFormat {
    /// `cell<TAB>gene<TAB>count`, one line per nonzero: the dataset's cell and gene (column)
    /// numbers, with --genes too.
    Tsv,
    /// Matrix Market coordinate (cells x genes, 1-based): rows the cells printed, columns the
    /// genes kept (in --genes order).
    Mtx,
}

#[derive(Args, Debug)]
pub struct CatArgs {
    /// Dataset location: a directory or a URL (s3://bucket/prefix, gs://, az://, https://); or a
    /// corpus file (see docs/corpus-format.md), whose columns are its gene vocabulary.
    dir: PathBuf,
    /// Cells as `A:B` (half-open; either end may be left out), `A` or a comma-separated list of
    /// those [default: the first 100]
    #[arg(long)]
    cells: Option<String>,
    /// Keep only these genes: output columns (numbers) or names from var_names.txt, comma-separated.
    #[arg(long)]
    genes: Option<String>,
    #[arg(long, value_enum, default_value_t = CatFormat::Tsv)]
    format: CatFormat,
}

/// Parses `A:B,C,D:E` into spans of cells of `0..n_cells` (`C` is
/// `C:C+1`; `A:` runs to the last cell, `:B` from the first). A span past
/// the last cell or reversed is refused, never clipped to nothing. Spans are
/// never expanded into ids.
pub fn parse_cells(spec: &str, n_cells: u64) -> Result<Vec<Range<u64>>> {
    let bad = |why: String| Error::Input(format!("--cells {spec:?}: {why}"));
    let form = || bad("expected A:B, A, or a comma-separated list of those".into());
    let number = |s: &str, empty: u64| -> Result<u64> {
        match s.trim() {
            "" => Ok(empty),
            s => s.parse().map_err(|_| form()),
        }
    };
    spec.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|part| {
            let (a, b) = match part.split_once(':') {
                Some((a, b)) => (number(a, 0)?, number(b, n_cells)?),
                None => {
                    let c = number(part, 0)?;
                    (c, c.saturating_add(1))
                }
            };
            if a > b && a <= n_cells {
                return Err(bad(format!("{a} > {b}: a span runs up, A:B with A <= B")));
            }
            if a.max(b) > n_cells {
                return Err(bad(format!(
                    "{} is past the last cell ({n_cells} cells)",
                    part.trim()
                )));
            }
            Ok(a..b)
        })
        .collect()
}

/// Most cells read at once by `cat`.
const CAT_PIECE_CELLS: u64 = 1 << 16;

/// Reads `spans` piece by piece (cut at tile boundaries and at
/// [`CAT_PIECE_CELLS`]), calling `f` with each piece's first cell and rows.
fn for_each_piece(
    ds: &impl Matrix,
    spans: &[Range<u64>],
    genes: Option<&GeneSelection>,
    mut f: impl FnMut(u64, &Csr<i32>) -> Result<()>,
) -> Result<()> {
    for span in spans {
        let mut at = span.start;
        while at < span.end {
            let end = span.end.min(ds.tile_end(at)?).min(at + CAT_PIECE_CELLS);
            f(at, &ds.csr(at..end, genes)?)?;
            at = end;
        }
    }
    Ok(())
}

fn selection(ds: &impl Matrix, spec: &str) -> Result<GeneSelection> {
    let items: Vec<&str> = spec.split(',').filter(|s| !s.is_empty()).collect();
    if items.iter().all(|s| s.parse::<u32>().is_ok()) {
        let genes: Vec<u32> = items.iter().map(|s| s.parse().expect("checked")).collect();
        return GeneSelection::new(ds.n_genes(), &genes);
    }
    let names = ds.var_names().ok_or_else(|| {
        Error::Input("gene names given but the dataset has no var_names.txt".into())
    })?;
    GeneSelection::by_names(names, &items)
}

pub fn cat(args: CatArgs, backend: Backend) -> Result<()> {
    if crate::corpus_cmd::is_corpus_file(&args.dir) {
        let corpus = crate::corpus_cmd::open(&args.dir, backend, None)?;
        return cat_of(&corpus, &args);
    }
    cat_of(&open(&args.dir, backend, None)?, &args)
}

/// `cat` of a dataset or a corpus.
fn cat_of(ds: &impl Matrix, args: &CatArgs) -> Result<()> {
    let spans = match &args.cells {
        Some(spec) => parse_cells(spec, ds.n_cells())?,
        None => std::iter::once(0..ds.n_cells().min(100)).collect(),
    };
    let sel = args
        .genes
        .as_deref()
        .map(|g| selection(ds, g))
        .transpose()?;
    let mut out = Out::stdout();
    if let CatFormat::Mtx = args.format {
        // The size line comes first: count in a first pass (the chunks stay
        // in the dataset's cache for the second).
        let (mut rows, mut nnz) = (0u64, 0usize);
        for_each_piece(ds, &spans, sel.as_ref(), |_, csr| {
            rows += csr.n_rows() as u64;
            nnz += csr.nnz();
            Ok(())
        })?;
        let cols = sel
            .as_ref()
            .map_or(u64::from(ds.n_genes()), |s| s.len() as u64);
        writeln!(out, "%%MatrixMarket matrix coordinate integer general").map_err(out_err)?;
        // Quoted: a path may hold a line break, which would end the comment.
        writeln!(
            out,
            "% rows: cells {:?} of {:?}; columns: genes",
            args.cells.as_deref().unwrap_or(":100"),
            args.dir.display().to_string()
        )
        .map_err(out_err)?;
        writeln!(out, "{rows} {cols} {nnz}").map_err(out_err)?;
    }
    // TSV names each gene by its own column, whatever --genes kept.
    let column = |g: i32| sel.as_ref().map_or(g as u32, |s| s.genes()[g as usize]);
    let mut row = 0u64;
    for_each_piece(ds, &spans, sel.as_ref(), |first, csr| {
        for (i, w) in csr.indptr.windows(2).enumerate() {
            for j in w[0] as usize..w[1] as usize {
                let (g, v) = (csr.indices[j], csr.values[j]);
                match args.format {
                    CatFormat::Tsv => {
                        writeln!(out, "{}\t{}\t{v}", first + i as u64, column(g))
                    }
                    CatFormat::Mtx => writeln!(out, "{} {} {v}", row + i as u64 + 1, g + 1),
                }
                .map_err(out_err)?;
            }
        }
        row += csr.n_rows() as u64;
        Ok(())
    })?;
    out.finish()
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// The inputs, then where to write the new dataset (a directory or a URL,
    /// s3://bucket/prefix). Each input is a 10x folder (matrix.mtx[.gz], features.tsv[.gz],
    /// barcodes.tsv[.gz]), a scipy CSR or CSC .npz, an AnnData .h5ad, a Cell Ranger .h5
    /// (the last two need the `hdf5` feature) or a deltacells dataset. Several inputs become
    /// one dataset, their genes matched by --gene-key.
    // One value an occurrence at least, two in all (checked when run): with
    // `2..` an occurrence, options between the paths split them and failed.
    #[arg(required = true, num_args = 1..)]
    paths: Vec<String>,
    /// The var column genes are matched by across inputs (e.g. gene_ids); default the var index.
    #[arg(long)]
    gene_key: Option<String>,
    /// Which genes the output has: union, intersection, or a file of gene keys (one per
    /// line, exactly those in that order).
    #[arg(long, default_value = "union")]
    genes: String,
    /// The obs column naming each cell's input (its file or directory stem); default
    /// dataset_id when there are several inputs.
    #[arg(long)]
    source_column: Option<String>,
    /// Print the build plan (JSON) and stop: the statistics pass runs (inputs that need a
    /// transpose are staged in the output), no tile is written.
    #[arg(long)]
    plan_only: bool,
    /// Tiles per write task (and per obs shard); tasks run in parallel.
    #[arg(long, default_value_t = deltacells::dataset::ingest::DEFAULT_TILES_PER_TASK)]
    tiles_per_task: usize,
    /// Cells per tile.
    #[arg(long, default_value_t = deltacells::dataset::DEFAULT_TILE_SIZE)]
    tile_size: usize,
    /// Chunks per tile (the unit of random access; see the README's "Chunking").
    #[arg(long, default_value_t = deltacells::format::tile_writer::DEFAULT_CHUNKS)]
    chunks: usize,
    /// zstd level.
    #[arg(long, default_value_t = deltacells::format::tile_writer::DEFAULT_LEVEL, allow_negative_numbers = true)]
    level: i32,
    /// Keep the input's gene order instead of sorting genes by decreasing total counts
    /// (skips the first pass over row-ordered inputs).
    #[arg(long)]
    keep_gene_order: bool,
    /// The .h5ad matrix: X, raw (raw/X) or the name of a layer (layers/NAME).
    #[arg(long, default_value = "X")]
    layer: Layer,
    /// Keep only these obs columns (comma-separated), in this order, and each input's cell ids. With several inputs, columns of any of them: an input lacking one has it missing.
    #[arg(long, value_delimiter = ',')]
    obs_columns: Option<Vec<String>>,
    /// Keep only features of this type, e.g. "Gene Expression", dropping antibody or CRISPR
    /// features: by the types of a Cell Ranger .h5, a 10x folder's features.tsv or an .h5ad's
    /// var column feature_types.
    #[arg(long)]
    feature_type: Option<String>,
    /// Where the out-of-core transpose of CSC and Matrix Market inputs keeps its
    /// temporary files (12 bytes per nonzero; default: the system temporary directory).
    #[arg(long)]
    tmp_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

pub fn convert_cmd(args: ConvertArgs) -> Result<()> {
    let (out_dir, inputs) = match args.paths.split_last() {
        Some((out, inputs)) if !inputs.is_empty() => (out, inputs),
        _ => {
            return Err(Error::Input(
                "convert takes the inputs, then where to write the dataset: give both".into(),
            ))
        }
    };
    let inputs = inputs
        .iter()
        .map(|p| BuildInput::detect(p))
        .collect::<deltacells::Result<Vec<_>>>()?;
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    let phase = Mutex::new(None);
    let on_progress = |p: Progress| {
        let mut phase = phase
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *phase != Some(p.phase) {
            *phase = Some(p.phase);
            let name = match p.phase {
                Phase::Counting => "counting genes",
                Phase::Transposing => "transposing",
                Phase::Writing => "writing",
            };
            let template = format!(
                "{name:>14} [{{bar:32}}] {{human_pos}}/{{human_len}} {} ({{rate}}, ETA {{eta}})",
                p.phase.unit()
            );
            let unit = p.phase.unit();
            let style = ProgressStyle::with_template(&template)
                .expect("valid progress template")
                .with_key(
                    "rate",
                    move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{:.0} {unit}/s", s.per_sec());
                    },
                );
            bar.set_style(style);
            bar.reset();
        }
        bar.set_length(p.total);
        bar.set_position(p.done);
    };
    let options = ConvertOptions::default()
        .with_writer(
            WriterConfig::default()
                .with_tile_size(args.tile_size)
                .with_n_chunks(args.chunks)
                .with_level(args.level),
        )
        .with_sort_genes(!args.keep_gene_order)
        .with_layer(args.layer)
        .with_obs_columns(args.obs_columns)
        .with_feature_type(args.feature_type)
        .with_tmp_dir(args.tmp_dir)
        .with_genes(GeneSpace::parse_arg(&args.genes)?)
        .with_gene_key(args.gene_key)
        .with_source_column(args.source_column)
        .with_tiles_per_task(args.tiles_per_task);
    let mut out = Out::stdout();
    if args.plan_only {
        let store = deltacells::storage::open(out_dir)?;
        let plan = plan_inputs(&inputs, &store, out_dir, &options, &on_progress)?;
        bar.finish_and_clear();
        writeln!(out, "{}", plan.to_json()?).map_err(out_err)?;
        return out.finish();
    }
    let manifest = build(&inputs, out_dir, &options, &on_progress)?;
    bar.finish_and_clear();
    writeln!(
        out,
        "{out_dir}: {} cells x {} genes in {} tiles ({} bytes)",
        manifest.n_cells,
        manifest.n_genes,
        manifest.n_tiles(),
        manifest.tile_bytes.iter().sum::<u64>()
    )
    .map_err(out_err)?;
    out.finish()
}

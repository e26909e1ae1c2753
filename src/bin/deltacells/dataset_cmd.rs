//! `deltacells info|verify|cat|convert`: whole datasets.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use deltacells::dataset::convert::{convert, ConvertOptions, Input, Progress};
use deltacells::dataset::{Dataset, GeneSelection, OpenOptions, WriterConfig};
use deltacells::engine::EngineConfig;
use deltacells::{Backend, Error, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::output::{out_err, Out};

/// Opens `dir` with the chosen kernel backend (and default threads).
pub fn open(dir: &Path, backend: Backend, threads: Option<usize>) -> Result<Dataset> {
    let mut engine = EngineConfig {
        backend: Some(backend),
        ..EngineConfig::default()
    };
    if let Some(t) = threads {
        engine.threads = t;
    }
    Dataset::open_with(
        dir,
        OpenOptions {
            engine,
            ..OpenOptions::default()
        },
    )
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Dataset location: a directory or a URL (s3://bucket/prefix, gs://, az://, https://).
    dir: PathBuf,
    /// Also print the kernel backend and per-tile figures.
    #[arg(long, short)]
    verbose: bool,
}

pub fn info(args: InfoArgs, backend: Backend) -> Result<()> {
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
    /// Dataset location: a directory or a URL (s3://bucket/prefix, gs://, az://, https://).
    dir: PathBuf,
}

pub fn verify(args: VerifyArgs, backend: Backend) -> Result<()> {
    let ds = open(&args.dir, backend, None)?;
    let r = ds.verify()?;
    let mut out = Out::stdout();
    writeln!(
        out,
        "{}: ok ({} tiles, {} cells, {} nonzeros, {} bytes; kernel {})",
        args.dir.display(),
        r.tiles,
        r.cells,
        r.nonzeros,
        r.bytes,
        ds.engine().backend()
    )
    .map_err(out_err)?;
    out.finish()
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CatFormat {
    /// `cell<TAB>gene<TAB>count`, one line per nonzero.
    Tsv,
    /// Matrix Market coordinate (cells x genes, 1-based).
    Mtx,
}

#[derive(Args, Debug)]
pub struct CatArgs {
    /// Dataset location: a directory or a URL (s3://bucket/prefix, gs://, az://, https://).
    dir: PathBuf,
    /// Cells as `A:B` (half-open), `A` or a comma-separated list of those.
    #[arg(long, default_value = "0:100")]
    cells: String,
    /// Keep only these genes: output columns (numbers) or names from var_names.txt, comma-separated.
    #[arg(long)]
    genes: Option<String>,
    #[arg(long, value_enum, default_value_t = CatFormat::Tsv)]
    format: CatFormat,
}

/// Parses `A:B,C,D:E` into cell ids.
pub fn parse_cells(spec: &str, n_cells: u64) -> Result<Vec<u64>> {
    let bad = || {
        Error::Input(format!(
            "--cells {spec:?}: expected A:B, A, or a comma-separated list"
        ))
    };
    let mut cells = Vec::new();
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        match part.split_once(':') {
            Some((a, b)) => {
                let a: u64 = if a.is_empty() {
                    0
                } else {
                    a.parse().map_err(|_| bad())?
                };
                let b: u64 = if b.is_empty() {
                    n_cells
                } else {
                    b.parse().map_err(|_| bad())?
                };
                cells.extend(a..b.min(n_cells).max(a));
            }
            None => cells.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cells)
}

fn selection(ds: &Dataset, spec: &str) -> Result<GeneSelection> {
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
    let ds = open(&args.dir, backend, None)?;
    let cells = parse_cells(&args.cells, ds.n_cells())?;
    let sel = args
        .genes
        .as_deref()
        .map(|g| selection(&ds, g))
        .transpose()?;
    let batch = ds.read_cells_genes::<i32>(&cells, sel.as_ref())?;
    let csr = &batch.csr;
    let mut out = Out::stdout();
    if let CatFormat::Mtx = args.format {
        writeln!(out, "%%MatrixMarket matrix coordinate integer general").map_err(out_err)?;
        writeln!(
            out,
            "% rows: cells {} of {}; columns: genes",
            args.cells,
            args.dir.display()
        )
        .map_err(out_err)?;
        writeln!(out, "{} {} {}", cells.len(), csr.n_cols, csr.nnz()).map_err(out_err)?;
    }
    for (row, w) in csr.indptr.windows(2).enumerate() {
        for j in w[0] as usize..w[1] as usize {
            let (g, v) = (csr.indices[j], csr.values[j]);
            match args.format {
                CatFormat::Tsv => writeln!(out, "{}\t{g}\t{v}", cells[row]),
                CatFormat::Mtx => writeln!(out, "{} {} {v}", row + 1, g + 1),
            }
            .map_err(out_err)?;
        }
    }
    out.finish()
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// A 10x folder (matrix.mtx[.gz], features.tsv[.gz], barcodes.tsv[.gz]) or a scipy CSR .npz.
    input: PathBuf,
    /// Where to write the new dataset: a directory or a URL (s3://bucket/prefix).
    out_dir: PathBuf,
    /// Cells per tile.
    #[arg(long, default_value_t = deltacells::dataset::DEFAULT_TILE_SIZE)]
    tile_size: usize,
    /// Chunks per tile.
    #[arg(long, default_value_t = deltacells::format::tile_writer::DEFAULT_CHUNKS)]
    chunks: usize,
    /// zstd level.
    #[arg(long, default_value_t = deltacells::format::tile_writer::DEFAULT_LEVEL, allow_negative_numbers = true)]
    level: i32,
    /// Keep the input's gene order instead of sorting genes by decreasing total counts.
    #[arg(long)]
    keep_gene_order: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

pub fn convert_cmd(args: ConvertArgs) -> Result<()> {
    let input = Input::detect(&args.input)?;
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    let style =
        |template: &str| ProgressStyle::with_template(template).expect("valid progress template");
    let mut phase = None;
    let mut on_progress = |p: Progress| {
        let (name, done, total) = match p {
            Progress::Reading { done, total } => ("reading nonzeros", done, total),
            Progress::Writing { done, total } => ("writing cells", done, total),
        };
        if phase != Some(name) {
            phase = Some(name);
            bar.set_style(style(&format!(
                "{name:>16} [{{bar:40}}] {{pos}}/{{len}} ({{eta}})"
            )));
            bar.set_position(0);
        }
        bar.set_length(total);
        bar.set_position(done);
    };
    let options = ConvertOptions {
        writer: WriterConfig {
            tile_size: args.tile_size,
            n_chunks: args.chunks,
            level: args.level,
            ..WriterConfig::default()
        },
        sort_genes: !args.keep_gene_order,
    };
    let manifest = convert(&input, &args.out_dir, options, &mut on_progress)?;
    bar.finish_and_clear();
    let mut out = Out::stdout();
    writeln!(
        out,
        "{}: {} cells x {} genes in {} tiles ({} bytes)",
        args.out_dir.display(),
        manifest.n_cells,
        manifest.n_genes,
        manifest.n_tiles(),
        manifest.tile_bytes.iter().sum::<u64>()
    )
    .map_err(out_err)?;
    out.finish()
}

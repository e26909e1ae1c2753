//! `deltacells demo`: the main job on built-in defaults. Generates a realistic
//! synthetic dataset, writes it, verifies it (every tile, and sample cells
//! against the generator), and runs the bench on it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use deltacells::dataset::{DatasetWriter, WriterConfig};
use deltacells::obs::{ObsColumn, ObsConfig};
use deltacells::synth::{Synth, SynthConfig};
use deltacells::{Backend, Csr, Error, Result};
use rayon::prelude::*;

use crate::dataset_cmd::open;
use crate::output::{out_err, Out};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Cells to generate.
    #[arg(long, default_value_t = 100_000)]
    cells: u64,
    /// Genes (columns).
    #[arg(long, default_value_t = 36_601)]
    genes: u32,
    /// Cells per tile.
    #[arg(long, default_value_t = 4096)]
    tile_size: usize,
    /// Chunks per tile (the unit of random access).
    #[arg(long, default_value_t = deltacells::format::tile_writer::DEFAULT_CHUNKS)]
    chunks: usize,
    /// zstd level. The writer's default is 19; the demo uses 15, which writes
    /// ~3x faster for ~2% more bytes, so the demo finishes in about a minute on 2 cores.
    #[arg(long, default_value_t = 15, allow_negative_numbers = true)]
    level: i32,
    /// Seed of the synthetic data.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where to write the dataset (default: a temporary directory, removed afterwards).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: DemoArgs, backend: Backend) -> Result<()> {
    for (name, value) in [
        ("--cells", args.cells),
        ("--genes", u64::from(args.genes)),
        ("--tile-size", args.tile_size as u64),
        ("--chunks", args.chunks as u64),
    ] {
        if value == 0 {
            return Err(Error::Input(format!("{name} must be at least 1")));
        }
    }
    let mut out = Out::stdout();
    let (dir, temporary) = match &args.out {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("deltacells-demo-{}", std::process::id())),
            true,
        ),
    };
    let synth = Synth::new(SynthConfig {
        n_genes: args.genes,
        seed: args.seed,
        ..SynthConfig::default()
    });
    writeln!(
        out,
        "writing {} synthetic cells x {} genes to {} (tiles of {}, {} chunks, zstd {})",
        args.cells,
        args.genes,
        dir.display(),
        args.tile_size,
        args.chunks,
        args.level
    )
    .map_err(out_err)?;
    out.flush().map_err(out_err)?;
    let t = Instant::now();
    // Synthetic gene names, and each cell's type as a categorical obs
    // column: what the bench's tokenized and balanced batches read.
    let names = (0..args.genes).map(|g| format!("SYN{g:05}")).collect();
    let types = (0..synth.config().n_types)
        .map(|t| format!("type {t:02}"))
        .collect();
    let codes = (0..args.cells).map(|c| synth.cell_type(c) as i32).collect();
    let obs = ObsConfig::new(vec![ObsColumn::category("cell_type", types, codes)?]);
    let config = WriterConfig::default()
        .with_tile_size(args.tile_size)
        .with_n_chunks(args.chunks)
        .with_level(args.level)
        .with_var_names(Some(names))
        .with_obs(Some(obs));
    let group = config.parallel_tiles.max(1);
    let mut writer = DatasetWriter::create(&dir, args.genes, config)?;
    let starts: Vec<u64> = (0..args.cells).step_by(args.tile_size.max(1)).collect();
    for batch in starts.chunks(group) {
        let blocks: Vec<Csr<i32>> = batch
            .par_iter()
            .map(|&s| synth.block(s, (args.cells - s).min(args.tile_size as u64) as usize))
            .collect();
        for b in &blocks {
            writer.push(b.as_ref())?;
        }
    }
    let manifest = writer.finish()?;
    let nnz: u64 = manifest.tile_nnz.iter().sum();
    let bytes: u64 = manifest.tile_bytes.iter().sum();
    writeln!(
        out,
        "written in {:.1} s: {nnz} nonzeros ({:.0} per cell), {bytes} bytes = {:.3} B/nonzero, {:.2}x smaller than CSR int64/int32/int32",
        t.elapsed().as_secs_f64(),
        nnz as f64 / args.cells.max(1) as f64,
        bytes as f64 / nnz.max(1) as f64,
        (8 * (args.cells + 1) + 8 * nnz) as f64 / bytes.max(1) as f64
    )
    .map_err(out_err)?;

    let t = Instant::now();
    let ds = open(&dir, backend, None)?;
    let report = ds.verify()?;
    // Sample cells must decode to exactly what the generator made.
    let sample: Vec<u64> = (0..16).map(|i| i * args.cells.max(1) / 16).collect();
    let got = ds.read(&sample).csr::<i32>()?;
    for (row, &c) in sample.iter().enumerate() {
        let want = synth.block(c, 1);
        let r = got.csr.indptr[row] as usize..got.csr.indptr[row + 1] as usize;
        if got.csr.indices[r.clone()] != want.indices[..] || got.csr.values[r] != want.values[..] {
            return Err(Error::Input(format!(
                "demo: cell {c} decoded differently from what was written"
            )));
        }
    }
    writeln!(
        out,
        "verified in {:.1} s: {} tiles, every chunk decoded and checked; 16 sample cells match the generator exactly",
        t.elapsed().as_secs_f64(),
        report.tiles
    )
    .map_err(out_err)?;
    out.finish()?;
    drop(ds);

    let result = crate::bench_cmd::for_demo(dir.clone(), backend);
    if temporary {
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    }
    result
}

//! `deltacells demo`: the main job on built-in defaults. Generates a realistic
//! synthetic block, encodes it into a tile, verifies it decodes to exactly the
//! input, and reports sizes and decode throughput against zstd alone.

use std::io::Write;
use std::time::Instant;

use clap::Args;
use deltacells::engine::ChunkDecoder;
use deltacells::format::tile::TileView;
use deltacells::format::tile_writer::TileEncoder;
use deltacells::synth::{Synth, SynthConfig};
use deltacells::{Backend, Error, Result};

use crate::output::{out_err, Out};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Cells in the tile.
    #[arg(long, default_value_t = 4096)]
    cells: usize,
    /// Genes (columns).
    #[arg(long, default_value_t = 36_601)]
    genes: u32,
    /// Chunks per tile.
    #[arg(long, default_value_t = 8)]
    chunks: usize,
    /// zstd level.
    #[arg(long, default_value_t = 19, allow_negative_numbers = true)]
    level: i32,
    /// Seed of the synthetic data.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

pub fn run(args: DemoArgs, backend: Backend) -> Result<()> {
    let mut out = Out::stdout();
    let synth = Synth::new(SynthConfig { n_genes: args.genes, seed: args.seed, ..SynthConfig::default() });
    let t = Instant::now();
    let block = synth.block(0, args.cells);
    let nnz = block.nnz();
    writeln!(
        out,
        "generated {} cells x {} genes, {nnz} nonzeros ({:.0} per cell) in {:.2} s",
        args.cells,
        args.genes,
        nnz as f64 / args.cells.max(1) as f64,
        t.elapsed().as_secs_f64()
    )
    .map_err(out_err)?;
    out.flush().map_err(out_err)?;

    let t = Instant::now();
    let tile = TileEncoder::new().with_chunks(args.chunks).with_level(args.level).encode(block.as_ref())?;
    let encode_s = t.elapsed().as_secs_f64();
    let csr_bytes = 8 * (args.cells + 1) + 8 * nnz;
    writeln!(
        out,
        "encoded: {} bytes = {:.3} B/nonzero, {:.2}x smaller than CSR int64/int32/int32 (zstd {}, {} chunks, {:.2} s)",
        tile.len(),
        tile.len() as f64 / nnz.max(1) as f64,
        csr_bytes as f64 / tile.len() as f64,
        args.level,
        args.chunks,
        encode_s
    )
    .map_err(out_err)?;

    let view = TileView::parse(&tile)?;
    let mut dec = ChunkDecoder::with_backend(backend)?;
    let decoded = dec.decode_tile_to_csr::<i32>(&view)?;
    if decoded != block {
        return Err(Error::Input("demo: the decoded tile differs from its input".into()));
    }
    writeln!(out, "verified: decodes to exactly the input (kernel backend {backend})").map_err(out_err)?;

    let reps = 5;
    let rows = deltacells::measure::tile_decode_report(&[view], reps)?;
    writeln!(out, "\nsingle-thread tile decode, f32 values (best of {reps}):").map_err(out_err)?;
    write!(out, "{}", deltacells::measure::format_rows(&rows)).map_err(out_err)?;
    out.finish()
}

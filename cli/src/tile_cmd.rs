//! `deltacells tile inspect|verify|cat`: one tile file at a time.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use deltacells::engine::ChunkDecoder;
use deltacells::format::frame_content_size;
use deltacells::format::tile::{StreamKind, TileRule, TileView, CHUNK_ENTRY_LEN, HEADER_LEN};
use deltacells::{Backend, Error, Result, TilePosition};

use crate::output::{out_err, Out};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Header, chunk table summary, exception counts and compression ratio.
    Inspect {
        /// The tile file (.dct).
        file: PathBuf,
    },
    /// Full validation and full decode; exits 0 only if the tile is valid.
    Verify(VerifyArgs),
    /// One line per stored nonzero: `cell<TAB>gene<TAB>count` (cell local to the tile).
    Cat {
        /// The tile file (.dct).
        file: PathBuf,
        /// Expected number of genes (checked against the header).
        #[arg(long)]
        genes: Option<u32>,
    },
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The tile file (.dct).
    file: PathBuf,
    /// Expected number of genes (checked against the header).
    #[arg(long)]
    genes: Option<u32>,
    /// Print the kernel backend and per-chunk details.
    #[arg(long, short)]
    verbose: bool,
}

pub fn run(cmd: Command, backend: Backend) -> Result<()> {
    match cmd {
        Command::Inspect { file } => inspect(&file),
        Command::Verify(args) => verify(&args, backend),
        Command::Cat { file, genes } => cat(&file, genes, backend),
    }
}

/// Reads a whole file into 8-byte-aligned memory, so the indptr is borrowed
/// in place. Only a regular file: one read whole from a device or a pipe
/// (`/dev/zero`) has no end to stop at.
pub fn read_tile(path: &Path) -> Result<Vec<u64>> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    if !meta.is_file() {
        return Err(Error::Input(format!(
            "{}: not a regular file (a tile is a file of a dataset's tiles/)",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    let mut words = vec![0u64; bytes.len().div_ceil(8) + 1];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(&bytes);
    words[bytes.len().div_ceil(8)] = bytes.len() as u64;
    Ok(words)
}

/// The bytes of a buffer made by [`read_tile`] (its last word holds the length).
pub fn tile_bytes(words: &[u64]) -> &[u8] {
    let len = words[words.len() - 1] as usize;
    &bytemuck::cast_slice::<u64, u8>(&words[..words.len() - 1])[..len]
}

fn check_genes(view: &TileView<'_>, genes: Option<u32>) -> Result<()> {
    match genes {
        Some(expected) if expected != view.n_genes() => Err(Error::tile(
            TileRule::GenesMismatch {
                tile: view.n_genes(),
                expected,
            },
            TilePosition::offset(32),
        )),
        _ => Ok(()),
    }
}

fn exception_count(view: &TileView<'_>, chunk: usize, kind: StreamKind) -> Result<u64> {
    let e = view.chunk(chunk).extent(kind);
    if e.len == 0 {
        return Ok(0);
    }
    let size = frame_content_size(view.extent_bytes(e)).map_err(|err| {
        Error::tile(
            TileRule::FrameCorrupt {
                stream: kind,
                reason: format!("{err:?}"),
            },
            TilePosition::chunk(chunk),
        )
    })?;
    Ok(size / 8)
}

fn inspect(path: &Path) -> Result<()> {
    let words = read_tile(path)?;
    let view = TileView::parse(tile_bytes(&words))?;
    let h = view.header();
    let mut out = Out::stdout();
    let w = &mut out;
    writeln!(
        w,
        "{}: {} bytes, version {}, CRC-32 {:#010x} ok",
        path.display(),
        h.total_size,
        h.version,
        h.crc32
    )
    .map_err(out_err)?;
    writeln!(
        w,
        "cells {}  nonzeros {}  genes {}  chunks {}",
        h.n_cells, h.nnz, h.n_genes, h.n_chunks
    )
    .map_err(out_err)?;
    let mean = if h.n_cells > 0 {
        h.nnz as f64 / h.n_cells as f64
    } else {
        0.0
    };
    writeln!(
        w,
        "nonzeros per cell: {mean:.1}; indptr at byte {}",
        h.indptr_off
    )
    .map_err(out_err)?;
    writeln!(
        w,
        "\nchunk      cells        nonzeros    gaps B    vals B  vexc  gexc"
    )
    .map_err(out_err)?;
    let (mut stream_bytes, mut n_vexc, mut n_gexc) = (0u64, 0u64, 0u64);
    for (i, c) in view.chunks().enumerate() {
        let (v, g) = (
            exception_count(&view, i, StreamKind::Vexc)?,
            exception_count(&view, i, StreamKind::Gexc)?,
        );
        n_vexc += v;
        n_gexc += g;
        stream_bytes += c.gaps.len + c.vals.len + c.vexc.len + c.gexc.len;
        writeln!(
            w,
            "{i:>5} {:>10} {:>15} {:>9} {:>9} {v:>5} {g:>5}",
            format!("{}..{}", c.cell_lo, c.cell_hi),
            c.nnz(),
            c.gaps.len,
            c.vals.len,
        )
        .map_err(out_err)?;
    }
    let overhead =
        HEADER_LEN as u64 + CHUNK_ENTRY_LEN as u64 * u64::from(h.n_chunks) + 8 * (h.n_cells + 1);
    // What the same block costs as an uncompressed CSR (int64 indptr, int32 indices and counts).
    let csr = 8 * (h.n_cells + 1) + 8 * h.nnz;
    writeln!(w, "\nexceptions: {n_vexc} value, {n_gexc} gap").map_err(out_err)?;
    writeln!(
        w,
        "streams {stream_bytes} B, header+table+indptr {overhead} B"
    )
    .map_err(out_err)?;
    let per_nz = if h.nnz > 0 {
        h.total_size as f64 / h.nnz as f64
    } else {
        0.0
    };
    let ratio = csr as f64 / h.total_size.max(1) as f64;
    writeln!(w, "compression: {per_nz:.3} bytes per nonzero; {ratio:.2}x smaller than CSR int64/int32/int32 ({csr} B)").map_err(out_err)?;
    out.finish()
}

fn verify(args: &VerifyArgs, backend: Backend) -> Result<()> {
    let words = read_tile(&args.file)?;
    let view = TileView::parse(tile_bytes(&words))?;
    check_genes(&view, args.genes)?;
    let mut dec = ChunkDecoder::for_backend(backend)?;
    let mut out = Out::stdout();
    if args.verbose {
        writeln!(out, "kernel backend: {}", dec.backend()).map_err(out_err)?;
    }
    let (mut indices, mut values) = (Vec::new(), Vec::<i32>::new());
    for (i, c) in view.chunks().enumerate() {
        let n = c.nnz() as usize;
        indices.resize(n, 0);
        values.resize(n, 0);
        dec.decode_chunk(&view, i, &mut indices, &mut values)?;
        if args.verbose {
            let max = values.iter().max().copied().unwrap_or(0);
            writeln!(
                out,
                "chunk {i}: cells {}..{}, {n} nonzeros, max count {max}: ok",
                c.cell_lo, c.cell_hi
            )
            .map_err(out_err)?;
        }
    }
    writeln!(
        out,
        "{}: ok ({} cells, {} nonzeros, {} genes, {} chunks)",
        args.file.display(),
        view.n_cells(),
        view.nnz(),
        view.n_genes(),
        view.n_chunks()
    )
    .map_err(out_err)?;
    out.finish()
}

fn cat(path: &Path, genes: Option<u32>, backend: Backend) -> Result<()> {
    let words = read_tile(path)?;
    let view = TileView::parse(tile_bytes(&words))?;
    check_genes(&view, genes)?;
    let csr = ChunkDecoder::for_backend(backend)?.decode_tile_to_csr::<i32>(&view)?;
    let mut out = Out::stdout();
    for (cell, w) in csr.indptr.windows(2).enumerate() {
        let r = w[0] as usize..w[1] as usize;
        for (g, v) in csr.indices[r.clone()].iter().zip(&csr.values[r]) {
            writeln!(out, "{cell}\t{g}\t{v}").map_err(out_err)?;
        }
    }
    out.finish()
}

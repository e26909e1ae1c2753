//! Throughput measurement shared by `deltacells demo`, `deltacells bench` and
//! the criterion benches, so every report compares the same things the same
//! way: decode against zstd-only decompression of the same frames, as a ratio
//! measured in one run (absolute times move on shared machines; ratios less).

use std::time::Instant;

use crate::engine::ChunkDecoder;
use crate::error::Result;
use crate::format::tile::TileView;
use crate::kernels::{Backend, TileKernels};

/// Best (least disturbed) wall time of `reps` runs of `f`, in seconds.
pub fn best_of(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// One row of a decode report.
#[derive(Clone, Debug)]
pub struct Row {
    /// `zstd-only`, or the backend that decoded.
    pub what: String,
    /// Best time for the work, in seconds.
    pub seconds: f64,
    /// Nonzeros processed per second.
    pub nnz_per_s: f64,
    /// Cells processed per second.
    pub cells_per_s: f64,
    /// Throughput relative to zstd-only (1.0 = as fast as decompression alone).
    pub vs_zstd: f64,
}

/// Single-thread decode of whole tiles, `f32` values, for zstd-only and every
/// backend this CPU has, best of `reps`.
pub fn tile_decode_report(tiles: &[TileView<'_>], reps: usize) -> Result<Vec<Row>> {
    let nnz: usize = tiles.iter().map(|t| t.nnz()).sum();
    let cells: usize = tiles.iter().map(|t| t.n_cells()).sum();
    let max_nnz = tiles.iter().map(|t| t.nnz()).max().unwrap_or(0);
    let max_cells = tiles.iter().map(|t| t.n_cells()).max().unwrap_or(0);
    let (mut indptr, mut indices, mut values) = (vec![0i64; max_cells + 1], vec![0i32; max_nnz], vec![0f32; max_nnz]);
    let mut dec = ChunkDecoder::with_backend(Backend::Scalar)?;
    let zstd = best_of(reps, || {
        tiles.iter().try_for_each(|t| (0..t.n_chunks()).try_for_each(|i| dec.decompress_chunk(t, i)))
    })?;
    let row = |what: String, seconds: f64| Row {
        what,
        seconds,
        nnz_per_s: nnz as f64 / seconds,
        cells_per_s: cells as f64 / seconds,
        vs_zstd: zstd / seconds,
    };
    let mut rows = vec![row("zstd-only".into(), zstd)];
    for b in Backend::available().into_iter().filter(|&b| TileKernels::for_backend(b).is_ok()) {
        let mut dec = ChunkDecoder::with_backend(b)?;
        let s = best_of(reps, || {
            tiles.iter().try_for_each(|t| {
                let (n, c) = (t.nnz(), t.n_cells());
                dec.decode_tile(t, &mut indptr[..c + 1], &mut indices[..n], &mut values[..n])
            })
        })?;
        rows.push(row(b.name().into(), s));
    }
    Ok(rows)
}

/// Formats rows as an aligned text table.
pub fn format_rows(rows: &[Row]) -> String {
    let mut s = format!("{:<12} {:>12} {:>12} {:>12}\n", "path", "Mnnz/s", "kcells/s", "vs zstd-only");
    for r in rows {
        s += &format!("{:<12} {:>12.1} {:>12.1} {:>12.2}\n", r.what, r.nnz_per_s / 1e6, r.cells_per_s / 1e3, r.vs_zstd);
    }
    s
}

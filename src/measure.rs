//! Throughput measurement shared by `deltacells demo`, `deltacells bench` and
//! the criterion benches, so every report compares the same things the same
//! way: decode against zstd-only decompression of the same frames, as a ratio
//! measured in one run (absolute times move on shared machines; ratios less).
//!
//! It is public (with the cargo feature `measure`, which the command-line
//! tool turns on) so that a user can measure their own data on their own
//! machine the same way, for instance to choose a thread count or a kernel
//! backend, or to see whether a store keeps the decoders busy:
//! [`scan_report`] reads a whole dataset through its engine,
//! [`tile_decode_report`] decodes tiles in memory with every backend this CPU
//! has, and [`peak_rss`] / [`reset_peak_rss`] track memory (Linux only).

use std::time::Instant;

use crate::engine::ChunkDecoder;
use crate::error::Result;
use crate::format::tile::TileView;
use crate::kernels::Backend;

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
/// backend this CPU has, best of `reps`; then the best backend decoding
/// chunk after chunk into one reused buffer (`"{backend} in cache"`): a
/// whole tile's output (8 bytes per nonzero) is far larger than any cache,
/// and writing it to memory is most of what a decode adds to zstd's time.
pub fn tile_decode_report(tiles: &[TileView<'_>], reps: usize) -> Result<Vec<Row>> {
    let nnz: usize = tiles.iter().map(|t| t.nnz()).sum();
    let cells: usize = tiles.iter().map(|t| t.n_cells()).sum();
    let mut out = TileBuffers::for_tiles(tiles);
    let mut dec = ChunkDecoder::for_backend(Backend::Scalar)?;
    let zstd = best_of(reps, || decompress_tiles(&mut dec, tiles))?;
    let row = |what: String, seconds: f64| Row {
        what,
        seconds,
        nnz_per_s: nnz as f64 / seconds,
        cells_per_s: cells as f64 / seconds,
        vs_zstd: zstd / seconds,
    };
    let mut rows = vec![row("zstd-only".into(), zstd)];
    for b in Backend::available() {
        let mut dec = ChunkDecoder::for_backend(b)?;
        let s = best_of(reps, || out.decode(&mut dec, tiles))?;
        rows.push(row(b.name().into(), s));
    }
    // The best backend again, each chunk decoded into the same buffer, which
    // stays in cache while the chunk is small: the decoder's own cost, with
    // no output written back to memory (what a consumer that uses each chunk
    // as it comes would see).
    let best = Backend::detect();
    let mut dec = ChunkDecoder::for_backend(best)?;
    let s = best_of(reps, || out.decode_chunks(&mut dec, tiles))?;
    rows.push(row(format!("{} in cache", best.name()), s));
    Ok(rows)
}

/// Decompresses every chunk's frames of `tiles` and stops: the zstd-only
/// baseline of a tile decode.
pub fn decompress_tiles(dec: &mut ChunkDecoder, tiles: &[TileView<'_>]) -> Result<()> {
    tiles
        .iter()
        .try_for_each(|t| (0..t.n_chunks()).try_for_each(|i| dec.decompress_chunk(t, i)))
}

/// Output buffers (`f32` values) that hold the largest of some tiles, reused
/// by every decode of them: what [`tile_decode_report`] and a profiler's
/// loop over the same work (`deltacells bench --loop tile`) decode into.
pub struct TileBuffers {
    indptr: Vec<i64>,
    indices: Vec<i32>,
    values: Vec<f32>,
}

impl TileBuffers {
    /// Buffers for the largest of `tiles`.
    pub fn for_tiles(tiles: &[TileView<'_>]) -> TileBuffers {
        let nnz = tiles.iter().map(|t| t.nnz()).max().unwrap_or(0);
        let cells = tiles.iter().map(|t| t.n_cells()).max().unwrap_or(0);
        TileBuffers {
            indptr: vec![0; cells + 1],
            indices: vec![0; nnz],
            values: vec![0.0; nnz],
        }
    }

    /// Decodes each of `tiles` whole into the buffers.
    pub fn decode(&mut self, dec: &mut ChunkDecoder, tiles: &[TileView<'_>]) -> Result<()> {
        tiles.iter().try_for_each(|t| {
            let (n, c) = (t.nnz(), t.n_cells());
            dec.decode_tile(
                t,
                &mut self.indptr[..c + 1],
                &mut self.indices[..n],
                &mut self.values[..n],
            )
        })
    }

    /// Decodes each chunk of `tiles` into the start of the buffers, one
    /// after the other, so that the output stays in cache.
    pub fn decode_chunks(&mut self, dec: &mut ChunkDecoder, tiles: &[TileView<'_>]) -> Result<()> {
        tiles.iter().try_for_each(|t| {
            (0..t.n_chunks()).try_for_each(|i| {
                let n = t.chunk(i).nnz() as usize;
                dec.decode_chunk(t, i, &mut self.indices[..n], &mut self.values[..n])
            })
        })
    }
}

/// Formats rows as an aligned text table.
pub fn format_rows(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<16} {:>12} {:>12} {:>12}\n",
        "path", "Mnnz/s", "kcells/s", "vs zstd-only"
    );
    for r in rows {
        s += &format!(
            "{:<16} {:>12.1} {:>12.1} {:>12.2}\n",
            r.what,
            r.nnz_per_s / 1e6,
            r.cells_per_s / 1e3,
            r.vs_zstd
        );
    }
    s
}

/// A full scan of a dataset on its engine's threads: decode against zstd-only.
#[derive(Clone, Debug)]
pub struct ScanReport {
    /// Worker threads.
    pub threads: usize,
    /// Cells in the dataset, each decoded once per scan.
    pub cells: u64,
    /// Stored nonzeros in the dataset.
    pub nnz: u64,
    /// Best time to fetch, check and decode every tile (f32 values).
    pub decode_s: f64,
    /// Best time to fetch, check and only decompress every tile's frames.
    pub zstd_s: f64,
}

impl ScanReport {
    /// Decode throughput relative to zstd-only.
    pub fn vs_zstd(&self) -> f64 {
        self.zstd_s / self.decode_s
    }
}

/// Scans `ds` `reps` times each way, `group` tiles per request (so every
/// worker has chunks to decode), into one reused buffer, with the tiles of
/// the next groups fetched ahead on the dataset's I/O stage. Both ways fetch
/// and check every tile at every repetition (the dataset's cache is not
/// used), so a small dataset is timed as a large one would be.
pub fn scan_report(ds: &crate::dataset::Dataset, group: usize, reps: usize) -> Result<ScanReport> {
    let mut out = crate::csr::Csr::<f32>::empty(0);
    let decode_s = best_of(reps, || decode_scan(ds, group, &mut out))?;
    let zstd_s = best_of(reps, || zstd_scan(ds, group))?;
    let m = ds.manifest();
    Ok(ScanReport {
        threads: ds.engine().threads(),
        cells: m.n_cells,
        nnz: m.tile_nnz.iter().sum(),
        decode_s,
        zstd_s,
    })
}

/// The tiles of `ds` in requests of `group`, each with the next ones asked
/// of the I/O stage ahead of it (up to its number of requests in flight).
fn groups(
    ds: &crate::dataset::Dataset,
    group: usize,
) -> impl Iterator<Item = (usize, usize)> + use<'_> {
    let group = group.max(1);
    let n_tiles = ds.n_tiles();
    let ahead = ds.fetcher().in_flight().max(group);
    (0..n_tiles).step_by(group).map(move |first| {
        let last = (first + group).min(n_tiles);
        ds.prefetch(last..last + ahead);
        (first, last)
    })
}

/// One scan of [`scan_report`]: fetch, check and decode every tile of `ds`
/// into `out` (`f32` values), `group` tiles per request.
pub fn decode_scan(
    ds: &crate::dataset::Dataset,
    group: usize,
    out: &mut crate::csr::Csr<f32>,
) -> Result<()> {
    let limits = ds.limits();
    for (first, last) in groups(ds, group) {
        ds.read(limits[first]..limits[last])
            .uncached()
            .csr_into(out)?;
    }
    Ok(())
}

/// The baseline scan of [`scan_report`]: fetch and check every tile of `ds`
/// as [`decode_scan`] does, and only decompress its frames.
pub fn zstd_scan(ds: &crate::dataset::Dataset, group: usize) -> Result<()> {
    use rayon::prelude::*;
    let engine = ds.engine();
    for (first, last) in groups(ds, group) {
        let tiles = ds.fetch_group(first..last)?;
        let units: Vec<(usize, usize)> = tiles
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                let n = TileView::revalidated(t.bytes.as_bytes()).map_or(0, |v| v.n_chunks());
                (0..n).map(move |c| (i, c))
            })
            .collect();
        engine.install(|| {
            units.par_iter().try_for_each(|&(i, c)| {
                let view = TileView::revalidated(tiles[i].bytes.as_bytes())?;
                engine.with_decoder(|d| d.decompress_chunk(&view, c))
            })
        })?;
    }
    Ok(())
}

/// Cells per second that `readers` threads get together when each reads
/// [`crate::dataset::Dataset::read`] (as CSR) from the one dataset `ds`, `reads`
/// times, for `per_read` cells drawn uniformly from `cells` (a fixed
/// generator per thread, so every run reads the same cells). One warm-up read
/// of every cell of `cells` comes first, so with a cache that holds them the
/// figure measures the readers, not the store.
pub fn concurrent_read_rate(
    ds: &crate::dataset::Dataset,
    readers: usize,
    cells: std::ops::Range<u64>,
    per_read: usize,
    reads: usize,
) -> Result<f64> {
    let span = cells.end.saturating_sub(cells.start).max(1);
    let all: Vec<u64> = cells.clone().collect();
    ds.read(&all).csr::<f32>()?;
    let t = Instant::now();
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..readers.max(1) as u64)
            .map(|r| {
                scope.spawn(move || {
                    let mut state =
                        0x9E37_79B9_7F4A_7C15u64 ^ (r + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                    let mut request = Vec::with_capacity(per_read);
                    for _ in 0..reads {
                        request.clear();
                        request.extend((0..per_read).map(|_| {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            cells.start + state % span
                        }));
                        ds.read(&request).csr::<f32>()?;
                    }
                    Ok::<(), crate::Error>(())
                })
            })
            .collect();
        threads
            .into_iter()
            .try_for_each(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })?;
    Ok((readers.max(1) * reads * per_read) as f64 / t.elapsed().as_secs_f64())
}

/// Peak resident memory of this process in bytes (Linux `VmHWM`), if known.
pub fn peak_rss() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// Resident memory of this process now, in bytes (Linux `VmRSS`), if known:
/// the baseline a later [`peak_rss`] is compared with.
pub fn resident() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// A `kB` field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak-RSS mark (Linux `clear_refs` 5), so phases can be measured
/// one after another in one process. Returns whether it worked.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

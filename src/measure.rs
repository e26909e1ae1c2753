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

/// Wall times of `n` measured paths, run in turn `rounds` times (path 0,
/// 1, .., `n - 1`, then again), `f(i)` running path `i` once: on a shared
/// machine a burst of other work then slows every path alike instead of
/// one path's every run, and each round pairs the paths under the same
/// conditions. `times[i][r]` is path `i`'s time in round `r`, in seconds.
pub fn rounds(rounds: usize, n: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<Rounds> {
    let mut times = vec![Vec::with_capacity(rounds.max(1)); n];
    for _ in 0..rounds.max(1) {
        for (i, t) in times.iter_mut().enumerate() {
            let start = Instant::now();
            f(i)?;
            t.push(start.elapsed().as_secs_f64());
        }
    }
    Ok(Rounds { times })
}

/// What [`rounds`] measured.
#[derive(Clone, Debug)]
pub struct Rounds {
    /// Each path's time in each round, in seconds.
    pub times: Vec<Vec<f64>>,
}

impl Rounds {
    /// Path `i`'s best (least disturbed) time.
    pub fn best(&self, i: usize) -> f64 {
        self.times[i].iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// Path `i`'s throughput relative to path `base` (`base`'s time over
    /// `i`'s): the ratio of their best times, and the least and greatest of
    /// the ratios of their times in the same round, which say how far the
    /// machine's noise moves it.
    pub fn ratio(&self, i: usize, base: usize) -> Ratio {
        let paired = self.times[base]
            .iter()
            .zip(&self.times[i])
            .map(|(b, t)| b / t);
        let (lo, hi) = paired.fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
            (lo.min(r), hi.max(r))
        });
        Ratio {
            best: self.best(base) / self.best(i),
            range: [lo, hi],
        }
    }
}

/// A throughput ratio measured in [`rounds`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratio {
    /// The ratio of the best times.
    pub best: f64,
    /// The least and greatest ratio of one round's times.
    pub range: [f64; 2],
}

impl Ratio {
    /// The ratio of throughputs when the paths did different work: this
    /// ratio of times, multiplied by the ratio of their work (`work`, the
    /// path's over the base's).
    pub fn per_work(self, work: f64) -> Ratio {
        Ratio {
            best: self.best * work,
            range: self.range.map(|r| r * work),
        }
    }

    /// The range as `lo-hi`, two decimals each.
    pub fn range_text(&self) -> String {
        format!("{:.2}-{:.2}", self.range[0], self.range[1])
    }
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
    pub vs_zstd: Ratio,
}

/// Single-thread decode of whole tiles, `f32` values, for zstd-only and every
/// backend this CPU has; then the best backend decoding chunk after chunk
/// into one reused buffer (`"{backend} in cache"`): a whole tile's output (8
/// bytes per nonzero) is far larger than any cache, and writing it to memory
/// is most of what a decode adds to zstd's time. Every path runs once in each
/// of `reps` rounds (see [`rounds`]); each row has its best time.
pub fn tile_decode_report(tiles: &[TileView<'_>], reps: usize) -> Result<Vec<Row>> {
    let nnz: usize = tiles.iter().map(|t| t.nnz()).sum();
    let cells: usize = tiles.iter().map(|t| t.n_cells()).sum();
    let mut out = TileBuffers::for_tiles(tiles);
    let best = Backend::detect();
    // zstd-only (on any decoder), every backend, then the best in cache.
    let backends = Backend::available();
    let mut decoders = std::iter::once(Backend::Scalar)
        .chain(backends.iter().copied())
        .chain([best])
        .map(ChunkDecoder::for_backend)
        .collect::<Result<Vec<_>>>()?;
    let n = decoders.len();
    let measured = rounds(reps, n, |i| match i {
        0 => decompress_tiles(&mut decoders[0], tiles),
        _ if i == n - 1 => out.decode_chunks(&mut decoders[i], tiles),
        _ => out.decode(&mut decoders[i], tiles),
    })?;
    let names = std::iter::once("zstd-only".to_string())
        .chain(backends.iter().map(|b| b.name().to_string()))
        .chain([format!("{} in cache", best.name())]);
    Ok(names
        .enumerate()
        .map(|(i, what)| {
            let seconds = measured.best(i);
            Row {
                what,
                seconds,
                nnz_per_s: nnz as f64 / seconds,
                cells_per_s: cells as f64 / seconds,
                vs_zstd: measured.ratio(i, 0),
            }
        })
        .collect())
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
        "{:<16} {:>12} {:>12} {:>12} {:>13}\n",
        "path", "Mnnz/s", "kcells/s", "vs zstd-only", "(each round)"
    );
    for r in rows {
        s += &format!(
            "{:<16} {:>12.1} {:>12.1} {:>12.2} {:>13}\n",
            r.what,
            r.nnz_per_s / 1e6,
            r.cells_per_s / 1e3,
            r.vs_zstd.best,
            r.vs_zstd.range_text()
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
    /// Decode throughput relative to zstd-only.
    pub vs_zstd: Ratio,
}

/// Scans `ds` `reps` times each way, in turn (see [`rounds`]), `group` tiles
/// per request (so every worker has chunks to decode), into one reused
/// buffer, with the tiles of the next groups fetched ahead on the dataset's
/// I/O stage. Both ways fetch and check every tile at every repetition (the
/// dataset's cache is not used), so a small dataset is timed as a large one
/// would be.
pub fn scan_report(ds: &crate::dataset::Dataset, group: usize, reps: usize) -> Result<ScanReport> {
    let mut out = crate::csr::Csr::<f32>::empty(0);
    let measured = rounds(reps, 2, |i| match i {
        0 => zstd_scan(ds, group),
        _ => decode_scan(ds, group, &mut out),
    })?;
    let m = ds.manifest();
    Ok(ScanReport {
        threads: ds.engine().threads(),
        cells: m.n_cells,
        nnz: m.tile_nnz.iter().sum(),
        decode_s: measured.best(1),
        zstd_s: measured.best(0),
        vs_zstd: measured.ratio(1, 0),
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

#[cfg(test)]
mod tests {
    use super::{rounds, Rounds};

    #[test]
    fn rounds_run_every_path_in_turn() {
        let mut order = Vec::new();
        let measured = rounds(3, 2, |i| {
            order.push(i);
            Ok(())
        })
        .unwrap();
        assert_eq!(order, [0, 1, 0, 1, 0, 1]);
        assert!(measured.times.iter().all(|t| t.len() == 3));
        let failed = rounds(2, 2, |i| match i {
            1 => Err(crate::Error::Input("stop".into())),
            _ => Ok(()),
        });
        assert!(failed.is_err());
    }

    #[test]
    fn a_ratio_pairs_each_round_and_its_best_lies_within() {
        // Round 1 is disturbed for the decode (path 1), round 2 for zstd.
        let measured = Rounds {
            times: vec![vec![1.0, 1.0, 3.0], vec![2.0, 4.0, 2.0]],
        };
        let r = measured.ratio(1, 0);
        assert_eq!(r.best, 0.5);
        assert_eq!(r.range, [0.25, 1.5]);
        assert_eq!(r.range_text(), "0.25-1.50");
        assert_eq!(measured.ratio(0, 0).range, [1.0, 1.0]);
        // A path that did a quarter of the base's work in the same times.
        let quarter = measured.ratio(1, 0).per_work(0.25);
        assert_eq!((quarter.best, quarter.range), (0.125, [0.0625, 0.375]));
        // The ratio of the best times always lies within the rounds' ratios.
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut draw = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            1.0 + (state % 1000) as f64
        };
        for _ in 0..200 {
            let times = vec![
                (0..5).map(|_| draw()).collect(),
                (0..5).map(|_| draw()).collect(),
            ];
            let r = Rounds { times }.ratio(1, 0);
            assert!(r.range[0] <= r.best && r.best <= r.range[1], "{r:?}");
        }
    }
}

//! `deltacells bench DIR --loop WORKLOAD`: one of the bench's workloads, run
//! over and over for a set time, for a sampling profiler to attribute (for
//! example `perf record -g -- deltacells bench DIR --loop tile`). The
//! account of where a decode's time goes beyond zstd's is made this way.

use std::io::Write;
use std::time::Instant;

use clap::ValueEnum;
use deltacells::engine::ChunkDecoder;
use deltacells::format::tile::TileView;
use deltacells::measure::{decode_scan, zstd_scan};
use deltacells::{Backend, Result};

use crate::bench_cmd::{first_tiles, BenchArgs};
use crate::dataset_cmd::open;
use crate::output::{out_err, Out};

/// What `--loop` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Decode the first tiles (about 4 MiB compressed) on one thread, in
    /// memory, into one reused buffer: the bench's tile decode.
    Tile,
    /// Only decompress the same tiles' frames: the tile decode's baseline.
    Zstd,
    /// Fetch, check and decode every tile into one reused buffer on
    /// `--threads` threads (default 1): the bench's full scan.
    Scan,
    /// Fetch and check every tile as the scan does, and only decompress
    /// its frames: the scan's baseline.
    ZstdScan,
}

/// Runs `args.loop_workload` for `args.seconds` and prints its rate.
pub fn run(args: &BenchArgs, workload: Workload, backend: Backend) -> Result<()> {
    let mut out = Out::stdout();
    let threads = args.threads.unwrap_or(1);
    let ds = open(&args.dir, backend, Some(threads))?;
    let start = Instant::now();
    let (mut rounds, mut nnz) = (0u64, 0u64);
    match workload {
        Workload::Tile | Workload::Zstd => {
            let held = first_tiles(&ds)?;
            let views = held
                .iter()
                .map(|b| TileView::parse(b.as_bytes()))
                .collect::<Result<Vec<_>, _>>()?;
            let most = views.iter().map(|t| t.nnz()).max().unwrap_or(0);
            let cells = views.iter().map(|t| t.n_cells()).max().unwrap_or(0);
            let (mut indptr, mut indices, mut values) =
                (vec![0i64; cells + 1], vec![0i32; most], vec![0f32; most]);
            let mut dec = ChunkDecoder::for_backend(ds.engine().backend())?;
            while start.elapsed().as_secs_f64() < args.seconds {
                for t in &views {
                    if workload == Workload::Zstd {
                        (0..t.n_chunks()).try_for_each(|i| dec.decompress_chunk(t, i))?;
                    } else {
                        let (n, c) = (t.nnz(), t.n_cells());
                        dec.decode_tile(
                            t,
                            &mut indptr[..c + 1],
                            &mut indices[..n],
                            &mut values[..n],
                        )?;
                    }
                    nnz += t.nnz() as u64;
                }
                rounds += 1;
            }
        }
        Workload::Scan | Workload::ZstdScan => {
            let group = (2 * threads).div_ceil(ds.manifest().n_chunks.max(1) as usize);
            let mut out = deltacells::Csr::<f32>::empty(0);
            while start.elapsed().as_secs_f64() < args.seconds {
                if workload == Workload::Scan {
                    decode_scan(&ds, group, &mut out)?;
                } else {
                    zstd_scan(&ds, group)?;
                }
                nnz += ds.manifest().tile_nnz.iter().sum::<u64>();
                rounds += 1;
            }
        }
    }
    let s = start.elapsed().as_secs_f64();
    writeln!(
        out,
        "{} on {threads} thread(s), kernel {}: {rounds} rounds in {s:.1} s, {:.1} Mnnz/s",
        workload
            .to_possible_value()
            .map_or("?".into(), |v| v.get_name().to_string()),
        ds.engine().backend(),
        nnz as f64 / s / 1e6,
    )
    .map_err(out_err)
}

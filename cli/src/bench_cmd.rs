//! `deltacells bench DIR`: decode throughput of a dataset, as ratios to
//! zstd-only decompression of the same tiles measured in the same run.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use deltacells::dataset::{
    BatchConfig, BatchIter, ReadStats, Recycler, Shuffle, DEFAULT_CACHE_BYTES,
};
use deltacells::format::tile::TileView;
use deltacells::measure::{
    concurrent_read_rate, format_rows, peak_rss, reset_peak_rss, resident, scan_report,
    tile_decode_report, ScanReport,
};
use deltacells::{Backend, Result};
use serde_json::{json, Value};

use crate::dataset_cmd::open;
use crate::output::{out_err, Out};

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Dataset location: a directory or a URL (s3://bucket/prefix, gs://, az://, https://); or
    /// a corpus file (its full scan, training batches and random batches).
    pub dir: PathBuf,
    /// Threads for the multi-thread scan (default: all cores); 1 thread is always measured.
    #[arg(long, value_parser = at_least_one())]
    pub threads: Option<usize>,
    /// Cells per batch for the batch measurements.
    #[arg(long, default_value_t = 256, value_parser = at_least_one())]
    pub batch_size: usize,
    /// Also measure batches of uniformly random cells (the worst case for a cache).
    #[arg(long)]
    pub random: bool,
    /// Repetitions of each timed scan and of the later batch epochs (the best is kept).
    #[arg(long, default_value_t = 3, value_parser = at_least_one())]
    pub reps: usize,
    /// Tiles per block-shuffle window.
    #[arg(long, default_value_t = 4, value_parser = at_least_one())]
    pub window: usize,
    /// Bound of the batch iterator's tile/chunk cache, in MiB.
    #[arg(long, default_value_t = 1024)]
    pub cache_mb: usize,
    /// List the model-ready lines' 2,000-gene vocabulary by decreasing
    /// variance (out of gene order, as a model's vocabulary lists its genes)
    /// rather than in the dataset's gene order.
    #[arg(long)]
    pub vocabulary_by_variance: bool,
    /// Print the figures as one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also write the figures to this directory: report.md (tables, with the
    /// machine, versions and dataset), PNG charts and report.json.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Instead of the bench, run one workload over and over for `--seconds`,
    /// for a profiler to attribute.
    #[arg(long = "loop", value_name = "WORKLOAD")]
    pub loop_workload: Option<crate::bench_loop::Workload>,
    /// How long `--loop` runs.
    #[arg(long, default_value_t = 10.0, requires = "loop_workload")]
    pub seconds: f64,
}

/// A count of at least one, refused by the parser otherwise (0 threads,
/// repetitions, batch cells or window tiles measure nothing).
fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..)
}

/// The first tiles of `ds` (at least one, about 4 MiB compressed in all):
/// what the bench decodes in memory, per backend. Each is checked here, so
/// that a missing or damaged tile is refused naming it (the bench's own
/// parse of the bytes has no tile index to report).
pub fn first_tiles(
    ds: &deltacells::dataset::Dataset,
) -> Result<Vec<deltacells::storage::AlignedBytes>> {
    use deltacells::format::manifest::{DatasetRule, Manifest};
    let store = ds.store().clone();
    let mut held = Vec::new();
    for tile in 0..ds.manifest().n_tiles() {
        let key = Manifest::tile_key(tile);
        let bytes = store
            .get(&key)?
            .ok_or(DatasetRule::TileMissing { tile, key })?;
        TileView::parse(bytes.as_bytes()).map_err(|e| deltacells::Error::InTile {
            tile,
            error: Box::new(e.into()),
        })?;
        held.push(bytes);
        if held.iter().map(|b| b.len()).sum::<usize>() > 4 << 20 {
            break;
        }
    }
    Ok(held)
}

/// The CPU's model name (Linux), for reports.
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// The machine the figures were measured on, for the JSON report.
pub fn machine_json() -> Value {
    json!({
        "cpu": cpu_model(),
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

/// The build that measured them, decoding with `kernel`.
pub fn build_json(kernel: Backend) -> Value {
    json!({
        "deltacells": deltacells::build_info::VERSION,
        "revision": deltacells::build_info::GIT_REVISION,
        "rustc": deltacells::build_info::RUSTC_VERSION,
        "zstd": deltacells::format::zstd_version(),
        "kernel": kernel.to_string(),
    })
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// What one epoch of training batches took.
pub struct EpochFigures {
    /// Cells delivered.
    pub cells: usize,
    batches: usize,
    decoded: usize,
    touched: usize,
    seconds: f64,
    /// From asking for the iterator to holding its first batch: how long a
    /// training loop waits at the start of the epoch.
    first_batch_s: f64,
    /// The iterator's recycler, holding the buffers its batches gave back.
    pub recycler: Recycler,
}

impl EpochFigures {
    pub fn cells_per_s(&self) -> f64 {
        self.cells as f64 / self.seconds
    }
}

/// What makes the batch iterator of a configuration: a dataset's or a corpus's.
pub type Batches<'a> = &'a dyn Fn(BatchConfig) -> Result<BatchIter<f32>>;

/// The block-shuffled batches the bench times (the training batch lines,
/// and the plain CSR batches every model-ready kind is a variant of):
/// `args`' batch size, window and cache, two batches prefetched.
pub fn block_batches(args: &BenchArgs) -> BatchConfig {
    BatchConfig::default()
        .with_batch_size(args.batch_size)
        .with_shuffle(Shuffle::Block {
            window_tiles: args.window,
        })
        .with_cache_bytes(args.cache_mb << 20)
        .with_prefetch(2)
}

/// Runs an epoch as a training loop would: each batch's buffers go back to
/// the iterator once the batch is used.
pub fn batch_epoch(batches: Batches<'_>, config: BatchConfig) -> Result<EpochFigures> {
    stepped_epoch(batches, config, Duration::ZERO)
}

/// [`batch_epoch`] with a training step of `step` per batch (a sleep, the
/// time a model would take with it).
pub fn stepped_epoch(
    batches: Batches<'_>,
    config: BatchConfig,
    step: Duration,
) -> Result<EpochFigures> {
    let t = Instant::now();
    let mut iter = batches(config)?;
    let mut f = EpochFigures {
        cells: 0,
        batches: 0,
        decoded: 0,
        touched: 0,
        seconds: 0.0,
        first_batch_s: 0.0,
        recycler: iter.recycler(),
    };
    while let Some(b) = iter.next() {
        let b = b?;
        if f.batches == 0 {
            f.first_batch_s = t.elapsed().as_secs_f64();
        }
        f.cells += b.cells.len();
        f.batches += 1;
        f.decoded += b.stats.chunks_decoded;
        f.touched += b.stats.chunks_touched;
        if !step.is_zero() {
            std::thread::sleep(step);
        }
        iter.recycle(b);
    }
    f.seconds = t.elapsed().as_secs_f64();
    Ok(f)
}

fn scan_line(r: &ScanReport, base: Option<&ScanReport>) -> String {
    let scaling = base.map_or(String::new(), |b| {
        format!("{:>9.2}x", b.decode_s / r.decode_s)
    });
    format!(
        "{:>7} {:>12.0} {:>10.1} {:>10.1} {:>12.2} {:>13} {scaling}",
        r.threads,
        r.cells as f64 / r.decode_s,
        r.nnz as f64 / r.decode_s / 1e6,
        r.nnz as f64 / r.zstd_s / 1e6,
        r.vs_zstd.best,
        r.vs_zstd.range_text()
    )
}

fn scan_json(r: &ScanReport) -> Value {
    json!({
        "threads": r.threads,
        "cells_per_s": r.cells as f64 / r.decode_s,
        "nnz_per_s": r.nnz as f64 / r.decode_s,
        "zstd_only_nnz_per_s": r.nnz as f64 / r.zstd_s,
        "vs_zstd_only": r.vs_zstd.best,
        "vs_zstd_only_each_round": r.vs_zstd.range,
    })
}

/// The threads of the measurements (`--threads`, default all cores), and
/// the counts the scans are measured at: 1, 2 and that many.
pub fn thread_counts(args: &BenchArgs) -> (usize, Vec<usize>) {
    let max_threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut counts = vec![1];
    if max_threads > 1 {
        counts.push(max_threads.min(2));
    }
    if max_threads > 2 {
        counts.push(max_threads);
    }
    (max_threads, counts)
}

/// Where the tables go: stdout, or nowhere when the figures are printed as JSON.
pub fn tables(args: &BenchArgs) -> Box<dyn Write> {
    if args.json {
        Box::new(std::io::sink())
    } else {
        Box::new(Out::stdout())
    }
}

pub fn run(args: BenchArgs, backend: Backend) -> Result<()> {
    if let Some(workload) = args.loop_workload {
        return crate::bench_loop::run(&args, workload, backend);
    }
    if crate::corpus_cmd::is_corpus_file(&args.dir) {
        return crate::corpus_bench::run(args, backend);
    }
    let mut out = tables(&args);
    let mut report = serde_json::Map::new();
    let probe = open(&args.dir, backend, Some(1))?;
    let m = probe.manifest().clone();
    let nnz: u64 = m.tile_nnz.iter().sum();
    if nnz == 0 {
        // Every rate would be 0/0 (and the tokenizers would find no gene).
        return Err(deltacells::Error::Input(format!(
            "{}: {} cells with no nonzero count: there is nothing to decode",
            args.dir.display(),
            m.n_cells
        )));
    }
    report.insert(
        "dataset".into(),
        json!({
            "location": args.dir.display().to_string(),
            "cells": m.n_cells,
            "genes": m.n_genes,
            "nonzeros": nnz,
            "tiles": m.n_tiles(),
            "bytes": m.tile_bytes.iter().sum::<u64>(),
        }),
    );
    report.insert("machine".into(), machine_json());
    report.insert("build".into(), build_json(probe.engine().backend()));
    writeln!(
        out,
        "dataset {}: {} cells x {} genes, {nnz} nonzeros, {} tiles, {:.1} MiB; zstd {}, kernel {}",
        args.dir.display(),
        m.n_cells,
        m.n_genes,
        m.n_tiles(),
        mib(m.tile_bytes.iter().sum()),
        deltacells::format::zstd_version(),
        probe.engine().backend()
    )
    .map_err(out_err)?;

    // Per-backend single-thread decode of the first tiles.
    let held = first_tiles(&probe)?;
    let views = held
        .iter()
        .map(|b| TileView::parse(b.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    writeln!(
        out,
        "\nsingle-thread tile decode by backend ({} tiles, f32 values, best of 5 rounds, each running every path in turn):",
        views.len()
    )
    .map_err(out_err)?;
    let rows = tile_decode_report(&views, 5)?;
    write!(out, "{}", format_rows(&rows)).map_err(out_err)?;
    report.insert(
        "tile_decode".into(),
        rows.iter()
            .map(|r| {
                json!({
                    "path": r.what,
                    "nnz_per_s": r.nnz_per_s,
                    "cells_per_s": r.cells_per_s,
                    "vs_zstd_only": r.vs_zstd.best,
                    "vs_zstd_only_each_round": r.vs_zstd.range,
                })
            })
            .collect(),
    );
    drop(views);
    drop(held);
    drop(probe);

    let (max_threads, thread_counts) = thread_counts(&args);
    writeln!(
        out,
        "\nfull scan (fetch + CRC + decode into one reused buffer, best of {} rounds of zstd-only and decode in turn):",
        args.reps
    )
    .map_err(out_err)?;
    writeln!(
        out,
        "{:>7} {:>12} {:>10} {:>10} {:>12} {:>13} {:>10}",
        "threads", "cells/s", "Mnnz/s", "zstd Mnnz/s", "vs zstd-only", "(each round)", "scaling"
    )
    .map_err(out_err)?;
    let mut base: Option<ScanReport> = None;
    let mut scans = Vec::new();
    let mut scan_rate = 0.0;
    for &threads in &thread_counts {
        reset_peak_rss();
        let ds = open(&args.dir, backend, Some(threads))?;
        let group = (2 * threads).div_ceil(m.n_chunks.max(1) as usize);
        let r = scan_report(&ds, group, args.reps)?;
        writeln!(out, "{}", scan_line(&r, base.as_ref())).map_err(out_err)?;
        let mut figures = scan_json(&r);
        if let Some(b) = &base {
            figures["scaling"] = json!(b.decode_s / r.decode_s);
        }
        scans.push(figures);
        scan_rate = r.cells as f64 / r.decode_s;
        if base.is_none() {
            base = Some(r);
        }
    }
    report.insert("full_scan".into(), Value::Array(scans));
    if let Some(p) = peak_rss() {
        writeln!(out, "peak RSS of the last scan: {:.0} MiB", mib(p)).map_err(out_err)?;
    }

    let ds = open(&args.dir, backend, Some(max_threads))?;
    training_batches(
        &mut out,
        &mut report,
        &args,
        max_threads,
        (scan_rate, m.n_cells as f64 / m.n_tiles().max(1) as f64),
        &|config| ds.batches(config),
    )?;
    crate::model_bench::model_batches(&mut out, &mut report, &args, &ds)?;

    // Readers on one dataset at once, over tiles whose decoded chunks fit the
    // cache, so the figure shows how reads share the dataset, not the store.
    let (mut warm_tiles, mut warm_bytes) = (0, 0u64);
    while warm_tiles < m.n_tiles() {
        let bytes = 8 * (m.tile_nnz[warm_tiles] + m.tile_cells[warm_tiles] + 1);
        if warm_tiles > 0 && warm_bytes + bytes > (DEFAULT_CACHE_BYTES / 2) as u64 {
            break;
        }
        warm_bytes += bytes;
        warm_tiles += 1;
    }
    // A dataset of its own, so the random batches below start from a cold cache.
    let shared = open(&args.dir, backend, Some(max_threads))?;
    let warm = 0..shared.limits()[warm_tiles];
    let mut reader_counts = vec![1, 2];
    if max_threads > 2 {
        reader_counts.push(max_threads);
    }
    let (per_read, reads) = (16, 1000);
    // One unmeasured round first: the cache, the allocator and the threads warm up.
    concurrent_read_rate(&shared, 1, warm.clone(), per_read, reads)?;
    let mut rates = Vec::new();
    for &readers in &reader_counts {
        rates.push(concurrent_read_rate(
            &ds,
            readers,
            warm.clone(),
            per_read,
            reads,
        )?);
    }
    let line: Vec<String> = reader_counts
        .iter()
        .zip(&rates)
        .map(|(n, r)| format!("{n} threads {r:.0} cells/s ({:.2}x)", r / rates[0]))
        .collect();
    writeln!(
        out,
        "\nconcurrent readers ({per_read} random cells per read_cells call, {} warm cells, one Dataset, {max_threads} decode threads): {}",
        warm.end,
        line.join(", ")
    )
    .map_err(out_err)?;
    report.insert(
        "concurrent_readers".into(),
        reader_counts
            .iter()
            .zip(&rates)
            .map(|(n, r)| json!({"threads": n, "cells_per_s": r, "scaling": r / rates[0]}))
            .collect(),
    );
    drop(shared);

    if args.random {
        random_batches(&mut out, &mut report, &args, m.n_cells, &|cells| {
            Ok(ds.read(cells).csr::<f32>()?.stats)
        })?;
    }
    finish(out, report, &args)
}

/// Writes the report files `args.report` asks for, then the figures as JSON
/// when `args.json` (the tables went to `out`).
pub fn finish(
    mut out: Box<dyn Write>,
    report: serde_json::Map<String, Value>,
    args: &BenchArgs,
) -> Result<()> {
    let report = Value::Object(report);
    if let Some(dir) = &args.report {
        for file in crate::report::write(dir, &report)? {
            writeln!(out, "wrote {}", file.display()).map_err(out_err)?;
        }
    }
    out.flush().map_err(out_err)?;
    if args.json {
        let mut stdout = Out::stdout();
        serde_json::to_writer_pretty(&mut stdout, &report)
            .map_err(|e| deltacells::Error::Config(format!("writing JSON: {e}")))?;
        writeln!(stdout).map_err(out_err)?;
        stdout.finish()?;
    }
    Ok(())
}

/// Reads batches of uniformly random cells of `n_cells` with `read` (which
/// says what each cost), the worst case for a cache.
pub fn random_batches(
    out: &mut dyn Write,
    report: &mut serde_json::Map<String, Value>,
    args: &BenchArgs,
    n_cells: u64,
    read: &dyn Fn(&[u64]) -> Result<ReadStats>,
) -> Result<()> {
    let n = 50.min(n_cells as usize / args.batch_size.max(1)).max(1);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let t = Instant::now();
    let (mut decoded, mut touched, mut fetched, mut needed) = (0usize, 0usize, 0u64, 0u64);
    for _ in 0..n {
        let cells: Vec<u64> = (0..args.batch_size).map(|_| next(n_cells.max(1))).collect();
        let stats = read(&cells)?;
        decoded += stats.chunks_decoded;
        touched += stats.chunks_touched;
        fetched += stats.bytes_fetched;
        needed += stats.chunk_bytes;
    }
    let s = t.elapsed().as_secs_f64();
    writeln!(
        out,
        "uniformly random batches ({} cells, shared 256 MiB cache): {:.0} cells/s; per batch {:.1} chunks touched, {:.1} decoded",
        args.batch_size,
        (n * args.batch_size) as f64 / s,
        touched as f64 / n as f64,
        decoded as f64 / n as f64
    )
    .map_err(out_err)?;
    writeln!(
        out,
        "  bytes requested: {:.1} MiB, {:.2}x the compressed bytes of the chunks holding the cells",
        mib(fetched),
        fetched as f64 / needed.max(1) as f64
    )
    .map_err(out_err)?;
    report.insert(
        "random_batches".into(),
        json!({
            "batch_size": args.batch_size,
            "cells_per_s": (n * args.batch_size) as f64 / s,
            "chunks_decoded_per_batch": decoded as f64 / n as f64,
            "bytes_requested_vs_chunk_bytes": fetched as f64 / needed.max(1) as f64,
        }),
    );
    Ok(())
}

/// Measures training batches of `batches` as a training run makes them (a
/// first epoch in fresh buffers, then `args.reps` more, each in the buffers
/// the one before gave back; the best is kept), compared with `scan_rate`,
/// the full scan on `threads` threads.
pub fn training_batches(
    out: &mut dyn Write,
    report: &mut serde_json::Map<String, Value>,
    args: &BenchArgs,
    threads: usize,
    (scan_rate, tile_cells): (f64, f64),
    batches: Batches<'_>,
) -> Result<()> {
    let config = |epoch, recycler| {
        block_batches(args)
            .with_epoch(epoch)
            .with_recycler(recycler)
            .with_next_epoch_ahead(true)
    };
    reset_peak_rss();
    let before = resident();
    // A first epoch in fresh buffers, then `reps` more, as a training run has
    // many: each starts in the buffers the one before gave back, its first
    // window made ahead while the one before drained. The best of those is
    // kept, as the scan keeps its best repetition.
    let first = batch_epoch(batches, config(0, None))?;
    let mut next = batch_epoch(batches, config(1, Some(first.recycler.clone())))?;
    let mut best_first = next.first_batch_s;
    for epoch in 2..=args.reps.max(1) as u64 {
        let again = batch_epoch(batches, config(epoch, Some(next.recycler.clone())))?;
        best_first = best_first.min(again.first_batch_s);
        if again.cells_per_s() > next.cells_per_s() {
            next = again;
        }
    }
    // The last epoch made one more ahead: let it finish before anything
    // else is timed.
    next.recycler.forget_next_epoch();
    writeln!(
        out,
        "\ntraining batches ({} cells, block shuffle over {} tiles, prefetch 2, cache {} MiB, {threads} threads, batches recycled):",
        args.batch_size, args.window, args.cache_mb
    )
    .map_err(out_err)?;
    let batch_rss = peak_rss();
    let n = next.batches.max(1) as f64;
    // What the first batch is measured against: one tile of the mean size
    // decoded at the full scan's rate on as many threads.
    let tile_s = tile_cells / scan_rate;
    writeln!(
        out,
        "{} batches an epoch; first epoch {:.0} cells/s ({:.2} of the {threads}-thread full scan), later epochs (in the buffers of the one before, best of {}) {:.0} cells/s ({:.2}), {:.1} batches/s; per batch {:.1} chunks touched, {:.2} decoded; peak RSS {:.0} MiB, {:.0} MiB over the {:.0} MiB before the epochs",
        next.batches,
        first.cells_per_s(),
        first.cells_per_s() / scan_rate,
        args.reps.max(1),
        next.cells_per_s(),
        next.cells_per_s() / scan_rate,
        next.batches as f64 / next.seconds,
        next.touched as f64 / n,
        next.decoded as f64 / n,
        batch_rss.map_or(f64::NAN, mib),
        batch_rss.zip(before).map_or(f64::NAN, |(p, b)| mib(p.saturating_sub(b))),
        before.map_or(f64::NAN, mib)
    )
    .map_err(out_err)?;
    writeln!(
        out,
        "first batch after {:.1} ms in the first epoch, {:.1} ms in the later ones (best {:.1} ms); a tile (on average {tile_cells:.0} cells) scans in {:.1} ms",
        1e3 * first.first_batch_s,
        1e3 * next.first_batch_s,
        1e3 * best_first,
        1e3 * tile_s
    )
    .map_err(out_err)?;
    // A training loop whose step takes as long per batch as the full scan
    // decodes one (of the epoch's mean size: a batch size past the cells
    // a rank has is not what a batch holds): the next epoch's first window
    // is then made while the last one's batches are used.
    let cells_per_batch = first.cells as f64 / first.batches.max(1) as f64;
    let step = Duration::from_secs_f64(cells_per_batch / scan_rate);
    let fresh = stepped_epoch(batches, config(0, None), step)?;
    let stepped = stepped_epoch(batches, config(1, Some(fresh.recycler.clone())), step)?;
    stepped.recycler.forget_next_epoch();
    writeln!(
        out,
        "with a training step of {:.2} ms per batch (a batch's scan time): first batch after {:.1} ms in the first epoch, {:.1} ms in the next; epochs of {:.0} and {:.0} ms ({:.0} ms of steps)",
        1e3 * step.as_secs_f64(),
        1e3 * fresh.first_batch_s,
        1e3 * stepped.first_batch_s,
        1e3 * fresh.seconds,
        1e3 * stepped.seconds,
        1e3 * step.as_secs_f64() * stepped.batches as f64,
    )
    .map_err(out_err)?;
    report.insert(
        "batches".into(),
        json!({
            "batch_size": args.batch_size,
            "window_tiles": args.window,
            "cache_bytes": args.cache_mb << 20,
            "threads": threads,
            "later_epochs": args.reps.max(1),
            "cells_per_s": next.cells_per_s(),
            "vs_full_scan": next.cells_per_s() / scan_rate,
            "first_epoch_cells_per_s": first.cells_per_s(),
            "first_epoch_vs_full_scan": first.cells_per_s() / scan_rate,
            "chunks_decoded_per_batch": next.decoded as f64 / n,
            "first_batch_s": {
                "first_epoch": first.first_batch_s,
                "later_epoch": next.first_batch_s,
                "best_later_epoch": best_first,
                "one_tile_scan_s": tile_s,
                "with_step": {
                    "step_s": step.as_secs_f64(),
                    "first_epoch": fresh.first_batch_s,
                    "next_epoch": stepped.first_batch_s,
                },
            },
            "peak_rss_bytes": batch_rss,
            "rss_before_bytes": before,
        }),
    );
    Ok(())
}

/// The dataset and scan figures for the demo: opens `dir` and runs the bench.
pub fn for_demo(dir: PathBuf, backend: Backend) -> Result<()> {
    run(
        BenchArgs {
            dir,
            threads: None,
            batch_size: 256,
            random: true,
            reps: 3,
            window: 4,
            cache_mb: 1024,
            vocabulary_by_variance: false,
            json: false,
            report: None,
            loop_workload: None,
            seconds: 10.0,
        },
        backend,
    )
}

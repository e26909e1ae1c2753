//! `deltacells bench DIR --loop WORKLOAD`: one of the bench's workloads, run
//! over and over for a set time, for a sampling profiler to attribute (for
//! example `perf record -g -- deltacells bench DIR --loop tile`). The
//! account of where a decode's time goes beyond zstd's is made this way,
//! and the batch workloads show where tokenized batches spend theirs beyond
//! plain ones.

use std::io::Write;
use std::time::Instant;

use clap::ValueEnum;
use deltacells::engine::ChunkDecoder;
use deltacells::format::tile::TileView;
use deltacells::measure::{decode_scan, decompress_tiles, zstd_scan, TileBuffers};
use deltacells::{Backend, Dataset, Error, Result};

use crate::bench_cmd::{batch_epoch, block_batches, first_tiles, BenchArgs};
use crate::dataset_cmd::open;
use crate::model_bench::{from_stats, normalized, scgpt};
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
    /// Epochs of block-shuffled plain CSR batches, as the bench's
    /// model-ready lines run them (`--threads`, default 1): their baseline.
    Batches,
    /// The same epochs as Geneformer tokens (2,048, special tokens).
    Geneformer,
    /// The same epochs as Geneformer tokens over a dictionary like
    /// Geneformer's own: a median per gene, tokens in another order.
    GeneformerOwn,
    /// The same epochs as scGPT bins (51 bins, 1,200 tokens).
    Scgpt,
    /// The same epochs as normalized CSR rows (normalize_total 1e4 +
    /// log1p) of every gene.
    Normalized,
    /// The same epochs as normalized CSR rows (normalize_total 1e4 +
    /// log1p) over the 2,000 genes of largest normalized variance.
    Selected,
    /// The same epochs as normalized dense rows (normalize_total 1e4 +
    /// log1p) over the 2,000 genes of largest normalized variance.
    Dense,
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
            let round: u64 = views.iter().map(|t| t.nnz() as u64).sum();
            let mut buffers = TileBuffers::for_tiles(&views);
            let mut dec = ChunkDecoder::for_backend(ds.engine().backend())?;
            while start.elapsed().as_secs_f64() < args.seconds {
                if workload == Workload::Zstd {
                    decompress_tiles(&mut dec, &views)?;
                } else {
                    buffers.decode(&mut dec, &views)?;
                }
                nnz += round;
                rounds += 1;
            }
        }
        Workload::Scan | Workload::ZstdScan => {
            let group = (2 * threads).div_ceil(ds.manifest().n_chunks.max(1) as usize);
            let round: u64 = ds.manifest().tile_nnz.iter().sum();
            let mut out = deltacells::Csr::<f32>::empty(0);
            while start.elapsed().as_secs_f64() < args.seconds {
                if workload == Workload::Scan {
                    decode_scan(&ds, group, &mut out)?;
                } else {
                    zstd_scan(&ds, group)?;
                }
                nnz += round;
                rounds += 1;
            }
        }
        Workload::Batches
        | Workload::Geneformer
        | Workload::GeneformerOwn
        | Workload::Scgpt
        | Workload::Normalized
        | Workload::Selected
        | Workload::Dense => {
            return batches(&mut out, args, workload, &ds, threads);
        }
    }
    let s = start.elapsed().as_secs_f64();
    writeln!(
        out,
        "{} on {threads} thread(s), kernel {}: {rounds} rounds in {s:.1} s, {:.1} Mnnz/s",
        name(workload),
        ds.engine().backend(),
        nnz as f64 / s / 1e6,
    )
    .map_err(out_err)
}

/// The workload's name as `--loop` takes it.
fn name(workload: Workload) -> String {
    workload
        .to_possible_value()
        .map_or("?".into(), |v| v.get_name().to_string())
}

/// The batch workloads: epochs of `workload`'s batches over `ds` (each in
/// the last one's buffers) until `args.seconds` have passed.
fn batches(
    out: &mut Out,
    args: &BenchArgs,
    workload: Workload,
    ds: &Dataset,
    threads: usize,
) -> Result<()> {
    let mut config = block_batches(args);
    let normalized = normalized();
    let named = || Error::Input("the model-ready workloads need a dataset with var names".into());
    // scGPT's dictionary needs only the var names; Geneformer's medians and
    // the dense vocabulary, a statistics pass first (not timed, but in a
    // profile of the whole run).
    config = match workload {
        Workload::Scgpt => config.with_tokenizer(Some(scgpt(ds)?.ok_or_else(named)?)),
        Workload::Normalized => config.with_transform(normalized),
        Workload::Geneformer | Workload::GeneformerOwn | Workload::Selected | Workload::Dense => {
            let stats = from_stats(ds, args.vocabulary_by_variance)?.ok_or_else(named)?;
            match workload {
                Workload::Geneformer => config.with_tokenizer(Some(stats.geneformer)),
                Workload::GeneformerOwn => config.with_tokenizer(Some(stats.geneformer_own)),
                _ => config
                    .with_transform(normalized)
                    .with_genes(Some(stats.vocabulary))
                    .with_dense(workload == Workload::Dense),
            }
        }
        _ => config,
    };
    let start = Instant::now();
    let (mut epochs, mut cells, mut recycler) = (0u64, 0usize, None);
    // At least one epoch, however short `--seconds`.
    loop {
        let epoch = batch_epoch(
            &|c| ds.batches(c),
            config.clone().with_epoch(epochs).with_recycler(recycler),
        )?;
        cells += epoch.cells;
        recycler = Some(epoch.recycler);
        epochs += 1;
        if start.elapsed().as_secs_f64() >= args.seconds {
            break;
        }
    }
    let s = start.elapsed().as_secs_f64();
    writeln!(
        out,
        "{} on {threads} thread(s), kernel {}: {epochs} epochs ({cells} cells) in {s:.1} s, {:.0} cells/s",
        name(workload),
        ds.engine().backend(),
        cells as f64 / s,
    )
    .map_err(out_err)
}

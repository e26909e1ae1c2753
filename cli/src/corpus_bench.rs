//! `deltacells bench` on a corpus file: the figures of a dataset's bench
//! that a corpus has (its full scan, training batches and random batches),
//! measured the same way, so a corpus and the merged dataset of the same
//! inputs compare line by line.

use std::io::Write;

use deltacells::measure::{best_of, peak_rss, reset_peak_rss};
use deltacells::{Backend, Corpus, Csr, Result};
use serde_json::{json, Value};

use crate::bench_cmd::{
    build_json, finish, machine_json, mib, random_batches, tables, thread_counts, training_batches,
    BenchArgs,
};
use crate::corpus_cmd::open;
use crate::output::out_err;

/// Reads every cell of `corpus` once, uncached, into one reused buffer: each
/// member's tiles a few at a time, the member's next tiles fetched while
/// these decode. Returns the best time of `reps`.
fn scan(corpus: &Corpus, reps: usize) -> Result<f64> {
    let mut out = Csr::<f32>::empty(0);
    best_of(reps, || {
        for (m, member) in corpus.members().iter().enumerate() {
            let ds = member.dataset();
            let group =
                (2 * corpus.engine().threads()).div_ceil(ds.manifest().n_chunks.max(1) as usize);
            let ahead = ds.fetcher().in_flight().max(group);
            let (base, limits) = (corpus.limits()[m], ds.limits());
            for first in (0..ds.n_tiles()).step_by(group) {
                let last = (first + group).min(ds.n_tiles());
                ds.prefetch(last..last + ahead);
                corpus
                    .read(base + limits[first]..base + limits[last])
                    .uncached()
                    .csr_into(&mut out)?;
            }
        }
        Ok(())
    })
}

pub fn run(args: BenchArgs, backend: Backend) -> Result<()> {
    let mut out = tables(&args);
    let mut report = serde_json::Map::new();
    let probe = open(&args.dir, backend, Some(1))?;
    let manifests = probe.members().iter().map(|m| m.dataset().manifest());
    let (mut nnz, mut tiles, mut bytes) = (0u64, 0usize, 0u64);
    for m in manifests {
        nnz += m.tile_nnz.iter().sum::<u64>();
        tiles += m.n_tiles();
        bytes += m.tile_bytes.iter().sum::<u64>();
    }
    let (cells, datasets) = (probe.n_cells(), probe.members().len());
    report.insert(
        "dataset".into(),
        json!({
            "location": args.dir.display().to_string(),
            "datasets": datasets,
            "cells": cells,
            "genes": probe.n_genes(),
            "nonzeros": nnz,
            "tiles": tiles,
            "bytes": bytes,
        }),
    );
    report.insert("machine".into(), machine_json());
    report.insert("build".into(), build_json(probe.engine().backend()));
    writeln!(
        out,
        "corpus {}: {datasets} datasets, {cells} cells x {} genes, {nnz} nonzeros, {tiles} tiles, {:.1} MiB; kernel {}",
        args.dir.display(),
        probe.n_genes(),
        mib(bytes),
        probe.engine().backend()
    )
    .map_err(out_err)?;
    drop(probe);

    let (max_threads, thread_counts) = thread_counts(&args);
    writeln!(
        out,
        "\nfull scan (fetch + CRC + decode into one reused buffer, member by member, best of {}):",
        args.reps
    )
    .map_err(out_err)?;
    writeln!(
        out,
        "{:>7} {:>12} {:>10} {:>10}",
        "threads", "cells/s", "Mnnz/s", "scaling"
    )
    .map_err(out_err)?;
    let (mut scans, mut scan_rate, mut base) = (Vec::new(), 0.0, None);
    for &threads in &thread_counts {
        reset_peak_rss();
        let corpus = open(&args.dir, backend, Some(threads))?;
        let seconds = scan(&corpus, args.reps)?;
        let scaling = base.map_or(String::new(), |b: f64| format!("{:>9.2}x", b / seconds));
        writeln!(
            out,
            "{threads:>7} {:>12.0} {:>10.1} {scaling}",
            cells as f64 / seconds,
            nnz as f64 / seconds / 1e6
        )
        .map_err(out_err)?;
        let mut figures = json!({
            "threads": threads,
            "cells_per_s": cells as f64 / seconds,
            "nnz_per_s": nnz as f64 / seconds,
        });
        if let Some(b) = base {
            figures["scaling"] = json!(b / seconds);
        }
        scans.push(figures);
        scan_rate = cells as f64 / seconds;
        base.get_or_insert(seconds);
    }
    report.insert("full_scan".into(), Value::Array(scans));
    if let Some(p) = peak_rss() {
        writeln!(out, "peak RSS of the last scan: {:.0} MiB", mib(p)).map_err(out_err)?;
    }

    let corpus = open(&args.dir, backend, Some(max_threads))?;
    training_batches(
        &mut out,
        &mut report,
        &args,
        max_threads,
        (scan_rate, cells as f64 / tiles.max(1) as f64),
        &|config| corpus.batches(config),
    )?;
    if args.random {
        random_batches(&mut out, &mut report, &args, cells, &|cells| {
            Ok(corpus.read(cells).csr::<f32>()?.stats)
        })?;
    }
    finish(out, report, &args)
}

//! `deltacells bench`'s model-ready batches: normalized, tokenized and
//! balanced batches, each as a ratio of plain CSR batches measured in the
//! same run with the same settings (batch size, window, cache, threads).
//!
//! Every kind, plain CSR batches first, runs an epoch to warm up. Then each
//! round times one epoch of every kind in turn (`--reps` rounds, see
//! `deltacells::measure::rounds`), each in its own buffers from the epoch
//! before, the iterator's creation included, as the training batch lines
//! time theirs (the same `batch_epoch`). Each ratio is of the best rates,
//! with the least and greatest ratio of one round beside it: on a shared
//! machine a slow spell falls on a round, not on one kind.
//!
//! The tokenizers' dictionaries come from the dataset itself: each var name
//! is a token (ids from 3, after `<pad>`, `<cls>` and `<eos>`), and
//! Geneformer's medians are the gene statistics' `norm_median` (genes never
//! expressed have none and are left out), computed by one pass over the
//! dataset first. A sketch's medians repeat (a few hundred values), and
//! tokens numbered in the dataset's gene order put a cell's ties in token
//! order already: the easiest case for Geneformer's sort. A second
//! Geneformer line uses a dictionary like Geneformer's own instead: a
//! median per gene (its mean over the cells expressing it, from the same
//! statistics) and tokens numbered from the last gene to the first. The
//! 2,000-gene vocabulary is the 2,000 genes of largest normalized variance,
//! in gene order, or by decreasing variance with `--vocabulary-by-variance`
//! (a vocabulary out of gene order, whose CSR rows are put in column order).

use std::io::Write;

use deltacells::dataset::{BatchConfig, Pick, Shuffle, Weights};
use deltacells::engine::Transform;
use deltacells::measure::rounds;
use deltacells::obs::Kind;
use deltacells::tokenize::{GeneMap, Geneformer, ScGpt, Tokenizer};
use deltacells::{Dataset, GeneSelection, Result};
use serde_json::{json, Value};

use crate::bench_cmd::{batch_epoch, block_batches, BenchArgs};
use crate::output::out_err;

/// Batches timed in the uniformly random balanced measurement (random
/// access is slow: an epoch would take minutes).
const RANDOM_BATCHES: usize = 40;

/// The genes of the dense vocabulary.
const VOCABULARY: usize = 2000;

/// The normalization of the bench's normalized lines: scanpy's
/// `normalize_total(target_sum=1e4)` then `log1p`.
pub(crate) fn normalized() -> Transform {
    Transform::NONE.normalize(1e4).log1p()
}

/// `config`'s batches, at most `limit` of them.
fn limited(config: &BatchConfig, limit: Option<usize>) -> BatchConfig {
    config
        .clone()
        .with_pick(limit.map_or(Pick::All, |n| Pick::Range(0..n)))
}

/// The categorical obs column balanced batches balance: `cell_type` if the
/// dataset has it, else its first categorical column.
fn balance_column(ds: &Dataset) -> Option<String> {
    let schema = ds.obs()?.schema().clone();
    let categorical: Vec<&str> = schema
        .columns
        .iter()
        .filter(|c| c.kind == Kind::Category)
        .map(|c| c.name.as_str())
        .collect();
    categorical
        .iter()
        .find(|&&n| n == "cell_type")
        .or(categorical.first())
        .map(|n| n.to_string())
}

/// The bench's token dictionary over `names`: each a token, ids from 3,
/// after `<pad>`, `<cls>` and `<eos>`.
fn tokens(names: &[String]) -> Result<GeneMap<i32>> {
    tokens_by(names, |g| g)
}

/// The same tokens numbered from the last gene to the first.
fn reversed_tokens(names: &[String]) -> Result<GeneMap<i32>> {
    tokens_by(names, |g| names.len() - 1 - g)
}

fn tokens_by(names: &[String], number: impl Fn(usize) -> usize) -> Result<GeneMap<i32>> {
    let special = [("<pad>", 0), ("<cls>", 1), ("<eos>", 2)].map(|(k, t)| (k.to_string(), t));
    let ids = names
        .iter()
        .enumerate()
        .map(|(g, n)| (n.clone(), number(g) as i32 + 3));
    GeneMap::new(special.into_iter().chain(ids))
}

/// scGPT over the bench's dictionary.
fn scgpt_over(tokens: GeneMap<i32>) -> Result<Tokenizer> {
    Ok(Tokenizer::ScGpt(
        ScGpt::new(tokens)?.with_n_bins(51)?.with_max_len(1200)?,
    ))
}

/// The bench's scGPT tokenizer over `ds`'s var names, which needs no
/// statistics pass; `None` when the dataset has no var names.
pub(crate) fn scgpt(ds: &Dataset) -> Result<Option<Tokenizer>> {
    ds.var_names()
        .map(|names| scgpt_over(tokens(names)?))
        .transpose()
}

/// What the model-ready lines use beyond plain batches, from one
/// statistics pass over a dataset (see the module docs).
pub(crate) struct FromStats {
    /// Geneformer over the sketch's medians and tokens in gene order.
    pub(crate) geneformer: Tokenizer,
    /// Geneformer over a dictionary like its own.
    pub(crate) geneformer_own: Tokenizer,
    pub(crate) scgpt: Tokenizer,
    /// The dense vocabulary.
    pub(crate) vocabulary: GeneSelection,
}

/// The tokenizers over `ds`'s var names, and the dense vocabulary (in gene
/// order, or by decreasing variance where `by_variance`), from one
/// statistics pass; `None` when the dataset has no var names.
pub(crate) fn from_stats(ds: &Dataset, by_variance: bool) -> Result<Option<FromStats>> {
    let Some(names) = ds.var_names() else {
        return Ok(None);
    };
    let table = ds.gene_stats()?.table();
    let geneformer = |tokens, medians: &mut dyn Iterator<Item = f64>| -> Result<Tokenizer> {
        let medians = GeneMap::new(
            names
                .iter()
                .zip(medians)
                .filter(|(_, m)| m.is_finite() && *m > 0.0)
                .map(|(n, m)| (n.clone(), m)),
        )?;
        let g = Geneformer::new(tokens, medians)?.with_max_len(2048, true)?;
        Ok(Tokenizer::Geneformer(g))
    };
    let cells = ds.manifest().n_cells as f64;
    let mut expressed_mean = table
        .norm_mean
        .iter()
        .zip(&table.n_cells)
        .map(|(&m, &n)| m * cells / n as f64);
    let mut vocabulary: Vec<u32> = (0..names.len() as u32).collect();
    vocabulary.sort_by(|&a, &b| table.norm_var[b as usize].total_cmp(&table.norm_var[a as usize]));
    vocabulary.truncate(VOCABULARY);
    if !by_variance {
        vocabulary.sort_unstable();
    }
    let in_gene_order = tokens(names)?;
    Ok(Some(FromStats {
        geneformer: geneformer(
            in_gene_order.clone(),
            &mut table.norm_median.iter().copied(),
        )?,
        geneformer_own: geneformer(reversed_tokens(names)?, &mut expressed_mean)?,
        scgpt: scgpt_over(in_gene_order)?,
        vocabulary: GeneSelection::new(names.len() as u32, &vocabulary)?,
    }))
}

/// Measures and prints the model-ready batch lines (see the module docs).
pub fn model_batches(
    out: &mut dyn Write,
    report: &mut serde_json::Map<String, Value>,
    args: &BenchArgs,
    ds: &Dataset,
) -> Result<()> {
    let base = block_batches(args);
    let normalized = normalized();
    let mut kinds: Vec<(&str, BatchConfig, Option<usize>)> = vec![(
        "normalized CSR, every gene (normalize_total 1e4 + log1p)",
        base.clone().with_transform(normalized),
        None,
    )];
    let stats = from_stats(ds, args.vocabulary_by_variance)?;
    if let Some(FromStats {
        geneformer,
        geneformer_own,
        scgpt,
        vocabulary,
    }) = &stats
    {
        kinds.push((
            "normalized CSR, 2,000 genes of largest normalized variance",
            base.clone()
                .with_transform(normalized)
                .with_genes(Some(vocabulary.clone())),
            None,
        ));
        kinds.push((
            "normalized dense, 2,000 genes of largest normalized variance",
            base.clone()
                .with_transform(normalized)
                .with_genes(Some(vocabulary.clone()))
                .with_dense(true),
            None,
        ));
        kinds.push((
            "Geneformer tokens (2,048, special tokens)",
            base.clone().with_tokenizer(Some(geneformer.clone())),
            None,
        ));
        kinds.push((
            "Geneformer tokens, a median per gene, tokens in another order",
            base.clone().with_tokenizer(Some(geneformer_own.clone())),
            None,
        ));
        kinds.push((
            "scGPT bins (51 bins, 1,200 tokens)",
            base.clone().with_tokenizer(Some(scgpt.clone())),
            None,
        ));
    }
    let balance = balance_column(ds);
    if let Some(column) = &balance {
        let balanced = base
            .clone()
            .with_weights(Weights::Balance(vec![column.clone()]));
        kinds.push(("balanced, with locality", balanced.clone(), None));
        kinds.push((
            "balanced, uniformly random",
            balanced.with_shuffle(Shuffle::Random),
            Some(RANDOM_BATCHES),
        ));
    }

    let runs: Vec<BatchConfig> = std::iter::once(base)
        .chain(
            kinds
                .iter()
                .map(|(_, config, limit)| limited(config, *limit)),
        )
        .collect();
    let batches = |c| ds.batches(c);
    // Each kind's warm-up epoch, whose buffers its timed epochs take.
    let mut recyclers = runs
        .iter()
        .map(|c| Ok(batch_epoch(&batches, c.clone())?.recycler))
        .collect::<Result<Vec<_>>>()?;
    let mut cells = vec![0; runs.len()];
    let measured = rounds(args.reps, runs.len(), |i| {
        let config = runs[i]
            .clone()
            .with_epoch(1)
            .with_recycler(Some(recyclers[i].clone()));
        let epoch = batch_epoch(&batches, config)?;
        (cells[i], recyclers[i]) = (epoch.cells, epoch.recycler);
        Ok(())
    })?;
    let rate = |i: usize| cells[i] as f64 / measured.best(i);
    writeln!(
        out,
        "\nmodel-ready batches ({} cells, block shuffle over {} tiles unless random, {} threads), each as a ratio of plain CSR batches ({:.0} cells/s), best of {} rounds of every kind in turn (each round's ratio):",
        args.batch_size,
        args.window,
        ds.engine().threads(),
        rate(0),
        args.reps.max(1)
    )
    .map_err(out_err)?;
    let mut figures = Vec::new();
    for (k, (what, _, limit)) in kinds.iter().enumerate() {
        let work = cells[k + 1] as f64 / cells[0].max(1) as f64;
        let (r, vs) = (rate(k + 1), measured.ratio(k + 1, 0).per_work(work));
        let note = limit.map_or(String::new(), |n| format!(" ({n} batches)"));
        writeln!(
            out,
            "  {what}: {r:.0} cells/s, {:.2} ({}){note}",
            vs.best,
            vs.range_text()
        )
        .map_err(out_err)?;
        figures.push(json!({
            "kind": what,
            "cells_per_s": r,
            "vs_plain_csr": vs.best,
            "vs_plain_csr_each_round": vs.range,
        }));
    }
    if stats.is_none() {
        writeln!(
            out,
            "  (tokenizers and the gene vocabulary skipped: the dataset has no var names)"
        )
        .map_err(out_err)?;
    } else if args.vocabulary_by_variance {
        writeln!(
            out,
            "  (the 2,000-gene vocabulary listed by decreasing variance, out of gene order)"
        )
        .map_err(out_err)?;
    }
    match &balance {
        Some(c) => writeln!(out, "  (balanced on the obs column {c:?})"),
        None => writeln!(
            out,
            "  (balanced batches skipped: the dataset has no categorical obs column)"
        ),
    }
    .map_err(out_err)?;
    report.insert(
        "model_batches".into(),
        json!({
            "plain_csr_cells_per_s": rate(0),
            "balance_column": balance,
            "vocabulary_by_variance": args.vocabulary_by_variance,
            "kinds": figures,
        }),
    );
    Ok(())
}

//! Geneformer's rank-value encoding: a cell's genes ordered by their
//! median-scaled normalized counts.
//!
//! For the cell's nonzero genes that have both a token and a median,
//! `v_g = ((count_g / n_counts) * target_sum) / median_g`, each step one
//! `f64` operation in that order (`n_counts` the cell's total over all its
//! genes, summed exactly as integers, then converted). The genes are sorted
//! by decreasing `v`, ties by increasing token id, and the first `max_len`
//! tokens kept; with special tokens the row is `<cls>`, the first
//! `max_len - 2` genes, then `<eos>`. The rest of the row is `<pad>`.
//!
//! ## The sort
//!
//! Every `v` is positive and finite, so its IEEE bits order as the values
//! do, and `!bits` orders them decreasing: the genes are the pairs
//! `(!bits, token)` sorted increasing, which the `rank` module does with
//! counting passes over the keys' high bits instead of a comparison sort
//! (the same order, in time linear in the genes). Which passes depends on
//! whether the medians repeat and the tokens follow the columns, known once
//! per dataset from this table. Where the medians repeat on a grid (a
//! sketch's) and the tokens follow the columns, the `classes` module
//! orders rows without keys: by classes of `(count, median)` whose order
//! is the order of `v` in every cell. Elsewhere (a median per gene, as in
//! Geneformer's own dictionary, or tokens in another order) the `places`
//! module gives each `(count, column)` pair its place in that order, and
//! rows sort by places in two counting passes; rows it cannot place take
//! the keys' sort.

use super::classes::{ClassScratch, ClassTable};
use super::dict::{check_tokens, special, GeneMap};
use super::places::{PlaceMemo, PlaceScratch, PlaceTable};
use super::rank::{rank, Expect, RankBuffers};
use crate::engine::{best_row_kernels, count_total};
use crate::error::{Error, Result};
use crate::kernels::rows::RowKernels;
use std::sync::Arc;

/// Geneformer's settings: tokens and medians by gene key, the row length
/// and whether rows carry `<cls>` and `<eos>`.
#[derive(Clone, Debug, PartialEq)]
pub struct Geneformer {
    tokens: GeneMap<i32>,
    medians: GeneMap<f64>,
    max_len: usize,
    special_tokens: bool,
    target_sum: f64,
    gene_key: Option<String>,
    /// The last table of places built, shared by clones.
    places: PlaceMemo,
}

/// What Geneformer's rows use, checked: the special tokens and the
/// per-column table.
#[derive(Clone, Debug)]
pub(crate) struct GeneformerColumns {
    /// Per column: its median and its token, side by side so a gene costs
    /// one cache line; the token is -1 where the column is skipped (no
    /// token or no median; tokens are non-negative, checked), the median
    /// 1 there.
    pub(crate) columns: Vec<(f64, i32)>,
    pub(crate) pad: i32,
    /// `<cls>` and `<eos>`, with special tokens.
    pub(crate) special: Option<(i32, i32)>,
    pub(crate) target_sum: f64,
    pub(crate) max_len: usize,
    /// Which sort ranks a row's genes fastest.
    expect: Expect,
    /// Where the medians repeat, the classes that order rows with no sort.
    classes: Option<ClassTable>,
    /// Where they do not, each `(count, column)` pair's place, which
    /// orders rows by two counting passes (shared: a few MiB).
    places: Option<Arc<PlaceTable>>,
    /// The kernels the quotients are computed with.
    kernels: &'static RowKernels,
}

impl Geneformer {
    /// Geneformer over `tokens` (which hold `<pad>`, and `<cls>` and
    /// `<eos>` with special tokens) and `medians` (positive), rows of 2,048
    /// tokens without special tokens, matched by var names.
    pub fn new(tokens: GeneMap<i32>, medians: GeneMap<f64>) -> Result<Geneformer> {
        check_tokens(&tokens)?;
        special(&tokens, "<pad>", "padding")?;
        if let Some((k, m)) = medians.iter().find(|&(_, m)| !(m > 0.0 && m.is_finite())) {
            return Err(Error::Input(format!(
                "median of gene {k:?} is {m}: medians must be positive and finite"
            )));
        }
        Ok(Geneformer {
            tokens,
            medians,
            max_len: 2048,
            special_tokens: false,
            target_sum: 10_000.0,
            gene_key: None,
            places: PlaceMemo::default(),
        })
    }

    /// Rows of `max_len` tokens, with `<cls>` and `<eos>` when
    /// `special_tokens` (then `max_len` is at least 3, else at least 1).
    pub fn with_max_len(mut self, max_len: usize, special_tokens: bool) -> Result<Geneformer> {
        let least = if special_tokens { 3 } else { 1 };
        if max_len < least {
            return Err(Error::Input(format!(
                "Geneformer max_len must be at least {least}{}, not {max_len}",
                if special_tokens {
                    " with special tokens"
                } else {
                    ""
                }
            )));
        }
        if special_tokens {
            special(&self.tokens, "<cls>", "special tokens")?;
            special(&self.tokens, "<eos>", "special tokens")?;
        }
        self.max_len = max_len;
        self.special_tokens = special_tokens;
        Ok(self)
    }

    /// Matches genes by the `var` column `key` (`None`: the var names).
    pub fn with_gene_key(mut self, key: Option<String>) -> Geneformer {
        self.gene_key = key;
        self
    }

    /// The `var` column genes are matched by (`None`: the var names).
    pub fn gene_key(&self) -> Option<&str> {
        self.gene_key.as_deref()
    }

    /// Tokens per row.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The table for columns named `keys`.
    pub(crate) fn columns(&self, keys: &[String]) -> GeneformerColumns {
        let columns: Vec<(f64, i32)> = keys
            .iter()
            .map(|k| match (self.tokens.get(k), self.medians.get(k)) {
                (Some(t), Some(m)) => (m, t),
                _ => (1.0, -1),
            })
            .collect();
        let token = |name| self.tokens.get(name).expect("checked when configured");
        let classes = ClassTable::over(&columns, self.target_sum);
        let places = match classes {
            Some(_) => None,
            None => self.places.over(&columns, self.target_sum),
        };
        GeneformerColumns {
            expect: Expect::of(&columns),
            classes,
            places,
            columns,
            pad: token("<pad>"),
            special: self
                .special_tokens
                .then(|| (token("<cls>"), token("<eos>"))),
            target_sum: self.target_sum,
            max_len: self.max_len,
            kernels: best_row_kernels(),
        }
    }
}

/// Keeps the genes whose token `ts` is not negative, with their `xs` and
/// `ms`, at the front of the three arrays, in order; returns how many. Every
/// gene is written, and the next written over it unless it is kept: no
/// branch per gene.
fn squeeze(xs: &mut [f64], ms: &mut [f64], ts: &mut [i32]) -> usize {
    let mut n = 0;
    for i in 0..ts.len() {
        let t = ts[i];
        xs[n] = xs[i];
        ms[n] = ms[i];
        ts[n] = t;
        n += usize::from(t >= 0);
    }
    n
}

/// Counts whose scaled value a row computes up front.
const MEMO: usize = 32;

/// Reused buffers of [`GeneformerColumns::row`].
#[derive(Default)]
pub(crate) struct RankScratch {
    /// The scaled count `(count / n_counts) * target_sum` of each gene
    /// with a token and a median.
    scaled: Vec<f64>,
    /// Their medians.
    medians: Vec<f64>,
    /// Their tokens.
    tokens: Vec<i32>,
    /// `!bits` of each `v`.
    keys: Vec<u64>,
    buffers: RankBuffers,
    classes: ClassScratch,
    places: PlaceScratch,
}

impl GeneformerColumns {
    /// Whether column `g` has a token and a median.
    pub(crate) fn tokenizes(&self, g: usize) -> bool {
        self.columns[g].1 >= 0
    }

    /// Writes the row of a cell with `genes` (columns) and `counts` into
    /// `ids` and `mask` (`max_len` each).
    ///
    /// Every gene's scaled count, median and token are gathered first, each
    /// gene's apart from the others', so that the loads from the table
    /// overlap; a row with genes that lack a token or a median then has them
    /// squeezed out by a second pass over those arrays, in L1. Squeezed out
    /// as they were gathered, each gene's place waited on whether the one
    /// before it had a token: the gather took 23.9% of a profile of the
    /// bench's Geneformer batches (whose rows lack none) against 20.1%, and
    /// the batches were about 5% slower. The divisions by the medians are
    /// then one kernel over those arrays ([`RowKernels::quotient_keys`],
    /// vectors of divisions), rather than one division per gene between
    /// table lookups.
    ///
    /// `total`, the cell's total over all the genes it has where `counts`
    /// are not all of them (a corpus member's row mapped into fewer genes);
    /// else `n_counts` is the sum of `counts`.
    pub(crate) fn row(
        &self,
        (genes, counts): (&[i32], &[i32]),
        total: Option<u64>,
        ids: &mut [i32],
        mask: &mut [u8],
        scratch: &mut RankScratch,
    ) {
        let n_counts = total.unwrap_or_else(|| count_total(counts)) as f64;
        // `(count / n_counts) * target_sum` of the small counts, each
        // computed once per cell: the same value, fewer divisions.
        let scaled = |c: u32| (f64::from(c) / n_counts) * self.target_sum;
        let memo: [f64; MEMO] = std::array::from_fn(|c| scaled(c as u32));
        let key = |c: u32, median: f64| {
            let x = memo.get(c as usize).copied().unwrap_or_else(|| scaled(c));
            !(x / median).to_bits()
        };
        let body = self.body();
        let ranked = if let Some(table) = &self.classes {
            table.ranked(genes, counts, key, &mut scratch.classes, &mut ids[body])
        } else if let Some(table) = &self.places {
            let out = &mut ids[body];
            table.ranked(genes, counts, &self.columns, key, &mut scratch.places, out)
        } else {
            None
        };
        if let Some(kept) = ranked {
            self.close(kept, ids, mask);
            return;
        }
        let len = genes.len();
        scratch.scaled.resize(len, 0.0);
        scratch.medians.resize(len, 0.0);
        scratch.tokens.resize(len, 0);
        let (xs, ms, ts) = (
            &mut scratch.scaled[..len],
            &mut scratch.medians[..len],
            &mut scratch.tokens[..len],
        );
        let mut skipped = false;
        for ((&g, &c), ((x, m), t)) in genes
            .iter()
            .zip(counts)
            .zip(xs.iter_mut().zip(ms.iter_mut()).zip(ts.iter_mut()))
        {
            let (median, token) = self.columns[g as usize];
            let c = c as u32;
            *x = memo.get(c as usize).copied().unwrap_or_else(|| scaled(c));
            *m = median;
            *t = token;
            skipped |= token < 0;
        }
        let n = if skipped { squeeze(xs, ms, ts) } else { len };
        scratch.keys.resize(n, 0);
        let range = self
            .kernels
            .quotient_keys(&xs[..n], &ms[..n], &mut scratch.keys[..n]);
        let exact = rank(
            &scratch.keys[..n],
            range,
            &ts[..n],
            self.expect,
            &mut scratch.buffers,
        );
        self.emit(exact.iter().map(|p| p.1), ids, mask);
    }

    /// Where a row's ranked genes go among its `max_len` ids: after
    /// `<cls>` and with room for `<eos>` where the row has special tokens.
    fn body(&self) -> std::ops::Range<usize> {
        match self.special {
            Some(_) => 1..self.max_len - 1,
            None => 0..self.max_len,
        }
    }

    /// Writes a row of the genes' `tokens`, ranked, into `ids` and `mask`.
    fn emit(&self, tokens: impl ExactSizeIterator<Item = i32>, ids: &mut [i32], mask: &mut [u8]) {
        let body = &mut ids[self.body()];
        let kept = tokens.len().min(body.len());
        for (o, t) in body.iter_mut().zip(tokens) {
            *o = t;
        }
        self.close(kept, ids, mask);
    }

    /// Completes a row whose body holds `kept` ranked genes: `<cls>` and
    /// `<eos>` around them where the row has special tokens, then padding,
    /// and the mask.
    fn close(&self, kept: usize, ids: &mut [i32], mask: &mut [u8]) {
        let mut len = self.body().start + kept;
        if let Some((cls, eos)) = self.special {
            ids[0] = cls;
            ids[len] = eos;
            len += 1;
        }
        ids[len..].fill(self.pad);
        mask[..len].fill(1);
        mask[len..].fill(0);
    }
}

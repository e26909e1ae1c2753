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
//! do, and `!bits` orders them decreasing. The sort key of a gene is one
//! `u64`: the high 48 bits of `!bits`, then the gene's position among the
//! cell's candidates (16 bits). One `sort_unstable` of those keys orders the
//! genes by those 48 bits; genes whose keys agree there (exact ties, or
//! values within 2^-36 relative of each other) lie next to each other, and
//! each such run is then sorted by the exact key `(!bits, token)`. The
//! result is exactly the order by (`v` decreasing, token increasing), with
//! the cost of sorting plain `u64`s: measured at 23 us for a cell of 2,000
//! genes with realistic counts and medians (one core of a 2-core machine,
//! optimized build), where sorting the `(f64, i32)` pairs with a float
//! comparison took 34 us there. A cell with more than 65,536 candidates
//! sorts `(!bits, token)` pairs directly.

use super::dict::{check_tokens, special, GeneMap};
use crate::error::{Error, Result};

/// Geneformer's settings: tokens and medians by gene key, the row length
/// and whether rows carry `<cls>` and `<eos>`.
#[derive(Clone, Debug)]
pub struct Geneformer {
    tokens: GeneMap<i32>,
    medians: GeneMap<f64>,
    max_len: usize,
    special_tokens: bool,
    target_sum: f64,
    gene_key: Option<String>,
}

/// What Geneformer's rows use, checked: the special tokens and the
/// per-column table.
#[derive(Clone, Debug)]
pub(crate) struct GeneformerColumns {
    /// Per column: its token and median, or `None` (skipped).
    pub(crate) columns: Vec<Option<(i32, f64)>>,
    pub(crate) pad: i32,
    /// `<cls>` and `<eos>`, with special tokens.
    pub(crate) special: Option<(i32, i32)>,
    pub(crate) target_sum: f64,
    pub(crate) max_len: usize,
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
        let columns = keys
            .iter()
            .map(|k| Some((self.tokens.get(k)?, self.medians.get(k)?)))
            .collect();
        let token = |name| self.tokens.get(name).expect("checked when configured");
        GeneformerColumns {
            columns,
            pad: token("<pad>"),
            special: self
                .special_tokens
                .then(|| (token("<cls>"), token("<eos>"))),
            target_sum: self.target_sum,
            max_len: self.max_len,
        }
    }
}

/// Reused buffers of [`GeneformerColumns::row`].
#[derive(Default)]
pub(crate) struct RankScratch {
    /// Each candidate's `(!bits of v, token)`.
    exact: Vec<(u64, i32)>,
    keys: Vec<u64>,
    spare: Vec<(u64, i32)>,
}

impl GeneformerColumns {
    /// Writes the row of a cell with `genes` (columns) and `counts` into
    /// `ids` and `mask` (`max_len` each).
    pub(crate) fn row(
        &self,
        genes: &[i32],
        counts: &[i32],
        ids: &mut [i32],
        mask: &mut [u8],
        scratch: &mut RankScratch,
    ) {
        let n_counts = counts.iter().map(|&c| u64::from(c as u32)).sum::<u64>() as f64;
        let exact = &mut scratch.exact;
        exact.clear();
        for (&g, &c) in genes.iter().zip(counts) {
            if let Some((token, median)) = self.columns[g as usize] {
                let v = ((f64::from(c as u32) / n_counts) * self.target_sum) / median;
                exact.push((!v.to_bits(), token));
            }
        }
        rank(exact, &mut scratch.keys, &mut scratch.spare);
        let (body, first) = match self.special {
            Some((cls, _)) => {
                ids[0] = cls;
                (self.max_len - 2, 1)
            }
            None => (self.max_len, 0),
        };
        let kept = exact.len().min(body);
        for (o, &(_, t)) in ids[first..].iter_mut().zip(&exact[..kept]) {
            *o = t;
        }
        let mut len = first + kept;
        if let Some((_, eos)) = self.special {
            ids[len] = eos;
            len += 1;
        }
        ids[len..].fill(self.pad);
        mask[..len].fill(1);
        mask[len..].fill(0);
    }
}

/// Sorts `exact` by `(!bits, token)` increasing, that is by `v` decreasing,
/// ties by token increasing (see the module docs), through `keys` and
/// `spare`.
pub(crate) fn rank(exact: &mut Vec<(u64, i32)>, keys: &mut Vec<u64>, spare: &mut Vec<(u64, i32)>) {
    const POS: u64 = 0xFFFF;
    if exact.len() > POS as usize + 1 {
        exact.sort_unstable();
        return;
    }
    keys.clear();
    keys.extend(
        exact
            .iter()
            .enumerate()
            .map(|(i, &(bits, _))| (bits & !POS) | i as u64),
    );
    keys.sort_unstable();
    spare.clear();
    spare.extend(keys.iter().map(|&k| exact[(k & POS) as usize]));
    let mut start = 0;
    for i in 1..=keys.len() {
        if i == keys.len() || keys[i] & !POS != keys[start] & !POS {
            if i - start > 1 {
                spare[start..i].sort_unstable();
            }
            start = i;
        }
    }
    std::mem::swap(exact, spare);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reproducible `(!bits, token)` list of `n` values: few distinct
    /// values (exact ties), and values one ulp apart (same high 48 bits).
    fn candidates(n: usize, seed: u64) -> Vec<(u64, i32)> {
        let mut s = seed;
        (0..n)
            .map(|i| {
                s = s
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1442695040888963407);
                let v = 1.0 + (s >> 60) as f64 / 8.0;
                let v = f64::from_bits(v.to_bits() + (s >> 62));
                (!v.to_bits(), ((i * 7919) % n) as i32)
            })
            .collect()
    }

    #[test]
    fn rank_orders_by_value_down_then_token_up() {
        for (n, seed) in [(0, 1), (1, 2), (2_000, 3), (70_000, 4)] {
            let mut got = candidates(n, seed);
            let mut want = got.clone();
            want.sort_by(|a, b| {
                let (va, vb) = (f64::from_bits(!a.0), f64::from_bits(!b.0));
                vb.partial_cmp(&va).unwrap().then(a.1.cmp(&b.1))
            });
            rank(&mut got, &mut Vec::new(), &mut Vec::new());
            assert_eq!(got, want, "{n} candidates");
        }
    }
}

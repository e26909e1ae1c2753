//! Which cells an epoch serves, and how often: every cell once, each cell of
//! a subset once, or draws with replacement by weight.
//!
//! A [`BatchConfig`](super::BatchConfig) names a subset
//! ([`BatchConfig::cells`](super::BatchConfig::cells)), per-cell weights or
//! classes to balance ([`Weights`]) and a number of draws
//! ([`BatchConfig::samples_per_epoch`](super::BatchConfig::samples_per_epoch));
//! the iterator resolves them once into a [`Population`], which the epoch
//! order ([`super::EpochOrder`]) lists tile by tile.
//!
//! # Draws with replacement
//!
//! An epoch of `n` draws gives every draw cell `c` with probability exactly
//! `w_c / W` (`W` the sum of the weights, cells outside a subset weighing 0),
//! the draws independent. How they are made depends on the shuffle:
//!
//! * **with locality** (block shuffle, and dataset order): the number of
//!   draws landing in each tile is one multinomial draw of `n` over the
//!   tiles' weights `W_t` (conditional binomials, tile by tile); each of a
//!   tile's draws is then a cell of that tile with probability `w_c / W_t`.
//!   A cell is thus drawn with probability `W_t / W * w_c / W_t = w_c / W`,
//!   and since the draws are exchangeable, serving them a window of tiles at
//!   a time (shuffled within the window) changes no marginal: each tile is
//!   decoded about once per epoch, as in a plain block shuffle.
//! * **uniformly at random** ([`super::Shuffle::Random`]): draw `i` is the
//!   cell where a uniform number keyed by `(seed, epoch, i)` falls in the
//!   cumulative weights, each draw computed alone (random access).
//!
//! A cell's draw is the first cell whose cumulative weight exceeds `u *
//! total`, `u` uniform in `[0, 1)` on 53 bits, so a cell of weight 0 is never
//! drawn.
//!
//! # Balanced classes
//!
//! [`Weights::Balance`] names categorical obs columns; a class is a
//! combination of their codes present in the population (a missing code is
//! a value of its own). Each cell weighs `1 / (cells of its class)`, so every
//! class is drawn with probability `1 / classes`.

use std::collections::HashMap;
use std::sync::Arc;

use rand::RngCore;
use rand_distr::{Binomial, Distribution};
use rand_pcg::Pcg64Mcg;

use crate::dataset::batches::producer::CellLabels;
use crate::error::{Error, Result};
use crate::kernels::reference::rows::mix;

/// What weighs the draws of an epoch with replacement.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Weights {
    /// No weights: every cell (of the subset, if any) once per epoch, unless
    /// [`BatchConfig::samples_per_epoch`](super::BatchConfig::samples_per_epoch)
    /// asks for draws, which are then uniform.
    #[default]
    None,
    /// One weight per cell of the dataset (finite, at least 0, not all 0).
    PerCell(Arc<[f64]>),
    /// Balance the classes of these categorical obs columns (see the module docs).
    Balance(Vec<String>),
}

/// The cells an epoch serves, resolved from a configuration.
#[derive(Clone, Debug)]
pub(crate) enum Population {
    /// Every cell once.
    All,
    /// Each of these cells once (ascending, distinct).
    Subset(Arc<[u64]>),
    /// `samples` draws with replacement by `weights` (one per cell).
    Drawn {
        /// The weight of each cell.
        weights: Arc<[f64]>,
        /// Draws per epoch, all ranks together.
        samples: u64,
    },
}

/// What a configuration asks an epoch to serve, before it is resolved.
pub(crate) struct Request<'a> {
    /// The subset, if any (any order, duplicates allowed).
    pub cells: Option<&'a [u64]>,
    /// The weights.
    pub weights: &'a Weights,
    /// Draws per epoch, if given.
    pub samples: Option<u64>,
}

impl Population {
    /// Resolves `request` over `n_cells` cells whose tiles start at
    /// `limits`; `labels` gives the obs columns of a balance.
    pub(crate) fn resolve(
        request: &Request<'_>,
        limits: &[u64],
        labels: Option<&dyn CellLabels>,
    ) -> Result<Population> {
        let n_cells = limits.last().copied().unwrap_or(0);
        let subset = match request.cells {
            Some(cells) => {
                let mut sorted = cells.to_vec();
                sorted.sort_unstable();
                sorted.dedup();
                if let Some(&c) = sorted.last().filter(|&&c| c >= n_cells) {
                    return Err(Error::Input(format!(
                        "cell {c} of the subset is outside 0..{n_cells}"
                    )));
                }
                Some(Arc::<[u64]>::from(sorted))
            }
            None => None,
        };
        let weights: Option<Vec<f64>> = match request.weights {
            Weights::None if request.samples.is_none() => None,
            Weights::None => Some(vec![1.0; n_cells as usize]),
            Weights::PerCell(w) => {
                if w.len() as u64 != n_cells {
                    return Err(Error::Input(format!(
                        "{} weights for {n_cells} cells: give one per cell",
                        w.len()
                    )));
                }
                if let Some((c, &x)) = w
                    .iter()
                    .enumerate()
                    .find(|(_, x)| !x.is_finite() || **x < 0.0)
                {
                    return Err(Error::Input(format!(
                        "the weight of cell {c} is {x}: weights must be finite and at least 0"
                    )));
                }
                Some(w.to_vec())
            }
            Weights::Balance(columns) => {
                let labels = labels.ok_or_else(|| {
                    Error::Input("balanced sampling needs the dataset's obs".into())
                })?;
                Some(balance_weights(columns, limits, subset.as_deref(), labels)?)
            }
        };
        let Some(mut weights) = weights else {
            return Ok(subset.map_or(Population::All, Population::Subset));
        };
        if let Some(subset) = &subset {
            let mut kept = vec![0.0; weights.len()];
            for &c in subset.iter() {
                kept[c as usize] = weights[c as usize];
            }
            weights = kept;
        }
        if subset.as_ref().is_some_and(|s| s.is_empty()) {
            return Err(Error::Input(
                "the subset of cells holds no cell: nothing can be drawn".into(),
            ));
        }
        if !weights.iter().any(|&w| w > 0.0) {
            return Err(Error::Input(
                "every weight is 0: nothing can be drawn".into(),
            ));
        }
        if weights.iter().sum::<f64>().is_infinite() {
            scale_below_one(&mut weights);
        }
        let samples = request
            .samples
            .unwrap_or_else(|| subset.as_ref().map_or(n_cells, |s| s.len() as u64));
        Ok(Population::Drawn {
            weights: weights.into(),
            samples,
        })
    }

    /// How many cells tile `t` (cells `limits[t]..limits[t + 1]`) serves
    /// this epoch, for each tile; `rng` draws the split of a weighted epoch.
    pub(crate) fn tile_counts(&self, limits: &[u64], rng: &mut Pcg64Mcg) -> Vec<u64> {
        let tiles = limits.windows(2);
        match self {
            Population::All => tiles.map(|w| w[1] - w[0]).collect(),
            Population::Subset(cells) => tiles
                .map(|w| {
                    (cells.partition_point(|&c| c < w[1]) - cells.partition_point(|&c| c < w[0]))
                        as u64
                })
                .collect(),
            Population::Drawn { weights, samples } => {
                let totals: Vec<f64> = tiles
                    .map(|w| weights[w[0] as usize..w[1] as usize].iter().sum())
                    .collect();
                multinomial(*samples, &totals, rng)
            }
        }
    }

    /// Appends tile `t`'s cells of this epoch (`count` of them, from
    /// [`Population::tile_counts`]) to `out`, ascending; `rng` is the tile's
    /// own generator of the epoch.
    pub(crate) fn tile_cells(
        &self,
        limits: &[u64],
        t: usize,
        count: u64,
        rng: &mut Pcg64Mcg,
        out: &mut Vec<u64>,
    ) {
        let (lo, hi) = (limits[t], limits[t + 1]);
        match self {
            Population::All => out.extend(lo..hi),
            Population::Subset(cells) => {
                let a = cells.partition_point(|&c| c < lo);
                let b = cells.partition_point(|&c| c < hi);
                out.extend_from_slice(&cells[a..b]);
            }
            Population::Drawn { weights, .. } => {
                let cumulative = cumulate(&weights[lo as usize..hi as usize]);
                let start = out.len();
                out.extend((0..count).map(|_| lo + draw(&cumulative, unit(rng.next_u64()))));
                out[start..].sort_unstable();
            }
        }
    }

    /// Number of cells an epoch serves, over `n_cells` cells.
    pub(crate) fn len(&self, n_cells: u64) -> u64 {
        match self {
            Population::All => n_cells,
            Population::Subset(cells) => cells.len() as u64,
            Population::Drawn { samples, .. } => *samples,
        }
    }

    /// The cell that is the `k`-th of a population served once each (every
    /// cell, or a subset's): how a random order turns a permuted index into
    /// a cell. Draws are turned into cells by [`RandomDraws`] instead.
    pub(crate) fn subset_cell(&self, k: u64) -> u64 {
        match self {
            Population::Subset(cells) => cells[k as usize],
            _ => k,
        }
    }
}

/// The cumulative weights a uniformly random weighted epoch searches, one
/// per cell (built once per iterator).
#[derive(Clone, Debug)]
pub(crate) struct RandomDraws {
    cumulative: Arc<[f64]>,
    key: u64,
}

impl RandomDraws {
    /// The draws of `weights` keyed by `key` (the epoch's).
    pub(crate) fn new(weights: &[f64], key: u64) -> RandomDraws {
        RandomDraws {
            cumulative: cumulate(weights).into(),
            key,
        }
    }

    /// The cell drawn at epoch position `i`.
    pub(crate) fn at(&self, i: u64) -> u64 {
        draw(&self.cumulative, unit(mix(self.key ^ mix(i))))
    }
}

/// Running sums of `weights`, in order.
fn cumulate(weights: &[f64]) -> Vec<f64> {
    let mut total = 0.0;
    weights
        .iter()
        .map(|&w| {
            total += w;
            total
        })
        .collect()
}

/// The first index whose cumulative weight exceeds `u` times the total (the
/// last positive one, should rounding put `u * total` at the total).
fn draw(cumulative: &[f64], u: f64) -> u64 {
    let total = cumulative.last().copied().unwrap_or(0.0);
    let target = u * total;
    let i = cumulative.partition_point(|&c| c <= target);
    if i < cumulative.len() {
        return i as u64;
    }
    // `target` rounded up to the total: the last cell that has weight.
    let last = cumulative.partition_point(|&c| c < total);
    last as u64
}

/// A uniform number in `[0, 1)` from the top 53 bits of `bits`.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Scales `weights`, whose sum passes `f64::MAX`, by the power of two that
/// puts the largest below 1: exactly, so each cell's share of the total is
/// what it was (but for weights below 2^-1022 of the largest, whose share is
/// nothing anyway), and the sum of any number of them a number. Weights
/// that sum to a number are left as they are, so their draws do not change.
fn scale_below_one(weights: &mut [f64]) {
    let largest = weights.iter().copied().fold(0.0, f64::max);
    let exponent = largest.log2().floor() as i32 + 1;
    // Two steps: 2^-exponent alone may be past the smallest normal number.
    let (a, b) = (2f64.powi(-exponent / 2), 2f64.powi(exponent / 2 - exponent));
    for w in weights.iter_mut() {
        *w = *w * a * b;
    }
}

/// `n` draws split over categories of weights `totals` (one multinomial
/// draw): each category's count is a binomial of what is left, with the
/// category's share of the weight left.
fn multinomial(n: u64, totals: &[f64], rng: &mut Pcg64Mcg) -> Vec<u64> {
    let mut left_weight: f64 = totals.iter().sum();
    let mut left = n;
    let last = totals.iter().rposition(|&w| w > 0.0);
    totals
        .iter()
        .enumerate()
        .map(|(t, &w)| {
            if left == 0 || w <= 0.0 {
                return 0;
            }
            if Some(t) == last {
                let all = left;
                left = 0;
                return all;
            }
            let p = (w / left_weight).clamp(0.0, 1.0);
            left_weight -= w;
            let k = Binomial::new(left, p).map_or(0, |b| b.sample(rng));
            left -= k;
            k
        })
        .collect()
}

/// Each cell's weight in a balance of `columns`: 1 over the cells of its
/// class among `subset` (every cell when `None`), 0 outside the subset.
fn balance_weights(
    columns: &[String],
    limits: &[u64],
    subset: Option<&[u64]>,
    labels: &dyn CellLabels,
) -> Result<Vec<f64>> {
    if columns.is_empty() {
        return Err(Error::Input("balance names no obs column".into()));
    }
    let n_cells = limits.last().copied().unwrap_or(0) as usize;
    // Each cell's class, numbered as first met.
    let mut class = vec![u32::MAX; n_cells];
    let mut classes: HashMap<Vec<i32>, u32> = HashMap::new();
    let mut sizes: Vec<u64> = Vec::new();
    for w in limits.windows(2) {
        let cells: Vec<u64> = match subset {
            Some(s) => {
                let (a, b) = (
                    s.partition_point(|&c| c < w[0]),
                    s.partition_point(|&c| c < w[1]),
                );
                s[a..b].to_vec()
            }
            None => (w[0]..w[1]).collect(),
        };
        if cells.is_empty() {
            continue;
        }
        let got = labels.labels(&cells)?;
        let codes = columns
            .iter()
            .map(|name| {
                let label = got.get(name).ok_or_else(|| {
                    Error::Input(format!("balance column {name:?} is not an obs column"))
                })?;
                label.codes_or_missing().ok_or_else(|| {
                    Error::Input(format!(
                        "balance column {name:?} is {:?}, not categorical",
                        label.kind
                    ))
                })
            })
            .collect::<Result<Vec<Vec<i32>>>>()?;
        for (i, &c) in cells.iter().enumerate() {
            let key: Vec<i32> = codes.iter().map(|col| col[i]).collect();
            let next = classes.len() as u32;
            let k = *classes.entry(key).or_insert(next);
            if k as usize == sizes.len() {
                sizes.push(0);
            }
            sizes[k as usize] += 1;
            class[c as usize] = k;
        }
    }
    Ok(class
        .iter()
        .map(|&k| match sizes.get(k as usize) {
            Some(&n) => 1.0 / n as f64,
            None => 0.0,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn draws_never_land_on_a_weight_of_zero() {
        let cumulative = cumulate(&[0.0, 2.0, 0.0, 1.0, 0.0]);
        // The lowest and the highest uniform numbers, and the boundary.
        assert_eq!(draw(&cumulative, 0.0), 1);
        assert_eq!(draw(&cumulative, unit(u64::MAX)), 3);
        assert_eq!(draw(&cumulative, 2.0 / 3.0), 3);
        assert_eq!(draw(&cumulative, 1.0), 3, "rounded up to the total");
        assert!(unit(u64::MAX) < 1.0);
    }

    #[test]
    fn the_multinomial_split_spends_every_draw_on_weighted_tiles() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        for n in [0u64, 1, 7, 10_000] {
            let counts = multinomial(n, &[0.0, 1.0, 0.0, 3.0, 0.0], &mut rng);
            assert_eq!(counts.iter().sum::<u64>(), n);
            assert_eq!((counts[0], counts[2], counts[4]), (0, 0, 0));
        }
        // Literal values: a change to the split silently changes every
        // weighted epoch.
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        assert_eq!(
            multinomial(100, &[1.0, 2.0, 3.0, 4.0], &mut rng),
            [8, 26, 31, 35]
        );
    }
}

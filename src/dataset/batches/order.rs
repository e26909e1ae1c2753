//! The epoch's cell order: a pure value of the manifest's tile limits and
//! `(seed, epoch)`, the same on any machine, any thread count and any number
//! of data-loader workers.
//!
//! The permutations use a PCG generator (value-stable across platforms and
//! crate versions) and Lemire's bounded sampling written here.
//!
//! * [`Shuffle::Block`]: shuffle the tile order, then the cells within each
//!   window of `window_tiles` consecutive tiles of that order. A window's
//!   cells are served together, so each chunk is decoded about once per epoch.
//! * [`Shuffle::Random`]: a uniform permutation of every cell, computed one
//!   position at a time by a keyed bijection (no cell list is ever held),
//!   which costs random access: about a chunk decoded per cell.
//! * [`Shuffle::None`]: dataset order.
//!
//! The cells listed are those of the epoch's [`Population`]: every cell, a
//! subset's, or draws with replacement (see [`super::sampling`]); each
//! shuffle keeps its meaning over them, and tiles serving no cell are never
//! in the order (never fetched).
//!
//! Each rank's share of the order is [`super::RankShare`].

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use rand::RngCore;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use super::sampling::{Population, RandomDraws};
use crate::error::{Error, Result};
use crate::kernels::reference::rows::{mix, GOLDEN};

/// Tiles per window of [`Shuffle::Block`] when none is named (`"block"`).
pub const DEFAULT_WINDOW_TILES: usize = 4;

/// How the epoch's cells are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shuffle {
    /// Cells in dataset order.
    None,
    /// Shuffle tiles, then cells within windows of `window_tiles` tiles.
    Block {
        /// Tiles per window: more mixes cells of more tiles into each batch,
        /// and holds more decoded tiles in memory.
        window_tiles: usize,
    },
    /// A uniform permutation of every cell (random access: slow, but what
    /// an i.i.d. sampler promises).
    Random,
}

impl FromStr for Shuffle {
    type Err = Error;

    /// `none`, `random`, `block` (windows of [`DEFAULT_WINDOW_TILES`]) or
    /// `block:N` (windows of `N` tiles).
    fn from_str(s: &str) -> Result<Shuffle> {
        let bad = || {
            Error::Input(format!(
                "shuffle must be \"none\", \"block\", \"block:N\" or \"random\", not {s:?}"
            ))
        };
        match s {
            "none" => Ok(Shuffle::None),
            "random" => Ok(Shuffle::Random),
            "block" => Ok(Shuffle::Block {
                window_tiles: DEFAULT_WINDOW_TILES,
            }),
            _ => {
                let n = s.strip_prefix("block:").ok_or_else(bad)?;
                match n.parse::<usize>() {
                    Ok(window_tiles) if window_tiles > 0 => Ok(Shuffle::Block { window_tiles }),
                    _ => Err(bad()),
                }
            }
        }
    }
}

impl fmt::Display for Shuffle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shuffle::None => f.write_str("none"),
            Shuffle::Random => f.write_str("random"),
            Shuffle::Block { window_tiles } => write!(f, "block:{window_tiles}"),
        }
    }
}

/// Uniform integer in `0..bound` (Lemire's multiply-and-reject; `bound > 0`).
fn below(rng: &mut Pcg64Mcg, bound: u64) -> u64 {
    let mut m = u128::from(rng.next_u64()) * u128::from(bound);
    if (m as u64) < bound {
        let threshold = bound.wrapping_neg() % bound;
        while (m as u64) < threshold {
            m = u128::from(rng.next_u64()) * u128::from(bound);
        }
    }
    (m >> 64) as u64
}

/// Fisher-Yates shuffle with [`below`].
fn shuffle<T>(items: &mut [T], rng: &mut Pcg64Mcg) {
    for i in (1..items.len()).rev() {
        let j = below(rng, i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// A generator for one purpose of one epoch (SplitMix64 of the three words).
fn rng(seed: u64, epoch: u64, stream: u64) -> Pcg64Mcg {
    let z = seed ^ epoch.wrapping_mul(GOLDEN) ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
    Pcg64Mcg::seed_from_u64(mix(z))
}

/// A keyed permutation of `0..n`, evaluated one position at a time: a
/// balanced Feistel network on the smallest even number of bits covering
/// `n`, with cycle walking (a value at or past `n` is permuted again until it
/// falls inside, which keeps the map a bijection of `0..n`). The domain is
/// below `4n`, so a position takes fewer than four walks on average.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    fn new(n: u64, rng: &mut Pcg64Mcg) -> Permutation {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        Permutation {
            n,
            half_bits: bits.div_ceil(2).max(1),
            keys: std::array::from_fn(|_| rng.next_u64()),
        }
    }

    /// One pass of the network over the `2 * half_bits`-bit domain.
    fn round_trip(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for &key in &self.keys {
            let f = mix(right ^ key) & mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half_bits) | right
    }

    /// The cell at position `i < n`.
    fn at(&self, i: u64) -> u64 {
        let mut x = self.round_trip(i);
        while x >= self.n {
            x = self.round_trip(x);
        }
        x
    }
}

/// The epoch's global cell order for tiles starting at `limits` (`n_tiles +
/// 1` entries), listed on demand: block shuffle lists one window at a time
/// (only the window being served is held), random order computes each
/// position, dataset order is the positions themselves.
///
/// The order depends only on the limits, the [`Shuffle`], the seed and the
/// epoch: every rank and every loader worker computes the same one.
#[derive(Clone, Debug)]
pub struct EpochOrder {
    limits: Vec<u64>,
    shuffle: Shuffle,
    seed: u64,
    epoch: u64,
    /// Tiles in epoch order.
    tiles: Vec<usize>,
    /// Tiles per window (1 without block shuffling: windows are then never listed).
    window_tiles: usize,
    /// Epoch position where each window starts, plus the total at the end.
    window_starts: Vec<u64>,
    /// The cells the epoch serves.
    population: Population,
    /// How many cells each tile serves this epoch.
    counts: Vec<u64>,
    /// The positions of [`Shuffle::Random`].
    random: Option<RandomOrder>,
    /// The listed window: its index and its cells in epoch order.
    current: Option<(usize, Vec<u64>)>,
}

/// Where a random order's positions come from.
#[derive(Clone, Debug)]
enum RandomOrder {
    /// A permutation of the population's cells (every cell, or a subset's).
    Permuted(Permutation),
    /// Independent draws by weight.
    Drawn(RandomDraws),
}

impl EpochOrder {
    /// The order of epoch `epoch` of `seed` over tiles starting at `limits`
    /// (the first cell of each tile, then the cell count).
    pub fn new(limits: &[u64], shuffle_mode: Shuffle, seed: u64, epoch: u64) -> EpochOrder {
        EpochOrder::of(limits, Population::All, shuffle_mode, seed, epoch)
    }

    /// As [`EpochOrder::new`], serving the cells of `population`.
    pub(crate) fn of(
        limits: &[u64],
        population: Population,
        shuffle_mode: Shuffle,
        seed: u64,
        epoch: u64,
    ) -> EpochOrder {
        let counts = population.tile_counts(limits, &mut rng(seed, epoch, u64::MAX - 2));
        // Every tile of a whole epoch (its order as it always was), else
        // only the tiles serving cells.
        let all = matches!(population, Population::All);
        let mut tiles: Vec<usize> = (0..counts.len())
            .filter(|&t| all || counts[t] > 0)
            .collect();
        let mut random = None;
        let window_tiles = match shuffle_mode {
            Shuffle::None => 1,
            Shuffle::Random => {
                let n = limits.last().copied().unwrap_or(0);
                let mut r = rng(seed, epoch, u64::MAX - 1);
                random = Some(match &population {
                    Population::Drawn { weights, .. } => {
                        RandomOrder::Drawn(RandomDraws::new(weights, r.next_u64()))
                    }
                    _ => RandomOrder::Permuted(Permutation::new(population.len(n), &mut r)),
                });
                1
            }
            Shuffle::Block { window_tiles } => {
                shuffle(&mut tiles, &mut rng(seed, epoch, u64::MAX));
                window_tiles.max(1)
            }
        };
        let mut window_starts = vec![0u64];
        for window in tiles.chunks(window_tiles) {
            let cells: u64 = window.iter().map(|&t| counts[t]).sum();
            window_starts.push(window_starts[window_starts.len() - 1] + cells);
        }
        EpochOrder {
            limits: limits.to_vec(),
            shuffle: shuffle_mode,
            seed,
            epoch,
            tiles,
            window_tiles,
            window_starts,
            population,
            counts,
            random,
            current: None,
        }
    }

    /// The shuffle this order follows.
    pub fn shuffle(&self) -> Shuffle {
        self.shuffle
    }

    /// Number of cells in the epoch.
    pub fn len(&self) -> u64 {
        *self.window_starts.last().unwrap_or(&0)
    }

    /// Whether the epoch has no cells.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cells at epoch positions `range` (clamped to the epoch).
    pub fn cells(&mut self, range: Range<u64>) -> Vec<u64> {
        let range = range.start.min(self.len())..range.end.min(self.len());
        self.cells_fetched(range, |_| Ok(()))
            .expect("listing without a fetch cannot fail")
    }

    /// The cells at epoch positions `range` (within the epoch). `fetch` is
    /// called with a window's tiles before that window's cells are listed,
    /// so that a dataset checks them before a list sized by their cell
    /// counts is allocated.
    pub(crate) fn cells_fetched(
        &mut self,
        range: Range<u64>,
        mut fetch: impl FnMut(&[usize]) -> Result<()>,
    ) -> Result<Vec<u64>> {
        match (&self.shuffle, &self.random, &self.population) {
            (Shuffle::None, _, Population::All) => return Ok(range.collect()),
            (Shuffle::Random, Some(RandomOrder::Permuted(p)), population) => {
                return Ok(range.map(|i| population.subset_cell(p.at(i))).collect())
            }
            (Shuffle::Random, Some(RandomOrder::Drawn(d)), _) => {
                return Ok(range.map(|i| d.at(i)).collect())
            }
            _ => {}
        }
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        let mut at = range.start;
        while at < range.end {
            let w = self.window_of(at);
            if self.current.as_ref().is_none_or(|(c, _)| *c != w) {
                self.current = None;
                let tiles = self.window(w);
                fetch(tiles)?;
                let served = self.window_starts[w + 1] - self.window_starts[w];
                let mut cells = Vec::new();
                // Draws with replacement may ask for more than memory holds.
                usize::try_from(served)
                    .ok()
                    .and_then(|n| cells.try_reserve_exact(n).ok())
                    .ok_or_else(|| {
                        Error::Input(format!(
                            "a window of {served} cells does not fit in memory: \
                             ask for fewer samples_per_epoch"
                        ))
                    })?;
                for &t in tiles {
                    let mut draws = rng(self.seed, self.epoch, (1 << 63) | t as u64);
                    let (limits, count) = (&self.limits, self.counts[t]);
                    self.population
                        .tile_cells(limits, t, count, &mut draws, &mut cells);
                }
                if self.shuffle != Shuffle::None {
                    shuffle(&mut cells, &mut rng(self.seed, self.epoch, w as u64));
                }
                self.current = Some((w, cells));
            }
            let (_, cells) = self.current.as_ref().expect("window listed above");
            let (first, end) = (self.window_starts[w], self.window_starts[w + 1]);
            let stop = range.end.min(end);
            out.extend_from_slice(&cells[(at - first) as usize..(stop - first) as usize]);
            at = stop;
        }
        Ok(out)
    }

    /// Whether cells are served a window of tiles at a time (block shuffle
    /// and dataset order), so that a window's decoded rows can be shared by
    /// its batches.
    pub(crate) fn has_windows(&self) -> bool {
        !matches!(self.shuffle, Shuffle::Random)
    }

    /// The tiles of the window holding epoch position `at` (none past the
    /// end, and none in random order, which has no windows).
    pub(crate) fn window_tiles(&self, at: u64) -> &[usize] {
        if at >= self.len() || !self.has_windows() {
            return &[];
        }
        self.window(self.window_of(at))
    }

    /// The index of the window holding epoch position `at` (`at < len()`).
    pub(crate) fn window_of(&self, at: u64) -> usize {
        self.window_starts.partition_point(|&s| s <= at) - 1
    }

    /// The epoch positions of window `w`.
    pub(crate) fn window_span(&self, w: usize) -> Range<u64> {
        self.window_starts[w]..self.window_starts[w + 1]
    }

    /// Every window's tiles, in epoch order.
    pub(crate) fn windows(&self) -> impl Iterator<Item = &[usize]> {
        self.tiles.chunks(self.window_tiles)
    }

    /// The epoch position where the window holding `at` ends.
    pub(crate) fn window_end(&self, at: u64) -> u64 {
        let w = self.window_starts.partition_point(|&s| s <= at);
        self.window_starts
            .get(w)
            .copied()
            .unwrap_or_else(|| self.len())
    }

    /// The tiles of window `w`.
    pub(crate) fn window(&self, w: usize) -> &[usize] {
        let first = w * self.window_tiles;
        &self.tiles[first..(first + self.window_tiles).min(self.tiles.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole order at once.
    fn epoch_order(limits: &[u64], mode: Shuffle, seed: u64, epoch: u64) -> Vec<u64> {
        let mut order = EpochOrder::new(limits, mode, seed, epoch);
        let n = order.len();
        order.cells(0..n)
    }

    #[test]
    fn pieces_of_the_order_match_the_whole_and_fetch_each_window_first() {
        let limits = [0u64, 10, 20, 30, 35, 41, 50];
        for mode in [
            Shuffle::None,
            Shuffle::Block { window_tiles: 2 },
            Shuffle::Random,
        ] {
            let whole = epoch_order(&limits, mode, 3, 1);
            let mut order = EpochOrder::new(&limits, mode, 3, 1);
            let mut fetched = Vec::new();
            let mut got = Vec::new();
            for piece in [0u64..7, 7..8, 8..30, 30..31, 31..50] {
                got.extend(
                    order
                        .cells_fetched(piece, |tiles| {
                            fetched.extend_from_slice(tiles);
                            Ok(())
                        })
                        .unwrap(),
                );
            }
            assert_eq!(got, whole, "{mode:?}");
            if let Shuffle::Block { .. } = mode {
                // Every tile fetched once, before its cells were listed.
                fetched.sort_unstable();
                assert_eq!(fetched, (0..6).collect::<Vec<_>>());
            }
        }
        // A window whose tiles fail to fetch lists nothing.
        let mut order = EpochOrder::new(&limits, Shuffle::Block { window_tiles: 2 }, 3, 1);
        assert!(order
            .cells_fetched(0..5, |_| Err(Error::Input("no tile".into())))
            .is_err());
    }

    #[test]
    fn orders_are_permutations_and_depend_on_the_epoch() {
        let limits = [0u64, 10, 20, 30, 35];
        for mode in [Shuffle::Block { window_tiles: 2 }, Shuffle::Random] {
            let a = epoch_order(&limits, mode, 7, 0);
            let b = epoch_order(&limits, mode, 7, 1);
            assert_eq!(a, epoch_order(&limits, mode, 7, 0));
            assert_ne!(a, b);
            let mut s = a.clone();
            s.sort_unstable();
            assert_eq!(s, (0..35).collect::<Vec<_>>());
        }
        // A window's cells come from its tiles only.
        let a = epoch_order(&limits, Shuffle::Block { window_tiles: 2 }, 7, 0);
        let tile_of = |c: u64| limits.partition_point(|&l| l <= c) - 1;
        let window: std::collections::BTreeSet<usize> =
            a[..20].iter().map(|&c| tile_of(c)).collect();
        let window_cells: u64 = window.iter().map(|&t| limits[t + 1] - limits[t]).sum();
        assert!(window.len() <= 2);
        assert!(a[..window_cells as usize]
            .iter()
            .all(|&c| window.contains(&tile_of(c))));
    }

    #[test]
    fn random_permutations_are_bijections_of_every_size() {
        for n in [0u64, 1, 2, 3, 4, 5, 17, 64, 65, 1000, 4097] {
            let limits = [0, n];
            let mut order = epoch_order(&limits, Shuffle::Random, 11, 2);
            order.sort_unstable();
            assert_eq!(order, (0..n).collect::<Vec<_>>(), "n={n}");
        }
        // Each cell's first position spreads over the whole epoch: over many
        // epochs, where cell 0 lands averages to the middle.
        let n = 1000u64;
        let mean = (0..400)
            .map(|e| {
                let order = epoch_order(&[0, n], Shuffle::Random, 5, e);
                order.iter().position(|&c| c == 0).unwrap() as f64
            })
            .sum::<f64>()
            / 400.0;
        assert!((mean - 499.5).abs() < 60.0, "mean position {mean}");
    }

    #[test]
    fn shuffles_parse_and_print() {
        for (text, mode) in [
            ("none", Shuffle::None),
            ("random", Shuffle::Random),
            ("block:8", Shuffle::Block { window_tiles: 8 }),
        ] {
            assert_eq!(text.parse::<Shuffle>().unwrap(), mode);
            assert_eq!(mode.to_string(), text);
        }
        assert_eq!(
            "block".parse::<Shuffle>().unwrap(),
            Shuffle::Block {
                window_tiles: DEFAULT_WINDOW_TILES
            }
        );
        for bad in ["", "Block", "block:0", "block:x", "shuffled"] {
            assert!(bad.parse::<Shuffle>().is_err(), "{bad}");
        }
    }

    #[test]
    fn bounded_sampling_is_stable() {
        // Literal values: a change to the generator, the seeding or the
        // sampling would silently change every user's epoch order.
        let mut r = rng(1, 2, 3);
        let drawn: Vec<u64> = (0..8).map(|_| below(&mut r, 1000)).collect();
        assert_eq!(drawn, [47, 899, 189, 228, 307, 349, 611, 265]);
        let mut r = rng(0, 0, u64::MAX);
        let wide: Vec<u64> = (0..4).map(|_| below(&mut r, (1 << 63) + 1)).collect();
        assert_eq!(
            wide,
            [
                6_732_611_612_112_350_085,
                6_689_744_668_527_159_581,
                2_961_384_814_670_077_350,
                6_759_611_080_034_126_598
            ]
        );
        assert_eq!(
            epoch_order(&[0, 3, 6, 8], Shuffle::Block { window_tiles: 2 }, 42, 7),
            [2, 0, 1, 6, 7, 4, 3, 5]
        );
    }
}

//! Reproducible training batches, split across ranks, decoded ahead of use.
//!
//! The epoch's cell order depends only on `(seed, epoch)` and the manifest: the
//! permutations use a PCG generator (value-stable across platforms and crate
//! versions) and Lemire's bounded sampling written here, so the same
//! configuration gives the same batches on any machine and any thread count.
//!
//! Block shuffle: shuffle the tile order, then shuffle cells within each window
//! of `window_tiles` consecutive tiles of that order. A window's cells are
//! served together, so its decoded chunks stay in the cache while its batches
//! are cut, and each chunk is decoded about once per epoch.
//!
//! Ranks: the epoch order is cut into `world_size` contiguous shares of
//! near-equal length (contiguous, so each rank touches its own windows). Every
//! rank yields the same number of batches. With `drop_last`, every batch holds
//! exactly `batch_size` cells and the remainder is dropped; without it every
//! cell appears exactly once per epoch, batches hold `batch_size` cells except
//! each rank's last, which is smaller (when a rank's share is a multiple of
//! `batch_size` but another rank's is one longer, the rank's last two batches
//! hold `batch_size - 1` and 1 cells so the counts stay equal).

use std::ops::Range;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use rand::RngCore;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::csr::Csr;
use crate::dataset::cache::ChunkCache;
use crate::dataset::read::ReadStats;
use crate::dataset::scatter::{build_window, Part, Pending, Recycler};
use crate::dataset::select::GeneSelection;
use crate::dataset::window::{BatchOut, WindowBudget, WindowRows};
use crate::dataset::Dataset;
use crate::engine::plan::CellRuns;
use crate::error::{Error, Result};
use crate::obs::{Labels, LocalObs};

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
}

/// Configuration of a batch iterator.
#[derive(Clone, Debug)]
pub struct BatchConfig {
    /// Cells per batch (at least 1).
    pub batch_size: usize,
    /// Seed of the epoch orders: the same seed gives the same order on any machine.
    pub seed: u64,
    /// Epoch number: each epoch of a seed has its own order.
    pub epoch: u64,
    /// How the cells are ordered.
    pub shuffle: Shuffle,
    /// This process's rank, `0..world_size`.
    pub rank: usize,
    /// Number of ranks sharing the epoch (at least 1).
    pub world_size: usize,
    /// Drop the cells that do not fill a whole batch on every rank.
    pub drop_last: bool,
    /// Batches decoded ahead on the pool while the caller works (0: on demand).
    pub prefetch: usize,
    /// Bound of the tile/chunk cache, in bytes.
    pub cache_bytes: usize,
    /// Keep only these genes (renumbered `0..k`).
    pub genes: Option<GeneSelection>,
    /// Dense `f32` rows instead of CSR.
    pub dense: bool,
    /// Obs columns returned with every batch as [`Batch::labels`] (empty: none,
    /// and no obs byte is read). Localized when the iterator is created.
    pub obs_columns: Vec<String>,
    /// Cache directory for localized obs (default: see [`crate::obs::cache_root`]).
    pub obs_cache_dir: Option<PathBuf>,
    /// Buffers to build batches in: the previous epoch's
    /// [`BatchIter::recycler`], so that an epoch starts in the buffers the
    /// last one gave back instead of faulting in fresh pages for its first
    /// windows (default: a recycler of this iterator's own).
    pub recycler: Option<Recycler>,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            batch_size: 256,
            seed: 0,
            epoch: 0,
            shuffle: Shuffle::Block { window_tiles: 4 },
            rank: 0,
            world_size: 1,
            drop_last: false,
            prefetch: 2,
            cache_bytes: 512 << 20,
            genes: None,
            dense: false,
            obs_columns: Vec::new(),
            obs_cache_dir: None,
            recycler: None,
        }
    }
}

/// The rows of a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchRows {
    /// CSR rows with `f32` counts.
    Csr(Csr<f32>),
    /// Dense row-major `f32`, `n_cols` per row.
    Dense {
        /// Columns per row.
        n_cols: usize,
        /// `n_cols` values per row, row after row.
        data: Vec<f32>,
    },
}

/// One training batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// Position of the batch in this rank's epoch.
    pub index: usize,
    /// Global cell id of each row.
    pub cells: Vec<u64>,
    /// The rows.
    pub rows: BatchRows,
    /// What producing it cost (chunks decoded are cache misses).
    pub stats: ReadStats,
    /// The requested obs columns for exactly `cells`, in the same order.
    pub labels: Labels,
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
    let mut z = seed
        ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Pcg64Mcg::seed_from_u64(z ^ (z >> 31))
}

/// The epoch's global cell order for tiles starting at `limits` (`n_tiles + 1`
/// entries), computed one window at a time: only the window being served is
/// held, and its tiles are fetched and checked before its cells are listed, so
/// no allocation is sized by a cell count that the tiles do not back.
pub(crate) struct EpochOrder {
    limits: Vec<u64>,
    shuffle: Shuffle,
    seed: u64,
    epoch: u64,
    /// Tiles in epoch order.
    tiles: Vec<usize>,
    /// Tiles per window (1 without shuffling: windows are then never listed).
    window_tiles: usize,
    /// Epoch position where each window starts, plus the total at the end.
    window_starts: Vec<u64>,
    /// The listed window: its index and its cells in epoch order.
    current: Option<(usize, Vec<u64>)>,
}

impl EpochOrder {
    pub(crate) fn new(limits: &[u64], shuffle_mode: Shuffle, seed: u64, epoch: u64) -> EpochOrder {
        let mut tiles: Vec<usize> = (0..limits.len().saturating_sub(1)).collect();
        let window_tiles = match shuffle_mode {
            Shuffle::None => 1,
            Shuffle::Block { window_tiles } => {
                shuffle(&mut tiles, &mut rng(seed, epoch, u64::MAX));
                window_tiles.max(1)
            }
        };
        let mut window_starts = vec![0u64];
        for window in tiles.chunks(window_tiles) {
            let cells: u64 = window.iter().map(|&t| limits[t + 1] - limits[t]).sum();
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
            current: None,
        }
    }

    /// Number of cells in the epoch.
    pub(crate) fn len(&self) -> u64 {
        *self.window_starts.last().unwrap_or(&0)
    }

    /// The cells at epoch positions `range`. `fetch` is called with a window's
    /// tiles before that window's cells are listed (to fetch and check them).
    pub(crate) fn cells(
        &mut self,
        range: Range<u64>,
        mut fetch: impl FnMut(&[usize]) -> Result<()>,
    ) -> Result<Vec<u64>> {
        if let Shuffle::None = self.shuffle {
            return Ok(range.collect());
        }
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        let mut at = range.start;
        while at < range.end {
            let w = self.window_starts.partition_point(|&s| s <= at) - 1;
            if self.current.as_ref().is_none_or(|(c, _)| *c != w) {
                self.current = None;
                let tiles = self.window(w);
                fetch(tiles)?;
                let mut cells = Vec::with_capacity(
                    (self.window_starts[w + 1] - self.window_starts[w]) as usize,
                );
                for &t in tiles {
                    cells.extend(self.limits[t]..self.limits[t + 1]);
                }
                shuffle(&mut cells, &mut rng(self.seed, self.epoch, w as u64));
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

    /// The tiles of the window holding epoch position `at` (none past the end).
    pub(crate) fn window_tiles(&self, at: u64) -> &[usize] {
        if at >= self.len() {
            return &[];
        }
        self.window(self.window_starts.partition_point(|&s| s <= at) - 1)
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

    pub(crate) fn window(&self, w: usize) -> &[usize] {
        let first = w * self.window_tiles;
        &self.tiles[first..(first + self.window_tiles).min(self.tiles.len())]
    }
}

/// Positions (into the epoch order of `n` cells) of each batch of one rank,
/// computed on demand (a batch count per claimed cell is never allocated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RankBatches {
    /// Position of the rank's first cell.
    start: usize,
    /// Cells per batch.
    size: usize,
    /// Number of batches.
    count: usize,
    /// Cells of the last batch.
    last: usize,
    /// Whether the last two batches hold `size - 1` and 1 cells (see the module docs).
    split_tail: bool,
}

impl RankBatches {
    pub(crate) fn new(
        n: usize,
        batch_size: usize,
        rank: usize,
        world_size: usize,
        drop_last: bool,
    ) -> RankBatches {
        let b = batch_size.max(1);
        let ws = world_size.max(1);
        if drop_last {
            let per_rank = n / (ws * b);
            return RankBatches {
                start: rank * per_rank * b,
                size: b,
                count: per_rank,
                last: b,
                split_tail: false,
            };
        }
        let (base, extra) = (n / ws, n % ws);
        let len = base + usize::from(rank < extra);
        let max_len = base + usize::from(extra > 0);
        let count = max_len.div_ceil(b).max(1);
        let last = len.saturating_sub((count - 1) * b);
        let split_tail = count >= 2 && last == 0 && b >= 2;
        RankBatches {
            start: rank * base + rank.min(extra),
            size: b,
            count,
            last: if split_tail { 1 } else { last },
            split_tail,
        }
    }

    /// Number of batches.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Epoch positions of batch `i` (`i < len()`).
    pub(crate) fn get(&self, i: usize) -> Range<usize> {
        let start = self.start + i * self.size;
        let len = if i + 1 == self.count {
            self.last
        } else if self.split_tail && i + 2 == self.count {
            self.size - 1
        } else {
            self.size
        };
        // The split tail's last batch starts one early (after a short batch).
        let start = if self.split_tail && i + 1 == self.count {
            start - 1
        } else {
            start
        };
        start..start + len
    }
}

/// Iterator over one rank's batches of one epoch.
pub struct BatchIter {
    next: usize,
    total: usize,
    source: Source,
    /// Buffers handed back by [`BatchIter::recycle`], for the producer.
    recycled: Recycler,
}

enum Source {
    OnDemand(Box<Producer>),
    Prefetched(Prefetch),
}

/// The prefetch thread: its batches, and the thread itself, joined when the
/// iterator is dropped (after the channel is closed, which stops it).
struct Prefetch {
    rx: Option<Receiver<Result<Batch>>>,
    thread: Option<JoinHandle<()>>,
}

impl Prefetch {
    /// The next batch; when the thread is gone, the reason (its panic message).
    fn recv(&mut self) -> Result<Batch> {
        let rx = self.rx.as_ref().expect("open until dropped");
        if let Ok(batch) = rx.recv() {
            return batch;
        }
        Err(match self.thread.take().map(JoinHandle::join) {
            Some(Err(panic)) => Error::panicked("the batch prefetch thread", panic.as_ref()),
            _ => Error::Panicked {
                what: "the batch prefetch thread".into(),
                message: "it stopped without a batch or a panic".into(),
            },
        })
    }
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        // Closing the channel makes the thread's next send fail, so it stops
        // after the batch in hand; its panic, if any, was already reported or
        // is of no one's interest now.
        drop(self.rx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The message of a panic payload (`panic!` with a literal or with format arguments).
struct Producer {
    dataset: Arc<Dataset>,
    config: BatchConfig,
    order: EpochOrder,
    batches: RankBatches,
    /// This iterator yields the rank's batches `first`, `first + step`, ...
    first: usize,
    step: usize,
    cache: ChunkCache,
    /// The decoded window batches are cut from, when windows fit the bound
    /// (else batches are gathered from chunks decoded through `cache`).
    window: Option<WindowRows>,
    /// Batches built a window at a time, when windows fit the bound and the
    /// batches are CSR rows of every gene (see [`crate::dataset::scatter`]).
    built: Option<Pending>,
    /// Buffers of batches the caller is done with, to build parts in.
    recycled: Recycler,
    obs: Option<LocalObs>,
}

impl Producer {
    /// Hands the tiles that the batches after epoch position `next` will
    /// need (its window and the window after it) and the cache lacks to the
    /// I/O stage, so they arrive while this batch decodes.
    fn fetch_ahead(&self, next: u64) {
        let following = self.order.window_end(next);
        let tiles = self
            .order
            .window_tiles(next)
            .iter()
            .chain(self.order.window_tiles(following))
            .copied()
            .filter(|&t| !self.cache.has_tile(t));
        self.dataset.prefetch(tiles.collect::<Vec<_>>());
    }

    fn produce(&mut self, pick: usize) -> Result<Batch> {
        let index = self.first + pick * self.step;
        let positions = self.batches.get(index);
        let positions = positions.start as u64..positions.end as u64;
        let (cells, rows, stats) = if self.built.is_some() {
            self.take_built(index, positions)?
        } else if self.window.is_some() {
            self.cut_from_windows(positions)?
        } else {
            self.gather_from_chunks(positions)?
        };
        let labels = match &self.obs {
            Some(obs) => obs.labels(&cells)?,
            None => Labels::default(),
        };
        Ok(Batch {
            index,
            cells,
            rows,
            stats,
            labels,
        })
    }

    /// Batch `index` (at epoch `positions`), building the windows it spans
    /// that are not built yet.
    fn take_built(
        &mut self,
        index: usize,
        positions: Range<u64>,
    ) -> Result<(Vec<u64>, BatchRows, ReadStats)> {
        let n_cols = u64::from(self.dataset.n_genes());
        if positions.is_empty() {
            return Ok((
                Vec::new(),
                BatchRows::Csr(Csr::empty(n_cols)),
                ReadStats::default(),
            ));
        }
        let mut stats = ReadStats::default();
        let mut at = positions.start;
        while at < positions.end {
            let w = self.order.window_of(at);
            if self.built.as_ref().is_some_and(|b| b.needs(w)) {
                stats.add(self.build_window(w, index)?);
            }
            at = self.order.window_end(at);
        }
        self.fetch_ahead(positions.end);
        let (cells, csr) = self
            .built
            .as_mut()
            .and_then(|b| b.take(index))
            .ok_or_else(|| Error::Panicked {
                what: "the batch builder".into(),
                message: format!("batch {index} was not built with its windows"),
            })?;
        Ok((cells, BatchRows::Csr(csr), stats))
    }

    /// Builds window `w`'s part of every batch of this iterator from batch
    /// `from` on that draws cells from it.
    fn build_window(&mut self, w: usize, from: usize) -> Result<ReadStats> {
        let span = self.order.window_span(w);
        let (dataset, cache) = (&self.dataset, &self.cache);
        let mut stats = ReadStats::default();
        let mut jobs = Vec::new();
        let mut index = from;
        while index < self.batches.len() {
            let p = self.batches.get(index);
            let p = p.start as u64..p.end as u64;
            if p.start >= span.end {
                break;
            }
            let (lo, hi) = (p.start.max(span.start), p.end.min(span.end));
            if lo < hi {
                let cells = self.order.cells(lo..hi, |tiles| {
                    dataset.fetch_tiles(tiles, cache, &mut stats).map(drop)
                })?;
                jobs.push(Part {
                    index,
                    cells,
                    windows: self.order.window_of(p.end - 1) - self.order.window_of(p.start) + 1,
                    rows: Csr::empty(0),
                });
            }
            index += self.step;
        }
        stats.add(build_window(
            dataset,
            self.order.window(w),
            &mut jobs,
            cache,
            &self.recycled,
        )?);
        if let Some(b) = self.built.as_mut() {
            b.add(w, jobs);
        }
        Ok(stats)
    }

    /// The batch at epoch `positions`, copied out of decoded windows (a batch
    /// that straddles two windows takes its first part before the second
    /// window is decoded).
    fn cut_from_windows(
        &mut self,
        positions: Range<u64>,
    ) -> Result<(Vec<u64>, BatchRows, ReadStats)> {
        let genes = self.config.genes.as_ref();
        let n_cols = genes.map_or(self.dataset.n_genes() as usize, GeneSelection::len);
        let mut out = if self.config.dense {
            BatchOut::Dense {
                n_cols,
                data: Vec::new(),
            }
        } else {
            BatchOut::Csr(Csr::empty(n_cols as u64))
        };
        let window = self.window.as_mut().expect("window path");
        let (dataset, cache) = (&self.dataset, &self.cache);
        let mut stats = ReadStats::default();
        let mut cells = Vec::with_capacity((positions.end - positions.start) as usize);
        let mut at = positions.start;
        while at < positions.end {
            let w = self.order.window_of(at);
            let stop = positions.end.min(self.order.window_end(at));
            let part = self.order.cells(at..stop, |tiles| {
                dataset.fetch_tiles(tiles, cache, &mut stats).map(drop)
            })?;
            stats.add(window.enter(dataset, w, self.order.window(w), genes, cache)?);
            window.append(dataset, &part, &mut out)?;
            cells.extend_from_slice(&part);
            at = stop;
        }
        self.fetch_ahead(positions.end);
        let rows = match out {
            BatchOut::Csr(csr) => BatchRows::Csr(csr),
            BatchOut::Dense { n_cols, data } => BatchRows::Dense { n_cols, data },
        };
        Ok((cells, rows, stats))
    }

    /// The batch at epoch `positions`, gathered row by row from chunks decoded
    /// through the cache (when a decoded window would not fit the bound).
    fn gather_from_chunks(
        &mut self,
        positions: Range<u64>,
    ) -> Result<(Vec<u64>, BatchRows, ReadStats)> {
        let (dataset, cache) = (&self.dataset, &self.cache);
        let mut fetched = ReadStats::default();
        let cells = self.order.cells(positions.clone(), |tiles| {
            dataset.fetch_tiles(tiles, cache, &mut fetched).map(drop)
        })?;
        let cells = &cells[..];
        self.fetch_ahead(positions.end);
        let genes = self.config.genes.as_ref();
        let (cells, rows, mut stats) = if self.config.dense {
            let d = self
                .dataset
                .read_dense_with(&CellRuns::list(cells), genes, &self.cache)?;
            (
                d.cells,
                BatchRows::Dense {
                    n_cols: d.n_cols,
                    data: d.data,
                },
                d.stats,
            )
        } else {
            let c =
                self.dataset
                    .read_csr_with::<f32>(&CellRuns::list(cells), genes, &self.cache)?;
            (c.cells, BatchRows::Csr(c.csr), c.stats)
        };
        stats.tiles_fetched += fetched.tiles_fetched;
        Ok((cells, rows, stats))
    }
}

impl Dataset {
    /// One rank's batches for one epoch (see the module docs for the order).
    pub fn batches(self: &Arc<Self>, config: BatchConfig) -> Result<BatchIter> {
        self.batches_strided(config, 0, 1)
    }

    /// Batches `first`, `first + step`, `first + 2 * step`, ... of the rank's
    /// epoch ([`Batch::index`] keeps the position in the rank's sequence).
    /// How data-loader workers share a rank's batches (worker `w` of `n` takes
    /// `first = w, step = n`, so taking one batch from each worker in turn
    /// gives the rank's order), and how an epoch resumes at a batch boundary.
    pub fn batches_strided(
        self: &Arc<Self>,
        config: BatchConfig,
        first: usize,
        step: usize,
    ) -> Result<BatchIter> {
        self.batches_picked(config, first, step, usize::MAX)
    }

    /// The rank's batches `range` (positions in the rank's epoch), in order:
    /// how data-loader workers take contiguous spans of a rank's batches, so
    /// that each decodes its own windows instead of every worker decoding
    /// every window for a share of its batches.
    pub fn batches_range(
        self: &Arc<Self>,
        config: BatchConfig,
        range: Range<usize>,
    ) -> Result<BatchIter> {
        self.batches_picked(
            config,
            range.start,
            1,
            range.end.saturating_sub(range.start),
        )
    }

    /// At most `count` batches `first`, `first + step`, ... of the rank's epoch.
    fn batches_picked(
        self: &Arc<Self>,
        config: BatchConfig,
        first: usize,
        step: usize,
        count: usize,
    ) -> Result<BatchIter> {
        if step == 0 {
            return Err(Error::Input("batch step must be at least 1".into()));
        }
        if config.world_size == 0 || config.rank >= config.world_size {
            return Err(Error::Input(format!(
                "rank {} is outside 0..{}",
                config.rank, config.world_size
            )));
        }
        if config.batch_size == 0 {
            return Err(Error::Input("batch_size must be at least 1".into()));
        }
        if let Some(g) = &config.genes {
            if g.n_genes() != self.n_genes() as usize {
                return Err(Error::Input(format!(
                    "gene selection built for {} genes, the dataset has {}",
                    g.n_genes(),
                    self.n_genes()
                )));
            }
        }
        let order = EpochOrder::new(self.limits(), config.shuffle, config.seed, config.epoch);
        let batches = RankBatches::new(
            order.len() as usize,
            config.batch_size,
            config.rank,
            config.world_size,
            config.drop_last,
        );
        let total = batches
            .len()
            .saturating_sub(first)
            .div_ceil(step)
            .min(count);
        let prefetch = config.prefetch;
        let obs = if config.obs_columns.is_empty() {
            None
        } else {
            let reader = self.obs().ok_or_else(|| {
                Error::Input("obs columns were requested but the dataset has no obs".into())
            })?;
            Some(reader.localize(&config.obs_columns, config.obs_cache_dir.as_deref())?)
        };
        let budget = WindowBudget::new(self, order.windows(), config.cache_bytes);
        let recycled = config.recycler.clone().unwrap_or_else(|| {
            // A window's batches plus those in flight: the most the producer
            // can use at once.
            let window_cells = order
                .windows()
                .map(|w| {
                    w.iter()
                        .map(|&t| self.limits()[t + 1] - self.limits()[t])
                        .sum::<u64>()
                })
                .max()
                .unwrap_or(0);
            Recycler::new((window_cells as usize).div_ceil(config.batch_size) + prefetch + 2)
        });
        let mut producer = Producer {
            dataset: self.clone(),
            cache: ChunkCache::new(budget.map_or(config.cache_bytes, |b| b.tile_cache_bytes)),
            window: budget.map(|_| WindowRows::default()),
            built: budget
                .filter(|_| !config.dense && config.genes.is_none())
                .map(|_| Pending::default()),
            recycled: recycled.clone(),
            config,
            order,
            batches,
            first,
            step,
            obs,
        };
        let source = if prefetch == 0 {
            Source::OnDemand(Box::new(producer))
        } else {
            let (tx, rx) = sync_channel(prefetch);
            let thread = std::thread::Builder::new()
                .name("deltacells-prefetch".into())
                .spawn(move || {
                    for i in 0..total {
                        let batch = producer.produce(i);
                        let failed = batch.is_err();
                        // A closed channel means the iterator was dropped: stop.
                        if tx.send(batch).is_err() || failed {
                            break;
                        }
                    }
                })
                .map_err(|e| Error::io("starting the prefetch thread", e))?;
            Source::Prefetched(Prefetch {
                rx: Some(rx),
                thread: Some(thread),
            })
        };
        Ok(BatchIter {
            next: 0,
            total,
            source,
            recycled,
        })
    }
}

impl BatchIter {
    /// Number of batches this iterator yields in the epoch.
    pub fn len(&self) -> usize {
        self.total
    }

    /// Whether the epoch has no batches for this rank.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Hands back a batch the caller is done with, so that a later batch is
    /// built in its buffers: a loop that recycles every batch allocates
    /// nothing once warm, where faulting in a fresh batch's pages costs about
    /// as much as decoding it. Optional; only CSR batches of every gene are
    /// rebuilt in place (others are dropped here).
    pub fn recycle(&self, batch: Batch) {
        if let BatchRows::Csr(csr) = batch.rows {
            self.recycled.give(csr);
        }
    }

    /// A handle giving buffers back to this iterator from anywhere (another
    /// thread, or the owner of arrays lent out over a batch's buffers).
    pub fn recycler(&self) -> Recycler {
        self.recycled.clone()
    }
}

impl Iterator for BatchIter {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.next >= self.total {
            return None;
        }
        let item = match &mut self.source {
            Source::OnDemand(p) => p.produce(self.next),
            Source::Prefetched(p) => p.recv(),
        };
        self.next = if item.is_err() {
            self.total
        } else {
            self.next + 1
        };
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.total - self.next;
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole order at once.
    fn epoch_order(limits: &[u64], mode: Shuffle, seed: u64, epoch: u64) -> Vec<u64> {
        let mut order = EpochOrder::new(limits, mode, seed, epoch);
        let n = order.len();
        order.cells(0..n, |_| Ok(())).unwrap()
    }

    fn rank_batches(n: usize, b: usize, rank: usize, ws: usize, drop: bool) -> Vec<Range<usize>> {
        let batches = RankBatches::new(n, b, rank, ws, drop);
        (0..batches.len()).map(|i| batches.get(i)).collect()
    }

    #[test]
    fn pieces_of_the_order_match_the_whole_and_fetch_each_window_first() {
        let limits = [0u64, 10, 20, 30, 35, 41, 50];
        for mode in [Shuffle::None, Shuffle::Block { window_tiles: 2 }] {
            let whole = epoch_order(&limits, mode, 3, 1);
            let mut order = EpochOrder::new(&limits, mode, 3, 1);
            let mut fetched = Vec::new();
            let mut got = Vec::new();
            for piece in [0u64..7, 7..8, 8..30, 30..31, 31..50] {
                got.extend(
                    order
                        .cells(piece, |tiles| {
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
            .cells(0..5, |_| Err(Error::Input("no tile".into())))
            .is_err());
    }

    #[test]
    fn rank_shares_cover_every_cell_once_with_equal_batch_counts() {
        for n in [0usize, 1, 5, 10, 100, 257, 1000] {
            for ws in 1..5 {
                for b in [1usize, 2, 3, 7, 256] {
                    let all: Vec<Vec<Range<usize>>> =
                        (0..ws).map(|r| rank_batches(n, b, r, ws, false)).collect();
                    let counts: Vec<usize> = all.iter().map(Vec::len).collect();
                    assert!(
                        counts.windows(2).all(|w| w[0] == w[1]),
                        "n={n} ws={ws} b={b}: {counts:?}"
                    );
                    let mut covered: Vec<usize> =
                        all.iter().flatten().flat_map(Clone::clone).collect();
                    covered.sort_unstable();
                    assert_eq!(covered, (0..n).collect::<Vec<_>>(), "n={n} ws={ws} b={b}");
                    assert!(all.iter().flatten().all(|r| r.len() <= b));
                    let dropped: Vec<Vec<Range<usize>>> =
                        (0..ws).map(|r| rank_batches(n, b, r, ws, true)).collect();
                    assert!(dropped.iter().flatten().all(|r| r.len() == b));
                    assert!(dropped.windows(2).all(|w| w[0].len() == w[1].len()));
                }
            }
        }
    }

    #[test]
    fn orders_are_permutations_and_depend_on_the_epoch() {
        let limits = [0u64, 10, 20, 30, 35];
        let a = epoch_order(&limits, Shuffle::Block { window_tiles: 2 }, 7, 0);
        let b = epoch_order(&limits, Shuffle::Block { window_tiles: 2 }, 7, 1);
        assert_eq!(
            a,
            epoch_order(&limits, Shuffle::Block { window_tiles: 2 }, 7, 0)
        );
        assert_ne!(a, b);
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..35).collect::<Vec<_>>());
        // A window's cells come from its tiles only.
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

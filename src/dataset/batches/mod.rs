//! Reproducible training batches, split across ranks, decoded ahead of use.
//!
//! The pieces, one module each:
//!
//! * [`sampling`]: which cells an epoch serves (every cell, a subset, or
//!   draws with replacement by [`Weights`]);
//! * [`order`]: the epoch's cell order ([`EpochOrder`], by [`Shuffle`]), a
//!   pure value of the manifest, the population and `(seed, epoch)`;
//! * [`share`]: each rank's and loader worker's share of it ([`RankShare`]);
//! * [`resume`]: what an epoch has delivered, and the rest of it that a
//!   job of any shape resumes ([`Remaining`], [`JobShape`]);
//! * [`producer`]: how a batch's rows are made, an explicit [`Strategy`]
//!   chosen once per iterator from the order and the memory bound;
//! * [`prefetch`]: the thread producing batches ahead of the caller;
//! * [`recycler`]: buffers the caller hands back, so a warm loop allocates
//!   nothing.
//!
//! Every strategy reads through the dataset's one read pipeline (plan, fetch,
//! execute into a sink), so a batch holds exactly what [`Dataset::read`] of
//! its cells gives.
//!
//! [`Strategy`]: producer::Strategy

mod ahead;
mod order;
mod output;
mod prefetch;
mod producer;
mod recycler;
mod remaining;
mod resume;
mod sampling;
mod scatter;
mod share;
mod window;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

pub use order::{EpochOrder, Shuffle, DEFAULT_WINDOW_TILES};
pub use recycler::Recycler;
pub use resume::{JobShape, Remaining};
pub use sampling::Weights;
pub use share::RankShare;

use crate::csr::Csr;
use crate::dataset::cache::ChunkCache;
use crate::dataset::read::ReadStats;
use crate::dataset::source::Source as _;
use crate::dataset::tiles::Through;
use crate::dataset::Dataset;
use crate::engine::{Dense, GeneSelection, Transform};
use crate::error::{Error, Result};
use crate::kernels::DecodedCount;
use crate::obs::Labels;
use crate::tokenize::{TokenColumns, TokenRows, Tokenizer};
use ahead::Epoch;
use prefetch::Prefetch;
use producer::Producer;
pub(crate) use producer::{BatchTiles, CellLabels};

/// Configuration of a batch iterator: build it from
/// [`BatchConfig::default`] with the `with_*` setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
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
    /// Bound of the iterator's decoded windows and tile cache, in bytes
    /// (default 1 GiB: two windows of 4 tiles of 4,096 cells of about 2,000
    /// nonzeros each, so that the next window is built while this one's
    /// batches are used; with one window only, each window's decode is a
    /// wait; below one window's rows, its batches are built a share at a
    /// time, each share decoding the window's chunks again).
    pub cache_bytes: usize,
    /// Keep only these genes (renumbered `0..k`).
    pub genes: Option<GeneSelection>,
    /// Dense rows instead of CSR.
    pub dense: bool,
    /// Counts normalized and/or log-transformed into `f32` values, as
    /// [`crate::dataset::Read::normalize`] computes them (each cell's total
    /// over all its genes, before the gene selection).
    pub transform: Transform,
    /// Tokenized rows ([`BatchRows::Tokens`]) instead of counts, over every
    /// gene (no selection, no transform: scGPT takes its own). scGPT's gene
    /// sampling is keyed by the batches' seed and epoch, so each epoch
    /// samples anew.
    pub tokenizer: Option<Tokenizer>,
    /// Obs columns returned with every batch as [`Batch::labels`] (empty: none,
    /// and no obs byte is read). Localized when the iterator is created.
    pub obs_columns: Vec<String>,
    /// Cache directory for localized obs (default: see [`crate::obs::cache_root`]).
    pub obs_cache_dir: Option<PathBuf>,
    /// Serve only these cells (ids, any order; each once per epoch unless
    /// drawn with replacement). Block shuffle keeps its locality inside the
    /// subset: tiles holding none of its cells are never read.
    pub cells: Option<Arc<[u64]>>,
    /// Draw cells with replacement by these weights (see [`Weights`]).
    pub weights: Weights,
    /// Draws per epoch, all ranks together (default: the cells of the
    /// subset, or of the dataset); given without weights, the draws are
    /// uniform with replacement.
    pub samples_per_epoch: Option<u64>,
    /// Which of the rank's batches this iterator yields (default: all).
    pub pick: Pick,
    /// Epoch positions already delivered, as sorted disjoint ranges (see
    /// [`Remaining::new`]): the ranks share the rest of the epoch instead of
    /// all of it, as [`Remaining`] says (default: none, a fresh epoch).
    pub delivered: Vec<Range<u64>>,
    /// Buffers to build batches in: the previous epoch's
    /// [`BatchIter::recycler`], so that an epoch starts in the buffers the
    /// last one gave back instead of faulting in fresh pages for its first
    /// windows (default: a recycler of this iterator's own).
    pub recycler: Option<Recycler>,
    /// Once this epoch's last batch is made, make the next epoch's first
    /// batches (its first window) on a thread of their own, and leave them
    /// in the recycler ([`BatchIter::recycler`]) for the next iterator made
    /// with it and this configuration, one epoch later: its first batch is
    /// then ready at once instead of after a window's decode (see the
    /// `ahead` module's docs for what it costs). Default: false.
    pub next_epoch_ahead: bool,
}

/// Which of a rank's batches an iterator yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Every batch, in order.
    All,
    /// Batches `first`, `first + step`, ... : how an epoch resumes at a
    /// batch boundary, or how loader workers interleave.
    Strided {
        /// The first batch.
        first: usize,
        /// The distance between batches (at least 1).
        step: usize,
    },
    /// The batches `range`, in order: how data-loader workers take
    /// contiguous spans of a rank's batches ([`RankShare::worker_span`]), so
    /// that each decodes its own windows.
    Range(Range<usize>),
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            batch_size: 256,
            seed: 0,
            epoch: 0,
            shuffle: Shuffle::Block {
                window_tiles: DEFAULT_WINDOW_TILES,
            },
            rank: 0,
            world_size: 1,
            drop_last: false,
            prefetch: 2,
            cache_bytes: 1 << 30,
            genes: None,
            dense: false,
            transform: Transform::NONE,
            tokenizer: None,
            obs_columns: Vec::new(),
            obs_cache_dir: None,
            cells: None,
            weights: Weights::None,
            samples_per_epoch: None,
            pick: Pick::All,
            delivered: Vec::new(),
            recycler: None,
            next_epoch_ahead: false,
        }
    }
}

crate::setters!(BatchConfig {
    /// Sets [`BatchConfig::batch_size`].
    with_batch_size: batch_size: usize,
    /// Sets [`BatchConfig::seed`].
    with_seed: seed: u64,
    /// Sets [`BatchConfig::epoch`].
    with_epoch: epoch: u64,
    /// Sets [`BatchConfig::shuffle`].
    with_shuffle: shuffle: Shuffle,
    /// Sets [`BatchConfig::drop_last`].
    with_drop_last: drop_last: bool,
    /// Sets [`BatchConfig::prefetch`].
    with_prefetch: prefetch: usize,
    /// Sets [`BatchConfig::cache_bytes`].
    with_cache_bytes: cache_bytes: usize,
    /// Sets [`BatchConfig::dense`].
    with_dense: dense: bool,
    /// Sets [`BatchConfig::transform`].
    with_transform: transform: Transform,
    /// Sets [`BatchConfig::tokenizer`].
    with_tokenizer: tokenizer: Option<Tokenizer>,
    /// Sets [`BatchConfig::obs_columns`].
    with_obs_columns: obs_columns: Vec<String>,
    /// Sets [`BatchConfig::obs_cache_dir`].
    with_obs_cache_dir: obs_cache_dir: Option<PathBuf>,
    /// Sets [`BatchConfig::pick`].
    with_pick: pick: Pick,
    /// Sets [`BatchConfig::delivered`].
    with_delivered: delivered: Vec<Range<u64>>,
    /// Sets [`BatchConfig::recycler`].
    with_recycler: recycler: Option<Recycler>,
    /// Sets [`BatchConfig::next_epoch_ahead`].
    with_next_epoch_ahead: next_epoch_ahead: bool,
    /// Sets [`BatchConfig::genes`].
    with_genes: genes: Option<GeneSelection>,
    /// Sets [`BatchConfig::cells`].
    with_cells: cells: Option<Arc<[u64]>>,
    /// Sets [`BatchConfig::weights`].
    with_weights: weights: Weights,
    /// Sets [`BatchConfig::samples_per_epoch`].
    with_samples_per_epoch: samples_per_epoch: Option<u64>,
});

impl BatchConfig {
    /// The tokenizer, its scGPT sampling keyed by the batches' seed and epoch.
    pub(crate) fn batch_tokenizer(&self) -> Option<Tokenizer> {
        self.tokenizer.clone().map(|t| match t {
            Tokenizer::ScGpt(s) => Tokenizer::ScGpt(s.with_seed(self.seed, self.epoch)),
            other => other,
        })
    }

    /// Sets [`BatchConfig::rank`] and [`BatchConfig::world_size`].
    pub fn with_rank(mut self, rank: usize, world_size: usize) -> Self {
        self.rank = rank;
        self.world_size = world_size;
        self
    }
}

/// The rows of a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchRows<V> {
    /// CSR rows.
    Csr(Csr<V>),
    /// Dense row-major rows.
    Dense(Dense<V>),
    /// Tokenized rows ([`BatchConfig::tokenizer`]).
    Tokens(TokenRows),
}

impl<V> BatchRows<V> {
    /// Cuts the buffers to the rows written: what a batch's rows are before
    /// it is handed out. Token rows, see [`TokenRows::settle`]; CSR rows'
    /// indices and values to the last row's end, which a batch of no rows
    /// never sized: its given-back buffers had kept another batch's entries
    /// beside an `indptr` of `[0]`.
    pub(crate) fn settle(&mut self) {
        match self {
            BatchRows::Tokens(tokens) => tokens.settle(),
            BatchRows::Csr(csr) => {
                let nnz = csr.indptr.last().map_or(0, |&n| n as usize);
                csr.indices.truncate(nnz);
                csr.values.truncate(nnz);
            }
            BatchRows::Dense(_) => {}
        }
    }
}

/// One training batch, with counts of type `V` (`f32` by default, or `i32`).
#[derive(Clone, Debug, PartialEq)]
pub struct Batch<V = f32> {
    /// Position of the batch in this rank's epoch.
    pub index: usize,
    /// Global cell id of each row.
    pub cells: Vec<u64>,
    /// The rows.
    pub rows: BatchRows<V>,
    /// What producing it cost (chunks decoded are cache misses).
    pub stats: ReadStats,
    /// The requested obs columns for exactly `cells`, in the same order.
    pub labels: Labels,
}

/// Iterator over one rank's batches of one epoch.
pub struct BatchIter<V: DecodedCount + bytemuck::Pod = f32> {
    next: usize,
    total: usize,
    source: Source<V>,
    /// Buffers handed back by [`BatchIter::recycle`], for the producer.
    recycled: Recycler,
}

impl<V: DecodedCount + bytemuck::Pod> std::fmt::Debug for BatchIter<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchIter")
            .field("next", &self.next)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

/// Where the batches come from.
enum Source<V: DecodedCount + bytemuck::Pod> {
    OnDemand(Box<dyn Produce<V>>),
    Prefetched(Prefetch<Batch<V>>),
}

/// What makes an iterator's batches: a [`Producer`] over a dataset's tiles
/// or a corpus's.
trait Produce<V>: Send + 'static {
    /// The iterator's batch number `pick`.
    fn produce(&mut self, pick: usize) -> Result<Batch<V>>;
}

/// One rank's batches of `config` over `tiles` (see [`Producer::new`]);
/// `genes`, the selection the output applies; `tokens`, the tokenizer
/// resolved for the tiles' columns; `balance` holds the obs columns a
/// [`Weights::Balance`] names.
#[allow(clippy::too_many_arguments)]
pub(crate) fn batches_over<V: DecodedCount + bytemuck::Pod, T: BatchTiles>(
    tiles: T,
    n_genes: u32,
    genes: Option<GeneSelection>,
    tokens: Option<TokenColumns>,
    config: &BatchConfig,
    obs: Option<Arc<dyn CellLabels>>,
    balance: Option<&dyn CellLabels>,
) -> Result<BatchIter<V>> {
    let (first, step, count) = picked(config)?;
    let request = sampling::Request {
        cells: config.cells.as_deref(),
        weights: &config.weights,
        samples: config.samples_per_epoch,
    };
    let population = sampling::Population::resolve(&request, tiles.limits(), balance)?;
    if let Some(epoch) = Epoch::<V, T>::taken(config, &tiles, count, &population)? {
        let recycled = config
            .recycler
            .clone()
            .expect("an epoch made ahead was in it");
        let (total, depth) = (epoch.len(), queue(config, epoch.lookahead()));
        return BatchIter::start(epoch, total, depth, recycled);
    }
    let output = output::BatchOutput {
        dense: config.dense,
        genes,
        transform: config.transform,
        tokens,
    };
    let kept = config.next_epoch_ahead.then(|| population.clone());
    let producer = Producer::new(
        tiles,
        n_genes,
        output,
        config,
        population,
        (first, step),
        obs,
    )?;
    let total = producer.len().min(count);
    let recycled = producer.recycler();
    let depth = queue(config, producer.lookahead());
    let epoch = Epoch::new(producer, total, config, kept);
    BatchIter::start(epoch, total, depth, recycled)
}

/// Batches made ahead of the caller: `config.prefetch` (0: none, on
/// demand), plus `lookahead` for a producer that builds windows ahead.
fn queue(config: &BatchConfig, lookahead: usize) -> usize {
    if config.prefetch == 0 {
        0
    } else {
        config.prefetch.saturating_add(lookahead)
    }
}

/// The rank's share of an epoch of `n` positions, as `config` cuts it.
pub(crate) fn share_of(n: u64, config: &BatchConfig) -> RankShare {
    RankShare::new(
        n,
        config.batch_size,
        config.rank,
        config.world_size,
        config.drop_last,
    )
}

/// The iterator's batches of a rank, from `config`: which of them
/// (`(first, step, count)`: batches `first`, `first + step`, ..., at most
/// `count`), after checking the rank, the batch size and the pick.
pub(crate) fn picked(config: &BatchConfig) -> Result<(usize, usize, usize)> {
    if config.world_size == 0 || config.rank >= config.world_size {
        return Err(Error::Input(format!(
            "rank {} is outside 0..{}",
            config.rank, config.world_size
        )));
    }
    if config.batch_size == 0 {
        return Err(Error::Input("batch_size must be at least 1".into()));
    }
    match config.pick {
        Pick::All => Ok((0, 1, usize::MAX)),
        Pick::Strided { step: 0, .. } => Err(Error::Input("batch step must be at least 1".into())),
        Pick::Strided { first, step } => Ok((first, step, usize::MAX)),
        Pick::Range(ref r) => Ok((r.start, 1, r.end.saturating_sub(r.start))),
    }
}

impl Dataset {
    /// One rank's batches of one epoch (see [`EpochOrder`] for the order), with
    /// `f32` counts; `config.pick` says which of them.
    pub fn batches(&self, config: BatchConfig) -> Result<BatchIter<f32>> {
        self.batches_of(config)
    }

    /// As [`Dataset::batches`], with counts of type `V` (`f32` or `i32`).
    pub fn batches_of<V: DecodedCount + bytemuck::Pod>(
        &self,
        config: BatchConfig,
    ) -> Result<BatchIter<V>> {
        picked(&config)?;
        if let Some(g) = &config.genes {
            self.check_selection(g)?;
        }
        let localize = |columns: &[String]| {
            let reader = self.obs().ok_or_else(|| {
                Error::Input(format!(
                    "obs columns {columns:?} were requested but the dataset has no obs"
                ))
            })?;
            reader.localize(columns, config.obs_cache_dir.as_deref())
        };
        let obs: Option<Arc<dyn CellLabels>> = if config.obs_columns.is_empty() {
            None
        } else {
            Some(Arc::new(localize(&config.obs_columns)?))
        };
        let balance = match &config.weights {
            Weights::Balance(columns) => Some(localize(columns)?),
            _ => None,
        };
        let tokens = match config.batch_tokenizer() {
            Some(t) => Some(t.for_dataset(self)?),
            None => None,
        };
        // CSR rows over a selection that drops genes are cut from decoded
        // windows (their lengths are known only once decoded): each chunk
        // is then mapped into the selection's columns as it is decoded,
        // while its rows are in cache, with each row's total kept for the
        // transforms, as a corpus maps its members' chunks. Cut from
        // unmapped chunks, every batch had counted, summed and selected
        // rows that had long left the cache: 30% of a profile of
        // normalized CSR batches over 2,000 genes.
        let (remap, genes, width) = match config.genes.clone() {
            Some(g) if !config.dense && tokens.is_none() && !g.keeps_every_gene() => {
                let width = g.len() as u32;
                (Some(g), None, width)
            }
            genes => (None, genes, self.n_genes()),
        };
        let tiles = Through {
            dataset: self.clone(),
            cache: ChunkCache::new(0),
            remap,
        };
        let balance = balance.as_ref().map(|b| b as &dyn CellLabels);
        batches_over(tiles, width, genes, tokens, &config, obs, balance)
    }
}

impl<V: DecodedCount + bytemuck::Pod> BatchIter<V> {
    /// An iterator of `total` batches from `producer`, `prefetch` of them
    /// made ahead on a thread of their own (0: on demand), in the buffers of
    /// `recycled`.
    fn start(
        mut producer: impl Produce<V>,
        total: usize,
        prefetch: usize,
        recycled: Recycler,
    ) -> Result<BatchIter<V>> {
        let source = if prefetch == 0 {
            Source::OnDemand(Box::new(producer))
        } else {
            Source::Prefetched(Prefetch::start(total, prefetch, move |i| {
                producer.produce(i)
            })?)
        };
        Ok(BatchIter {
            next: 0,
            total,
            source,
            recycled,
        })
    }
}

impl<V: DecodedCount + bytemuck::Pod> BatchIter<V> {
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
    /// as much as decoding it. Optional; batches of every kind (CSR, dense,
    /// tokens) are built in given-back buffers.
    pub fn recycle(&self, batch: Batch<V>) {
        self.recycled.give_rows(batch.rows);
    }

    /// A handle giving buffers back to this iterator from anywhere (another
    /// thread, or the owner of arrays lent out over a batch's buffers).
    pub fn recycler(&self) -> Recycler {
        self.recycled.clone()
    }
}

impl<V: DecodedCount + bytemuck::Pod> Iterator for BatchIter<V> {
    type Item = Result<Batch<V>>;

    fn next(&mut self) -> Option<Result<Batch<V>>> {
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

//! How a batch's rows are made: one [`Strategy`], chosen when the iterator
//! is created, every one of them a use of the dataset's read pipeline.

use std::ops::Range;
use std::sync::Arc;

use crate::dataset::batches::order::EpochOrder;
use crate::dataset::batches::output::{not_started, BatchOutput, Filling, Run};
use crate::dataset::batches::recycler::Recycler;
use crate::dataset::batches::remaining::RemainingOrder;
use crate::dataset::batches::sampling::Population;
use crate::dataset::batches::scatter::Pending;
use crate::dataset::batches::share::RankShare;
use crate::dataset::batches::window::{WindowBudget, WindowChunks};
use crate::dataset::batches::{Batch, BatchConfig, BatchRows};
use crate::dataset::cache::ChunkCache;
use crate::dataset::read::ReadStats;
use crate::dataset::tiles::{maps_in_place, read_outputs, Through, Tiles};
use crate::dataset::Dataset;
use crate::engine::{CellSelection, Sink};
use crate::error::{Error, Result};
use crate::kernels::DecodedCount;
use crate::obs::{Labels, LocalObs};

/// How a batch iterator makes its batches.
pub(crate) enum Strategy<V> {
    /// A window's tiles fit the bound and its batches are CSR rows of every
    /// gene, each as long as stored, or rows of a fixed width (dense,
    /// tokens): they are built together (or a share of them at a time,
    /// where their rows do not fit), every row decoded from its chunk
    /// straight into its place (see [`super::scatter`]).
    Scatter(Pending<V>),
    /// Decoded windows fit the bound, and batches are CSR rows over a gene
    /// selection (whose lengths are known only once decoded), or a window's
    /// batches do not fit where its decoded chunks do: a window's chunks are
    /// decoded once, whole, and each batch is copied out of them (see
    /// [`super::window`]).
    Window(Box<WindowChunks>),
    /// Windows do not fit (not even their tiles, for batches built straight
    /// from the chunks), or cells come in random order: each batch is a
    /// read through the iterator's cache, which re-decodes what it evicted.
    Gather,
}

/// What batches are made from: a set of [`Tiles`] whose cache the producer
/// sizes once it knows what its windows need.
pub(crate) trait BatchTiles: Tiles + Send + 'static {
    /// Gives the tiles a fresh cache of `bytes` in all.
    fn set_cache_bytes(&mut self, bytes: usize);

    /// The same tiles with an empty cache of their own: the next epoch's,
    /// made ahead while this one's are still read.
    fn fresh(&self) -> Self;

    /// What the tiles are tiles of, as a number no other open dataset or
    /// corpus has while they live: an epoch made ahead is taken only by
    /// batches of the same tiles.
    fn identity(&self) -> usize;
}

impl BatchTiles for Through<Dataset, ChunkCache> {
    fn set_cache_bytes(&mut self, bytes: usize) {
        self.cache = ChunkCache::new(bytes);
    }

    fn fresh(&self) -> Self {
        Through {
            dataset: self.dataset.clone(),
            cache: ChunkCache::new(0),
            remap: self.remap.clone(),
        }
    }

    fn identity(&self) -> usize {
        self.dataset.identity()
    }
}

/// The labels of a batch's cells: a dataset's localized obs columns, or a
/// corpus's unified ones.
pub(crate) trait CellLabels: Send + Sync + 'static {
    /// The columns' values for `cells`, in their order.
    fn labels(&self, cells: &[u64]) -> Result<Labels>;
}

impl CellLabels for LocalObs {
    fn labels(&self, cells: &[u64]) -> Result<Labels> {
        LocalObs::labels(self, cells)
    }
}

/// What [`Producer::new`] takes besides the configuration and population:
/// the parts of one producer from which to make the next epoch's.
pub(crate) struct Parts<T> {
    tiles: T,
    n_genes: u32,
    output: BatchOutput,
    picks: (usize, usize),
    obs: Option<Arc<dyn CellLabels>>,
}

impl<T: BatchTiles> Parts<T> {
    /// The producer of the epoch `config` says, of the cells `population`.
    pub(crate) fn into_producer<V: DecodedCount + bytemuck::Pod>(
        self,
        config: &BatchConfig,
        population: Population,
    ) -> Result<Producer<V, T>> {
        let output = BatchOutput {
            tokens: self
                .output
                .tokens
                .map(|t| t.for_epoch(config.seed, config.epoch)),
            ..self.output
        };
        Producer::new(
            self.tiles,
            self.n_genes,
            output,
            config,
            population,
            self.picks,
            self.obs,
        )
    }
}

/// Makes one rank's batches of one epoch.
pub(crate) struct Producer<V, T> {
    ctx: Ctx<T>,
    strategy: Strategy<V>,
    /// See [`Producer::lookahead`].
    lookahead: usize,
}

/// Everything a strategy reads.
struct Ctx<T> {
    tiles: T,
    /// Columns of the rows as the tiles decode.
    n_genes: u32,
    /// What the rows are written as.
    output: BatchOutput,
    order: RemainingOrder,
    share: RankShare,
    /// This iterator yields the rank's batches `first`, `first + step`, ...
    first: usize,
    step: usize,
    /// Buffers of batches the caller is done with, to build batches in.
    recycled: Recycler,
    obs: Option<Arc<dyn CellLabels>>,
    /// The tiles of the next epoch's first window, when it is made ahead:
    /// fetched once this epoch has no window of its own left to fetch.
    next_epoch: Option<NextEpochTiles>,
}

/// Finds the tiles of the next epoch's first window (see
/// [`Producer::fetch_next_epoch`]).
type NextEpochTiles = Box<dyn FnOnce() -> Vec<usize> + Send>;

impl<V, T> Drop for Producer<V, T> {
    /// Hands the buffers of its decoded windows to the recycler, for the
    /// next epoch's first window.
    fn drop(&mut self) {
        if let Strategy::Window(chunks) = &mut self.strategy {
            self.ctx.recycled.give_chunks(chunks.buffers());
        }
    }
}

impl<V: DecodedCount + bytemuck::Pod, T: BatchTiles> Producer<V, T> {
    /// The batches of `config` over `tiles`, whose rows have `n_genes`
    /// columns as they decode, written as `output` says (its genes those
    /// the output keeps: `config.genes` for a dataset; a corpus maps them as
    /// it decodes); `population`, the cells the epoch serves (resolved from
    /// `config`).
    pub(crate) fn new(
        mut tiles: T,
        n_genes: u32,
        output: BatchOutput,
        config: &BatchConfig,
        population: Population,
        (first, step): (usize, usize),
        obs: Option<Arc<dyn CellLabels>>,
    ) -> Result<Producer<V, T>> {
        output.check::<V>()?;
        let limits = tiles.limits().to_vec();
        let (order, share) = epoch_share(&limits, config, population)?;
        let budget = |row_bytes| {
            order
                .has_windows()
                .then(|| {
                    let served = (0..).map(|w| order.window_span(w)).map(|s| s.end - s.start);
                    WindowBudget::new(
                        &tiles,
                        order.windows().zip(served),
                        config.cache_bytes,
                        row_bytes,
                    )
                })
                .flatten()
        };
        // The most batches a window's cells fill (one more where a batch
        // straddles two windows).
        let window_cells = (0..order.windows().count())
            .map(|w| order.window_span(w))
            .map(|s| s.end - s.start)
            .max()
            .unwrap_or(0);
        let per_window = (window_cells as usize).div_ceil(config.batch_size) + 1;
        // Rows decoded into place need CSR of every gene, each row as long
        // as stored (their values transformed in place, if at all), or rows
        // of a fixed width: tiles whose genes are mapped (a corpus
        // member's) qualify when the mapping keeps every gene (each row is
        // then mapped where it was decoded). Otherwise chunks are decoded
        // into buffers and mapped there first, so windows are decoded once
        // and batches copied out of them.
        let in_place = (0..limits.len() - 1).all(|t| maps_in_place(&tiles, t));
        let scattered = (output.scatters() && in_place)
            .then(|| budget(output.row_bytes::<V>(n_genes)))
            .flatten();
        let (strategy, budget) = match scattered {
            Some(b) => (
                Strategy::Scatter(Pending::new(per_window.div_ceil(b.passes))),
                Some(b),
            ),
            // Chunks decoded whole are held for the whole window.
            None => match budget(None).filter(|b| b.passes == 1) {
                Some(b) => (Strategy::Window(Box::default()), Some(b)),
                None => (Strategy::Gather, None),
            },
        };
        tiles.set_cache_bytes(budget.map_or(config.cache_bytes, |b| b.tile_cache_bytes));
        // Windows built at once are built one ahead when two fit: the
        // batches of one wait to be used while the next is built.
        let lookahead = match (&strategy, budget) {
            (Strategy::Scatter(_), Some(b)) if b.two_windows => per_window,
            _ => 0,
        };
        // The batches of the windows it holds, plus those in flight: the
        // most the producer can use at once.
        let recycled = config.recycler.clone().unwrap_or_else(|| {
            Recycler::new(
                per_window
                    .saturating_add(lookahead)
                    .saturating_add(config.prefetch)
                    .saturating_add(2),
            )
        });
        Ok(Producer {
            ctx: Ctx {
                tiles,
                n_genes,
                output,
                order,
                share,
                first,
                step,
                recycled,
                obs,
                next_epoch: None,
            },
            strategy,
            lookahead,
        })
    }

    /// Batches to make ahead beyond the caller's prefetch, so that the next
    /// window is built while this one's batches are used: a window's worth
    /// when two windows fit the memory bound and are built at once, else 0.
    pub(crate) fn lookahead(&self) -> usize {
        self.lookahead
    }

    /// What a producer of another epoch of the same batches needs: the same
    /// tiles (with a cache of their own), output, labels and share.
    pub(crate) fn parts(&self) -> Parts<T> {
        let c = &self.ctx;
        Parts {
            tiles: c.tiles.fresh(),
            n_genes: c.n_genes,
            output: c.output.clone(),
            picks: (c.first, c.step),
            obs: c.obs.clone(),
        }
    }

    /// Whether every batch up to its `total`-th draws from windows already
    /// built or decoded, so that only copies are left to make them: the
    /// moment to start on the next epoch. Batches gathered through the
    /// cache decode as they are made: never before the last.
    pub(crate) fn rest_built(&self, total: usize) -> bool {
        let Some(last) = total.checked_sub(1) else {
            return true;
        };
        let c = &self.ctx;
        let positions = c.share.get(c.index(last));
        if positions.is_empty() {
            return true;
        }
        let w = c.order.window_of(positions.end - 1);
        match &self.strategy {
            Strategy::Scatter(pending) => !pending.needs(w),
            Strategy::Window(chunks) => chunks.holds(w),
            Strategy::Gather => false,
        }
    }

    /// [`BatchTiles::identity`] of its tiles.
    pub(crate) fn tiles_identity(&self) -> usize {
        self.ctx.tiles.identity()
    }

    /// Hands the first window of the epoch `config` says, over
    /// `population` (the next epoch, made ahead with this producer's
    /// share), to the I/O stage as soon as this epoch has no window of its
    /// own left to fetch: while its last windows are built and used, so
    /// the next epoch's first batch finds its tiles fetched even when the
    /// caller drains this epoch as fast as it decodes. Only for windows
    /// built at once (the other strategies fetch as they go).
    pub(crate) fn fetch_next_epoch(&mut self, config: BatchConfig, population: Population) {
        let limits = self.ctx.tiles.limits().to_vec();
        let first = self.ctx.first;
        self.ctx.next_epoch = Some(Box::new(move || {
            first_window(&limits, &config, population, first)
        }));
    }

    /// Number of batches this producer can make.
    pub(crate) fn len(&self) -> usize {
        let c = &self.ctx;
        c.share.len().saturating_sub(c.first).div_ceil(c.step)
    }

    /// The buffers it builds batches in.
    pub(crate) fn recycler(&self) -> Recycler {
        self.ctx.recycled.clone()
    }

    /// Builds the windows the iterator's batch number `pick` draws from, if
    /// they are built at once and not yet: what a producer made ahead does
    /// before its first batch, which [`Producer::produce`] would otherwise
    /// read alone (nobody waits for it yet, and the window serves every
    /// batch). Returns what the build cost, for that batch's figures; an
    /// error leaves the windows to be built, and reported, when the batch
    /// is made.
    pub(crate) fn prepare(&mut self, pick: usize) -> ReadStats {
        let ctx = &mut self.ctx;
        let index = ctx.index(pick);
        match (&mut self.strategy, index < ctx.share.len()) {
            (Strategy::Scatter(pending), true) => {
                let positions = ctx.share.get(index);
                ctx.build_windows(pending, index, &positions)
                    .unwrap_or_default()
            }
            _ => ReadStats::default(),
        }
    }

    /// The iterator's batch number `pick`.
    pub(crate) fn produce(&mut self, pick: usize) -> Result<Batch<V>> {
        let ctx = &mut self.ctx;
        let index = ctx.index(pick);
        let positions = ctx.share.get(index);
        let (cells, mut rows, stats) = match &mut self.strategy {
            // The iterator's first batch, read alone: it decodes only its
            // own rows (from about a tile's worth of a 4-tile window's
            // chunks), so the caller has it without waiting for the whole
            // window, whose build then leaves it out.
            Strategy::Scatter(pending) if pick == 0 && ctx.first_alone(pending, &positions) => {
                ctx.gather(positions, Alone::First)?
            }
            Strategy::Scatter(pending) => ctx.take_built(pending, index, positions)?,
            Strategy::Window(chunks) => ctx.cut_from_window(chunks, positions)?,
            Strategy::Gather => ctx.gather(positions, Alone::Gathered)?,
        };
        rows.settle();
        let labels = match &ctx.obs {
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
}

/// The order of the epoch `config` says, over `population` (from tiles of
/// `limits`), less what it delivered; and this rank's share of it.
fn epoch_share(
    limits: &[u64],
    config: &BatchConfig,
    population: Population,
) -> Result<(RemainingOrder, RankShare)> {
    let order = EpochOrder::of(
        limits,
        population,
        config.shuffle,
        config.seed,
        config.epoch,
    );
    let order = RemainingOrder::new(order, &config.delivered)?;
    let share = super::share_of(order.len(), config);
    Ok((order, share))
}

/// The tiles of the window that batch `first` of the epoch `config` says
/// (over `population`, from tiles of `limits`) starts in: what the first
/// batch of an iterator of those picks fetches first. None when the epoch
/// has no such batch.
fn first_window(
    limits: &[u64],
    config: &BatchConfig,
    population: Population,
    first: usize,
) -> Vec<usize> {
    let Ok((order, share)) = epoch_share(limits, config, population) else {
        return Vec::new();
    };
    if first >= share.len() {
        return Vec::new();
    }
    order.window_tiles(share.get(first).start).to_vec()
}

/// A batch: its cells, rows and cost.
type Made<V> = (Vec<u64>, BatchRows<V>, ReadStats);

/// A batch read by itself rather than built with its window: how it is
/// decoded, and when it hands the tiles of the batches after it to the I/O
/// stage.
#[derive(Clone, Copy, PartialEq)]
enum Alone {
    /// A batch of those gathered one by one through the cache (which keeps
    /// the chunks it decodes for the batches after it), the next tiles
    /// handed over before its decode so that they arrive meanwhile: each
    /// batch is as short as the next one's fetch.
    Gathered,
    /// The iterator's first batch, which the caller is waiting for. Its
    /// cells are spread over about a tile's worth of its window's chunks,
    /// of which it needs a row or two each, and the window's build decodes
    /// those chunks again: each row is decoded straight into its place,
    /// with no whole-chunk buffer to fill and cache. The next tiles (8 by
    /// default) are handed over after it, as their copies and checks would
    /// take the same cores as its decode.
    First,
}

impl<T: Tiles> Ctx<T> {
    /// The rank's batch index of the iterator's batch number `pick`.
    fn index(&self, pick: usize) -> usize {
        self.first + pick * self.step
    }

    /// Hands the tiles that the batches after epoch position `next` will
    /// need (its window and the window after it) and the cache lacks to the
    /// I/O stage, so they arrive while this batch decodes.
    fn fetch_ahead(&self, next: u64) {
        let following = self.order.window_end(next);
        self.tiles.prefetch(self.order.window_tiles(next));
        self.tiles.prefetch(self.order.window_tiles(following));
    }

    /// Hands the tiles of the first window from epoch position `next` on
    /// that is not built yet to the I/O stage, so they arrive before it is
    /// built. The windows before it are built and their tiles dropped (see
    /// `build_window`): asking for those again, as [`Ctx::fetch_ahead`]
    /// would, reads every tile twice an epoch. From the epoch's last
    /// window on, the next epoch's first window, if it is made ahead (see
    /// [`Producer::fetch_next_epoch`]).
    fn fetch_unbuilt<V>(&mut self, next: u64, pending: &Pending<V>) {
        let mut at = next;
        while at < self.order.len() {
            let w = self.order.window_of(at);
            at = self.order.window_end(at);
            if pending.needs(w) {
                self.tiles.prefetch(self.order.window(w));
                break;
            }
        }
        if at >= self.order.len() {
            if let Some(tiles) = self.next_epoch.take() {
                self.tiles.prefetch(&tiles());
            }
        }
    }

    /// The cells at epoch `positions`, each window's tiles fetched (and
    /// checked) before its cells are listed.
    fn cells(&mut self, positions: Range<u64>, stats: &mut ReadStats) -> Result<Vec<u64>> {
        let source = &self.tiles;
        self.order
            .cells_fetched(positions, |tiles| source.fetch(tiles, &[], stats).map(drop))
    }

    /// Batch `index` (at epoch `positions`), building the windows it spans
    /// that are not built yet.
    fn take_built<V: DecodedCount + bytemuck::Pod>(
        &mut self,
        pending: &mut Pending<V>,
        index: usize,
        positions: Range<u64>,
    ) -> Result<Made<V>> {
        if positions.is_empty() {
            let rows = self.output.start(&self.recycled, self.n_genes)?;
            return Ok((Vec::new(), rows, ReadStats::default()));
        }
        let stats = self.build_windows(pending, index, &positions)?;
        self.fetch_unbuilt(positions.end, pending);
        let (cells, rows) = pending.take(index).ok_or_else(|| Error::Panicked {
            what: "the batch builder".into(),
            message: format!("batch {index} was not built with its windows"),
        })?;
        Ok((cells, rows, stats))
    }

    /// Whether batch `positions`, the iterator's first, is better read alone
    /// than with its window: the window is not built yet, holds the whole
    /// batch, and at least twice its cells (so the batch's chunks are at
    /// most about half of the window's; decoding them again with the window
    /// costs that much more once per iterator).
    fn first_alone<V>(&self, pending: &Pending<V>, positions: &Range<u64>) -> bool {
        if positions.is_empty() {
            return false;
        }
        let w = self.order.window_of(positions.start);
        let span = self.order.window_span(w);
        pending.needs(w)
            && positions.end <= span.end
            && span.end - span.start >= 2 * (positions.end - positions.start)
    }

    /// Builds the windows batch `index` (at epoch `positions`) draws from
    /// that are not built yet.
    fn build_windows<V: DecodedCount + bytemuck::Pod>(
        &mut self,
        pending: &mut Pending<V>,
        index: usize,
        positions: &Range<u64>,
    ) -> Result<ReadStats> {
        let mut stats = ReadStats::default();
        let mut at = positions.start;
        while at < positions.end {
            let w = self.order.window_of(at);
            while let Some(from) = pending.next_read(w, index) {
                stats.add(self.build_window(pending, w, from)?);
            }
            at = self.order.window_end(at);
        }
        Ok(stats)
    }

    /// Builds window `w`'s part of the batches of this iterator from batch
    /// `from` on that draw cells from it, at most [`Pending::share`] of
    /// them: one read of many outputs, each row scattered straight into its
    /// batch.
    fn build_window<V: DecodedCount + bytemuck::Pod>(
        &mut self,
        pending: &mut Pending<V>,
        w: usize,
        from: usize,
    ) -> Result<ReadStats> {
        let span = self.order.window_span(w);
        let mut stats = ReadStats::default();
        // Each batch drawing from the window, and where its cells in it start.
        let mut built = Vec::new();
        let mut index = from;
        while index < self.share.len() && built.len() < pending.share() {
            let p = self.share.get(index);
            if p.start >= span.end {
                break;
            }
            let (lo, hi) = (p.start.max(span.start), p.end.min(span.end));
            if lo < hi {
                let cells = self.cells(lo..hi, &mut stats)?;
                let windows = self.order.window_of(p.end - 1) - self.order.window_of(p.start) + 1;
                let (output, recycled, n_genes) = (&self.output, &self.recycled, self.n_genes);
                let mut batch = pending.open(index, windows, || output.start(recycled, n_genes))?;
                let first = batch.cells.len();
                batch.cells.extend_from_slice(&cells);
                built.push((batch, first));
            }
            index += self.step;
        }
        // The window's batches left for the next read, if the share ended
        // before them.
        let next =
            (index < self.share.len() && self.share.get(index).start < span.end).then_some(index);
        let outputs: Vec<CellSelection> = built
            .iter()
            .map(|(b, first)| CellSelection::ids(&b.cells[*first..]))
            .collect();
        let mut read = ReadRun {
            tiles: &self.tiles,
            outputs: &outputs,
            scatter: true,
            stats: &mut stats,
        };
        let mut fillings = built
            .iter_mut()
            .map(|(b, _)| {
                let rows = b.rows.take().ok_or_else(not_started)?;
                Filling::resume(&self.output, rows, &b.cells)
            })
            .collect::<Result<Vec<_>>>()?;
        let filled = self.output.fill(&mut fillings, &mut read);
        let rows: Vec<BatchRows<V>> = fillings.into_iter().map(Filling::finish).collect();
        filled?;
        for ((b, _), rows) in built.iter_mut().zip(rows) {
            b.rows = Some(rows);
        }
        pending.close(w, built.into_iter().map(|(b, _)| b).collect(), next);
        if next.is_some() {
            // The next read of the window decodes its tiles again.
            return Ok(stats);
        }
        // Windows share no tile, so the epoch is done with this one's: their
        // buffers go to the next windows' fetches, not back to the system
        // with the cache at the epoch's end (which cost every epoch a fresh,
        // faulted-in buffer for most of its tiles).
        for &t in self.order.window(w) {
            let (cache, key) = self.tiles.cache(t);
            cache.forget_tile(key);
        }
        Ok(stats)
    }

    /// The batch at epoch `positions`, copied out of decoded windows (a batch
    /// that straddles two windows takes its first part before the second
    /// window is decoded).
    fn cut_from_window<V: DecodedCount + bytemuck::Pod>(
        &mut self,
        chunks: &mut WindowChunks,
        positions: Range<u64>,
    ) -> Result<Made<V>> {
        let mut stats = ReadStats::default();
        let cells = self.cells(positions.clone(), &mut stats)?;
        let rows = self.output.start::<V>(&self.recycled, self.n_genes)?;
        let mut rows = [Filling::resume(&self.output, rows, &cells)?];
        let mut at = positions.start;
        while at < positions.end {
            let w = self.order.window_of(at);
            let stop = positions.end.min(self.order.window_end(at));
            let offset = (at - positions.start) as usize;
            let part = &cells[offset..offset + (stop - at) as usize];
            let cells = CellSelection::ids(part);
            let window = self.order.window(w);
            stats.add(chunks.enter(&self.tiles, w, window, &cells, &self.recycled)?);
            let mut copy = CopyRun {
                chunks,
                tiles: &self.tiles,
                cells,
            };
            self.output.fill(&mut rows, &mut copy)?;
            at = stop;
        }
        self.fetch_ahead(positions.end);
        let [rows] = rows;
        let rows = rows.finish();
        Ok((cells, rows, stats))
    }

    /// The batch at epoch `positions`, read by itself as `alone` says.
    fn gather<V: DecodedCount + bytemuck::Pod>(
        &mut self,
        positions: Range<u64>,
        alone: Alone,
    ) -> Result<Made<V>> {
        let mut fetched = ReadStats::default();
        let cells = self.cells(positions.clone(), &mut fetched)?;
        if alone == Alone::Gathered {
            self.fetch_ahead(positions.end);
        }
        let mut stats = ReadStats::default();
        let outputs = [CellSelection::ids(&cells)];
        let rows = self.output.start::<V>(&self.recycled, self.n_genes)?;
        let mut rows = [Filling::resume(&self.output, rows, &cells)?];
        let mut read = ReadRun {
            tiles: &self.tiles,
            outputs: &outputs,
            scatter: alone == Alone::First,
            stats: &mut stats,
        };
        self.output.fill(&mut rows, &mut read)?;
        if alone == Alone::First {
            self.fetch_ahead(positions.end);
        }
        let [rows] = rows;
        let rows = rows.finish();
        stats.tiles_fetched += fetched.tiles_fetched;
        Ok((cells, rows, stats))
    }
}

/// A read of `outputs` of `tiles` through the pipeline (see [`read_outputs`]).
struct ReadRun<'a, T: ?Sized> {
    tiles: &'a T,
    outputs: &'a [CellSelection],
    scatter: bool,
    stats: &'a mut ReadStats,
}

impl<T: Tiles + ?Sized> Run for ReadRun<'_, T> {
    fn run<S: Sink>(&mut self, sinks: &mut [S]) -> Result<()> {
        let stats = read_outputs(self.tiles, self.outputs, sinks, self.scatter)?;
        self.stats.add(stats);
        Ok(())
    }
}

/// A copy of `cells` out of a decoded window.
struct CopyRun<'a, T: ?Sized> {
    chunks: &'a WindowChunks,
    tiles: &'a T,
    cells: CellSelection,
}

impl<T: Tiles + ?Sized> Run for CopyRun<'_, T> {
    fn run<S: Sink>(&mut self, sinks: &mut [S]) -> Result<()> {
        for sink in sinks {
            self.chunks.copy(self.tiles, &self.cells, sink)?;
        }
        Ok(())
    }
}

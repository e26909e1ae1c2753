//! How a batch's rows are made: one [`Strategy`], chosen when the iterator
//! is created, every one of them a use of the dataset's read pipeline.

use std::ops::Range;

use crate::csr::Csr;
use crate::dataset::batches::order::EpochOrder;
use crate::dataset::batches::recycler::Recycler;
use crate::dataset::batches::scatter::{Part, Pending};
use crate::dataset::batches::share::RankShare;
use crate::dataset::batches::window::{WindowBudget, WindowChunks};
use crate::dataset::batches::{Batch, BatchConfig, BatchRows};
use crate::dataset::cache::ChunkCache;
use crate::dataset::read::ReadStats;
use crate::dataset::tiles::{maps_in_place, read_outputs, Through, Tiles};
use crate::dataset::Dataset;
use crate::engine::{AddedRows, CellSelection, CsrPart, DensePart, GeneSelection, Selected, Sink};
use crate::engine::{Dense, SinkPart};
use crate::error::{Error, Result};
use crate::kernels::DecodedCount;
use crate::obs::{Labels, LocalObs};

/// How a batch iterator makes its batches.
pub(crate) enum Strategy<V> {
    /// Decoded windows fit the bound and batches are CSR rows of every gene,
    /// each as long as stored: a window's batches are built together, every
    /// row decoded straight into its place (see [`super::scatter`]).
    Scatter(Pending<V>),
    /// Decoded windows fit the bound, and batches transform rows (dense
    /// rows, a gene selection): a window's chunks are decoded once, whole,
    /// and each batch is copied out of them (see [`super::window`]).
    Window(WindowChunks),
    /// Windows do not fit, or cells come in random order: each batch is a
    /// read through the iterator's cache, which re-decodes what it evicted.
    Gather,
}

/// What batches are made from: a set of [`Tiles`] whose cache the producer
/// sizes once it knows what its windows need.
pub(crate) trait BatchTiles: Tiles + Send + 'static {
    /// Gives the tiles a fresh cache of `bytes` in all.
    fn set_cache_bytes(&mut self, bytes: usize);
}

impl BatchTiles for Through<Dataset, ChunkCache> {
    fn set_cache_bytes(&mut self, bytes: usize) {
        self.cache = ChunkCache::new(bytes);
    }
}

/// The labels of a batch's cells: a dataset's localized obs columns, or a
/// corpus's unified ones.
pub(crate) trait CellLabels: Send + 'static {
    /// The columns' values for `cells`, in their order.
    fn labels(&self, cells: &[u64]) -> Result<Labels>;
}

impl CellLabels for LocalObs {
    fn labels(&self, cells: &[u64]) -> Result<Labels> {
        LocalObs::labels(self, cells)
    }
}

/// Makes one rank's batches of one epoch.
pub(crate) struct Producer<V, T> {
    ctx: Ctx<T>,
    strategy: Strategy<V>,
}

/// Everything a strategy reads.
struct Ctx<T> {
    tiles: T,
    /// Columns of the rows as the tiles decode.
    n_genes: u32,
    /// Genes the batches keep, applied by the output.
    genes: Option<GeneSelection>,
    dense: bool,
    order: EpochOrder,
    share: RankShare,
    /// This iterator yields the rank's batches `first`, `first + step`, ...
    first: usize,
    step: usize,
    /// Buffers of batches the caller is done with, to build batches in.
    recycled: Recycler,
    obs: Option<Box<dyn CellLabels>>,
}

impl<V: DecodedCount + bytemuck::Pod, T: BatchTiles> Producer<V, T> {
    /// The batches of `config` over `tiles`, whose rows have `n_genes`
    /// columns as they decode; `genes`, the genes the output keeps of those
    /// (`config.genes` for a dataset; a corpus maps them as it decodes).
    pub(crate) fn new(
        mut tiles: T,
        n_genes: u32,
        genes: Option<GeneSelection>,
        config: &BatchConfig,
        (first, step): (usize, usize),
        obs: Option<Box<dyn CellLabels>>,
    ) -> Result<Producer<V, T>> {
        let limits = tiles.limits().to_vec();
        let order = EpochOrder::new(&limits, config.shuffle, config.seed, config.epoch);
        let share = super::share_of(&order, config);
        let budget = order
            .has_windows()
            .then(|| WindowBudget::new(&tiles, order.windows(), config.cache_bytes))
            .flatten();
        let recycled = config.recycler.clone().unwrap_or_else(|| {
            // A window's batches plus those in flight: the most the producer
            // can use at once.
            let window_cells = order
                .windows()
                .map(|w| w.iter().map(|&t| limits[t + 1] - limits[t]).sum::<u64>())
                .max()
                .unwrap_or(0);
            let per_window = (window_cells as usize).div_ceil(config.batch_size);
            Recycler::new(per_window + config.prefetch + 2)
        });
        // Rows decoded into place need CSR of every gene, each row as long
        // as stored: tiles whose genes are mapped (a corpus member's) qualify
        // when the mapping keeps every gene (each row is then mapped where
        // it was decoded). Otherwise chunks are decoded into buffers and
        // mapped there first, so windows are decoded once and batches copied
        // out of them.
        let in_place = (0..limits.len() - 1).all(|t| maps_in_place(&tiles, t));
        let strategy = match budget {
            None => Strategy::Gather,
            Some(_) if !config.dense && genes.is_none() && in_place => {
                Strategy::Scatter(Pending::default())
            }
            Some(_) => Strategy::Window(WindowChunks::default()),
        };
        tiles.set_cache_bytes(budget.map_or(config.cache_bytes, |b| b.tile_cache_bytes));
        Ok(Producer {
            ctx: Ctx {
                tiles,
                n_genes,
                genes,
                dense: config.dense,
                order,
                share,
                first,
                step,
                recycled,
                obs,
            },
            strategy,
        })
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

    /// The iterator's batch number `pick`.
    pub(crate) fn produce(&mut self, pick: usize) -> Result<Batch<V>> {
        let ctx = &mut self.ctx;
        let index = ctx.first + pick * ctx.step;
        let positions = ctx.share.get(index);
        let (cells, rows, stats) = match &mut self.strategy {
            Strategy::Scatter(pending) => ctx.take_built(pending, index, positions)?,
            Strategy::Window(chunks) => ctx.cut_from_window(chunks, positions)?,
            Strategy::Gather => ctx.gather(positions)?,
        };
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

/// A batch: its cells, rows and cost.
type Made<V> = (Vec<u64>, BatchRows<V>, ReadStats);

impl<T: Tiles> Ctx<T> {
    /// Hands the tiles that the batches after epoch position `next` will
    /// need (its window and the window after it) and the cache lacks to the
    /// I/O stage, so they arrive while this batch decodes.
    fn fetch_ahead(&self, next: u64) {
        let following = self.order.window_end(next);
        self.tiles.prefetch(self.order.window_tiles(next));
        self.tiles.prefetch(self.order.window_tiles(following));
    }

    /// The cells at epoch `positions`, each window's tiles fetched (and
    /// checked) before its cells are listed.
    fn cells(&mut self, positions: Range<u64>, stats: &mut ReadStats) -> Result<Vec<u64>> {
        let source = &self.tiles;
        self.order
            .cells_fetched(positions, |tiles| source.fetch(tiles, &[], stats).map(drop))
    }

    /// Empty rows to build a batch in, started for the tiles' genes.
    fn new_rows<V: DecodedCount + bytemuck::Pod>(&self) -> BatchRows<V> {
        let mut rows = if self.dense {
            BatchRows::Dense(Dense::default())
        } else {
            BatchRows::Csr(self.recycled.take())
        };
        match &self.genes {
            Some(g) => Selected::new(&mut rows, g).start(self.n_genes),
            None => rows.start(self.n_genes),
        }
        rows
    }

    /// Batch `index` (at epoch `positions`), building the windows it spans
    /// that are not built yet.
    fn take_built<V: DecodedCount + bytemuck::Pod>(
        &mut self,
        pending: &mut Pending<V>,
        index: usize,
        positions: Range<u64>,
    ) -> Result<Made<V>> {
        let n_cols = u64::from(self.n_genes);
        if positions.is_empty() {
            let rows = BatchRows::Csr(Csr::empty(n_cols));
            return Ok((Vec::new(), rows, ReadStats::default()));
        }
        let mut stats = ReadStats::default();
        let mut at = positions.start;
        while at < positions.end {
            let w = self.order.window_of(at);
            if pending.needs(w) {
                stats.add(self.build_window(pending, w, index)?);
            }
            at = self.order.window_end(at);
        }
        self.fetch_ahead(positions.end);
        let (cells, csr) = pending.take(index).ok_or_else(|| Error::Panicked {
            what: "the batch builder".into(),
            message: format!("batch {index} was not built with its windows"),
        })?;
        Ok((cells, BatchRows::Csr(csr), stats))
    }

    /// Builds window `w`'s part of every batch of this iterator from batch
    /// `from` on that draws cells from it: one read of many outputs, each
    /// row scattered straight into its batch.
    fn build_window<V: DecodedCount + bytemuck::Pod>(
        &mut self,
        pending: &mut Pending<V>,
        w: usize,
        from: usize,
    ) -> Result<ReadStats> {
        let span = self.order.window_span(w);
        let mut stats = ReadStats::default();
        let mut parts = Vec::new();
        let mut index = from;
        while index < self.share.len() {
            let p = self.share.get(index);
            if p.start >= span.end {
                break;
            }
            let (lo, hi) = (p.start.max(span.start), p.end.min(span.end));
            if lo < hi {
                let cells = self.cells(lo..hi, &mut stats)?;
                let mut rows: Csr<V> = self.recycled.take();
                rows.start(self.n_genes);
                parts.push(Part {
                    index,
                    cells,
                    windows: self.order.window_of(p.end - 1) - self.order.window_of(p.start) + 1,
                    rows,
                });
            }
            index += self.step;
        }
        let outputs: Vec<CellSelection> =
            parts.iter().map(|p| CellSelection::ids(&p.cells)).collect();
        let mut sinks: Vec<&mut Csr<V>> = parts.iter_mut().map(|p| &mut p.rows).collect();
        stats.add(read_outputs(&self.tiles, &outputs, &mut sinks, true)?);
        pending.add(w, parts);
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
        let mut rows = self.new_rows::<V>();
        let mut stats = ReadStats::default();
        let mut cells = Vec::with_capacity((positions.end - positions.start) as usize);
        let mut at = positions.start;
        while at < positions.end {
            let w = self.order.window_of(at);
            let stop = positions.end.min(self.order.window_end(at));
            let part = self.cells(at..stop, &mut stats)?;
            stats.add(chunks.enter(&self.tiles, w, self.order.window(w))?);
            let part_cells = CellSelection::ids(&part);
            match &self.genes {
                Some(g) => chunks.copy(&self.tiles, &part_cells, Selected::new(&mut rows, g))?,
                None => chunks.copy(&self.tiles, &part_cells, &mut rows)?,
            }
            cells.extend_from_slice(&part);
            at = stop;
        }
        self.fetch_ahead(positions.end);
        Ok((cells, rows, stats))
    }

    /// The batch at epoch `positions`, read through the iterator's cache.
    fn gather<V: DecodedCount + bytemuck::Pod>(
        &mut self,
        positions: Range<u64>,
    ) -> Result<Made<V>> {
        let mut fetched = ReadStats::default();
        let cells = self.cells(positions.clone(), &mut fetched)?;
        self.fetch_ahead(positions.end);
        let mut rows = self.new_rows::<V>();
        let outputs = [CellSelection::ids(&cells)];
        let tiles = &self.tiles;
        let mut stats = match &self.genes {
            Some(g) => read_outputs(tiles, &outputs, &mut [Selected::new(&mut rows, g)], false),
            None => read_outputs(tiles, &outputs, &mut [&mut rows], false),
        }?;
        stats.tiles_fetched += fetched.tiles_fetched;
        Ok((cells, rows, stats))
    }
}

/// Batch rows are an output like any other: CSR or dense, by variant.
impl<V: DecodedCount> Sink for BatchRows<V> {
    type Part<'p> = BatchRowsPart<'p, V>;

    fn stores_rows(&self) -> bool {
        match self {
            BatchRows::Csr(c) => c.stores_rows(),
            BatchRows::Dense(d) => d.stores_rows(),
        }
    }

    fn start(&mut self, n_cols: u32) {
        match self {
            BatchRows::Csr(c) => c.start(n_cols),
            BatchRows::Dense(d) => d.start(n_cols),
        }
    }

    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        match self {
            BatchRows::Csr(c) => c.extend(rows),
            BatchRows::Dense(d) => d.extend(rows),
        }
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<BatchRowsPart<'_, V>> {
        match self {
            BatchRows::Csr(c) => c.split(cuts).into_iter().map(BatchRowsPart::Csr).collect(),
            BatchRows::Dense(d) => d
                .split(cuts)
                .into_iter()
                .map(BatchRowsPart::Dense)
                .collect(),
        }
    }
}

/// Rows of a [`BatchRows`] output.
pub enum BatchRowsPart<'p, V> {
    /// Rows of CSR rows.
    Csr(CsrPart<'p, V>),
    /// Rows of dense rows.
    Dense(DensePart<'p, V>),
}

impl<V: DecodedCount> SinkPart for BatchRowsPart<'_, V> {
    type Value = V;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [V])> {
        match self {
            BatchRowsPart::Csr(p) => p.stored(),
            BatchRowsPart::Dense(p) => p.stored(),
        }
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        match self {
            BatchRowsPart::Csr(p) => p.write_row(row, genes, counts),
            BatchRowsPart::Dense(p) => p.write_row(row, genes, counts),
        }
    }
}

//! Training batches over a corpus: the interface of [`Dataset::batches`]
//! ([`BatchConfig`], [`BatchIter`]) over every tile of every member.
//!
//! The epoch order ([`EpochOrder`]) and the ranks' shares ([`RankShare`])
//! are those of a dataset whose tiles are the members' tiles one after
//! another, so a block shuffle mixes every tile of every member and every
//! rank gets as many batches. Within a batch, rows are grouped by member
//! (in member order, each member's cells in epoch order): each member's
//! part is then one read of the member's pipeline through its gene mapping,
//! into the batch's one output, and through the iterator's cache of that
//! member, so a chunk a window's batches share is decoded once. Labels come
//! in the corpus's unified columns ([`CorpusObs`]).
//!
//! [`Dataset::batches`]: crate::Dataset::batches

use std::borrow::Cow;

use super::{Corpus, CorpusObs};
use crate::dataset::{
    picked, share_of, Batch, BatchConfig, BatchIter, BatchRows, ChunkCache, EpochOrder, Produce,
    RankShare, ReadStats, Recycler,
};
use crate::engine::{CellSelection, Dense, GeneSelection, Selected, Sink};
use crate::error::{Error, Result};
use crate::kernels::DecodedCount;
use crate::obs::Labels;

impl Corpus {
    /// One rank's batches of one epoch over the whole corpus, with `f32`
    /// counts (see the [module docs](self)).
    pub fn batches(&self, config: BatchConfig) -> Result<BatchIter<f32>> {
        self.batches_of(config)
    }

    /// As [`Corpus::batches`], with counts of type `V` (`f32` or `i32`).
    pub fn batches_of<V: DecodedCount + bytemuck::Pod>(
        &self,
        config: BatchConfig,
    ) -> Result<BatchIter<V>> {
        if let Some(g) = &config.genes {
            self.check_selection(g)?;
        }
        let (first, step, count) = picked(&config)?;
        let prefetch = config.prefetch;
        let producer = CorpusBatches::new(self, config, first, step)?;
        let total = producer.len().min(count);
        let recycled = producer.recycled.clone();
        BatchIter::start(producer, total, prefetch, recycled)
    }

    /// The first corpus cell of each member tile (the members' tiles one
    /// after another), then the number of cells; and each such tile's
    /// member and tile within it.
    fn tiles(&self) -> (Vec<u64>, Vec<(usize, usize)>) {
        let mut limits = vec![0u64];
        let mut tiles = Vec::new();
        for (m, member) in self.members().iter().enumerate() {
            let base = self.limits()[m];
            let own = member.dataset().limits();
            limits.extend(own[1..].iter().map(|&l| base + l));
            tiles.extend((0..member.dataset().n_tiles()).map(|t| (m, t)));
        }
        (limits, tiles)
    }
}

/// Makes one rank's batches of one epoch of a corpus.
struct CorpusBatches<V> {
    corpus: Corpus,
    order: EpochOrder,
    share: RankShare,
    first: usize,
    step: usize,
    /// Each corpus tile's member and tile within it.
    tiles: Vec<(usize, usize)>,
    /// Each member's genes into the batches' columns (`None`: unmapped).
    genes: Vec<Option<GeneSelection>>,
    /// Columns of the batches.
    width: u32,
    dense: bool,
    /// The iterator's cache of each member's tiles and decoded chunks.
    caches: Vec<ChunkCache>,
    recycled: Recycler,
    obs: Option<CorpusObs>,
    _values: std::marker::PhantomData<fn() -> V>,
}

impl<V: DecodedCount + bytemuck::Pod> CorpusBatches<V> {
    fn new(
        corpus: &Corpus,
        config: BatchConfig,
        first: usize,
        step: usize,
    ) -> Result<CorpusBatches<V>> {
        let (limits, tiles) = corpus.tiles();
        let order = EpochOrder::new(&limits, config.shuffle, config.seed, config.epoch);
        let share = share_of(&order, &config);
        let genes = (0..corpus.members().len())
            .map(|m| {
                corpus
                    .member_genes(m, config.genes.as_ref())
                    .map(|g| g.map(Cow::into_owned))
            })
            .collect::<Result<Vec<_>>>()?;
        let obs = if config.obs_columns.is_empty() {
            None
        } else {
            Some(corpus.localize(&config.obs_columns, config.obs_cache_dir.as_deref())?)
        };
        let n = corpus.members().len();
        let caches = (0..n)
            .map(|_| ChunkCache::new(config.cache_bytes / n))
            .collect();
        let recycled = config
            .recycler
            .clone()
            .unwrap_or_else(|| Recycler::new(config.prefetch + 4));
        Ok(CorpusBatches {
            corpus: corpus.clone(),
            order,
            share,
            first,
            step,
            tiles,
            width: config
                .genes
                .as_ref()
                .map_or(corpus.n_genes(), |g| g.len() as u32),
            genes,
            dense: config.dense,
            caches,
            recycled,
            obs,
            _values: std::marker::PhantomData,
        })
    }

    /// Number of batches this producer can make.
    fn len(&self) -> usize {
        self.share
            .len()
            .saturating_sub(self.first)
            .div_ceil(self.step)
    }
}

/// Starts fetching the corpus tiles `wanted` that the members' caches lack
/// (`tiles`: each corpus tile's member and tile within it).
fn prefetch(corpus: &Corpus, tiles: &[(usize, usize)], caches: &[ChunkCache], wanted: &[usize]) {
    for &t in wanted {
        let (m, local) = tiles[t];
        if !caches[m].has_tile(local) {
            corpus.members()[m].dataset().prefetch([local]);
        }
    }
}

impl<V: DecodedCount + bytemuck::Pod> Produce<V> for CorpusBatches<V> {
    fn produce(&mut self, pick: usize) -> Result<Batch<V>> {
        let index = self.first + pick * self.step;
        let positions = self.share.get(index);
        let order = &mut self.order;
        let (tiles, caches, corpus) = (&self.tiles, &self.caches, &self.corpus);
        let mut cells = order.cells_fetched(positions.clone(), |window| {
            prefetch(corpus, tiles, caches, window);
            Ok(())
        })?;
        // The tiles of the next batches' window and the window after it
        // arrive while this batch decodes.
        let following = order.window_end(positions.end);
        prefetch(corpus, tiles, caches, order.window_tiles(positions.end));
        prefetch(corpus, tiles, caches, order.window_tiles(following));
        let limits = self.corpus.limits();
        let member = |c: u64| limits.partition_point(|&l| l <= c) - 1;
        cells.sort_by_key(|&c| member(c));
        let mut rows = if self.dense {
            BatchRows::Dense(Dense::default())
        } else {
            BatchRows::Csr(self.recycled.take())
        };
        rows.start(self.width);
        let mut stats = ReadStats::default();
        let mut at = 0;
        while at < cells.len() {
            let m = member(cells[at]);
            let end = at + cells[at..].partition_point(|&c| member(c) == m);
            let base = limits[m];
            let local: Vec<u64> = cells[at..end].iter().map(|&c| c - base).collect();
            let outputs = [CellSelection::ids(&local)];
            let member = &self.corpus.members()[m];
            let ds = member.dataset();
            let cache = &self.caches[m];
            let read = match &self.genes[m] {
                Some(g) => {
                    ds.read_outputs(&outputs, &mut [Selected::new(&mut rows, g)], cache, false)
                }
                None => ds.read_outputs(&outputs, &mut [&mut rows], cache, false),
            };
            stats.add(read.map_err(Error::in_member(member.location()))?);
            at = end;
        }
        Ok(Batch {
            labels: match &self.obs {
                Some(obs) => obs.labels(&cells)?,
                None => Labels::default(),
            },
            index,
            cells,
            rows,
            stats,
        })
    }
}

//! Training batches over a corpus: the interface of [`Dataset::batches`]
//! ([`BatchConfig`], [`BatchIter`]) over every tile of every member.
//!
//! The corpus is a set of tiles of its own (`CorpusTiles`): every
//! member's tiles one after another, each fetched and cached by its member,
//! each member's chunks mapped into the vocabulary (and the configured gene
//! selection) as they decode. The dataset's batch producer runs over it
//! unchanged, so the epoch order ([`EpochOrder`]) and the ranks' shares
//! ([`RankShare`]) are those of that one long list of tiles (a block shuffle
//! mixes every tile of every member, every rank gets as many batches), each
//! batch's rows come in epoch order, and every strategy of a dataset applies:
//! a window's CSR batches built at once, every row decoded straight into
//! place (a mapped member's then mapped where it lies) when no member's
//! mapping drops genes (a union), else cut from the window's chunks decoded
//! and mapped once; dense batches copied out of a decoded window;
//! reads through a cache when windows do not fit. Labels come in the
//! corpus's unified columns ([`CorpusObs`]).
//!
//! [`Dataset::batches`]: crate::Dataset::batches
//! [`EpochOrder`]: crate::dataset::EpochOrder
//! [`RankShare`]: crate::dataset::RankShare

use std::collections::HashMap;
use std::sync::Arc;

use super::{Corpus, CorpusObs};
use crate::dataset::source::Source as _;
use crate::dataset::{
    batches_over, BatchConfig, BatchIter, BatchTiles, CellLabels, ChunkCache, ReadStats, TileMap,
    Tiles, Weights,
};
use crate::engine::plan::Piece;
use crate::engine::{Engine, GeneSelection};
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
        let obs: Option<Arc<dyn CellLabels>> = if config.obs_columns.is_empty() {
            None
        } else {
            let obs = self.localize(&config.obs_columns, config.obs_cache_dir.as_deref())?;
            Some(Arc::new(obs))
        };
        let width = config
            .genes
            .as_ref()
            .map_or(self.n_genes(), |g| g.len() as u32);
        let balance = match &config.weights {
            Weights::Balance(columns) => {
                Some(self.localize(columns, config.obs_cache_dir.as_deref())?)
            }
            _ => None,
        };
        let tokens = match config.batch_tokenizer() {
            Some(t) => Some(t.for_corpus(self)?),
            None => None,
        };
        if tokens.is_some() && config.genes.is_some() {
            return Err(Error::Input(
                "a tokenizer reads every gene of the vocabulary: ask for tokens without a gene \
                 selection"
                    .into(),
            ));
        }
        let tiles = CorpusTiles::new(self, config.genes.as_ref())?;
        let balance = balance.as_ref().map(|b| b as &dyn CellLabels);
        batches_over(tiles, width, None, tokens, &config, obs, balance)
    }
}

impl CellLabels for CorpusObs {
    fn labels(&self, cells: &[u64]) -> Result<Labels> {
        CorpusObs::labels(self, cells)
    }
}

/// A corpus's tiles as one set: the members' tiles one after another (see
/// the module docs).
pub(crate) struct CorpusTiles {
    corpus: Corpus,
    /// The first corpus cell of each tile, then the number of cells.
    limits: Vec<u64>,
    /// Each tile's member and tile within it.
    tiles: Vec<(usize, usize)>,
    /// Each member's first tile, then the number of tiles.
    first_tile: Vec<usize>,
    /// Each member's genes into the output columns (`None`: unmapped).
    remaps: Vec<Option<GeneSelection>>,
    /// Each member's cache of tiles and decoded (mapped) chunks.
    caches: Vec<ChunkCache>,
}

impl CorpusTiles {
    /// The tiles of `corpus`, its rows mapped into the vocabulary and then
    /// `genes` (a selection of vocabulary genes) when given.
    pub(crate) fn new(corpus: &Corpus, genes: Option<&GeneSelection>) -> Result<CorpusTiles> {
        let mut limits = vec![0u64];
        let (mut tiles, mut first_tile) = (Vec::new(), vec![0]);
        for (m, member) in corpus.members().iter().enumerate() {
            let base = corpus.limits()[m];
            let ds = member.dataset();
            limits.extend(ds.limits()[1..].iter().map(|&l| base + l));
            tiles.extend((0..ds.n_tiles()).map(|t| (m, t)));
            first_tile.push(tiles.len());
        }
        let remaps = (0..corpus.members().len())
            .map(|m| Ok(corpus.member_genes(m, genes)?.map(|g| g.into_owned())))
            .collect::<Result<Vec<_>>>()?;
        Ok(CorpusTiles {
            corpus: corpus.clone(),
            limits,
            tiles,
            first_tile,
            remaps,
            caches: Vec::new(),
        })
    }
}

impl Tiles for CorpusTiles {
    fn limits(&self) -> &[u64] {
        &self.limits
    }

    fn engine(&self) -> &Engine {
        self.corpus.engine()
    }

    fn figures(&self, t: usize) -> (u64, u64, u64) {
        let (m, local) = self.tiles[t];
        let manifest = self.corpus.members()[m].dataset().manifest();
        (
            manifest.tile_nnz[local],
            manifest.tile_cells[local],
            manifest.tile_bytes[local],
        )
    }

    fn fetch(&self, tiles: &[usize], wanted: &[Piece], stats: &mut ReadStats) -> Result<TileMap> {
        let mut out = HashMap::with_capacity(tiles.len());
        // Sorted, each member's tiles are consecutive.
        let mut sorted = tiles.to_vec();
        sorted.sort_unstable();
        let tiles = &sorted[..];
        let mut at = 0;
        while at < tiles.len() {
            let m = self.tiles[tiles[at]].0;
            let end = at + tiles[at..].partition_point(|&t| self.tiles[t].0 == m);
            let base = self.first_tile[m];
            let local: Vec<usize> = tiles[at..end].iter().map(|&t| t - base).collect();
            let local_wanted: Vec<Piece> = wanted
                .iter()
                .filter(|p| self.tiles[p.tile].0 == m)
                .map(|p| Piece {
                    tile: p.tile - base,
                    ..p.clone()
                })
                .collect();
            let member = &self.corpus.members()[m];
            let fetched = member
                .dataset()
                .fetch_tiles_for(&local, &local_wanted, &self.caches[m], stats)
                .map_err(Error::in_member(member.location()))?;
            out.extend(fetched.into_iter().map(|(t, b)| (t + base, b)));
            at = end;
        }
        Ok(out)
    }

    fn prefetch(&self, tiles: &[usize]) {
        for &t in tiles {
            let (m, local) = self.tiles[t];
            if !self.caches[m].has_tile(local) {
                self.corpus.members()[m].dataset().prefetch([local]);
            }
        }
    }

    fn cache(&self, t: usize) -> (&ChunkCache, usize) {
        let (m, local) = self.tiles[t];
        (&self.caches[m], local)
    }

    fn remap(&self, t: usize) -> Option<&GeneSelection> {
        self.remaps[self.tiles[t].0].as_ref()
    }
}

impl BatchTiles for CorpusTiles {
    fn set_cache_bytes(&mut self, bytes: usize) {
        let n = self.corpus.members().len();
        self.caches = (0..n).map(|_| ChunkCache::new(bytes / n)).collect();
    }

    fn fresh(&self) -> Self {
        CorpusTiles {
            corpus: self.corpus.clone(),
            limits: self.limits.clone(),
            tiles: self.tiles.clone(),
            first_tile: self.first_tile.clone(),
            remaps: self.remaps.clone(),
            caches: (0..self.caches.len()).map(|_| ChunkCache::new(0)).collect(),
        }
    }

    fn identity(&self) -> usize {
        self.corpus.identity()
    }
}

//! Datasets: a directory (or bucket prefix) of tiles plus `manifest.json`.
//!
//! [`Dataset::open`] reads and checks the manifest and the side files; tiles
//! are fetched through a [`Store`] when first needed, checked against the
//! manifest, and decoded on the pinned [`Engine`] pool. Reads return CSR or
//! dense rows for any cells; [`Dataset::batches`] yields reproducible training
//! batches split across ranks.

mod batches;
pub mod build;
pub(crate) mod cache;
mod fetch;
pub mod gene_stats;
pub mod ingest;
mod packer;
mod ranged;
mod read;
mod tiles;
pub mod vocab;
mod writer;

use std::ffi::OsStr;
use std::sync::Arc;

pub use crate::engine::{CellSelection, GeneSelection};
pub use crate::storage::{AlignedBytes, LocalStore, MemoryStore, Store};
pub use batches::{
    Batch, BatchConfig, BatchIter, BatchRows, EpochOrder, JobShape, Pick, RankShare, Recycler,
    Remaining, Shuffle, Weights, DEFAULT_WINDOW_TILES,
};
pub use gene_stats::{GeneStats, GeneTable};
pub use read::{CsrBatch, DenseBatch, Read, ReadSource, ReadStats};
pub use writer::{DatasetWriter, WriterConfig, DEFAULT_TILE_SIZE};

use crate::engine::decoded::in_tile;
use crate::engine::{ChunkDecoder, Engine, EngineConfig};
use crate::error::{Error, Result};
use crate::format::manifest::{DatasetRule, Manifest};
use crate::format::npy::{Array, Dtype};
use crate::format::tile::TileView;
use crate::obs::{ObsReader, VarFrame};
use crate::storage::{FetchThreads, Fetcher, Location};

pub(crate) use batches::{batches_over, BatchTiles, CellLabels};
pub(crate) use cache::ChunkCache;
pub(crate) use read::source;
pub(crate) use tiles::{TileMap, Tiles};

/// Object key of the manifest (written last: a location without it is an
/// incomplete dataset).
pub const MANIFEST_KEY: &str = "manifest.json";

/// Default bound of the dataset's shared cache of tiles and decoded chunks.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// Default number of tile requests in flight: enough to hide ~20 ms of
/// object-store latency behind decoding; threads that only wait cost little.
pub const DEFAULT_FETCH_IN_FLIGHT: usize = 16;

/// How to open a dataset.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OpenOptions {
    /// The decode pool.
    pub engine: EngineConfig,
    /// Bound of the cache shared by `read_*` calls.
    pub cache_bytes: usize,
    /// Tile requests the I/O stage keeps in flight (its thread count).
    pub fetch_in_flight: usize,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            engine: EngineConfig::default(),
            cache_bytes: DEFAULT_CACHE_BYTES,
            fetch_in_flight: DEFAULT_FETCH_IN_FLIGHT,
        }
    }
}

/// An open dataset: a cheap handle (clones share the manifest, the decode
/// pool, the I/O stage and the cache), safe to use from many threads at once.
#[derive(Clone)]
pub struct Dataset {
    shared: Arc<Shared>,
}

/// The dataset's store and shape (an embedder's own structs derive `Debug`).
impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("store", &self.shared.store.describe())
            .field("n_cells", &self.n_cells())
            .field("n_genes", &self.n_genes())
            .finish_non_exhaustive()
    }
}

/// What every handle of an open dataset shares.
struct Shared {
    store: Arc<dyn Store>,
    manifest: Manifest,
    limits: Vec<u64>,
    gene_order: Option<Vec<i32>>,
    var_names: Option<Vec<String>>,
    /// The decode pool, shared with the other members of a corpus.
    engine: Arc<Engine>,
    /// The I/O stage: tiles are fetched on its threads, never on the engine's.
    fetcher: Fetcher,
    cache: ChunkCache,
    obs: Option<ObsReader>,
}

/// What [`Dataset::verify`] checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Tiles checked and decoded.
    pub tiles: usize,
    /// Cells in them.
    pub cells: u64,
    /// Nonzeros decoded.
    pub nonzeros: u64,
    /// Bytes of tile objects read.
    pub bytes: u64,
}

impl Dataset {
    /// A number no other open dataset or corpus has while this one lives.
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.shared) as *const () as usize
    }

    /// Opens the dataset at `location` with default options: a directory, or
    /// a URL such as `s3://bucket/prefix` (see [`Location::parse`]).
    pub fn open(location: impl AsRef<OsStr>) -> Result<Dataset> {
        Dataset::open_with(location, OpenOptions::default())
    }

    /// Opens the dataset at `location` (a directory or a URL).
    pub fn open_with(location: impl AsRef<OsStr>, options: OpenOptions) -> Result<Dataset> {
        let location = Location::parse(location);
        crate::storage::location::require_dir(&location)?;
        Dataset::open_store(location.store()?, options)
    }

    /// Opens a dataset held by any store.
    pub fn open_store(store: Arc<dyn Store>, options: OpenOptions) -> Result<Dataset> {
        let engine = Arc::new(Engine::new(options.engine.clone())?);
        let fetch = FetchThreads::new(options.fetch_in_flight)?;
        Dataset::open_sharing(store, options, engine, fetch)
    }

    /// Opens the dataset at `location` decoding on `engine` and fetching on
    /// `fetch` (the members of a corpus share one pool and one set of I/O
    /// threads), with `options` for its cache and its share of the I/O
    /// stage.
    pub(crate) fn open_at_sharing(
        location: &Location,
        options: OpenOptions,
        engine: Arc<Engine>,
        fetch: Arc<FetchThreads>,
    ) -> Result<Dataset> {
        crate::storage::location::require_dir(location)?;
        Dataset::open_sharing(location.store()?, options, engine, fetch)
    }

    fn open_sharing(
        store: Arc<dyn Store>,
        options: OpenOptions,
        engine: Arc<Engine>,
        fetch: Arc<FetchThreads>,
    ) -> Result<Dataset> {
        let bytes = match store.get(MANIFEST_KEY)? {
            Some(bytes) => bytes,
            None => return Err(missing_manifest(&*store)),
        };
        let manifest = Manifest::parse(bytes.as_bytes())?;
        let mut limits = Vec::with_capacity(manifest.n_tiles() + 1);
        limits.push(0u64);
        for &c in &manifest.tile_cells {
            limits.push(limits[limits.len() - 1] + c);
        }
        let gene_order = if manifest.has_gene_order {
            Some(read_gene_order(&*store, manifest.n_genes)?)
        } else {
            None
        };
        let var_names = if manifest.has_var_names {
            Some(read_var_names(&*store, manifest.n_genes)?)
        } else {
            None
        };
        if manifest.has_var_table && store.size("var.parquet")?.is_none() {
            return Err(DatasetRule::VarTable(
                "has_var_table is true but var.parquet is missing".into(),
            )
            .into());
        }
        let has_schema = store.size("obs/schema.json")?.is_some();
        match (manifest.obs.is_some(), has_schema) {
            (true, false) => {
                return Err(DatasetRule::Obs(
                    "has_obs is true but obs/schema.json is missing".into(),
                )
                .into())
            }
            (false, true) => {
                return Err(
                    DatasetRule::Obs("has_obs is false but obs/schema.json exists".into()).into(),
                )
            }
            _ => {}
        }
        let obs = if manifest.obs.is_some() {
            Some(ObsReader::open(store.clone(), &manifest)?)
        } else {
            None
        };
        let shared = Shared {
            fetcher: Fetcher::sharing(store.clone(), options.fetch_in_flight, fetch),
            store,
            manifest,
            limits,
            gene_order,
            var_names,
            engine,
            cache: ChunkCache::new(options.cache_bytes),
            obs,
        };
        Ok(Dataset {
            shared: Arc::new(shared),
        })
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.shared.manifest
    }

    /// Number of cells.
    pub fn n_cells(&self) -> u64 {
        self.shared.manifest.n_cells
    }

    /// Number of genes (output columns).
    pub fn n_genes(&self) -> u32 {
        self.shared.manifest.n_genes
    }

    /// Number of tiles.
    pub fn n_tiles(&self) -> usize {
        self.shared.manifest.n_tiles()
    }

    /// First global cell of each tile, plus `n_cells` at the end.
    pub fn limits(&self) -> &[u64] {
        &self.shared.limits
    }

    /// `gene_order.npy`: output column `j` was column `gene_order[j]` of the source.
    pub fn gene_order(&self) -> Option<&[i32]> {
        self.shared.gene_order.as_deref()
    }

    /// `var_names.txt`: gene names in output column order.
    pub fn var_names(&self) -> Option<&[String]> {
        self.shared.var_names.as_deref()
    }

    /// The store the dataset is read from.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    /// The obs sidecar (per-cell metadata), when the dataset has one.
    pub fn obs(&self) -> Option<&ObsReader> {
        self.shared.obs.as_ref()
    }

    /// The decode pool.
    pub fn engine(&self) -> &Engine {
        &self.shared.engine
    }

    /// The I/O stage fetching this dataset's tiles.
    pub fn fetcher(&self) -> &Fetcher {
        &self.shared.fetcher
    }

    /// Starts fetching `tiles` on the I/O stage, so that a read that needs
    /// them soon finds them fetched: a scan or a loader calls this with what
    /// comes next. A hint: tiles beyond the stage's bound are not fetched ahead.
    pub fn prefetch(&self, tiles: impl IntoIterator<Item = usize>) {
        for t in tiles.into_iter().filter(|&t| t < self.n_tiles()) {
            self.shared.fetcher.prefetch(&Manifest::tile_key(t));
        }
    }

    /// The cells of tile `t`.
    pub fn tile_cells(&self, t: usize) -> Result<std::ops::Range<u64>> {
        if t >= self.n_tiles() {
            return Err(Error::Input(format!(
                "tile {t} is outside 0..{}",
                self.n_tiles()
            )));
        }
        Ok(self.shared.limits[t]..self.shared.limits[t + 1])
    }

    /// Tile and local row of global cell `cell`.
    pub fn locate(&self, cell: u64) -> Result<(usize, usize)> {
        if cell >= self.n_cells() {
            return Err(read::outside(cell, self.n_cells()));
        }
        let tile = self.limits().partition_point(|&l| l <= cell) - 1;
        Ok((tile, (cell - self.limits()[tile]) as usize))
    }

    /// Checks everything: every tile's size, structure, CRC and header against
    /// the manifest, and a full decode of every chunk (tiles in parallel); then
    /// the obs shards in full ([`ObsReader::verify`]) and var.parquet's rows.
    pub fn verify(&self) -> Result<VerifyReport> {
        use rayon::prelude::*;
        let n = self.n_tiles();
        let group = self.shared.fetcher.in_flight();
        let mut per_tile: Vec<(u64, u64, u64)> = Vec::with_capacity(n);
        for first in (0..n).step_by(group) {
            let tiles = first..(first + group).min(n);
            self.prefetch(tiles.end..tiles.end + group);
            let fetched = self.fetch_group(tiles.clone())?;
            let part: Vec<(u64, u64, u64)> = self.shared.engine.install(|| {
                tiles
                    .into_par_iter()
                    .zip(&fetched)
                    .map(|(t, tile)| {
                        let view = TileView::revalidated(tile.bytes.as_bytes())?;
                        let mut dec = ChunkDecoder::for_backend(self.shared.engine.backend())?;
                        dec.decode_tile_to_csr::<i32>(&view).map_err(in_tile(t))?;
                        Ok((
                            view.n_cells() as u64,
                            view.nnz() as u64,
                            tile.bytes.len() as u64,
                        ))
                    })
                    .collect::<Result<_>>()
            })?;
            per_tile.extend(part);
        }
        if let Some(obs) = self.obs() {
            obs.verify()?;
        }
        if self.shared.manifest.has_var_table {
            crate::obs::read_var_table(self.shared.store.as_ref(), self.n_genes())?;
        }
        Ok(per_tile.iter().fold(
            VerifyReport {
                tiles: per_tile.len(),
                ..VerifyReport::default()
            },
            |r, &(c, n, b)| VerifyReport {
                cells: r.cells + c,
                nonzeros: r.nonzeros + n,
                bytes: r.bytes + b,
                ..r
            },
        ))
    }
}

impl Dataset {
    /// `var.parquet` as an Arrow table, when the dataset has one.
    pub fn var_table(&self) -> Result<Option<VarFrame>> {
        if !self.manifest().has_var_table {
            return Ok(None);
        }
        crate::obs::read_var_table(self.store().as_ref(), self.n_genes()).map(Some)
    }
}

/// Why `store` has no manifest, by what it holds: objects (a dataset whose
/// writer has not finished), nothing (no dataset there), or an error listing
/// it, such as a bucket that does not exist, which a GET of the manifest
/// reports as a missing object like any other. A store that cannot list
/// (plain HTTP) is taken to hold an unfinished dataset.
fn missing_manifest(store: &dyn Store) -> Error {
    let location = store.describe();
    if store.is_remote() && location.ends_with(".json") {
        // A corpus file named by its URL: corpus files are read locally.
        return Error::Input(format!(
            "{location}: no dataset there; a corpus file is read from a local path \
             (copy it out of the bucket: its members may stay there)"
        ));
    }
    match store.list("") {
        Ok(keys) if keys.is_empty() => DatasetRule::NothingStored(store.describe()).into(),
        Ok(_) => DatasetRule::ManifestMissing(store.describe()).into(),
        Err(Error::Io { error, .. }) if error.kind() == std::io::ErrorKind::Unsupported => {
            DatasetRule::ManifestMissing(store.describe()).into()
        }
        Err(e) => e,
    }
}

fn read_gene_order(store: &dyn Store, n_genes: u32) -> Result<Vec<i32>> {
    let bad = |msg: String| Error::from(DatasetRule::GeneOrder(msg));
    let bytes = store
        .get("gene_order.npy")?
        .ok_or_else(|| bad("has_gene_order is true but the file is missing".into()))?;
    let array = Array::parse(bytes.as_bytes()).map_err(|e| bad(e.to_string()))?;
    if array.dtype != Dtype::I32 {
        return Err(bad(format!(
            "dtype {:?}, the spec says int32 (<i4)",
            array.dtype
        )));
    }
    if array.shape.len() != 1 || array.len() != n_genes as usize {
        return Err(bad(format!(
            "shape {:?}, expected ({n_genes},)",
            array.shape
        )));
    }
    let order = array.to_i32().map_err(|e| bad(e.to_string()))?;
    let mut seen = std::collections::HashSet::with_capacity(order.len());
    if let Some(bad_entry) = order.iter().find(|&&g| g < 0 || !seen.insert(g)) {
        return Err(bad(format!(
            "entry {bad_entry} is negative or repeated: entries are distinct source columns"
        )));
    }
    Ok(order)
}

fn read_var_names(store: &dyn Store, n_genes: u32) -> Result<Vec<String>> {
    let bad = |msg: String| Error::from(DatasetRule::VarNames(msg));
    let bytes = store
        .get("var_names.txt")?
        .ok_or_else(|| bad("has_var_names is true but the file is missing".into()))?;
    let text = std::str::from_utf8(bytes.as_bytes()).map_err(|e| bad(format!("not UTF-8: {e}")))?;
    let names: Vec<String> = text
        .strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .map(|l| l.trim_end_matches('\r').to_string())
        .collect();
    let names = if text.is_empty() { Vec::new() } else { names };
    if names.len() != n_genes as usize {
        return Err(bad(format!("{} lines for {n_genes} genes", names.len())));
    }
    Ok(names)
}

crate::setters!(OpenOptions {
    /// Sets [`OpenOptions::engine`].
    with_engine: engine: EngineConfig,
    /// Sets [`OpenOptions::cache_bytes`].
    with_cache_bytes: cache_bytes: usize,
    /// Sets [`OpenOptions::fetch_in_flight`].
    with_fetch_in_flight: fetch_in_flight: usize,
});

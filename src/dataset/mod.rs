//! Datasets: a directory (or bucket prefix) of tiles plus `manifest.json`.
//!
//! [`Dataset::open`] reads and checks the manifest and the side files; tiles
//! are fetched through a [`Store`] when first needed, checked against the
//! manifest, and decoded on the pinned [`Engine`] pool. Reads return CSR or
//! dense rows for any cells; [`Dataset::batches`] yields reproducible training
//! batches split across ranks.

mod batches;
mod cache;
pub mod ingest;
mod ranged;
mod read;
mod scatter;
mod select;
mod window;
mod writer;

use std::ffi::OsStr;
use std::sync::Arc;

pub use crate::storage::{AlignedBytes, LocalStore, MemoryStore, Store};
pub use batches::{Batch, BatchConfig, BatchIter, BatchRows, Shuffle};
pub use read::{CsrBatch, DenseBatch, ReadStats};
pub use scatter::Recycler;
pub use select::GeneSelection;
pub use writer::{DatasetWriter, WriterConfig, DEFAULT_TILE_SIZE};

use crate::csr::Csr;
use crate::engine::{ChunkDecoder, Engine, EngineConfig};
use crate::error::{Error, Result};
use crate::format::manifest::{DatasetRule, Manifest};
use crate::format::npy::{Array, Dtype};
use crate::format::tile::TileView;
use crate::kernels::DecodedCount;
use crate::obs::{Labels, LocalObs, ObsReader, VarFrame};
use crate::storage::{Fetcher, Location};

use crate::engine::plan::CellRuns;
use cache::{ChunkCache, TileBytes};

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

/// An open dataset.
pub struct Dataset {
    store: Arc<dyn Store>,
    manifest: Manifest,
    limits: Vec<u64>,
    gene_order: Option<Vec<i32>>,
    var_names: Option<Vec<String>>,
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
        let bytes = store
            .get(MANIFEST_KEY)?
            .ok_or_else(|| DatasetRule::ManifestMissing(store.describe()))?;
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
        Ok(Dataset {
            fetcher: Fetcher::new(store.clone(), options.fetch_in_flight)?,
            store,
            manifest,
            limits,
            gene_order,
            var_names,
            engine: Arc::new(Engine::new(options.engine)?),
            cache: ChunkCache::new(options.cache_bytes),
            obs,
        })
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Number of cells.
    pub fn n_cells(&self) -> u64 {
        self.manifest.n_cells
    }

    /// Number of genes (output columns).
    pub fn n_genes(&self) -> u32 {
        self.manifest.n_genes
    }

    /// Number of tiles.
    pub fn n_tiles(&self) -> usize {
        self.manifest.n_tiles()
    }

    /// First global cell of each tile, plus `n_cells` at the end.
    pub fn limits(&self) -> &[u64] {
        &self.limits
    }

    /// `gene_order.npy`: output column `j` was column `gene_order[j]` of the source.
    pub fn gene_order(&self) -> Option<&[i32]> {
        self.gene_order.as_deref()
    }

    /// `var_names.txt`: gene names in output column order.
    pub fn var_names(&self) -> Option<&[String]> {
        self.var_names.as_deref()
    }

    /// The store the dataset is read from.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The obs sidecar (per-cell metadata), when the dataset has one.
    pub fn obs(&self) -> Option<&ObsReader> {
        self.obs.as_ref()
    }

    /// The decode pool.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The I/O stage fetching this dataset's tiles.
    pub fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// Starts fetching `tiles` on the I/O stage, so that a read that needs
    /// them soon finds them fetched: a scan or a loader calls this with what
    /// comes next. A hint: tiles beyond the stage's bound are not fetched ahead.
    pub fn prefetch(&self, tiles: impl IntoIterator<Item = usize>) {
        for t in tiles.into_iter().filter(|&t| t < self.n_tiles()) {
            self.fetcher.prefetch(&Manifest::tile_key(t));
        }
    }

    /// Fetches `tiles` on the I/O stage (taking prefetched ones) and checks
    /// them on the pool.
    pub(crate) fn fetch_group(&self, tiles: std::ops::Range<usize>) -> Result<Vec<TileBytes>> {
        use rayon::prelude::*;
        let keys: Vec<String> = tiles.clone().map(Manifest::tile_key).collect();
        let objects = self.fetcher.get_many(&keys);
        self.engine.install(|| {
            tiles
                .into_par_iter()
                .zip(objects)
                .map(|(t, object)| self.check_tile(t, object?))
                .collect()
        })
    }

    /// Checks fetched tile `t`: size against the manifest, every structural
    /// rule, and the header against the manifest's counts.
    pub(crate) fn check_tile(&self, t: usize, bytes: Option<AlignedBytes>) -> Result<TileBytes> {
        let bytes = bytes.ok_or_else(|| DatasetRule::TileMissing {
            tile: t,
            key: Manifest::tile_key(t),
        })?;
        self.check_view(t, bytes.as_bytes(), true)?;
        Ok(TileBytes { bytes })
    }

    /// Checks the bytes of tile `t` (`whole`: every byte is there, CRC
    /// included; else see [`TileView::parse_partial`]) against the manifest.
    pub(crate) fn check_view<'b>(
        &self,
        t: usize,
        bytes: &'b [u8],
        whole: bool,
    ) -> Result<TileView<'b>> {
        let expected = self.manifest.tile_bytes[t];
        if bytes.len() as u64 != expected {
            return Err(DatasetRule::TileBytes {
                tile: t,
                manifest: expected,
                actual: bytes.len() as u64,
            }
            .into());
        }
        let parsed = if whole {
            TileView::parse(bytes)
        } else {
            TileView::parse_partial(bytes)
        };
        let view = parsed.map_err(|e| Error::InTile {
            tile: t,
            source: Box::new(e.into()),
        })?;
        let m = &self.manifest;
        let problem = if view.n_cells() as u64 != m.tile_cells[t] {
            Some(format!(
                "{} cells, manifest says {}",
                view.n_cells(),
                m.tile_cells[t]
            ))
        } else if view.nnz() as u64 != m.tile_nnz[t] {
            Some(format!(
                "{} nonzeros, manifest says {}",
                view.nnz(),
                m.tile_nnz[t]
            ))
        } else if view.n_genes() != m.n_genes {
            Some(format!(
                "{} genes, manifest says {}",
                view.n_genes(),
                m.n_genes
            ))
        } else {
            None
        };
        match problem {
            Some(problem) => Err(DatasetRule::TileHeader { tile: t, problem }.into()),
            None => Ok(view),
        }
    }

    /// Reads `cells` (any order, duplicates allowed; order kept) as CSR rows.
    pub fn read_cells<V: DecodedCount>(&self, cells: &[u64]) -> Result<CsrBatch<V>> {
        self.read_cells_genes(cells, None)
    }

    /// Reads `cells` keeping only the selected genes (renumbered `0..k`).
    pub fn read_cells_genes<V: DecodedCount>(
        &self,
        cells: &[u64],
        genes: Option<&GeneSelection>,
    ) -> Result<CsrBatch<V>> {
        self.check_selection(genes)?;
        self.read_csr_with(&CellRuns::list(cells), genes, &self.cache)
    }

    /// Reads the cells `range` as CSR rows.
    pub fn read_range<V: DecodedCount>(
        &self,
        range: std::ops::Range<u64>,
        genes: Option<&GeneSelection>,
    ) -> Result<CsrBatch<V>> {
        if range.end > self.n_cells() || range.start > range.end {
            return Err(Error::Input(format!(
                "cell range {range:?} is outside 0..{}",
                self.n_cells()
            )));
        }
        self.check_selection(genes)?;
        self.read_csr_with(&CellRuns::range(range.start, range.end), genes, &self.cache)
    }

    /// Reads the cells `range` into `out`, reusing its allocations: the way to
    /// scan a dataset tile group after tile group without allocating per read.
    pub fn read_range_into<V: DecodedCount>(
        &self,
        range: std::ops::Range<u64>,
        genes: Option<&GeneSelection>,
        out: &mut Csr<V>,
    ) -> Result<ReadStats> {
        if range.end > self.n_cells() || range.start > range.end {
            return Err(Error::Input(format!(
                "cell range {range:?} is outside 0..{}",
                self.n_cells()
            )));
        }
        self.check_selection(genes)?;
        self.read_csr_into(
            &CellRuns::range(range.start, range.end),
            genes,
            &self.cache,
            out,
        )
    }

    /// The cells of tile `t`.
    pub fn tile_cells(&self, t: usize) -> Result<std::ops::Range<u64>> {
        if t >= self.n_tiles() {
            return Err(Error::Input(format!(
                "tile {t} is outside 0..{}",
                self.n_tiles()
            )));
        }
        Ok(self.limits[t]..self.limits[t + 1])
    }

    /// Reads every cell of tile `t`.
    pub fn read_tile<V: DecodedCount>(
        &self,
        t: usize,
        genes: Option<&GeneSelection>,
    ) -> Result<CsrBatch<V>> {
        self.read_range(self.tile_cells(t)?, genes)
    }

    /// Reads `cells` as dense `f32` rows.
    pub fn read_dense(&self, cells: &[u64], genes: Option<&GeneSelection>) -> Result<DenseBatch> {
        self.check_selection(genes)?;
        self.read_dense_with(&CellRuns::list(cells), genes, &self.cache)
    }

    fn check_selection(&self, genes: Option<&GeneSelection>) -> Result<()> {
        match genes {
            Some(s) if s.n_genes() != self.n_genes() as usize => Err(Error::Input(format!(
                "gene selection built for {} genes, the dataset has {}",
                s.n_genes(),
                self.n_genes()
            ))),
            _ => Ok(()),
        }
    }

    /// Checks everything: every tile's size, structure, CRC and header against
    /// the manifest, and a full decode of every chunk (tiles in parallel); then
    /// the obs shards in full ([`ObsReader::verify`]) and var.parquet's rows.
    pub fn verify(&self) -> Result<VerifyReport> {
        use rayon::prelude::*;
        let n = self.n_tiles();
        let group = self.fetcher.in_flight();
        let mut per_tile: Vec<(u64, u64, u64)> = Vec::with_capacity(n);
        for first in (0..n).step_by(group) {
            let tiles = first..(first + group).min(n);
            self.prefetch(tiles.end..tiles.end + group);
            let fetched = self.fetch_group(tiles.clone())?;
            let part: Vec<(u64, u64, u64)> = self.engine.install(|| {
                tiles
                    .into_par_iter()
                    .zip(&fetched)
                    .map(|(t, tile)| {
                        let view = TileView::revalidated(tile.bytes.as_bytes())?;
                        let mut dec = ChunkDecoder::with_backend(self.engine.backend())?;
                        dec.decode_tile_to_csr::<i32>(&view)
                            .map_err(|e| Error::InTile {
                                tile: t,
                                source: Box::new(e),
                            })?;
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
        if let Some(obs) = &self.obs {
            obs.verify()?;
        }
        if self.manifest.has_var_table {
            crate::obs::read_var_table(self.store.as_ref(), self.n_genes())?;
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
    /// Reads `cells` as CSR rows together with their labels from `obs` (made
    /// by [`crate::obs::ObsReader::localize`]), both in request order.
    pub fn read_cells_with_labels<V: DecodedCount>(
        &self,
        cells: &[u64],
        genes: Option<&GeneSelection>,
        obs: &LocalObs,
    ) -> Result<(CsrBatch<V>, Labels)> {
        let labels = obs.labels(cells)?;
        Ok((self.read_cells_genes(cells, genes)?, labels))
    }

    /// `var.parquet` as an Arrow table, when the dataset has one.
    pub fn var_table(&self) -> Result<Option<VarFrame>> {
        if !self.manifest().has_var_table {
            return Ok(None);
        }
        crate::obs::read_var_table(self.store().as_ref(), self.n_genes()).map(Some)
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

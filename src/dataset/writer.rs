//! Writing datasets: CSR blocks in, tiles out as they fill, manifest last.
//!
//! Every object is written with an atomic [`Store::put`] (a temporary file
//! and a rename locally, one PUT or a completed multipart upload remotely),
//! and `manifest.json` is written after everything else, once the other
//! objects are durable ([`Store::sync`]): a writer that stops half-way (an
//! error, a crash, a dropped writer, a power loss) leaves a location without
//! a manifest, which readers report as incomplete, and never a partial object
//! under a final name. A writer holds the store's lock from `create` to the
//! end, so two writers never interleave in one directory. Full tiles are
//! encoded in parallel (zstd at high levels is the slow part of writing) and
//! uploaded as they fill.

use std::ffi::OsStr;
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::{Map, Value};

use crate::csr::{Csr, CsrRef};
use crate::dataset::packer::TilePacker;
use crate::error::{Error, Result};
use crate::format::manifest::Manifest;
use crate::format::npy::Array;
use crate::format::tile_writer::{CountSource, TileEncoder, DEFAULT_CHUNKS, DEFAULT_LEVEL};
use crate::obs::{encode_obs, ObsConfig, VarTable};
use crate::storage::{Location, Store, StoreLock};

/// Default cells per tile.
pub const DEFAULT_TILE_SIZE: usize = 4096;

/// How to write a dataset.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WriterConfig {
    /// Cells per tile (every tile but the last holds exactly this many).
    pub tile_size: usize,
    /// Chunks per tile.
    pub n_chunks: usize,
    /// zstd level.
    pub level: i32,
    /// Total count of each source gene: when given, output columns are the
    /// genes sorted by decreasing total (ties by source column) and
    /// `gene_order.npy` records the order. Small gaps compress better.
    pub gene_totals: Option<Vec<f64>>,
    /// Gene names in source column order (written in output order).
    pub var_names: Option<Vec<String>>,
    /// Free-form metadata for the manifest.
    pub metadata: Map<String, Value>,
    /// Per-cell metadata: one value per cell in push order, written as obs
    /// shards of one row group per tile.
    pub obs: Option<ObsConfig>,
    /// The gene table in source column order, written as `var.parquet` in
    /// output column order.
    pub var_table: Option<VarTable>,
    /// Tiles encoded at once (memory: about 8 bytes per nonzero per tile).
    pub parallel_tiles: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            tile_size: DEFAULT_TILE_SIZE,
            n_chunks: DEFAULT_CHUNKS,
            level: DEFAULT_LEVEL,
            gene_totals: None,
            var_names: None,
            metadata: Map::new(),
            obs: None,
            var_table: None,
            parallel_tiles: rayon::current_num_threads().max(1),
        }
    }
}

/// The output column order that sorts genes by decreasing `totals` (ties by
/// source column): `order[j]` is the source column of output column `j`, and
/// `rank[g]` the output column of source column `g`.
pub(crate) fn order_by_totals(totals: &[f64]) -> (Vec<i32>, Vec<i32>) {
    let mut order: Vec<i32> = (0..totals.len() as i32).collect();
    order.sort_by(|&a, &b| {
        totals[b as usize]
            .total_cmp(&totals[a as usize])
            .then(a.cmp(&b))
    });
    let mut rank = vec![0i32; totals.len()];
    for (j, &g) in order.iter().enumerate() {
        rank[g as usize] = j as i32;
    }
    (order, rank)
}

/// Streams CSR blocks into a new dataset.
pub struct DatasetWriter {
    store: Arc<dyn Store>,
    /// The store's writer lock, held for the writer's life.
    _lock: StoreLock,
    config: WriterConfig,
    n_genes: u32,
    /// `gene_order[j]` = source column of output column `j`.
    gene_order: Option<Vec<i32>>,
    /// Rows in, tiles out.
    packer: TilePacker,
    /// Full tiles waiting to be encoded together.
    full: Vec<Csr<u32>>,
    tile_cells: Vec<u64>,
    tile_nnz: Vec<u64>,
    tile_bytes: Vec<u64>,
    /// What made a push fail: part of its block may be in the tiles, so
    /// the writer refuses to go on (see [`DatasetWriter::push`]).
    failed: Option<String>,
}

impl std::fmt::Debug for DatasetWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetWriter")
            .field("store", &self.store.describe())
            .field("n_genes", &self.n_genes)
            .field("cells_written", &self.packer.cells_in())
            .finish_non_exhaustive()
    }
}

impl DatasetWriter {
    /// Starts a dataset of `n_genes` genes at `location`: a directory (created
    /// if needed) or a URL such as `s3://bucket/prefix` (see [`Location::parse`]).
    pub fn create(
        location: impl AsRef<OsStr>,
        n_genes: u32,
        config: WriterConfig,
    ) -> Result<DatasetWriter> {
        DatasetWriter::create_in(Location::parse(location).store()?, n_genes, config)
    }

    /// Starts a dataset of `n_genes` genes in `store`. Refuses a store that
    /// already holds a manifest (a complete dataset is never overwritten in
    /// place) or whose lock another writer holds.
    pub fn create_in(
        store: Arc<dyn Store>,
        n_genes: u32,
        config: WriterConfig,
    ) -> Result<DatasetWriter> {
        if n_genes == 0 || n_genes > 1 << 31 {
            return Err(Error::Input(format!(
                "n_genes {n_genes} is outside 1..=2^31"
            )));
        }
        if config.tile_size == 0 {
            return Err(Error::Input("tile_size must be at least 1".into()));
        }
        if config.n_chunks == 0 {
            // The manifest records it; the tiles would have had chunks.
            return Err(Error::Input("n_chunks must be at least 1".into()));
        }
        crate::format::zstd::check_level(config.level)?;
        if let Some(table) = config
            .var_table
            .as_ref()
            .filter(|t| t.len() != n_genes as usize)
        {
            return Err(Error::Input(format!(
                "var table of {} rows for {n_genes} genes",
                table.len()
            )));
        }
        if let Some(names) = &config.var_names {
            if names.len() != n_genes as usize {
                return Err(Error::Input(format!(
                    "{} var_names for {n_genes} genes",
                    names.len()
                )));
            }
            check_var_names(names)?;
        }
        let (gene_order, rank) = match &config.gene_totals {
            None => (None, None),
            Some(totals) if totals.len() != n_genes as usize => {
                return Err(Error::Input(format!(
                    "{} gene totals for {n_genes} genes",
                    totals.len()
                )));
            }
            Some(totals) => {
                let (order, rank) = order_by_totals(totals);
                (Some(order), Some(rank))
            }
        };
        let lock = store.lock_exclusive()?;
        if store.size(crate::dataset::MANIFEST_KEY)?.is_some() {
            return Err(Error::Input(format!(
                "{} already holds a dataset (manifest.json exists)",
                store.describe()
            )));
        }
        Ok(DatasetWriter {
            store,
            _lock: lock,
            n_genes,
            packer: TilePacker::new(n_genes, rank, n_genes, config.tile_size),
            config,
            gene_order,
            full: Vec::new(),
            tile_cells: vec![],
            tile_nnz: vec![],
            tile_bytes: vec![],
            failed: None,
        })
    }

    /// Refuses to go on after a failed push.
    fn check_not_failed(&self) -> Result<()> {
        if let Some(why) = &self.failed {
            return Err(Error::Input(format!(
                "an earlier push to this writer failed ({why}), and part of its block may \
                 have been taken: the dataset cannot be finished; write it again"
            )));
        }
        Ok(())
    }

    /// The output column order (`gene_order[j]` = source column), when sorting.
    pub fn gene_order(&self) -> Option<&[i32]> {
        self.gene_order.as_deref()
    }

    /// Cells received so far.
    pub fn cells_written(&self) -> u64 {
        self.packer.cells_in()
    }

    /// Appends a block of cells (any number of rows; columns are source genes).
    ///
    /// A block refused (a value that is not a count, a column past `n_genes`,
    /// a malformed `indptr`) may have been taken in part, so after any failed
    /// push every later push and [`DatasetWriter::finish`] fail too, naming
    /// that failure, and no manifest is written: the dataset is written again
    /// from the start.
    pub fn push<V: CountSource>(&mut self, block: CsrRef<'_, V>) -> Result<()> {
        self.check_not_failed()?;
        let pushed = self.push_block(block);
        if let Err(e) = &pushed {
            self.failed = Some(e.to_string());
        }
        pushed
    }

    fn push_block<V: CountSource>(&mut self, block: CsrRef<'_, V>) -> Result<()> {
        let mut full = std::mem::take(&mut self.full);
        let packed = self.packer.push(block, |tile| {
            full.push(tile);
            Ok(())
        });
        self.full = full;
        packed?;
        if self.full.len() >= self.config.parallel_tiles.max(1) {
            self.flush_full()?;
        }
        Ok(())
    }

    /// Encodes the full tiles in parallel and writes them in order.
    fn flush_full(&mut self) -> Result<()> {
        let (chunks, level) = (self.config.n_chunks, self.config.level);
        let encoded: Vec<Vec<u8>> = self
            .full
            .par_iter()
            .map_init(
                || TileEncoder::new().with_chunks(chunks).with_level(level),
                |enc, block| enc.encode(block.as_ref()),
            )
            .collect::<Result<_, _>>()?;
        for (block, bytes) in self.full.drain(..).zip(encoded) {
            let t = self.tile_cells.len();
            self.store.put(&Manifest::tile_key(t), &bytes)?;
            self.tile_cells.push(block.n_rows() as u64);
            self.tile_nnz.push(block.nnz() as u64);
            self.tile_bytes.push(bytes.len() as u64);
        }
        Ok(())
    }

    /// Writes the last tile, the side files and, last, the manifest.
    pub fn finish(mut self) -> Result<Manifest> {
        self.check_not_failed()?;
        if let Some(last) = self.packer.take_partial() {
            self.full.push(last);
        }
        self.flush_full()?;
        put_side_files(
            self.store.as_ref(),
            self.gene_order.as_deref(),
            self.config.var_names.as_deref(),
            self.config.var_table.as_ref(),
        )?;
        let obs = match &self.config.obs {
            None => None,
            Some(config) => {
                let files = encode_obs(config, &self.tile_cells)?;
                for (s, shard) in files.shards.iter().enumerate() {
                    self.store.put(&crate::obs::shard_key(s), shard)?;
                }
                self.store
                    .put(crate::obs::SCHEMA_KEY, files.schema_json.as_bytes())?;
                self.store.sync("obs")?;
                Some(files.manifest)
            }
        };
        let manifest = Manifest {
            n_cells: self.packer.cells_in(),
            n_genes: self.n_genes,
            tile_size: self.config.tile_size as u64,
            tile_cells: std::mem::take(&mut self.tile_cells),
            tile_nnz: std::mem::take(&mut self.tile_nnz),
            tile_bytes: std::mem::take(&mut self.tile_bytes),
            n_chunks: self.config.n_chunks as u64,
            zstd_level: i64::from(self.config.level),
            has_gene_order: self.gene_order.is_some(),
            has_var_names: self.config.var_names.is_some(),
            has_var_table: self.config.var_table.is_some(),
            obs,
            metadata: self.config.metadata.clone(),
        };
        put_manifest(self.store.as_ref(), &manifest)?;
        Ok(manifest)
    }
}

/// Refuses gene names `var_names.txt` cannot hold: one name a line, so a
/// name with a line break would read back as two genes.
pub(crate) fn check_var_names(names: &[String]) -> Result<()> {
    match names.iter().find(|n| n.contains(['\n', '\r'])) {
        Some(bad) => Err(Error::Input(format!(
            "gene name {bad:?} contains a line break"
        ))),
        None => Ok(()),
    }
}

/// Writes `gene_order.npy`, `var_names.txt` (the names, given in source
/// column order, written in output order) and `var.parquet`, each when given.
pub(crate) fn put_side_files(
    store: &dyn Store,
    gene_order: Option<&[i32]>,
    var_names: Option<&[String]>,
    var_table: Option<&VarTable>,
) -> Result<()> {
    if let Some(order) = gene_order {
        store.put("gene_order.npy", &Array::from_i32(order).to_npy())?;
    }
    if let Some(names) = var_names {
        let mut text = String::new();
        for j in 0..names.len() {
            let source = gene_order.map_or(j, |o| o[j] as usize);
            text.push_str(&names[source]);
            text.push('\n');
        }
        store.put("var_names.txt", text.as_bytes())?;
    }
    if let Some(table) = var_table {
        store.put(crate::obs::VAR_KEY, &table.to_parquet(gene_order)?)?;
    }
    Ok(())
}

/// Checks `manifest` and writes it, last: everything it names is made durable
/// first, and the manifest before this returns.
pub(crate) fn put_manifest(store: &dyn Store, manifest: &Manifest) -> Result<()> {
    manifest.validate()?;
    // Everything the manifest names must survive a power loss before
    // the manifest itself appears, and the manifest before we return.
    if !manifest.tile_cells.is_empty() {
        store.sync("tiles")?;
    }
    store.sync("")?;
    store.put(crate::dataset::MANIFEST_KEY, &manifest.to_json())?;
    store.sync("")
}

crate::setters!(WriterConfig {
    /// Sets [`WriterConfig::tile_size`].
    with_tile_size: tile_size: usize,
    /// Sets [`WriterConfig::n_chunks`].
    with_n_chunks: n_chunks: usize,
    /// Sets [`WriterConfig::level`].
    with_level: level: i32,
    /// Sets [`WriterConfig::gene_totals`].
    with_gene_totals: gene_totals: Option<Vec<f64>>,
    /// Sets [`WriterConfig::var_names`].
    with_var_names: var_names: Option<Vec<String>>,
    /// Sets [`WriterConfig::metadata`].
    with_metadata: metadata: Map<String, Value>,
    /// Sets [`WriterConfig::obs`].
    with_obs: obs: Option<ObsConfig>,
    /// Sets [`WriterConfig::var_table`].
    with_var_table: var_table: Option<VarTable>,
    /// Sets [`WriterConfig::parallel_tiles`].
    with_parallel_tiles: parallel_tiles: usize,
});

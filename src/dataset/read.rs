//! Reading any cells: one request, planned, fetched, executed into a sink.
//!
//! [`Dataset::read`] takes a [`CellSelection`] and returns a [`Read`]: a gene
//! selection, a transform ([`Read::normalize`], [`Read::log1p`]: see
//! [`crate::engine::Transform`] for the formulas) and the cache are options
//! of the request, and its output is chosen last ([`Read::csr`], [`Read::dense`], [`Read::csr_into`] or any
//! [`Sink`] with [`Read::into_sink`]). Every read goes the same way:
//!
//! 1. *plan* the tiles: the selection cut at the manifest's tile limits;
//! 2. *fetch* them on the I/O stage (whole, or for a few cells on a remote
//!    store only the chunks holding them), checked against the manifest;
//! 3. *plan* the segments from the tiles' chunk tables, and decode the
//!    chunks the copied segments need (or take them from the cache);
//! 4. *execute* the segments into the sink on the pinned pool.

use std::collections::HashMap;
use std::sync::Arc;

use crate::csr::Csr;
use crate::dataset::cache::{ChunkCache, TileBytes};
use crate::dataset::tiles::{read_outputs, Through};
use crate::dataset::Dataset;
use crate::engine::decoded::{DecodedChunk, Unit};
use crate::engine::execute::Sources;
use crate::engine::plan::{pieces, Piece, Policy, ReadPlan};
use crate::engine::{
    CellSelection, Dense, GeneSelection, Selected, Sink, Transform, Transformed, TransformedCsr,
    ValueSink,
};
use crate::error::{Error, Result};
use crate::format::tile::TileView;
use crate::kernels::DecodedCount;

/// What a read cost: the figure to watch for random access.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Tiles read from the store (not found in the cache).
    pub tiles_fetched: usize,
    /// Distinct chunks holding the requested cells.
    pub chunks_touched: usize,
    /// Chunks decompressed and decoded for this read (cache misses).
    pub chunks_decoded: usize,
    /// Bytes requested from the store for this read.
    pub bytes_fetched: u64,
    /// Compressed bytes (frames) of the distinct chunks holding the requested
    /// cells: what `bytes_fetched` is to be compared with.
    pub chunk_bytes: u64,
}

impl ReadStats {
    /// Adds the costs of another read.
    pub(crate) fn add(&mut self, other: ReadStats) {
        self.tiles_fetched += other.tiles_fetched;
        self.chunks_touched += other.chunks_touched;
        self.chunks_decoded += other.chunks_decoded;
        self.bytes_fetched += other.bytes_fetched;
        self.chunk_bytes += other.chunk_bytes;
    }
}

/// Rows of cells in CSR form, with the global cell id of each row.
#[derive(Clone, Debug, PartialEq)]
pub struct CsrBatch<V> {
    /// Global cell id of each row, in request order.
    pub cells: Vec<u64>,
    /// The rows (columns are genes, or the selected genes renumbered).
    pub csr: Csr<V>,
    /// What the read cost.
    pub stats: ReadStats,
}

/// Rows of cells as a dense row-major matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseBatch<V> {
    /// Global cell id of each row, in request order.
    pub cells: Vec<u64>,
    /// The rows.
    pub rows: Dense<V>,
    /// What the read cost.
    pub stats: ReadStats,
}

/// A read request: cells, options, then the output (see the module docs).
/// Of a dataset (`Read<'_>`, from [`Dataset::read`]) or of a corpus
/// (`Read<'_, Corpus>`, from [`Corpus::read`](crate::Corpus::read)): the
/// options and the outputs are the same, only where the rows come from
/// differs ([`ReadSource`]).
#[must_use = "a read does nothing until its output is chosen"]
pub struct Read<'a, S: ReadSource = Dataset> {
    source: &'a S,
    cells: CellSelection,
    genes: Option<&'a GeneSelection>,
    transform: Transform,
    cached: bool,
}

/// What a [`Read`] reads from: a [`Dataset`], or a
/// [`Corpus`](crate::Corpus) whose members each read into the one output.
/// Sealed: implemented by those two only.
pub trait ReadSource: source::Source {}

impl<T: source::Source> ReadSource for T {}

/// The sealed half of [`ReadSource`]: what a read asks of its source.
pub(crate) mod source {
    use crate::dataset::{Dataset, ReadStats};
    use crate::engine::{CellSelection, GeneSelection};
    use crate::error::{Error, Result};

    /// What [`Source::each_group`] runs on each group of a read: a dataset,
    /// its cells (local to it) and its genes into the output's columns.
    pub type Groups<'r> =
        dyn FnMut(&Dataset, &CellSelection, Option<&GeneSelection>) -> Result<ReadStats> + 'r;

    /// See [`super::ReadSource`].
    pub trait Source {
        /// What the source is called in errors.
        const KIND: &'static str;

        /// Its genes: a dataset's, a corpus's vocabulary's.
        fn n_genes(&self) -> u32;

        /// Checks that `genes` was built for the source's genes.
        fn check_selection(&self, genes: &GeneSelection) -> Result<()> {
            if genes.n_genes() != self.n_genes() as usize {
                return Err(Error::Input(format!(
                    "gene selection built for {} genes, the {} has {}",
                    genes.n_genes(),
                    Self::KIND,
                    self.n_genes()
                )));
            }
            Ok(())
        }

        /// The output's columns for a read over `genes` (every gene when
        /// `None`), after checking that the selection was built for the
        /// source's genes.
        fn columns(&self, genes: Option<&GeneSelection>) -> Result<u32> {
            match genes {
                None => Ok(self.n_genes()),
                Some(g) => {
                    self.check_selection(g)?;
                    Ok(g.len() as u32)
                }
            }
        }

        /// Runs `read` on each dataset `cells` come from, in output order,
        /// with its local cells and its genes into the output's columns
        /// (`genes` composed with its own mapping), and sums what they cost.
        /// `cached`: whether the reads go through the datasets' caches (and
        /// so may be fetched ahead).
        fn each_group(
            &self,
            cells: &CellSelection,
            genes: Option<&GeneSelection>,
            cached: bool,
            read: &mut Groups<'_>,
        ) -> Result<ReadStats>;

        /// The source as one dataset, whose rows reach the output as
        /// stored: a transform over every gene then runs where each row
        /// is decoded.
        fn as_dataset(&self) -> Option<&Dataset>;
    }
}

impl source::Source for Dataset {
    const KIND: &'static str = "dataset";

    fn n_genes(&self) -> u32 {
        Dataset::n_genes(self)
    }

    fn each_group(
        &self,
        cells: &CellSelection,
        genes: Option<&GeneSelection>,
        _cached: bool,
        read: &mut source::Groups<'_>,
    ) -> Result<ReadStats> {
        read(self, cells, genes)
    }

    fn as_dataset(&self) -> Option<&Dataset> {
        Some(self)
    }
}

impl<'a, S: ReadSource> Read<'a, S> {
    /// A read of `cells` from `source`, with no options set.
    pub(crate) fn new(source: &'a S, cells: CellSelection) -> Read<'a, S> {
        Read {
            source,
            cells,
            genes: None,
            transform: Transform::NONE,
            cached: true,
        }
    }

    /// Keeps only the genes of `genes` (renumbered `0..k` in its order);
    /// `None` keeps every gene. A corpus's selection is of its
    /// vocabulary's genes.
    pub fn genes(mut self, genes: impl Into<Option<&'a GeneSelection>>) -> Read<'a, S> {
        self.genes = genes.into();
        self
    }

    /// Divides each cell by its total over all of its dataset's genes
    /// (before the gene selection, and for a corpus's cell before its
    /// member's mapping into the vocabulary, which may drop some) and
    /// multiplies by `target_sum`, as scanpy's `normalize_total`: the
    /// output holds `f32` values ([`Read::csr`]`::<f32>` or
    /// [`Read::dense`]`::<f32>`).
    pub fn normalize(mut self, target_sum: f64) -> Read<'a, S> {
        self.transform = self.transform.normalize(target_sum);
        self
    }

    /// Takes `ln(1 + x)` of every value (after normalizing), as scanpy's
    /// `log1p`: the output holds `f32` values.
    pub fn log1p(mut self) -> Read<'a, S> {
        self.transform = self.transform.log1p();
        self
    }

    /// Neither reads nor fills the caches: every tile is fetched and
    /// checked afresh, as in a scan of a dataset larger than the cache.
    pub fn uncached(mut self) -> Read<'a, S> {
        self.cached = false;
        self
    }

    /// The rows as CSR with counts of type `V` (`f32` or `i32`).
    pub fn csr<V: DecodedCount>(self) -> Result<CsrBatch<V>> {
        csr_batch(&self.cells, |out| self.csr_into(out))
    }

    /// The rows into `out`, reusing its allocations: a scan that reads tile
    /// after tile into one buffer allocates nothing once warm.
    pub fn csr_into<V: DecodedCount>(&self, out: &mut Csr<V>) -> Result<ReadStats> {
        if self.transform.is_identity() {
            return self.run(out);
        }
        let out = as_f32::<Csr<V>, Csr<f32>>(out)?;
        match (self.source.as_dataset(), self.genes) {
            // Every gene of one dataset: rows decode in place and are
            // transformed there.
            (Some(ds), None) => {
                self.transform.check()?;
                let mut sink = TransformedCsr::new(out, self.transform);
                sink.start(ds.n_genes());
                ds.read_started(&self.cells, None, self.cached, sink)
            }
            _ => self.run_transformed(out),
        }
    }

    /// The rows as dense row-major values of type `V` (all genes, or the
    /// selected ones in the selection's order).
    pub fn dense<V: DecodedCount>(self) -> Result<DenseBatch<V>> {
        dense_batch(&self.cells, |out| {
            if self.transform.is_identity() {
                return self.run(out);
            }
            self.run_transformed(as_f32::<Dense<V>, Dense<f32>>(out)?)
        })
    }

    /// The rows into any output (see [`Sink`]); with a gene selection, the
    /// output sees the selected genes only. Counts as stored: a transform
    /// writes into [`Read::csr`] or [`Read::dense`] outputs only.
    pub fn into_sink<K: Sink>(self, sink: K) -> Result<ReadStats> {
        if !self.transform.is_identity() {
            return Err(Error::Input(
                "a normalized or log1p read writes CSR or dense f32 rows, not a custom output"
                    .into(),
            ));
        }
        self.run(sink)
    }

    /// Whether the read normalizes or takes logs of the counts.
    pub(crate) fn transformed(&self) -> bool {
        !self.transform.is_identity()
    }

    /// The source, the cells, and whether a gene selection is set.
    pub(crate) fn request(&self) -> (&'a S, &CellSelection, bool) {
        (self.source, &self.cells, self.genes.is_some())
    }

    /// The rows as stored into `sink`, started once over the output's
    /// columns: each group appends its rows.
    fn run<K: Sink>(&self, mut sink: K) -> Result<ReadStats> {
        sink.start(self.source.columns(self.genes)?);
        self.source.each_group(
            &self.cells,
            self.genes,
            self.cached,
            &mut |ds, cells, genes| ds.read_started(cells, genes, self.cached, &mut sink),
        )
    }

    /// The transformed rows into `out`, started once: each group's rows
    /// reach it whole, over all of their dataset's genes (so each cell's
    /// total counts every one of them), and are selected (or mapped into
    /// the vocabulary's columns) and transformed there.
    fn run_transformed<K: ValueSink>(&self, mut out: K) -> Result<ReadStats> {
        self.transform.check()?;
        out.start_values(self.source.columns(self.genes)?);
        self.source.each_group(
            &self.cells,
            self.genes,
            self.cached,
            &mut |ds, cells, genes| {
                let sink = Transformed::new(&mut out, genes, self.transform);
                ds.read_started(cells, None, self.cached, sink)
            },
        )
    }
}

/// `out` as the `f32` output `F` a transformed read fills, or the error for
/// a request of counts of another type.
fn as_f32<O: std::any::Any, F: std::any::Any>(out: &mut O) -> Result<&mut F> {
    (out as &mut dyn std::any::Any)
        .downcast_mut::<F>()
        .ok_or_else(|| {
            Error::Input("normalized and log1p values are f32: read them as f32, not i32".into())
        })
}

impl Dataset {
    /// Reads `cells` into `sink`, already started (over the columns of
    /// `genes` when given, else the dataset's genes), after the rows it
    /// holds: a corpus reads its members one after another into one output.
    /// `cached`: through the dataset's cache, else fetched afresh.
    pub(crate) fn read_started<S: Sink>(
        &self,
        cells: &CellSelection,
        genes: Option<&GeneSelection>,
        cached: bool,
        sink: S,
    ) -> Result<ReadStats> {
        let uncached;
        let cache = if cached {
            &self.shared().cache
        } else {
            uncached = ChunkCache::new(0);
            &uncached
        };
        let outputs = std::slice::from_ref(cells);
        match genes {
            None => self.read_outputs(outputs, &mut [sink], cache, false),
            Some(g) => self.read_outputs(outputs, &mut [Selected::new(sink, g)], cache, false),
        }
    }
}

/// The CSR rows of `cells` that `read` puts into an empty output.
fn csr_batch<V: DecodedCount>(
    cells: &CellSelection,
    read: impl FnOnce(&mut Csr<V>) -> Result<ReadStats>,
) -> Result<CsrBatch<V>> {
    let mut csr = Csr::empty(0);
    let stats = read(&mut csr)?;
    Ok(CsrBatch {
        cells: cells.iter().collect(),
        csr,
        stats,
    })
}

/// The dense rows of `cells` that `read` puts into an empty output.
fn dense_batch<V: DecodedCount>(
    cells: &CellSelection,
    read: impl FnOnce(&mut Dense<V>) -> Result<ReadStats>,
) -> Result<DenseBatch<V>> {
    let mut rows = Dense::default();
    let stats = read(&mut rows)?;
    Ok(DenseBatch {
        cells: cells.iter().collect(),
        rows,
        stats,
    })
}

/// What a plan has fetched and decoded, shared read-only by its tasks.
#[derive(Default)]
pub(crate) struct Fetched {
    pub(crate) tiles: HashMap<usize, Arc<TileBytes>>,
    pub(crate) chunks: HashMap<Unit, Arc<DecodedChunk>>,
    /// Each fetched tile's chunk ends (every chunk's `cell_hi`, in order):
    /// the chunk holding a local cell is where it falls among them.
    pub(crate) ends: HashMap<usize, Vec<u64>>,
    /// The fetched tiles, sorted.
    sorted_tiles: Vec<usize>,
}

impl Fetched {
    /// Tiles `tiles` (fetched and checked), with their chunk ends.
    pub(crate) fn new(tiles: HashMap<usize, Arc<TileBytes>>) -> Fetched {
        let ends = tiles
            .iter()
            .map(|(&t, b)| {
                let view = TileView::revalidated(b.bytes.as_bytes()).expect("tiles were validated");
                (t, view.chunks().map(|c| c.cell_hi).collect())
            })
            .collect();
        let mut sorted: Vec<usize> = tiles.keys().copied().collect();
        sorted.sort_unstable();
        Fetched {
            tiles,
            chunks: HashMap::new(),
            ends,
            sorted_tiles: sorted,
        }
    }

    /// The plan of `pieces` (of `outputs` outputs) over these tiles.
    pub(crate) fn plan(&self, pieces: &[Piece], outputs: usize, policy: &Policy<'_>) -> ReadPlan {
        ReadPlan::new(
            pieces,
            outputs,
            &self.sorted_tiles,
            |t| &self.ends[&t],
            policy,
        )
    }
}

impl Sources for Fetched {
    fn view(&self, tile: usize) -> TileView<'_> {
        TileView::revalidated(self.tiles[&tile].bytes.as_bytes()).expect("tiles were validated")
    }

    fn decoded(&self, unit: Unit) -> &DecodedChunk {
        &self.chunks[&unit]
    }
}

impl Dataset {
    /// A read of `cells` (ids in any order, duplicates kept; a range; a
    /// mask): choose its options, then its output.
    ///
    /// ```
    /// # fn main() -> deltacells::Result<()> {
    /// # let dir = std::env::temp_dir().join(format!("deltacells-read-doc-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # let csr = deltacells::Csr { n_cols: 3, indptr: vec![0, 2, 3, 3], indices: vec![0, 2, 1], values: vec![4i32, 1, 7] };
    /// # let mut w = deltacells::dataset::DatasetWriter::create(&dir, 3, deltacells::dataset::WriterConfig::default())?;
    /// # w.push(csr.as_ref())?;
    /// # w.finish()?;
    /// use deltacells::GeneSelection;
    /// let ds = deltacells::open(&dir)?;
    /// let rows = ds.read([2, 0]).csr::<f32>()?;
    /// assert_eq!(rows.csr.indptr, [0, 0, 2]);
    /// let genes = GeneSelection::new(ds.n_genes(), &[2, 1])?;
    /// let dense = ds.read(0..2).genes(&genes).dense::<i32>()?;
    /// assert_eq!(dense.rows.data(), [1, 0, 0, 7]);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub fn read(&self, cells: impl Into<CellSelection>) -> Read<'_> {
        Read::new(self, cells.into())
    }

    /// Starts fetching the tiles of `cells` that the dataset's cache lacks
    /// and a read would fetch whole, for a read that comes after others (a
    /// corpus's next member).
    pub(crate) fn prefetch_cells(&self, cells: &CellSelection) {
        if cells.first_outside(self.n_cells()).is_some() {
            return;
        }
        let cache = &self.shared().cache;
        let mut wanted: HashMap<usize, usize> = HashMap::new();
        for p in pieces(cells, self.limits(), 0) {
            *wanted.entry(p.tile).or_default() += p.local.len();
        }
        let mut tiles: Vec<usize> = wanted
            .into_iter()
            .filter(|&(t, n)| !cache.has_tile(t) && !self.wants_ranges(t, n, cache.capacity()))
            .map(|(t, _)| t)
            .collect();
        tiles.sort_unstable();
        self.prefetch(tiles);
    }

    /// Reads `outputs` (one cell selection each) into `sinks` (started)
    /// through `cache` (see [`read_outputs`]).
    pub(crate) fn read_outputs<S: Sink>(
        &self,
        outputs: &[CellSelection],
        sinks: &mut [S],
        cache: &ChunkCache,
        scatter: bool,
    ) -> Result<ReadStats> {
        let tiles = Through {
            dataset: self,
            cache,
            remap: None,
        };
        read_outputs(&tiles, outputs, sinks, scatter)
    }
}

/// The error for a cell id past the dataset's end.
pub(crate) fn outside(cell: u64, n_cells: u64) -> Error {
    Error::Input(format!("cell {cell} is outside 0..{n_cells}"))
}

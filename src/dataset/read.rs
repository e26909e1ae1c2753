//! Reading any cells: plan first, then decode straight into the output.
//!
//! A request (cells in any order, duplicates allowed) is planned before any
//! decompression: which tiles and chunks it touches, and, from each tile's
//! indptr, where every row lands in the output. Runs of output rows that are
//! exactly one whole chunk in order (ranges, tiles, scans) are decoded by a
//! worker directly into their slice of the output; every other row is copied
//! from its chunk decoded once into a shared buffer (kept in the cache for the
//! next request). Tasks get disjoint slices of the output, so the fill runs in
//! parallel on the pinned pool without locks.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use crate::csr::Csr;
use crate::dataset::cache::{ChunkCache, DecodedChunk, TileBytes};
use crate::dataset::select::GeneSelection;
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::format::manifest::Manifest;
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

/// Rows of cells as a dense row-major `f32` matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseBatch {
    /// Global cell id of each row, in request order.
    pub cells: Vec<u64>,
    /// Columns per row.
    pub n_cols: usize,
    /// `cells.len() * n_cols` values, row-major.
    pub data: Vec<f32>,
    /// What the read cost.
    pub stats: ReadStats,
}

/// The cells a read asks for: a list (any order, duplicates allowed) or a
/// range. A range is never expanded into ids before its tiles are fetched and
/// checked, so a manifest that claims more cells than its tiles hold cannot
/// make a read allocate per claimed cell.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cells<'a> {
    List(&'a [u64]),
    Range(u64, u64),
}

impl<'a> Cells<'a> {
    fn iter(self) -> impl Iterator<Item = u64> + 'a {
        let (list, range) = match self {
            Cells::List(c) => (c, 0..0),
            Cells::Range(a, b) => (&[][..], a..b),
        };
        list.iter().copied().chain(range)
    }

    fn to_vec(self) -> Vec<u64> {
        self.iter().collect()
    }
}

impl<'a> From<&'a [u64]> for Cells<'a> {
    fn from(cells: &'a [u64]) -> Self {
        Cells::List(cells)
    }
}

/// Where one output row comes from.
#[derive(Clone, Copy, Debug)]
struct RowSource {
    tile: usize,
    chunk: usize,
    local: usize,
}

/// A unit of parallel work writing a contiguous run of output rows.
enum Run {
    /// Decode chunk `(tile, chunk)` straight into the run's slices.
    Direct { tile: usize, chunk: usize },
    /// Copy rows from decoded chunks.
    Gather,
}

/// Output target for one run: its rows and its slices of the output arrays.
struct Task<'o, V> {
    run: Run,
    rows: Range<usize>,
    indices: &'o mut [i32],
    values: &'o mut [V],
}

/// Target of nonzeros per gather task: big enough to amortise scheduling,
/// small enough to spread a batch over every worker.
const GATHER_TASK_NNZ: usize = 1 << 15;

/// What a plan has fetched and decoded, shared read-only by the fill tasks.
struct Sources {
    tiles: HashMap<usize, Arc<TileBytes>>,
    chunks: HashMap<(usize, usize), Arc<DecodedChunk>>,
}

/// A prepared read: what its tasks read, and the tasks with their slices of the output.
struct Fill<'o, V> {
    sources: Sources,
    rows: Vec<RowSource>,
    tasks: Vec<Task<'o, V>>,
}

/// A planned read: what it needs, where each row comes from, and the runs of
/// output rows that form the parallel tasks.
struct Plan {
    sources: Sources,
    rows: Vec<RowSource>,
    runs: Vec<(Run, Range<usize>)>,
}

impl Sources {
    fn view(&self, tile: usize) -> TileView<'_> {
        TileView::revalidated(self.tiles[&tile].bytes.as_bytes())
            .expect("cached tiles were validated")
    }
}

impl Dataset {
    /// Tile and local row of global cell `cell`.
    pub fn locate(&self, cell: u64) -> Result<(usize, usize)> {
        if cell >= self.manifest().n_cells {
            return Err(Error::Input(format!(
                "cell {cell} is outside 0..{}",
                self.manifest().n_cells
            )));
        }
        let tile = self.limits().partition_point(|&l| l <= cell) - 1;
        Ok((tile, (cell - self.limits()[tile]) as usize))
    }

    /// Fetches every tile in `tiles` that the cache lacks, whole, concurrently
    /// on the I/O stage.
    pub(crate) fn fetch_tiles(
        &self,
        tiles: &[usize],
        cache: &ChunkCache,
        stats: &mut ReadStats,
    ) -> Result<HashMap<usize, Arc<TileBytes>>> {
        self.fetch_tiles_for(tiles, &[], cache, stats)
    }

    /// Fetches every tile in `tiles` that the cache lacks, concurrently on
    /// the I/O stage: whole, or, for a read of a few cells on a remote store,
    /// only the byte ranges of the chunks holding `located`'s cells.
    fn fetch_tiles_for(
        &self,
        tiles: &[usize],
        located: &[(usize, usize)],
        cache: &ChunkCache,
        stats: &mut ReadStats,
    ) -> Result<HashMap<usize, Arc<TileBytes>>> {
        let mut out = HashMap::with_capacity(tiles.len());
        let mut missing = Vec::new();
        for &t in tiles {
            match cache.tile(t) {
                Some(b) => {
                    out.insert(t, b);
                }
                None => missing.push(t),
            }
        }
        stats.tiles_fetched += missing.len();
        let mut wanted: HashMap<usize, Vec<usize>> = HashMap::new();
        for &(t, local) in located {
            wanted.entry(t).or_default().push(local);
        }
        let (ranged, whole): (Vec<usize>, Vec<usize>) = missing
            .into_iter()
            .partition(|t| self.wants_ranges(*t, wanted.get(t).map_or(usize::MAX, Vec::len)));
        let ranged: Vec<(usize, Vec<usize>)> = ranged
            .into_iter()
            .map(|t| (t, wanted.remove(&t).unwrap_or_default()))
            .collect();
        for (&(t, _), (tile, requested)) in ranged.iter().zip(self.fetch_ranged(&ranged)?) {
            stats.bytes_fetched += requested;
            out.insert(t, Arc::new(tile));
        }
        stats.bytes_fetched += whole
            .iter()
            .map(|&t| self.manifest().tile_bytes[t])
            .sum::<u64>();
        // Fetched on the I/O stage; checked (CRC, structure) on the pool.
        let keys: Vec<String> = whole.iter().map(|&t| Manifest::tile_key(t)).collect();
        let objects = self.fetcher().get_many(&keys);
        let fetched: Vec<(usize, Arc<TileBytes>)> = self.engine().install(|| {
            whole
                .par_iter()
                .zip(objects)
                .map(|(&t, object)| Ok((t, Arc::new(self.check_tile(t, object?)?))))
                .collect::<Result<_>>()
        })?;
        for (t, b) in fetched {
            cache.put_tile(t, b.clone());
            out.insert(t, b);
        }
        Ok(out)
    }

    /// Decodes whole chunks into shared buffers (on the pool).
    fn decode_chunks(
        &self,
        sources: &Sources,
        units: &[(usize, usize)],
    ) -> Result<Vec<Arc<DecodedChunk>>> {
        self.engine().install(|| {
            units
                .par_iter()
                .map(|&(t, c)| {
                    let view = sources.view(t);
                    let e = view.chunk(c);
                    let n = e.nnz() as usize;
                    let mut chunk = DecodedChunk {
                        cell_lo: e.cell_lo as usize,
                        indptr: view
                            .indptr(e.cell_lo as usize, e.cell_hi as usize)
                            .iter()
                            .map(|&p| (p as u64 - e.nnz_lo) as usize)
                            .collect(),
                        indices: vec![0; n],
                        values: vec![0; n],
                    };
                    self.engine()
                        .with_decoder(|d| {
                            d.decode_chunk(&view, c, &mut chunk.indices, &mut chunk.values)
                        })
                        .map_err(|e| Error::InTile {
                            tile: t,
                            source: Box::new(e),
                        })?;
                    Ok(Arc::new(chunk))
                })
                .collect()
        })
    }

    /// Plans a read of `cells`: fetches tiles, finds each row's chunk, decodes
    /// the chunks that gather rows need, and groups rows into runs.
    fn plan(
        &self,
        cells: Cells<'_>,
        direct_ok: bool,
        cache: &ChunkCache,
        stats: &mut ReadStats,
    ) -> Result<Plan> {
        // The tiles first (from the range's ends, or from each listed cell),
        // fetched and checked against the manifest before anything is sized
        // by the number of cells.
        let mut tiles: Vec<usize> = match cells {
            Cells::List(list) => list
                .iter()
                .map(|&c| self.locate(c).map(|(t, _)| t))
                .collect::<Result<_>>()?,
            Cells::Range(a, b) if a < b => {
                let first = self.locate(a)?.0;
                (first..=self.locate(b - 1)?.0).collect()
            }
            Cells::Range(..) => Vec::new(),
        };
        tiles.sort_unstable();
        tiles.dedup();
        // Where each listed cell lies: a read of a few cells of a tile on a
        // remote store fetches only the byte ranges of their chunks.
        let listed: Vec<(usize, usize)> = match cells {
            Cells::List(list) => list
                .iter()
                .map(|&c| self.locate(c))
                .collect::<Result<_>>()?,
            Cells::Range(..) => Vec::new(),
        };
        let mut sources = Sources {
            tiles: self.fetch_tiles_for(&tiles, &listed, cache, stats)?,
            chunks: HashMap::new(),
        };
        let located = cells
            .iter()
            .map(|c| self.locate(c))
            .collect::<Result<Vec<_>>>()?;
        // Chunk boundaries (cell_hi of each chunk) per tile, to place each row.
        let bounds: HashMap<usize, Vec<u64>> = tiles
            .iter()
            .map(|&t| (t, sources.view(t).chunks().map(|c| c.cell_hi).collect()))
            .collect();
        let rows: Vec<RowSource> = located
            .iter()
            .map(|&(tile, local)| RowSource {
                tile,
                chunk: bounds[&tile].partition_point(|&hi| hi <= local as u64),
                local,
            })
            .collect();

        let mut runs = Vec::new();
        let mut gather_units = Vec::new();
        let mut touched = std::collections::HashSet::new();
        let mut i = 0;
        while i < rows.len() {
            let r = rows[i];
            touched.insert((r.tile, r.chunk));
            let e = sources.view(r.tile).chunk(r.chunk);
            let n = e.n_cells() as usize;
            let cached = cache.chunk(r.tile, r.chunk);
            let whole = direct_ok
                && cached.is_none()
                && r.local == e.cell_lo as usize
                && i + n <= rows.len()
                && rows[i..i + n]
                    .iter()
                    .enumerate()
                    .all(|(j, s)| s.tile == r.tile && s.local == r.local + j);
            if whole {
                runs.push((
                    Run::Direct {
                        tile: r.tile,
                        chunk: r.chunk,
                    },
                    i..i + n,
                ));
                stats.chunks_decoded += 1;
                i += n;
                continue;
            }
            match runs.last_mut() {
                Some((Run::Gather, span)) if span.end == i => span.end += 1,
                _ => runs.push((Run::Gather, i..i + 1)),
            }
            if let Some(c) = cached {
                sources.chunks.insert((r.tile, r.chunk), c);
            } else if !sources.chunks.contains_key(&(r.tile, r.chunk))
                && !gather_units.contains(&(r.tile, r.chunk))
            {
                gather_units.push((r.tile, r.chunk));
            }
            i += 1;
        }
        stats.chunks_touched += touched.len();
        stats.chunk_bytes += touched
            .iter()
            .map(|&(t, c)| {
                let frames = sources.view(t).chunk(c).frames();
                frames.map(|r| r.end - r.start).sum::<u64>()
            })
            .sum::<u64>();
        stats.chunks_decoded += gather_units.len();
        for (unit, chunk) in gather_units
            .iter()
            .zip(self.decode_chunks(&sources, &gather_units)?)
        {
            cache.put_chunk(unit.0, unit.1, chunk.clone());
            sources.chunks.insert(*unit, chunk);
        }
        Ok(Plan {
            sources,
            rows,
            runs,
        })
    }

    /// Reads `cells` (any order, duplicates allowed) as CSR rows in request order,
    /// keeping only `genes` when given. `cache` keeps fetched tiles and decoded
    /// chunks for the next request.
    pub(crate) fn read_csr_with<V: DecodedCount>(
        &self,
        cells: Cells<'_>,
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
    ) -> Result<CsrBatch<V>> {
        let mut csr = Csr::empty(0);
        let stats = self.read_csr_into(cells, genes, cache, &mut csr)?;
        Ok(CsrBatch {
            cells: cells.to_vec(),
            csr,
            stats,
        })
    }

    /// As [`Dataset::read_csr_with`], into `out`, reusing its allocations (a scan
    /// that reads tile after tile into one buffer allocates nothing once warm).
    pub(crate) fn read_csr_into<V: DecodedCount>(
        &self,
        cells: Cells<'_>,
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
        out: &mut Csr<V>,
    ) -> Result<ReadStats> {
        let (fill, stats) = self.prepare_csr(cells, genes, cache, out)?;
        self.fill(vec![fill], genes)?;
        Ok(stats)
    }

    /// Reads every cell of each tile of `tiles` into the matching buffer of
    /// `outs`, decoding all their chunks in one parallel pass (so a few tiles
    /// of 8 chunks still spread over every worker of a wide pool).
    pub(crate) fn read_tiles_into<V: DecodedCount>(
        &self,
        tiles: &[usize],
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
        outs: &mut [Csr<V>],
    ) -> Result<ReadStats> {
        let mut stats = ReadStats::default();
        let mut fills = Vec::with_capacity(tiles.len());
        for (&t, out) in tiles.iter().zip(outs) {
            let cells = self.tile_cells(t)?;
            let (fill, s) =
                self.prepare_csr(Cells::Range(cells.start, cells.end), genes, cache, out)?;
            stats.add(s);
            fills.push(fill);
        }
        self.fill(fills, genes)?;
        Ok(stats)
    }

    /// Plans a read into `out`: sizes it (every row's length is known from the
    /// tiles' indptr and the decoded chunks) and cuts it into tasks, each
    /// owning a disjoint slice of the output.
    fn prepare_csr<'o, V: DecodedCount>(
        &self,
        cells: Cells<'_>,
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
        out: &'o mut Csr<V>,
    ) -> Result<(Fill<'o, V>, ReadStats)> {
        let mut stats = ReadStats::default();
        let Plan {
            sources,
            rows,
            runs,
        } = self.plan(cells, genes.is_none(), cache, &mut stats)?;
        let keep = |g: i32| genes.map_or(Some(g), |s| s.column(g));
        out.n_cols = genes.map_or(u64::from(self.manifest().n_genes), |s| s.len() as u64);
        let indptr = &mut out.indptr;
        indptr.clear();
        indptr.push(0i64);
        let mut total = 0i64;
        for r in &rows {
            let len = match sources.chunks.get(&(r.tile, r.chunk)) {
                Some(c) if genes.is_some() => c
                    .row(r.local)
                    .0
                    .iter()
                    .filter(|&&g| keep(g).is_some())
                    .count(),
                Some(c) => c.row(r.local).0.len(),
                None => {
                    let ip = sources.view(r.tile).indptr(r.local, r.local + 1);
                    (ip[1] - ip[0]) as usize
                }
            };
            total += len as i64;
            indptr.push(total);
        }
        let nnz = total as usize;
        // Every element is overwritten by its task; resizing only touches new ones.
        out.indices.resize(nnz, 0);
        out.values.resize(nnz, V::default());
        let (indptr, indices, values) = (&out.indptr, &mut out.indices, &mut out.values);
        let mut tasks: Vec<Task<'o, V>> = Vec::new();
        let (mut idx_rest, mut val_rest) = (&mut indices[..], &mut values[..]);
        for (run, span) in runs {
            // Long gather runs are split so every worker gets a share.
            let mut pieces = Vec::new();
            match run {
                Run::Direct { .. } => pieces.push((run, span)),
                Run::Gather => {
                    let mut start = span.start;
                    for r in span.clone() {
                        if (indptr[r + 1] - indptr[start]) as usize >= GATHER_TASK_NNZ
                            || r + 1 == span.end
                        {
                            pieces.push((Run::Gather, start..r + 1));
                            start = r + 1;
                        }
                    }
                }
            }
            for (run, rows) in pieces {
                let len = (indptr[rows.end] - indptr[rows.start]) as usize;
                tasks.push(Task {
                    run,
                    rows,
                    indices: split_off(&mut idx_rest, len),
                    values: split_off(&mut val_rest, len),
                });
            }
        }
        Ok((
            Fill {
                sources,
                rows,
                tasks,
            },
            stats,
        ))
    }

    /// Runs the tasks of every prepared read in one parallel pass on the pool.
    fn fill<V: DecodedCount>(
        &self,
        fills: Vec<Fill<'_, V>>,
        genes: Option<&GeneSelection>,
    ) -> Result<()> {
        let keep = |g: i32| genes.map_or(Some(g), |s| s.column(g));
        let monotone = genes.is_none_or(GeneSelection::is_monotone);
        let mut contexts = Vec::with_capacity(fills.len());
        let mut tasks = Vec::new();
        for (i, fill) in fills.into_iter().enumerate() {
            contexts.push((fill.sources, fill.rows));
            tasks.extend(fill.tasks.into_iter().map(|t| (i, t)));
        }
        let run = |(i, task): (usize, Task<'_, V>)| -> Result<()> {
            let (sources, rows) = &contexts[i];
            match task.run {
                Run::Direct { tile, chunk } => self
                    .engine()
                    .with_decoder(|d| {
                        d.decode_chunk(&sources.view(tile), chunk, task.indices, task.values)
                    })
                    .map_err(|e| Error::InTile {
                        tile,
                        source: Box::new(e),
                    }),
                Run::Gather => {
                    let mut at = 0;
                    for r in &rows[task.rows] {
                        let (g, v) = sources.chunks[&(r.tile, r.chunk)].row(r.local);
                        let start = at;
                        for (&gene, &count) in g.iter().zip(v) {
                            if let Some(col) = keep(gene) {
                                task.indices[at] = col;
                                task.values[at] = V::from_u32(count as u32);
                                at += 1;
                            }
                        }
                        if !monotone {
                            sort_row(&mut task.indices[start..at], &mut task.values[start..at]);
                        }
                    }
                    Ok(())
                }
            }
        };
        // A small read (a few cells from decoded chunks) is copied on the
        // calling thread: handing it to the pool would cost more than the
        // copy, and concurrent readers then each use their own core.
        let small = tasks.iter().map(|(_, t)| t.indices.len()).sum::<usize>()
            <= 2 * GATHER_TASK_NNZ
            && tasks.iter().all(|(_, t)| matches!(t.run, Run::Gather));
        if small {
            return tasks.into_iter().try_for_each(run);
        }
        self.engine()
            .install(|| tasks.into_par_iter().try_for_each(run))
    }

    /// Reads `cells` as dense `f32` rows (all genes, or `genes` in its order).
    pub(crate) fn read_dense_with(
        &self,
        cells: Cells<'_>,
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
    ) -> Result<DenseBatch> {
        let mut stats = ReadStats::default();
        let Plan { sources, rows, .. } = self.plan(cells, false, cache, &mut stats)?;
        let n_cols = genes.map_or(self.manifest().n_genes as usize, GeneSelection::len);
        let mut data = vec![0f32; rows.len() * n_cols];
        if n_cols > 0 {
            self.engine().install(|| {
                data.par_chunks_mut(n_cols)
                    .zip(rows.par_iter())
                    .for_each(|(out, r)| {
                        let (g, v) = sources.chunks[&(r.tile, r.chunk)].row(r.local);
                        for (&gene, &count) in g.iter().zip(v) {
                            if let Some(col) = genes.map_or(Some(gene), |s| s.column(gene)) {
                                out[col as usize] = count as f32;
                            }
                        }
                    })
            });
        }
        Ok(DenseBatch {
            cells: cells.to_vec(),
            n_cols,
            data,
            stats,
        })
    }
}

/// The first `len` elements of `rest`, leaving the others in `rest`.
pub(crate) fn split_off<'o, T>(rest: &mut &'o mut [T], len: usize) -> &'o mut [T] {
    let (head, tail) = std::mem::take(rest).split_at_mut(len);
    *rest = tail;
    head
}

/// Sorts one row's entries by column (after a non-monotone gene selection).
fn sort_row<V: Copy>(indices: &mut [i32], values: &mut [V]) {
    let mut pairs: Vec<(i32, V)> = indices
        .iter()
        .copied()
        .zip(values.iter().copied())
        .collect();
    pairs.sort_unstable_by_key(|p| p.0);
    for ((i, v), (pi, pv)) in indices.iter_mut().zip(values.iter_mut()).zip(pairs) {
        *i = pi;
        *v = pv;
    }
}

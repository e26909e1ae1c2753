//! Reading any cells: plan, fetch, then decode straight into the output.
//!
//! A request (cells in any order, duplicates allowed) is planned before any
//! decompression ([`crate::engine::plan`]): the tiles it needs come from the
//! manifest, then, once their heads are at hand, the segments of consecutive
//! rows of one chunk and where each lands in the output. A segment that is a
//! whole chunk in order (ranges, tiles, scans) is decoded by a worker
//! directly into its slice of the output; any other is copied, as one span of
//! nonzeros, from its chunk decoded once into a shared buffer (kept in the
//! cache for the next request). Tasks get disjoint slices of the output, so
//! the fill runs in parallel on the pinned pool without locks.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use crate::csr::Csr;
use crate::dataset::cache::{ChunkCache, DecodedChunk, TileBytes};
use crate::dataset::select::GeneSelection;
use crate::dataset::Dataset;
use crate::engine::plan::{pieces, CellRuns, Piece, ReadPlan, Segment};
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

/// A unit of parallel work: rows of one segment and their slices of the output.
struct Task<'o, V> {
    /// The segment's tile and chunk, and the rows of it this task writes.
    tile: usize,
    chunk: usize,
    local: Range<usize>,
    /// Decode the whole chunk straight into the slices (else copy from its buffer).
    direct: bool,
    indices: &'o mut [i32],
    values: &'o mut [V],
}

/// Target of nonzeros per copy task: big enough to amortise scheduling,
/// small enough to spread a batch over every worker.
const GATHER_TASK_NNZ: usize = 1 << 15;

/// A chunk of a tile: `(tile, chunk)`.
type Unit = (usize, usize);

/// What a plan has fetched and decoded, shared read-only by the fill tasks.
struct Sources {
    tiles: HashMap<usize, Arc<TileBytes>>,
    chunks: HashMap<Unit, Arc<DecodedChunk>>,
}

impl Sources {
    fn view(&self, tile: usize) -> TileView<'_> {
        TileView::revalidated(self.tiles[&tile].bytes.as_bytes())
            .expect("cached tiles were validated")
    }
}

/// A plan with what it needs fetched and its buffered chunks decoded.
struct Planned {
    sources: Sources,
    plan: ReadPlan,
}

/// A prepared read: what its tasks read, and the tasks with their slices of the output.
struct Fill<'o, V> {
    sources: Sources,
    tasks: Vec<Task<'o, V>>,
}

impl Dataset {
    /// Tile and local row of global cell `cell`.
    pub fn locate(&self, cell: u64) -> Result<(usize, usize)> {
        if cell >= self.manifest().n_cells {
            return Err(outside(cell, self.manifest().n_cells));
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
    /// only the byte ranges of the chunks holding the cells of `wanted`.
    fn fetch_tiles_for(
        &self,
        tiles: &[usize],
        wanted: &[Piece],
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
        let mut needed: HashMap<usize, usize> = HashMap::new();
        for p in wanted {
            *needed.entry(p.tile).or_default() += p.local.len();
        }
        let (ranged, whole): (Vec<usize>, Vec<usize>) = missing.into_iter().partition(|t| {
            let cells = needed.get(t).copied().unwrap_or(usize::MAX);
            self.wants_ranges(*t, cells, cache.capacity())
        });
        // Only tiles of which few cells are read are fetched by ranges, so
        // listing those cells one by one stays small.
        let ranged: Vec<(usize, Vec<usize>)> = ranged
            .into_iter()
            .map(|t| {
                let locals = wanted
                    .iter()
                    .filter(|p| p.tile == t)
                    .flat_map(|p| p.local.clone())
                    .collect();
                (t, locals)
            })
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

    /// Decodes whole chunks into shared buffers (on the pool), reusing
    /// `buffers` (stale chunks) before allocating; each with its unit.
    fn decode_chunks(
        &self,
        sources: &Sources,
        units: &[Unit],
        mut buffers: Vec<DecodedChunk>,
    ) -> Result<Vec<(Unit, Arc<DecodedChunk>)>> {
        // The largest chunks get the largest buffers, so that few grow (a
        // grown buffer is fresh memory again).
        let nnz = |&(t, c): &Unit| sources.view(t).chunk(c).nnz();
        let mut by_size: Vec<Unit> = units.to_vec();
        by_size.sort_by_cached_key(nnz);
        buffers.sort_unstable_by_key(|b| b.indices.capacity().min(b.values.capacity()));
        let work: Vec<(Unit, DecodedChunk)> = by_size
            .into_iter()
            .rev()
            .map(|u| (u, buffers.pop().unwrap_or_default()))
            .collect();
        self.engine().install(|| {
            work.into_par_iter()
                .map(|((t, c), mut chunk)| {
                    let view = sources.view(t);
                    let e = view.chunk(c);
                    let n = e.nnz() as usize;
                    chunk.cell_lo = e.cell_lo as usize;
                    chunk.indptr.clear();
                    chunk.indptr.extend(
                        view.indptr(e.cell_lo as usize, e.cell_hi as usize)
                            .iter()
                            .map(|&p| (p as u64 - e.nnz_lo) as usize),
                    );
                    // Shrinking writes nothing; the decode overwrites all `n`.
                    chunk.indices.resize(n, 0);
                    chunk.values.resize(n, 0);
                    self.engine()
                        .with_decoder(|d| {
                            d.decode_chunk(&view, c, &mut chunk.indices, &mut chunk.values)
                        })
                        .map_err(|e| Error::InTile {
                            tile: t,
                            source: Box::new(e),
                        })?;
                    Ok(((t, c), Arc::new(chunk)))
                })
                .collect()
        })
    }

    /// Plans a read of `cells` and fetches and decodes what the plan needs:
    /// the tiles (from the manifest's limits alone, checked against the
    /// manifest before anything is sized by a cell count), then the plan
    /// from their chunk tables, then the buffered chunks the cache lacks.
    fn plan(
        &self,
        cells: &CellRuns,
        direct_ok: bool,
        cache: &ChunkCache,
        stats: &mut ReadStats,
    ) -> Result<Planned> {
        if let Some(cell) = cells.first_outside(self.n_cells()) {
            return Err(outside(cell, self.n_cells()));
        }
        let pieces = pieces(cells, self.limits());
        let mut tiles: Vec<usize> = pieces.iter().map(|p| p.tile).collect();
        tiles.sort_unstable();
        tiles.dedup();
        let mut sources = Sources {
            tiles: self.fetch_tiles_for(&tiles, &pieces, cache, stats)?,
            chunks: HashMap::new(),
        };
        let ends = chunk_ends(&sources.tiles);
        let plan = ReadPlan::new(
            &pieces,
            |t| &ends[&t],
            direct_ok,
            |t, c| cache.has_chunk(t, c),
        );
        stats.chunks_touched += plan.touched.len();
        stats.chunk_bytes += plan
            .touched
            .iter()
            .map(|&(t, c)| {
                let frames = sources.view(t).chunk(c).frames();
                frames.map(|r| r.end - r.start).sum::<u64>()
            })
            .sum::<u64>();
        stats.chunks_decoded += plan.segments.iter().filter(|s| s.direct).count();
        let mut missing = Vec::new();
        for &(t, c) in &plan.buffered {
            match cache.chunk(t, c) {
                Some(chunk) => {
                    sources.chunks.insert((t, c), chunk);
                }
                None => missing.push((t, c)),
            }
        }
        stats.chunks_decoded += missing.len();
        let room = missing
            .iter()
            .map(|&(t, c)| {
                let e = sources.view(t).chunk(c);
                DecodedChunk::bytes_for(e.nnz() as usize, (e.cell_hi - e.cell_lo) as usize)
            })
            .sum();
        let buffers = cache.make_room(room);
        let decoded = self.decode_chunks(&sources, &missing, buffers)?;
        for (unit, chunk) in decoded {
            cache.put_chunk(unit.0, unit.1, chunk.clone());
            sources.chunks.insert(unit, chunk);
        }
        Ok(Planned { sources, plan })
    }

    /// Reads `cells` (any order, duplicates allowed) as CSR rows in request order,
    /// keeping only `genes` when given. `cache` keeps fetched tiles and decoded
    /// chunks for the next request.
    pub(crate) fn read_csr_with<V: DecodedCount>(
        &self,
        cells: &CellRuns,
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
    ) -> Result<CsrBatch<V>> {
        let mut csr = Csr::empty(0);
        let stats = self.read_csr_into(cells, genes, cache, &mut csr)?;
        Ok(CsrBatch {
            cells: cells.ids().collect(),
            csr,
            stats,
        })
    }

    /// As [`Dataset::read_csr_with`], into `out`, reusing its allocations (a scan
    /// that reads tile after tile into one buffer allocates nothing once warm).
    pub(crate) fn read_csr_into<V: DecodedCount>(
        &self,
        cells: &CellRuns,
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
        out: &mut Csr<V>,
    ) -> Result<ReadStats> {
        let (fill, stats) = self.prepare_csr(cells, genes, cache, out)?;
        self.fill(vec![fill], genes)?;
        Ok(stats)
    }

    /// As [`Dataset::read_range_into`], but every tile is fetched and checked
    /// afresh: the dataset's cache is neither read nor filled, as in a scan
    /// of a dataset larger than the cache. The bench scans this way, so its
    /// scan pays for fetching and CRCs as zstd-only and batches do.
    #[cfg(feature = "measure")]
    pub(crate) fn read_range_uncached_into<V: DecodedCount>(
        &self,
        range: std::ops::Range<u64>,
        out: &mut Csr<V>,
    ) -> Result<ReadStats> {
        self.read_csr_into(
            &CellRuns::range(range.start, range.end),
            None,
            &ChunkCache::new(0),
            out,
        )
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
                self.prepare_csr(&CellRuns::range(cells.start, cells.end), genes, cache, out)?;
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
        cells: &CellRuns,
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
        out: &'o mut Csr<V>,
    ) -> Result<(Fill<'o, V>, ReadStats)> {
        let mut stats = ReadStats::default();
        let Planned { sources, plan } = self.plan(cells, genes.is_none(), cache, &mut stats)?;
        out.n_cols = genes.map_or(u64::from(self.manifest().n_genes), |s| s.len() as u64);
        let indptr = &mut out.indptr;
        indptr.clear();
        indptr.reserve(plan.n_rows() + 1);
        indptr.push(0i64);
        let mut total = 0i64;
        for s in &plan.segments {
            match (sources.chunks.get(&(s.tile, s.chunk)), genes) {
                (Some(c), Some(sel)) => {
                    for cell in s.local.clone() {
                        let kept = c.row(cell).0.iter().filter(|&&g| sel.column(g).is_some());
                        total += kept.count() as i64;
                        indptr.push(total);
                    }
                }
                _ => {
                    let ip = sources.view(s.tile).indptr(s.local.start, s.local.end);
                    indptr.extend(ip.iter().skip(1).map(|&p| total + (p - ip[0])));
                    total += ip[ip.len() - 1] - ip[0];
                }
            }
        }
        let nnz = total as usize;
        // Every element is overwritten by its task; resizing only touches new ones.
        out.indices.resize(nnz, 0);
        out.values.resize(nnz, V::default());
        let (indptr, indices, values) = (&out.indptr, &mut out.indices, &mut out.values);
        let mut tasks: Vec<Task<'o, V>> = Vec::new();
        let (mut idx_rest, mut val_rest) = (&mut indices[..], &mut values[..]);
        let mut take = |s: &Segment, local: Range<usize>, direct: bool| {
            let first = s.out_row + (local.start - s.local.start);
            let len = (indptr[first + local.len()] - indptr[first]) as usize;
            Task {
                tile: s.tile,
                chunk: s.chunk,
                local,
                direct,
                indices: split_off(&mut idx_rest, len),
                values: split_off(&mut val_rest, len),
            }
        };
        for s in &plan.segments {
            if s.direct {
                tasks.push(take(s, s.local.clone(), true));
                continue;
            }
            // Long copies are split so every worker gets a share.
            let rows = &indptr[s.out_row..=s.out_row + s.local.len()];
            for piece in pieces_of(rows, GATHER_TASK_NNZ) {
                let local = s.local.start + piece.start..s.local.start + piece.end;
                tasks.push(take(s, local, false));
            }
        }
        Ok((Fill { sources, tasks }, stats))
    }

    /// Runs the tasks of every prepared read in one parallel pass on the pool.
    fn fill<V: DecodedCount>(
        &self,
        fills: Vec<Fill<'_, V>>,
        genes: Option<&GeneSelection>,
    ) -> Result<()> {
        let monotone = genes.is_none_or(GeneSelection::is_monotone);
        let mut contexts = Vec::with_capacity(fills.len());
        let mut tasks = Vec::new();
        for (i, fill) in fills.into_iter().enumerate() {
            contexts.push(fill.sources);
            tasks.extend(fill.tasks.into_iter().map(|t| (i, t)));
        }
        let run = |(i, task): (usize, Task<'_, V>)| -> Result<()> {
            let sources = &contexts[i];
            if task.direct {
                return self
                    .engine()
                    .with_decoder(|d| {
                        d.decode_chunk(
                            &sources.view(task.tile),
                            task.chunk,
                            task.indices,
                            task.values,
                        )
                    })
                    .map_err(|e| Error::InTile {
                        tile: task.tile,
                        source: Box::new(e),
                    });
            }
            let chunk = &sources.chunks[&(task.tile, task.chunk)];
            match genes {
                // The rows are adjacent in the chunk: one span of nonzeros.
                None => {
                    let (g, v) = chunk.rows(task.local);
                    task.indices.copy_from_slice(g);
                    for (out, &count) in task.values.iter_mut().zip(v) {
                        *out = V::from_u32(count as u32);
                    }
                }
                Some(sel) => {
                    let mut at = 0;
                    for cell in task.local {
                        let (g, v) = chunk.row(cell);
                        let start = at;
                        for (&gene, &count) in g.iter().zip(v) {
                            if let Some(col) = sel.column(gene) {
                                task.indices[at] = col;
                                task.values[at] = V::from_u32(count as u32);
                                at += 1;
                            }
                        }
                        if !monotone {
                            sort_row(&mut task.indices[start..at], &mut task.values[start..at]);
                        }
                    }
                }
            }
            Ok(())
        };
        // A small read (a few cells from decoded chunks) is copied on the
        // calling thread: handing it to the pool would cost more than the
        // copy, and concurrent readers then each use their own core.
        let small = tasks.iter().map(|(_, t)| t.indices.len()).sum::<usize>()
            <= 2 * GATHER_TASK_NNZ
            && tasks.iter().all(|(_, t)| !t.direct);
        if small {
            return tasks.into_iter().try_for_each(run);
        }
        self.engine()
            .install(|| tasks.into_par_iter().try_for_each(run))
    }

    /// Reads `cells` as dense `f32` rows (all genes, or `genes` in its order).
    pub(crate) fn read_dense_with(
        &self,
        cells: &CellRuns,
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
    ) -> Result<DenseBatch> {
        let mut stats = ReadStats::default();
        let Planned { sources, plan } = self.plan(cells, false, cache, &mut stats)?;
        let n_cols = genes.map_or(self.manifest().n_genes as usize, GeneSelection::len);
        let mut data = vec![0f32; plan.n_rows() * n_cols];
        if n_cols > 0 {
            let mut rest = &mut data[..];
            let parts: Vec<(&Segment, &mut [f32])> = plan
                .segments
                .iter()
                .map(|s| (s, split_off(&mut rest, s.local.len() * n_cols)))
                .collect();
            self.engine().install(|| {
                parts.into_par_iter().for_each(|(s, rows)| {
                    let chunk = &sources.chunks[&(s.tile, s.chunk)];
                    for (cell, out) in s.local.clone().zip(rows.chunks_mut(n_cols)) {
                        let (g, v) = chunk.row(cell);
                        for (&gene, &count) in g.iter().zip(v) {
                            if let Some(col) = genes.map_or(Some(gene), |sel| sel.column(gene)) {
                                out[col as usize] = count as f32;
                            }
                        }
                    }
                })
            });
        }
        Ok(DenseBatch {
            cells: cells.ids().collect(),
            n_cols,
            data,
            stats,
        })
    }
}

/// The error for a cell id past the dataset's end.
fn outside(cell: u64, n_cells: u64) -> Error {
    Error::Input(format!("cell {cell} is outside 0..{n_cells}"))
}

/// Each tile's chunk ends (every chunk's `cell_hi`, in order): the chunk
/// holding a local cell is where it falls among them.
pub(crate) fn chunk_ends(tiles: &HashMap<usize, Arc<TileBytes>>) -> HashMap<usize, Vec<u64>> {
    tiles
        .iter()
        .map(|(&t, b)| {
            let view = TileView::revalidated(b.bytes.as_bytes()).expect("tiles were validated");
            (t, view.chunks().map(|c| c.cell_hi).collect())
        })
        .collect()
}

/// The first `len` elements of `rest`, leaving the others in `rest`.
pub(crate) fn split_off<'o, T>(rest: &mut &'o mut [T], len: usize) -> &'o mut [T] {
    let (head, tail) = std::mem::take(rest).split_at_mut(len);
    *rest = tail;
    head
}

/// Cuts rows (given by their `indptr`, starting anywhere) into consecutive
/// pieces of about `target` nonzeros: parallel tasks big enough to amortise
/// scheduling, small enough to spread over every worker.
pub(crate) fn pieces_of(indptr: &[i64], target: usize) -> Vec<Range<usize>> {
    let n = indptr.len() - 1;
    let mut pieces = Vec::new();
    let mut start = 0;
    for r in 0..n {
        if (indptr[r + 1] - indptr[start]) as usize >= target || r + 1 == n {
            pieces.push(start..r + 1);
            start = r + 1;
        }
    }
    pieces
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_every_row_once_in_order() {
        let big = 100;
        let indptr = [0, 10, big, big + 1, 3 * big, 3 * big, 3 * big + 5];
        let pieces = pieces_of(&indptr, big as usize);
        assert_eq!(pieces, [0..2, 2..4, 4..6]);
        assert!(pieces_of(&[7], 1).is_empty());
        assert_eq!(pieces_of(&[7, 8], 100), vec![0..1]);
    }
}

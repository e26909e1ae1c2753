//! What a read runs over: tiles numbered `0..n`, each fetched, checked and
//! cached somewhere, each chunk decoded (and its genes mapped) before rows
//! are copied out of it.
//!
//! A dataset through a cache is one such set of tiles ([`Through`]); a
//! corpus's iterator is another (every member's tiles one after another,
//! each member's rows mapped into the vocabulary as its chunks decode).
//! [`read_outputs`] is the read pipeline over any of them: plan the tiles,
//! fetch, plan the segments, decode the buffered chunks, execute. Batches
//! are made over [`Tiles`] too, so a corpus gets every batch strategy of a
//! dataset.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::dataset::cache::{ChunkCache, TileBytes};
use crate::dataset::read::{outside, Fetched, ReadStats};
use crate::dataset::Dataset;
use crate::engine::decoded::{decode_chunks, DecodedChunk, Unit};
use crate::engine::execute::{execute, Sources};
use crate::engine::plan::{pieces, tiles_of, Piece, Policy, ReadPlan};
use crate::engine::{CellSelection, Engine, GeneSelection, Sink};
use crate::error::Result;
use crate::format::tile::TileView;

/// Fetched tiles by number.
pub(crate) type TileMap = HashMap<usize, Arc<TileBytes>>;

/// A set of tiles a read plans over, fetches and decodes (see the module docs).
pub(crate) trait Tiles: Sync {
    /// First cell of each tile, then the number of cells.
    fn limits(&self) -> &[u64];
    /// The decode pool.
    fn engine(&self) -> &Engine;
    /// Nonzeros, cells and compressed bytes of tile `t`, from the manifest.
    fn figures(&self, t: usize) -> (u64, u64, u64);
    /// Fetches every tile of `tiles` the cache lacks (whole, or for a read
    /// of a few of the cells `wanted` from a remote store, their chunks).
    fn fetch(&self, tiles: &[usize], wanted: &[Piece], stats: &mut ReadStats) -> Result<TileMap>;
    /// Starts fetching those of `tiles` the cache lacks.
    fn prefetch(&self, tiles: &[usize]);
    /// The cache of tiles and decoded chunks tile `t` goes through.
    fn cache(&self, t: usize) -> (&ChunkCache, usize);
    /// Where tile `t`'s genes land in the output columns, applied as its
    /// chunks are decoded (`None`: the output's columns are its genes).
    fn remap(&self, t: usize) -> Option<&GeneSelection>;
}

/// A dataset's tiles through a cache.
pub(crate) struct Through<D, C> {
    /// The dataset.
    pub(crate) dataset: D,
    /// The cache its tiles and chunks go through.
    pub(crate) cache: C,
    /// Where its genes land in the output columns, as each chunk is
    /// decoded (see [`Tiles::remap`]): a gene selection of CSR batches
    /// (see `batches::window`); `None` for every other read.
    pub(crate) remap: Option<GeneSelection>,
}

impl<D: Borrow<Dataset> + Sync, C: Borrow<ChunkCache> + Sync> Tiles for Through<D, C> {
    fn limits(&self) -> &[u64] {
        self.dataset.borrow().limits()
    }

    fn engine(&self) -> &Engine {
        self.dataset.borrow().engine()
    }

    fn figures(&self, t: usize) -> (u64, u64, u64) {
        let m = self.dataset.borrow().manifest();
        (m.tile_nnz[t], m.tile_cells[t], m.tile_bytes[t])
    }

    fn fetch(&self, tiles: &[usize], wanted: &[Piece], stats: &mut ReadStats) -> Result<TileMap> {
        let ds = self.dataset.borrow();
        ds.fetch_tiles_for(tiles, wanted, self.cache.borrow(), stats)
    }

    fn prefetch(&self, tiles: &[usize]) {
        let cache = self.cache.borrow();
        let missing = tiles.iter().copied().filter(|&t| !cache.has_tile(t));
        self.dataset.borrow().prefetch(missing.collect::<Vec<_>>());
    }

    fn cache(&self, t: usize) -> (&ChunkCache, usize) {
        (self.cache.borrow(), t)
    }

    fn remap(&self, _t: usize) -> Option<&GeneSelection> {
        self.remap.as_ref()
    }
}

/// The pieces of `outputs` (one cell selection each) over the tiles of
/// `limits`, after checking that every cell lies below the last limit.
pub(crate) fn pieces_in(limits: &[u64], outputs: &[CellSelection]) -> Result<Vec<Piece>> {
    let n_cells = limits[limits.len() - 1];
    let mut all = Vec::new();
    for (o, cells) in outputs.iter().enumerate() {
        if let Some(cell) = cells.first_outside(n_cells) {
            return Err(outside(cell, n_cells));
        }
        all.extend(pieces(cells, limits, o));
    }
    Ok(all)
}

/// The fetched tiles and decoded chunks of a read over `tiles`, with the
/// remaps the scatter fill applies to the rows it decodes.
struct Remapped<'a, T: ?Sized> {
    fetched: &'a Fetched,
    tiles: &'a T,
}

impl<T: Tiles + ?Sized> Sources for Remapped<'_, T> {
    fn view(&self, tile: usize) -> TileView<'_> {
        self.fetched.view(tile)
    }

    fn decoded(&self, unit: Unit) -> &DecodedChunk {
        self.fetched.decoded(unit)
    }

    fn remap(&self, tile: usize) -> Option<&GeneSelection> {
        self.tiles.remap(tile)
    }
}

/// Whether tile `t`'s rows can be decoded where they go: its genes are not
/// remapped, or the remap keeps every gene (each row is then mapped in
/// place, as long as stored).
pub(crate) fn maps_in_place<T: Tiles + ?Sized>(tiles: &T, t: usize) -> bool {
    tiles.remap(t).is_none_or(GeneSelection::keeps_every_gene)
}

/// Reads `outputs` (one cell selection each) of `tiles` into `sinks`
/// (started): plan, fetch through the cache, decode the buffered chunks
/// (kept in the cache), execute. `scatter`: every row of a tile that
/// [`maps_in_place`] is decoded straight into its place (and mapped there),
/// no chunk buffered (the batches of a window, built at once).
pub(crate) fn read_outputs<T: Tiles + ?Sized, S: Sink>(
    tiles: &T,
    outputs: &[CellSelection],
    sinks: &mut [S],
    scatter: bool,
) -> Result<ReadStats> {
    let mut stats = ReadStats::default();
    let pieces = pieces_in(tiles.limits(), outputs)?;
    let mut fetched = Fetched::new(tiles.fetch(&tiles_of(&pieces), &pieces, &mut stats)?);
    let stored = sinks.iter().all(Sink::stores_rows);
    // A remapped tile's rows are copied from its mapped chunks, unless
    // scattered and mapped in place.
    let buffered = |t: usize| tiles.remap(t).is_some();
    let cached = |t: usize, c: usize| {
        let (cache, key) = tiles.cache(t);
        buffered(t) || cache.has_chunk(key, c)
    };
    let copied = |t: usize| !maps_in_place(tiles, t);
    let policy = if scatter {
        Policy::Scatter { buffered: &copied }
    } else {
        Policy::Cached {
            stored,
            cached: &cached,
        }
    };
    let plan = fetched.plan(&pieces, outputs.len(), &policy);
    count_chunks(&plan, &fetched, &mut stats);
    decode_buffered(tiles, &plan, &mut fetched, &mut stats)?;
    let sources = Remapped {
        fetched: &fetched,
        tiles,
    };
    execute(tiles.engine(), &plan, &sources, sinks)?;
    Ok(stats)
}

/// Adds what `plan` touches and decodes in place to `stats`.
pub(crate) fn count_chunks(plan: &ReadPlan, fetched: &Fetched, stats: &mut ReadStats) {
    stats.chunks_touched += plan.touched.len();
    stats.chunk_bytes += plan
        .touched
        .iter()
        .map(|&(t, c)| {
            let frames = fetched.view(t).chunk(c).frames();
            frames.map(|r| r.end - r.start).sum::<u64>()
        })
        .sum::<u64>();
    stats.chunks_decoded += plan.decoded_in_place();
}

/// Takes the chunks `plan` copies from out of the cache, or decodes them
/// (into the buffers of chunks the cache evicts to make room, their genes
/// mapped) and keeps them there for the next request.
fn decode_buffered<T: Tiles + ?Sized>(
    tiles: &T,
    plan: &ReadPlan,
    fetched: &mut Fetched,
    stats: &mut ReadStats,
) -> Result<()> {
    let mut missing: Vec<Unit> = Vec::new();
    // Bytes to make room for, in each cache the chunks go to.
    let mut room: Vec<(&ChunkCache, usize)> = Vec::new();
    for &(t, c) in &plan.buffered {
        let (cache, key) = tiles.cache(t);
        match cache.chunk(key, c) {
            Some(chunk) => {
                fetched.chunks.insert((t, c), chunk);
            }
            None => {
                missing.push((t, c));
                let e = fetched.view(t).chunk(c);
                let bytes =
                    DecodedChunk::bytes_for(e.nnz() as usize, (e.cell_hi - e.cell_lo) as usize);
                match room.iter_mut().find(|(c, _)| std::ptr::eq(*c, cache)) {
                    Some((_, n)) => *n += bytes,
                    None => room.push((cache, bytes)),
                }
            }
        }
    }
    stats.chunks_decoded += missing.len();
    let buffers = room
        .into_iter()
        .flat_map(|(cache, bytes)| cache.make_room(bytes))
        .collect();
    let decoded = decode_into(tiles, fetched, &missing, buffers)?;
    for (unit, chunk) in decoded {
        let chunk = Arc::new(chunk);
        let (cache, key) = tiles.cache(unit.0);
        cache.put_chunk(key, unit.1, chunk.clone());
        fetched.chunks.insert(unit, chunk);
    }
    Ok(())
}

/// Decodes the chunks `units` of the tiles in `fetched`, in `buffers`, each
/// tile's genes mapped as `tiles` says.
pub(crate) fn decode_into<T: Tiles + ?Sized>(
    tiles: &T,
    fetched: &Fetched,
    units: &[Unit],
    buffers: Vec<DecodedChunk>,
) -> Result<Vec<(Unit, DecodedChunk)>> {
    let view = |t: usize| fetched.view(t);
    let remap = |t: usize| tiles.remap(t);
    decode_chunks(tiles.engine(), &view, &remap, units, buffers)
}

//! Running a plan: the rows of every segment into their outputs' parts, in
//! parallel on the engine's pool, every strategy taking the same segments.
//!
//! Each output is sized first ([`Sink::extend`]: every row's stored length
//! is in its tile's indptr, and the genes of copied rows are in their decoded
//! chunks), then cut into one part per task ([`Sink::split`]), so tasks own
//! disjoint rows and run without locks:
//!
//! * [`Fill::Decode`]: one task per whole chunk, decoded into its part;
//! * [`Fill::Copy`]: tasks of about [`TASK_NNZ`] nonzeros, copied (or handed
//!   row by row to the output) from the chunk decoded beforehand;
//! * [`Fill::Scatter`]: one part per row, and one task per chunk decoding
//!   every row any output wants from it straight into that row's part (or,
//!   for an output of fixed-width rows, into the worker's scratch, whence
//!   the part writes it).

use std::ops::Range;

use rayon::prelude::*;

use crate::engine::decoded::{in_tile, DecodedChunk, Unit};
use crate::engine::decoder::output_len;
use crate::engine::genes::{GeneSelection, RowMapper};
use crate::engine::plan::{Fill, ReadPlan, Segment};
use crate::engine::pool::Engine;
use crate::engine::sink::{convert, split_off, AddedRows, RowGenes, Sink, SinkPart};
use crate::engine::RowOut;
use crate::error::{Error, Result};
use crate::format::tile::TileView;
use crate::kernels::{Count, DecodedCount, Stores};

/// Target of nonzeros per copy task: big enough to amortise scheduling,
/// small enough to spread a batch over every worker.
pub(crate) const TASK_NNZ: usize = 1 << 15;

/// What a plan's tasks read: the fetched tiles, and the chunks decoded for
/// its copied segments.
pub(crate) trait Sources: Sync {
    /// Tile `tile` (fetched and checked).
    fn view(&self, tile: usize) -> TileView<'_>;
    /// Chunk `unit`, decoded (every chunk the plan copies from).
    fn decoded(&self, unit: Unit) -> &DecodedChunk;
    /// Where tile `tile`'s genes land in the output columns, for rows the
    /// scatter fill decodes: each is mapped where it was decoded, so the
    /// mapping must keep every gene (a copied chunk was mapped as it was
    /// decoded, and is not mapped again). `None`: the rows are as stored.
    fn remap(&self, _tile: usize) -> Option<&GeneSelection> {
        None
    }
}

/// One task's rows: `local` rows of one chunk, and how they are filled.
struct Task {
    tile: usize,
    chunk: usize,
    local: Range<usize>,
    fill: Fill,
    /// Whether the output keeps rows as stored.
    stores: bool,
    /// Stored nonzeros of the rows.
    nnz: usize,
}

/// The error for an output that cannot take the fill the plan chose.
fn contract(what: &str) -> Error {
    Error::Input(format!("the output {what}"))
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

/// The genes of an output's rows, all copied from decoded chunks.
struct CopiedGenes<'s> {
    sources: &'s dyn Sources,
    segments: &'s [Segment],
}

impl RowGenes for CopiedGenes<'_> {
    fn genes(&self, row: usize) -> &[i32] {
        let s = &self.segments[self.segments.partition_point(|s| s.out_row <= row) - 1];
        let chunk = self.sources.decoded((s.tile, s.chunk));
        chunk.row(s.local.start + (row - s.out_row)).0
    }
}

/// Sizes the output of `segments` and lists its tasks with their row cuts.
fn size_output<S: Sink>(
    sources: &dyn Sources,
    segments: &[Segment],
    sink: &mut S,
) -> Result<(Vec<Task>, Vec<usize>)> {
    let stores = sink.stores_rows();
    // Rows written one by one come from a decoded chunk, or are scattered
    // from their chunk into an output of fixed-width rows (sized by their
    // number alone); only rows kept as stored are decoded into whole chunks.
    let fits = |s: &Segment| match s.fill {
        Fill::Copy => true,
        Fill::Scatter => !sink.sizes_rows(),
        Fill::Decode => false,
    };
    if !stores && !segments.iter().all(fits) {
        return Err(contract(
            "does not keep rows as stored, so each of its rows must come from a decoded chunk \
             or, for rows of a fixed width, be scattered from its chunk",
        ));
    }
    let mut offsets =
        Vec::with_capacity(segments.last().map_or(0, |s| s.out_row + s.local.len()) + 1);
    offsets.push(0i64);
    let mut total = 0i64;
    for s in segments {
        // A copied row is as long as in its decoded chunk (whose genes may
        // have been mapped, some dropped); any other, as stored.
        let ip = if s.fill == Fill::Copy {
            let chunk = sources.decoded((s.tile, s.chunk));
            let rows = s.local.start - chunk.cell_lo..=s.local.end - chunk.cell_lo;
            let ip = &chunk.indptr[rows];
            offsets.extend(ip.iter().skip(1).map(|&p| total + (p - ip[0]) as i64));
            (ip[0] as i64, ip[ip.len() - 1] as i64)
        } else {
            let ip = sources.view(s.tile).indptr(s.local.start, s.local.end);
            offsets.extend(ip.iter().skip(1).map(|&p| total + (p - ip[0])));
            (ip[0], ip[ip.len() - 1])
        };
        total += ip.1 - ip.0;
    }
    let copied = CopiedGenes { sources, segments };
    // Only an output whose row lengths depend on the genes asks for them
    // (and then every row was copied from a decoded chunk).
    let rows = if sized_by_genes(sink) {
        AddedRows::with_genes(&offsets, &copied)
    } else {
        AddedRows::new(&offsets)
    };
    sink.extend(&rows)?;
    let mut tasks: Vec<Task> = Vec::new();
    for s in segments {
        // Rows `rows` of the segment (relative to its first), as a task.
        let task = |rows: Range<usize>| Task {
            tile: s.tile,
            chunk: s.chunk,
            local: s.local.start + rows.start..s.local.start + rows.end,
            fill: s.fill,
            stores,
            nnz: (offsets[s.out_row + rows.end] - offsets[s.out_row + rows.start]) as usize,
        };
        let n = s.local.len();
        match s.fill {
            Fill::Decode => tasks.push(task(0..n)),
            // Long copies are split so every worker gets a share.
            Fill::Copy => {
                let rows = &offsets[s.out_row..=s.out_row + n];
                tasks.extend(pieces_of(rows, TASK_NNZ).into_iter().map(task));
            }
            Fill::Scatter => tasks.extend((0..n).map(|r| task(r..r + 1))),
        }
    }
    let mut cuts = Vec::with_capacity(tasks.len() + 1);
    cuts.push(0usize);
    for t in &tasks {
        cuts.push(cuts[cuts.len() - 1] + t.local.len());
    }
    Ok((tasks, cuts))
}

/// Fills task `task`'s rows into `part`.
fn run<P: SinkPart>(engine: &Engine, sources: &dyn Sources, task: Task, mut part: P) -> Result<()> {
    match task.fill {
        Fill::Scatter => scatter(engine, sources, vec![(task, part)]),
        Fill::Decode => {
            let view = sources.view(task.tile);
            let stores = Stores::streaming_if(part.streams());
            let (indices, values) = part
                .stored()
                .ok_or_else(|| contract("gave no stored rows to decode into"))?;
            engine
                .with_decoder(|d| d.decode_chunk_with(&view, task.chunk, indices, values, stores))
                .map_err(in_tile(task.tile))
        }
        Fill::Copy => {
            let chunk = sources.decoded((task.tile, task.chunk));
            // Rows mapped with genes dropped, to a part that divides by the
            // cells' totals: one by one, each with its total.
            let totaled = !chunk.totals.is_empty() && part.uses_totals();
            if task.stores && !totaled {
                // The rows are adjacent in the chunk: one span of nonzeros.
                let (g, v) = chunk.rows(task.local);
                let (indices, values) = part
                    .stored()
                    .ok_or_else(|| contract("said it keeps rows as stored but gave none"))?;
                // As a decode into them checks them (an output of the
                // caller's, sized by its own code).
                output_len("indices", g.len(), indices.len())?;
                output_len("values", g.len(), values.len())?;
                indices.copy_from_slice(g);
                convert(values, v);
            } else {
                for (row, cell) in task.local.enumerate() {
                    let (g, v) = chunk.row(cell);
                    match chunk.total(cell).filter(|_| totaled) {
                        Some(total) => part.write_mapped_row(row, g, v, total),
                        None => part.write_row(row, g, v),
                    }
                }
            }
            Ok(())
        }
    }
}

/// Rows from which an output sized by its rows' genes is sized on the
/// pool (a batch's 256 are).
const POOL_SIZED_ROWS: usize = 64;

/// Whether `sink`'s row lengths depend on its rows' genes (it neither
/// keeps rows as stored nor has rows of a fixed width), so that sizing it
/// reads them.
fn sized_by_genes<S: Sink>(sink: &S) -> bool {
    !sink.stores_rows() && sink.sizes_rows()
}

/// Runs `plan` into `sinks` (output `i` into `sinks[i]`, already started),
/// reading what `sources` holds.
pub(crate) fn execute<S: Sink>(
    engine: &Engine,
    plan: &ReadPlan,
    sources: &dyn Sources,
    sinks: &mut [S],
) -> Result<()> {
    let size = |(o, sink): (usize, &mut S)| size_output(sources, plan.output(o), sink);
    // A read of many rows is sized on the pool: an output sized by its
    // rows' genes counts them in parallel, and many outputs (a window's
    // batches) are sized side by side, while the workers would otherwise
    // wait for them (a window's 62 batches took 1 ms of a 37 ms build).
    // A few rows (a small read, a concurrent reader's) are sized on the
    // calling thread, as they are copied.
    let rows: usize = (0..sinks.len())
        .flat_map(|o| plan.output(o))
        .map(|s| s.local.len())
        .sum();
    let by_genes = sinks.iter().any(sized_by_genes);
    let sized: Vec<_> = if rows > POOL_SIZED_ROWS && (by_genes || sinks.len() > 1) {
        engine.install(|| {
            sinks
                .par_iter_mut()
                .enumerate()
                .map(size)
                .collect::<Result<_>>()
        })?
    } else {
        sinks
            .iter_mut()
            .enumerate()
            .map(size)
            .collect::<Result<_>>()?
    };
    let mut work = Vec::new();
    let mut scattered = Vec::new();
    for (sink, (tasks, cuts)) in sinks.iter_mut().zip(sized) {
        for (task, part) in tasks.into_iter().zip(sink.split(&cuts)) {
            if task.fill == Fill::Scatter {
                scattered.push((task, part));
            } else {
                work.push((task, part));
            }
        }
    }
    if !scattered.is_empty() {
        scatter(engine, sources, scattered)?;
    }
    // A small read (a few cells from decoded chunks) is copied on the
    // calling thread: handing it to the pool would cost more than the
    // copy, and concurrent readers then each use their own core.
    let copied: usize = work.iter().map(|(t, _)| t.nnz).sum();
    let small = copied <= 2 * TASK_NNZ && work.iter().all(|(t, _)| t.fill == Fill::Copy);
    if small {
        return work
            .into_iter()
            .try_for_each(|(task, part)| run(engine, sources, task, part));
    }
    engine.install(|| {
        work.into_par_iter()
            .try_for_each(|(task, part)| run(engine, sources, task, part))
    })
}

/// Decodes every scattered row: one task per chunk, its frames decompressed
/// once and each row written straight into its part (then mapped there, for
/// a tile whose genes are remapped). A part that keeps rows as stored and
/// leaves them unread ([`SinkPart::streams`]: plain CSR) is decoded into,
/// by streaming stores; any other (a fixed-width row: dense, tokens; a
/// transformed CSR row) gets its row decoded into the worker's scratch, a
/// chunk's wanted rows at most, and written from there, where the part
/// computes its row in the cache. Each chunk's task owns its rows' parts and
/// drops them when done, so whatever a part does as it is dropped runs on
/// that worker too, in parallel.
fn scatter<P: SinkPart>(
    engine: &Engine,
    sources: &dyn Sources,
    parts: Vec<(Task, P)>,
) -> Result<()> {
    let work = by_chunk(parts);
    engine.install(|| {
        work.into_par_iter().try_for_each_init(
            || {
                let kernels = engine.row_kernels();
                (
                    RowMapper::new(kernels),
                    RowMapper::new(kernels),
                    Scratch::default(),
                )
            },
            |(mapper, scratch_mapper, scratch), ((t, c), mut parts)| {
                let mut rows = Vec::with_capacity(parts.len());
                let mut written = Vec::new();
                for (i, (cell, nnz, part)) in parts.iter_mut().enumerate() {
                    // Decoded into only where the rows stay unread until
                    // the output is handed out, so they are streamed there.
                    // A part that reads them again (rewriting counts as
                    // values) gets them from the scratch instead, still in
                    // the cache, and streams what it makes of them; it asks
                    // for its edge lines now, before the chunk is decoded,
                    // as the decoder does for the rows decoded into.
                    let into = if part.streams() {
                        part.stored()
                    } else {
                        part.prefetch_edges();
                        None
                    };
                    match into {
                        Some(slices) => rows.push((*cell, slices)),
                        None => written.push((*cell, *nnz, i)),
                    }
                }
                if !rows.is_empty() {
                    let streaming = Stores::Streaming;
                    decode_scattered(engine, sources, (t, c), &mut rows, mapper, streaming)?;
                }
                drop(rows);
                if written.is_empty() {
                    return Ok(());
                }
                let mut rows = scratch.lay_out(&mut written);
                // Read back at once: the scratch stays in the cache.
                let cached = Stores::Cached;
                decode_scattered(engine, sources, (t, c), &mut rows, scratch_mapper, cached)?;
                drop(rows);
                let mut start = 0;
                for &(_, nnz, i) in &written {
                    let span = start..start + nnz;
                    parts[i]
                        .2
                        .write_row(0, &scratch.genes[span.clone()], &scratch.counts[span]);
                    start += nnz;
                }
                Ok(())
            },
        )
    })
}

/// A scattered row: its cell (in its tile), its stored nonzeros, its part.
type ScatteredRow<P> = (usize, usize, P);

/// Scattered rows grouped by chunk, the chunks in tile and chunk order:
/// each worker then takes a run of chunks that lie one after the other in
/// their tiles, so their compressed bytes are read in order (the core's
/// prefetchers bring them in ahead). A counting pass over slots, the
/// chunks of each tile met taking consecutive ones: a window's 16,000 rows
/// are grouped in one move each, on the thread that hands them to the pool
/// while its workers wait (a sort of the rows took 0.7 ms of a 37 ms build).
fn by_chunk<P>(parts: Vec<(Task, P)>) -> Vec<(Unit, Vec<ScatteredRow<P>>)> {
    // The tiles met, in order, each with its chunks up to the last met.
    let mut tiles: Vec<(usize, usize)> = Vec::new();
    for (task, _) in &parts {
        match tiles.binary_search_by_key(&task.tile, |t| t.0) {
            Ok(i) => tiles[i].1 = tiles[i].1.max(task.chunk + 1),
            Err(i) => tiles.insert(i, (task.tile, task.chunk + 1)),
        }
    }
    let mut first = Vec::with_capacity(tiles.len());
    let mut slots = 0;
    for &(_, chunks) in &tiles {
        first.push(slots);
        slots += chunks;
    }
    // Every task's tile is listed: the search finds it.
    let slot = |task: &Task| {
        let i = tiles.binary_search_by_key(&task.tile, |t| t.0);
        first[i.unwrap_or_else(|i| i)] + task.chunk
    };
    let at: Vec<usize> = parts.iter().map(|(task, _)| slot(task)).collect();
    let mut sizes = vec![0usize; slots];
    for &a in &at {
        sizes[a] += 1;
    }
    let mut groups: Vec<Vec<ScatteredRow<P>>> = sizes.into_iter().map(Vec::with_capacity).collect();
    for ((task, part), a) in parts.into_iter().zip(at) {
        groups[a].push((task.local.start, task.nnz, part));
    }
    let units = tiles
        .iter()
        .flat_map(|&(t, chunks)| (0..chunks).map(move |c| (t, c)));
    units
        .zip(groups)
        .filter(|(_, rows)| !rows.is_empty())
        .collect()
}

/// Decodes scattered `rows` of chunk `unit` (written as `stores` says,
/// unless the tile's genes are remapped: then they are mapped in place at
/// once, so plainly).
fn decode_scattered<V: DecodedCount>(
    engine: &Engine,
    sources: &dyn Sources,
    (t, c): Unit,
    rows: &mut [RowOut<'_, V>],
    mapper: &mut RowMapper<V>,
    stores: Stores,
) -> Result<()> {
    let remap = sources.remap(t);
    let stores = Stores::streaming_if(stores == Stores::Streaming && remap.is_none());
    engine
        .with_decoder(|d| d.decode_rows(&sources.view(t), c, rows, stores))
        .map_err(in_tile(t))?;
    match remap {
        Some(genes) => map_in_place(genes, mapper, rows).map_err(in_tile(t)),
        None => Ok(()),
    }
}

/// A worker's buffers for the rows of one chunk that are written from a
/// decoded copy (parts that do not keep rows as stored).
#[derive(Default)]
struct Scratch {
    genes: Vec<i32>,
    counts: Vec<i32>,
}

impl Scratch {
    /// Sorts `rows` (`(cell, stored nonzeros, part)`) by cell and lays them
    /// out back to back in the buffers, as the decoder's outputs.
    fn lay_out(&mut self, rows: &mut [(usize, usize, usize)]) -> Vec<RowOut<'_, i32>> {
        // In cell order, as the decoder takes rows: rows of equal cells
        // hold the same values, so its own sort cannot mix them up.
        rows.sort_unstable();
        let len = rows.iter().map(|r| r.1).sum();
        self.genes.resize(len, 0);
        self.counts.resize(len, 0);
        let (mut genes, mut counts) = (&mut self.genes[..], &mut self.counts[..]);
        rows.iter()
            .map(|&(cell, nnz, _)| {
                let slices = (split_off(&mut genes, nnz), split_off(&mut counts, nnz));
                (cell, slices)
            })
            .collect()
    }
}

/// Maps decoded `rows` through `genes` where they lie (every gene kept, so
/// each row keeps its length).
fn map_in_place<V: Count>(
    genes: &GeneSelection,
    mapper: &mut RowMapper<V>,
    rows: &mut [RowOut<'_, V>],
) -> Result<()> {
    for (_, (indices, values)) in rows.iter_mut() {
        let kept = mapper.take(genes, indices, values);
        // Emitted either way, so the mapper's marks are clear for its next row.
        mapper.emit(indices, values);
        if kept != indices.len() {
            return Err(Error::Input(
                "rows decoded into place cannot go through a gene mapping that drops genes".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scattered_rows_group_by_chunk_in_tile_and_chunk_order() {
        let task = |tile, chunk, cell| Task {
            tile,
            chunk,
            local: cell..cell + 1,
            fill: Fill::Scatter,
            stores: true,
            nnz: cell * 10,
        };
        // Rows of three tiles' chunks, in the order a batch lists them; the
        // part is the row's place in that list.
        let rows = [
            (7, 2, 5),
            (3, 0, 1),
            (7, 0, 0),
            (3, 4, 9),
            (7, 2, 4),
            (12, 1, 3),
        ];
        let parts: Vec<(Task, usize)> = rows
            .iter()
            .enumerate()
            .map(|(i, &(t, c, cell))| (task(t, c, cell), i))
            .collect();
        let grouped = by_chunk(parts);
        let units: Vec<Unit> = grouped.iter().map(|g| g.0).collect();
        assert_eq!(units, [(3, 0), (3, 4), (7, 0), (7, 2), (12, 1)]);
        assert_eq!(
            grouped[3].1,
            [(5, 50, 0), (4, 40, 4)],
            "rows keep their order"
        );
        let mut seen: Vec<usize> = grouped
            .iter()
            .flat_map(|g| g.1.iter().map(|r| r.2))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4, 5], "every row once");
        assert!(by_chunk(Vec::<(Task, usize)>::new()).is_empty());
    }

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

//! Chunks decoded whole into buffers of their own: what a read copies rows
//! out of when they are not decoded in place (cached chunks, decoded
//! windows, outputs that transform rows).

use rayon::prelude::*;

use crate::engine::genes::{GeneSelection, RowMapper};
use crate::engine::pool::Engine;
use crate::engine::transform::count_total;
use crate::error::{Error, Result};
use crate::format::tile::TileView;

/// A chunk of a tile: `(tile, chunk)`.
pub(crate) type Unit = (usize, usize);

/// One chunk, decoded: rows `cell_lo .. cell_lo + n_cells` of its tile.
#[derive(Debug, Default)]
pub(crate) struct DecodedChunk {
    /// First cell of the chunk, local to the tile.
    pub cell_lo: usize,
    /// Row offsets into `indices`/`values`, `n_cells + 1` entries from 0
    /// (the arrays may run past the last, see [`DecodedChunk::map_genes`]).
    pub indptr: Vec<usize>,
    /// Gene indices.
    pub indices: Vec<i32>,
    /// Exact counts.
    pub values: Vec<i32>,
    /// Each row's total over all its stored counts, once
    /// [`DecodedChunk::map_genes`] has dropped some of the rows' genes
    /// (normalized values and tokens divide by the cell's total over every
    /// gene it has, not over those kept); empty when no gene was dropped,
    /// each row then summing to its total.
    pub totals: Vec<u64>,
}

impl DecodedChunk {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        8 * self.indptr.len()
            + 4 * self.indices.len()
            + 4 * self.values.len()
            + 8 * self.totals.len()
    }

    /// Bytes a chunk of `nnz` nonzeros in `cells` cells holds once decoded.
    pub fn bytes_for(nnz: usize, cells: usize) -> usize {
        8 * (cells + 1) + 8 * nnz
    }

    /// Maps every row's genes through `genes` in place (kept genes renumbered
    /// to their output columns, in column order; the others dropped), with
    /// `mapper`'s scratch reused: the chunk then holds rows in the output's columns.
    pub fn map_genes(&mut self, genes: &GeneSelection, mapper: &mut RowMapper) {
        let mut to = 0;
        self.totals.clear();
        for r in 0..self.indptr.len() - 1 {
            let (start, end) = (self.indptr[r], self.indptr[r + 1]);
            self.totals.push(count_total(&self.values[start..end]));
            let kept = mapper.take(genes, &self.indices[start..end], &self.values[start..end]);
            // The row was taken in whole before any of it is overwritten,
            // and kept genes are never more than stored ones: `to <= start`.
            mapper.emit(&mut self.indices[to..], &mut self.values[to..]);
            self.indptr[r] = to;
            to += kept;
        }
        let last = self.indptr.len() - 1;
        if to == self.indptr[last] {
            self.totals.clear();
        }
        // The arrays keep their decoded length (the rows end at `to`): a
        // buffer decoded into again is then written over, where one cut to
        // its kept genes was zeroed back up to the decode's length first
        // (7% of a profile of CSR batches over 2,000 genes).
        self.indptr[last] = to;
    }

    /// The genes and counts of local cell `cell` (which must lie in the chunk).
    pub fn row(&self, cell: usize) -> (&[i32], &[i32]) {
        self.rows(cell..cell + 1)
    }

    /// The total over all stored counts of local cell `cell` (in the chunk)
    /// if the chunk's mapping dropped genes (see [`DecodedChunk::totals`]).
    pub fn total(&self, cell: usize) -> Option<u64> {
        self.totals.get(cell - self.cell_lo).copied()
    }

    /// The genes and counts of local cells `cells` (which must lie in the
    /// chunk), back to back: adjacent rows are one span of nonzeros.
    pub fn rows(&self, cells: std::ops::Range<usize>) -> (&[i32], &[i32]) {
        let span = self.indptr[cells.start - self.cell_lo]..self.indptr[cells.end - self.cell_lo];
        (&self.indices[span.clone()], &self.values[span])
    }
}

/// Tags an error of tile `tile` with its index in the dataset.
pub(crate) fn in_tile<E: Into<Error>>(tile: usize) -> impl FnOnce(E) -> Error {
    move |e| Error::InTile {
        tile,
        error: Box::new(e.into()),
    }
}

/// Decodes the chunks `units` whole, in parallel on `engine`, reusing
/// `buffers` (chunks no longer needed) before allocating: the largest chunks
/// get the largest buffers, so that few grow (a grown buffer is fresh memory
/// again). `view(t)` is tile `t`; `remap(t)`, where its genes land in the
/// output columns (each chunk mapped once decoded), or `None`.
pub(crate) fn decode_chunks<'v, 'g>(
    engine: &Engine,
    view: &(dyn Fn(usize) -> TileView<'v> + Sync),
    remap: &(dyn Fn(usize) -> Option<&'g GeneSelection> + Sync),
    units: &[Unit],
    mut buffers: Vec<DecodedChunk>,
) -> Result<Vec<(Unit, DecodedChunk)>> {
    let nnz = |&(t, c): &Unit| view(t).chunk(c).nnz();
    let mut by_size: Vec<Unit> = units.to_vec();
    by_size.sort_by_cached_key(nnz);
    buffers.sort_unstable_by_key(|b| b.indices.capacity().min(b.values.capacity()));
    let work: Vec<(Unit, DecodedChunk)> = by_size
        .into_iter()
        .rev()
        .map(|u| (u, buffers.pop().unwrap_or_default()))
        .collect();
    engine.install(|| {
        work.into_par_iter()
            .map_init(
                || RowMapper::new(engine.row_kernels()),
                |mapper, ((t, c), mut chunk)| {
                    let tile = view(t);
                    let e = tile.chunk(c);
                    let n = e.nnz() as usize;
                    chunk.cell_lo = e.cell_lo as usize;
                    chunk.indptr.clear();
                    chunk.indptr.extend(
                        tile.indptr(e.cell_lo as usize, e.cell_hi as usize)
                            .iter()
                            .map(|&p| (p as u64 - e.nnz_lo) as usize),
                    );
                    // Shrinking writes nothing; the decode overwrites all `n`.
                    chunk.indices.resize(n, 0);
                    chunk.values.resize(n, 0);
                    chunk.totals.clear();
                    engine
                        .with_decoder(|d| {
                            d.decode_chunk(&tile, c, &mut chunk.indices, &mut chunk.values)
                        })
                        .map_err(in_tile(t))?;
                    if let Some(genes) = remap(t) {
                        chunk.map_genes(genes, mapper);
                    }
                    Ok(((t, c), chunk))
                },
            )
            .collect()
    })
}

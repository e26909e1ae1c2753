//! Training batches cut from a decoded window: the path of gene selections
//! and dense rows (CSR batches of every gene are built straight from the
//! chunks, see [`super::scatter`]).
//!
//! Every batch of a block-shuffle window draws its cells from all of the
//! window's chunks, so the window's tiles are decoded whole, once, straight
//! into buffers kept from the previous window (the scan's path: each chunk
//! decoded by one worker into its slice, no per-row bookkeeping, no page
//! faults once warm). A batch is then a copy of its rows out of those
//! buffers, in parallel pieces on the pool.
//!
//! A window's output is the iterator's cache, either way: [`WindowBudget`]
//! decides from the manifest whether the largest window fits the configured
//! bound together with its compressed tiles, and how many bytes are left for
//! the tile cache.

use rayon::prelude::*;

use crate::csr::Csr;
use crate::dataset::cache::ChunkCache;
use crate::dataset::read::{pieces_of, split_off, ReadStats};
use crate::dataset::select::GeneSelection;
use crate::dataset::Dataset;
use crate::error::Result;

/// Nonzeros copied per parallel piece of a batch: enough to amortise
/// scheduling, few enough to spread one batch over every worker.
const PIECE_NNZ: usize = 1 << 16;

/// Whether decoded windows fit the iterator's memory bound, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowBudget {
    /// Bytes of the tile cache once the largest decoded window is set aside.
    pub(crate) tile_cache_bytes: usize,
}

impl WindowBudget {
    /// The budget for windows of `windows` (each a list of tiles) under a
    /// bound of `cache_bytes`: the largest window decoded (8 bytes per
    /// nonzero and per cell, plus an eighth of room), its compressed tiles in
    /// the cache, and the next window's tiles being fetched ahead must all fit. `None` when they do
    /// not: batches are then assembled chunk by chunk through a cache that
    /// re-decodes what it had to evict.
    pub(crate) fn new<'w>(
        dataset: &Dataset,
        windows: impl Iterator<Item = &'w [usize]>,
        cache_bytes: usize,
    ) -> Option<WindowBudget> {
        let m = dataset.manifest();
        let (mut decoded, mut compressed) = (0u64, 0u64);
        for tiles in windows {
            let sum =
                |f: &dyn Fn(usize) -> u64| tiles.iter().fold(0u64, |a, &t| a.saturating_add(f(t)));
            decoded = decoded.max(sum(&|t| {
                m.tile_nnz[t]
                    .saturating_add(m.tile_cells[t])
                    .saturating_add(1)
                    .saturating_mul(8)
            }));
            compressed = compressed.max(sum(&|t| m.tile_bytes[t]));
        }
        // Batches built in fresh buffers get an eighth more room (see
        // `scatter::sized`): counted here, so the bound holds either way.
        let decoded = decoded.saturating_add(decoded / 8);
        let rest = (cache_bytes as u64).checked_sub(decoded)?;
        (rest >= 2 * compressed).then(|| WindowBudget {
            tile_cache_bytes: (rest - compressed) as usize,
        })
    }
}

/// The decoded rows of the window being served.
#[derive(Default)]
pub(crate) struct WindowRows {
    /// The window decoded into `rows` (its index in the epoch order).
    window: Option<usize>,
    /// Its tiles, in the order of `rows`.
    tiles: Vec<usize>,
    /// Every row of each tile; the buffers outlive the window, so a warm
    /// iterator decodes without allocating.
    rows: Vec<Csr<f32>>,
}

/// Where a batch's rows go: CSR or dense, built a window piece at a time.
pub(crate) enum BatchOut {
    Csr(Csr<f32>),
    Dense { n_cols: usize, data: Vec<f32> },
}

impl WindowRows {
    /// Makes window `w` (tiles `tiles`) the decoded one, decoding it unless it
    /// already is.
    pub(crate) fn enter(
        &mut self,
        dataset: &Dataset,
        w: usize,
        tiles: &[usize],
        genes: Option<&GeneSelection>,
        cache: &ChunkCache,
    ) -> Result<ReadStats> {
        if self.window == Some(w) {
            return Ok(ReadStats::default());
        }
        self.window = None;
        self.tiles.clear();
        self.tiles.extend_from_slice(tiles);
        if self.rows.len() < tiles.len() {
            self.rows.resize_with(tiles.len(), || Csr::empty(0));
        }
        let outs = &mut self.rows[..tiles.len()];
        let stats = match genes {
            None => dataset.read_tiles_into(tiles, None, cache, outs)?,
            // A selection is gathered from chunks decoded in full: one tile
            // at a time keeps that transient to a tile's worth.
            Some(_) => {
                let mut stats = ReadStats::default();
                for (t, out) in tiles.iter().zip(outs.chunks_mut(1)) {
                    stats.add(dataset.read_tiles_into(&[*t], genes, cache, out)?);
                }
                stats
            }
        };
        self.window = Some(w);
        Ok(stats)
    }

    /// Appends the rows of `cells` (all in the decoded window) to `out`.
    pub(crate) fn append(
        &self,
        dataset: &Dataset,
        cells: &[u64],
        out: &mut BatchOut,
    ) -> Result<()> {
        let rows: Vec<(usize, usize)> = cells
            .iter()
            .map(|&c| {
                let (tile, local) = dataset.locate(c)?;
                let slot = self
                    .tiles
                    .iter()
                    .position(|&t| t == tile)
                    .expect("a window's cells lie in its tiles");
                Ok((slot, local))
            })
            .collect::<Result<_>>()?;
        let span = |&(slot, local): &(usize, usize)| {
            let ip = &self.rows[slot].indptr;
            ip[local] as usize..ip[local + 1] as usize
        };
        match out {
            BatchOut::Csr(csr) => {
                let first_row = csr.n_rows();
                let mut total = *csr.indptr.last().expect("indptr starts at 0");
                for r in &rows {
                    total += span(r).len() as i64;
                    csr.indptr.push(total);
                }
                let start = csr.indices.len();
                csr.indices.resize(total as usize, 0);
                csr.values.resize(total as usize, 0.0);
                let indptr = &csr.indptr[first_row..];
                let mut pieces = Vec::new();
                let (mut idx_rest, mut val_rest) =
                    (&mut csr.indices[start..], &mut csr.values[start..]);
                for rows_range in pieces_of(indptr, PIECE_NNZ) {
                    let len = (indptr[rows_range.end] - indptr[rows_range.start]) as usize;
                    pieces.push((
                        &rows[rows_range],
                        split_off(&mut idx_rest, len),
                        split_off(&mut val_rest, len),
                    ));
                }
                dataset.engine().install(|| {
                    pieces.into_par_iter().for_each(|(rows, indices, values)| {
                        let mut at = 0;
                        for r in rows {
                            let src = &self.rows[r.0];
                            let s = span(r);
                            let n = s.len();
                            indices[at..at + n].copy_from_slice(&src.indices[s.clone()]);
                            values[at..at + n].copy_from_slice(&src.values[s]);
                            at += n;
                        }
                    })
                });
            }
            BatchOut::Dense { n_cols, data } => {
                let n_cols = *n_cols;
                let start = data.len();
                data.resize(start + rows.len() * n_cols, 0.0);
                if n_cols > 0 {
                    dataset.engine().install(|| {
                        data[start..]
                            .par_chunks_mut(n_cols)
                            .zip(rows.par_iter())
                            .for_each(|(dense, r)| {
                                let src = &self.rows[r.0];
                                let s = span(r);
                                for (&col, &v) in src.indices[s.clone()].iter().zip(&src.values[s])
                                {
                                    dense[col as usize] = v;
                                }
                            })
                    });
                }
            }
        }
        Ok(())
    }
}

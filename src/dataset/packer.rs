//! Cells in, tiles out: the row checks every writer shares.
//!
//! A block of cells arrives as CSR over *source* columns. Each row is checked
//! (indices inside the source, values that are counts, no gene twice), its
//! columns mapped to output columns (a gene order, or a corpus vocabulary
//! that drops some), sorted, and appended to the tile being filled; a full
//! tile is handed to the caller. The dataset writer and the build's write
//! tasks both pack through this, so a cell becomes the same tile row whichever
//! path wrote it.

use crate::csr::{Csr, CsrRef};
use crate::error::{Error, Result};
use crate::format::tile_writer::CountSource;

/// Packs checked, mapped rows into tiles of `tile_size` cells.
pub(crate) struct TilePacker {
    n_source: u32,
    /// Source column -> output column, `-1` dropped; `None`: the identity.
    map: Option<Vec<i32>>,
    n_out: u32,
    tile_size: usize,
    /// Cells waiting for their tile to fill.
    pending: Csr<u32>,
    /// One row's (output column, count, source column), reused; the source
    /// column names a gene given twice as the input numbers it.
    row: Vec<(i32, u32, i32)>,
    cells_in: u64,
}

impl TilePacker {
    /// Rows over `n_source` columns mapped by `map` into `n_out` columns.
    pub(crate) fn new(
        n_source: u32,
        map: Option<Vec<i32>>,
        n_out: u32,
        tile_size: usize,
    ) -> TilePacker {
        TilePacker {
            n_source,
            map,
            n_out,
            tile_size,
            pending: Csr::empty(u64::from(n_out)),
            row: Vec::new(),
            cells_in: 0,
        }
    }

    /// Cells received so far.
    pub(crate) fn cells_in(&self) -> u64 {
        self.cells_in
    }

    /// Replaces the column map (the next input of a build), keeping the tile
    /// being filled.
    pub(crate) fn remap(&mut self, n_source: u32, map: Option<Vec<i32>>) {
        self.n_source = n_source;
        self.map = map;
    }

    /// Appends `block` (rows are cells, columns source genes), handing each
    /// tile that fills to `full`.
    pub(crate) fn push<V: CountSource>(
        &mut self,
        block: CsrRef<'_, V>,
        mut full: impl FnMut(Csr<u32>) -> Result<()>,
    ) -> Result<()> {
        if block.n_cols != u64::from(self.n_source) {
            return Err(Error::Input(format!(
                "block has {} genes, the input {}",
                block.n_cols, self.n_source
            )));
        }
        let nnz = block.indices.len();
        if block.indptr.first() != Some(&0)
            || block.values.len() != nnz
            || block.indptr.last() != Some(&(nnz as i64))
        {
            return Err(Error::Input(
                "block indptr must start at 0 and end at its number of nonzeros".into(),
            ));
        }
        for (r, w) in block.indptr.windows(2).enumerate() {
            let cell = self.cells_in + r as u64;
            if w[1] < w[0] || w[1] as usize > nnz {
                return Err(Error::Input(format!(
                    "cell {cell}: indptr is not non-decreasing within the block"
                )));
            }
            self.row.clear();
            for j in w[0] as usize..w[1] as usize {
                let g = block.indices[j];
                if g < 0 || g as u32 >= self.n_source {
                    return Err(Error::Input(format!(
                        "cell {cell}: gene index {g} outside 0..{}",
                        self.n_source
                    )));
                }
                let v = block.values[j];
                let count = v.to_count().ok_or_else(|| {
                    Error::Input(format!(
                        "cell {cell}: value {v} is not a count in 1..=2^31-1"
                    ))
                })?;
                let out = self.map.as_ref().map_or(g, |m| m[g as usize]);
                if out >= 0 {
                    self.row.push((out, count, g));
                }
            }
            // scipy allows unsorted CSR rows, and a gene order permutes them: sort.
            if self.row.windows(2).any(|p| p[0].0 > p[1].0) {
                self.row.sort_unstable_by_key(|e| e.0);
            }
            if let Some(p) = self.row.windows(2).position(|p| p[0].0 >= p[1].0) {
                return Err(Error::Input(format!(
                    "cell {cell}: gene {} appears twice in its row (the input's gene index, 0-based)",
                    self.row[p].2
                )));
            }
            for &(g, c, _) in &self.row {
                self.pending.indices.push(g);
                self.pending.values.push(c);
            }
            self.pending.indptr.push(self.pending.indices.len() as i64);
            if self.pending.n_rows() == self.tile_size {
                if let Some(tile) = self.take_partial() {
                    full(tile)?;
                }
            }
        }
        self.cells_in += block.n_rows() as u64;
        Ok(())
    }

    /// The cells of the tile being filled, if any (the last tile at the end).
    pub(crate) fn take_partial(&mut self) -> Option<Csr<u32>> {
        (self.pending.n_rows() > 0)
            .then(|| std::mem::replace(&mut self.pending, Csr::empty(u64::from(self.n_out))))
    }
}

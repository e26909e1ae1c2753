//! What `cat` reads: a dataset, or a corpus read as one.

use std::ops::Range;

use deltacells::dataset::{Dataset, GeneSelection};
use deltacells::{Corpus, Csr, Result};

/// A count matrix read piece by piece: a dataset or a corpus.
pub trait Matrix {
    /// Number of rows.
    fn n_cells(&self) -> u64;
    /// Number of columns.
    fn n_genes(&self) -> u32;
    /// The columns' names, when it has them.
    fn var_names(&self) -> Option<&[String]>;
    /// The end of the tile holding `cell` (a corpus's tiles are its
    /// members'): pieces cut there decode each tile once.
    fn tile_end(&self, cell: u64) -> Result<u64>;
    /// Rows `cells` with exact counts, keeping only `genes` when given.
    fn csr(&self, cells: Range<u64>, genes: Option<&GeneSelection>) -> Result<Csr<i32>>;
}

impl Matrix for Dataset {
    fn n_cells(&self) -> u64 {
        Dataset::n_cells(self)
    }

    fn n_genes(&self) -> u32 {
        Dataset::n_genes(self)
    }

    fn var_names(&self) -> Option<&[String]> {
        Dataset::var_names(self)
    }

    fn tile_end(&self, cell: u64) -> Result<u64> {
        let (tile, _) = self.locate(cell)?;
        Ok(self.limits()[tile + 1])
    }

    fn csr(&self, cells: Range<u64>, genes: Option<&GeneSelection>) -> Result<Csr<i32>> {
        Ok(self.read(cells).genes(genes).csr::<i32>()?.csr)
    }
}

impl Matrix for Corpus {
    fn n_cells(&self) -> u64 {
        Corpus::n_cells(self)
    }

    fn n_genes(&self) -> u32 {
        Corpus::n_genes(self)
    }

    /// The vocabulary's gene keys.
    fn var_names(&self) -> Option<&[String]> {
        Some(Corpus::var_names(self))
    }

    fn tile_end(&self, cell: u64) -> Result<u64> {
        let (m, local) = self.locate(cell)?;
        let member = self.members()[m].dataset();
        Ok(self.limits()[m] + member.tile_end(local)?)
    }

    fn csr(&self, cells: Range<u64>, genes: Option<&GeneSelection>) -> Result<Csr<i32>> {
        Ok(self.read(cells).genes(genes).csr::<i32>()?.csr)
    }
}

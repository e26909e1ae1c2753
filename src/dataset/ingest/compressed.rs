//! Compressed sparse arrays (`indptr`, `indices`, `data`) read front to back
//! in blocks of whole major rows, each block checked and turned into counts.
//!
//! One reader serves CSR inputs (major = cell: blocks go to the writer as
//! they are) and CSC inputs (major = gene: blocks go to the out-of-core
//! transpose), whether the arrays come from an `.npz` stream or an HDF5
//! dataset.

use crate::csr::Csr;
use crate::error::{Error, Result};

use super::counts::{count, not_a_count, Rows};

/// A 1-D array read front to back in pieces.
pub(crate) trait Seq<T> {
    /// Appends the next `n` elements to `out`.
    fn next(&mut self, n: usize, out: &mut Vec<T>) -> Result<()>;

    /// Passes over the next `n` elements; reads and drops them unless the
    /// sequence can move without reading.
    fn skip(&mut self, n: usize) -> Result<()> {
        let mut scratch = Vec::new();
        let mut left = n;
        while left > 0 {
            let piece = left.min(INDPTR_PIECE);
            scratch.clear();
            self.next(piece, &mut scratch)?;
            left -= piece;
        }
        Ok(())
    }

    /// Called once after the last element: checks what can only be checked
    /// at the end (an archive member's CRC, say).
    fn end(&mut self) -> Result<()> {
        Ok(())
    }
}

/// What the major and minor axes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Major {
    /// CSR by cell: majors are cells, minors genes.
    Cells,
    /// CSC by cell: majors are genes, minors cells.
    Genes,
}

/// indptr values fetched at once.
const INDPTR_PIECE: usize = 1 << 16;

/// The three arrays of a compressed sparse matrix, read in blocks.
pub(crate) struct Compressed<P, I, D> {
    indptr: P,
    indices: I,
    data: D,
    major: Major,
    n_major: u64,
    n_minor: u64,
    nnz: u64,
    /// Where errors say the arrays come from (file and path).
    source: String,
    /// Majors handed out so far.
    done: u64,
    /// indptr values fetched so far.
    fetched: u64,
    /// Fetched indptr values not consumed yet; `ptr[0]` starts major `done`.
    ptr: Vec<i64>,
    /// Block size: nonzeros read at once (at least one whole major).
    block_nnz: u64,
    /// Minor remapping (new index, or -1 to drop), e.g. a feature-type filter.
    remap: Option<Vec<i32>>,
    indices_buf: Vec<i64>,
    data_buf: Vec<f64>,
    ended: bool,
}

/// One block of majors: `indptr` starts at 0; minors as mapped; zeros dropped.
pub(crate) struct Block {
    /// The first major of the block.
    pub first: u64,
    pub csr: Csr<u32>,
}

impl<P: Seq<i64>, I: Seq<i64>, D: Seq<f64>> Compressed<P, I, D> {
    /// `nnz` is the length of `indices` and `data`, `indptr` has `n_major + 1` entries.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        source: String,
        (indptr, indices, data): (P, I, D),
        major: Major,
        n_major: u64,
        n_minor: u64,
        nnz: u64,
        block_nnz: usize,
    ) -> Self {
        Compressed {
            indptr,
            indices,
            data,
            major,
            n_major,
            n_minor,
            nnz,
            source,
            done: 0,
            fetched: 0,
            ptr: Vec::new(),
            block_nnz: block_nnz.max(1) as u64,
            remap: None,
            indices_buf: Vec::new(),
            data_buf: Vec::new(),
            ended: false,
        }
    }

    /// Maps minor `m` to `remap[m]` and drops those mapped to -1; the block's
    /// minor count becomes the number kept.
    #[cfg_attr(not(feature = "hdf5"), allow(dead_code))]
    pub(crate) fn with_remap(mut self, remap: Vec<i32>) -> Self {
        self.remap = Some(remap);
        self
    }

    /// Before the first block: starts at major `major` (at most `n_major`).
    /// The indptr values before it are not read, so not checked: a reader
    /// that seeks relies on a pass that read them all (a build's statistics
    /// pass); what it does read is checked as always.
    pub(crate) fn seek(&mut self, major: u64) -> Result<()> {
        if self.done != 0 || self.fetched != 0 || major > self.n_major {
            return Err(self.bad(format!(
                "cannot start at {} {major} (of {}) after reading",
                self.major_name(),
                self.n_major
            )));
        }
        if major == 0 {
            return Ok(());
        }
        self.indptr.skip(major as usize)?;
        self.fetched = major;
        self.done = major;
        self.refill()?;
        let start = self.ptr[0];
        if start < 0 || start as u64 > self.nnz {
            return Err(self.bad(format!(
                "indptr[{major}] = {start} is outside 0..={}",
                self.nnz
            )));
        }
        self.indices.skip(start as usize)?;
        self.data.skip(start as usize)?;
        Ok(())
    }

    fn bad(&self, msg: impl std::fmt::Display) -> Error {
        Error::Input(format!("{}: {msg}", self.source))
    }

    /// Fetches more indptr values, checking they start at 0, never decrease,
    /// and end at `nnz`.
    fn refill(&mut self) -> Result<()> {
        let total = self.n_major + 1;
        let n = (total - self.fetched).min(INDPTR_PIECE as u64) as usize;
        let before = self.ptr.len();
        self.indptr.next(n, &mut self.ptr)?;
        for k in before..self.ptr.len() {
            let at = self.fetched + (k - before) as u64;
            let v = self.ptr[k];
            let prev = if k > 0 { Some(self.ptr[k - 1]) } else { None };
            if at == 0 && v != 0 {
                return Err(self.bad(format!("indptr starts at {v}, not 0")));
            }
            if prev.is_some_and(|p| v < p) || v < 0 || v as u64 > self.nnz {
                return Err(self.bad(format!(
                    "indptr[{at}] = {v} is decreasing or outside 0..={}",
                    self.nnz
                )));
            }
            if at == self.n_major && v as u64 != self.nnz {
                return Err(self.bad(format!(
                    "indptr ends at {v}, the arrays hold {} nonzeros",
                    self.nnz
                )));
            }
        }
        self.fetched += n as u64;
        Ok(())
    }

    /// The next block of whole majors, `None` after the last.
    pub(crate) fn next_block(&mut self) -> Result<Option<Block>> {
        if self.ptr.len() < 2 && self.fetched <= self.n_major {
            self.refill()?;
        }
        if self.done == self.n_major {
            if !self.ended {
                self.ended = true;
                self.indptr.end()?;
                self.indices.end()?;
                self.data.end()?;
            }
            return Ok(None);
        }
        // Majors while the block stays within its size (at least one).
        let start = self.ptr[0];
        let mut k = 1;
        while k + 1 < self.ptr.len() && (self.ptr[k + 1] - start) as u64 <= self.block_nnz {
            k += 1;
        }
        let end = self.ptr[k];
        let n = (end - start) as usize;
        self.indices_buf.clear();
        self.data_buf.clear();
        self.indices.next(n, &mut self.indices_buf)?;
        self.data.next(n, &mut self.data_buf)?;
        let n_minor_out = self.remap.as_ref().map_or(self.n_minor, |r| {
            r.iter().filter(|&&m| m >= 0).count() as u64
        });
        let mut csr = Csr::empty(n_minor_out);
        csr.indptr.reserve(k);
        csr.indices.reserve(n);
        csr.values.reserve(n);
        for r in 0..k {
            let major = self.done + r as u64;
            for j in (self.ptr[r] - start) as usize..(self.ptr[r + 1] - start) as usize {
                let minor = self.indices_buf[j];
                if minor < 0 || minor as u64 >= self.n_minor {
                    return Err(self.bad(format!(
                        "{} {major}: index {minor} outside 0..{}",
                        self.major_name(),
                        self.n_minor
                    )));
                }
                let v = self.data_buf[j];
                let (cell, gene) = match self.major {
                    Major::Cells => (major, minor as u64),
                    Major::Genes => (minor as u64, major),
                };
                let c = count(v).ok_or_else(|| not_a_count(&self.source, cell, gene, v))?;
                let mapped = match &self.remap {
                    Some(remap) => remap[minor as usize],
                    None => minor as i32,
                };
                if c > 0 && mapped >= 0 {
                    csr.indices.push(mapped);
                    csr.values.push(c);
                }
            }
            csr.indptr.push(csr.indices.len() as i64);
        }
        let first = self.done;
        self.done += k as u64;
        self.ptr.drain(..k);
        Ok(Some(Block { first, csr }))
    }

    fn major_name(&self) -> &'static str {
        match self.major {
            Major::Cells => "cell",
            Major::Genes => "gene",
        }
    }
}

impl<P: Seq<i64>, I: Seq<i64>, D: Seq<f64>> Rows for Compressed<P, I, D> {
    fn next_block(&mut self) -> Result<Option<Csr<u32>>> {
        debug_assert_eq!(self.major, Major::Cells);
        Ok(Compressed::next_block(self)?.map(|b| b.csr))
    }

    fn seek(&mut self, cell: u64) -> Result<u64> {
        debug_assert_eq!(self.major, Major::Cells);
        Compressed::seek(self, cell)?;
        Ok(cell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<T: Copy> Seq<T> for std::vec::IntoIter<T> {
        fn next(&mut self, n: usize, out: &mut Vec<T>) -> Result<()> {
            for _ in 0..n {
                out.push(Iterator::next(self).ok_or_else(|| Error::Input("short".into()))?);
            }
            Ok(())
        }
    }

    fn reader(
        indptr: Vec<i64>,
        indices: Vec<i64>,
        data: Vec<f64>,
        block: usize,
    ) -> Compressed<std::vec::IntoIter<i64>, std::vec::IntoIter<i64>, std::vec::IntoIter<f64>> {
        let (n, nnz) = (indptr.len() as u64 - 1, indices.len() as u64);
        Compressed::new(
            "m".into(),
            (indptr.into_iter(), indices.into_iter(), data.into_iter()),
            Major::Cells,
            n,
            4,
            nnz,
            block,
        )
    }

    #[test]
    fn blocks_hold_whole_rows_and_drop_zeros() {
        let mut r = reader(
            vec![0, 2, 2, 5, 6],
            vec![0, 3, 1, 2, 3, 0],
            vec![1.0, 0.0, 2.0, 3.0, 4.0, 5.0],
            3,
        );
        let a = Compressed::next_block(&mut r).unwrap().unwrap();
        assert_eq!((a.first, a.csr.indptr.clone()), (0, vec![0, 1, 1]));
        let b = Compressed::next_block(&mut r).unwrap().unwrap();
        assert_eq!((b.first, b.csr.indptr.clone()), (2, vec![0, 3]));
        assert_eq!(b.csr.values, vec![2, 3, 4]);
        let c = Compressed::next_block(&mut r).unwrap().unwrap();
        assert_eq!((c.first, c.csr.indices.clone()), (3, vec![0]));
        assert!(Compressed::next_block(&mut r).unwrap().is_none());
    }

    #[test]
    fn refuses_bad_indptr_index_and_value() {
        let err = |r: &mut Compressed<_, _, _>| loop {
            match Compressed::next_block(r) {
                Err(e) => break e.to_string(),
                Ok(None) => panic!("accepted"),
                Ok(Some(_)) => {}
            }
        };
        assert!(err(&mut reader(vec![1, 1], vec![0], vec![1.0], 8)).contains("starts at 1"));
        assert!(err(&mut reader(vec![0, 2, 1], vec![0, 1], vec![1.0; 2], 8)).contains("decreasing"));
        assert!(err(&mut reader(vec![0, 1], vec![0, 1], vec![1.0; 2], 8)).contains("ends at 1"));
        assert!(err(&mut reader(vec![0, 1], vec![4], vec![1.0], 8)).contains("index 4"));
        let e = err(&mut reader(vec![0, 1, 2], vec![0, 2], vec![1.0, 2.5], 8));
        assert!(e.contains("cell 1, gene 2: value 2.5"), "{e}");
    }
}

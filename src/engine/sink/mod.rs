//! Outputs of a read: where execution writes rows.
//!
//! Every read, scan and batch ends in a [`Sink`]. The executor tells it how
//! many rows are coming and how long each is as stored ([`Sink::extend`]),
//! cuts it into parts of consecutive rows ([`Sink::split`]), one per parallel
//! task, and fills the parts on the engine's pool, each output byte written
//! once. A part receives its rows in one of two ways:
//!
//! * **as stored** ([`SinkPart::stored`]): an output that keeps every gene of
//!   every row, in stored order, back to back (CSR rows, [`Csr`]) hands out
//!   its slices and the decoder writes straight into them, with no buffer in
//!   between;
//! * **row by row** ([`SinkPart::write_row`]): any other output (dense rows,
//!   a gene selection, normalized or tokenized rows) gets each row's genes
//!   (ascending) and exact counts, and writes what it makes of them.
//!
//! The library's own outputs here are one module each: `csr` ([`Csr`]),
//! `dense` ([`Dense`]) and `selected` ([`Selected`], any of them over a
//! gene selection); transformed and tokenized rows are sinks of
//! `engine::transform` and `tokenize`.
//!
//! A new output is one implementation of the two traits: rows written into
//! pinned or shared memory, say, with nothing copied after the read:
//!
//! ```
//! use deltacells::engine::{AddedRows, Sink, SinkPart};
//!
//! /// Each cell's total count, one `f64` per row.
//! #[derive(Default)]
//! struct Totals(Vec<f64>);
//!
//! struct TotalsPart<'a>(&'a mut [f64]);
//!
//! impl Sink for Totals {
//!     type Part<'p> = TotalsPart<'p>;
//!     fn stores_rows(&self) -> bool {
//!         false
//!     }
//!     fn start(&mut self, _n_cols: u32) {
//!         self.0.clear();
//!     }
//!     fn extend(&mut self, rows: &AddedRows<'_>) -> deltacells::Result<()> {
//!         self.0.resize(self.0.len() + rows.len(), 0.0);
//!         Ok(())
//!     }
//!     fn split(&mut self, cuts: &[usize]) -> Vec<TotalsPart<'_>> {
//!         let added = cuts.last().copied().unwrap_or(0);
//!         let start = self.0.len() - added;
//!         let mut rest = &mut self.0[start..];
//!         cuts.windows(2)
//!             .map(|w| {
//!                 let (part, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
//!                 rest = tail;
//!                 TotalsPart(part)
//!             })
//!             .collect()
//!     }
//! }
//!
//! impl SinkPart for TotalsPart<'_> {
//!     type Value = f32;
//!     fn stored(&mut self) -> Option<(&mut [i32], &mut [f32])> {
//!         None
//!     }
//!     fn write_row(&mut self, row: usize, _genes: &[i32], counts: &[i32]) {
//!         self.0[row] = counts.iter().map(|&c| f64::from(c)).sum();
//!     }
//! }
//!
//! # fn main() -> deltacells::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("deltacells-sink-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! # let csr = deltacells::Csr { n_cols: 3, indptr: vec![0, 2, 3], indices: vec![0, 2, 1], values: vec![4i32, 1, 7] };
//! # let mut w = deltacells::dataset::DatasetWriter::create(&dir, 3, deltacells::dataset::WriterConfig::default())?;
//! # w.push(csr.as_ref())?;
//! # w.finish()?;
//! let ds = deltacells::open(&dir)?;
//! let mut totals = Totals::default();
//! ds.read(0..2).into_sink(&mut totals)?;
//! assert_eq!(totals.0, [5.0, 7.0]);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

use crate::error::Result;
use crate::kernels::DecodedCount;

mod csr;
mod dense;
mod selected;

pub use csr::CsrPart;
pub use dense::{Dense, DensePart};
pub(crate) use selected::kept_offsets;
pub use selected::{Selected, SelectedPart};

/// The rows an [`Sink::extend`] adds: how many, each one's stored nonzeros,
/// and (for outputs that do not keep rows as stored) each one's genes.
pub struct AddedRows<'a> {
    stored: &'a [i64],
    genes: Option<&'a dyn RowGenes>,
}

/// Where the genes of added rows are found (their decoded chunks).
pub(crate) trait RowGenes: Sync {
    /// The genes of added row `row`, ascending.
    fn genes(&self, row: usize) -> &[i32];
}

impl<'a> AddedRows<'a> {
    /// Rows whose stored nonzeros start at `stored` (`n + 1` offsets from
    /// 0), without their genes: what an output that keeps rows as stored,
    /// or one wrapping another, is told.
    pub fn new(stored: &'a [i64]) -> AddedRows<'a> {
        AddedRows {
            stored,
            genes: None,
        }
    }

    /// Rows as [`AddedRows::new`], with each row's genes from `genes`.
    pub(crate) fn with_genes(stored: &'a [i64], genes: &'a dyn RowGenes) -> AddedRows<'a> {
        AddedRows {
            stored,
            genes: Some(genes),
        }
    }

    /// Number of rows added.
    pub fn len(&self) -> usize {
        self.stored.len().saturating_sub(1)
    }

    /// Whether no row is added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where each row's stored nonzeros start, relative to the first row's
    /// (`len() + 1` offsets from 0): a CSR output's new `indptr` entries.
    pub fn stored_offsets(&self) -> &'a [i64] {
        self.stored
    }

    /// The stored nonzeros of row `row`.
    pub fn stored_nnz(&self, row: usize) -> usize {
        (self.stored[row + 1] - self.stored[row]) as usize
    }

    /// The genes of row `row`, ascending: given to outputs that do not keep
    /// rows as stored (their rows are decoded before the output is sized),
    /// so that one whose row lengths depend on the genes can size itself.
    pub fn genes(&self, row: usize) -> Option<&'a [i32]> {
        self.genes.map(|g| g.genes(row))
    }
}

/// An output of a read (see the module docs).
pub trait Sink: Send {
    /// One task's share of the output: consecutive rows.
    type Part<'p>: SinkPart
    where
        Self: 'p;

    /// Whether rows are kept as stored: every gene, ascending, rows back to
    /// back, so that chunks decode straight into [`SinkPart::stored`].
    fn stores_rows(&self) -> bool;

    /// Whether [`Sink::extend`] needs each row's length (CSR rows do; dense
    /// rows, of a fixed width, need only how many), so that an output
    /// wrapping this one counts the genes it keeps of each row only then.
    fn sizes_rows(&self) -> bool {
        true
    }

    /// Starts an empty output of rows over `n_cols` genes (the dataset's).
    fn start(&mut self, n_cols: u32);

    /// Adds the rows `rows` after those already added (a batch spanning two
    /// decoded windows gets two extends); their contents come through the
    /// parts of the next [`Sink::split`].
    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()>;

    /// Cuts the rows added by the last [`Sink::extend`] at `cuts` (row
    /// indices among them, increasing, from 0 to the number added): part `i`
    /// holds rows `cuts[i]..cuts[i + 1]`, numbered from 0 within the part.
    fn split(&mut self, cuts: &[usize]) -> Vec<Self::Part<'_>>;
}

/// Consecutive rows of a [`Sink`], filled by one task.
pub trait SinkPart: Send {
    /// The count type rows decoded as stored carry.
    type Value: DecodedCount;

    /// The part's rows as stored, back to back: `(gene indices, counts)`
    /// sized to the rows' stored nonzeros. `None` for outputs whose
    /// [`Sink::stores_rows`] is false.
    fn stored(&mut self) -> Option<(&mut [i32], &mut [Self::Value])>;

    /// Writes the part's row `row` from its genes (ascending) and counts.
    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]);

    /// Whether the part's rows depend on each cell's total over all the
    /// genes it has (normalized values, tokens). Rows mapped from a corpus
    /// member's genes into the output's, some dropped, then reach it one by
    /// one through [`SinkPart::write_mapped_row`], with that total.
    fn uses_totals(&self) -> bool {
        false
    }

    /// [`SinkPart::write_row`] for a row mapped from a corpus member's
    /// genes, some of which the mapping dropped: `total` is the sum of all
    /// the cell's stored counts, which its own `counts` may fall short of.
    /// By default the row is written as [`SinkPart::write_row`] writes it.
    fn write_mapped_row(&mut self, row: usize, genes: &[i32], counts: &[i32], total: u64) {
        let _ = total;
        self.write_row(row, genes, counts);
    }

    /// Whether rows decoded into [`SinkPart::stored`] are left unread until
    /// the output is handed out (not rewritten as they are dropped, say),
    /// so the decoder may write them past the cache
    /// ([`Stores::Streaming`](crate::kernels::Stores)). By default not:
    /// then a batch's rows scattered from their chunks reach the part
    /// through [`SinkPart::write_row`], from a decoded copy in the cache.
    fn streams(&self) -> bool {
        false
    }

    /// Asks for the cache lines where the part's slices of the output begin
    /// and end
    /// ([`Stores::prefetch_edges`](crate::kernels::Stores::prefetch_edges)),
    /// ahead of its rows being written: a row composed in the cache is
    /// streamed to the output except for the partial lines at its ends,
    /// whose plain stores wait for their line to come from memory, and a
    /// batch's row shares those lines with rows written long before or
    /// after it. Called for all of a
    /// chunk's rows before the chunk is decoded, so that the page walks and
    /// reads overlap its decoding. By default nothing.
    fn prefetch_edges(&self) {}
}

impl<S: Sink> Sink for &mut S {
    type Part<'p>
        = S::Part<'p>
    where
        Self: 'p;

    fn stores_rows(&self) -> bool {
        (**self).stores_rows()
    }
    fn sizes_rows(&self) -> bool {
        (**self).sizes_rows()
    }
    fn start(&mut self, n_cols: u32) {
        (**self).start(n_cols)
    }
    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        (**self).extend(rows)
    }
    fn split(&mut self, cuts: &[usize]) -> Vec<Self::Part<'_>> {
        (**self).split(cuts)
    }
}

/// The first `len` elements of `rest`, leaving the others in `rest`.
pub(crate) fn split_off<'o, T>(rest: &mut &'o mut [T], len: usize) -> &'o mut [T] {
    let (head, tail) = std::mem::take(rest).split_at_mut(len);
    *rest = tail;
    head
}

/// Grows `buf` to `len` entries of `fill` (never shrinks it); false where
/// the allocator refuses the memory. For outputs whose size the caller
/// chooses (dense rows, token rows): a request far past the machine's
/// memory is then an error, not an abort of the process.
pub(crate) fn grow<T: Copy>(buf: &mut Vec<T>, len: usize, fill: T) -> bool {
    if buf.len() < len {
        if buf.try_reserve_exact(len - buf.len()).is_err() {
            return false;
        }
        buf.resize(len, fill);
    }
    true
}

/// Makes `v` hold `n` elements, of which the first `keep` are kept and the
/// rest are about to be overwritten. A buffer with room is reused without
/// moving its contents; an empty one without room is replaced by a new one
/// with an eighth more room (fresh zeroed pages, faulted in by the tasks as
/// they write, and batches of a similar size fit when it comes back).
fn fit<T: Copy + Default>(v: &mut Vec<T>, keep: usize, n: usize) {
    if keep == 0 && v.capacity() < n {
        *v = vec![T::default(); n + n / 8];
    }
    if v.len() >= n {
        v.truncate(n);
    } else {
        v.resize(n, T::default());
    }
}

/// Converts exact counts into an output's count type.
pub(crate) fn convert<V: DecodedCount>(out: &mut [V], counts: &[i32]) {
    for (o, &c) in out.iter_mut().zip(counts) {
        *o = V::from_u32(c as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::genes::GeneSelection;

    /// A dense output sized in a buffer holding other values (a recycled
    /// batch's, longer than the rows) writes every row whole, an empty row
    /// as zeros, and shows none of what the buffer held.
    #[test]
    fn dense_rows_in_a_reused_buffer_hold_only_what_was_written() {
        let mut dense = Dense::<i32>::in_buffer(vec![7; 20]);
        dense.start(4);
        dense.extend(&AddedRows::new(&[0, 2, 2, 3])).unwrap();
        let mut parts = dense.split(&[0, 1, 3]);
        parts[0].write_row(0, &[1, 3], &[5, 6]);
        parts[1].write_row(0, &[], &[]);
        parts[1].write_row(1, &[0], &[9]);
        drop(parts);
        let want = [0, 5, 0, 6, 0, 0, 0, 0, 9, 0, 0, 0];
        assert_eq!(dense.n_rows(), 3);
        assert_eq!(dense.data(), want);
        let mut fresh = Dense::<i32>::default();
        fresh.start(4);
        fresh.extend(&AddedRows::new(&[0, 2, 2, 3])).unwrap();
        let mut parts = fresh.split(&[0, 3]);
        parts[0].write_row(0, &[1, 3], &[5, 6]);
        parts[0].write_row(2, &[0], &[9]);
        drop(parts);
        assert_eq!(dense, fresh);
        assert_eq!(dense.into_parts(), (4, want.to_vec()));
        // Started again with no rows: nothing of the rows before shows.
        let (_, data) = fresh.clone().into_parts();
        let mut again = Dense::<i32>::in_buffer(data);
        again.start(4);
        assert!(again.data().is_empty());
        assert_eq!(again.into_parts(), (4, Vec::new()));
    }

    /// Rows as a part that divides by totals receives them.
    #[derive(Default)]
    struct Totals(Vec<(Vec<i32>, Vec<i32>, Option<u64>)>);

    struct TotalsPart<'p>(&'p mut Vec<(Vec<i32>, Vec<i32>, Option<u64>)>);

    impl Sink for Totals {
        type Part<'p> = TotalsPart<'p>;
        fn stores_rows(&self) -> bool {
            false
        }
        fn start(&mut self, _n_cols: u32) {}
        fn extend(&mut self, _rows: &AddedRows<'_>) -> Result<()> {
            Ok(())
        }
        fn split(&mut self, _cuts: &[usize]) -> Vec<TotalsPart<'_>> {
            vec![TotalsPart(&mut self.0)]
        }
    }

    impl SinkPart for TotalsPart<'_> {
        type Value = i32;
        fn stored(&mut self) -> Option<(&mut [i32], &mut [i32])> {
            None
        }
        fn write_row(&mut self, _row: usize, genes: &[i32], counts: &[i32]) {
            self.0.push((genes.to_vec(), counts.to_vec(), None));
        }
        fn uses_totals(&self) -> bool {
            true
        }
        fn write_mapped_row(&mut self, _row: usize, genes: &[i32], counts: &[i32], total: u64) {
            self.0.push((genes.to_vec(), counts.to_vec(), Some(total)));
        }
    }

    /// A part behind a selection that divides by totals gets the whole
    /// row's total, or the one a mapped row came with.
    #[test]
    fn a_selection_hands_on_the_whole_rows_total() {
        let genes = GeneSelection::new(5, &[3, 1]).unwrap();
        let mut sink = Totals::default();
        let mut selected = Selected::new(&mut sink, &genes);
        let mut parts = selected.split(&[0, 2]);
        assert!(parts[0].uses_totals());
        parts[0].write_row(0, &[0, 1, 3, 4], &[5, 6, 7, 8]);
        parts[0].write_mapped_row(1, &[1, 2], &[2, 9], 40);
        drop(parts);
        let want = [
            (vec![0, 1], vec![7, 6], Some(26)),
            (vec![1], vec![2], Some(40)),
        ];
        assert_eq!(sink.0, want);
    }
}

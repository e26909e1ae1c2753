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

use std::cell::RefCell;

use rayon::prelude::*;

use crate::csr::Csr;
use crate::engine::genes::{best_row_kernels, GeneSelection, RowMapper};
use crate::engine::transform::count_total;
use crate::error::{Error, Result};
use crate::kernels::rows::stream_part;
use crate::kernels::{Count, DecodedCount, Stores};

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
    /// and end ([`Stores::prefetch_edges`]), ahead of its rows being
    /// written: a row composed in the cache is streamed to the output
    /// except for the partial lines at its ends, whose plain stores wait
    /// for their line to come from memory, and a batch's row shares those
    /// lines with rows written long before or after it. Called for all of a
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

/// CSR rows of every gene: kept as stored, so decoded in place.
impl<V: DecodedCount> Sink for Csr<V> {
    type Part<'p> = CsrPart<'p, V>;

    fn stores_rows(&self) -> bool {
        true
    }

    fn start(&mut self, n_cols: u32) {
        self.n_cols = u64::from(n_cols);
        self.indptr.clear();
        self.indptr.push(0);
    }

    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        let base = *self.indptr.last().unwrap_or(&0);
        let offsets = rows.stored_offsets();
        self.indptr
            .extend(offsets.iter().skip(1).map(|&p| base + p));
        let total = *self.indptr.last().unwrap_or(&0) as usize;
        fit(&mut self.indices, base as usize, total);
        fit(&mut self.values, base as usize, total);
        Ok(())
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<CsrPart<'_, V>> {
        let added = cuts.last().copied().unwrap_or(0);
        let first = self.n_rows() - added;
        let indptr = &self.indptr[first..];
        let start = indptr[0] as usize;
        let (mut idx, mut val) = (&mut self.indices[start..], &mut self.values[start..]);
        cuts.windows(2)
            .map(|w| {
                let rows = &indptr[w[0]..=w[1]];
                let len = (rows[rows.len() - 1] - rows[0]) as usize;
                CsrPart {
                    indptr: rows,
                    indices: split_off(&mut idx, len),
                    values: split_off(&mut val, len),
                }
            })
            .collect()
    }
}

/// Rows of a [`Csr`] output.
pub struct CsrPart<'p, V> {
    indptr: &'p [i64],
    indices: &'p mut [i32],
    values: &'p mut [V],
}

impl<V: DecodedCount> SinkPart for CsrPart<'_, V> {
    type Value = V;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [V])> {
        Some((self.indices, self.values))
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        let (start, end) = self.span(row);
        self.indices[start..end].copy_from_slice(genes);
        convert(&mut self.values[start..end], counts);
    }

    /// A CSR output is read by its caller once the read is done: a batch of
    /// a window after the window is built, a read's rows after all of them.
    fn streams(&self) -> bool {
        true
    }

    fn prefetch_edges(&self) {
        Stores::Streaming.prefetch_edges(self.indices);
        Stores::Streaming.prefetch_edges(self.values);
    }
}

impl<V: bytemuck::Pod> CsrPart<'_, V> {
    /// Where row `row`'s nonzeros lie in the part's slices.
    fn span(&self, row: usize) -> (usize, usize) {
        let start = (self.indptr[row] - self.indptr[0]) as usize;
        (start, (self.indptr[row + 1] - self.indptr[0]) as usize)
    }

    /// Calls `f` with each of the part's rows' values, in order.
    pub(crate) fn for_each_row(&mut self, mut f: impl FnMut(&mut [V])) {
        for r in 0..self.indptr.len() - 1 {
            let (start, end) = self.span(r);
            f(&mut self.values[start..end]);
        }
    }

    /// Writes row `row` from its columns (ascending) and values, which
    /// fill exactly the length the row was sized to. They were composed in
    /// the cache (a transformed or selected row), and nothing reads the
    /// output before it is handed out, so they are streamed, both with one
    /// fence ([`RowKernels::stream_parts`](crate::kernels::rows::RowKernels::stream_parts)).
    pub(crate) fn write_values(&mut self, row: usize, columns: &[i32], values: &[V]) {
        let (start, end) = self.span(row);
        best_row_kernels().stream_parts(&mut [
            stream_part(columns, &mut self.indices[start..end]),
            stream_part(values, &mut self.values[start..end]),
        ]);
    }
}

/// Dense row-major rows: `n_cols` values per row, zeros where nothing is stored.
#[derive(Clone, Debug, Default)]
pub struct Dense<V> {
    n_cols: usize,
    n_rows: usize,
    /// The rows, then (in a reused buffer) whatever it held past them.
    data: Vec<V>,
}

impl<V: PartialEq> PartialEq for Dense<V> {
    fn eq(&self, other: &Dense<V>) -> bool {
        (self.n_cols, self.n_rows, self.data()) == (other.n_cols, other.n_rows, other.data())
    }
}

impl<V> Dense<V> {
    /// Columns per row.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// The values, row after row.
    pub fn data(&self) -> &[V] {
        &self.data[..self.n_rows * self.n_cols]
    }

    /// The values, row after row, and the number of columns.
    pub fn into_parts(mut self) -> (usize, Vec<V>) {
        self.data.truncate(self.n_rows * self.n_cols);
        (self.n_cols, self.data)
    }

    /// No rows, to be built in `data`'s allocation: its contents are
    /// written over, every row zeroed by its part before its stores, so
    /// they are neither zeroed nor dropped first.
    pub(crate) fn in_buffer(data: Vec<V>) -> Dense<V> {
        Dense {
            n_cols: 0,
            n_rows: 0,
            data,
        }
    }
}

impl<V: DecodedCount> Sink for Dense<V> {
    type Part<'p> = DensePart<'p, V>;

    fn stores_rows(&self) -> bool {
        false
    }

    fn sizes_rows(&self) -> bool {
        false
    }

    fn start(&mut self, n_cols: u32) {
        self.n_cols = n_cols as usize;
        self.n_rows = 0;
    }

    /// Sizes the rows without zeroing those the buffer already holds (a
    /// recycled batch's, or rows of an earlier read): every row of a dense
    /// output reaches its part's `write_row`, which zeroes the row just
    /// before its stores, so zeroing it here too would only write it twice.
    /// What the buffer holds past the rows is never read.
    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        let n_rows = self.n_rows + rows.len();
        let too_many = || {
            Error::Input(format!(
                "{n_rows} dense rows of {} columns do not fit in memory: read fewer cells or \
                 genes at a time",
                self.n_cols
            ))
        };
        let len = n_rows.checked_mul(self.n_cols).ok_or_else(too_many)?;
        if !grow(&mut self.data, len, V::default()) {
            return Err(too_many());
        }
        self.n_rows = n_rows;
        Ok(())
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<DensePart<'_, V>> {
        let added = cuts.last().copied().unwrap_or(0);
        let n_cols = self.n_cols;
        let mut rest = &mut self.data[(self.n_rows - added) * n_cols..self.n_rows * n_cols];
        cuts.windows(2)
            .map(|w| DensePart {
                n_cols,
                data: split_off(&mut rest, (w[1] - w[0]) * n_cols),
            })
            .collect()
    }
}

/// Rows of a [`Dense`] output.
pub struct DensePart<'p, V> {
    n_cols: usize,
    data: &'p mut [V],
}

impl<V: DecodedCount> SinkPart for DensePart<'_, V> {
    type Value = V;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [V])> {
        None
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        let values = counts.iter().map(|&c| V::from_u32(c as u32));
        self.write_at(row, genes.iter().copied().zip(values));
    }

    fn prefetch_edges(&self) {
        Stores::Streaming.prefetch_edges(self.data);
    }
}

thread_local! {
    /// The dense row a thread is composing (see [`DensePart::compose`]),
    /// as words that any count type's values fit.
    static ROW: RefCell<Vec<u64>> = RefCell::default();
}

impl<V: Count> DensePart<'_, V> {
    /// The same rows, borrowed for a shorter while.
    pub(crate) fn reborrow(&mut self) -> DensePart<'_, V> {
        DensePart {
            n_cols: self.n_cols,
            data: &mut *self.data,
        }
    }

    /// Writes row `row`: zeros, then what `set` stores into them. Every
    /// write of a dense row comes here, the one place a row is zeroed
    /// (sizing leaves a reused buffer's contents). The row is composed in
    /// the thread's buffer, which stays in cache from row to row, and
    /// streamed to its place whole
    /// ([`RowKernels::stream`](crate::kernels::rows::RowKernels::stream)):
    /// each of its bytes is written there once, in order, without its line
    /// being read first. A row of a buffer last written long before, zeroed
    /// in place and then stored into, took 17% of the samples of a profile
    /// of normalized dense batches (its scattered stores missed the cache
    /// that the zeroing had gone past); composed here and copied plainly,
    /// 11%.
    pub(crate) fn compose(&mut self, row: usize, set: impl FnOnce(&mut [V])) {
        let n = self.n_cols;
        let out = &mut self.data[row * n..(row + 1) * n];
        ROW.with_borrow_mut(|words| {
            let len = (n * size_of::<V>()).div_ceil(size_of::<u64>());
            if words.len() < len {
                words.resize(len, 0);
            }
            let scratch = &mut bytemuck::cast_slice_mut::<u64, V>(&mut words[..len])[..n];
            scratch.fill(V::default());
            set(scratch);
            best_row_kernels().stream(scratch, out);
        });
    }

    /// Writes row `row`'s `values` at `columns` (the other columns stay zero).
    pub(crate) fn write_values(&mut self, row: usize, columns: &[i32], values: &[V]) {
        self.write_at(row, columns.iter().copied().zip(values.iter().copied()));
    }

    /// Writes row `row`: each `(column, value)` of `entries`, zeros
    /// elsewhere.
    fn write_at(&mut self, row: usize, entries: impl Iterator<Item = (i32, V)>) {
        self.compose(row, |out| {
            for (c, v) in entries {
                out[c as usize] = v;
            }
        });
    }
}

/// The offsets of `rows` once `selection` keeps some of their genes (a
/// first 0, then the running total of kept genes after each row), into
/// `kept`: what sizes the rows of an output over a selection. The output
/// is sized before its rows are decoded in parallel, so this would hold
/// every decode thread up: the rows are counted in parallel (on the
/// engine's pool, where a read of many rows is sized), each with the
/// selection's marks (a bit per gene, in L1) rather than its table of
/// columns. Counted one by one, on the thread laying out the batches, with
/// a lookup per gene in the table, the count took 15-18% of a profile of
/// normalized CSR batches over 2,000 genes.
pub(crate) fn kept_offsets(
    selection: &GeneSelection,
    rows: &AddedRows<'_>,
    kept: &mut Vec<i64>,
) -> Result<()> {
    kept.clear();
    kept.resize(rows.len() + 1, 0);
    let count = |(r, k): (usize, &mut i64)| {
        let genes = rows.genes(r).ok_or_else(|| {
            Error::Input("a gene selection needs each row's genes to size its rows".into())
        })?;
        *k = selection.count_kept(genes) as i64;
        Ok::<(), Error>(())
    };
    // In parallel only on a pool's thread (a large read is sized on the
    // engine's pool), never handing a small read's rows to another pool.
    if rayon::current_thread_index().is_some() {
        kept[1..]
            .par_iter_mut()
            .enumerate()
            .with_min_len(ROWS_PER_COUNT)
            .try_for_each(count)?;
    } else {
        kept[1..].iter_mut().enumerate().try_for_each(count)?;
    }
    for r in 1..kept.len() {
        kept[r] += kept[r - 1];
    }
    Ok(())
}

/// Rows [`kept_offsets`] counts in one piece of work: a few thousand
/// genes each, so a piece outweighs handing it to a thread.
const ROWS_PER_COUNT: usize = 16;

/// Any output over a gene selection: each row keeps the selected genes,
/// renumbered to their output columns (`0..k` in the selection's order) and
/// sorted by column, and goes on to `inner`, which sees `k` columns.
pub struct Selected<'g, S> {
    inner: S,
    genes: &'g GeneSelection,
    kept: Vec<i64>,
}

impl<'g, S: Sink> Selected<'g, S> {
    /// `inner` over the genes of `genes`.
    pub fn new(inner: S, genes: &'g GeneSelection) -> Selected<'g, S> {
        Selected {
            inner,
            genes,
            kept: Vec::new(),
        }
    }

    /// The output rows went to.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Sink> Sink for Selected<'_, S> {
    type Part<'p>
        = SelectedPart<'p, S::Part<'p>>
    where
        Self: 'p;

    fn stores_rows(&self) -> bool {
        false
    }

    fn start(&mut self, _n_cols: u32) {
        self.inner.start(self.genes.len() as u32);
    }

    fn sizes_rows(&self) -> bool {
        self.inner.sizes_rows()
    }

    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        if self.genes.keeps_every_gene() || !self.inner.sizes_rows() {
            // Every row keeps its stored length, or the output's rows have
            // a fixed width: no row needs counting.
            return self.inner.extend(&AddedRows::new(rows.stored_offsets()));
        }
        kept_offsets(self.genes, rows, &mut self.kept)?;
        self.inner.extend(&AddedRows::new(&self.kept))
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<Self::Part<'_>> {
        let genes = self.genes;
        self.inner
            .split(cuts)
            .into_iter()
            .map(|inner| SelectedPart {
                inner,
                genes,
                columns: Vec::new(),
                counts: Vec::new(),
                mapper: RowMapper::default(),
            })
            .collect()
    }
}

/// Rows of a [`Selected`] output.
pub struct SelectedPart<'g, P> {
    inner: P,
    genes: &'g GeneSelection,
    columns: Vec<i32>,
    counts: Vec<i32>,
    mapper: RowMapper,
}

impl<P: SinkPart> SinkPart for SelectedPart<'_, P> {
    type Value = P::Value;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [P::Value])> {
        None
    }

    /// The row over the selected genes; an inner part that divides by the
    /// cells' totals gets the whole row's, which the kept genes may fall
    /// short of (a corpus member's tokens, read through its mapping).
    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        let total = self.inner.uses_totals().then(|| count_total(counts));
        self.write_selected(row, (genes, counts), total);
    }

    fn uses_totals(&self) -> bool {
        self.inner.uses_totals()
    }

    fn write_mapped_row(&mut self, row: usize, genes: &[i32], counts: &[i32], total: u64) {
        self.write_selected(row, (genes, counts), Some(total));
    }

    fn prefetch_edges(&self) {
        self.inner.prefetch_edges()
    }
}

impl<P: SinkPart> SelectedPart<'_, P> {
    /// Writes the selected genes of a row to the inner part, with `total`
    /// when it takes one.
    fn write_selected(
        &mut self,
        row: usize,
        (genes, counts): (&[i32], &[i32]),
        total: Option<u64>,
    ) {
        self.columns.resize(genes.len(), 0);
        self.counts.resize(genes.len(), 0);
        let kept = self.mapper.take(self.genes, genes, counts);
        self.mapper.emit(&mut self.columns, &mut self.counts);
        let (columns, counts) = (&self.columns[..kept], &self.counts[..kept]);
        match total {
            Some(total) => self.inner.write_mapped_row(row, columns, counts, total),
            None => self.inner.write_row(row, columns, counts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! The tokenizers' output: fixed-width rows of tokens, values and mask,
//! written by the read pipeline from each row's genes and exact counts.

use std::cell::RefCell;

use super::geneformer::RankScratch;
use super::scgpt::BinScratch;
use super::{Columns, TokenColumns};
use crate::engine::{best_row_kernels, grow, split_off};
use crate::engine::{AddedRows, Sink, SinkPart};
use crate::error::{Error, Result};
use crate::kernels::rows::stream_part;
use crate::kernels::Stores;

/// Tokenized rows: `max_len` entries per row, row after row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenRows {
    /// Entries per row.
    pub max_len: usize,
    /// Token ids, padded with `<pad>`.
    pub input_ids: Vec<i32>,
    /// Each token's value where the model takes one (scGPT's bins; `<cls>`
    /// 0, padding -2), else `None`.
    pub values: Option<Vec<f32>>,
    /// 1 for a token, 0 for padding.
    pub attention_mask: Vec<u8>,
    /// The rows written, while the buffers may be longer than they are (a
    /// batch being built in given-back buffers, see [`Sink::start`]);
    /// `None` once the buffers are cut to the rows.
    unsettled: Option<usize>,
}

impl TokenRows {
    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.unsettled
            .unwrap_or_else(|| self.input_ids.len().checked_div(self.max_len).unwrap_or(0))
    }

    /// No rows, in given-back buffers whatever their contents.
    pub(crate) fn in_buffers(
        input_ids: Vec<i32>,
        values: Option<Vec<f32>>,
        attention_mask: Vec<u8>,
    ) -> TokenRows {
        TokenRows {
            max_len: 0,
            input_ids,
            values,
            attention_mask,
            unsettled: Some(0),
        }
    }

    /// Cuts the buffers to the rows written: what a batch is handed out as.
    pub(crate) fn settle(&mut self) {
        if let Some(n_rows) = self.unsettled.take() {
            let len = n_rows * self.max_len;
            self.input_ids.truncate(len);
            self.attention_mask.truncate(len);
            if let Some(v) = &mut self.values {
                v.truncate(len);
            }
        }
    }
}

/// A [`Sink`] that tokenizes each row it receives (every gene of the row,
/// so that its total is the cell's) with `columns`; rows are cells
/// `cells[0]`, `cells[1]`, ... in the order the read adds them (the cells
/// seed scGPT's sampling).
pub struct TokenSink<'t> {
    columns: &'t TokenColumns,
    cells: &'t [u64],
    /// The rows' buffers: the rows written (always `unsettled`, counted
    /// there), and past them whatever an earlier batch left (see
    /// [`Sink::start`]).
    rows: TokenRows,
    /// The columns the read was started over.
    n_cols: usize,
}

impl<'t> TokenSink<'t> {
    /// An empty output of the rows of `cells`, tokenized by `columns`.
    pub fn new(columns: &'t TokenColumns, cells: &'t [u64]) -> TokenSink<'t> {
        let rows = TokenRows {
            max_len: columns.max_len(),
            ..TokenRows::default()
        };
        TokenSink::resume(columns, cells, rows)
    }

    /// An output that goes on appending to `rows` (written by an earlier
    /// sink of the same `columns`, started, not started again): a batch
    /// built a window at a time. `cells` are all its rows' cells, those
    /// written and those to come.
    pub(crate) fn resume(
        columns: &'t TokenColumns,
        cells: &'t [u64],
        mut rows: TokenRows,
    ) -> TokenSink<'t> {
        rows.unsettled = Some(rows.n_rows());
        TokenSink {
            columns,
            cells,
            rows,
            n_cols: columns.n_cols(),
        }
    }

    /// The rows written.
    pub fn into_rows(self) -> TokenRows {
        let mut rows = self.into_unsettled_rows();
        rows.settle();
        rows
    }

    /// The rows written, the buffers left as long as they are, for a
    /// batch that more rows are written to later ([`TokenSink::resume`])
    /// and that is settled ([`TokenRows::settle`]) when handed out.
    pub(crate) fn into_unsettled_rows(self) -> TokenRows {
        self.rows
    }
}

impl<'t> Sink for TokenSink<'t> {
    type Part<'p>
        = TokenPart<'p>
    where
        Self: 'p;

    fn stores_rows(&self) -> bool {
        false
    }

    fn sizes_rows(&self) -> bool {
        false
    }

    /// Starts over with no rows, keeping what the buffers hold (a batch
    /// built in given-back buffers): every entry of a row is written when
    /// the row is, so zeroing them first (as growing a cleared buffer does)
    /// would write each byte twice, 5-6% of a tokenized batch's time.
    fn start(&mut self, n_cols: u32) {
        self.n_cols = n_cols as usize;
        self.rows.unsettled = Some(0);
        self.rows.max_len = self.columns.max_len();
        if !self.columns.has_values() {
            self.rows.values = None;
        } else if self.rows.values.is_none() {
            self.rows.values = Some(Vec::new());
        }
    }

    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        if self.n_cols != self.columns.n_cols() {
            return Err(Error::Input(format!(
                "a tokenizer resolved for {} genes cannot read rows of {}",
                self.columns.n_cols(),
                self.n_cols
            )));
        }
        let n_rows = self.rows.n_rows() + rows.len();
        if n_rows > self.cells.len() {
            return Err(Error::Input(format!(
                "a token output for {} cells was given {n_rows} rows",
                self.cells.len()
            )));
        }
        let max_len = self.rows.max_len;
        let too_many = || {
            Error::Input(format!(
                "{n_rows} rows of {max_len} tokens do not fit in memory: read fewer cells at a \
                 time, or ask for a shorter max_len"
            ))
        };
        // Grown only: the rows' entries are all written by `write_row`.
        let len = n_rows.checked_mul(max_len).ok_or_else(too_many)?;
        let grown = grow(&mut self.rows.input_ids, len, 0)
            && grow(&mut self.rows.attention_mask, len, 0)
            && self.rows.values.as_mut().is_none_or(|v| grow(v, len, 0.0));
        if !grown {
            return Err(too_many());
        }
        self.rows.unsettled = Some(n_rows);
        Ok(())
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<TokenPart<'_>> {
        let added = cuts.last().copied().unwrap_or(0);
        let width = self.rows.max_len;
        let first = self.rows.n_rows() - added;
        let mut ids = &mut self.rows.input_ids[first * width..];
        let mut mask = &mut self.rows.attention_mask[first * width..];
        let mut values = self.rows.values.as_mut().map(|v| &mut v[first * width..]);
        let columns = self.columns;
        cuts.windows(2)
            .map(|w| {
                let len = (w[1] - w[0]) * width;
                TokenPart {
                    columns,
                    cells: &self.cells[first + w[0]..first + w[1]],
                    width,
                    ids: split_off(&mut ids, len),
                    mask: split_off(&mut mask, len),
                    values: match values.as_mut() {
                        Some(v) => split_off(v, len),
                        None => &mut [],
                    },
                }
            })
            .collect()
    }
}

/// Makes `buf` at least `len` long, filling what it adds with `fill`.
/// Consecutive rows of a [`TokenSink`].
pub struct TokenPart<'p> {
    columns: &'p TokenColumns,
    cells: &'p [u64],
    width: usize,
    ids: &'p mut [i32],
    mask: &'p mut [u8],
    /// Empty for Geneformer, which has no values.
    values: &'p mut [f32],
}

/// An scGPT row composed in the cache, then streamed to its place (see
/// [`TokenPart::write_row`]).
#[derive(Default)]
struct RowBuffers {
    ids: Vec<i32>,
    mask: Vec<u8>,
    values: Vec<f32>,
}

thread_local! {
    /// The buffers a thread tokenizes rows in, kept from row to row and
    /// read to read: a part is often a single row (a batch's row scattered
    /// from its chunk), so buffers of its own would be grown for each.
    static SCRATCH: RefCell<(RankScratch, BinScratch, RowBuffers)> = RefCell::default();
}

impl SinkPart for TokenPart<'_> {
    type Value = i32;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [i32])> {
        None
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        self.write_tokens(row, (genes, counts), None);
    }

    fn uses_totals(&self) -> bool {
        true
    }

    fn write_mapped_row(&mut self, row: usize, genes: &[i32], counts: &[i32], total: u64) {
        self.write_tokens(row, (genes, counts), Some(total));
    }

    fn prefetch_edges(&self) {
        Stores::Streaming.prefetch_edges(self.ids);
        Stores::Streaming.prefetch_edges(self.mask);
        Stores::Streaming.prefetch_edges(self.values);
    }
}

impl TokenPart<'_> {
    /// Writes row `row`'s tokens; `total`, the cell's total where the row
    /// lacks some of its genes.
    ///
    /// An scGPT row is composed in the thread's buffers, in the cache, and
    /// streamed to its place in the batch, its three parts with one fence
    /// ([`RowKernels::stream_parts`](crate::kernels::rows::RowKernels::stream_parts)),
    /// which nothing reads before the batch is handed out: the batch's
    /// lines, long out of the cache, are written without being read first
    /// (scGPT batches 1.5-2.5% faster on one thread; a fence per part rather
    /// than per row cost them about 3% more). A Geneformer row is
    /// written in place: its stores overlap the sort's work, and composed
    /// and streamed it was 1% slower.
    fn write_tokens(&mut self, row: usize, (genes, counts): (&[i32], &[i32]), total: Option<u64>) {
        let width = self.width;
        let span = row * width..(row + 1) * width;
        SCRATCH.with_borrow_mut(|(rank, bins, out)| match &self.columns.kind {
            Columns::Geneformer(g) => g.row(
                (genes, counts),
                total,
                &mut self.ids[span.clone()],
                &mut self.mask[span],
                rank,
            ),
            Columns::ScGpt(s) => {
                out.ids.resize(width, 0);
                out.values.resize(width, 0.0);
                out.mask.resize(width, 0);
                let cell = self.cells[row];
                s.row(
                    cell,
                    (genes, counts),
                    total,
                    &mut out.ids,
                    &mut out.values,
                    &mut out.mask,
                    bins,
                );
                best_row_kernels().stream_parts(&mut [
                    stream_part(&out.ids, &mut self.ids[span.clone()]),
                    stream_part(&out.values, &mut self.values[span.clone()]),
                    stream_part(&out.mask, &mut self.mask[span]),
                ]);
            }
        })
    }
}

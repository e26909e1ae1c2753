//! What a batch's rows are written as: counts (CSR or dense, of every gene
//! or a selection), transformed values (normalized and/or log1p, `f32`) or
//! tokens. Each is the read pipeline's sink of that name, so a batch holds
//! exactly what a read of its cells with the same settings gives
//! ([`crate::dataset::Read::normalize`], [`crate::dataset::Read::tokenize`]).

use std::any::Any;

use crate::csr::Csr;
use crate::dataset::batches::recycler::Recycler;
use crate::dataset::batches::BatchRows;
use crate::engine::{
    AddedRows, CsrPart, Dense, DensePart, GeneSelection, Selected, Sink, SinkPart, Transform,
    Transformed, TransformedCsr, ValuePart, ValueSink,
};
use crate::error::{Error, Result};
use crate::kernels::DecodedCount;
use crate::tokenize::{TokenColumns, TokenSink};

/// How an iterator writes its batches' rows (fixed when it is created).
#[derive(Clone)]
pub(crate) struct BatchOutput {
    /// Dense rows instead of CSR.
    pub dense: bool,
    /// Genes kept, applied by the output.
    pub genes: Option<GeneSelection>,
    /// What is done to counts.
    pub transform: Transform,
    /// Tokens instead of counts.
    pub tokens: Option<TokenColumns>,
}

/// One run of the read pipeline into sinks (one per output of the run): a
/// copy out of decoded chunks, a read through the cache, or a window's
/// batches scattered.
pub(crate) trait Run {
    /// Writes the run's rows into `sinks`.
    fn run<S: Sink>(&mut self, sinks: &mut [S]) -> Result<()>;
}

/// Starts every sink of a run over this many columns (nothing read).
struct Start(u32);

impl Run for Start {
    fn run<S: Sink>(&mut self, sinks: &mut [S]) -> Result<()> {
        for sink in sinks {
            sink.start(self.0);
        }
        Ok(())
    }
}

/// A batch's rows being written.
pub(crate) enum Filling<'a, V> {
    /// Counts or values.
    Rows(CountRows<V>),
    /// Tokens of the batch's cells.
    Tokens(TokenSink<'a>),
}

impl BatchOutput {
    /// Refuses settings that cannot be written as `V`.
    pub(crate) fn check<V: 'static>(&self) -> Result<()> {
        let values = !self.transform.is_identity();
        if values && std::any::TypeId::of::<V>() != std::any::TypeId::of::<f32>() {
            return Err(not_values());
        }
        if self.tokens.is_some() && (values || self.genes.is_some() || self.dense) {
            return Err(Error::Input(
                "a tokenizer reads every gene of a row as counts: ask for tokens without a gene \
                 selection, a transform or dense rows (scGPT takes its own transform)"
                    .into(),
            ));
        }
        self.transform.check()
    }

    /// Whether rows are CSR of every gene as stored, so that chunks may
    /// decode straight into them (plain, or transformed in place).
    pub(crate) fn stores_rows(&self) -> bool {
        !self.dense && self.genes.is_none() && self.tokens.is_none()
    }

    /// Whether a window's batches can be built at once, every row decoded
    /// from its chunk straight into its batch: rows kept as stored, or rows
    /// of a fixed width (dense, tokens), which the batch is sized for by
    /// their number alone.
    pub(crate) fn scatters(&self) -> bool {
        self.stores_rows() || self.dense || self.tokens.is_some()
    }

    /// Bytes of one row of a fixed width over `n_genes` columns as the tiles
    /// decode (dense values, or tokens with their values and mask); `None`
    /// for CSR rows, as long as stored.
    pub(crate) fn row_bytes<V>(&self, n_genes: u32) -> Option<u64> {
        if let Some(tokens) = &self.tokens {
            let values = if tokens.has_values() { 4 } else { 0 };
            return Some(tokens.max_len() as u64 * (4 + 1 + values));
        }
        let width = self
            .genes
            .as_ref()
            .map_or(n_genes as u64, |g| g.len() as u64);
        self.dense
            .then(|| width.saturating_mul(std::mem::size_of::<V>() as u64))
    }

    /// Empty rows for a batch, started for `n_genes` columns through the
    /// same wrappers [`BatchOutput::fill`] writes them through.
    pub(crate) fn start<V: DecodedCount + bytemuck::Pod>(
        &self,
        recycled: &Recycler,
        n_genes: u32,
    ) -> Result<BatchRows<V>> {
        let rows = match &self.tokens {
            Some(_) => BatchRows::Tokens(recycled.take_tokens()),
            None if self.dense => BatchRows::Dense(recycled.take_dense()),
            None => BatchRows::Csr(recycled.take()),
        };
        let mut filling = [Filling::resume(self, rows, &[])?];
        self.fill(&mut filling, &mut Start(n_genes))?;
        let [filling] = filling;
        Ok(filling.finish())
    }

    /// Writes one run's rows into `batches` (each appended to the rows
    /// written before), each through the sink this output is: counts as
    /// stored or over the gene selection, `f32` values (decoded in place
    /// for CSR rows of every gene), or tokens.
    pub(crate) fn fill<V: DecodedCount + bytemuck::Pod>(
        &self,
        batches: &mut [Filling<'_, V>],
        run: &mut impl Run,
    ) -> Result<()> {
        if self.tokens.is_some() {
            let mut sinks = each_as(batches.iter_mut(), |b| match b {
                Filling::Tokens(sink) => Some(sink),
                Filling::Rows(_) => None,
            })?;
            return run.run(&mut sinks);
        }
        let mut rows = each_as(batches.iter_mut(), |b| match b {
            Filling::Rows(rows) => Some(rows),
            Filling::Tokens(_) => None,
        })?;
        let transform = self.transform;
        if transform.is_identity() {
            return match &self.genes {
                Some(g) => run.run(
                    &mut rows
                        .into_iter()
                        .map(|r| Selected::new(r, g))
                        .collect::<Vec<_>>(),
                ),
                None => run.run(&mut rows),
            };
        }
        let values = rows
            .into_iter()
            .map(|r| as_values(r).ok_or_else(not_values))
            .collect::<Result<Vec<_>>>()?;
        if self.stores_rows() {
            let mut sinks = each_as(values, |v| match v {
                CountRows::Csr(csr) => Some(TransformedCsr::new(csr, transform)),
                CountRows::Dense(_) => None,
            })?;
            return run.run(&mut sinks);
        }
        let genes = self.genes.as_ref();
        let mut sinks: Vec<_> = values
            .into_iter()
            .map(|v| Transformed::new(v, genes, transform))
            .collect();
        run.run(&mut sinks)
    }
}

/// Each of `batches` as `pick` takes it (`None`: it was started as another
/// output, an error).
fn each_as<I: IntoIterator, T>(
    batches: I,
    pick: impl FnMut(I::Item) -> Option<T>,
) -> Result<Vec<T>> {
    batches
        .into_iter()
        .map(pick)
        .map(|b| b.ok_or_else(not_started))
        .collect()
}

/// What a batch whose rows were started as another output is told.
pub(crate) fn not_started() -> Error {
    Error::Input("a batch's rows were started as another output than its own".into())
}

/// What a transformed output of counts other than `f32` is told.
fn not_values() -> Error {
    Error::Input("normalized or log1p batches hold f32 values: ask for float32 counts".into())
}

/// The `f32` view of rows of values (`None` for other count types).
fn as_values<V: 'static>(rows: &mut CountRows<V>) -> Option<&mut CountRows<f32>> {
    (rows as &mut dyn Any).downcast_mut::<CountRows<f32>>()
}

impl<'a, V: DecodedCount + bytemuck::Pod> Filling<'a, V> {
    /// Rows started by [`BatchOutput::start`] (and perhaps partly written),
    /// to write more of: tokens need the batch's `cells`, those written and
    /// those to come.
    pub(crate) fn resume(
        output: &'a BatchOutput,
        rows: BatchRows<V>,
        cells: &'a [u64],
    ) -> Result<Filling<'a, V>> {
        Ok(match (rows, &output.tokens) {
            (BatchRows::Csr(csr), None) => Filling::Rows(CountRows::Csr(csr)),
            (BatchRows::Dense(dense), None) => Filling::Rows(CountRows::Dense(dense)),
            (BatchRows::Tokens(rows), Some(columns)) => {
                Filling::Tokens(TokenSink::resume(columns, cells, rows))
            }
            _ => return Err(not_started()),
        })
    }

    /// The rows written (tokens unsettled: see [`BatchRows::settle`]).
    pub(crate) fn finish(self) -> BatchRows<V> {
        match self {
            Filling::Rows(CountRows::Csr(csr)) => BatchRows::Csr(csr),
            Filling::Rows(CountRows::Dense(dense)) => BatchRows::Dense(dense),
            Filling::Tokens(sink) => BatchRows::Tokens(sink.into_unsettled_rows()),
        }
    }
}

impl ValueSink for CountRows<f32> {
    type Values<'p> = CountRowsPart<'p, f32>;

    fn start_values(&mut self, n_cols: u32) {
        Sink::start(self, n_cols)
    }

    fn extend_values(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        Sink::extend(self, rows)
    }

    fn split_values(&mut self, cuts: &[usize]) -> Vec<CountRowsPart<'_, f32>> {
        Sink::split(self, cuts)
    }
}

impl ValuePart for CountRowsPart<'_, f32> {
    fn dense(&mut self) -> Option<DensePart<'_, f32>> {
        match self {
            CountRowsPart::Csr(_) => None,
            CountRowsPart::Dense(p) => Some(p.reborrow()),
        }
    }

    fn write_values(&mut self, row: usize, columns: &[i32], values: &[f32]) {
        match self {
            CountRowsPart::Csr(p) => p.write_values(row, columns, values),
            CountRowsPart::Dense(p) => p.write_values(row, columns, values),
        }
    }

    fn prefetch_edges(&self) {
        SinkPart::prefetch_edges(self)
    }
}

/// Rows of counts or values being written: CSR or dense, by variant.
pub(crate) enum CountRows<V> {
    /// CSR rows.
    Csr(Csr<V>),
    /// Dense row-major rows.
    Dense(Dense<V>),
}

impl<V: DecodedCount> Sink for CountRows<V> {
    type Part<'p> = CountRowsPart<'p, V>;

    fn stores_rows(&self) -> bool {
        match self {
            CountRows::Csr(c) => c.stores_rows(),
            CountRows::Dense(d) => d.stores_rows(),
        }
    }

    fn sizes_rows(&self) -> bool {
        matches!(self, CountRows::Csr(_))
    }

    fn start(&mut self, n_cols: u32) {
        match self {
            CountRows::Csr(c) => c.start(n_cols),
            CountRows::Dense(d) => d.start(n_cols),
        }
    }

    fn extend(&mut self, rows: &AddedRows<'_>) -> Result<()> {
        match self {
            CountRows::Csr(c) => c.extend(rows),
            CountRows::Dense(d) => d.extend(rows),
        }
    }

    fn split(&mut self, cuts: &[usize]) -> Vec<CountRowsPart<'_, V>> {
        match self {
            CountRows::Csr(c) => c.split(cuts).into_iter().map(CountRowsPart::Csr).collect(),
            CountRows::Dense(d) => d
                .split(cuts)
                .into_iter()
                .map(CountRowsPart::Dense)
                .collect(),
        }
    }
}

/// Rows of a [`CountRows`] output.
pub(crate) enum CountRowsPart<'p, V> {
    /// Rows of CSR rows.
    Csr(CsrPart<'p, V>),
    /// Rows of dense rows.
    Dense(DensePart<'p, V>),
}

impl<V: DecodedCount> SinkPart for CountRowsPart<'_, V> {
    type Value = V;

    fn stored(&mut self) -> Option<(&mut [i32], &mut [V])> {
        match self {
            CountRowsPart::Csr(p) => p.stored(),
            CountRowsPart::Dense(p) => p.stored(),
        }
    }

    fn write_row(&mut self, row: usize, genes: &[i32], counts: &[i32]) {
        match self {
            CountRowsPart::Csr(p) => p.write_row(row, genes, counts),
            CountRowsPart::Dense(p) => p.write_row(row, genes, counts),
        }
    }

    fn streams(&self) -> bool {
        match self {
            CountRowsPart::Csr(p) => p.streams(),
            CountRowsPart::Dense(p) => p.streams(),
        }
    }

    fn prefetch_edges(&self) {
        match self {
            CountRowsPart::Csr(p) => p.prefetch_edges(),
            CountRowsPart::Dense(p) => p.prefetch_edges(),
        }
    }
}

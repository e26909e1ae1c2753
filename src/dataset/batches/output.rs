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

    /// Empty rows for the batch of `cells`, started for `n_genes` columns
    /// through the same wrappers [`Filling::fill`] writes them through.
    pub(crate) fn start<'a, V: DecodedCount + bytemuck::Pod>(
        &'a self,
        recycled: &Recycler,
        n_genes: u32,
        cells: &'a [u64],
    ) -> Result<Filling<'a, V>> {
        let mut rows = match &self.tokens {
            Some(tokens) => Filling::Tokens(TokenSink::new(tokens, cells)),
            None if self.dense => Filling::Rows(CountRows::Dense(Dense::default())),
            None => Filling::Rows(CountRows::Csr(recycled.take())),
        };
        rows.fill(self, &mut Start(n_genes))?;
        Ok(rows)
    }

    /// Writes the parts of scattered batches, CSR rows of every gene decoded
    /// straight into `rows`: as stored, or transformed in place.
    pub(crate) fn scatter<V: DecodedCount + bytemuck::Pod>(
        &self,
        mut rows: Vec<&mut Csr<V>>,
        run: &mut impl Run,
    ) -> Result<()> {
        if self.transform.is_identity() {
            return run.run(&mut rows);
        }
        let transform = self.transform;
        let mut sinks = rows
            .into_iter()
            .map(|csr| {
                let values = (csr as &mut dyn Any)
                    .downcast_mut::<Csr<f32>>()
                    .ok_or_else(not_values)?;
                Ok(TransformedCsr::new(values, transform))
            })
            .collect::<Result<Vec<_>>>()?;
        run.run(&mut sinks)
    }
}

/// What a transformed output of counts other than `f32` is told.
fn not_values() -> Error {
    Error::Input("normalized or log1p batches hold f32 values: ask for float32 counts".into())
}

/// The `f32` view of rows of values (`None` for other count types).
fn as_values<V: 'static>(rows: &mut CountRows<V>) -> Option<&mut CountRows<f32>> {
    (rows as &mut dyn Any).downcast_mut::<CountRows<f32>>()
}

impl<V: DecodedCount + bytemuck::Pod> Filling<'_, V> {
    /// Writes one run's rows (appended to those written before).
    pub(crate) fn fill(&mut self, output: &BatchOutput, run: &mut impl Run) -> Result<()> {
        match self {
            Filling::Tokens(sink) => run.run(&mut [sink]),
            Filling::Rows(rows) => {
                let transform = output.transform;
                match (&output.genes, as_values(rows)) {
                    (genes, Some(values)) if !transform.is_identity() => {
                        run.run(&mut [Transformed::new(values, genes.as_ref(), transform)])
                    }
                    (Some(g), _) => run.run(&mut [Selected::new(rows, g)]),
                    (None, _) => run.run(&mut [rows]),
                }
            }
        }
    }

    /// The rows written.
    pub(crate) fn finish(self) -> BatchRows<V> {
        match self {
            Filling::Rows(CountRows::Csr(csr)) => BatchRows::Csr(csr),
            Filling::Rows(CountRows::Dense(dense)) => BatchRows::Dense(dense),
            Filling::Tokens(sink) => BatchRows::Tokens(sink.into_rows()),
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
    fn write_values(&mut self, row: usize, columns: &[i32], values: &[f32]) {
        match self {
            CountRowsPart::Csr(p) => p.write_values(row, columns, values),
            CountRowsPart::Dense(p) => p.write_values(row, columns, values),
        }
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
}

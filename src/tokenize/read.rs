//! `tokenize` on a read of a dataset or a corpus: the request's cells into
//! a [`TokenSink`].

use super::{TokenBatch, TokenColumns, TokenSink, Tokenizer};
use crate::corpus::Corpus;
use crate::dataset::{Read, ReadSource, ReadStats};
use crate::engine::CellSelection;
use crate::error::{Error, Result};

impl Read<'_> {
    /// The rows tokenized by `tokenizer`, for exactly the requested cells in
    /// order. A tokenizer reads every gene of a row (a cell's total is over
    /// all its genes) as stored, so a read with a gene selection, or one
    /// normalized or with logs taken, is refused.
    pub fn tokenize(self, tokenizer: &Tokenizer) -> Result<TokenBatch> {
        let columns = tokenizer.for_dataset(self.request().0)?;
        self.tokens(&columns)
    }
}

impl Read<'_, Corpus> {
    /// The rows tokenized by `tokenizer` over the corpus's vocabulary (see
    /// [`Read::tokenize`]).
    pub fn tokenize(self, tokenizer: &Tokenizer) -> Result<TokenBatch> {
        let columns = tokenizer.for_corpus(self.request().0)?;
        self.tokens(&columns)
    }
}

impl<S: ReadSource> Read<'_, S> {
    /// The rows tokenized by `columns`, a tokenizer already resolved for
    /// this dataset or corpus ([`Tokenizer::for_dataset`],
    /// [`Tokenizer::for_corpus`]): what repeated reads use.
    pub fn tokens(self, columns: &TokenColumns) -> Result<TokenBatch> {
        let (_, cells, selected) = self.request();
        let cells = requested(cells, selected, self.transformed())?;
        tokens_of(cells, columns, |sink| self.into_sink(sink))
    }
}

/// The request's cells, refused when the read selects genes or transforms
/// the counts.
fn requested(cells: &CellSelection, selected: bool, transformed: bool) -> Result<Vec<u64>> {
    if selected {
        return Err(Error::Input(
            "a tokenizer reads every gene of a row: read without a gene selection".into(),
        ));
    }
    if transformed {
        return Err(Error::Input(
            "a tokenizer reads a row's counts as stored (scGPT takes normalize and log1p \
             as settings of its own): read without normalize or log1p"
                .into(),
        ));
    }
    Ok(cells.iter().collect())
}

/// The rows of `cells` that `read` writes into a [`TokenSink`].
fn tokens_of(
    cells: Vec<u64>,
    columns: &TokenColumns,
    read: impl FnOnce(&mut TokenSink<'_>) -> Result<ReadStats>,
) -> Result<TokenBatch> {
    let mut sink = TokenSink::new(columns, &cells);
    let stats = read(&mut sink)?;
    let rows = sink.into_rows();
    Ok(TokenBatch { cells, rows, stats })
}

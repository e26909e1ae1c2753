//! Tokenizers fused into decode: the rows a single-cell foundation model
//! takes, written by the read pipeline as each row decodes.
//!
//! A tokenizer is an output of the one read pipeline: a [`TokenSink`]
//! receives each row's genes and exact counts (every gene of the row, so the
//! cell's total `n_counts` is the row's sum) and writes fixed-width rows of
//! `input_ids` (`<pad>` after the row's tokens), `values` where the model
//! takes them, and `attention_mask` (1 for a token, 0 for padding):
//!
//! * [`Geneformer`]: rank-value encoding, tokens only (the semantics and the
//!   cost of its per-cell sort are in [`geneformer`]'s docs);
//! * [`ScGpt`]: tokens with their per-cell bins (semantics in [`scgpt`]'s
//!   docs).
//!
//! Tokens and medians are [`GeneMap`]s keyed by the dataset's gene key: its
//! var names, or a `var` column ([`Geneformer::with_gene_key`]); the special
//! tokens `<pad>`, `<cls>` and `<eos>` are entries of the token map. Before
//! a read, a tokenizer is resolved into a per-column table for the matrix's
//! genes ([`Tokenizer::for_dataset`], [`Tokenizer::for_corpus`]); columns
//! without a token (or without a median, for Geneformer) are skipped, and a
//! key two tokenized columns share is refused (both would take its token,
//! and a row of both would carry it twice): such genes are matched by a
//! `var` column of unique keys.
//!
//! ```
//! use deltacells::tokenize::{GeneMap, Geneformer, Tokenizer};
//! # fn main() -> deltacells::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("deltacells-tokenize-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! # let csr = deltacells::Csr { n_cols: 3, indptr: vec![0, 3, 4], indices: vec![0, 1, 2, 1], values: vec![4i32, 1, 7, 2] };
//! # let names = Some(vec!["A".into(), "B".into(), "C".into()]);
//! # let config = deltacells::dataset::WriterConfig::default().with_var_names(names);
//! # let mut w = deltacells::dataset::DatasetWriter::create(&dir, 3, config)?;
//! # w.push(csr.as_ref())?;
//! # w.finish()?;
//! let ds = deltacells::open(&dir)?;
//! let tokens = GeneMap::new([("<pad>", 0), ("A", 10), ("B", 11), ("C", 12)])?;
//! let medians = GeneMap::new([("A", 1.0), ("B", 1.0), ("C", 2.0)])?;
//! let geneformer = Geneformer::new(tokens, medians)?.with_max_len(3, false)?;
//! let batch = ds.read([0, 1]).tokenize(&Tokenizer::Geneformer(geneformer))?;
//! // Cell 0: A 4, B 1, C 7 / 2 = 3.5; cell 1: B only.
//! assert_eq!(batch.rows.input_ids, [10, 12, 11, 11, 0, 0]);
//! assert_eq!(batch.rows.attention_mask, [1, 1, 1, 1, 0, 0]);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

mod classes;
mod dict;
pub mod geneformer;
mod places;
mod rank;
mod read;
pub mod scgpt;
mod sink;
#[cfg(test)]
mod test_rows;

pub use dict::GeneMap;
pub use geneformer::Geneformer;
pub use scgpt::ScGpt;
pub use sink::{TokenPart, TokenRows, TokenSink};

use crate::corpus::Corpus;
use crate::dataset::vocab::{check_unique, dataset_keys, MATCH_HINT};
use crate::dataset::{Dataset, ReadStats};
use crate::error::{Error, Result};
use geneformer::GeneformerColumns;
use scgpt::ScGptColumns;

/// A tokenizer's settings.
#[derive(Clone, Debug, PartialEq)]
pub enum Tokenizer {
    /// Geneformer's rank-value tokens.
    Geneformer(Geneformer),
    /// scGPT's binned values.
    ScGpt(ScGpt),
}

/// A tokenizer resolved for one matrix's columns (see the module docs).
#[derive(Clone, Debug)]
pub struct TokenColumns {
    kind: Columns,
    n_cols: usize,
}

#[derive(Clone, Debug)]
enum Columns {
    Geneformer(GeneformerColumns),
    ScGpt(ScGptColumns),
}

impl Columns {
    /// Whether the table gives column `g` a token.
    fn tokenizes(&self, g: usize) -> bool {
        match self {
            Columns::Geneformer(c) => c.tokenizes(g),
            Columns::ScGpt(c) => c.tokenizes(g),
        }
    }
}

/// Tokenized rows of cells.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBatch {
    /// Global cell id of each row, in request order.
    pub cells: Vec<u64>,
    /// The rows.
    pub rows: TokenRows,
    /// What the read cost.
    pub stats: ReadStats,
}

impl Tokenizer {
    /// The `var` column genes are matched by (`None`: the var names).
    pub fn gene_key(&self) -> Option<&str> {
        match self {
            Tokenizer::Geneformer(g) => g.gene_key(),
            Tokenizer::ScGpt(s) => s.gene_key(),
        }
    }

    /// The table for columns whose gene keys are `keys`, in column order.
    /// A table that tokenizes none of them is refused: every row would be
    /// padding, most likely from a dictionary keyed otherwise than the genes
    /// (Ensembl ids against symbols); so is one where two tokenized columns
    /// share a key.
    pub fn for_keys(&self, keys: &[String]) -> Result<TokenColumns> {
        let kind = match self {
            Tokenizer::Geneformer(g) => Columns::Geneformer(g.columns(keys)),
            Tokenizer::ScGpt(s) => Columns::ScGpt(s.columns(keys)),
        };
        let mut tokenized = keys
            .iter()
            .enumerate()
            .filter(|&(g, _)| kind.tokenizes(g))
            .map(|(g, k)| (g, k.as_str()))
            .peekable();
        if tokenized.peek().is_none() && !keys.is_empty() {
            let what = match self {
                Tokenizer::Geneformer(_) => "a token and a median",
                Tokenizer::ScGpt(_) => "a token",
            };
            return Err(Error::Input(format!(
                "the tokenizer has {what} for none of the {} genes, matched by {}: \
                 is its dictionary keyed by another gene key?",
                keys.len(),
                key_name(self.gene_key())
            )));
        }
        // Two columns of one key would take one token, and a row of both
        // would carry it twice.
        check_unique(
            &format!(
                "the tokenized genes, matched by {}",
                key_name(self.gene_key())
            ),
            tokenized,
            MATCH_HINT,
        )?;
        Ok(TokenColumns {
            kind,
            n_cols: keys.len(),
        })
    }

    /// The table for `ds`'s genes, by the tokenizer's gene key.
    pub fn for_dataset(&self, ds: &Dataset) -> Result<TokenColumns> {
        self.for_keys(&dataset_keys(ds, self.gene_key(), "the dataset")?)
    }

    /// The table for a corpus's vocabulary, whose genes are named by the
    /// corpus's gene key: the tokenizer's must be the same.
    pub fn for_corpus(&self, corpus: &Corpus) -> Result<TokenColumns> {
        let corpus_key = corpus.spec().gene_key.as_deref();
        if self.gene_key() != corpus_key {
            return Err(Error::Input(format!(
                "the tokenizer matches genes by {}, the corpus's vocabulary is keyed by {}",
                key_name(self.gene_key()),
                key_name(corpus_key)
            )));
        }
        self.for_keys(corpus.var_names())
    }
}

fn key_name(key: Option<&str>) -> String {
    key.map_or_else(|| "var names".into(), |k| format!("var column {k:?}"))
}

impl TokenColumns {
    /// Entries per row.
    pub fn max_len(&self) -> usize {
        match &self.kind {
            Columns::Geneformer(g) => g.max_len,
            Columns::ScGpt(s) => s.max_len,
        }
    }

    /// Number of columns the table is for.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// Whether rows carry a value per token (scGPT's bins).
    pub fn has_values(&self) -> bool {
        matches!(self.kind, Columns::ScGpt(_))
    }

    /// The same columns for the batches of `(seed, epoch)`: scGPT samples
    /// each cell's genes by them.
    pub(crate) fn for_epoch(mut self, seed: u64, epoch: u64) -> TokenColumns {
        if let Columns::ScGpt(s) = &mut self.kind {
            s.seed = seed;
            s.epoch = epoch;
        }
        self
    }
}

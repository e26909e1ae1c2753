//! Corpora: many datasets with different genes, read as one.
//!
//! * Gene spaces ([`GeneSpace`]) and the [`Vocabulary`] that maps every
//!   member's columns into one come from [`crate::dataset::vocab`], which a
//!   build of many inputs into one dataset shares.
//! * [`spec`]: what a corpus is made of ([`CorpusSpec`]).
//! * [`open`]: the open [`Corpus`] and its [`Member`]s.
//! * [`read`]: reads of any cells ([`CorpusRead`]), one per member they
//!   come from, into one output.
//! * [`obs`]: the unified obs of any cells ([`Corpus::localize`]).
//! * [`batches`]: training batches over every tile of every member
//!   ([`Corpus::batches`]).
//! * [`file`](mod@file): the corpus file ([`Corpus::save`], [`Corpus::open`]).
//! * [`stats`]: per-gene statistics over the vocabulary
//!   ([`Corpus::gene_stats`]).

pub mod batches;
pub mod file;
pub mod obs;
pub mod open;
pub mod read;
pub mod spec;
pub mod stats;

pub use crate::dataset::vocab::{GeneSpace, InputGenes, Vocabulary};
pub use file::{parse_corpus_file, CorpusRule, CORPUS_FORMAT, CORPUS_VERSION};
pub use obs::CorpusObs;
pub use open::{Corpus, Member};
pub use read::CorpusRead;
pub use spec::CorpusSpec;

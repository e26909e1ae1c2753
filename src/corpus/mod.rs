//! Corpora: many datasets with different genes, read as one.
//!
//! * [`vocab`]: gene keys, gene spaces ([`GeneSpace`]) and the [`Vocabulary`]
//!   that maps every input's columns into one.
//! * [`spec`]: what a corpus is made of ([`CorpusSpec`]).
//! * [`open`]: the open [`Corpus`] and its [`Member`]s.
//! * [`read`]: reads of any cells ([`CorpusRead`]), one per member they
//!   come from, into one output.
//! * [`obs`]: the unified obs of any cells ([`Corpus::localize`]).
//! * [`batches`]: training batches over every tile of every member
//!   ([`Corpus::batches`]).
//! * [`file`](mod@file): the corpus file ([`Corpus::save`], [`Corpus::open`]).

pub mod batches;
pub mod file;
pub mod obs;
pub mod open;
pub mod read;
pub mod spec;
pub mod vocab;

pub use file::{parse_corpus_file, CorpusRule, CORPUS_FORMAT, CORPUS_VERSION};
pub use obs::CorpusObs;
pub use open::{Corpus, Member};
pub use read::CorpusRead;
pub use spec::{location_stem, CorpusSpec, DEFAULT_SOURCE_COLUMN};
pub use vocab::{GeneSpace, InputGenes, Vocabulary};

//! Corpora: many inputs with different genes, matched into one gene space.
//!
//! * [`vocab`]: gene keys, gene spaces ([`GeneSpace`]) and the [`Vocabulary`]
//!   that maps every input's columns into one.

pub mod vocab;

pub use vocab::{GeneSpace, InputGenes, Vocabulary};

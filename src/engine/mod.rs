//! Joins [`crate::format`] and [`crate::kernels`]: decoding chunks and tiles
//! straight into caller-provided buffers, with scratch that is reused so
//! nothing is allocated per chunk once warmed up, and planning which chunks
//! a read decodes and where their rows land.

mod decoder;
pub(crate) mod plan;
mod pool;

pub use decoder::{ChunkDecoder, RowOut};
pub use pool::{Engine, EngineConfig};

//! Joins [`crate::format`] and [`crate::kernels`]: decoding chunks and tiles
//! straight into caller-provided buffers, with scratch that is reused so
//! nothing is allocated per chunk once warmed up.

mod decoder;
mod pool;

pub use decoder::ChunkDecoder;
pub use pool::{Engine, EngineConfig};

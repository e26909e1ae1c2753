//! Joins [`crate::format`] and [`crate::kernels`]: decoding chunks and tiles
//! straight into caller-provided buffers, with scratch that is reused so
//! nothing is allocated per chunk once warmed up.

mod decoder;

pub use decoder::ChunkDecoder;

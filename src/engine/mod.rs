//! Chunk and tile decoding.

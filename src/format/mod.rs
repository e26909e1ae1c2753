//! Bytes to structures and back.
//!
//! No threads, no files, and no allocation that is not bounded by the size of
//! the input: every count or length read from bytes is checked against the
//! bytes that exist before it is used.

pub mod exceptions;
pub mod manifest;
pub mod npy;
pub mod tile;
pub mod tile_writer;
pub mod ts2diff;
pub mod xdelta;
pub mod zstd;

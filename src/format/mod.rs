//! Bytes to structures and back.
//!
//! No threads, no files, and no allocation that is not bounded by the size of
//! the input: every count or length read from bytes is checked against the
//! bytes that exist before it is used.
//!
//! Each part owns its errors and imports nothing of the layers above:
//! [`tile::TileError`] for a tile that breaks a rule, [`manifest::DatasetRule`]
//! for a dataset's manifest and layout, [`EncodeError`] for input the writer
//! refuses, and the codecs theirs ([`ts2diff::Ts2diffError`],
//! [`xdelta::XdeltaError`], [`npy::NpyError`]).

mod encode_error;
pub mod exceptions;
pub mod manifest;
pub mod npy;
pub mod tile;
pub mod tile_writer;
pub mod ts2diff;
pub mod xdelta;
pub mod zstd;

pub use encode_error::EncodeError;

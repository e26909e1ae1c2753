//! A broken tile rule and where it was broken: the error of everything that
//! reads tiles (parsing, exception lists, zstd frames, the kernels' faults).

use std::fmt;

use super::{StreamKind, TileRule};
use crate::format::zstd::FrameError;
use crate::kernels::Fault;

/// A tile broke a rule of the format: which rule, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid tile: {rule}{at}")]
pub struct TileError {
    /// The rule broken.
    pub rule: TileRule,
    /// Where in the tile it was broken.
    pub at: TilePosition,
}

impl TileError {
    /// The error for `rule` broken at `at`.
    pub fn new(rule: TileRule, at: TilePosition) -> TileError {
        TileError { rule, at }
    }

    /// A kernel's fault in chunk `chunk` (positions are the chunk's nonzeros);
    /// `stream` names the exception frame an unmarked position came from.
    /// Every backend reports the reference's fault, so this error is the same
    /// on all of them.
    pub fn fault(f: Fault, chunk: usize, stream: StreamKind, n_genes: u32) -> TileError {
        let (rule, position) = match f {
            Fault::ZeroCount { position } => (TileRule::ZeroCount, position),
            Fault::ZeroGap { position } => (TileRule::ZeroGap, position),
            Fault::GeneIndex { position, index } => {
                (TileRule::GeneIndex { index, n_genes }, position)
            }
            Fault::Unmarked { position, stored } => {
                (TileRule::ExceptionUnmarked { stream, stored }, position)
            }
        };
        TileError::new(rule, TilePosition::position(chunk, position))
    }
}

impl TileRule {
    /// The rule a zstd frame of `stream` broke, from why zstd refused it.
    pub fn frame(stream: StreamKind, e: FrameError) -> TileRule {
        match e {
            FrameError::NotAFrame => TileRule::FrameMagic { stream },
            FrameError::NoContentSize => TileRule::FrameNoContentSize { stream },
            FrameError::Size { declared, expected } => TileRule::FrameSize {
                stream,
                declared,
                expected,
            },
            FrameError::Ratio {
                declared,
                compressed,
            } => TileRule::FrameRatio {
                stream,
                compressed,
                declared,
            },
            FrameError::Trailing { extra } => TileRule::FrameTrailing { stream, extra },
            FrameError::Corrupt(reason) => TileRule::FrameCorrupt { stream, reason },
        }
    }
}

/// Where in a tile a rule was broken. Every part is optional: header rules
/// have only a byte offset, element rules have a chunk and a nonzero position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TilePosition {
    /// Chunk index within the tile.
    pub chunk: Option<u32>,
    /// Byte offset within the tile object.
    pub offset: Option<u64>,
    /// Nonzero position within the chunk (0-based).
    pub position: Option<u64>,
}

impl TilePosition {
    /// No position (a rule about the whole object).
    pub const NONE: TilePosition = TilePosition {
        chunk: None,
        offset: None,
        position: None,
    };

    /// A byte offset in the tile.
    pub fn offset(offset: u64) -> TilePosition {
        TilePosition {
            offset: Some(offset),
            ..TilePosition::NONE
        }
    }

    /// A chunk.
    pub fn chunk(chunk: usize) -> TilePosition {
        TilePosition {
            chunk: Some(chunk as u32),
            ..TilePosition::NONE
        }
    }

    /// A byte offset that belongs to a chunk: its table entry or one of its
    /// frames.
    pub fn chunk_offset(chunk: usize, offset: u64) -> TilePosition {
        TilePosition {
            chunk: Some(chunk as u32),
            offset: Some(offset),
            position: None,
        }
    }

    /// A nonzero within a chunk.
    pub fn position(chunk: usize, position: u64) -> TilePosition {
        TilePosition {
            chunk: Some(chunk as u32),
            position: Some(position),
            offset: None,
        }
    }
}

impl fmt::Display for TilePosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = " (at ";
        if let Some(c) = self.chunk {
            write!(f, "{sep}chunk {c}")?;
            sep = ", ";
        }
        if let Some(p) = self.position {
            write!(f, "{sep}nonzero {p}")?;
            sep = ", ";
        }
        if let Some(o) = self.offset {
            write!(f, "{sep}byte {o}")?;
            sep = ", ";
        }
        if sep == ", " {
            f.write_str(")")?;
        }
        Ok(())
    }
}

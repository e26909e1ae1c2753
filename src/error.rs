//! The crate's error: what the layers below report, wrapped, and what only
//! the top of the crate can go wrong with.
//!
//! Each layer owns its errors and knows nothing of this one: [`kernels`] its
//! [`BackendError`], [`format::tile`] a [`TileError`] (the [`TileRule`] a tile
//! broke and where), [`format::manifest`] the [`DatasetRule`]s, the writer its
//! [`EncodeError`], and the codecs theirs. [`Error`] wraps each of them
//! (`?` converts) and adds I/O with its context, configuration, caught panics,
//! which tile of a dataset an error came from, and the dataset API's own input
//! errors. Tests match on the rule a corrupt tile broke
//! ([`Error::tile_rule`]), people read the message.
//!
//! [`kernels`]: crate::kernels
//! [`format::tile`]: crate::format::tile
//! [`format::manifest`]: crate::format::manifest

use crate::format::manifest::DatasetRule;
use crate::format::npy::NpyError;
use crate::format::tile::{TileError, TilePosition, TileRule};
use crate::format::ts2diff::Ts2diffError;
use crate::format::xdelta::XdeltaError;
use crate::format::EncodeError;
use crate::kernels::BackendError;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in deltacells.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tile broke a rule of the format.
    #[error(transparent)]
    Tile(#[from] TileError),
    /// The tile writer refused its input (or its policy did, or zstd failed).
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// Input the dataset API cannot take: an option out of range, a cell that
    /// is not in the dataset, a file that is not what it should be.
    #[error("invalid input: {0}")]
    Input(String),
    /// A caller-provided output buffer has the wrong length.
    #[error("output buffer `{what}` has length {got}, expected {expected}")]
    OutputLength {
        /// Which buffer: `indptr`, `indices` or `values`.
        what: &'static str,
        /// The length the decoded data needs.
        expected: usize,
        /// The length the caller passed.
        got: usize,
    },
    /// A kernel backend was forced that cannot be used.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// Bad configuration (environment variable, option).
    #[error("configuration: {0}")]
    Config(String),

    /// A thread of the engine panicked (the batch prefetch thread, an I/O
    /// thread running a store): what it was doing, and the panic's own message,
    /// so the cause is not lost behind "the thread stopped".
    #[error("{what} panicked: {message}")]
    Panicked {
        /// What the thread was doing.
        what: String,
        /// The panic's message.
        message: String,
    },
    /// A dataset broke a rule of the format (manifest, layout, side files).
    ///
    /// Each wrapping variant's message holds the error it wraps, which
    /// [`std::error::Error::source`] therefore does not return again (a
    /// report walking the chain would print it twice).
    #[error("invalid dataset: {0}")]
    Dataset(DatasetRule),
    /// Something was wrong inside one tile of a dataset: the tile's error,
    /// tagged with which tile it was (the tile itself does not know its index)
    /// and named by its object's key under the dataset, the file to look at.
    #[error("tile {tile} ({}): {error}", crate::format::manifest::Manifest::tile_key(*.tile))]
    InTile {
        /// Index of the tile in the dataset.
        tile: usize,
        /// The error the tile gave (usually [`Error::Tile`]).
        error: Box<Error>,
    },
    /// Something was wrong with one member of a corpus: its error, tagged
    /// with the member's location.
    #[error("corpus member {member}: {error}")]
    InMember {
        /// The member's location, as the corpus names it.
        member: String,
        /// The error the member gave.
        error: Box<Error>,
    },
    /// A corpus file could not be read as one.
    #[error("corpus file {file}: {rule}")]
    CorpusFile {
        /// The file.
        file: String,
        /// What is wrong with it.
        rule: crate::corpus::file::CorpusRule,
    },
    /// A TsFile TS_2DIFF page could not be decoded or encoded.
    #[error(transparent)]
    Ts2diff(#[from] Ts2diffError),
    /// An XDelta string could not be decoded or encoded.
    #[error(transparent)]
    Xdelta(#[from] XdeltaError),
    /// An `.npy` array or `.npz` archive could not be read.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// An I/O error, with the path or object it concerned.
    #[error("{context}: {error}")]
    Io {
        /// What was being done: the path, object key or operation.
        context: String,
        /// The underlying I/O error.
        error: std::io::Error,
    },
}

impl From<DatasetRule> for Error {
    fn from(rule: DatasetRule) -> Error {
        Error::Dataset(rule)
    }
}

impl Error {
    /// The error for a caught panic: `what` the thread was doing, and the
    /// payload's message when it has one (`panic!` gives a `&str` or a `String`).
    pub fn panicked(what: impl Into<String>, payload: &(dyn std::any::Any + Send)) -> Error {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Error::Panicked {
            what: what.into(),
            message,
        }
    }

    /// Shorthand for a tile error.
    pub fn tile(rule: TileRule, at: TilePosition) -> Error {
        Error::Tile(TileError::new(rule, at))
    }

    /// The tile rule this error reports, if it is a tile error, also when it
    /// is wrapped with the tile of a dataset it came from ([`Error::InTile`]).
    pub fn tile_rule(&self) -> Option<&TileRule> {
        match self {
            Error::Tile(e) => Some(&e.rule),
            Error::InTile { error, .. } | Error::InMember { error, .. } => error.tile_rule(),
            _ => None,
        }
    }

    /// Tags an error with the corpus member it came from.
    pub fn in_member(member: impl Into<String>) -> impl FnOnce(Error) -> Error {
        let member = member.into();
        move |error| Error::InMember {
            member,
            error: Box::new(error),
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, error: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report walking the chain (`anyhow`'s "Caused by") prints each
    /// message once: a wrapper whose message holds the error it wraps does
    /// not return it as its source too.
    #[test]
    fn a_wrapped_message_is_not_a_source_again() {
        let io = Error::io(
            "/no/such/dir",
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        );
        let in_tile = Error::InTile {
            tile: 3,
            error: Box::new(Error::Dataset(DatasetRule::Inconsistent("x".into()))),
        };
        let in_member = Error::in_member("a.dc")(Error::Input("bad".into()));
        let npy = Error::Npy(NpyError::Io {
            context: "x.npz".into(),
            error: std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "cut short"),
        });
        for (err, text) in [
            (npy, "x.npz: cut short"),
            (io, "/no/such/dir: no such directory"),
            (in_tile, "tile 3 (tiles/tile_000003.dct): invalid dataset: "),
            (in_member, "corpus member a.dc: invalid input: bad"),
        ] {
            assert!(err.to_string().starts_with(text), "{err}");
            assert!(std::error::Error::source(&err).is_none(), "{err}");
        }
    }
}

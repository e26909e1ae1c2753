//! Why the writer side of the format refused to encode something.

use crate::kernels::BackendError;

/// Why input could not be encoded: decoding has its own errors (a tile's
/// [`TileError`](crate::format::tile::TileError), each codec's).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// Input that the format cannot represent (an unsorted gene index, a
    /// count of 0, ...), named with where it is.
    #[error("invalid input: {0}")]
    Input(String),
    /// The writer's policy refused a tile (the format could hold it, but should not).
    #[error("refused by writer policy: {0}")]
    Policy(String),
    /// zstd failed while compressing (decompression failures are tile errors).
    #[error("zstd compression failed: {0}")]
    Compress(String),
    /// The kernel backend the encoder was asked to use cannot run here.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

//! Joins [`crate::format`] and [`crate::kernels`]: the read pipeline from a
//! selection of cells to rows in an output.
//!
//! *select* ([`CellSelection`], [`GeneSelection`]) -> *plan* (which tiles,
//! then which chunk segments land on which output rows, worked out before
//! any decompression) -> *fetch* (the dataset's I/O step brings the tiles'
//! bytes) -> *execute* (segments grouped by chunk, decoded on the pinned
//! pool straight into the output, or copied from chunks decoded once) ->
//! *sink* (the output: [`Sink`]). Scratch is reused, so nothing is
//! allocated per chunk once warmed up.

mod cells;
pub(crate) mod decoded;
mod decoder;
pub(crate) mod execute;
mod genes;
pub(crate) mod plan;
mod pool;
mod sink;
mod transform;
mod transform_csr;

pub use cells::CellSelection;
pub use decoder::{ChunkDecoder, RowOut};
pub(crate) use genes::best_row_kernels;
pub use genes::GeneSelection;
pub use pool::{Engine, EngineConfig, MAX_THREADS};
pub(crate) use sink::{grow, split_off};
pub use sink::{AddedRows, CsrPart, Dense, DensePart, Selected, SelectedPart, Sink, SinkPart};
pub use transform::Transform;
pub(crate) use transform::{count_total, Transformed, ValuePart, ValueSink};
pub(crate) use transform_csr::TransformedCsr;

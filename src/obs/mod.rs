//! Per-cell metadata (obs) stored beside the tiles as Parquet shards, and the
//! gene table (`var.parquet`). See the format spec, section "Obs".
//!
//! Obs is kept out of the tiles so that a reader that wants no metadata never
//! pays for it: opening a dataset reads `obs/schema.json` and checks sizes
//! and the fingerprint, and reads no Parquet byte. Columns that training
//! needs are *localized* once per node ([`ObsReader::localize`]): only their
//! column chunks are fetched, and stored as memory-mapped Arrow IPC files in
//! a cache keyed by the obs fingerprint. Batches then carry [`Labels`]
//! gathered from those mappings.
//!
//! * [`schema`]: `obs/schema.json` ([`ObsSchema`]).
//! * [`ObsColumn`], [`ObsConfig`]: the writer side (given to
//!   the dataset writer (`DatasetWriter`) in its config); [`encode_obs`] gives
//!   the encoded files ([`ObsFiles`]) in memory.
//! * [`ObsReader`]: open-time checks, ranged column reads, [`ObsReader::verify`].
//! * [`LocalObs`]: the localized columns; [`Labels`] for any cells, and
//!   [`json_value`] for a value as JSON.
//! * [`VarTable`] / [`VarFrame`]: writing and reading `var.parquet`.
//! * The names and digests of the layout, for tools that read or repair the
//!   files themselves: [`SCHEMA_KEY`], [`shard_key`], [`sha256_hex`],
//!   [`fingerprint`], and for the local cache [`cache_root`], [`CACHE_ENV`],
//!   [`quote_name`].

mod cache;
mod column;
mod json;
mod labels;
mod reader;
pub mod schema;
mod shards;
mod thrift_walk;
mod unify;
mod var;

pub(crate) use var::read_whole_parquet;

pub use crate::storage::node_cache::{cache_root, CACHE_ENV};
pub use cache::{quote_name, LocalObs, LocalizeReport};
pub use column::{dictionary_codes, ObsColumn};
pub use labels::{json_value, Label, Labels};
pub use reader::{ObsReader, ObsVerifyReport};
pub use schema::{ColumnSchema, Kind, ObsSchema, ObsType};
pub use shards::{
    encode_obs, fingerprint, sha256_hex, shard_key, ObsConfig, ObsFiles, DEFAULT_MAX_CATEGORIES,
    DEFAULT_TILES_PER_FILE, SCHEMA_KEY,
};
pub use unify::{InputObs, ObsUnion, SourceColumn, DEFAULT_SOURCE_COLUMN};
pub use var::{VarFrame, VarTable};

pub(crate) use shards::encode_shard;
pub(crate) use var::{read_var_table, string_values, VAR_KEY};

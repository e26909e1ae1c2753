//! Writing obs: shards of one row group per tile, schema.json, the fingerprint.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::column::ObsColumn;
use super::json;
use super::schema::ObsSchema;
use crate::error::{Error, Result};
use crate::format::manifest::ObsManifest;
use crate::format::EncodeError;

/// Default of [`ObsConfig::tiles_per_file`]: tiles (row groups) per obs shard
/// (the spec's default).
pub const DEFAULT_TILES_PER_FILE: usize = 1000;
/// Default of [`ObsConfig::max_categories`]: the largest vocabulary kept as
/// a category column (larger ones, such as cell barcodes, become strings).
pub const DEFAULT_MAX_CATEGORIES: usize = 20_000;
/// zstd level of the shards: obs is small next to the tiles, so a quick level.
const SHARD_ZSTD_LEVEL: i32 = 3;

/// The obs part of a the dataset writer's `WriterConfig`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ObsConfig {
    /// The columns, in schema order; each holds one value per cell.
    pub columns: Vec<ObsColumn>,
    /// Tiles (row groups) per shard ([`DEFAULT_TILES_PER_FILE`] by default).
    pub tiles_per_file: usize,
    /// Category columns with more categories than this are stored as strings
    /// ([`DEFAULT_MAX_CATEGORIES`] by default).
    pub max_categories: usize,
}

impl ObsConfig {
    /// `columns` with the default shard size and category limit.
    pub fn new(columns: Vec<ObsColumn>) -> ObsConfig {
        ObsConfig {
            columns,
            tiles_per_file: DEFAULT_TILES_PER_FILE,
            max_categories: DEFAULT_MAX_CATEGORIES,
        }
    }
}

/// Encoded obs ([`encode_obs`]): what the writer puts in the store and in the
/// manifest.
#[derive(Clone, Debug)]
pub struct ObsFiles {
    /// The text of `obs/schema.json` (stored at [`SCHEMA_KEY`]).
    pub schema_json: String,
    /// The bytes of each shard, in shard order (shard `s` is stored at
    /// [`shard_key`]`(s)`).
    pub shards: Vec<Vec<u8>>,
    /// The manifest's obs fields.
    pub manifest: ObsManifest,
}

/// Object key of obs shard `s` in a dataset's store (`obs/obs_NNNN.parquet`),
/// for reading or replacing a shard directly.
pub fn shard_key(s: usize) -> String {
    format!("obs/obs_{s:04}.parquet")
}

/// Object key of the obs schema in a dataset's store.
pub const SCHEMA_KEY: &str = "obs/schema.json";

/// Lowercase hex SHA-256 of `bytes`: a shard's entry in the manifest's
/// `obs_shard_sha256`, and the form [`fingerprint`] takes them in. With it,
/// a tool that rewrites a shard can recompute what the manifest must say.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    hex
}

/// The obs fingerprint (spec "Fingerprint"): the first 24 hex characters of
/// the SHA-256 of
/// `json.dumps({"schema": schema_json, "tile_cells": ..., "shards": ...}, sort_keys=True)`,
/// where `shards` are the shards' [`sha256_hex`]. It keys the local cache, so
/// it changes whenever the obs content does.
pub fn fingerprint(schema_json: &str, tile_cells: &[u64], shard_sha256: &[String]) -> String {
    let mut obj = Map::new();
    obj.insert("schema".into(), schema_json.into());
    obj.insert("tile_cells".into(), tile_cells.iter().copied().collect());
    obj.insert("shards".into(), shard_sha256.iter().cloned().collect());
    let canonical = json::dumps(&Value::Object(obj), None, true);
    let mut hex = sha256_hex(canonical.as_bytes());
    hex.truncate(24);
    hex
}

fn writer_properties() -> Result<WriterProperties> {
    let level =
        ZstdLevel::try_new(SHARD_ZSTD_LEVEL).map_err(|e| EncodeError::Compress(e.to_string()))?;
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        // Readers never push predicates down; statistics would dominate the footer.
        .set_statistics_enabled(EnabledStatistics::None)
        .set_write_page_header_statistics(false)
        .set_offset_index_disabled(true)
        // Row groups end where tiles end (ArrowWriter::flush), never earlier.
        .set_max_row_group_row_count(None)
        .set_max_row_group_bytes(None)
        .build())
}

/// Encodes `config` for tiles of `tile_cells` cells: the schema, one shard per
/// `tiles_per_file` tiles with one row group per tile, and the manifest fields.
///
/// the dataset writer (`DatasetWriter`) calls this and stores the result; call it
/// directly to get the obs files in memory, for instance to attach or replace
/// the obs of a dataset in a store of your own, or to inspect what the writer
/// would produce. Fails with [`Error::Input`] when the config does not fit the
/// tiles: no columns, a column whose length is not the number of cells, a
/// repeated name, or `tiles_per_file` 0.
pub fn encode_obs(config: &ObsConfig, tile_cells: &[u64]) -> Result<ObsFiles> {
    if config.tiles_per_file == 0 {
        return Err(Error::Input("obs tiles_per_file must be at least 1".into()));
    }
    if config.columns.is_empty() {
        return Err(Error::Input("obs needs at least one column".into()));
    }
    let n_cells: u64 = tile_cells.iter().sum();
    let mut names = HashSet::new();
    for c in &config.columns {
        if c.len() as u64 != n_cells {
            return Err(Error::Input(format!(
                "obs column {:?} has {} values for {n_cells} cells",
                c.name(),
                c.len()
            )));
        }
        if !names.insert(c.name()) {
            return Err(Error::Input(format!(
                "obs column {:?} appears twice",
                c.name()
            )));
        }
    }
    let (columns, arrays): (Vec<_>, Vec<ArrayRef>) = config
        .columns
        .iter()
        .map(|c| c.encode(config.max_categories))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let schema = ObsSchema { columns };
    let mut shards = Vec::new();
    let mut start = 0usize;
    for tiles in tile_cells.chunks(config.tiles_per_file) {
        let rows: usize = tiles.iter().map(|&c| c as usize).sum();
        let part: Vec<ArrayRef> = arrays.iter().map(|a| a.slice(start, rows)).collect();
        shards.push(encode_shard(&schema, &part, tiles)?);
        start += rows;
    }
    let schema_json = schema.to_json_text();
    let shard_sha256: Vec<String> = shards.iter().map(|s| sha256_hex(s)).collect();
    let manifest = ObsManifest {
        tiles_per_file: config.tiles_per_file as u64,
        shard_bytes: shards.iter().map(|s| s.len() as u64).collect(),
        fingerprint: fingerprint(&schema_json, tile_cells, &shard_sha256),
        shard_sha256,
    };
    Ok(ObsFiles {
        schema_json,
        shards,
        manifest,
    })
}

/// One shard: `arrays` (the schema's columns, typed as it says) holding the
/// rows of the tiles `tile_cells`, written as one row group per tile. A build's
/// write tasks call this with the corpus-wide schema, so every shard agrees
/// with `schema.json` whichever task wrote it.
pub(crate) fn encode_shard(
    schema: &ObsSchema,
    arrays: &[ArrayRef],
    tile_cells: &[u64],
) -> Result<Vec<u8>> {
    let arrow_schema = Arc::new(schema.arrow_schema());
    let parquet_err =
        |e: parquet::errors::ParquetError| Error::Input(format!("writing obs shards: {e}"));
    let mut writer =
        ArrowWriter::try_new(Vec::new(), arrow_schema.clone(), Some(writer_properties()?))
            .map_err(parquet_err)?;
    let mut start = 0usize;
    for &cells in tile_cells {
        let cells = cells as usize;
        let columns = arrays.iter().map(|a| a.slice(start, cells)).collect();
        let batch = RecordBatch::try_new(arrow_schema.clone(), columns)
            .map_err(|e| Error::Input(format!("building an obs row group: {e}")))?;
        writer.write(&batch).map_err(parquet_err)?;
        writer.flush().map_err(parquet_err)?;
        start += cells;
    }
    writer.into_inner().map_err(parquet_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_abc() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn fingerprint_matches_python() {
        // hashlib.sha256(json.dumps({"schema": "x\n", "tile_cells": [2, 1],
        //     "shards": ["ab"]}, sort_keys=True).encode()).hexdigest()[:24]
        assert_eq!(
            fingerprint("x\n", &[2, 1], &["ab".into()]),
            "58467b9e99fc8f300c49ef35"
        );
    }
}

crate::setters!(ObsConfig {
    /// Sets [`ObsConfig::tiles_per_file`].
    with_tiles_per_file: tiles_per_file: usize,
    /// Sets [`ObsConfig::max_categories`].
    with_max_categories: max_categories: usize,
});

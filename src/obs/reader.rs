//! Reading obs shards: cheap checks at open, ranged column reads, full verification.
//!
//! A column is read the way the spec describes for the local cache: the
//! shard's footer (two ranged reads: the 8-byte tail giving its length, then
//! exactly the footer, so no byte of another column is fetched), then, for
//! each tile, that column's chunk of the tile's row group (one ranged read
//! each). The parquet decoder sees the
//! fetched parts as the file and fails on any read outside them, so nothing
//! else is fetched. Every footer is checked against the schema and the
//! manifest before any column chunk is decoded. From a local store, each
//! shard a read touches is first checked whole against its SHA-256, once
//! per reader (see [`ObsReader::read_column`]).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch};
use bytes::{Buf, Bytes};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::errors::ParquetError;
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};

use super::labels::check_codes;
use super::schema::{ColumnSchema, Kind, ObsSchema};
use super::shards::{fingerprint, sha256_hex, shard_key, SCHEMA_KEY};
use super::thrift_walk::{check_footer, check_pages};
use crate::error::{Error, Result};
use crate::format::manifest::{DatasetRule, Manifest, ObsManifest};
use crate::storage::{AlignedBytes, Store};

/// Parquet's leading magic plus the 8-byte footer tail.
const MIN_PARQUET_LEN: u64 = 12;

/// Runs a third-party decoder (parquet, arrow-ipc) over untrusted bytes and
/// turns a panic into an error. Those decoders still panic on some corrupt
/// input (the property tests found definition levels that index past a
/// validity bitmap), and a damaged shard or cache file must give an error,
/// not bring down a training job. Nothing shared is left half-updated: the
/// closure only reads its inputs and builds new arrays, dropped on failure.
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err("the decoder failed on corrupt data".into()))
}

pub(crate) fn obs_rule(msg: impl Into<String>) -> Error {
    Error::Dataset(DatasetRule::Obs(msg.into()))
}

/// An [`AlignedBytes`] handed to `bytes::Bytes` without a copy.
struct Owned(AlignedBytes);

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

pub(crate) fn to_bytes(b: AlignedBytes) -> Bytes {
    Bytes::from_owner(Owned(b))
}

/// The parts of a file fetched so far, served to the parquet decoder as if
/// they were the file. A read outside them is an error: it would mean the
/// decoder wanted bytes we chose not to fetch.
pub(crate) struct Fetched {
    len: u64,
    parts: Vec<(u64, Bytes)>,
}

impl Fetched {
    /// A whole file held in memory.
    pub(crate) fn whole(data: Bytes) -> Fetched {
        Fetched {
            len: data.len() as u64,
            parts: vec![(0, data)],
        }
    }

    fn slice(&self, start: u64, length: Option<usize>) -> parquet::errors::Result<Bytes> {
        for (at, part) in &self.parts {
            let Some(offset) = start.checked_sub(*at).and_then(|o| usize::try_from(o).ok()) else {
                continue;
            };
            if offset > part.len() {
                continue;
            }
            let end = length.map_or(Some(part.len()), |l| offset.checked_add(l));
            if let Some(end) = end.filter(|&e| e <= part.len()) {
                return Ok(part.slice(offset..end));
            }
        }
        Err(ParquetError::General(format!(
            "bytes from {start} were not fetched"
        )))
    }
}

impl Length for Fetched {
    fn len(&self) -> u64 {
        self.len
    }
}

/// A reader of fetched bytes for which reading past the end is an error, not
/// the end of the input. The parquet decoder skips unknown thrift fields with
/// `io::copy`, which stops quietly at the end; a hostile page header that
/// declares a list of a billion byte strings would then be skipped one empty
/// read at a time, for minutes. An error ends it at the first read past the end.
pub(crate) struct NoReadPastEnd(bytes::buf::Reader<Bytes>);

impl std::io::Read for NoReadPastEnd {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !buf.is_empty() && !self.0.get_ref().has_remaining() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "read past the end of the fetched bytes",
            ));
        }
        self.0.read(buf)
    }
}

impl ChunkReader for Fetched {
    type T = NoReadPastEnd;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(NoReadPastEnd(self.slice(start, None)?.reader()))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, Some(length))
    }
}

/// Parses a Parquet footer given a way to read byte ranges of the file.
pub(crate) fn read_footer(
    len: u64,
    mut read: impl FnMut(Range<u64>) -> Result<Bytes>,
) -> Result<ParquetMetaData, String> {
    if len < MIN_PARQUET_LEN {
        return Err(format!("{len} bytes is too short for a Parquet file"));
    }
    let tail = read(len - 8..len).map_err(|e| e.to_string())?;
    let last: [u8; 8] = tail.as_ref().try_into().map_err(|_| "short footer read")?;
    let footer = FooterTail::try_new(&last).map_err(|e| format!("footer: {e}"))?;
    if footer.is_encrypted_footer() {
        return Err("encrypted Parquet footers are not supported".into());
    }
    let meta_len = footer.metadata_length() as u64;
    if meta_len + MIN_PARQUET_LEN > len {
        return Err(format!(
            "footer metadata of {meta_len} bytes does not fit in a file of {len} bytes"
        ));
    }
    let meta = read(len - 8 - meta_len..len - 8).map_err(|e| e.to_string())?;
    check_footer(&meta)?;
    guarded(|| {
        ParquetMetaDataReader::decode_metadata(&meta).map_err(|e| format!("footer metadata: {e}"))
    })
}

/// Checks every column chunk's byte range of `meta` against the file length
/// (the parquet crate panics on negative offsets, so this runs first).
pub(crate) fn check_chunk_ranges(meta: &ParquetMetaData, len: u64) -> Result<(), String> {
    for (rg, group) in meta.row_groups().iter().enumerate() {
        for col in group.columns() {
            let start = col
                .dictionary_page_offset()
                .unwrap_or(col.data_page_offset());
            let size = col.compressed_size();
            let ok = start >= 0
                && size >= 0
                && (start as u64)
                    .checked_add(size as u64)
                    .is_some_and(|end| end <= len);
            if !ok {
                return Err(format!(
                    "row group {rg}: column chunk at {start} of {size} bytes lies outside the file"
                ));
            }
        }
    }
    Ok(())
}

/// Checks the page headers of the column chunks of row group `rg` (one
/// column, or all) before the parquet crate decodes them: see
/// [`check_pages`]. The chunks' ranges were checked with the footer.
pub(crate) fn check_row_group_pages<R: ChunkReader>(
    input: &R,
    meta: &ParquetMetaData,
    rg: usize,
    column: Option<usize>,
) -> Result<(), String> {
    let group = meta.row_group(rg);
    let columns = column.map_or(0..group.num_columns(), |c| c..c + 1);
    for c in columns {
        let (start, len) = group.column(c).byte_range();
        let len = usize::try_from(len).map_err(|e| e.to_string())?;
        let bytes = input.get_bytes(start, len).map_err(|e| e.to_string())?;
        check_pages(&bytes).map_err(|e| format!("column {c}: {e}"))?;
    }
    Ok(())
}

/// Decodes row group `rg` (optionally one column) into one record batch of `rows` rows.
pub(crate) fn decode_row_group<R: ChunkReader + 'static>(
    input: R,
    meta: &ArrowReaderMetadata,
    rg: usize,
    rows: usize,
    column: Option<usize>,
) -> Result<RecordBatch, String> {
    check_row_group_pages(&input, meta.metadata(), rg, column)?;
    guarded(|| {
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(input, meta.clone())
            .with_row_groups(vec![rg])
            .with_batch_size(rows.max(1));
        if let Some(c) = column {
            builder = builder.with_projection(ProjectionMask::roots(meta.parquet_schema(), [c]));
        }
        let mut batches = builder.build().map_err(|e| e.to_string())?;
        let batch = batches.next().transpose().map_err(|e| e.to_string())?;
        match (batch, batches.next()) {
            (Some(b), None) if b.num_rows() == rows => Ok(b),
            _ => Err(format!("row group does not decode to exactly {rows} rows")),
        }
    })
}

/// What [`ObsReader::verify`] checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObsVerifyReport {
    /// Shards checked.
    pub shards: usize,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Rows decoded: one per cell of the dataset.
    pub rows: u64,
}

/// The obs sidecar of an open dataset.
pub struct ObsReader {
    store: Arc<dyn Store>,
    schema: ObsSchema,
    manifest: ObsManifest,
    tile_cells: Vec<u64>,
    limits: Arc<[u64]>,
    /// Per shard, whether its bytes were checked against the manifest's
    /// size and SHA-256 since it was opened (see [`ObsReader::read_column`]).
    checked: Arc<[AtomicBool]>,
}

impl std::fmt::Debug for ObsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObsReader")
            .field("store", &self.store.describe())
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// Footers fetched during one operation, by shard.
pub(crate) struct Footers(Vec<Option<ArrowReaderMetadata>>);

impl ObsReader {
    /// Opens the obs of a dataset whose manifest has `has_obs`: parses and
    /// checks schema.json, recomputes the fingerprint, and checks each shard's
    /// size. Reads no Parquet byte.
    pub fn open(store: Arc<dyn Store>, manifest: &Manifest) -> Result<ObsReader> {
        let obs = manifest
            .obs
            .clone()
            .ok_or_else(|| obs_rule("the manifest has no obs (has_obs is false)"))?;
        let text = store
            .get(SCHEMA_KEY)?
            .ok_or_else(|| obs_rule("has_obs is true but obs/schema.json is missing"))?;
        let schema = ObsSchema::parse(text.as_bytes()).map_err(obs_rule)?;
        // It parsed as JSON, so it is UTF-8.
        let text = std::str::from_utf8(text.as_bytes())
            .map_err(|e| obs_rule(format!("schema.json: {e}")))?;
        let expected = fingerprint(text, &manifest.tile_cells, &obs.shard_sha256);
        if !expected.eq_ignore_ascii_case(&obs.fingerprint) {
            return Err(obs_rule(format!(
                "obs_fingerprint is {}, the schema, tile_cells and shard hashes give {expected}",
                obs.fingerprint
            )));
        }
        for (s, &bytes) in obs.shard_bytes.iter().enumerate() {
            let key = shard_key(s);
            match store.size(&key)? {
                None => return Err(obs_rule(format!("{key} is missing"))),
                Some(actual) if actual != bytes => {
                    return Err(obs_rule(format!(
                        "obs_shard_bytes[{s}] is {bytes}, {key} is {actual} bytes"
                    )));
                }
                Some(_) => {}
            }
        }
        let mut limits = Vec::with_capacity(manifest.tile_cells.len() + 1);
        limits.push(0);
        for &c in &manifest.tile_cells {
            limits.push(limits[limits.len() - 1] + c);
        }
        let checked = obs
            .shard_bytes
            .iter()
            .map(|_| AtomicBool::new(false))
            .collect();
        Ok(ObsReader {
            store,
            schema,
            manifest: obs,
            tile_cells: manifest.tile_cells.clone(),
            limits: limits.into(),
            checked,
        })
    }

    /// The obs schema.
    pub fn schema(&self) -> &ObsSchema {
        &self.schema
    }

    /// The fingerprint identifying this obs content (it keys the local cache).
    pub fn fingerprint(&self) -> String {
        self.manifest.fingerprint.to_ascii_lowercase()
    }

    /// Number of shards.
    pub fn n_shards(&self) -> usize {
        self.manifest.shard_bytes.len()
    }

    /// Total size of the shards in bytes.
    pub fn shard_bytes(&self) -> u64 {
        self.manifest.shard_bytes.iter().sum()
    }

    /// Cells per tile (rows per row group).
    pub fn tile_cells(&self) -> &[u64] {
        &self.tile_cells
    }

    /// First global cell of each tile, plus `n_cells` at the end.
    pub(crate) fn limits(&self) -> &Arc<[u64]> {
        &self.limits
    }

    fn tiles_per_file(&self) -> usize {
        usize::try_from(self.manifest.tiles_per_file).unwrap_or(usize::MAX)
    }

    pub(crate) fn footers(&self) -> Footers {
        Footers(vec![None; self.n_shards()])
    }

    /// Checks a shard's footer against the manifest and the schema: row group
    /// count and rows, chunk ranges, and exactly the schema's columns in order
    /// with the schema's Arrow types.
    fn check_footer(&self, s: usize, meta: ParquetMetaData) -> Result<ArrowReaderMetadata, String> {
        let first = s * self.tiles_per_file();
        let tiles = first..(first.saturating_add(self.tiles_per_file())).min(self.tile_cells.len());
        if meta.num_row_groups() != tiles.len() {
            return Err(format!(
                "{} row groups, the shard holds tiles {tiles:?} (one row group per tile)",
                meta.num_row_groups()
            ));
        }
        for (rg, t) in tiles.enumerate() {
            let rows = meta.row_group(rg).num_rows();
            if u64::try_from(rows).ok() != Some(self.tile_cells[t]) {
                return Err(format!(
                    "row group {rg} has {rows} rows, tile {t} has {} cells",
                    self.tile_cells[t]
                ));
            }
        }
        let len = self.manifest.shard_bytes[s];
        let arrow = ArrowReaderMetadata::try_new(Arc::new(meta), ArrowReaderOptions::new())
            .map_err(|e| e.to_string())?;
        let fields = arrow.schema().fields();
        let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
        let expected = self.schema.names();
        if names != expected {
            return Err(format!(
                "columns are {names:?}, the schema lists {expected:?} (exactly, in order)"
            ));
        }
        for (f, c) in fields.iter().zip(&self.schema.columns) {
            if f.data_type() != &c.arrow_type.data_type() {
                return Err(format!(
                    "column {:?} is {} in the shard, the schema says {}",
                    c.name,
                    f.data_type(),
                    c.arrow_type
                ));
            }
        }
        for (rg, group) in arrow.metadata().row_groups().iter().enumerate() {
            if group.num_columns() != self.schema.columns.len() {
                return Err(format!(
                    "row group {rg} has {} column chunks for {} columns",
                    group.num_columns(),
                    fields.len()
                ));
            }
        }
        check_chunk_ranges(arrow.metadata(), len)?;
        Ok(arrow)
    }

    /// The checked footer of shard `s` (fetched with ranged reads once per `footers`).
    fn footer<'f>(&self, s: usize, footers: &'f mut Footers) -> Result<&'f ArrowReaderMetadata> {
        let slot = footers
            .0
            .get_mut(s)
            .ok_or_else(|| obs_rule(format!("no shard {s}")))?;
        if slot.is_none() {
            let key = shard_key(s);
            let len = self.manifest.shard_bytes[s];
            let meta = read_footer(len, |r| self.store.get_range(&key, r).map(to_bytes))
                // The checks walk the decoded metadata through the parquet
                // and arrow crates (schema conversion included): guarded too.
                .and_then(|m| guarded(|| self.check_footer(s, m)))
                .map_err(|e| obs_rule(format!("{key}: {e}")))?;
            *slot = Some(meta);
        }
        slot.as_ref().ok_or_else(|| obs_rule("footer cache"))
    }

    /// Schema and position of column `name` (an input error if there is none).
    pub(crate) fn column(&self, name: &str) -> Result<(usize, &ColumnSchema)> {
        self.schema.column(name).ok_or_else(|| {
            let known = self.schema.names();
            Error::Input(format!("no obs column {name:?} (columns: {known:?})"))
        })
    }

    /// Column `name` for tiles `tiles`, one array per tile, read with ranged
    /// reads of the footers and of this column's chunks only.
    ///
    /// From a local store, each shard the read touches is first read whole
    /// and checked against its size and SHA-256 in the manifest, once for
    /// the life of this reader: a flipped bit in a value would otherwise
    /// pass every check of the column's structure and come back as data.
    /// From a remote store, where that would fetch every column of the shard
    /// for one, the ranged reads are checked for structure only (as ranged
    /// tile reads skip the whole tile's CRC); [`ObsReader::verify`] and
    /// [`ObsReader::localize`], which batches read their labels through,
    /// check the hashes there too.
    pub fn read_column(&self, name: &str, tiles: Range<usize>) -> Result<Vec<ArrayRef>> {
        let (index, _) = self.column(name)?;
        self.read_column_with(index, tiles, &mut self.footers())
    }

    pub(crate) fn read_column_with(
        &self,
        index: usize,
        tiles: Range<usize>,
        footers: &mut Footers,
    ) -> Result<Vec<ArrayRef>> {
        if tiles.start > tiles.end || tiles.end > self.tile_cells.len() {
            return Err(Error::Input(format!(
                "tiles {tiles:?} are outside 0..{}",
                self.tile_cells.len()
            )));
        }
        let column = &self.schema.columns[index];
        let mut out = Vec::with_capacity(tiles.len());
        for t in tiles {
            let s = t / self.tiles_per_file();
            let rg = t - s * self.tiles_per_file();
            let key = shard_key(s);
            if !self.store.is_remote() && !self.checked[s].load(Ordering::Relaxed) {
                self.checked_shard(s)?;
                self.checked[s].store(true, Ordering::Relaxed);
            }
            let meta = self.footer(s, footers)?;
            let chunk = meta.metadata().row_group(rg).column(index);
            // Checked by check_chunk_ranges when the footer was read.
            let (start, len) = chunk.byte_range();
            let part = to_bytes(self.store.get_range(&key, start..start + len)?);
            let input = Fetched {
                len: self.manifest.shard_bytes[s],
                parts: vec![(start, part)],
            };
            let rows = self.tile_cells[t] as usize;
            let array = decode_row_group(input, meta, rg, rows, Some(index))
                .and_then(|b| check_column(column, b.column(0)).map(|()| b.column(0).clone()))
                .map_err(|e| {
                    obs_rule(format!(
                        "{key}, row group {rg} (tile {t}), column {:?}: {e}",
                        column.name
                    ))
                })?;
            out.push(array);
        }
        Ok(out)
    }

    /// Shard `s` fetched whole and checked against its size and SHA-256 in
    /// the manifest.
    pub(crate) fn checked_shard(&self, s: usize) -> Result<AlignedBytes> {
        let key = shard_key(s);
        let bytes = self
            .store
            .get(&key)?
            .ok_or_else(|| obs_rule(format!("{key} is missing")))?;
        let (expected_len, expected_sha) =
            (self.manifest.shard_bytes[s], &self.manifest.shard_sha256[s]);
        if bytes.len() as u64 != expected_len {
            return Err(obs_rule(format!(
                "obs_shard_bytes[{s}] is {expected_len}, {key} is {} bytes",
                bytes.len()
            )));
        }
        let sha = sha256_hex(bytes.as_bytes());
        if !sha.eq_ignore_ascii_case(expected_sha) {
            return Err(obs_rule(format!(
                "obs_shard_sha256[{s}] is {expected_sha}, {key} hashes to {sha}"
            )));
        }
        Ok(bytes)
    }

    /// The same obs read through `store`, which holds copies of every shard
    /// already checked against the manifest (none is checked again).
    pub(crate) fn over_checked_copies(&self, store: Arc<dyn Store>) -> ObsReader {
        ObsReader {
            store,
            schema: self.schema.clone(),
            manifest: self.manifest.clone(),
            tile_cells: self.tile_cells.clone(),
            limits: self.limits.clone(),
            checked: self.checked.iter().map(|_| AtomicBool::new(true)).collect(),
        }
    }

    /// Full check of every shard: size and SHA-256 against the manifest, the
    /// footer against the schema and the tiles, every row group decoded, and
    /// every category code within its vocabulary.
    pub fn verify(&self) -> Result<ObsVerifyReport> {
        let mut report = ObsVerifyReport::default();
        for s in 0..self.n_shards() {
            let key = shard_key(s);
            let expected_len = self.manifest.shard_bytes[s];
            let bytes = self.checked_shard(s)?;
            let data = to_bytes(bytes);
            let meta = read_footer(expected_len, |r| {
                Ok(data.slice(r.start as usize..r.end as usize))
            })
            .and_then(|m| self.check_footer(s, m))
            .map_err(|e| obs_rule(format!("{key}: {e}")))?;
            for rg in 0..meta.metadata().num_row_groups() {
                let t = s * self.tiles_per_file() + rg;
                let rows = self.tile_cells[t] as usize;
                let batch =
                    decode_row_group(Fetched::whole(data.clone()), &meta, rg, rows, None)
                        .map_err(|e| obs_rule(format!("{key}, row group {rg} (tile {t}): {e}")))?;
                for (column, array) in self.schema.columns.iter().zip(batch.columns()) {
                    check_column(column, array).map_err(|e| {
                        obs_rule(format!(
                            "{key}, row group {rg} (tile {t}), column {:?}: {e}",
                            column.name
                        ))
                    })?;
                }
                report.rows += rows as u64;
            }
            report.shards += 1;
            report.bytes += expected_len;
        }
        Ok(report)
    }
}

/// Checks a decoded array against its schema entry: the Arrow type and, for
/// a category column, every code in `-1..len(categories)`.
pub(crate) fn check_column(column: &ColumnSchema, array: &dyn Array) -> Result<(), String> {
    if array.data_type() != &column.arrow_type.data_type() {
        return Err(format!(
            "decoded as {}, the schema says {}",
            array.data_type(),
            column.arrow_type
        ));
    }
    match (&column.kind, &column.categories) {
        (Kind::Category, Some(categories)) => check_codes(array, categories.len()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::guarded;

    #[test]
    fn a_panic_inside_the_guard_becomes_an_error_and_results_pass_through() {
        let panicked: Result<(), String> = guarded(|| panic!("a decoder's bug"));
        assert_eq!(
            panicked,
            Err("the decoder failed on corrupt data".to_string())
        );
        assert_eq!(guarded(|| Ok(7)), Ok(7));
        assert_eq!(guarded::<()>(|| Err("bad".into())), Err("bad".to_string()));
    }
}

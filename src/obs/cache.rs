//! The local obs cache: localized columns as memory-mapped Arrow IPC files.
//!
//! `<cache>/<fingerprint>/obs/<url-quoted column name>.arrow` holds one column,
//! one record batch per tile, uncompressed, so reading it is a mapping and a
//! footer parse: labels never touch Parquet. The fingerprint changes with the
//! obs content, so a cache directory never holds stale data for a dataset,
//! only possibly a damaged file, which is detected (a CRC-32 of the data in
//! the footer, the batch layout, batch and row counts, types, codes) and
//! fetched again. Each file also records the fingerprint it was fetched
//! under, so that one copied into another dataset's directory (same column,
//! type and tiles, other values) is not taken for that dataset's.
//!
//! Concurrency and durability come from [`crate::storage::node_cache`]: a
//! column is written whole under its entry lock and renamed into place, so
//! processes on one node that localize the same column at once fetch it
//! once, and different columns are fetched in parallel.
//!
//! Integrity: before any column is cached from a shard, the whole shard is
//! fetched once and checked against its size and SHA-256 in the manifest, so
//! a damaged or tampered shard never reaches a cache that every later job on
//! the node trusts. This costs the other columns' bytes of each shard, once
//! per node and obs fingerprint; the columns are then decoded from the
//! verified copy in memory.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::reader::{read_footer_length, FileDecoder};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{Field, Schema};
use arrow_select::interleave::interleave;
use bytes::Bytes;

use super::labels::{locate, Label, Labels};
use super::reader::{check_column, guarded, ObsReader};
use super::schema::ColumnSchema;
use super::shards::shard_key;
use crate::error::{Error, Result};
use crate::storage::node_cache::{cache_root, CacheDir};
use crate::storage::MemoryStore;

/// A column name as a file name: Python's `urllib.parse.quote(name, safe="")`.
/// Only `A-Z a-z 0-9 _ . - ~` stay as they are, so no name can hold a path
/// separator, and with the `.arrow` suffix none is `.` or `..`.
///
/// Localized column `name` lives at
/// `<cache>/<fingerprint>/obs/<quote_name(name)>.arrow` (spec "Local cache"),
/// where `<cache>` is [`cache_root`].
pub fn quote_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Which columns a [`ObsReader::localize`] call fetched and which it found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalizeReport {
    /// Columns read from the shards and written to the cache by this call.
    pub fetched: Vec<String>,
    /// Columns found valid in the cache.
    pub reused: Vec<String>,
    /// Columns whose cached file was damaged (deleted, then fetched again).
    pub replaced: Vec<String>,
}

struct LocalColumn {
    schema: ColumnSchema,
    path: PathBuf,
    /// One array per tile, borrowing the mapped file.
    tiles: Vec<ArrayRef>,
}

/// Localized obs columns, memory-mapped; cheap to query for any cells.
pub struct LocalObs {
    columns: Vec<LocalColumn>,
    limits: Arc<[u64]>,
    dir: PathBuf,
    report: LocalizeReport,
}

impl std::fmt::Debug for LocalObs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalObs")
            .field("dir", &self.dir)
            .field("columns", &self.columns.len())
            .finish_non_exhaustive()
    }
}

impl LocalObs {
    /// The directory holding the column files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What localizing did.
    pub fn report(&self) -> &LocalizeReport {
        &self.report
    }

    /// The localized columns, in request order.
    pub fn columns(&self) -> impl Iterator<Item = &ColumnSchema> {
        self.columns.iter().map(|c| &c.schema)
    }

    /// The cache file of column `name`.
    pub fn path(&self, name: &str) -> Option<&Path> {
        self.columns
            .iter()
            .find(|c| c.schema.name == name)
            .map(|c| c.path.as_path())
    }

    /// The localized columns for exactly `cells`, in that order (duplicates
    /// allowed), gathered from the mapped files.
    pub fn labels(&self, cells: &[u64]) -> Result<Labels> {
        let at = locate(&self.limits, cells)?;
        let columns = self
            .columns
            .iter()
            .map(|c| {
                let sources: Vec<&dyn arrow_array::Array> =
                    at.tiles.iter().map(|&t| c.tiles[t].as_ref()).collect();
                let values = if at.index.is_empty() {
                    arrow_array::new_empty_array(&c.schema.arrow_type.data_type())
                } else {
                    interleave(&sources, &at.index).map_err(|e| {
                        Error::Input(format!("gathering obs column {:?}: {e}", c.schema.name))
                    })?
                };
                Ok(Label {
                    name: c.schema.name.clone(),
                    kind: c.schema.kind,
                    values,
                    categories: c.schema.categories.clone(),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Labels::new(columns))
    }
}

/// The state of a column's cache file.
enum Cached {
    Valid(Vec<ArrayRef>),
    Missing,
    Damaged(String),
}

/// What a cache entry must be: the column, the tiles' cells, and the obs
/// fingerprint of the dataset it was fetched from.
struct Expected<'a> {
    column: &'a ColumnSchema,
    tile_cells: &'a [u64],
    fingerprint: &'a str,
}

/// Maps and checks a cache entry against what it must be.
fn load(cache: &CacheDir, file: &str, expected: &Expected<'_>) -> Result<Cached> {
    // Never opened: a FIFO there hung the read until killed.
    if let Some(kind) = cache.not_a_file(file)? {
        return Ok(Cached::Damaged(format!("a {kind}, not a file")));
    }
    let Some(map) = cache.map(file)? else {
        return Ok(Cached::Missing);
    };
    // Magic, padding, a footer length and the trailing magic at the least.
    if map.len() < 16 {
        return Ok(Cached::Damaged(format!(
            "{} bytes is too short for an Arrow IPC file",
            map.len()
        )));
    }
    let buffer = Buffer::from(Bytes::from_owner(map));
    Ok(match guarded(|| parse(&buffer, expected)) {
        Ok(tiles) => Cached::Valid(tiles),
        Err(reason) => Cached::Damaged(reason),
    })
}

/// Decodes the record batches of a mapped IPC file without copying.
fn parse(buffer: &Buffer, want: &Expected<'_>) -> Result<Vec<ArrayRef>, String> {
    let (column, tile_cells) = (want.column, want.tile_cells);
    let n = buffer.len();
    let trailer: [u8; 10] = buffer[n - 10..].try_into().map_err(|_| "short trailer")?;
    let footer_len = read_footer_length(trailer).map_err(|e| e.to_string())?;
    let footer_start = (n - 10)
        .checked_sub(footer_len)
        .ok_or("footer length beyond the file")?;
    let footer = arrow_ipc::root_as_footer(&buffer[footer_start..n - 10])
        .map_err(|e| format!("footer: {e}"))?;
    let schema =
        arrow_ipc::convert::try_fb_to_schema(footer.schema().ok_or("no schema in the footer")?)
            .map_err(|e| e.to_string())?;
    let expected = column.arrow_type.data_type();
    // The name too: another column's file of the same type, intact and with
    // its own valid checksum, must not stand in for this one.
    if schema.fields().len() != 1
        || schema.field(0).data_type() != &expected
        || schema.field(0).name() != &column.name
    {
        return Err(format!(
            "schema {schema}, expected one {} column named {:?}",
            column.arrow_type, column.name
        ));
    }
    if footer.dictionaries().is_some_and(|d| !d.is_empty()) {
        return Err("unexpected dictionary batches".into());
    }
    // Every byte before the footer is what the writer checksummed, and the
    // record batches must lie there back to back (checked below), so no bit
    // of the data can change unnoticed: the spec's batch and row counts alone
    // would let a flipped value through.
    let metadata = |key: &str| {
        footer
            .custom_metadata()
            .and_then(|m| m.iter().find(|kv| kv.key() == Some(key)))
            .and_then(|kv| kv.value())
    };
    // The directory is named by the fingerprint, but nothing stops a file
    // from being copied into another dataset's directory: the file says
    // which obs it was fetched from.
    let fingerprint = metadata(FINGERPRINT_KEY).ok_or("no obs fingerprint in the footer")?;
    if fingerprint != want.fingerprint {
        return Err(format!(
            "fetched from obs {fingerprint:?}, this dataset's is {:?}",
            want.fingerprint
        ));
    }
    let crc = metadata(CRC_KEY).ok_or("no checksum in the footer")?;
    // The writer ends the batches with the 8-byte end-of-stream marker, then
    // the footer; the checksum covers what comes before the marker.
    let data_end = footer_start
        .checked_sub(END_OF_STREAM.len())
        .filter(|&end| buffer[end..footer_start] == END_OF_STREAM)
        .ok_or("no end-of-stream marker before the footer")?;
    let actual = crc32fast::hash(&buffer[..data_end]);
    if crc != format!("{actual:08x}") {
        return Err(format!(
            "checksum {crc:?} in the footer, the data's is {actual:08x}"
        ));
    }
    let blocks = footer.recordBatches().ok_or("no record batch list")?;
    if blocks.len() != tile_cells.len() {
        return Err(format!(
            "{} record batches, the dataset has {} tiles",
            blocks.len(),
            tile_cells.len()
        ));
    }
    let decoder = FileDecoder::new(Arc::new(schema), footer.version());
    let mut tiles = Vec::with_capacity(blocks.len());
    // Where the last record batch read ends.
    let mut end: Option<usize> = None;
    for (t, block) in blocks.iter().enumerate() {
        let (offset, meta, body) = (block.offset(), block.metaDataLength(), block.bodyLength());
        let range = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(meta).ok())
            .zip(usize::try_from(body).ok())
            .and_then(|((o, m), b)| {
                let len = m.checked_add(b)?;
                (o.checked_add(len)? <= n).then_some((o, len))
            });
        let (offset, len) =
            range.ok_or_else(|| format!("record batch {t} lies outside the file"))?;
        // Back to back, ending at the end-of-stream marker: a footer pointing
        // elsewhere (one batch twice, say) is damage the checksum cannot see.
        if let Some(end) = end.filter(|&end| end != offset) {
            return Err(format!(
                "record batch {t} starts at {offset}, the one before ends at {end}"
            ));
        }
        end = Some(offset + len);
        let batch = decoder
            .read_record_batch(block, &buffer.slice_with_length(offset, len))
            .map_err(|e| format!("record batch {t}: {e}"))?
            .ok_or_else(|| format!("record batch {t} is empty"))?;
        if batch.num_rows() as u64 != tile_cells[t] {
            return Err(format!(
                "record batch {t} has {} rows, tile {t} has {} cells",
                batch.num_rows(),
                tile_cells[t]
            ));
        }
        check_column(column, batch.column(0)).map_err(|e| format!("record batch {t}: {e}"))?;
        tiles.push(batch.column(0).clone());
    }
    if let Some(end) = end.filter(|&end| end != data_end) {
        return Err(format!(
            "the record batches end at {end}, the stream at {data_end}"
        ));
    }
    Ok(tiles)
}

/// The footer metadata key holding the CRC-32 (8 lower-case hex digits) of
/// every byte before the end-of-stream marker: the magic, the schema message
/// and the record batches.
const CRC_KEY: &str = "deltacells.crc32";

/// The footer metadata key holding the obs fingerprint of the dataset the
/// column was fetched from.
const FINGERPRINT_KEY: &str = "deltacells.obs_fingerprint";

/// What an IPC writer puts after the last message: a continuation marker
/// and a zero length.
const END_OF_STREAM: [u8; 8] = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];

/// A writer that checksums what passes through it.
struct Checksummed<W> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: std::io::Write> std::io::Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `tiles` as cache entry `file` (an IPC file, one batch per tile),
/// with the CRC-32 of everything before the end of the stream and the obs
/// `fingerprint` in the footer.
fn write_column(
    cache: &CacheDir,
    file: &str,
    column: &ColumnSchema,
    fingerprint: &str,
    tiles: Vec<ArrayRef>,
) -> Result<()> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        &column.name,
        column.arrow_type.data_type(),
        true,
    )]));
    let other = |e: arrow_schema::ArrowError| std::io::Error::other(e.to_string());
    cache.write(file, |f| {
        let sink = Checksummed {
            inner: std::io::BufWriter::new(f),
            crc: crc32fast::Hasher::new(),
        };
        let mut writer = FileWriter::try_new(sink, &schema).map_err(other)?;
        for array in tiles {
            writer
                .write(&RecordBatch::try_new(schema.clone(), vec![array]).map_err(other)?)
                .map_err(other)?;
        }
        let crc = writer.get_ref().crc.clone().finalize();
        writer.write_metadata(CRC_KEY, format!("{crc:08x}"));
        writer.write_metadata(FINGERPRINT_KEY, fingerprint);
        writer.finish().map_err(other)?;
        std::io::Write::flush(&mut writer.into_inner().map_err(other)?.inner)
    })
}

impl ObsReader {
    /// Makes `columns` available locally: each is read from the cache
    /// directory (see [`cache_root`]) when a valid copy is there, and otherwise
    /// fetched with ranged reads of only its column chunks, written atomically
    /// under a lock, and mapped.
    pub fn localize<S: AsRef<str>>(
        &self,
        columns: &[S],
        cache_dir: Option<&Path>,
    ) -> Result<LocalObs> {
        let fingerprint = self.fingerprint();
        let cache = CacheDir::open(cache_root(cache_dir)?.join(&fingerprint).join("obs"))?;
        let mut seen = HashSet::new();
        let mut footers = self.footers();
        // Shards fetched whole and checked, on the first column that needs them.
        let mut verified: Option<ObsReader> = None;
        let mut report = LocalizeReport::default();
        let mut local = Vec::with_capacity(columns.len());
        for name in columns {
            let name = name.as_ref();
            if !seen.insert(name) {
                return Err(Error::Input(format!("obs column {name:?} requested twice")));
            }
            let (index, schema) = self.column(name)?;
            let file = format!("{}.arrow", quote_name(name));
            let expected = Expected {
                column: schema,
                tile_cells: self.tile_cells(),
                fingerprint: &fingerprint,
            };
            let tiles = match load(&cache, &file, &expected)? {
                Cached::Valid(tiles) => {
                    report.reused.push(name.to_string());
                    tiles
                }
                Cached::Missing | Cached::Damaged(_) => {
                    let _lock = cache.lock(&file)?;
                    // Another process may have written it while we waited.
                    match load(&cache, &file, &expected)? {
                        Cached::Valid(tiles) => {
                            report.reused.push(name.to_string());
                            tiles
                        }
                        state => {
                            if let Cached::Damaged(_) = state {
                                cache.remove(&file)?;
                                report.replaced.push(name.to_string());
                            }
                            let source = match &mut verified {
                                Some(v) => v,
                                None => verified.insert(self.verified_copy()?),
                            };
                            let fetched = source.read_column_with(
                                index,
                                0..self.tile_cells().len(),
                                &mut footers,
                            )?;
                            write_column(&cache, &file, schema, &fingerprint, fetched)?;
                            report.fetched.push(name.to_string());
                            match load(&cache, &file, &expected)? {
                                Cached::Valid(tiles) => tiles,
                                Cached::Missing => {
                                    return Err(Error::Input(format!(
                                        "{} vanished after writing",
                                        cache.path(&file)?.display()
                                    )))
                                }
                                Cached::Damaged(why) => {
                                    return Err(Error::Input(format!(
                                        "{} is damaged right after writing: {why}",
                                        cache.path(&file)?.display()
                                    )))
                                }
                            }
                        }
                    }
                }
            };
            local.push(LocalColumn {
                schema: schema.clone(),
                path: cache.path(&file)?,
                tiles,
            });
        }
        Ok(LocalObs {
            columns: local,
            limits: self.limits().clone(),
            dir: cache.dir().to_path_buf(),
            report,
        })
    }

    /// A reader over copies of every shard held in memory, each fetched whole
    /// and checked against its size and SHA-256 in the manifest.
    fn verified_copy(&self) -> Result<ObsReader> {
        let memory = MemoryStore::new();
        for s in 0..self.n_shards() {
            let bytes = self.checked_shard(s)?;
            memory.insert(shard_key(s), bytes.as_bytes());
        }
        Ok(self.over_checked_copies(Arc::new(memory)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_matches_python_and_cannot_escape() {
        // urllib.parse.quote(s, safe="")
        assert_eq!(quote_name("../x"), "..%2Fx");
        assert_eq!(quote_name("cell type/β"), "cell%20type%2F%CE%B2");
        assert_eq!(quote_name("a_b-c.d~"), "a_b-c.d~");
        assert!(!quote_name("/..\\").contains(['/', '\\']));
    }
}

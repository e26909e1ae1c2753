//! The local obs cache: localized columns as memory-mapped Arrow IPC files.
//!
//! `<cache>/<fingerprint>/obs/<url-quoted column name>.arrow` holds one column,
//! one record batch per tile, uncompressed, so reading it is a mapping and a
//! footer parse: labels never touch Parquet. The fingerprint changes with the
//! obs content, so a cache directory never holds stale data for a dataset,
//! only possibly a damaged file, which is detected (batch and row counts,
//! types, codes) and fetched again.
//!
//! Concurrency: a column is written to a temporary file and renamed into
//! place while its lock file (`<name>.arrow.lock`, an exclusive `flock`) is
//! held, and re-checked after the lock is taken, so processes on one node that
//! localize the same column at once fetch it once; different columns are
//! fetched in parallel. A final file is never written in place: a damaged one
//! is unlinked and replaced by a new inode, so a mapping held elsewhere keeps
//! seeing the old, complete file.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::reader::{read_footer_length, FileDecoder};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{Field, Schema};
use arrow_select::interleave::interleave;
use bytes::Bytes;
use memmap2::Mmap;

use super::labels::{locate, Label, Labels};
use super::reader::{check_column, guarded, ObsReader};
use super::schema::ColumnSchema;
use crate::error::{Error, Result};

/// Environment variable naming the cache directory.
pub const CACHE_ENV: &str = "DELTACELLS_CACHE";

/// The cache directory: `explicit`, else `$DELTACELLS_CACHE`,
/// `$XDG_CACHE_HOME/deltacells`, `~/.cache/deltacells`.
pub fn cache_root(explicit: Option<&Path>) -> Result<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    explicit
        .map(Path::to_path_buf)
        .or_else(|| var(CACHE_ENV))
        .or_else(|| var("XDG_CACHE_HOME").map(|p| p.join("deltacells")))
        .or_else(|| var("HOME").map(|p| p.join(".cache").join("deltacells")))
        .ok_or_else(|| {
            Error::Config(format!(
                "no obs cache directory: pass one or set {CACHE_ENV}, XDG_CACHE_HOME or HOME"
            ))
        })
}

/// A column name as a file name: Python's `urllib.parse.quote(name, safe="")`.
/// Only `A-Z a-z 0-9 _ . - ~` stay as they are, so no name can hold a path
/// separator, and with the `.arrow` suffix none is `.` or `..`.
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

/// Maps a cache file read-only.
fn map_file(file: &File, path: &Path) -> Result<Mmap> {
    // SAFETY: the mapping is read-only and the file is never modified while
    // mapped by this crate: cache files are written whole under a temporary
    // name, synced and renamed into place, and a damaged one is unlinked and
    // replaced by a new file, never truncated or rewritten in place, so the
    // inode behind a mapping keeps its length and bytes. (Another program
    // truncating the file by hand would break that, as with any mmap.)
    unsafe { Mmap::map(file) }.map_err(|e| Error::io(format!("mapping {}", path.display()), e))
}

/// Opens, maps and checks a cache file against the column and the tiles.
fn load(path: &Path, column: &ColumnSchema, tile_cells: &[u64]) -> Result<Cached> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Cached::Missing),
        Err(e) => return Err(Error::io(path.display().to_string(), e)),
    };
    let len = file
        .metadata()
        .map_err(|e| Error::io(path.display().to_string(), e))?
        .len();
    // Magic, padding, a footer length and the trailing magic at the least.
    if len < 16 {
        return Ok(Cached::Damaged(format!(
            "{len} bytes is too short for an Arrow IPC file"
        )));
    }
    let buffer = Buffer::from(Bytes::from_owner(map_file(&file, path)?));
    Ok(match guarded(|| parse(&buffer, column, tile_cells)) {
        Ok(tiles) => Cached::Valid(tiles),
        Err(reason) => Cached::Damaged(reason),
    })
}

/// Decodes the record batches of a mapped IPC file without copying.
fn parse(
    buffer: &Buffer,
    column: &ColumnSchema,
    tile_cells: &[u64],
) -> Result<Vec<ArrayRef>, String> {
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
    if schema.fields().len() != 1 || schema.field(0).data_type() != &expected {
        return Err(format!(
            "schema {schema}, expected one {} column",
            column.arrow_type
        ));
    }
    if footer.dictionaries().is_some_and(|d| !d.is_empty()) {
        return Err("unexpected dictionary batches".into());
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
    Ok(tiles)
}

/// Removes a temporary file unless it was renamed into place.
struct Temporary(Option<PathBuf>);

impl Drop for Temporary {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

/// Writes `tiles` as an IPC file at `path` via a temporary file and a rename.
fn write_column(path: &Path, column: &ColumnSchema, tiles: Vec<ArrayRef>) -> Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let io = |e| Error::io(tmp.display().to_string(), e);
    let ipc = |e: arrow_schema::ArrowError| Error::Input(format!("writing {}: {e}", tmp.display()));
    let mut guard = Temporary(Some(tmp.clone()));
    let schema = Arc::new(Schema::new(vec![Field::new(
        &column.name,
        column.arrow_type.data_type(),
        true,
    )]));
    let mut writer =
        FileWriter::try_new_buffered(File::create_new(&tmp).map_err(io)?, &schema).map_err(ipc)?;
    for array in tiles {
        writer
            .write(&RecordBatch::try_new(schema.clone(), vec![array]).map_err(ipc)?)
            .map_err(ipc)?;
    }
    writer.finish().map_err(ipc)?;
    let mut file = writer
        .into_inner()
        .map_err(ipc)?
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    file.flush().map_err(io)?;
    file.sync_all().map_err(io)?;
    fs::rename(&tmp, path).map_err(|e| {
        Error::io(
            format!("renaming {} to {}", tmp.display(), path.display()),
            e,
        )
    })?;
    guard.0 = None;
    Ok(())
}

/// Takes the exclusive lock of one column's cache file (released on drop).
fn lock(path: &Path) -> Result<File> {
    let lock_path = path.with_extension("arrow.lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(lock_path.display().to_string(), e))?;
    file.lock()
        .map_err(|e| Error::io(format!("locking {}", lock_path.display()), e))?;
    Ok(file)
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
        let dir = cache_root(cache_dir)?.join(self.fingerprint()).join("obs");
        fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        let mut seen = HashSet::new();
        let mut footers = self.footers();
        let mut report = LocalizeReport::default();
        let mut local = Vec::with_capacity(columns.len());
        for name in columns {
            let name = name.as_ref();
            if !seen.insert(name) {
                return Err(Error::Input(format!("obs column {name:?} requested twice")));
            }
            let (index, schema) = self.column(name)?;
            let path = dir.join(format!("{}.arrow", quote_name(name)));
            let tiles = match load(&path, schema, self.tile_cells())? {
                Cached::Valid(tiles) => {
                    report.reused.push(name.to_string());
                    tiles
                }
                Cached::Missing | Cached::Damaged(_) => {
                    let _lock = lock(&path)?;
                    // Another process may have written it while we waited.
                    match load(&path, schema, self.tile_cells())? {
                        Cached::Valid(tiles) => {
                            report.reused.push(name.to_string());
                            tiles
                        }
                        state => {
                            if let Cached::Damaged(_) = state {
                                fs::remove_file(&path)
                                    .map_err(|e| Error::io(path.display().to_string(), e))?;
                                report.replaced.push(name.to_string());
                            }
                            let fetched = self.read_column_with(
                                index,
                                0..self.tile_cells().len(),
                                &mut footers,
                            )?;
                            write_column(&path, schema, fetched)?;
                            report.fetched.push(name.to_string());
                            match load(&path, schema, self.tile_cells())? {
                                Cached::Valid(tiles) => tiles,
                                Cached::Missing => {
                                    return Err(Error::Input(format!(
                                        "{} vanished after writing",
                                        path.display()
                                    )))
                                }
                                Cached::Damaged(why) => {
                                    return Err(Error::Input(format!(
                                        "{} is damaged right after writing: {why}",
                                        path.display()
                                    )))
                                }
                            }
                        }
                    }
                }
            };
            local.push(LocalColumn {
                schema: schema.clone(),
                path,
                tiles,
            });
        }
        Ok(LocalObs {
            columns: local,
            limits: self.limits().clone(),
            dir,
            report,
        })
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

    #[test]
    fn cache_root_prefers_the_argument() {
        assert_eq!(
            cache_root(Some(Path::new("here"))).unwrap(),
            PathBuf::from("here")
        );
    }
}

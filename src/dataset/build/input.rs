//! A build's inputs, and reading any range of an input's cells and obs.
//!
//! An input is a file the converter knows ([`Input`]) or an existing dataset.
//! Write tasks read cell ranges: inputs stored by cell seek to the range
//! where they can (HDF5 arrays, dense rows) and read through otherwise (a
//! compressed `.npz` stream); inputs that must be transposed first (CSC,
//! Matrix Market) were staged as a dataset by their statistics task and are
//! read from there, as datasets are.

use arrow_array::ArrayRef;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

use crate::csr::Csr;
use crate::dataset::ingest::{open_input, Cells, ConvertOptions, Input, Opened};
use crate::dataset::Dataset;
use crate::dataset::OpenOptions;
use crate::error::{Error, Result};
use crate::obs::ObsColumn;
use crate::storage::{Location, Prefixed, Store};

/// One input of a build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildInput {
    /// A file or folder the converter reads (see [`Input`]).
    File(Input),
    /// An existing deltacells dataset (a directory or a URL).
    Dataset(String),
}

/// Cells read at once from a dataset input (bounded memory per task).
const DATASET_BLOCK_CELLS: u64 = 1024;

impl BuildInput {
    /// A dataset (a URL, or a directory holding `manifest.json`), else what
    /// [`Input::detect`] recognises.
    pub fn detect(arg: &str) -> Result<BuildInput> {
        let location = Location::parse(arg);
        match &location {
            Location::Url(_) => Ok(BuildInput::Dataset(arg.to_string())),
            Location::Local(p) if p.join(crate::dataset::MANIFEST_KEY).is_file() => {
                Ok(BuildInput::Dataset(arg.to_string()))
            }
            Location::Local(p) => Input::detect(p).map(BuildInput::File),
        }
    }

    /// The input's name: its file or directory stem (`plate1` for
    /// `data/plate1.h5ad`, or for a dataset `data/plate1.dc`, as a corpus
    /// names its members), what the source column calls its cells.
    pub fn stem(&self) -> String {
        let path = match self {
            BuildInput::File(Input::TenX { matrix, .. }) => {
                matrix.parent().map(Path::to_path_buf).unwrap_or_default()
            }
            BuildInput::File(Input::Npz(p) | Input::H5ad(p) | Input::CellRanger(p)) => p.clone(),
            BuildInput::Dataset(location) => return crate::storage::location_stem(location),
        };
        path.file_stem()
            .or_else(|| path.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string())
    }

    /// What its content is as of now: each of its files' size and
    /// modification and change times, as the file system gives them (a file
    /// copied over it has a new change time, whatever times the copy kept),
    /// or for a dataset, wherever it is, the SHA-256 of its manifest, which
    /// its writer puts last and which covers every tile's size and the obs
    /// fingerprint; `null` for what cannot be read. A build reuses a stage
    /// or a finished task only for an input of the same identity, so that a
    /// rerun after an input changed, or with other inputs, reads them again.
    /// (The input's path is in the plan apart from this.)
    pub fn identity(&self) -> Value {
        fn file(path: &Path) -> Value {
            let Ok(meta) = std::fs::metadata(path) else {
                return Value::Null;
            };
            let nanos = |t: std::io::Result<std::time::SystemTime>| {
                t.ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos().to_string())
            };
            #[cfg(unix)]
            let changed = {
                use std::os::unix::fs::MetadataExt;
                Some(format!("{}.{:09}", meta.ctime(), meta.ctime_nsec()))
            };
            #[cfg(not(unix))]
            let changed: Option<String> = None;
            json!([meta.len(), nanos(meta.modified()), changed])
        }
        match self {
            BuildInput::File(Input::TenX {
                matrix,
                features,
                barcodes,
            }) => json!([
                file(matrix),
                features.as_deref().map(file),
                barcodes.as_deref().map(file)
            ]),
            BuildInput::File(Input::Npz(p) | Input::H5ad(p) | Input::CellRanger(p)) => {
                json!([file(p)])
            }
            BuildInput::Dataset(location) => Location::parse(location)
                .store()
                .and_then(|s| s.get(crate::dataset::MANIFEST_KEY))
                .ok()
                .flatten()
                .map_or(Value::Null, |m| json!(crate::obs::sha256_hex(m.as_bytes()))),
        }
    }

    /// Where errors say the input is.
    pub fn describe(&self) -> String {
        match self {
            BuildInput::File(Input::TenX { matrix, .. }) => matrix
                .parent()
                .map_or_else(|| matrix.display().to_string(), |p| p.display().to_string()),
            BuildInput::File(Input::Npz(p) | Input::H5ad(p) | Input::CellRanger(p)) => {
                p.display().to_string()
            }
            BuildInput::Dataset(location) => location.clone(),
        }
    }

    /// The input as JSON, for plans.
    pub(crate) fn to_value(&self) -> Value {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        match self {
            BuildInput::File(Input::TenX {
                matrix,
                features,
                barcodes,
            }) => json!({
                "kind": "10x",
                "matrix": path(matrix),
                "features": features.as_deref().map(path),
                "barcodes": barcodes.as_deref().map(path),
            }),
            BuildInput::File(Input::Npz(p)) => json!({"kind": "npz", "path": path(p)}),
            BuildInput::File(Input::H5ad(p)) => json!({"kind": "h5ad", "path": path(p)}),
            BuildInput::File(Input::CellRanger(p)) => {
                json!({"kind": "cellranger", "path": path(p)})
            }
            BuildInput::Dataset(l) => json!({"kind": "dataset", "location": l}),
        }
    }

    /// The input [`BuildInput::to_value`] wrote.
    pub(crate) fn from_value(v: &Value) -> Result<BuildInput> {
        let bad = || Error::Input(format!("a build input is malformed: {v}"));
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let path = |k: &str| text(k).map(std::path::PathBuf::from).ok_or_else(bad);
        Ok(
            match v.get("kind").and_then(Value::as_str).ok_or_else(bad)? {
                "10x" => BuildInput::File(Input::TenX {
                    matrix: path("matrix")?,
                    features: text("features").map(Into::into),
                    barcodes: text("barcodes").map(Into::into),
                }),
                "npz" => BuildInput::File(Input::Npz(path("path")?)),
                "h5ad" => BuildInput::File(Input::H5ad(path("path")?)),
                "cellranger" => BuildInput::File(Input::CellRanger(path("path")?)),
                "dataset" => BuildInput::Dataset(text("location").ok_or_else(bad)?),
                _ => return Err(bad()),
            },
        )
    }
}

/// Rows `r0..r1` of `block` as a block of their own.
fn rows_of(block: &Csr<u32>, r0: usize, r1: usize) -> Csr<u32> {
    let (a, b) = (block.indptr[r0] as usize, block.indptr[r1] as usize);
    Csr {
        n_cols: block.n_cols,
        indptr: block.indptr[r0..=r1]
            .iter()
            .map(|&p| p - a as i64)
            .collect(),
        indices: block.indices[a..b].to_vec(),
        values: block.values[a..b].to_vec(),
    }
}

/// Where a write task reads an input's cells from.
pub(crate) enum Reader<'a> {
    /// A converter input read by cell.
    File(Box<Opened<'a>>),
    /// A dataset: the input itself, or the stage of one that was transposed.
    Dataset(Dataset),
}

impl<'a> Reader<'a> {
    /// Opens `input` (or its stage, when it has one) for reading.
    pub(crate) fn open(
        input: &'a BuildInput,
        staged: Option<&str>,
        out: &Arc<dyn Store>,
        options: &'a ConvertOptions,
    ) -> Result<Reader<'a>> {
        if let Some(stage) = staged {
            let store: Arc<dyn Store> = Arc::new(Prefixed::new(out.clone(), stage));
            return Ok(Reader::Dataset(Dataset::open_store(
                store,
                OpenOptions::default(),
            )?));
        }
        match input {
            BuildInput::Dataset(location) => Ok(Reader::Dataset(Dataset::open(location)?)),
            BuildInput::File(file) => Ok(Reader::File(Box::new(open_input(
                file,
                options,
                &mut |_| {},
            )?))),
        }
    }

    /// Hands the cells `range` to `each`, in order, in blocks.
    pub(crate) fn cells(
        &mut self,
        range: std::ops::Range<u64>,
        each: &mut dyn FnMut(&Csr<u32>) -> Result<()>,
    ) -> Result<()> {
        match self {
            Reader::Dataset(ds) => {
                let mut at = range.start;
                while at < range.end {
                    let end = (at + DATASET_BLOCK_CELLS).min(range.end);
                    let csr = ds.read(at..end).uncached().csr::<i32>()?.csr;
                    // Decoded counts are never negative.
                    let block = Csr {
                        n_cols: csr.n_cols,
                        indptr: csr.indptr,
                        indices: csr.indices,
                        values: csr.values.into_iter().map(|v| v as u32).collect(),
                    };
                    each(&block)?;
                    at = end;
                }
                Ok(())
            }
            Reader::File(opened) => {
                let Cells::Rows(open) = &mut opened.cells else {
                    return Err(Error::Input(
                        "a transposed input is read from its stage".into(),
                    ));
                };
                let mut rows = open()?;
                let mut at = rows.seek(range.start)?;
                while at < range.end {
                    let Some(block) = rows.next_block()? else {
                        return Err(Error::Input(format!(
                            "the input ended at cell {at}, before {}",
                            range.end
                        )));
                    };
                    let n = block.n_rows() as u64;
                    let (r0, r1) = (
                        range.start.saturating_sub(at).min(n),
                        (range.end - at).min(n),
                    );
                    if r0 == 0 && r1 == n {
                        each(&block)?;
                    } else if r0 < r1 {
                        each(&rows_of(&block, r0 as usize, r1 as usize))?;
                    }
                    at += n;
                }
                Ok(())
            }
        }
    }

    /// The input's obs columns (the named ones, in that order) for the cells
    /// `range`, as the input stores them (`max_categories` decides, as the
    /// writer would, which category columns are stored as strings).
    pub(crate) fn obs(
        &self,
        names: &[String],
        range: std::ops::Range<u64>,
        max_categories: usize,
    ) -> Result<Vec<ArrayRef>> {
        let (start, len) = (range.start as usize, (range.end - range.start) as usize);
        match self {
            Reader::File(opened) => names
                .iter()
                .map(|name| {
                    // Only the task's cells are encoded: how a column is
                    // stored depends on its vocabulary, not on its rows.
                    let column = find_column(&opened.side.obs, name)?;
                    let part = column.slice(start, len).ok_or_else(|| {
                        Error::Input(format!(
                            "obs column {name:?} has {} cells, not the {} the plan reads",
                            column.len(),
                            start + len
                        ))
                    })?;
                    Ok(part.encode(max_categories)?.1)
                })
                .collect(),
            Reader::Dataset(ds) => {
                let obs = ds.obs().ok_or_else(|| {
                    Error::Input(format!("{}: has no obs", ds.store().describe()))
                })?;
                let (t0, _) = ds.locate(range.start)?;
                let t1 = if range.end == range.start {
                    t0
                } else {
                    ds.locate(range.end - 1)?.0 + 1
                };
                let offset = (range.start - ds.tile_cells(t0)?.start) as usize;
                names
                    .iter()
                    .map(|name| {
                        let parts = obs.read_column(name, t0..t1)?;
                        let refs: Vec<&dyn arrow_array::Array> =
                            parts.iter().map(|a| a.as_ref()).collect();
                        let whole = arrow_select::concat::concat(&refs)
                            .map_err(|e| Error::Input(format!("obs column {name:?}: {e}")))?;
                        Ok(whole.slice(offset, len))
                    })
                    .collect()
            }
        }
    }
}

/// An input error, with the input's name in front when it lacks it.
pub(crate) fn named(e: Error, name: &str) -> Error {
    match e {
        Error::Input(msg) if !msg.contains(name) => Error::Input(format!("{name}: {msg}")),
        e => e,
    }
}

/// The obs column `name` of an opened input.
fn find_column<'c>(columns: &'c [ObsColumn], name: &str) -> Result<&'c ObsColumn> {
    columns
        .iter()
        .find(|c| c.name() == name)
        .ok_or_else(|| Error::Input(format!("the input has no obs column {name:?}")))
}

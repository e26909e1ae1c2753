//! Ingest: the files users have, converted to datasets in bounded memory.
//!
//! Inputs: 10x Matrix Market folders, scipy `.npz` (CSR or CSC), and with the
//! `hdf5` cargo feature AnnData `.h5ad` files and Cell Ranger
//! `filtered_feature_bc_matrix.h5` files.
//!
//! Nothing is loaded whole. Inputs stored by cell (CSR, dense, Cell Ranger,
//! whose columns are cells) are read in blocks of cells and handed to the
//! [`DatasetWriter`](crate::DatasetWriter), which encodes tiles as they fill. Sorting genes by
//! decreasing total counts needs the totals before the first tile, so such
//! inputs are read twice: a first pass sums the genes (and checks every value,
//! so a bad value is refused before any tile is written), the second writes.
//! Inputs stored by gene (CSC) or in no order (Matrix Market) go through an
//! out-of-core transpose (bucketed into runs of cells in temporary files) that
//! sums the genes on the way.
//!
//! Memory is bounded by [`ConvertOptions::block_nonzeros`] (a read block),
//! [`ConvertOptions::run_nonzeros`] (a transposed run) and the writer's tiles
//! in flight, plus the side tables (obs, var), which are per cell and per
//! gene. Every size an input declares is checked against the bytes behind it
//! before anything is allocated from it.
//!
//! A conversion that stops half-way leaves no manifest (the writer writes it
//! last), and can be run again into the same directory.

mod compressed;
mod counts;
#[cfg(feature = "hdf5")]
mod h5;
mod mtx;
mod npz;
mod transpose;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::dataset::vocab::GeneSpace;
use crate::dataset::writer::WriterConfig;
use crate::error::{Error, Result};
use crate::format::manifest::Manifest;
use crate::obs::{ObsColumn, VarTable};
use crate::storage::Store;

use compressed::{Compressed, Major, Seq};
pub(crate) use counts::{add_totals, Rows};
pub use mtx::read_tsv;
use transpose::{TransposedRows, Transposer};

/// What [`convert`] reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A 10x folder: `matrix.mtx[.gz]`, `features.tsv[.gz]` (or `genes.tsv`), `barcodes.tsv[.gz]`.
    TenX {
        /// The Matrix Market file (genes x cells).
        matrix: PathBuf,
        /// The features (or genes) file: gene ids, names and types become
        /// `var_names.txt` and `var.parquet`. Without it the dataset has neither.
        features: Option<PathBuf>,
        /// The barcodes file: becomes the `barcode` obs column. Without it the
        /// dataset has no obs.
        barcodes: Option<PathBuf>,
    },
    /// A scipy sparse CSR or CSC matrix saved with `save_npz` (rows are cells).
    Npz(PathBuf),
    /// An AnnData `.h5ad` file (needs the `hdf5` feature).
    H5ad(PathBuf),
    /// A Cell Ranger feature-barcode matrix `.h5` (needs the `hdf5` feature).
    CellRanger(PathBuf),
}

fn first_existing(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

impl Input {
    /// Recognises a 10x folder, or an `.npz`, `.h5ad` or `.h5` file.
    pub fn detect(path: &Path) -> Result<Input> {
        if !path.exists() {
            return Err(Error::Input(format!(
                "{}: no such file or directory",
                path.display()
            )));
        }
        if path.is_dir() {
            let matrix =
                first_existing(path, &["matrix.mtx.gz", "matrix.mtx"]).ok_or_else(|| {
                    Error::Input(format!(
                        "{}: no matrix.mtx[.gz] (not a 10x folder)",
                        path.display()
                    ))
                })?;
            return Ok(Input::TenX {
                matrix,
                features: first_existing(
                    path,
                    &[
                        "features.tsv.gz",
                        "features.tsv",
                        "genes.tsv.gz",
                        "genes.tsv",
                    ],
                ),
                barcodes: first_existing(path, &["barcodes.tsv.gz", "barcodes.tsv"]),
            });
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("npz") => Ok(Input::Npz(path.to_path_buf())),
            Some("h5ad") => Ok(Input::H5ad(path.to_path_buf())),
            Some("h5") => Ok(Input::CellRanger(path.to_path_buf())),
            _ => Err(Error::Input(format!(
                "{}: expected a 10x folder, or a .npz, .h5ad or Cell Ranger .h5 file",
                path.display()
            ))),
        }
    }
}

/// Which matrix of an `.h5ad` to convert.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Layer {
    /// `X`.
    #[default]
    X,
    /// `raw/X` (with `raw/var` as the gene table).
    Raw,
    /// `layers/NAME`.
    Named(String),
}

impl std::str::FromStr for Layer {
    type Err = std::convert::Infallible;

    /// `X`, `raw`, or any other name for `layers/NAME`.
    fn from_str(s: &str) -> std::result::Result<Layer, Self::Err> {
        Ok(match s {
            "X" => Layer::X,
            "raw" => Layer::Raw,
            name => Layer::Named(name.to_string()),
        })
    }
}

/// The stages of a conversion, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// First pass over cells: gene totals for sorting, and every value checked.
    Counting,
    /// Nonzeros read into the out-of-core transpose.
    Transposing,
    /// Cells handed to the writer.
    Writing,
}

impl Phase {
    /// What `done` and `total` count.
    pub fn unit(self) -> &'static str {
        match self {
            Phase::Transposing => "nonzeros",
            Phase::Counting | Phase::Writing => "cells",
        }
    }
}

/// Progress of a conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The stage running.
    pub phase: Phase,
    /// Units of [`Phase::unit`] done so far in this stage.
    pub done: u64,
    /// Units the stage has in all.
    pub total: u64,
}

/// Default nonzeros read at once.
pub const DEFAULT_BLOCK_NONZEROS: usize = 1 << 22;

/// Default nonzeros per transposed run (20 bytes each while a run is sorted).
pub const DEFAULT_RUN_NONZEROS: usize = 1 << 23;

/// How to convert.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConvertOptions {
    /// Tile size, chunks, level, metadata (gene totals, names, obs and var are filled in).
    pub writer: WriterConfig,
    /// Sort genes by decreasing total counts (recorded in gene_order.npy).
    pub sort_genes: bool,
    /// The `.h5ad` matrix to convert.
    pub layer: Layer,
    /// Keep only these obs columns, in this order (all when `None`), and
    /// each input's obs index. With several inputs, the columns of their
    /// union: a column one input lacks is missing for its cells.
    pub obs_columns: Option<Vec<String>>,
    /// Keep only the features of this type, e.g. `Gene Expression`: by a
    /// Cell Ranger `.h5`'s `feature_type`, a 10x folder's third
    /// `features.tsv` column, or an `.h5ad`'s var column `feature_types`
    /// (what scanpy's `read_10x_h5` writes; `feature_type` also taken).
    /// Inputs that name no types (an `.npz`, a dataset) refuse it.
    pub feature_type: Option<String>,
    /// Nonzeros read at once (a block holds at least one whole cell or gene).
    pub block_nonzeros: usize,
    /// Nonzeros per run of the out-of-core transpose.
    pub run_nonzeros: usize,
    /// Where the transpose keeps its runs (default: the system's temporary directory).
    pub tmp_dir: Option<PathBuf>,
    /// Which genes the output has, when there are several inputs (their
    /// genes matched by [`ConvertOptions::gene_key`]).
    pub genes: GeneSpace,
    /// The var column genes are matched by (`None`: the var index, i.e. the
    /// gene names).
    pub gene_key: Option<String>,
    /// The obs column naming each cell's input (default: `dataset_id` when
    /// there are several inputs, none for one).
    pub source_column: Option<String>,
    /// Tiles per write task, and per obs shard.
    pub tiles_per_task: usize,
    /// Category columns with more categories than this are stored as strings.
    pub max_categories: usize,
}

/// Default of [`ConvertOptions::tiles_per_task`]: 32,768 cells per task at
/// the default tile size, enough work to amortise opening an input, few
/// enough cells to keep a task's memory small and the tasks many.
pub const DEFAULT_TILES_PER_TASK: usize = 8;

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            writer: WriterConfig::default(),
            sort_genes: true,
            layer: Layer::X,
            obs_columns: None,
            feature_type: None,
            block_nonzeros: DEFAULT_BLOCK_NONZEROS,
            run_nonzeros: DEFAULT_RUN_NONZEROS,
            tmp_dir: None,
            genes: GeneSpace::Union,
            gene_key: None,
            source_column: None,
            tiles_per_task: DEFAULT_TILES_PER_TASK,
            max_categories: crate::obs::DEFAULT_MAX_CATEGORIES,
        }
    }
}

impl ConvertOptions {
    fn transposer(
        &self,
        source: String,
        n_cells: u64,
        n_genes: u32,
        nnz_hint: u64,
    ) -> Result<Transposer> {
        let tmp = self.tmp_dir.clone().unwrap_or_else(std::env::temp_dir);
        Transposer::new(
            source,
            n_cells,
            n_genes,
            nnz_hint,
            self.run_nonzeros,
            &tmp,
            self.sort_genes,
        )
    }
}

/// The side tables an input provides, in source order.
#[derive(Default)]
pub(crate) struct Side {
    pub var_names: Option<Vec<String>>,
    pub var_table: Option<VarTable>,
    pub obs: Vec<ObsColumn>,
    /// obs columns the input has but did not read or keep (left out by
    /// [`ConvertOptions::obs_columns`]), for messages.
    pub obs_unread: Vec<String>,
    pub metadata: Map<String, Value>,
}

/// The manifest metadata key naming the obs column that holds the cell ids
/// (the input's obs index, barcodes): what readers take as obs names.
pub const OBS_INDEX_KEY: &str = "obs_index";

/// The manifest metadata key saying that the obs index is also an obs
/// column of the source (pandas' `set_index(name, drop=False)`), stored
/// once: readers show it both as the cell names and as a column.
pub const OBS_INDEX_IS_COLUMN_KEY: &str = "obs_index_is_column";

impl Side {
    /// Adds the obs column of cell ids `ids`, named `name`, and records it as
    /// the obs index ([`OBS_INDEX_KEY`]).
    pub(crate) fn index_column<'s>(&mut self, name: &str, ids: impl IntoIterator<Item = &'s str>) {
        self.obs
            .push(ObsColumn::string(name, ids.into_iter().map(Some)));
        self.metadata
            .insert(OBS_INDEX_KEY.into(), Value::String(name.into()));
    }

    /// Records obs column `name`, already among [`Side::obs`], as the obs
    /// index too ([`OBS_INDEX_IS_COLUMN_KEY`]).
    #[cfg(feature = "hdf5")]
    pub(crate) fn index_is_column(&mut self, name: &str) {
        self.metadata
            .insert(OBS_INDEX_KEY.into(), Value::String(name.into()));
        self.metadata
            .insert(OBS_INDEX_IS_COLUMN_KEY.into(), Value::Bool(true));
    }
}

/// A pass over an input's cells in order.
type OpenRows<'a> = Box<dyn FnMut() -> Result<Box<dyn Rows + 'a>> + 'a>;

/// The cells of an opened input.
pub(crate) enum Cells<'a> {
    /// Stored by cell; each call starts a pass (two when sorting genes).
    Rows(OpenRows<'a>),
    /// Transposed already, with the gene totals when sorting.
    Transposed(Option<Vec<f64>>, TransposedRows),
}

/// An input ready to be written.
pub(crate) struct Opened<'a> {
    pub n_cells: u64,
    pub n_genes: u32,
    pub side: Side,
    pub cells: Cells<'a>,
}

/// The features a `--feature-type` filter keeps: a mark per feature from
/// each one's type, and each kept feature's new index (`-1`: dropped). A
/// type no feature has is refused, naming the types present.
pub(crate) fn feature_filter(
    types: &[String],
    want: &str,
) -> std::result::Result<(Vec<bool>, Vec<i32>), String> {
    let keep: Vec<bool> = types.iter().map(|t| t == want).collect();
    if !keep.contains(&true) {
        let mut present: Vec<&str> = types.iter().map(String::as_str).collect();
        present.sort_unstable();
        present.dedup();
        return Err(format!(
            "no feature of type {want:?} (present: {})",
            present.join(", ")
        ));
    }
    let remap = keep
        .iter()
        .scan(0i32, |next, &k| {
            let at = if k { *next } else { -1 };
            *next += i32::from(k);
            Some(at)
        })
        .collect();
    Ok((keep, remap))
}

/// Feeds a CSC matrix (majors are genes) into a transpose; `genes` maps each
/// gene to its column in the output (`-1`: dropped), when not every gene is
/// kept as it is.
pub(crate) fn transpose_columns<P: Seq<i64>, I: Seq<i64>, D: Seq<f64>>(
    mut columns: Compressed<P, I, D>,
    mut t: Transposer,
    nnz: u64,
    genes: Option<&[i32]>,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Option<Vec<f64>>, TransposedRows)> {
    let mut done = 0u64;
    while let Some(block) = columns.next_block()? {
        let csr = &block.csr;
        for (k, w) in csr.indptr.windows(2).enumerate() {
            let major = block.first + k as u64;
            let gene = match genes {
                None => major as u32,
                Some(map) => match u32::try_from(map[major as usize]) {
                    Ok(g) => g,
                    Err(_) => continue,
                },
            };
            for j in w[0] as usize..w[1] as usize {
                t.push(csr.indices[j] as u64, gene, csr.values[j])?;
            }
        }
        done += csr.nnz() as u64;
        progress(Progress {
            phase: Phase::Transposing,
            done,
            total: nnz,
        });
    }
    t.finish()
}

fn open<'a>(
    input: &'a Input,
    options: &'a ConvertOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Opened<'a>> {
    match input {
        Input::TenX {
            matrix,
            features,
            barcodes,
        } => {
            let (n_cells, n_genes, side, t) = mtx::read(
                matrix,
                features.as_deref(),
                barcodes.as_deref(),
                options.feature_type.as_deref(),
                |n_cells, n_genes, entries| {
                    let source = matrix.display().to_string();
                    options.transposer(source, n_cells, n_genes, entries)
                },
                progress,
            )?;
            let (totals, rows) = t.finish()?;
            Ok(Opened {
                n_cells,
                n_genes,
                side,
                cells: Cells::Transposed(totals, rows),
            })
        }
        Input::Npz(path) => {
            if options.feature_type.is_some() {
                return Err(Error::Input(format!(
                    "{}: an .npz names no feature types, so --feature-type cannot apply to it",
                    path.display()
                )));
            }
            let npz = npz::inspect(path)?;
            let (n_cells, n_genes) = (npz.n_cells, npz.n_genes);
            let block = options.block_nonzeros;
            let cells = match npz.major {
                Major::Cells => Cells::Rows(Box::new(move || {
                    Ok(Box::new(npz::reader(path, &npz, block)?) as Box<dyn Rows>)
                })),
                Major::Genes => {
                    let source = path.display().to_string();
                    let t = options.transposer(source, n_cells, n_genes, npz.nnz)?;
                    let (totals, rows) = transpose_columns(
                        npz::reader(path, &npz, block)?,
                        t,
                        npz.nnz,
                        None,
                        progress,
                    )?;
                    Cells::Transposed(totals, rows)
                }
            };
            Ok(Opened {
                n_cells,
                n_genes,
                side: Side::default(),
                cells,
            })
        }
        #[cfg(feature = "hdf5")]
        Input::H5ad(path) => h5::h5ad::open(path, options, progress),
        #[cfg(feature = "hdf5")]
        Input::CellRanger(path) => h5::cellranger::open(path, options),
        #[cfg(not(feature = "hdf5"))]
        Input::H5ad(path) | Input::CellRanger(path) => Err(Error::Input(format!(
            "{}: HDF5 input needs deltacells built with `--features hdf5` (and the HDF5 library)",
            path.display()
        ))),
    }
}

/// Opens `input` for a build: its side tables (obs narrowed to
/// [`ConvertOptions::obs_columns`]) and its cells.
pub(crate) fn open_input<'a>(
    input: &'a Input,
    options: &'a ConvertOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Opened<'a>> {
    let one_matrix = match input {
        Input::H5ad(_) => None,
        Input::TenX { matrix, .. } => Some(matrix),
        Input::Npz(path) | Input::CellRanger(path) => Some(path),
    };
    if let (Some(path), false) = (one_matrix, options.layer == Layer::X) {
        return Err(Error::Input(format!(
            "{}: --layer picks a matrix of an .h5ad, and this input has one matrix",
            path.display()
        )));
    }
    let mut opened = open(input, options, progress)?;
    select_obs(&mut opened.side, options.obs_columns.as_deref())?;
    Ok(opened)
}

/// Keeps the obs columns [`kept_obs`] names, in that order; the others'
/// names go to [`Side::obs_unread`].
fn select_obs(side: &mut Side, keep: Option<&[String]>) -> Result<()> {
    let Some(keep) = keep else {
        return Ok(());
    };
    let index = side.metadata.get(OBS_INDEX_KEY).and_then(Value::as_str);
    let names: Vec<String> = side.obs.iter().map(|c| c.name().to_string()).collect();
    let kept = kept_obs(&names, keep, index)?;
    let mut obs: Vec<Option<ObsColumn>> = std::mem::take(&mut side.obs)
        .into_iter()
        .map(Some)
        .collect();
    side.obs = kept.iter().filter_map(|&k| obs[k].take()).collect();
    side.obs_unread
        .extend(obs.into_iter().flatten().map(|c| c.name().to_string()));
    Ok(())
}

/// Which of an input's obs columns (`names`, its obs index `index`) a build
/// keeping `keep` (`--obs-columns`) takes, as positions in `names`: the
/// index first when `keep` does not list it (it names the cells, and readers
/// take the cell names from it), then the listed columns the input has, in
/// the order listed. A listed column the input lacks is not an error here:
/// with several inputs it may be another input's, and is then missing for
/// this one's cells; the plan refuses a column no input has
/// ([`check_obs_kept`]). Refuses a list naming a column twice
/// ([`check_obs_list`]).
pub(crate) fn kept_obs(
    names: &[String],
    keep: &[String],
    index: Option<&str>,
) -> Result<Vec<usize>> {
    check_obs_list(keep)?;
    let index = index.filter(|i| !keep.iter().any(|k| k == i));
    Ok(index
        .into_iter()
        .chain(keep.iter().map(String::as_str))
        .filter_map(|name| names.iter().position(|n| n == name))
        .collect())
}

/// Refuses an `--obs-columns` list naming a column twice.
pub(crate) fn check_obs_list(keep: &[String]) -> Result<()> {
    if let Some((i, name)) = keep
        .iter()
        .enumerate()
        .find(|(i, k)| keep[..*i].contains(k))
    {
        return Err(Error::Input(format!(
            "--obs-columns lists {name:?} twice (entry {} and {})",
            keep.iter().position(|k| k == name).unwrap_or_default() + 1,
            i + 1
        )));
    }
    Ok(())
}

/// Refuses an `--obs-columns` entry no input has. `inputs` gives each
/// input's name and every obs column it has, kept or not (what the message
/// lists); `kept` says whether any input kept the column.
pub(crate) fn check_obs_kept(
    keep: &[String],
    inputs: &[(String, &[String])],
    kept: impl Fn(&str) -> bool,
) -> Result<()> {
    let Some(name) = keep.iter().find(|k| !kept(k)) else {
        return Ok(());
    };
    let has = |names: &[String]| {
        if names.is_empty() {
            "none".to_string()
        } else {
            names
                .iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    Err(Error::Input(match inputs {
        [(input, names)] => format!(
            "{input}: --obs-columns: no obs column {name:?} (the input has {})",
            has(names)
        ),
        _ => format!(
            "--obs-columns: no input has an obs column {name:?} ({})",
            inputs
                .iter()
                .map(|(input, names)| format!("{input} has {}", has(names)))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }))
}

/// Converts `input` into a new dataset at `out` (a directory or a URL, see
/// [`Location::parse`](crate::storage::Location::parse)): a build of one
/// input ([`crate::dataset::build`]).
pub fn convert(
    input: &Input,
    out: &Path,
    options: ConvertOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Manifest> {
    crate::storage::Location::parse(out)
        .write_new(|store| convert_into(input, store, options, progress))
}

/// Converts `input` into a new dataset in `store`.
pub fn convert_into(
    input: &Input,
    store: Arc<dyn Store>,
    options: ConvertOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Manifest> {
    let out = store.describe();
    crate::dataset::build::build_into(
        &[crate::dataset::build::BuildInput::File(input.clone())],
        store,
        &out,
        &options,
        progress,
    )
}

crate::setters!(ConvertOptions {
    /// Sets [`ConvertOptions::writer`].
    with_writer: writer: WriterConfig,
    /// Sets [`ConvertOptions::sort_genes`].
    with_sort_genes: sort_genes: bool,
    /// Sets [`ConvertOptions::layer`].
    with_layer: layer: Layer,
    /// Sets [`ConvertOptions::obs_columns`].
    with_obs_columns: obs_columns: Option<Vec<String>>,
    /// Sets [`ConvertOptions::feature_type`].
    with_feature_type: feature_type: Option<String>,
    /// Sets [`ConvertOptions::block_nonzeros`].
    with_block_nonzeros: block_nonzeros: usize,
    /// Sets [`ConvertOptions::run_nonzeros`].
    with_run_nonzeros: run_nonzeros: usize,
    /// Sets [`ConvertOptions::tmp_dir`].
    with_tmp_dir: tmp_dir: Option<PathBuf>,
    /// Sets [`ConvertOptions::genes`].
    with_genes: genes: GeneSpace,
    /// Sets [`ConvertOptions::gene_key`].
    with_gene_key: gene_key: Option<String>,
    /// Sets [`ConvertOptions::source_column`].
    with_source_column: source_column: Option<String>,
    /// Sets [`ConvertOptions::tiles_per_task`].
    with_tiles_per_task: tiles_per_task: usize,
    /// Sets [`ConvertOptions::max_categories`].
    with_max_categories: max_categories: usize,
});

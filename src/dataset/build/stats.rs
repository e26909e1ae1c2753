//! The statistics pass: one task per input, everything the plan needs.
//!
//! A statistics task reads its input once: the cell and gene counts, the gene
//! keys, names and table, the total of every gene (for sorting the corpus's
//! genes), and the obs schema as the input would store it. An input that must
//! be transposed (CSC, Matrix Market) is transposed here, once, into a *stage*
//! (a dataset of the input's cells in its own gene order, at a fast zstd level,
//! with its obs) under the output's `_build/stage/`, so that write tasks on any
//! machine can read any range of it. A rerun finds a complete stage (it has a
//! manifest) and reads it instead of transposing again, when the stage says
//! it was made from the same input with the same options (its
//! `staged_from.json`); any other stage at that place is removed and made
//! again.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::dataset::build::input::{named, BuildInput};
use crate::dataset::ingest::{
    kept_obs, open_input, Cells, ConvertOptions, Layer, Phase, Progress, Rows, Side, OBS_INDEX_KEY,
};
use crate::dataset::vocab::dataset_keys;
use crate::dataset::OpenOptions;
use crate::dataset::{Dataset, DatasetWriter, WriterConfig};
use crate::error::{Error, Result};
use crate::obs::{ObsConfig, ObsSchema, VarTable};
use crate::storage::{Prefixed, Store};

/// Where stages are kept in the output, until the commit removes them.
pub(crate) const STAGE_PREFIX: &str = "_build/stage/";

/// zstd level of a stage: read once by the write tasks, then deleted.
const STAGE_LEVEL: i32 = 1;

/// What a statistics task learned of one input.
#[derive(Clone, Debug)]
pub struct InputStats {
    /// The input.
    pub input: BuildInput,
    /// Cells.
    pub n_cells: u64,
    /// Genes (columns) as the input stores them.
    pub n_genes: u32,
    /// The gene keys in column order (`None`: the input names no genes).
    pub keys: Option<Vec<String>>,
    /// The gene names in column order, when it has them.
    pub var_names: Option<Vec<String>>,
    /// The gene table in column order, when it has one.
    pub var: Option<VarTable>,
    /// Each column's total count, when genes are sorted.
    pub totals: Option<Vec<f64>>,
    /// The obs columns the build keeps, as the input stores them, when it
    /// keeps any.
    pub obs: Option<ObsSchema>,
    /// Every obs column the input has, kept or not (what a message about
    /// `--obs-columns` lists). An input staged by an earlier run lists those
    /// its stage kept.
    pub obs_names: Vec<String>,
    /// The input's own manifest metadata (its source, its obs index).
    pub metadata: Map<String, Value>,
    /// The key prefix (in the output) of the stage the write tasks read, for
    /// inputs transposed here.
    pub staged: Option<String>,
    /// The input's [`BuildInput::identity`] when it was read.
    pub identity: Value,
}

/// The gene keys of a converter input: its var names, or a var column.
fn file_keys(side: &Side, key: Option<&str>, name: &str) -> Result<Option<Vec<String>>> {
    let Some(key) = key else {
        return Ok(side.var_names.clone());
    };
    let table = side.var_table.as_ref().ok_or_else(|| {
        Error::Input(format!(
            "{name}: has no gene table, so no gene key column {key:?}"
        ))
    })?;
    let values = table.values(key).ok_or_else(|| {
        Error::Input(format!(
            "{name}: no var column {key:?} to match genes by (var has {})",
            table.column_names().join(", ")
        ))
    })?;
    if !table.is_text(key) {
        return Err(Error::Input(format!(
            "{name}: var column {key:?} is not a text column"
        )));
    }
    values
        .into_iter()
        .enumerate()
        .map(|(g, v)| {
            v.ok_or_else(|| Error::Input(format!("{name}: var column {key:?} is null at gene {g}")))
        })
        .collect::<Result<Vec<String>>>()
        .map(Some)
}

/// Sums every column of `ds`, tile by tile.
fn dataset_totals(ds: &Dataset, progress: &mut dyn FnMut(u64)) -> Result<Vec<f64>> {
    let mut totals = vec![0f64; ds.n_genes() as usize];
    for t in 0..ds.n_tiles() {
        let cells = ds.tile_cells(t)?;
        let n = cells.end - cells.start;
        let csr = ds.read(cells).uncached().csr::<i32>()?.csr;
        for (&g, &v) in csr.indices.iter().zip(&csr.values) {
            totals[g as usize] += f64::from(v);
        }
        progress(n);
    }
    Ok(totals)
}

/// The statistics of a dataset input (or of a stage), whose identity was
/// `identity` before it was read.
fn dataset_stats(
    input: &BuildInput,
    identity: Value,
    ds: &Dataset,
    options: &ConvertOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<InputStats> {
    let name = input.describe();
    let keys = match (&options.gene_key, ds.var_names()) {
        (None, None) => None,
        (key, _) => Some(dataset_keys(ds, key.as_deref(), &name)?),
    };
    let var = ds
        .var_table()?
        .map(|f| VarTable::from_frame(&f))
        .transpose()?;
    Ok(InputStats {
        input: input.clone(),
        identity,
        n_cells: ds.n_cells(),
        n_genes: ds.n_genes(),
        keys,
        var_names: ds.var_names().map(<[String]>::to_vec),
        var,
        totals: if options.sort_genes {
            Some(dataset_totals(ds, progress)?)
        } else {
            None
        },
        obs: ds
            .obs()
            .map(|o| kept_schema(o.schema(), ds, options))
            .transpose()?
            .flatten(),
        obs_names: ds.obs().map_or_else(Vec::new, |o| {
            o.schema().names().into_iter().map(str::to_string).collect()
        }),
        metadata: ds.manifest().metadata.clone(),
        staged: None,
    })
}

/// The columns of a dataset input's obs `schema` that the build keeps
/// ([`kept_obs`]), `None` when it keeps none.
fn kept_schema(
    schema: &ObsSchema,
    ds: &Dataset,
    options: &ConvertOptions,
) -> Result<Option<ObsSchema>> {
    let Some(keep) = &options.obs_columns else {
        return Ok(Some(schema.clone()));
    };
    let names: Vec<String> = schema.names().into_iter().map(str::to_string).collect();
    let index = ds
        .manifest()
        .metadata
        .get(OBS_INDEX_KEY)
        .and_then(Value::as_str);
    let columns: Vec<_> = kept_obs(&names, keep, index)?
        .into_iter()
        .map(|k| schema.columns[k].clone())
        .collect();
    Ok((!columns.is_empty()).then_some(ObsSchema { columns }))
}

/// Runs the statistics task of input `index`, staging it under `out` if it
/// must be transposed. `progress` receives cells counted (or nonzeros
/// transposed, with [`Phase::Transposing`]) as they pass.
pub fn input_stats(
    input: &BuildInput,
    index: usize,
    out: &Arc<dyn Store>,
    options: &ConvertOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<InputStats> {
    let name = input.describe();
    let named = |e: Error| named(e, &name);
    let mut counted = 0u64;
    let file = match input {
        BuildInput::Dataset(location) => {
            if options.feature_type.is_some() {
                return Err(named(Error::Input(
                    "--feature-type applies to inputs converted from files, not to a dataset"
                        .into(),
                )));
            }
            if options.layer != Layer::X {
                return Err(named(Error::Input(
                    "--layer picks a matrix of an .h5ad, not of a dataset".into(),
                )));
            }
            let identity = input.identity();
            let ds = Dataset::open(location).map_err(named)?;
            let total = ds.n_cells();
            return dataset_stats(input, identity, &ds, options, &mut |n| {
                counted += n;
                progress(Progress {
                    phase: Phase::Counting,
                    done: counted,
                    total,
                });
            });
        }
        BuildInput::File(file) => file,
    };
    // Taken before the input is read: a file changed while it is read then
    // differs from it at the next run.
    let identity = input.identity();
    let stage_key = format!("{STAGE_PREFIX}{index:04}");
    let stage: Arc<dyn Store> = Arc::new(Prefixed::new(out.clone(), &stage_key));
    let staged_from = staged_from(&identity, options);
    if stage.size(crate::dataset::MANIFEST_KEY)?.is_some() {
        let same = stage
            .get(STAGED_FROM_KEY)?
            .is_some_and(|b| b.as_bytes() == staged_from.as_bytes());
        if same {
            return stage_stats(input, identity, &stage_key, stage, options, None, progress);
        }
        remove_stage(stage.as_ref())?;
    }
    let opened = open_input(file, options, progress).map_err(named)?;
    let (n_cells, n_genes) = (opened.n_cells, opened.n_genes);
    let keys = file_keys(&opened.side, options.gene_key.as_deref(), &name)?;
    let obs_names: Vec<String> = opened
        .side
        .obs
        .iter()
        .map(|c| c.name().to_string())
        .chain(opened.side.obs_unread.iter().cloned())
        .collect();
    let obs = if opened.side.obs.is_empty() {
        None
    } else {
        let columns = opened
            .side
            .obs
            .iter()
            .map(|c| Ok(c.encode(options.max_categories)?.0))
            .collect::<Result<Vec<_>>>()?;
        Some(ObsSchema { columns })
    };
    let mut stats = InputStats {
        input: input.clone(),
        identity,
        n_cells,
        n_genes,
        keys,
        var_names: opened.side.var_names.clone(),
        var: opened.side.var_table.clone(),
        totals: None,
        obs,
        obs_names,
        metadata: opened.side.metadata.clone(),
        staged: None,
    };
    match opened.cells {
        Cells::Rows(mut open) => {
            if options.sort_genes {
                let mut totals = vec![0f64; n_genes as usize];
                let mut rows = open()?;
                while let Some(block) = rows.next_block().map_err(named)? {
                    crate::dataset::ingest::add_totals(&mut totals, &block);
                    counted += block.n_rows() as u64;
                    progress(Progress {
                        phase: Phase::Counting,
                        done: counted,
                        total: n_cells,
                    });
                }
                if counted != n_cells {
                    return Err(Error::Input(format!(
                        "{name}: yielded {counted} cells, it declares {n_cells}"
                    )));
                }
                stats.totals = Some(totals);
            }
        }
        Cells::Transposed(totals, mut rows) => {
            let mut config = WriterConfig::default()
                .with_level(STAGE_LEVEL)
                .with_parallel_tiles(1)
                .with_var_names(opened.side.var_names)
                .with_var_table(opened.side.var_table)
                .with_metadata(opened.side.metadata);
            if !opened.side.obs.is_empty() {
                config.obs = Some(
                    ObsConfig::new(opened.side.obs).with_max_categories(options.max_categories),
                );
            }
            stage.delete(STAGED_FROM_KEY)?;
            let mut writer = DatasetWriter::create_in(stage.clone(), n_genes, config)?;
            while let Some(block) = rows.next_block()? {
                writer.push(block.as_ref())?;
                counted += block.n_rows() as u64;
                progress(Progress {
                    phase: Phase::Counting,
                    done: counted,
                    total: n_cells,
                });
            }
            writer.finish()?;
            stage.put(STAGED_FROM_KEY, staged_from.as_bytes())?;
            // Read back from the stage, as a rerun would, so that both
            // describe the input the same way (but for the columns it left out).
            // The input's identity, as it was before it was read.
            let identity = std::mem::take(&mut stats.identity);
            let mut staged = stage_stats(
                input, identity, &stage_key, stage, options, totals, progress,
            )?;
            staged.obs_names = std::mem::take(&mut stats.obs_names);
            return Ok(staged);
        }
    }
    Ok(stats)
}

/// The object of a stage that says what it was staged from
/// ([`staged_from`]), put once the stage is complete.
const STAGED_FROM_KEY: &str = "staged_from.json";

/// What a stage holds, as [`STAGED_FROM_KEY`] records it: the input's
/// identity and the options that shape a stage. A stage of anything else
/// (another input at the same place in the list, the same file changed,
/// another layer or obs selection) is not reused.
fn staged_from(identity: &Value, options: &ConvertOptions) -> String {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "input": identity,
        "layer": format!("{:?}", options.layer),
        "obs_columns": options.obs_columns,
        "feature_type": options.feature_type,
        "max_categories": options.max_categories,
    })
    .to_string()
}

/// Removes every object of a stage, what it was staged from and its
/// manifest first, so that a stage half removed is never taken for a
/// complete one, nor its record for a later stage's.
fn remove_stage(stage: &dyn Store) -> Result<()> {
    stage.delete(STAGED_FROM_KEY)?;
    stage.delete(crate::dataset::MANIFEST_KEY)?;
    for key in stage.list("")? {
        stage.delete(&key)?;
    }
    Ok(())
}

/// The statistics of a staged input (of `identity` before it was read),
/// read from its stage (which carries the input's gene names, gene table,
/// obs and metadata). The transpose's gene
/// totals, when given, spare a pass over the stage (they are the same
/// integers, summed exactly).
fn stage_stats(
    input: &BuildInput,
    identity: Value,
    key: &str,
    stage: Arc<dyn Store>,
    options: &ConvertOptions,
    totals: Option<Vec<f64>>,
    progress: &mut dyn FnMut(Progress),
) -> Result<InputStats> {
    let ds = Dataset::open_store(stage, OpenOptions::default())?;
    let total = ds.n_cells();
    let mut counted = 0u64;
    let mut counting = options.clone();
    counting.sort_genes = options.sort_genes && totals.is_none();
    let mut stats = dataset_stats(input, identity, &ds, &counting, &mut |n| {
        counted += n;
        progress(Progress {
            phase: Phase::Counting,
            done: counted,
            total,
        });
    })?;
    stats.staged = Some(key.to_string());
    if options.sort_genes && totals.is_some() {
        stats.totals = totals;
    }
    Ok(stats)
}

impl InputStats {
    /// The statistics as JSON (what a statistics task on a cluster returns).
    pub fn to_json(&self) -> Result<String> {
        Ok(json!({
            "input": self.input.to_value(),
            "n_cells": self.n_cells,
            "n_genes": self.n_genes,
            "keys": self.keys,
            "var_names": self.var_names,
            "var": self.var.as_ref().map(VarTable::to_value).transpose()?,
            "totals": self.totals,
            "obs": self.obs.as_ref().map(ObsSchema::to_value),
            "obs_names": self.obs_names,
            "metadata": self.metadata,
            "staged": self.staged,
            "identity": self.identity,
        })
        .to_string())
    }

    /// The statistics [`InputStats::to_json`] wrote.
    pub fn from_json(text: &str) -> Result<InputStats> {
        let bad = |what: &str| Error::Input(format!("input statistics: {what} is malformed"));
        let v: Value = serde_json::from_str(text).map_err(|_| bad("the JSON"))?;
        let strings = |k: &str| -> Result<Option<Vec<String>>> {
            match v.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => serde_json::from_value(x.clone())
                    .map(Some)
                    .map_err(|_| bad(k)),
            }
        };
        let totals = match v.get("totals") {
            None | Some(Value::Null) => None,
            Some(x) => Some(serde_json::from_value(x.clone()).map_err(|_| bad("totals"))?),
        };
        let obs = match v.get("obs") {
            None | Some(Value::Null) => None,
            Some(x) => Some(ObsSchema::parse(x.to_string().as_bytes()).map_err(Error::Input)?),
        };
        let var = match v.get("var") {
            None | Some(Value::Null) => None,
            Some(x) => Some(VarTable::from_value(x)?),
        };
        let n_genes = v
            .get("n_genes")
            .and_then(Value::as_u64)
            .and_then(|g| u32::try_from(g).ok())
            .ok_or_else(|| bad("n_genes"))?;
        Ok(InputStats {
            input: BuildInput::from_value(v.get("input").ok_or_else(|| bad("input"))?)?,
            n_cells: v
                .get("n_cells")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("n_cells"))?,
            n_genes,
            keys: strings("keys")?,
            var_names: strings("var_names")?,
            var,
            totals,
            obs,
            obs_names: strings("obs_names")?.unwrap_or_default(),
            metadata: v
                .get("metadata")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            staged: v.get("staged").and_then(Value::as_str).map(str::to_string),
            identity: v.get("identity").cloned().unwrap_or(Value::Null),
        })
    }
}

//! The plan: made on the driver from every input's statistics, run by tasks.
//!
//! The plan fixes everything the output's bytes depend on: the vocabulary and
//! its order (genes by decreasing totals over the whole corpus, ties by
//! vocabulary position), each input's column map into it, the tiles (every
//! `tile_size` cells of the inputs concatenated in order, so a tile may span
//! inputs), the write tasks (`tiles_per_task` consecutive tiles each, which is
//! also the obs shard size, so each task writes whole shards), the global obs
//! schema, the side files and the metadata. It depends on the inputs and the
//! options alone, never on the number of workers, which is why any number of
//! workers, with or without a cluster, writes the same bytes. Its
//! fingerprint (a hash of its JSON) ties each task's report to it.

use serde_json::{json, Map, Value};

use crate::dataset::build::input::BuildInput;
use crate::dataset::build::stats::InputStats;
use crate::dataset::ingest::{check_obs_kept, ConvertOptions, Layer};
use crate::dataset::vocab::{InputGenes, Vocabulary};
use crate::dataset::writer::{check_var_names, order_by_totals};
use crate::error::{Error, Result};
use crate::obs::DEFAULT_SOURCE_COLUMN;
use crate::obs::{InputObs, ObsSchema, ObsUnion, SourceColumn, VarTable};

/// One input as the plan reads it.
#[derive(Clone, Debug)]
pub struct PlanInput {
    /// The input.
    pub input: BuildInput,
    /// Its cells.
    pub n_cells: u64,
    /// Its columns.
    pub n_genes: u32,
    /// Input column -> output column (`-1`: not in the vocabulary).
    pub columns: Vec<i32>,
    /// Its obs schema as stored (empty when it has none).
    pub obs: ObsSchema,
    /// The stage to read instead of the input, when it was transposed.
    pub staged: Option<String>,
    /// The input's [`BuildInput::identity`] when its statistics were taken:
    /// part of the plan's fingerprint, so that a rerun after it changed
    /// reuses none of the tasks written from it before.
    pub identity: Value,
}

/// One write task: consecutive tiles, and the input cells they hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskSpec {
    /// The first tile the task writes (also its obs shard is `first_tile / tiles_per_task`).
    pub first_tile: usize,
    /// The cells of each of its tiles.
    pub tile_cells: Vec<u64>,
    /// `(input, first cell, end cell)` ranges, in order, covering its tiles.
    pub pieces: Vec<(usize, u64, u64)>,
}

/// A build plan (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct BuildPlan {
    /// Where the dataset is written (a directory or a URL).
    pub out: String,
    /// The inputs, in cell order.
    pub inputs: Vec<PlanInput>,
    /// Output columns.
    pub n_genes: u32,
    /// Cells per tile.
    pub tile_size: u64,
    /// Tiles per task, and per obs shard.
    pub tiles_per_task: usize,
    /// Chunks per tile.
    pub n_chunks: usize,
    /// zstd level of the tiles.
    pub level: i32,
    /// The converter options tasks open inputs with.
    pub layer: Layer,
    /// Obs columns kept (all when `None`).
    pub obs_columns: Option<Vec<String>>,
    /// The feature type kept (Cell Ranger inputs).
    pub feature_type: Option<String>,
    /// Nonzeros read at once.
    pub block_nonzeros: usize,
    /// Category columns past this many categories are strings.
    pub max_categories: usize,
    /// The write tasks.
    pub tasks: Vec<TaskSpec>,
    /// The source column, when the obs has one.
    pub source: Option<SourceColumn>,
    /// The global obs schema (`None`: no obs).
    pub obs: Option<ObsSchema>,
    /// `gene_order.npy`: output column -> vocabulary gene.
    pub gene_order: Option<Vec<i32>>,
    /// Gene names in vocabulary order.
    pub var_names: Option<Vec<String>>,
    /// The gene table in vocabulary order.
    pub var: Option<VarTable>,
    /// The manifest's metadata.
    pub metadata: Map<String, Value>,
    /// The first 24 hex characters of the SHA-256 of the plan's JSON.
    pub fingerprint: String,
}

/// The vocabulary of the inputs, `None` when there is one input that names
/// no genes (its columns are taken as they are).
fn vocabulary(stats: &[InputStats], options: &ConvertOptions) -> Result<Option<Vocabulary>> {
    if let [only] = stats {
        if only.keys.is_none() {
            return Ok(None);
        }
    }
    let inputs = stats
        .iter()
        .map(|s| {
            let keys = s.keys.clone().ok_or_else(|| {
                Error::Input(format!(
                    "{}: names no genes, so its genes cannot be matched with the other inputs'",
                    s.input.describe()
                ))
            })?;
            Ok(InputGenes {
                name: s.input.describe(),
                keys,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Vocabulary::build(&inputs, &options.genes).map(Some)
}

/// For each vocabulary gene, the first value `of` gives for it over the inputs.
fn first_per_gene<'s>(
    stats: &'s [InputStats],
    vocab: &Vocabulary,
    of: impl Fn(&'s InputStats) -> Option<&'s [String]>,
) -> Option<Vec<String>> {
    let mut out: Vec<Option<String>> = vec![None; vocab.len()];
    let mut any = false;
    for (i, s) in stats.iter().enumerate() {
        let Some(values) = of(s) else { continue };
        any = true;
        for (c, g) in vocab.columns(i).iter().enumerate() {
            if let Some(g) = g {
                out[*g as usize].get_or_insert_with(|| values[c].clone());
            }
        }
    }
    any.then(|| {
        out.into_iter()
            .zip(vocab.keys())
            .map(|(v, k)| v.unwrap_or_else(|| k.clone()))
            .collect()
    })
}

/// The metadata of the output: one input's own, or each input's under `sources`.
fn metadata(stats: &[InputStats], options: &ConvertOptions) -> Map<String, Value> {
    let mut out = match stats {
        [only] => only.metadata.clone(),
        _ => {
            let mut m = Map::new();
            let sources: Vec<Value> = stats
                .iter()
                .map(|s| {
                    let mut one = s.metadata.clone();
                    one.insert("input".into(), Value::String(s.input.describe()));
                    // Its cells' run, for readers naming each input's cells
                    // from its own obs index.
                    one.insert("n_obs".into(), Value::from(s.n_cells));
                    Value::Object(one)
                })
                .collect();
            let key = crate::dataset::ingest::OBS_INDEX_KEY;
            let index = stats[0].metadata.get(key);
            if index.is_some() && stats.iter().all(|s| s.metadata.get(key) == index) {
                m.insert(key.into(), index.cloned().unwrap_or(Value::Null));
                // An index that is a column of any input is a column of
                // the build (the other inputs' cells give their ids there).
                let is_column = crate::dataset::ingest::OBS_INDEX_IS_COLUMN_KEY;
                if stats
                    .iter()
                    .any(|s| s.metadata.get(is_column) == Some(&Value::Bool(true)))
                {
                    m.insert(is_column.into(), Value::Bool(true));
                }
            }
            m.insert("sources".into(), Value::Array(sources));
            m
        }
    };
    out.extend(options.writer.metadata.clone());
    out
}

/// Plans the build of `stats`' inputs into `out`.
pub fn plan(stats: &[InputStats], out: &str, options: &ConvertOptions) -> Result<BuildPlan> {
    if stats.is_empty() {
        return Err(Error::Input("a build needs at least one input".into()));
    }
    let tile_size = options.writer.tile_size as u64;
    if tile_size == 0 || options.writer.n_chunks == 0 || options.tiles_per_task == 0 {
        return Err(Error::Input(
            "tile_size, n_chunks and tiles_per_task must be at least 1".into(),
        ));
    }
    crate::format::zstd::check_level(options.writer.level)?;
    if options.source_column.as_deref() == Some("") || options.gene_key.as_deref() == Some("") {
        return Err(Error::Input(
            "source_column and gene_key are column names, not empty".into(),
        ));
    }
    let vocab = vocabulary(stats, options)?;
    let n_genes = match &vocab {
        Some(v) => v.len(),
        None => stats[0].n_genes as usize,
    };
    let n_genes = u32::try_from(n_genes)
        .ok()
        .filter(|&g| (1..=1 << 31).contains(&g))
        .ok_or_else(|| Error::Input(format!("{n_genes} genes is outside 1..=2^31")))?;
    let vocab_of = |i: usize, c: usize| -> Option<u32> {
        match &vocab {
            Some(v) => v.columns(i)[c],
            None => Some(c as u32),
        }
    };
    let (gene_order, rank) = if options.sort_genes {
        let mut totals = vec![0f64; n_genes as usize];
        for (i, s) in stats.iter().enumerate() {
            let own = s.totals.as_ref().ok_or_else(|| {
                Error::Input(format!(
                    "{}: statistics without gene totals",
                    s.input.describe()
                ))
            })?;
            for (c, t) in own.iter().enumerate() {
                if let Some(g) = vocab_of(i, c) {
                    totals[g as usize] += t;
                }
            }
        }
        let (order, rank) = order_by_totals(&totals);
        (Some(order), Some(rank))
    } else {
        (None, None)
    };
    let inputs: Vec<PlanInput> = stats
        .iter()
        .enumerate()
        .map(|(i, s)| PlanInput {
            input: s.input.clone(),
            n_cells: s.n_cells,
            n_genes: s.n_genes,
            columns: (0..s.n_genes as usize)
                .map(|c| match vocab_of(i, c) {
                    Some(g) => rank.as_ref().map_or(g as i32, |r| r[g as usize]),
                    None => -1,
                })
                .collect(),
            obs: s.obs.clone().unwrap_or(ObsSchema { columns: vec![] }),
            staged: s.staged.clone(),
            identity: s.identity.clone(),
        })
        .collect();

    let source = match (&options.source_column, stats.len()) {
        (Some(name), _) => Some(name.clone()),
        (None, 1) => None,
        (None, _) => Some(DEFAULT_SOURCE_COLUMN.to_string()),
    }
    .map(|name| SourceColumn {
        name,
        values: stats.iter().map(|s| s.input.stem()).collect(),
    });
    if let Some(keep) = &options.obs_columns {
        let named: Vec<(String, &[String])> = stats
            .iter()
            .map(|s| (s.input.describe(), s.obs_names.as_slice()))
            .collect();
        check_obs_kept(keep, &named, |name| {
            inputs.iter().any(|p| p.obs.column(name).is_some())
        })?;
    }
    let union = union_of(
        &inputs,
        source.as_ref(),
        options.max_categories,
        options.obs_columns.as_deref(),
    )?;
    let obs = (!union.schema().columns.is_empty()).then(|| union.schema().clone());

    let (var_names, var) = match &vocab {
        None => (stats[0].var_names.clone(), stats[0].var.clone()),
        Some(v) => {
            let tables: Vec<(&VarTable, &[Option<u32>])> = stats
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.var.as_ref().map(|t| (t, v.columns(i))))
                .collect();
            let var = (!tables.is_empty())
                .then(|| VarTable::merge(&tables, v.keys(), options.gene_key.as_deref()))
                .transpose()?;
            let names = first_per_gene(stats, v, |s| s.var_names.as_deref())
                .or_else(|| Some(v.keys().to_vec()));
            (names, var)
        }
    };
    // Before any tile is written, not when the build commits.
    if let Some(names) = &var_names {
        check_var_names(names)?;
    }

    let n_cells: u64 = stats.iter().map(|s| s.n_cells).sum();
    let n_tiles = n_cells.div_ceil(tile_size) as usize;
    let starts: Vec<u64> = stats
        .iter()
        .scan(0u64, |at, s| {
            let start = *at;
            *at += s.n_cells;
            Some(start)
        })
        .collect();
    let tasks = (0..n_tiles)
        .step_by(options.tiles_per_task)
        .map(|first_tile| {
            let last = (first_tile + options.tiles_per_task).min(n_tiles);
            let (c0, c1) = (
                first_tile as u64 * tile_size,
                (last as u64 * tile_size).min(n_cells),
            );
            let tile_cells = (first_tile..last)
                .map(|t| ((t as u64 + 1) * tile_size).min(n_cells) - t as u64 * tile_size)
                .collect();
            let pieces = stats
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let (a, b) = (starts[i].max(c0), (starts[i] + s.n_cells).min(c1));
                    (a < b).then(|| (i, a - starts[i], b - starts[i]))
                })
                .collect();
            TaskSpec {
                first_tile,
                tile_cells,
                pieces,
            }
        })
        .collect();

    let mut plan = BuildPlan {
        out: out.to_string(),
        inputs,
        n_genes,
        tile_size,
        tiles_per_task: options.tiles_per_task,
        n_chunks: options.writer.n_chunks,
        level: options.writer.level,
        layer: options.layer.clone(),
        obs_columns: options.obs_columns.clone(),
        feature_type: options.feature_type.clone(),
        block_nonzeros: options.block_nonzeros,
        max_categories: options.max_categories,
        tasks,
        source,
        obs,
        gene_order,
        var_names,
        var,
        metadata: metadata(stats, options),
        fingerprint: String::new(),
    };
    plan.fingerprint = fingerprint_of(&plan.body()?);
    Ok(plan)
}

/// The union of the inputs' obs, plus the source column; the columns
/// `listed` (`--obs-columns`) in that order.
fn union_of(
    inputs: &[PlanInput],
    source: Option<&SourceColumn>,
    max_categories: usize,
    listed: Option<&[String]>,
) -> Result<ObsUnion> {
    let names: Vec<String> = inputs.iter().map(|p| p.input.describe()).collect();
    let inputs: Vec<InputObs> = inputs
        .iter()
        .zip(&names)
        .map(|(p, name)| InputObs {
            name,
            schema: &p.obs,
        })
        .collect();
    let union = ObsUnion::new(&inputs, source, max_categories)?;
    Ok(match listed {
        Some(listed) => union.listed_first(listed),
        None => union,
    })
}

fn fingerprint_of(body: &Value) -> String {
    crate::obs::sha256_hex(body.to_string().as_bytes())[..24].to_string()
}

fn layer_name(layer: &Layer) -> String {
    match layer {
        Layer::X => "X".into(),
        Layer::Raw => "raw".into(),
        Layer::Named(n) => n.clone(),
    }
}

impl BuildPlan {
    /// The plan as JSON, without its fingerprint.
    fn body(&self) -> Result<Value> {
        let inputs: Vec<Value> = self
            .inputs
            .iter()
            .map(|p| {
                json!({
                    "input": p.input.to_value(),
                    "n_cells": p.n_cells,
                    "n_genes": p.n_genes,
                    "columns": p.columns,
                    "obs": p.obs.to_value(),
                    "staged": p.staged,
                    "identity": p.identity,
                })
            })
            .collect();
        let tasks: Vec<Value> = self
            .tasks
            .iter()
            .map(|t| json!({"first_tile": t.first_tile, "tile_cells": t.tile_cells, "pieces": t.pieces}))
            .collect();
        Ok(json!({
            "format": "deltacells-build-plan",
            "version": 1,
            "out": self.out,
            "inputs": inputs,
            "n_genes": self.n_genes,
            "tile_size": self.tile_size,
            "tiles_per_task": self.tiles_per_task,
            "n_chunks": self.n_chunks,
            "level": self.level,
            "layer": layer_name(&self.layer),
            "obs_columns": self.obs_columns,
            "feature_type": self.feature_type,
            "block_nonzeros": self.block_nonzeros,
            "max_categories": self.max_categories,
            "tasks": tasks,
            "source": self.source.as_ref().map(|s| json!({"name": s.name, "values": s.values})),
            "obs": self.obs.as_ref().map(ObsSchema::to_value),
            "gene_order": self.gene_order,
            "var_names": self.var_names,
            "var": self.var.as_ref().map(VarTable::to_value).transpose()?,
            "metadata": self.metadata,
        }))
    }

    /// The plan as JSON (what the driver hands every task).
    pub fn to_json(&self) -> Result<String> {
        let mut v = self.body()?;
        v["fingerprint"] = Value::String(self.fingerprint.clone());
        Ok(v.to_string())
    }

    /// The plan [`BuildPlan::to_json`] wrote; its fingerprint is checked.
    pub fn from_json(text: &str) -> Result<BuildPlan> {
        let bad = |what: &str| Error::Input(format!("build plan: {what} is missing or malformed"));
        let v: Value = serde_json::from_str(text).map_err(|_| bad("the JSON"))?;
        if v.get("format").and_then(Value::as_str) != Some("deltacells-build-plan")
            || v.get("version").and_then(Value::as_u64) != Some(1)
        {
            return Err(bad("format/version"));
        }
        fn take<T: serde::de::DeserializeOwned>(v: &Value, k: &str) -> Result<T> {
            serde_json::from_value(v.get(k).cloned().unwrap_or(Value::Null))
                .map_err(|_| Error::Input(format!("build plan: {k} is missing or malformed")))
        }
        let schema = |x: &Value| ObsSchema::parse(x.to_string().as_bytes()).map_err(Error::Input);
        let inputs = v
            .get("inputs")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("inputs"))?
            .iter()
            .map(|p| {
                Ok(PlanInput {
                    input: BuildInput::from_value(p.get("input").ok_or_else(|| bad("input"))?)?,
                    n_cells: take(p, "n_cells")?,
                    n_genes: take(p, "n_genes")?,
                    columns: take(p, "columns")?,
                    obs: schema(p.get("obs").ok_or_else(|| bad("obs"))?)?,
                    staged: take(p, "staged")?,
                    identity: p.get("identity").cloned().unwrap_or(Value::Null),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let tasks = v
            .get("tasks")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("tasks"))?
            .iter()
            .map(|t| {
                Ok(TaskSpec {
                    first_tile: take(t, "first_tile")?,
                    tile_cells: take(t, "tile_cells")?,
                    pieces: take(t, "pieces")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let source = match v.get("source") {
            Some(Value::Null) | None => None,
            Some(s) => Some(SourceColumn {
                name: take(s, "name")?,
                values: take(s, "values")?,
            }),
        };
        let obs = match v.get("obs") {
            Some(Value::Null) | None => None,
            Some(s) => Some(schema(s)?),
        };
        let var = match v.get("var") {
            Some(Value::Null) | None => None,
            Some(t) => Some(VarTable::from_value(t)?),
        };
        let layer: String = take(&v, "layer")?;
        let plan = BuildPlan {
            out: take(&v, "out")?,
            inputs,
            n_genes: take(&v, "n_genes")?,
            tile_size: take(&v, "tile_size")?,
            tiles_per_task: take(&v, "tiles_per_task")?,
            n_chunks: take(&v, "n_chunks")?,
            level: take(&v, "level")?,
            layer: layer.parse().unwrap_or_default(),
            obs_columns: take(&v, "obs_columns")?,
            feature_type: take(&v, "feature_type")?,
            block_nonzeros: take(&v, "block_nonzeros")?,
            max_categories: take(&v, "max_categories")?,
            tasks,
            source,
            obs,
            gene_order: take(&v, "gene_order")?,
            var_names: take(&v, "var_names")?,
            var,
            metadata: take(&v, "metadata")?,
            fingerprint: take(&v, "fingerprint")?,
        };
        plan.validate()?;
        if fingerprint_of(&plan.body()?) != plan.fingerprint {
            return Err(Error::Input(
                "build plan: its fingerprint does not match its content".into(),
            ));
        }
        Ok(plan)
    }

    /// Checks that the plan is consistent, so that tasks run from it index
    /// nothing out of bounds: column maps into the output, tasks that cover
    /// the tiles in order with pieces inside their inputs, side tables of
    /// one entry per gene.
    fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Input(format!("build plan: {what}")));
        if self.tile_size == 0 || self.tiles_per_task == 0 || self.n_genes == 0 {
            return bad("tile_size, tiles_per_task and n_genes must be at least 1".into());
        }
        for (i, p) in self.inputs.iter().enumerate() {
            if p.columns.len() != p.n_genes as usize {
                return bad(format!(
                    "input {i} maps {} of its {} columns",
                    p.columns.len(),
                    p.n_genes
                ));
            }
            if let Some(c) = p
                .columns
                .iter()
                .find(|&&c| c < -1 || c >= self.n_genes as i32)
            {
                return bad(format!(
                    "input {i} maps a column to {c}, outside the {} genes",
                    self.n_genes
                ));
            }
        }
        let n_cells: u64 = self.inputs.iter().map(|p| p.n_cells).sum();
        let mut tile = 0usize;
        let mut cell = 0u64;
        let starts: Vec<u64> = self
            .inputs
            .iter()
            .scan(0u64, |at, p| {
                let s = *at;
                *at += p.n_cells;
                Some(s)
            })
            .collect();
        for (t, task) in self.tasks.iter().enumerate() {
            let expected = (tile..tile + self.tiles_per_task)
                .map(|k| {
                    ((k as u64 + 1) * self.tile_size)
                        .min(n_cells)
                        .saturating_sub(k as u64 * self.tile_size)
                })
                .take_while(|&c| c > 0)
                .collect::<Vec<_>>();
            if task.first_tile != tile || task.tile_cells != expected {
                return bad(format!(
                    "task {t} does not hold the next {} tiles",
                    self.tiles_per_task
                ));
            }
            for &(i, a, b) in &task.pieces {
                let Some(p) = self.inputs.get(i) else {
                    return bad(format!(
                        "task {t} reads input {i}, which is not in the plan"
                    ));
                };
                if a >= b || b > p.n_cells || starts[i] + a != cell {
                    return bad(format!(
                        "task {t} reads cells {a}..{b} of input {i} out of order"
                    ));
                }
                cell = starts[i] + b;
            }
            tile += task.tile_cells.len();
            if cell != (tile as u64 * self.tile_size).min(n_cells) {
                return bad(format!("task {t}'s pieces do not fill its tiles"));
            }
        }
        if cell != n_cells {
            return bad(format!("the tasks hold {cell} of {n_cells} cells"));
        }
        let per_gene = |what: &str, len: Option<usize>| match len {
            Some(l) if l != self.n_genes as usize => {
                bad(format!("{what} has {l} entries for {} genes", self.n_genes))
            }
            _ => Ok(()),
        };
        per_gene("gene_order", self.gene_order.as_ref().map(Vec::len))?;
        per_gene("var_names", self.var_names.as_ref().map(Vec::len))?;
        per_gene("var", self.var.as_ref().map(VarTable::len))?;
        if let Some(order) = &self.gene_order {
            let mut seen = vec![false; order.len()];
            for &g in order {
                match usize::try_from(g).ok().and_then(|g| seen.get_mut(g)) {
                    Some(s) if !*s => *s = true,
                    _ => return bad("gene_order is not a permutation".into()),
                }
            }
        }
        Ok(())
    }

    /// The obs union the tasks convert each input's columns with.
    pub(crate) fn obs_union(&self) -> Result<ObsUnion> {
        union_of(
            &self.inputs,
            self.source.as_ref(),
            self.max_categories,
            self.obs_columns.as_deref(),
        )
    }

    /// The converter options a task opens inputs with.
    pub(crate) fn convert_options(&self) -> ConvertOptions {
        ConvertOptions::default()
            .with_layer(self.layer.clone())
            .with_obs_columns(self.obs_columns.clone())
            .with_feature_type(self.feature_type.clone())
            .with_block_nonzeros(self.block_nonzeros)
            .with_sort_genes(false)
    }
}

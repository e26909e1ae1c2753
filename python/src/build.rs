//! The four steps of a build as Python sees them, for `deltacells.build`.
//!
//! A cluster runs a build as plain tasks: `build_stats` once per input and
//! `build_task` once per write task, on any worker, and a `BuildDriver` on
//! the driver that plans and commits. Everything crossing between them is
//! JSON text (statistics, the plan, task reports), so Dask or a process pool
//! ships it like any other string. The options cross the same way, as one
//! JSON object read by [`options`], the one place that maps the package's
//! keyword arguments to the engine's `ConvertOptions`. The GIL is released
//! while the engine reads, encodes or writes.

use std::sync::{Arc, Mutex};

use deltacells::dataset::build::{
    commit, input_stats, plan, run_task, BuildInput, BuildPlan, InputStats, TaskReport, PLAN_KEY,
};
use deltacells::dataset::ingest::{ConvertOptions, Layer};
use deltacells::dataset::vocab::GeneSpace;
use deltacells::dataset::{WriterConfig, MANIFEST_KEY};
use deltacells::storage::{Location, Store, StoreLock};
use deltacells::{Error, Result};
use pyo3::prelude::*;
use serde_json::{Map, Value};

use crate::errors::OrRaise;

/// The store of the output location `out`.
fn store(out: &str) -> Result<Arc<dyn Store>> {
    Location::parse(out).store()
}

/// An option's value, of the type `read` takes, or `None` when absent or null.
fn field<T>(
    map: &Map<String, Value>,
    key: &str,
    read: impl Fn(&Value) -> Option<T>,
) -> Result<Option<T>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => read(v)
            .map(Some)
            .ok_or_else(|| Error::Input(format!("build option {key:?}: {v} is not valid"))),
    }
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

fn texts(v: &Value) -> Option<Vec<String>> {
    v.as_array()?.iter().map(text).collect()
}

fn count(v: &Value) -> Option<usize> {
    v.as_u64().and_then(|n| usize::try_from(n).ok())
}

/// The keys [`options`] reads.
const OPTION_KEYS: [&str; 13] = [
    "genes",
    "gene_key",
    "source_column",
    "tiles_per_task",
    "tile_size",
    "n_chunks",
    "level",
    "sort_genes",
    "layer",
    "obs_columns",
    "feature_type",
    "max_categories",
    "tmp_dir",
];

/// The converter options a JSON object of build options describes: every key
/// optional (absent or null: the engine's default), unknown keys refused.
/// `genes` is `"union"`, `"intersection"` or a list of keys.
pub fn options(json: &str) -> Result<ConvertOptions> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| Error::Input(format!("build options are not JSON: {e}")))?;
    let map = value
        .as_object()
        .ok_or_else(|| Error::Input("build options must be a JSON object".into()))?;
    if let Some(unknown) = map.keys().find(|k| !OPTION_KEYS.contains(&k.as_str())) {
        return Err(Error::Input(format!("unknown build option {unknown:?}")));
    }
    let genes = match map.get("genes") {
        None | Some(Value::Null) => GeneSpace::Union,
        Some(Value::String(s)) if s == "union" => GeneSpace::Union,
        Some(Value::String(s)) if s == "intersection" => GeneSpace::Intersection,
        Some(v) => GeneSpace::listed(texts(v).ok_or_else(|| {
            Error::Input(format!(
                "genes must be \"union\", \"intersection\" or a list of gene keys, not {v}"
            ))
        })?)?,
    };
    let defaults = WriterConfig::default();
    let writer = defaults
        .clone()
        .with_tile_size(field(map, "tile_size", count)?.unwrap_or(defaults.tile_size))
        .with_n_chunks(field(map, "n_chunks", count)?.unwrap_or(defaults.n_chunks))
        .with_level(
            field(map, "level", |v| {
                v.as_i64().and_then(|l| i32::try_from(l).ok())
            })?
            .unwrap_or(defaults.level),
        );
    let base = ConvertOptions::default();
    Ok(base
        .clone()
        .with_writer(writer)
        .with_genes(genes)
        .with_gene_key(field(map, "gene_key", text)?)
        .with_source_column(field(map, "source_column", text)?)
        .with_tiles_per_task(field(map, "tiles_per_task", count)?.unwrap_or(base.tiles_per_task))
        .with_sort_genes(field(map, "sort_genes", Value::as_bool)?.unwrap_or(base.sort_genes))
        .with_layer(field(map, "layer", |v| v.as_str()?.parse::<Layer>().ok())?.unwrap_or_default())
        .with_obs_columns(field(map, "obs_columns", texts)?)
        .with_feature_type(field(map, "feature_type", text)?)
        .with_max_categories(field(map, "max_categories", count)?.unwrap_or(base.max_categories))
        .with_tmp_dir(field(map, "tmp_dir", text)?.map(Into::into)))
}

/// The statistics task of input `index` (a path or a dataset location) of a
/// build into `out`, as JSON: what `BuildDriver.plan` takes.
#[pyfunction]
pub fn build_stats(
    py: Python<'_>,
    input: String,
    index: usize,
    out: String,
    options_json: String,
) -> PyResult<String> {
    py.detach(move || {
        let options = options(&options_json)?;
        let input = BuildInput::detect(&input)?;
        let store = store(&out)?;
        input_stats(&input, index, &store, &options, &mut |_| {}).and_then(|s| s.to_json())
    })
    .or_raise(py)
}

/// Write task `task` of the plan `plan_json`: its tiles and obs shard put in
/// the plan's output. Returns the task's report as JSON and whether a
/// previous run had completed it already (then nothing was written).
#[pyfunction]
pub fn build_task(py: Python<'_>, plan_json: String, task: usize) -> PyResult<(String, bool)> {
    py.detach(move || {
        let plan = BuildPlan::from_json(&plan_json)?;
        let store = store(&plan.out)?;
        let report = run_task(&plan, task, &store, &mut |_| {})?;
        Ok((report.to_json(), report.reused))
    })
    .or_raise(py)
}

/// The driver of one build into one output: holds the output's writer lock
/// from its creation until `close` (or until the process ends), plans, and
/// commits.
#[pyclass(module = "deltacells._deltacells", name = "BuildDriver")]
pub struct PyBuildDriver {
    out: String,
    store: Arc<dyn Store>,
    /// `None` once closed.
    lock: Mutex<Option<StoreLock>>,
}

impl PyBuildDriver {
    fn open(&self) -> Result<()> {
        let held = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.is_none() {
            return Err(Error::Input(format!("the build of {} is closed", self.out)));
        }
        Ok(())
    }
}

#[pymethods]
impl PyBuildDriver {
    /// Starts the build of `out`: takes its writer lock and refuses an
    /// output that already holds a dataset.
    #[new]
    fn new(py: Python<'_>, out: String) -> PyResult<PyBuildDriver> {
        let (store, lock) = py
            .detach(|| -> Result<_> {
                let store = store(&out)?;
                let lock = store.lock_exclusive()?;
                if store.size(MANIFEST_KEY)?.is_some() {
                    return Err(Error::Input(format!(
                        "{} already holds a dataset (manifest.json exists)",
                        store.describe()
                    )));
                }
                Ok((store, lock))
            })
            .or_raise(py)?;
        Ok(PyBuildDriver {
            out,
            store,
            lock: Mutex::new(Some(lock)),
        })
    }

    /// The plan of the inputs whose statistics (`build_stats`' JSON, in
    /// input order) are given, recorded in the output; returns its JSON and
    /// its number of write tasks.
    fn plan(
        &self,
        py: Python<'_>,
        stats: Vec<String>,
        options_json: String,
    ) -> PyResult<(String, usize)> {
        py.detach(|| {
            self.open()?;
            let options = options(&options_json)?;
            let stats = stats
                .iter()
                .map(|s| InputStats::from_json(s))
                .collect::<Result<Vec<_>>>()?;
            let plan = plan(&stats, &self.out, &options)?;
            let json = plan.to_json()?;
            self.store.put(PLAN_KEY, json.as_bytes())?;
            Ok((json, plan.tasks.len()))
        })
        .or_raise(py)
    }

    /// Commits the plan once every task reported (the reports' JSON in task
    /// order): every object checked, the manifest written last, the build's
    /// own files removed. Returns the manifest's JSON.
    fn commit(&self, py: Python<'_>, plan_json: String, reports: Vec<String>) -> PyResult<String> {
        py.detach(|| {
            self.open()?;
            let plan = BuildPlan::from_json(&plan_json)?;
            let reports = reports
                .iter()
                .map(|r| TaskReport::from_json(r))
                .collect::<Result<Vec<_>>>()?;
            let manifest = commit(&plan, &reports, self.store.as_ref())?;
            Ok(String::from_utf8_lossy(&manifest.to_json()).into_owned())
        })
        .or_raise(py)
    }

    /// Releases the output's writer lock; the driver is unusable after.
    fn close(&self) {
        self.lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }
}

//! Write tasks: each writes its tiles and its obs shard, then its report.
//!
//! A task reads its pieces of the inputs in order, maps every row's genes to
//! output columns, packs tiles, encodes each as it fills and puts it at its
//! final key; then it converts the inputs' obs columns for its cells to the
//! global schema and puts its one shard. Last it puts a report (under
//! `_build/tasks/`) naming every object with its size and CRC-32. Everything
//! a task writes is a function of the plan, so a rerun writes the same bytes;
//! and a rerun whose report is there, and whose objects all still have the
//! recorded size and CRC, writes nothing.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef};
use serde_json::{json, Value};

use crate::dataset::build::input::{named, Reader};
use crate::dataset::build::plan::BuildPlan;
use crate::dataset::packer::TilePacker;
use crate::error::{Error, Result};
use crate::format::manifest::Manifest;
use crate::format::tile_writer::TileEncoder;
use crate::storage::Store;

/// One object a task wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRecord {
    /// Its key in the output.
    pub key: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The CRC-32 of its bytes.
    pub crc32: u32,
}

/// What a task wrote: the report the commit checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskReport {
    /// The task's index in the plan.
    pub task: usize,
    /// The fingerprint of the plan it ran.
    pub plan: String,
    /// Its tiles, in order.
    pub tiles: Vec<ObjectRecord>,
    /// Stored nonzeros of each tile.
    pub tile_nnz: Vec<u64>,
    /// Its obs shard, and the shard's SHA-256 (the manifest lists it).
    pub shard: Option<(ObjectRecord, String)>,
    /// Whether this run found the task complete and wrote nothing.
    pub reused: bool,
}

fn report_key(task: usize) -> String {
    format!("_build/tasks/task_{task:06}.json")
}

fn record_value(r: &ObjectRecord) -> Value {
    json!({"key": r.key, "bytes": r.bytes, "crc32": r.crc32})
}

fn record_from(v: &Value) -> Option<ObjectRecord> {
    Some(ObjectRecord {
        key: v.get("key")?.as_str()?.to_string(),
        bytes: v.get("bytes")?.as_u64()?,
        crc32: u32::try_from(v.get("crc32")?.as_u64()?).ok()?,
    })
}

impl TaskReport {
    /// The report as JSON.
    pub fn to_json(&self) -> String {
        json!({
            "task": self.task,
            "plan": self.plan,
            "tiles": self.tiles.iter().map(record_value).collect::<Vec<_>>(),
            "tile_nnz": self.tile_nnz,
            "shard": self.shard.as_ref().map(|(r, sha)| json!({"object": record_value(r), "sha256": sha})),
        })
        .to_string()
    }

    /// The report [`TaskReport::to_json`] wrote.
    pub fn from_json(text: &str) -> Result<TaskReport> {
        let bad = || Error::Input("a build task report is malformed".into());
        let v: Value = serde_json::from_str(text).map_err(|_| bad())?;
        let tiles = v
            .get("tiles")
            .and_then(Value::as_array)
            .ok_or_else(bad)?
            .iter()
            .map(|t| record_from(t).ok_or_else(bad))
            .collect::<Result<Vec<_>>>()?;
        let shard = match v.get("shard") {
            None | Some(Value::Null) => None,
            Some(s) => Some((
                s.get("object").and_then(record_from).ok_or_else(bad)?,
                s.get("sha256")
                    .and_then(Value::as_str)
                    .ok_or_else(bad)?
                    .to_string(),
            )),
        };
        Ok(TaskReport {
            task: v.get("task").and_then(Value::as_u64).ok_or_else(bad)? as usize,
            plan: v
                .get("plan")
                .and_then(Value::as_str)
                .ok_or_else(bad)?
                .to_string(),
            tiles,
            tile_nnz: serde_json::from_value(v.get("tile_nnz").cloned().unwrap_or(Value::Null))
                .map_err(|_| bad())?,
            shard,
            reused: false,
        })
    }

    /// Every object the report names.
    pub fn objects(&self) -> impl Iterator<Item = &ObjectRecord> {
        self.tiles.iter().chain(self.shard.as_ref().map(|(r, _)| r))
    }
}

/// Whether `record`'s object is in `store` with its recorded size and CRC.
pub(crate) fn intact(store: &dyn Store, record: &ObjectRecord) -> Result<bool> {
    if store.size(&record.key)? != Some(record.bytes) {
        return Ok(false);
    }
    Ok(store
        .get(&record.key)?
        .is_some_and(|b| crc32fast::hash(b.as_bytes()) == record.crc32))
}

/// The report of a previous run of `task` under this plan, if every object
/// it names is intact.
fn previous(store: &dyn Store, plan: &BuildPlan, task: usize) -> Result<Option<TaskReport>> {
    let Some(bytes) = store.get(&report_key(task))? else {
        return Ok(None);
    };
    let Ok(report) = TaskReport::from_json(&String::from_utf8_lossy(bytes.as_bytes())) else {
        return Ok(None);
    };
    if report.plan != plan.fingerprint || report.task != task {
        return Ok(None);
    }
    for r in report.objects() {
        if !intact(store, r)? {
            return Ok(None);
        }
    }
    Ok(Some(TaskReport {
        reused: true,
        ..report
    }))
}

/// Puts `bytes` at `key` and records it.
fn put(store: &dyn Store, key: String, bytes: &[u8]) -> Result<ObjectRecord> {
    store.put(&key, bytes)?;
    Ok(ObjectRecord {
        key,
        bytes: bytes.len() as u64,
        crc32: crc32fast::hash(bytes),
    })
}

/// Runs write task `task` of `plan` (see the [module docs](self)); `progress`
/// receives the number of cells written as tiles are put.
pub fn run_task(
    plan: &BuildPlan,
    task: usize,
    store: &Arc<dyn Store>,
    progress: &mut dyn FnMut(u64),
) -> Result<TaskReport> {
    let spec = plan.tasks.get(task).ok_or_else(|| {
        Error::Input(format!(
            "task {task} is not in the plan ({} tasks)",
            plan.tasks.len()
        ))
    })?;
    if let Some(report) = previous(store.as_ref(), plan, task)? {
        progress(spec.tile_cells.iter().sum());
        return Ok(report);
    }
    let options = plan.convert_options();
    let mut encoder = TileEncoder::new()
        .with_chunks(plan.n_chunks)
        .with_level(plan.level);
    let mut packer = TilePacker::new(1, None, plan.n_genes, plan.tile_size as usize);
    let mut tiles = Vec::with_capacity(spec.tile_cells.len());
    let mut tile_nnz = Vec::with_capacity(spec.tile_cells.len());
    let mut put_tile = |tile: crate::csr::Csr<u32>| -> Result<()> {
        let t = spec.first_tile + tiles.len();
        let bytes = encoder.encode(tile.as_ref())?;
        tiles.push(put(store.as_ref(), Manifest::tile_key(t), &bytes)?);
        tile_nnz.push(tile.nnz() as u64);
        progress(tile.n_rows() as u64);
        Ok(())
    };
    let union = plan.obs.as_ref().map(|_| plan.obs_union()).transpose()?;
    let mut obs_parts: Vec<Vec<ArrayRef>> = Vec::new();
    for &(i, a, b) in &spec.pieces {
        let input = &plan.inputs[i];
        let mut reader = Reader::open(&input.input, input.staged.as_deref(), store, &options)
            .map_err(|e| named(e, &input.input.describe()))?;
        packer.remap(input.n_genes, Some(input.columns.clone()));
        reader
            .cells(a..b, &mut |block| {
                packer.push(block.as_ref(), &mut put_tile)
            })
            .map_err(|e| named(e, &input.input.describe()))?;
        if let Some(union) = &union {
            let names = input
                .obs
                .names()
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>();
            let stored = if names.is_empty() {
                Vec::new()
            } else {
                reader.obs(&names, a..b, plan.max_categories)?
            };
            let len = (b - a) as usize;
            obs_parts.push(
                (0..union.schema().columns.len())
                    .map(|c| union.remap(i, c, &stored, len))
                    .collect::<Result<_>>()?,
            );
        }
    }
    if let Some(last) = packer.take_partial() {
        put_tile(last)?;
    }
    if tiles.len() != spec.tile_cells.len() {
        return Err(Error::Input(format!(
            "task {task} wrote {} tiles, the plan has {}",
            tiles.len(),
            spec.tile_cells.len()
        )));
    }
    let shard = match (&plan.obs, union) {
        (Some(schema), Some(_)) => {
            let columns = (0..schema.columns.len())
                .map(|c| {
                    let parts: Vec<&dyn Array> = obs_parts.iter().map(|p| p[c].as_ref()).collect();
                    arrow_select::concat::concat(&parts)
                        .map_err(|e| Error::Input(format!("obs column {c}: {e}")))
                })
                .collect::<Result<Vec<ArrayRef>>>()?;
            let bytes = crate::obs::encode_shard(schema, &columns, &spec.tile_cells)?;
            let key = crate::obs::shard_key(spec.first_tile / plan.tiles_per_task);
            let sha = crate::obs::sha256_hex(&bytes);
            Some((put(store.as_ref(), key, &bytes)?, sha))
        }
        _ => None,
    };
    let report = TaskReport {
        task,
        plan: plan.fingerprint.clone(),
        tiles,
        tile_nnz,
        shard,
        reused: false,
    };
    // The report is written once the objects it names are durable.
    store.sync("tiles")?;
    if report.shard.is_some() {
        store.sync("obs")?;
    }
    store.put(&report_key(task), report.to_json().as_bytes())?;
    Ok(report)
}

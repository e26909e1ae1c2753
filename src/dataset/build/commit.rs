//! The commit: every task's objects checked, the side files, the manifest last.
//!
//! The commit runs on the driver once every write task has reported. It
//! checks each report against the plan (its fingerprint, its task, the
//! number of tiles) and every object it names against the store (it exists,
//! with the size the task recorded; the CRC-32 is checked where a rerun reuses
//! an object, by the task itself), writes `gene_order.npy`, `var_names.txt`,
//! `var.parquet` and `obs/schema.json`, removes the temporary files of writers
//! killed mid-put and the tiles and shards of a killed build of another plan,
//! writes `manifest.json`, and last removes the build's own
//! files (`_build/`: the plan, the reports, the stages).
//! Until the manifest is there the output is, to every reader, incomplete.

use crate::dataset::build::plan::BuildPlan;
use crate::dataset::build::task::TaskReport;
use crate::dataset::writer::{put_manifest, put_side_files};
use crate::error::{Error, Result};
use crate::format::manifest::{Manifest, ObsManifest};
use crate::storage::Store;

/// Where the build keeps its own files until the commit removes them.
pub const BUILD_PREFIX: &str = "_build/";

/// Commits `plan` once every task reported (see the [module docs](self)).
pub fn commit(plan: &BuildPlan, reports: &[TaskReport], store: &dyn Store) -> Result<Manifest> {
    if store.size(crate::dataset::MANIFEST_KEY)?.is_some() {
        return Err(Error::Input(format!(
            "{} already holds a dataset (manifest.json exists)",
            store.describe()
        )));
    }
    if reports.len() != plan.tasks.len() {
        return Err(Error::Input(format!(
            "{} task reports for a plan of {} tasks",
            reports.len(),
            plan.tasks.len()
        )));
    }
    let mut manifest = Manifest {
        n_cells: plan.inputs.iter().map(|p| p.n_cells).sum(),
        n_genes: plan.n_genes,
        tile_size: plan.tile_size,
        tile_cells: Vec::new(),
        tile_nnz: Vec::new(),
        tile_bytes: Vec::new(),
        n_chunks: plan.n_chunks as u64,
        zstd_level: i64::from(plan.level),
        has_gene_order: plan.gene_order.is_some(),
        has_var_names: plan.var_names.is_some(),
        has_var_table: plan.var.is_some(),
        obs: None,
        metadata: plan.metadata.clone(),
    };
    let mut shards = (Vec::new(), Vec::new());
    for (t, (spec, report)) in plan.tasks.iter().zip(reports).enumerate() {
        if report.plan != plan.fingerprint || report.task != t {
            return Err(Error::Input(format!(
                "report {t} is of task {} of plan {}, not of task {t} of plan {}",
                report.task, report.plan, plan.fingerprint
            )));
        }
        if report.tiles.len() != spec.tile_cells.len()
            || report.tile_nnz.len() != spec.tile_cells.len()
            || report.shard.is_some() != plan.obs.is_some()
        {
            return Err(Error::Input(format!(
                "task {t} reported {} tiles (the plan has {}){}",
                report.tiles.len(),
                spec.tile_cells.len(),
                if plan.obs.is_some() {
                    " and must report its obs shard"
                } else {
                    ""
                }
            )));
        }
        for r in report.objects() {
            let size = store.size(&r.key)?;
            if size != Some(r.bytes) {
                return Err(Error::Input(format!(
                    "{}: task {t} reported {} bytes, the store has {}",
                    r.key,
                    r.bytes,
                    size.map_or("no such object".to_string(), |s| format!("{s} bytes"))
                )));
            }
        }
        manifest.tile_cells.extend(&spec.tile_cells);
        manifest.tile_nnz.extend(&report.tile_nnz);
        manifest
            .tile_bytes
            .extend(report.tiles.iter().map(|r| r.bytes));
        if let Some((r, sha)) = &report.shard {
            shards.0.push(r.bytes);
            shards.1.push(sha.clone());
        }
    }
    put_side_files(
        store,
        plan.gene_order.as_deref(),
        plan.var_names.as_deref(),
        plan.var.as_ref(),
    )?;
    if let Some(schema) = &plan.obs {
        let schema_json = schema.to_json_text();
        store.put(crate::obs::SCHEMA_KEY, schema_json.as_bytes())?;
        store.sync("obs")?;
        manifest.obs = Some(ObsManifest {
            tiles_per_file: plan.tiles_per_task as u64,
            fingerprint: crate::obs::fingerprint(&schema_json, &manifest.tile_cells, &shards.1),
            shard_bytes: shards.0,
            shard_sha256: shards.1,
        });
    }
    // Writers killed mid-put (a worker, a previous driver) may have left
    // temporary files beside the objects: the output ends as if they never ran.
    store.remove_temporaries("")?;
    remove_strays(store, &manifest)?;
    put_manifest(store, &manifest)?;
    remove_build_files(store)?;
    Ok(manifest)
}

/// Removes the tiles and obs shards the manifest does not name: those of a
/// killed build of another plan into the same output (a larger tile size
/// leaves fewer tiles), which a reader never opens but `verify` would not
/// report either. Only objects named as tiles and shards are: anything else
/// under `tiles/` or `obs/` was put there by someone else, and stays.
fn remove_strays(store: &dyn Store, manifest: &Manifest) -> Result<()> {
    let mut ours: std::collections::HashSet<String> =
        (0..manifest.n_tiles()).map(Manifest::tile_key).collect();
    if let Some(obs) = &manifest.obs {
        ours.extend((0..obs.shard_bytes.len()).map(crate::obs::shard_key));
        ours.insert(crate::obs::SCHEMA_KEY.to_string());
    }
    for (dir, stem, suffix) in [("tiles/", "tile_", ".dct"), ("obs/", "obs_", ".parquet")] {
        for key in store.list(dir)? {
            let named_so = key
                .strip_prefix(dir)
                .and_then(|name| name.strip_prefix(stem))
                .and_then(|rest| rest.strip_suffix(suffix))
                .is_some_and(crate::storage::is_decimal);
            if named_so && !ours.contains(&key) {
                store.delete(&key)?;
            }
        }
    }
    Ok(())
}

/// Removes everything under [`BUILD_PREFIX`]. Some object stores keep an
/// empty "directory" entry once its objects are gone (SeaweedFS lists
/// `_build/tasks`, then `_build`, as keys): those go in later rounds.
fn remove_build_files(store: &dyn Store) -> Result<()> {
    let dir = BUILD_PREFIX.trim_end_matches('/');
    for _round in 0..4 {
        let keys: Vec<String> = store
            .list(dir)?
            .into_iter()
            .filter(|k| k == dir || k.starts_with(BUILD_PREFIX))
            .collect();
        if keys.is_empty() {
            break;
        }
        for key in keys {
            store.delete(&key)?;
        }
    }
    Ok(())
}

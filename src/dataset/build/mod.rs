//! Building one dataset from many inputs, as one plan of tasks.
//!
//! A build runs in four steps, each a plain function over JSON-serialisable
//! values, so that the same plan runs on this process's threads (what
//! [`build`] and the command-line `convert` do) or as tasks on a cluster (the
//! Python package's `deltacells.build` on Dask):
//!
//! 1. [`input_stats`], one task per input ([`stats`]): counts, gene keys,
//!    gene totals, obs schemas; inputs that need a transpose are staged.
//! 2. [`plan()`] on the driver ([`plan`](mod@plan)): the vocabulary and its order, the
//!    tiles, the write tasks, the global obs schema.
//! 3. [`run_task`], one per write task ([`task`]): tiles and an obs shard
//!    put at their final keys, then a report.
//! 4. [`commit()`] on the driver ([`commit`](mod@commit)): reports checked, side files, the
//!    manifest last, the build's own files removed.
//!
//! The output depends on the inputs and options alone: any number of
//! workers writes the same bytes, and a build of one input is the single
//! input conversion. A rerun after any failure reuses every task whose
//! objects are intact and rewrites the others with the same bytes.

pub mod commit;
pub mod input;
pub mod plan;
pub mod stats;
pub mod task;

use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::dataset::ingest::{ConvertOptions, Phase, Progress};
use crate::error::Result;
use crate::format::manifest::Manifest;
use crate::storage::Store;

pub use commit::{commit, BUILD_PREFIX};
pub use input::BuildInput;
pub use plan::{plan, BuildPlan, PlanInput, TaskSpec};
pub use stats::{input_stats, InputStats};
pub use task::{run_task, ObjectRecord, TaskReport};

/// Key of the plan a build is running (a record for people and tools).
pub const PLAN_KEY: &str = "_build/plan.json";

/// Progress summed over tasks running at once; the lock also keeps the
/// reports in increasing order.
struct Tally<'p> {
    done: Mutex<u64>,
    total: u64,
    report: &'p (dyn Fn(Progress) + Sync),
}

impl Tally<'_> {
    fn add(&self, n: u64) {
        let mut done = lock(&self.done);
        *done += n;
        (self.report)(Progress {
            phase: Phase::Writing,
            done: *done,
            total: self.total,
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs the statistics tasks of `inputs` on this process's threads and plans
/// the build into `store` (`out` is what the plan records as the output's
/// location). Inputs that need a transpose are staged in `store`.
pub fn plan_inputs(
    inputs: &[BuildInput],
    store: &Arc<dyn Store>,
    out: &str,
    options: &ConvertOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<BuildPlan> {
    // An option's mistake, said once rather than as the first input's.
    if let Some(keep) = &options.obs_columns {
        crate::dataset::ingest::check_obs_list(keep)?;
    }
    // Counting: each task reports its own `(done, total)`; the sums over
    // the inputs that have reported are shown.
    let seen = Mutex::new(vec![(0u64, 0u64); inputs.len()]);
    let one = |(i, input): (usize, &BuildInput)| {
        input_stats(input, i, store, options, &mut |p: Progress| {
            let mut seen = lock(&seen);
            seen[i] = (p.done, p.total);
            if inputs.len() == 1 {
                progress(p);
            } else if p.phase == Phase::Counting {
                let (done, total) = seen
                    .iter()
                    .fold((0, 0), |(d, t), &(sd, st)| (d + sd, t + st));
                progress(Progress { done, total, ..p });
            }
        })
    };
    // One input is read on the caller's thread (what it allocates is the
    // caller's); several in parallel.
    let stats = if inputs.len() == 1 {
        inputs
            .iter()
            .enumerate()
            .map(one)
            .collect::<Result<Vec<_>>>()?
    } else {
        inputs
            .par_iter()
            .enumerate()
            .map(one)
            .collect::<Result<Vec<_>>>()?
    };
    plan(&stats, out, options)
}

/// Builds one dataset in `store` from `inputs` on this process's threads:
/// statistics tasks in parallel, the plan, write tasks in parallel, the
/// commit. `out` is what the plan records as the output's location.
pub fn build_into(
    inputs: &[BuildInput],
    store: Arc<dyn Store>,
    out: &str,
    options: &ConvertOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Manifest> {
    let _lock = store.lock_exclusive()?;
    if store.size(crate::dataset::MANIFEST_KEY)?.is_some() {
        return Err(crate::error::Error::Input(format!(
            "{} already holds a dataset (manifest.json exists)",
            store.describe()
        )));
    }
    let plan = plan_inputs(inputs, &store, out, options, progress)?;
    store.put(PLAN_KEY, plan.to_json()?.as_bytes())?;
    let tally = Tally {
        done: Mutex::new(0),
        total: plan.inputs.iter().map(|p| p.n_cells).sum(),
        report: progress,
    };
    let reports = (0..plan.tasks.len())
        .into_par_iter()
        .map(|t| run_task(&plan, t, &store, &mut |n| tally.add(n)))
        .collect::<Result<Vec<_>>>()?;
    commit(&plan, &reports, store.as_ref())
}

/// [`build_into`] the dataset at `out` (a directory or a URL); a directory
/// made for a build refused before its first file is removed again.
pub fn build(
    inputs: &[BuildInput],
    out: &str,
    options: &ConvertOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Manifest> {
    crate::storage::Location::parse(out)
        .write_new(|store| build_into(inputs, store, out, options, progress))
}

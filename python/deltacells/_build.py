"""`deltacells.build`: many inputs into one dataset, on a Dask cluster or a
local process pool.

A build is one plan run in four steps (the engine's `dataset::build`):
statistics tasks, one per input; the plan, on the driver; write tasks, each
putting its tiles and obs shard straight into the output; the commit, on the
driver, which checks every task's objects and writes `manifest.json` last.
The tasks are plain functions of JSON text (`_stats`, `_write`), so Dask
(`client.map`) or a `ProcessPoolExecutor` runs them; no scheduler of ours.
The output's bytes depend on the inputs and options alone, never on the
number of workers or on Dask, and equal `deltacells convert IN... OUT`'s.
A rerun after any failure reuses every task whose objects are intact, of
the same inputs.
"""

import json
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Union

from . import _deltacells
from ._dataset import column_names
from ._settings import unsigned, zstd_level
from .errors import InputError

Genes = Union[str, Sequence[str]]
PathLike = Union[str, "os.PathLike[str]"]


class BuildSummary(NamedTuple):
    """What a build wrote."""

    location: str
    n_obs: int
    n_vars: int
    n_tiles: int
    tile_bytes: int
    tasks: int
    """Write tasks in the plan."""
    reused: int
    """Write tasks a previous run had completed (nothing rewritten)."""


def _options(genes: Genes, gene_key: Optional[str], source_column: Optional[str],
             tile_size: int, n_chunks: int, level: int, tiles_per_task: int, sort_genes: bool,
             layer: str, obs_columns: Optional[Sequence[str]], feature_type: Optional[str],
             tmp_dir: Optional[PathLike]) -> str:
    """The build options as the engine reads them (one JSON object)."""
    if not isinstance(genes, str):
        genes = [str(g) for g in genes]
    return json.dumps({
        "genes": genes,
        "gene_key": gene_key,
        "source_column": source_column,
        "tile_size": tile_size,
        "n_chunks": n_chunks,
        "level": level,
        "tiles_per_task": tiles_per_task,
        "sort_genes": sort_genes,
        "layer": layer,
        "obs_columns": None if obs_columns is None else list(obs_columns),
        "feature_type": feature_type,
        "tmp_dir": None if tmp_dir is None else os.fspath(tmp_dir),
    })


def _stats(input: str, index: int, out: str, options: str) -> str:  # noqa: A002
    """A statistics task (runs on a worker)."""
    return _deltacells.build_stats(input, index, out, options)


def _write(task: int, plan: str) -> "tuple[str, bool]":
    """A write task (runs on a worker): its report, and whether it was reused."""
    return _deltacells.build_task(plan, task)


def _run_dask(client: Any, inputs: List[str], out: str, options: str,
              driver: "_deltacells.BuildDriver", retries: int) -> "tuple[str, List[str], int]":
    stats = client.gather(client.map(_stats, inputs, range(len(inputs)), out=out,
                                     options=options, key="deltacells-stats", pure=False,
                                     retries=retries))
    plan, n_tasks = driver.plan(stats, options)
    # The plan goes to the workers once, not with every task.
    [shared] = client.scatter([plan], broadcast=True, hash=False)
    done = client.gather(client.map(_write, range(n_tasks), plan=shared,
                                    key="deltacells-write", pure=False, retries=retries))
    return plan, [r for r, _ in done], sum(reused for _, reused in done)


#: How often a local pool's worker looks whether its driver is still alive.
_DRIVER_POLL_S = 0.5


def _follow_driver(driver: int) -> None:
    """Ends this worker process once the driver `driver` (its parent) is
    gone: a driver killed (SIGTERM, SIGKILL) runs no cleanup, and its
    spawned workers would otherwise wait for tasks forever."""
    def watch() -> None:
        while os.getppid() == driver:
            time.sleep(_DRIVER_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="deltacells-driver-watch", daemon=True).start()


def _run_local(inputs: List[str], out: str, options: str,
               driver: "_deltacells.BuildDriver", workers: Optional[int]) -> "tuple[str, List[str], int]":
    # Spawned, not forked: a fork would copy the engine's thread pools without their threads.
    pool = ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1,
                               mp_context=get_context("spawn"),
                               initializer=_follow_driver, initargs=(os.getpid(),))
    try:
        n = len(inputs)
        stats = list(pool.map(_stats, inputs, range(n), [out] * n, [options] * n))
        plan, n_tasks = driver.plan(stats, options)
        done = list(pool.map(_write, range(n_tasks), [plan] * n_tasks))
    finally:
        # After a failure, the tasks not started yet are dropped, not run.
        pool.shutdown(wait=True, cancel_futures=True)
    return plan, [r for r, _ in done], sum(reused for _, reused in done)


def build(inputs: Sequence[PathLike], out: PathLike, *, genes: Genes = "union",
          gene_key: Optional[str] = None, source_column: Optional[str] = None,
          client: Any = None, workers: Optional[int] = None, retries: int = 0,
          tile_size: int = _deltacells.DEFAULT_TILE_SIZE,
          n_chunks: int = _deltacells.DEFAULT_CHUNKS, level: int = _deltacells.DEFAULT_LEVEL,
          tiles_per_task: int = _deltacells.DEFAULT_TILES_PER_TASK, sort_genes: bool = True,
          layer: str = "X", obs_columns: Optional[Sequence[str]] = None,
          feature_type: Optional[str] = None,
          tmp_dir: Optional[PathLike] = None) -> BuildSummary:
    """Builds one dataset at `out` (a directory or a URL such as
    `s3://bucket/prefix`) from `inputs`: files the converter reads (h5ad,
    Cell Ranger h5, 10x folders, npz) or existing datasets, each with its
    own genes and obs. The same as `deltacells convert IN... OUT`, byte for
    byte, with the same options.

    Genes are matched across inputs by `gene_key` (a var column such as
    `gene_ids`; default the var index) into `genes`: `"union"`,
    `"intersection"`, or a list of keys (exactly those, in that order). They
    are sorted by decreasing total counts unless `sort_genes=False`. The obs
    is the union of the inputs' columns, category vocabularies merged, plus
    a categorical `source_column` (default `dataset_id` for several inputs)
    holding each input's file or directory stem. `obs_columns` keeps only
    those columns of the union, in that order (and each input's cell ids):
    an input lacking one has it missing; a column no input has is refused.
    `feature_type` (e.g. `"Gene Expression"`) keeps only the features of
    that type, as `--feature-type` does.

    `client`: a `distributed.Client`; statistics and write tasks run on its
    workers (which must see the inputs and the output at the same paths),
    each task retried up to `retries` times after an error (a worker that
    dies has its task rerun by Dask anyway). Without one the same tasks run
    on a local pool of `workers` spawned processes (default: one per core),
    so call it from under `if __name__ == "__main__":` in scripts.

    A build stopped by any failure is finished by running it again: every
    task whose objects are intact is reused (`BuildSummary.reused`) when the
    inputs are the same (files of the same sizes, modification and change
    times; datasets of the same manifest). Until
    the commit, `out` holds no `manifest.json`.
    """
    for name, value in [("tile_size", tile_size), ("n_chunks", n_chunks),
                        ("tiles_per_task", tiles_per_task), ("workers", workers)]:
        if value is not None:
            unsigned(name, value, least=1)
    unsigned("retries", retries)
    level = zstd_level("level", level)
    # A name, or names once each, as the other calls taking obs columns read them.
    obs_columns = column_names("obs_columns", obs_columns)
    if feature_type is not None and not isinstance(feature_type, str):
        raise InputError(f"feature_type must be a feature type's name, not {feature_type!r}")
    for name, value in [("gene_key", gene_key), ("source_column", source_column)]:
        if value is not None and not (isinstance(value, str) and value):
            raise InputError(f"{name} must be a column's name or None, not {value!r}")
    if client is not None and not all(hasattr(client, m) for m in ("map", "gather", "scatter")):
        raise InputError(f"client must be a distributed.Client, not {client!r} "
                         "(a cluster is used through Client(cluster))")
    sources = [os.fspath(i) for i in inputs]
    location = os.fspath(out)
    options = _options(genes, gene_key, source_column, tile_size, n_chunks, level,
                       tiles_per_task, sort_genes, layer, obs_columns, feature_type, tmp_dir)
    # A local directory the build makes is removed again when the build is
    # refused before it wrote anything there, as `deltacells convert` does.
    fresh = "://" not in location and not os.path.exists(location)
    driver = _deltacells.BuildDriver(location)
    committed = False
    try:
        if client is None:
            plan, reports, reused = _run_local(sources, location, options, driver, workers)
        else:
            plan, reports, reused = _run_dask(client, sources, location, options, driver, retries)
        manifest: Dict[str, Any] = json.loads(driver.commit(plan, reports))
        committed = True
    finally:
        driver.close()
        if fresh and not committed:
            try:
                os.rmdir(location)  # only when empty
            except OSError:
                pass
    return BuildSummary(location=location, n_obs=manifest["n_cells"], n_vars=manifest["n_genes"],
                        n_tiles=len(manifest["tile_cells"]),
                        tile_bytes=sum(manifest["tile_bytes"]), tasks=len(reports),
                        reused=reused)

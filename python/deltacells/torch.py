"""PyTorch loading: `CellDataset`, an `IterableDataset` of whole batches.

Use it with `DataLoader(ds, batch_size=None, num_workers=...)`. The cells of
an epoch are ordered by `(seed, epoch)` alone and cut into batches, an equal
number per DDP rank, each rank taking a contiguous share. A rank's batches
are the same with any number of DataLoader workers; only the order they
arrive in depends on it: the rank's batches are split into `num_workers`
contiguous spans, one per worker, and the loader takes one batch from each
worker in turn. Contiguous spans matter for speed: a worker then decodes
only its own block-shuffle windows, where dealing batches out one by one
would make every worker decode every window.

`num_workers=0` is usually the fastest choice: the engine decodes on its own
threads with the GIL released, and batches reach the loop without a copy.
Worker processes add what moving each batch between processes costs (shared
memory per tensor, mapped again in the main process): for batches of a few
MB that costs as much as decoding them (`python/benches/loader.py` measures
both).

The engine is opened lazily in each process: nothing of it is pickled
(spawn) or used across a fork.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Iterator, NamedTuple, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data

from . import _deltacells
from ._batches import Batches
from ._corpus import open_location
from ._dataset import (_INHERITED, SHUFFLES, Dataset, column_names, draw_settings, rank_in_world,
                       tokenizer_alone)
from ._formats import dtype_name
from ._settings import unsigned
from ._transform import MISSING
from .errors import InputError

_OUTPUTS = ("csr", "dense")


class _Resume(NamedTuple):
    """A loaded state (see `CellDataset.state_dict`)."""

    epoch_cells: int
    delivered_before: "list[tuple[int, int]]"
    next_batch: int
    shape: "tuple[int, int, bool]"  # world_size, num_workers, drop_last


def _is_series(x: Any) -> bool:
    """Whether `x` is a pandas Series (without importing pandas for others)."""
    return type(x).__module__.startswith("pandas") and type(x).__name__ == "Series"


class CellDataset(torch.utils.data.IterableDataset):
    """Batches of cells as dicts `{"X": ..., "cells": int64 ids, <obs column>: ...}`.

    * `dataset`: a location (a corpus file reads as its corpus), or a
      `deltacells.Dataset` or `deltacells.Corpus` already open (used as it is
      in the process that opened it; DataLoader workers and other processes
      open the same data themselves).
    * `batch_size`: cells per batch; every rank yields the same number of
      batches; `drop_last` drops the cells that do not fill a batch on every
      rank, otherwise every cell comes exactly once per epoch.
    * `shuffle`: "block" (shuffle tiles, then cells within windows of
      `window_tiles` tiles: each chunk decodes about once per epoch), "random"
      (a uniform permutation; random access) or "none".
    * `genes`: a subset of genes (indices or names), in the order given;
      otherwise the columns follow the dataset's `var_names`. `missing`:
      "error" (a name the dataset lacks raises) or "zero" (it is a column of
      zeros: a model's gene vocabulary over any dataset or corpus).
    * `obs_columns`: obs columns returned with every batch: category codes as
      int64 (`-1` missing; `categories(name)` gives the vocabulary), strings
      as lists (`None` missing), numbers and booleans as tensors of the dtype
      they are stored as, the same in every batch. Floats hold a missing
      value as NaN. Integers and booleans have no such value, and any obs
      column may miss values, so each comes with `"<name>_missing"`, a bool
      tensor that is True where the value is missing (its entry in `<name>`
      is then 0 or False, not a value): an integer is never rounded through
      a float and a missing boolean never reads as False. None: every obs
      column (as `Dataset.obs` has them).
    * `output`: "csr" (`torch.sparse_csr_tensor`, values not copied) or
      "dense" rows; `dtype`: float32 or int32 (exact counts).
    * `cells`, `weights`, `balance`, `samples_per_epoch`: a subset of cells,
      or draws with replacement by weight or balancing the classes of
      categorical obs columns (see `Dataset.batches`); every rank still
      yields as many batches.
    * `normalize`, `log1p`: float32 values as `Dataset.read` computes them.
    * `tokenizer` (`deltacells.tokenize.Geneformer` or `ScGPT`): instead of
      `"X"`, the batch holds the tokenizer's `input_ids`, `attention_mask`
      (and scGPT's `values`) as `[batch, max_len]` tensors.
    * `rank`/`world_size`: default from `torch.distributed` when initialised
      (as under `torchrun` or a Lightning `Trainer`), read when iterating.
    * `prefetch`: batches decoded ahead by the engine, per worker.
    * `threads`: engine decode threads per process (default: the cores
      divided among the DataLoader workers; all of them with `num_workers=0`).

    `Dataset.batches` gives the same batches without torch. Call
    `set_epoch(epoch)` before each epoch (in a Lightning module, from
    `on_train_epoch_start`): the order of an epoch depends on `(seed, epoch)`;
    a DataLoader's persistent workers follow it. `state_dict`/`load_state_dict`
    resume an epoch at a batch boundary, with the same world size and loader
    workers or with others (a state taken at an epoch's end starts the next
    one). Call both before iterating the loader: workers already running
    when either is called refuse to go on rather than serve part of a pass
    from another epoch.
    """

    def __init__(self, dataset: "Union[str, os.PathLike[str], Dataset]", batch_size: int = 256,
                 shuffle: str = "block", window_tiles: int = 4, seed: int = 0,
                 genes: Any = None, obs_columns: "Union[str, Sequence[str], None]" = (),
                 output: str = "csr", dtype: Any = "float32", drop_last: bool = False,
                 prefetch: int = 2, rank: Optional[int] = None,
                 world_size: Optional[int] = None, threads: Optional[int] = None,
                 cache_bytes: int = 1 << 30,
                 obs_cache_dir: "Union[str, os.PathLike[str], None]" = None,
                 cells: Any = None, weights: Any = None,
                 balance: "Union[str, Sequence[str], None]" = None,
                 samples_per_epoch: Optional[int] = None, normalize: Optional[float] = None,
                 log1p: bool = False, tokenizer: Any = None, missing: str = "error"):
        super().__init__()
        if shuffle not in SHUFFLES:
            raise InputError(f"shuffle must be one of {SHUFFLES}, not {shuffle!r}")
        if output not in _OUTPUTS:
            raise InputError(f"output must be one of {_OUTPUTS}, not {output!r}")
        if missing not in MISSING:
            raise InputError(f"missing must be one of {MISSING}, not {missing!r}")
        if rank is None and world_size is None:
            self._world: Optional["tuple[int, int]"] = None
        elif rank is None or world_size is None:
            raise InputError("give both rank and world_size, or neither")
        else:
            self._world = rank_in_world(rank, world_size)
        if isinstance(dataset, Dataset):
            self.location = dataset.location
            self._given: Optional[Dataset] = dataset
        else:
            self.location = os.fspath(dataset)
            self._given = None
        self._given_pid = os.getpid()
        self.batch_size = unsigned("batch_size", batch_size, least=1)
        self.shuffle = shuffle
        self.window_tiles = unsigned("window_tiles", window_tiles, least=1)
        self.seed = unsigned("seed", seed)
        self.genes = None if genes is None else list(genes) if not isinstance(genes, str) else [genes]
        self.missing = missing
        self.obs_columns = column_names("obs_columns", obs_columns)
        self.output = output
        self.dtype = dtype_name(dtype)
        self.drop_last = bool(drop_last)
        self.prefetch = unsigned("prefetch", prefetch)
        self.threads = None if threads is None else unsigned("threads", threads, least=1)
        self.cache_bytes = unsigned("cache_bytes", cache_bytes)
        self.obs_cache_dir = None if obs_cache_dir is None else os.fspath(obs_cache_dir)
        # A boolean Series stays one: the dataset lines it up by its index.
        self.cells = cells if cells is None or _is_series(cells) else np.asarray(cells)
        # Checked here, where the mistake was made, rather than at the first
        # batch; the weights' length and the balance columns wait for it.
        draws = draw_settings(weights, balance, samples_per_epoch, normalize, tokenizer)
        tokenizer_alone(tokenizer, genes, normalize, log1p, output == "dense")
        if (draws["normalize"] is not None or log1p) and tokenizer is None \
                and self.dtype != "float32":
            raise InputError("normalized or log1p batches hold float32 values: "
                             f"ask for dtype float32, not {self.dtype}")
        self.weights = draws["weights"]
        self.balance = draws["balance"] or None
        self.samples_per_epoch = draws["samples_per_epoch"]
        self.normalize = draws["normalize"]
        self.log1p = bool(log1p)
        self.tokenizer = tokenizer
        self.epoch = 0
        self._resume: Optional[_Resume] = None  # the state this epoch's next pass resumes
        self._position = 0  # batches this pass's in-process iteration delivered
        # Persistent DataLoader workers keep the copy of this object they
        # started with: what set_epoch and load_state_dict change reaches
        # them through shared memory, `[epochs set, states loaded, epoch]`,
        # and `_seen` is what this copy has taken of it.
        self._sync = torch.zeros(3, dtype=torch.int64).share_memory_()
        self._seen = (0, 0)
        self._dataset: Optional[Dataset] = None
        self._digest: Optional[str] = None  # `_selection`, computed once
        self._dataset_pid: Optional[int] = None

    # -- process-local engine ---------------------------------------------------

    def _open(self, workers: int) -> Dataset:
        # A dataset inherited through fork reopens itself, but sized for the
        # parent: open one for this process, its threads shared among workers.
        if self._dataset is None or self._dataset_pid != os.getpid():
            if self._dataset is not None:
                _INHERITED.append(self._dataset)
            if self._given is not None and self._given_pid == os.getpid():
                self._dataset = self._given
            else:
                threads = self.threads or max(1, (os.cpu_count() or 1) // max(1, workers))
                if self._given is not None:
                    self._dataset = self._given._reopened(threads=threads, pin=False)
                else:
                    self._dataset = open_location(self.location, threads=threads, pin=False)
            self._dataset_pid = os.getpid()
        return self._dataset

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_dataset"] = None  # each process opens its own
        state["_dataset_pid"] = None
        # Spawned workers have no process group: resolve the rank here.
        state["_world"] = self.rank_world()
        return state

    # -- distribution -----------------------------------------------------------

    def rank_world(self) -> "tuple[int, int]":
        """`(rank, world_size)`: as given, else from `torch.distributed`, else `(0, 1)`."""
        if self._world is not None:
            return self._world
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return 0, 1

    def __len__(self) -> int:
        """Batches per rank of a whole epoch (the same on every rank)."""
        return len(self._batches(self._open(1), prefetch=0, obs_columns=[]))

    def _batches(self, ds: Dataset, prefetch: int, obs_columns: Optional[Sequence[str]],
                 delivered: "Sequence[tuple[int, int]]" = (), ahead: bool = False) -> Batches:
        rank, world = self.rank_world()
        return ds.batches(
            self.batch_size, shuffle=self.shuffle, seed=self.seed, epoch=self.epoch,
            window_tiles=self.window_tiles, genes=self.genes, obs_columns=obs_columns,
            format="numpy" if self.output == "dense" else "torch", dtype=self.dtype,
            drop_last=self.drop_last, rank=rank, world_size=world, prefetch=prefetch,
            cache_bytes=self.cache_bytes, obs_cache_dir=self.obs_cache_dir,
            delivered=delivered, cells=self.cells, weights=self.weights, balance=self.balance,
            samples_per_epoch=self.samples_per_epoch, normalize=self.normalize,
            log1p=self.log1p, tokenizer=self.tokenizer, missing=self.missing,
            next_epoch_ahead=ahead)

    def _selection(self) -> str:
        """A digest of what an epoch draws from (the subset's cell ids, the
        weights, the balance columns and the draws per epoch), so that a
        state is not resumed over other cells of the same count."""
        if self._digest is None:
            ds = self._open(1)
            h = hashlib.sha256()
            if self.cells is not None:
                h.update(np.unique(ds._cell_ids(self.cells)).astype("<u8").tobytes())
            h.update(b"|weights|")
            if self.weights is not None:
                h.update(np.asarray(self.weights, dtype="<f8").tobytes())
            h.update(repr((self.balance, self.samples_per_epoch)).encode())
            self._digest = h.hexdigest()[:16]
        return self._digest

    def _epoch_cells(self) -> int:
        """The cells an epoch serves: the subset's, the draws, or every cell."""
        return self._batches(self._open(1), prefetch=0, obs_columns=[]).epoch_cells

    # -- epochs and resuming -----------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch `epoch` (a different order per epoch) from its first
        batch, in this process and in a DataLoader's persistent workers.
        Right after `load_state_dict`, the epoch the state resumes keeps its
        resume (the loop that calls `set_epoch` before every epoch goes on
        where the state was taken); any other epoch starts afresh."""
        epoch = unsigned("epoch", epoch)
        if self._resume is not None and self._position == 0 and epoch == self.epoch:
            return
        self.epoch = epoch
        self._resume = None
        self._position = 0
        self._publish(sets=1)

    def _publish(self, sets: int = 0, loads: int = 0) -> None:
        """Tells the workers this object was copied into that the epoch was
        set (`sets`) or a state loaded (`loads`), and the epoch now."""
        sync = self._sync
        sync[0] += sets
        sync[1] += loads
        # The epoch's 64 bits, as an int64 holds them.
        sync[2] = self.epoch - (1 << 64) if self.epoch >= 1 << 63 else self.epoch
        self._seen = (int(sync[0]), int(sync[1]))

    def _changed(self, loads: int, epoch: int) -> None:
        """In a worker, before each batch: refuses to go on when the main
        process loaded a state, or set another epoch, after this pass began
        (its other workers, started later, would serve the new one: cells of
        two epochs, some twice, some never)."""
        if int(self._sync[1]) != loads or int(self._sync[2]) % (1 << 64) != epoch:
            raise InputError(
                "set_epoch or load_state_dict was called after the DataLoader's workers had "
                "started this pass: call them before iterating the loader (or make it anew)")

    def _follow(self) -> None:
        """In a worker: takes an epoch the main process set since this copy
        was made. A state loaded since then cannot be taken (the workers run
        on their own copies): refused rather than silently not resumed."""
        sets, loads = int(self._sync[0]), int(self._sync[1])
        if loads != self._seen[1]:
            raise InputError(
                "load_state_dict was called after the DataLoader's persistent workers "
                "started, and they keep the state they started with: load the state "
                "before the loader first iterates, or make a new DataLoader after it")
        if sets != self._seen[0]:
            self.epoch = int(self._sync[2]) % (1 << 64)
            self._resume = None
            self._position = 0
            self._seen = (sets, loads)

    def _order(self) -> str:
        """The epoch order's shuffle as states record it ("block:4", "random", "none")."""
        return f"block:{self.window_tiles}" if self.shuffle == "block" else self.shuffle

    def _pass(self, workers: int) -> "tuple[list[tuple[int, int]], int]":
        """`(delivered, start)` of this epoch's next pass with `workers`
        loader workers: the epoch positions it leaves out, and the loader
        position it starts at. The job a resumed state was taken from goes on
        exactly when this one has its shape; otherwise this job starts
        afresh over what that one left."""
        r = self._resume
        if r is None:
            return [], 0
        if r.next_batch == 0 or r.shape == (self.rank_world()[1], workers, self.drop_last):
            return r.delivered_before, r.next_batch
        world, old_workers, drop_last = r.shape
        after = _deltacells.delivered_after(r.epoch_cells, r.delivered_before, world,
                                            old_workers, self.batch_size, drop_last, r.next_batch)
        return after, 0

    def state_dict(self, consumed: Optional[int] = None,
                   num_workers: Optional[int] = None) -> dict:
        """Where the epoch stands, for `load_state_dict` to resume it at a
        batch boundary, with this job's world size and loader workers or others.

        Iterating in this process (`num_workers=0`) tracks the position
        itself. With DataLoader workers the batches are produced in other
        processes: pass `consumed`, the number of batches the loop took from
        the loader since it was (re)started, and the loader's `num_workers`
        (the order batches arrive in depends on it).

        The state describes the whole job, not only this rank: DDP ranks step
        in lockstep, so each has taken as many batches, and the job's shape
        says which batches those were on every rank. So every rank of the
        resuming job may load rank 0's state. It is a dict of plain numbers:

        * `seed`, `epoch`, `shuffle` ("block:N", "random" or "none"),
          `epoch_cells` and `selection` (a digest of the cells, weights and
          balance the epoch draws from): the epoch order. *Epoch positions* below are places
          in that order (position `i` is the epoch's `i`-th cell), not cell ids;
        * `world` (`[rank, world_size]`), `num_workers`, `batch_size`,
          `drop_last`: the shape of the job that took the state;
        * `delivered_before`: the epoch positions the jobs before this one
          delivered (empty when this job started the epoch), as sorted
          disjoint `[start, stop]` pairs;
        * `next_batch`: the batches per rank this job has delivered, in its
          loader's order (one batch from each worker's contiguous span in turn).

        A job resumed with the state's world size, `num_workers` and
        `drop_last` goes on exactly: the batches the stopped job had left, in
        its order. With any other, the positions the stopped job delivered
        (each rank's first `next_batch` batches in its loader's order) join
        `delivered_before`, and the new job's ranks share the rest of the
        epoch, in epoch order, as they would a whole epoch of that many
        cells: equal batch counts per rank, `drop_last` dropping the end of
        the rest. Its own states then record that union as their
        `delivered_before`, so resumes compose. Over the epoch every cell
        comes exactly once; when the job that finishes it drops its last
        cells, fewer than `world_size * batch_size` of them never come.
        """
        if consumed is None:
            workers, taken = 1, self._position
        else:
            if num_workers is None:
                raise InputError("state_dict(consumed=...) needs the loader's num_workers too")
            workers = max(1, unsigned("num_workers", num_workers))
            taken = unsigned("consumed", consumed)
        delivered, start = self._pass(workers)
        return {"seed": self.seed, "epoch": self.epoch, "shuffle": self._order(),
                "epoch_cells": self._epoch_cells(), "selection": self._selection(),
                "batch_size": self.batch_size,
                "drop_last": self.drop_last, "world": list(self.rank_world()),
                "num_workers": workers, "delivered_before": [list(r) for r in delivered],
                "next_batch": start + taken}

    def load_state_dict(self, state: dict) -> None:
        """Resumes where `state` (from `state_dict`, of any rank) was taken:
        the next pass yields the rest of that epoch, as `state_dict` says, or,
        when nothing of it is left for this job (a checkpoint at an epoch's
        end), the next epoch from its start. A state of another batch size,
        shuffle, number of cells or selection of them (other `cells`,
        `weights` or `balance`) is refused, as is anything that is not such
        a state."""
        try:
            self._load(state)
        except InputError:
            raise
        except (AttributeError, KeyError, IndexError, TypeError, ValueError,
                OverflowError) as e:
            raise InputError(f"not a CellDataset state: {type(e).__name__}: {e}") from e

    def _load(self, state: dict) -> None:
        """`load_state_dict` of a state that may lack keys or hold values of
        other types (which raise as Python does)."""
        if state.get("batch_size", self.batch_size) != self.batch_size:
            raise InputError("the state was saved with another batch_size")
        if state.get("shuffle", self._order()) != self._order():
            raise InputError(f"the state was saved with shuffle {state['shuffle']!r}, "
                             f"this dataset has {self._order()!r}")
        cells = self._epoch_cells()
        if state.get("epoch_cells", cells) != cells:
            raise InputError(f"the state was saved over an epoch of {state['epoch_cells']} "
                             f"cells; this one has {cells}")
        if state.get("selection", self._selection()) != self._selection():
            raise InputError("the state was saved over another selection of cells (cells, "
                             "weights or balance differ): its epoch positions name other cells")
        resume = _Resume(
            epoch_cells=cells,
            delivered_before=[(int(a), int(b)) for a, b in state.get("delivered_before", [])],
            next_batch=int(state["next_batch"]),
            shape=(int(state["world"][1]), max(1, int(state.get("num_workers", 1))),
                   bool(state.get("drop_last", self.drop_last))))
        # Refuses malformed ranges, and more batches than the job had.
        world, workers, drop_last = resume.shape
        after = _deltacells.delivered_after(cells, resume.delivered_before, world, workers,
                                            self.batch_size, drop_last, resume.next_batch)
        seed, epoch = unsigned("seed", state["seed"]), unsigned("epoch", state["epoch"])
        # A state taken at the end of its epoch (a checkpoint at an epoch's
        # end) resumes at the next epoch's start: a loop that creates its
        # loader's iterator before it calls set_epoch (Lightning restarting
        # from such a checkpoint) has its workers start on that epoch.
        left = cells - sum(b - a for a, b in after)
        if epoch < 2**64 - 1 and (
                left == 0 or (self.drop_last and left < self.rank_world()[1] * self.batch_size)):
            epoch, resume = epoch + 1, None
        self.seed, self.epoch = seed, epoch
        self._resume = resume
        self._position = 0
        self._publish(loads=1)

    def categories(self, column: str) -> Optional[list]:
        """The vocabulary of a category obs column (see `Dataset.categories`)."""
        return self._open(1).categories(column)

    # -- iteration ----------------------------------------------------------------

    def __iter__(self) -> Iterator[dict]:
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        if info is not None:
            self._follow()
            loads = self._seen[1]
        delivered, start = self._pass(workers)
        # The next epoch's first window is built while this one's last is
        # used: the loop does not wait for it at the start of the next.
        batches = self._batches(self._open(workers), self.prefetch, self.obs_columns, delivered,
                                ahead=self.prefetch > 0)
        if info is None:
            self._position = 0
        for taken, batch in enumerate(batches.for_worker(worker, workers, start)):
            if info is not None:
                self._changed(loads, self.epoch)
            X = batch.X
            if isinstance(X, dict):
                out = {k: torch.from_numpy(v) for k, v in X.items()}
            else:
                out = {"X": torch.from_numpy(X) if isinstance(X, np.ndarray) else X}
            out["cells"] = torch.from_numpy(batch.cells)
            for name, values in batch.obs.items():
                for key, value in _labels(name, values).items():
                    if key in out:
                        raise InputError(f"obs column {name!r} gives the batch entry {key!r}, "
                                         "which the batch already has")
                    out[key] = value
            if info is None:
                self._position = taken + 1
            yield out


def _labels(name: str, values: Any) -> "dict[str, Any]":
    """Obs column `name` of a batch (pandas-ready values, see `Batch.obs`) as
    the batch's entries (see `obs_columns` in `CellDataset`). A batch without
    missing values gets plain numpy arrays, one with them pandas' nullable
    arrays; both give the same entries and dtypes here, so that the batches
    of an epoch agree however their values fall."""
    import pandas as pd

    if isinstance(values, pd.Categorical):
        return {name: torch.from_numpy(values.codes.astype(np.int64))}
    if isinstance(values, (pd.arrays.BooleanArray, pd.arrays.IntegerArray)):
        data = values.to_numpy(dtype=values.dtype.numpy_dtype, na_value=0)
        missing = values.isna()
    elif values.dtype == object:
        return {name: list(values)}
    elif values.dtype.kind in "biu":
        data, missing = values, np.zeros(len(values), dtype=bool)
    else:
        return {name: torch.from_numpy(values)}  # floats: missing values are NaN
    return {name: torch.from_numpy(data), f"{name}_missing": torch.from_numpy(missing)}


__all__ = ["CellDataset"]

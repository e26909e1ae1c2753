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

import os
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data

from ._batches import Batches
from ._corpus import open_location
from ._dataset import _INHERITED, SHUFFLES, Dataset
from ._formats import dtype_name
from .errors import InputError

_OUTPUTS = ("csr", "dense")


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
      otherwise the columns follow the dataset's `var_names`.
    * `obs_columns`: obs columns returned with every batch: category codes as
      int64 (`-1` missing; `categories(name)` gives the vocabulary), numbers
      and booleans as tensors (missing numbers as NaN), strings as lists.
    * `output`: "csr" (`torch.sparse_csr_tensor`, values not copied) or
      "dense" rows; `dtype`: float32 or int32 (exact counts).
    * `rank`/`world_size`: default from `torch.distributed` when initialised
      (as under `torchrun` or a Lightning `Trainer`), read when iterating.
    * `prefetch`: batches decoded ahead by the engine, per worker.
    * `threads`: engine decode threads per process (default: the cores
      divided among the DataLoader workers; all of them with `num_workers=0`).

    `Dataset.batches` gives the same batches without torch. Call
    `set_epoch(epoch)` before each epoch (in a Lightning module, from
    `on_train_epoch_start`): the order of an epoch depends on `(seed, epoch)`.
    """

    def __init__(self, dataset: "Union[str, os.PathLike[str], Dataset]", batch_size: int = 256,
                 shuffle: str = "block", window_tiles: int = 4, seed: int = 0,
                 genes: Any = None, obs_columns: "Union[str, Sequence[str]]" = (),
                 output: str = "csr", dtype: Any = "float32", drop_last: bool = False,
                 prefetch: int = 2, rank: Optional[int] = None,
                 world_size: Optional[int] = None, threads: Optional[int] = None,
                 cache_bytes: int = 512 << 20,
                 obs_cache_dir: "Union[str, os.PathLike[str], None]" = None):
        super().__init__()
        if shuffle not in SHUFFLES:
            raise InputError(f"shuffle must be one of {SHUFFLES}, not {shuffle!r}")
        if output not in _OUTPUTS:
            raise InputError(f"output must be one of {_OUTPUTS}, not {output!r}")
        if batch_size < 1:
            raise InputError("batch_size must be at least 1")
        if rank is None and world_size is None:
            self._world: Optional["tuple[int, int]"] = None
        elif rank is None or world_size is None:
            raise InputError("give both rank and world_size, or neither")
        elif not 0 <= rank < world_size:
            raise InputError(f"rank {rank} is outside 0..{world_size}")
        else:
            self._world = (int(rank), int(world_size))
        if isinstance(dataset, Dataset):
            self.location = dataset.location
            self._given: Optional[Dataset] = dataset
        else:
            self.location = os.fspath(dataset)
            self._given = None
        self._given_pid = os.getpid()
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.window_tiles = int(window_tiles)
        self.seed = int(seed)
        self.genes = None if genes is None else list(genes) if not isinstance(genes, str) else [genes]
        self.obs_columns = [obs_columns] if isinstance(obs_columns, str) else list(obs_columns)
        self.output = output
        self.dtype = dtype_name(dtype)
        self.drop_last = bool(drop_last)
        self.prefetch = int(prefetch)
        self.threads = threads
        self.cache_bytes = int(cache_bytes)
        self.obs_cache_dir = None if obs_cache_dir is None else os.fspath(obs_cache_dir)
        self.epoch = 0
        self._start = 0  # delivered position this epoch's next pass resumes at
        self._start_workers: Optional[int] = None  # loader workers of the pass that position counts
        self._position = 0  # next batch, as seen by in-process iteration
        self._dataset: Optional[Dataset] = None
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
        """Batches per rank per epoch (the same on every rank)."""
        return len(self._batches(self._open(1), prefetch=0, obs_columns=[]))

    def _batches(self, ds: Dataset, prefetch: int, obs_columns: Sequence[str]) -> Batches:
        rank, world = self.rank_world()
        return ds.batches(
            self.batch_size, shuffle=self.shuffle, seed=self.seed, epoch=self.epoch,
            window_tiles=self.window_tiles, genes=self.genes, obs_columns=obs_columns,
            format="numpy" if self.output == "dense" else "torch", dtype=self.dtype,
            drop_last=self.drop_last, rank=rank, world_size=world, prefetch=prefetch,
            cache_bytes=self.cache_bytes, obs_cache_dir=self.obs_cache_dir)

    # -- epochs and resuming -----------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch `epoch` (a different order per epoch) from its first batch."""
        self.epoch = int(epoch)
        self._start = 0
        self._start_workers = None
        self._position = 0

    def state_dict(self, consumed: Optional[int] = None,
                   num_workers: Optional[int] = None) -> dict:
        """Where the epoch stands, to resume at a batch boundary.

        Iterating in this process (`num_workers=0`) tracks the position
        itself. With DataLoader workers the batches are produced in other
        processes: pass `consumed`, the number of batches the loop took from
        the loader since it was (re)started, and the loader's `num_workers`
        (the order batches arrive in depends on it; resume with the same).
        """
        if consumed is None:
            position, workers = self._position, 1
        else:
            if num_workers is None:
                raise InputError("state_dict(consumed=...) needs the loader's num_workers too")
            position, workers = self._start + int(consumed), max(1, int(num_workers))
            if self._start_workers not in (None, workers):
                raise InputError(f"this pass resumed a state of {self._start_workers} "
                                 f"loader workers, not {workers}")
        return {"seed": self.seed, "epoch": self.epoch, "next_batch": position,
                "num_workers": workers, "batch_size": self.batch_size,
                "world": list(self.rank_world())}

    def load_state_dict(self, state: dict) -> None:
        """Resumes where `state` was taken: the next iteration, with the same
        number of loader workers, yields the rest of that epoch exactly."""
        if state.get("batch_size", self.batch_size) != self.batch_size:
            raise InputError("the state was saved with another batch_size")
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self._start = int(state["next_batch"])
        self._start_workers = int(state.get("num_workers", 1)) if self._start else None
        self._position = self._start

    def categories(self, column: str) -> Optional[list]:
        """The vocabulary of a category obs column (see `Dataset.categories`)."""
        return self._open(1).categories(column)

    # -- iteration ----------------------------------------------------------------

    def __iter__(self) -> Iterator[dict]:
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        if self._start_workers not in (None, workers):
            raise InputError(f"the epoch resumes a state taken with {self._start_workers} "
                             f"loader workers; iterate with as many (this has {workers})")
        batches = self._batches(self._open(workers), self.prefetch, self.obs_columns)
        for delivered, batch in enumerate(batches.for_worker(worker, workers, self._start)):
            X = batch.X
            out = {"X": torch.from_numpy(X) if isinstance(X, np.ndarray) else X,
                   "cells": torch.from_numpy(batch.cells)}
            for name, values in batch.obs.items():
                out[name] = _label(values)
            if info is None:
                self._position = self._start + delivered + 1
            yield out


def _label(values: Any) -> Any:
    """An obs column of a batch (pandas-ready values, see `Batch.obs`) as a
    tensor: category codes as int64, missing numbers as NaN; strings as a list."""
    import pandas as pd

    if isinstance(values, pd.Categorical):
        return torch.from_numpy(values.codes.astype(np.int64))
    if isinstance(values, pd.arrays.BooleanArray):
        return torch.from_numpy(values.to_numpy(dtype=bool, na_value=False))
    if isinstance(values, pd.arrays.IntegerArray):
        wide = values.dtype.numpy_dtype.itemsize > 4
        return torch.from_numpy(values.to_numpy(dtype=np.float64 if wide else np.float32,
                                                na_value=np.nan))
    if values.dtype == object:
        return list(values)
    return torch.from_numpy(values)


__all__ = ["CellDataset"]

"""Types of the `deltacells._deltacells` extension module (the Rust engine).

The package's Python modules are the API; this module keeps to plain types
and numpy arrays. A CSR read is `(indptr int64, indices int32, data, n_cols)`;
an obs or var column is `(kind, values, mask, categories)` (see
`deltacells._tables`).
"""

from os import PathLike
from typing import (Dict, Iterator, List, Optional, Protocol, Sequence, Tuple, TypedDict, Union,
                    final)

import numpy as np
import numpy.typing as npt
from typing_extensions import Unpack

__all__ = ["Dataset", "Corpus", "BatchIter", "RankShare", "Tokenizer", "Writer", "BuildDriver",
           "delivered_after", "build_stats", "build_task",
           "gene_stats", "gene_stats_part", "read_transformed",
           "__version__", "DEFAULT_TILE_SIZE", "DEFAULT_CHUNKS", "DEFAULT_LEVEL",
           "DEFAULT_TILES_PER_TASK", "kernel_backend"]

__version__: str
DEFAULT_TILE_SIZE: int
DEFAULT_CHUNKS: int
DEFAULT_LEVEL: int
DEFAULT_TILES_PER_TASK: int
kernel_backend: str

_CsrParts = Tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], np.ndarray, int]
_Column = Tuple[str, Union[np.ndarray, List[Optional[str]]], Optional[npt.NDArray[np.bool_]],
               Optional[List[str]]]
_Rows = Union[Tuple[str, npt.NDArray[np.int64], npt.NDArray[np.int32], np.ndarray, int],
             Tuple[str, np.ndarray], Tuple[str, Dict[str, np.ndarray]]]
_BatchTuple = Tuple[int, npt.NDArray[np.int64], _Rows, List[Tuple[str, _Column]]]
# The settings `batches` takes by name, every one of them (see deltacells._dataset).
_BatchOptions = TypedDict("_BatchOptions", {
    "batch_size": int, "seed": int, "epoch": int, "shuffle": str, "window_tiles": int,
    "rank": int, "world_size": int, "drop_last": bool, "prefetch": int, "cache_bytes": int,
    "genes": Optional[npt.NDArray[np.int64]], "dense": bool, "obs_columns": Sequence[str],
    "obs_cache_dir": Union[str, PathLike[str], None], "dtype": str,
    "delivered": Sequence[Tuple[int, int]], "cells": Optional[npt.NDArray[np.uint64]],
    "weights": Optional[npt.NDArray[np.float64]], "balance": Sequence[str],
    "samples_per_epoch": Optional[int], "normalize": Optional[float], "log1p": bool,
    "tokenizer": Optional["Tokenizer"], "next_epoch_ahead": bool})

# A token map or gene medians: a dict, or the path of a two-column file.
_Map = Union[Dict[str, int], Dict[str, float], str]

@final
class Tokenizer:
    @staticmethod
    def geneformer(tokens: _Map, medians: _Map, max_len: int, special_tokens: bool,
                   gene_key: Optional[str]) -> "Tokenizer": ...
    @staticmethod
    def scgpt(tokens: _Map, n_bins: int, max_len: int, log1p: bool, normalize: Optional[float],
              gene_key: Optional[str], seed: int, epoch: int) -> "Tokenizer": ...
    @property
    def max_len(self) -> int: ...

class _Matrix(Protocol):
    """What Dataset and Corpus share (one block of methods in the extension)."""
    @property
    def n_obs(self) -> int: ...
    @property
    def n_vars(self) -> int: ...
    @property
    def n_tiles(self) -> int: ...
    @property
    def limits(self) -> npt.NDArray[np.int64]: ...
    @property
    def obs_schema(self) -> List[Tuple[str, str, Optional[List[str]]]]: ...
    @property
    def engine(self) -> Tuple[int, bool, str]: ...
    # With a tokenizer: {"input_ids", "values" (scGPT), "attention_mask"}, each [cells, max_len].
    def read_cells(self, cells: npt.NDArray[np.int64],
                   genes: Optional[npt.NDArray[np.int64]] = None,
                   dtype: str = "float32",
                   tokenizer: Optional[Tokenizer] = None) -> Union[_CsrParts, Dict[str, np.ndarray]]: ...
    def read_range(self, start: int, stop: int, genes: Optional[npt.NDArray[np.int64]] = None,
                   dtype: str = "float32",
                   tokenizer: Optional[Tokenizer] = None) -> Union[_CsrParts, Dict[str, np.ndarray]]: ...
    def read_tile(self, tile: int, genes: Optional[npt.NDArray[np.int64]] = None,
                  dtype: str = "float32") -> _CsrParts: ...
    def obs_column(self, name: str, cells: Optional[npt.NDArray[np.int64]] = None) -> _Column: ...
    def batches(self, *, first: int = 0, count: Optional[int] = None,
                **options: Unpack[_BatchOptions]) -> BatchIter: ...

@final
class Dataset(_Matrix):
    def __new__(cls, location: str, threads: Optional[int] = None, pin: bool = False,
                cache_bytes: Optional[int] = None) -> "Dataset": ...
    @property
    def metadata(self) -> str: ...
    @property
    def var_names(self) -> Optional[List[str]]: ...
    @property
    def gene_order(self) -> Optional[npt.NDArray[np.int32]]: ...
    def var_table(self) -> Optional[Tuple[List[str], List[Tuple[str, _Column]], List[str]]]: ...
    def verify(self) -> Tuple[int, int, int, int]: ...

_Genes = Union[str, Sequence[str]]

@final
class Corpus(_Matrix):
    def __new__(cls, locations: Sequence[str], genes: Optional[_Genes] = None,
                gene_key: Optional[str] = None, source_column: Optional[str] = None,
                threads: Optional[int] = None, pin: bool = False,
                cache_bytes: Optional[int] = None) -> "Corpus": ...
    @staticmethod
    def open(path: Union[str, PathLike[str]], threads: Optional[int] = None, pin: bool = False,
             cache_bytes: Optional[int] = None) -> "Corpus": ...
    def save(self, path: Union[str, PathLike[str]]) -> None: ...
    @property
    def spec(self) -> Tuple[List[str], Tuple[Optional[str], Optional[List[str]]], Optional[str],
                            str]: ...
    @property
    def members(self) -> List[Tuple[str, str, int, int]]: ...
    @property
    def member_obs(self) -> List[Tuple[str, List[Tuple[str, str]]]]: ...
    @property
    def metadata(self) -> str: ...
    @property
    def var_names(self) -> List[str]: ...
    def verify(self) -> Tuple[int, int, int, int]: ...

@final
class BatchIter:
    def __iter__(self) -> Iterator[_BatchTuple]: ...
    def __next__(self) -> _BatchTuple: ...
    def __len__(self) -> int: ...

@final
class RankShare:
    def __new__(cls, n_obs: int, batch_size: int, rank: int, world_size: int,
                drop_last: bool, delivered: Sequence[Tuple[int, int]] = ...) -> "RankShare": ...
    def __len__(self) -> int: ...
    def worker_resume(self, worker: int, workers: int, delivered: int) -> Tuple[int, int]: ...

_ObsSpec = Tuple[str, str, object, Optional[npt.NDArray[np.bool_]], Optional[List[str]]]
_VarSpec = Tuple[str, List[str], List[_ObsSpec], List[str]]

@final
class Writer:
    def __new__(cls, out_dir: Union[str, PathLike[str]], n_vars: int, *, tile_size: int,
                n_chunks: int, level: int, gene_totals: Optional[Sequence[float]] = None,
                var_names: Optional[Sequence[str]] = None, obs: Sequence[_ObsSpec] = ...,
                var: Optional[_VarSpec] = None, metadata: Optional[str] = None) -> "Writer": ...
    def push(self, n_cols: int, indptr: npt.NDArray[np.int64], indices: npt.NDArray[np.int32],
             data: np.ndarray) -> None: ...
    def finish(self) -> Tuple[int, int]: ...
    def abort(self) -> None: ...

# A build's steps (see deltacells._build): statistics, plans and task reports cross as JSON text.
def delivered_after(n_obs: int, delivered: Sequence[Tuple[int, int]], world_size: int,
                    workers: int, batch_size: int, drop_last: bool,
                    consumed: int) -> List[Tuple[int, int]]: ...
def build_stats(input: str, index: int, out: str, options_json: str) -> str: ...
def build_task(plan_json: str, task: int) -> Tuple[str, bool]: ...
def read_transformed(source: Union[Dataset, Corpus], start: int, stop: int, cells: Optional[npt.NDArray[np.int64]] = None,
                     genes: Optional[npt.NDArray[np.int64]] = None, normalize: Optional[float] = None,
                     log1p: bool = False, dense: bool = False,
                     dtype: str = "float32") -> Union[_CsrParts, Tuple[np.ndarray, int, int]]: ...
def gene_stats(dataset: Dataset, gene_key: Optional[str] = None,
               parts: Optional[Sequence[bytes]] = None) -> Tuple[str, List[str], List[Tuple[str, np.ndarray]]]: ...
def gene_stats_part(dataset: Dataset, start: int, stop: int) -> bytes: ...
def corpus_gene_stats(corpus: Corpus, parts: Optional[Sequence[Sequence[bytes]]] = None
                      ) -> Tuple[str, List[str], List[Tuple[str, np.ndarray]]]: ...

@final
class BuildDriver:
    def __new__(cls, out: str) -> "BuildDriver": ...
    def plan(self, stats: Sequence[str], options_json: str) -> Tuple[str, int]: ...
    def commit(self, plan_json: str, reports: Sequence[str]) -> str: ...
    def close(self) -> None: ...

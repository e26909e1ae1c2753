"""Types of the `deltacells._deltacells` extension module (the Rust engine).

The package's Python modules are the API; this module keeps to plain types
and numpy arrays. A CSR read is `(indptr int64, indices int32, data, n_cols)`;
an obs or var column is `(kind, values, mask, categories)` (see
`deltacells._tables`).
"""

from os import PathLike
from typing import Iterator, List, Optional, Sequence, Tuple, Union, final

import numpy as np
import numpy.typing as npt

__all__ = ["Dataset", "BatchIter", "RankShare", "Writer", "__version__", "DEFAULT_TILE_SIZE", "DEFAULT_CHUNKS",
           "DEFAULT_LEVEL", "kernel_backend"]

__version__: str
DEFAULT_TILE_SIZE: int
DEFAULT_CHUNKS: int
DEFAULT_LEVEL: int
kernel_backend: str

_CsrParts = Tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], np.ndarray, int]
_Column = Tuple[str, Union[np.ndarray, List[Optional[str]]], Optional[npt.NDArray[np.bool_]],
               Optional[List[str]]]
_Rows = Union[Tuple[str, npt.NDArray[np.int64], npt.NDArray[np.int32], np.ndarray, int],
             Tuple[str, np.ndarray]]
_BatchTuple = Tuple[int, npt.NDArray[np.int64], _Rows, List[Tuple[str, _Column]]]

@final
class Dataset:
    def __new__(cls, location: str, threads: Optional[int] = None, pin: bool = False,
                cache_bytes: Optional[int] = None) -> "Dataset": ...
    @property
    def n_obs(self) -> int: ...
    @property
    def n_vars(self) -> int: ...
    @property
    def n_tiles(self) -> int: ...
    @property
    def limits(self) -> npt.NDArray[np.int64]: ...
    @property
    def metadata(self) -> str: ...
    @property
    def var_names(self) -> Optional[List[str]]: ...
    @property
    def gene_order(self) -> Optional[npt.NDArray[np.int32]]: ...
    @property
    def obs_schema(self) -> List[Tuple[str, str, Optional[List[str]]]]: ...
    @property
    def engine(self) -> Tuple[int, bool, str]: ...
    def read_cells(self, cells: npt.NDArray[np.int64],
                   genes: Optional[npt.NDArray[np.int64]] = None,
                   dtype: str = "float32") -> _CsrParts: ...
    def read_range(self, start: int, stop: int, genes: Optional[npt.NDArray[np.int64]] = None,
                   dtype: str = "float32") -> _CsrParts: ...
    def read_tile(self, tile: int, genes: Optional[npt.NDArray[np.int64]] = None,
                  dtype: str = "float32") -> _CsrParts: ...
    def obs_column(self, name: str, cells: Optional[npt.NDArray[np.int64]] = None) -> _Column: ...
    def var_table(self) -> Optional[Tuple[List[str], List[Tuple[str, _Column]]]]: ...
    def verify(self) -> Tuple[int, int, int, int]: ...
    def batches(self, *, batch_size: int, seed: int, epoch: int, shuffle: str,
                window_tiles: int, rank: int, world_size: int, drop_last: bool, prefetch: int,
                cache_bytes: int, genes: Optional[npt.NDArray[np.int64]] = None,
                dense: bool = False, obs_columns: Sequence[str] = ...,
                obs_cache_dir: Union[str, PathLike[str], None] = None, first: int = 0,
                count: Optional[int] = None, dtype: str = "float32") -> BatchIter: ...

@final
class BatchIter:
    def __iter__(self) -> Iterator[_BatchTuple]: ...
    def __next__(self) -> _BatchTuple: ...
    def __len__(self) -> int: ...

@final
class RankShare:
    def __new__(cls, n_obs: int, batch_size: int, rank: int, world_size: int,
                drop_last: bool) -> "RankShare": ...
    def __len__(self) -> int: ...
    def worker_resume(self, worker: int, workers: int, delivered: int) -> Tuple[int, int]: ...

_ObsSpec = Tuple[str, str, object, Optional[npt.NDArray[np.bool_]], Optional[List[str]]]
_VarSpec = Tuple[str, List[str], List[Tuple[str, bool, List[str]]]]

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

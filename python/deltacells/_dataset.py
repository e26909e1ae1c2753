"""The `Dataset` class: reads of any cells and genes, obs and var tables."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Optional, Sequence

import numpy as np

from . import _deltacells
from .errors import InputError

# Handles inherited through fork. A child never uses them (their decode
# threads did not survive the fork) and never drops them either: tearing a
# pool down talks to those threads. They are kept here for the child's life.
_INHERITED: list = []

_FORMATS = ("scipy", "numpy", "torch")


def _dtype_name(dtype) -> str:
    """"float32" or "int32" from a name, a numpy dtype or a torch dtype."""
    if isinstance(dtype, str):
        name = dtype
    elif type(dtype).__module__ == "torch":  # torch.float32, torch.int32
        name = str(dtype).replace("torch.", "")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = repr(dtype)
    if name not in ("float32", "int32"):
        raise InputError(f"dtype must be float32 or int32, not {dtype!r}")
    return name


class Dataset:
    """An open deltacells dataset.

    Reads release the GIL while the engine fetches and decodes, and hand the
    decoded buffers to numpy without copying them. The object pickles as its
    location and options, so it can be sent to DataLoader workers under any
    start method; each process opens its own engine on first use.
    """

    def __init__(self, location, *, threads: Optional[int] = None, pin: bool = False,
                 cache_bytes: Optional[int] = None):
        self._location = os.fspath(location)
        self._options = {"threads": threads, "pin": pin, "cache_bytes": cache_bytes}
        self._handle = None
        self._pid = None
        self._gene_index = None
        self._h  # open now: a bad location fails here, not at the first read

    # -- process-aware handle -------------------------------------------------

    @property
    def _h(self):
        if self._handle is not None and self._pid != os.getpid():
            _INHERITED.append(self._handle)
            self._handle = None
        if self._handle is None:
            self._handle = _deltacells.Dataset(self._location, **self._options)
            self._pid = os.getpid()
        return self._handle

    def __getstate__(self):
        return {"location": self._location, "options": self._options}

    def __setstate__(self, state):
        self._location = state["location"]
        self._options = state["options"]
        self._handle = None
        self._pid = None
        self._gene_index = None

    def __repr__(self) -> str:
        return f"deltacells.Dataset({self._location!r}, n_cells={self.n_cells}, n_genes={self.n_genes})"

    # -- shape and side tables ------------------------------------------------

    @property
    def location(self) -> str:
        return self._location

    @property
    def n_cells(self) -> int:
        return self._h.n_cells

    @property
    def n_genes(self) -> int:
        return self._h.n_genes

    @property
    def shape(self) -> tuple:
        return (self.n_cells, self.n_genes)

    def __len__(self) -> int:
        return self.n_cells

    @property
    def n_tiles(self) -> int:
        return self._h.n_tiles

    @property
    def tile_limits(self) -> np.ndarray:
        """First cell of every tile, then `n_cells`."""
        return self._h.limits

    @property
    def var_names(self) -> Optional[list]:
        """Gene names in column order (`var_names.txt`), or None."""
        return self._h.var_names

    @property
    def gene_order(self) -> Optional[np.ndarray]:
        """Column `j` was column `gene_order[j]` of the source, or None when unsorted."""
        return self._h.gene_order

    @property
    def obs_columns(self) -> list:
        """Names of the obs columns."""
        return [name for name, _, _ in self._h.obs_schema]

    @property
    def engine(self) -> dict:
        threads, pinned, backend = self._h.engine
        return {"threads": threads, "pinned": pinned, "kernel_backend": backend}

    # -- selections ------------------------------------------------------------

    def _cells(self, cells) -> "tuple[Optional[tuple], Optional[np.ndarray]]":
        """A request as `(range, None)` or `(None, ids)`."""
        n = self.n_cells
        if isinstance(cells, slice):
            start, stop, step = cells.indices(n)
            if step == 1:
                return (start, max(start, stop)), None
            return None, np.arange(start, stop, step, dtype=np.int64)
        if isinstance(cells, range):
            if cells.step == 1 and 0 <= cells.start <= cells.stop <= n:
                return (cells.start, cells.stop), None
            return None, np.asarray(cells, dtype=np.int64)
        if isinstance(cells, (int, np.integer)):
            c = int(cells)
            if c < 0:
                c += n
            return None, np.array([c], dtype=np.int64)
        a = np.asarray(cells)
        if a.dtype == np.bool_:
            if a.shape != (n,):
                raise InputError(f"a boolean cell mask needs {n} entries, not {a.shape}")
            return None, np.flatnonzero(a).astype(np.int64)
        if a.size == 0:
            return None, np.zeros(0, dtype=np.int64)
        if not np.issubdtype(a.dtype, np.integer) or a.ndim != 1:
            raise InputError("cells must be an int, a slice, a range or a 1-D array of ints")
        return None, np.ascontiguousarray(a, dtype=np.int64)

    def _genes(self, genes) -> Optional[np.ndarray]:
        """Gene selection as column indices, from indices or names."""
        if genes is None:
            return None
        if isinstance(genes, slice):
            return np.arange(self.n_genes, dtype=np.int64)[genes]
        if isinstance(genes, (str, int, np.integer)):
            genes = [genes]
        items = list(genes)
        if items and all(isinstance(g, str) for g in items):
            index = self._name_index()
            out = []
            for g in items:
                i = index.get(g)
                if i is None:
                    raise InputError(f"no gene named {g!r}")
                if i < 0:
                    raise InputError(f"gene name {g!r} appears more than once in var_names")
                out.append(i)
            return np.asarray(out, dtype=np.int64)
        a = np.asarray(items)
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise InputError("genes must be gene indices or gene names")
        return a.astype(np.int64).reshape(-1)

    def _name_index(self) -> dict:
        if self._gene_index is None:
            names = self.var_names
            if names is None:
                raise InputError("the dataset has no var_names: select genes by index")
            index: dict = {}
            for i, name in enumerate(names):
                index[name] = -1 if name in index else i
            self._gene_index = index
        return self._gene_index

    # -- reads -------------------------------------------------------------------

    def read(self, cells=slice(None), genes=None, format: str = "scipy", dtype=np.float32):
        """Rows of `cells` (ids in any order, duplicates allowed, a slice, a
        range or a boolean mask; order kept), keeping only `genes` (indices or
        names, in the order given) when given.

        `format`: "scipy" (a `scipy.sparse.csr_matrix` over the decoded
        buffers), "torch" (a `torch.sparse_csr_tensor`, values not copied) or
        "numpy" (a dense array). `dtype`: float32 or int32 (exact counts).
        """
        if format not in _FORMATS:
            raise InputError(f"format must be one of {_FORMATS}, not {format!r}")
        span, ids = self._cells(cells)
        g = self._genes(genes)
        dt = _dtype_name(dtype)
        if span is not None:
            parts = self._h.read_range(span[0], span[1], g, dt)
        else:
            parts = self._h.read_cells(ids, g, dt)
        return _convert(parts, format)

    def __getitem__(self, key):
        """`ds[cells]` or `ds[cells, genes]`, as scipy CSR float32."""
        if isinstance(key, tuple):
            if len(key) != 2:
                raise InputError("index with ds[cells] or ds[cells, genes]")
            return self.read(key[0], key[1])
        return self.read(key)

    def iter_tiles(self, genes=None, format: str = "scipy", dtype=np.float32,
                   prefetch: int = 1) -> Iterator:
        """Every tile's rows in order; the next `prefetch` tiles decode on the
        engine while the caller works on the current one."""
        if format not in _FORMATS:
            raise InputError(f"format must be one of {_FORMATS}, not {format!r}")
        g = self._genes(genes)
        dt = _dtype_name(dtype)
        h = self._h
        if prefetch <= 0:
            for t in range(h.n_tiles):
                yield _convert(h.read_tile(t, g, dt), format)
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="deltacells-tiles") as pool:
            pending = [pool.submit(h.read_tile, t, g, dt)
                       for t in range(min(prefetch, h.n_tiles))]
            for t in range(h.n_tiles):
                parts = pending.pop(0).result()
                if t + prefetch < h.n_tiles:
                    pending.append(pool.submit(h.read_tile, t + prefetch, g, dt))
                yield _convert(parts, format)

    def obs(self, columns=None, cells=None):
        """Obs columns for `cells` (default: every cell) as a pandas DataFrame
        indexed by cell id; categories come back as `pandas.Categorical`."""
        import pandas as pd

        names = self.obs_columns if columns is None else (
            [columns] if isinstance(columns, str) else list(columns))
        if cells is None:
            ids = None
            index = pd.RangeIndex(self.n_cells)
        else:
            span, ids = self._cells(cells)
            if span is not None:
                ids = np.arange(span[0], span[1], dtype=np.int64)
            index = pd.Index(ids, name=None)
        data = {name: _pandas_column(self._h.obs_column(name, ids)) for name in names}
        return pd.DataFrame(data, index=index)

    def var(self):
        """The gene table (`var.parquet`) as a DataFrame in column order; when
        the dataset has none, an empty frame indexed by `var_names`."""
        import pandas as pd

        table = self._h.var_table()
        if table is None:
            names = self.var_names
            return pd.DataFrame(index=pd.Index(names) if names is not None else pd.RangeIndex(self.n_genes))
        index_columns, columns = table
        df = pd.DataFrame({name: _pandas_column(col) for name, col in columns})
        if index_columns:
            df = df.set_index(index_columns)
            if df.index.name == "__index_level_0__":
                df.index.name = None
        return df

    def verify(self) -> dict:
        """Checks every tile (structure, CRC, full decode), the obs shards and
        side files; raises `FormatError` on the first problem."""
        tiles, cells, nonzeros, size = self._h.verify()
        return {"tiles": tiles, "cells": cells, "nonzeros": nonzeros, "bytes": size}


def _convert(parts, format: str):
    indptr, indices, data, n_cols = parts
    n_rows = len(indptr) - 1
    if format == "scipy":
        import scipy.sparse as sp

        return sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_cols), copy=False)
    if format == "torch":
        return _torch_csr(indptr, indices, data, n_cols)
    out = np.zeros((n_rows, n_cols), dtype=data.dtype)
    rows = np.repeat(np.arange(n_rows), np.diff(indptr))
    out[rows, indices] = data
    return out


def _torch_csr(indptr, indices, data, n_cols):
    """A `torch.sparse_csr_tensor` over the decoded arrays. torch wants row
    and column indices of one dtype: the row pointers (one per row) become
    int32 unless the nonzeros exceed int32's range."""
    import torch

    if len(indices) < 2**31:
        crow = torch.from_numpy(indptr.astype(np.int32))
        col = torch.from_numpy(indices)
    else:
        crow = torch.from_numpy(indptr)
        col = torch.from_numpy(indices.astype(np.int64))
    # The engine checked the structure while decoding; torch need not.
    return torch.sparse_csr_tensor(crow, col, torch.from_numpy(data),
                                   size=(len(indptr) - 1, int(n_cols)), check_invariants=False)


def _pandas_column(col):
    """A column from the engine (`kind, values, mask, categories`) as pandas values."""
    import pandas as pd

    kind, values, mask, categories = col
    if kind == "category":
        return pd.Categorical.from_codes(values, categories=categories)
    if kind == "string":
        return np.array(values, dtype=object)
    if mask is None:
        return values
    if kind == "bool":
        return pd.arrays.BooleanArray(values, mask)
    if np.issubdtype(values.dtype, np.integer):
        return pd.arrays.IntegerArray(values, mask)
    return pd.arrays.FloatingArray(values, mask)


__all__: Sequence[str] = ["Dataset"]

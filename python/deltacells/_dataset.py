"""The `Dataset` class: reads of any cells and genes, obs and var tables,
batches, and `to_anndata`."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Optional, Sequence, Tuple

import numpy as np

from . import _deltacells
from ._batches import Batches
from ._formats import FORMATS, check_format, convert, dtype_name
from ._settings import integer, positive, unsigned
from ._transform import read_transformed, vocabulary
from ._tables import (OBS_INDEX_IS_COLUMN_KEY, OBS_INDEX_KEY, VAR_INDEX_IS_COLUMN_KEY,
                      index_column, index_name, ordered_columns, pandas_column, range_names,
                      string_index, var_frame)
from .errors import FormatError, InputError
from .tokenize import Tokenizer

# Handles inherited through fork. A child never uses them (their decode
# threads did not survive the fork) and never drops them either: tearing a
# pool down talks to those threads. They are kept here for the child's life.
_INHERITED: list = []

#: The epoch orders of `Dataset.batches` and `CellDataset`.
SHUFFLES = ("block", "none", "random")

#: The formats `to_anndata` can put in `X`.
_ANNDATA_FORMATS = ("csr_matrix", "csr_array", "numpy")


def engine_options(threads: Optional[int], pin: bool, cache_bytes: Optional[int]) -> dict:
    """The options an engine is opened with, checked."""
    return {"threads": None if threads is None else unsigned("threads", threads, least=1),
            "pin": bool(pin),
            "cache_bytes": None if cache_bytes is None else unsigned("cache_bytes", cache_bytes)}


def from_end(ids: np.ndarray, n: int, what: str) -> np.ndarray:
    """Integer ids as int64 within `0..n`, a negative one counted from the end
    as numpy counts it (`-1` the last); one outside `-n..n` raises."""
    lo, hi = int(ids.min()), int(ids.max())
    if lo < -n or hi >= n:
        raise InputError(f"{what} {lo if lo < -n else hi} is outside 0..{n} "
                         f"(or -{n}..-1, counted from the end)")
    out = np.ascontiguousarray(ids, dtype=np.int64)
    return np.where(out < 0, out + n, out) if lo < 0 else out


def slice_indices(s: slice, n: int, what: str) -> "tuple[int, int, int]":
    """`s.indices(n)`, a step of 0 or ends that are not integers an
    `InputError` naming `what` (numpy's ValueError and TypeError before)."""
    try:
        return s.indices(n)
    except (TypeError, ValueError) as e:
        raise InputError(f"{what}: {s!r} is no slice of positions ({e})") from None


def named_part(n_obs: int, metadata: dict, schema: list,
               legacy: bool = True) -> "tuple[int, Optional[str], bool]":
    """A run of `n_obs` cells as `Dataset._parts` lists it, from the
    metadata that names its cell ids' column (`index_column`, whose column
    `cell_id` of older conversions is taken only where `legacy`)."""
    column = index_column(metadata, schema) if legacy or OBS_INDEX_KEY in metadata else None
    return n_obs, column, metadata.get(OBS_INDEX_IS_COLUMN_KEY) is True


def positions(name: str, ranges: Any) -> "list[tuple[int, int]]":
    """Epoch positions given as `(start, stop)` pairs of integers in
    `0..2**64`, as a list (the engine checks their order); anything else is
    an `InputError` naming the setting."""
    try:
        pairs = [tuple(r) for r in ranges]
    except TypeError:
        pairs = None
    if pairs is None or any(len(p) != 2 for p in pairs):
        raise InputError(f"{name} must be (start, stop) pairs of epoch positions, "
                         f"not {ranges!r}")
    return [(unsigned(name, a), unsigned(name, b)) for a, b in pairs]


def tokenizer_alone(tokenizer: Any, genes: Any, normalize: Any, log1p: Any, dense: bool) -> None:
    """Refuses a tokenizer with settings it cannot take (batches and
    `CellDataset` check it alike, the latter when it is made)."""
    if tokenizer is not None and (genes is not None or normalize is not None or log1p or dense):
        raise InputError("a tokenizer reads every gene of a row as counts: batches with a "
                         "tokenizer take no genes, normalize, log1p or dense format")


def rank_in_world(rank: Any, world_size: Any) -> "tuple[int, int]":
    """`(rank, world_size)` checked: integers, `rank` within `0..world_size`."""
    r, w = integer("rank", rank), unsigned("world_size", world_size, least=1)
    if not 0 <= r < w:
        raise InputError(f"rank {r} is outside 0..{w}")
    return r, w


def tokenizer_handle(tokenizer: Any) -> Optional[Any]:
    """The engine's handle of a `Geneformer` or `ScGPT` tokenizer (None for
    None); anything else is an `InputError`."""
    if tokenizer is None:
        return None
    if not isinstance(tokenizer, Tokenizer):
        raise InputError("tokenizer must be a deltacells.tokenize.Geneformer or ScGPT, "
                         f"not {tokenizer!r}")
    return tokenizer._t


def column_names(setting: str, columns: Any) -> Optional[list]:
    """Obs columns given as one name or a sequence of names, as a list; None
    (every column, as `read_obs` and `to_anndata` take it) stays None.
    Anything else, or a name given twice (a DataFrame, a batch's `obs` and
    balance classes each hold a column once), is an `InputError` naming the
    `setting`."""
    if columns is None:
        return None
    if isinstance(columns, str):
        return [columns]
    try:
        names = list(columns)
    except TypeError:
        names = None
    if names is None or not all(isinstance(c, str) for c in names):
        raise InputError(f"{setting} must be an obs column name, a list of them or None, "
                         f"not {columns!r}")
    twice = next((name for i, name in enumerate(names) if name in names[:i]), None)
    if twice is not None:
        raise InputError(f"{setting} names obs column {twice!r} twice")
    return names


def draw_settings(weights: Any, balance: Any, samples_per_epoch: Any,
                  normalize: Any, tokenizer: Any) -> dict:
    """The settings of `batches` that need no dataset to check (all but the
    weights' length and the balance columns' presence), checked, so that
    `CellDataset` refuses them when made rather than at its first batch;
    the tokenizer as the engine's handle."""
    w = None
    if weights is not None:
        try:
            w = np.ascontiguousarray(weights, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise InputError(f"weights must be numbers, one per cell: {e}") from e
        if w.ndim != 1:
            raise InputError(f"weights need one entry per cell, not shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise InputError("weights must be finite and at least 0")
        if not np.any(w > 0):
            raise InputError("every weight is 0: nothing can be drawn")
    columns = column_names("balance", balance)
    if columns is None:
        columns = []
    elif not columns:
        # Most likely a list that came out empty: balancing on nothing
        # would quietly draw without balance.
        raise InputError("balance names no obs column (give None for no balance)")
    if w is not None and columns:
        raise InputError("give weights or balance, not both")
    return {"tokenizer": tokenizer_handle(tokenizer), "weights": w, "balance": columns,
            "samples_per_epoch": None if samples_per_epoch is None
            else unsigned("samples_per_epoch", samples_per_epoch, least=1),
            "normalize": None if normalize is None else positive("normalize", normalize)}


def by_label(selection: Any, names: Any, what: str) -> Any:
    """A boolean pandas Series as the mask it means to pandas: its values
    lined up by its index with the names (`names()`, the obs or var names),
    as `df[series]` lines them up, so a mask made from a sorted or filtered
    frame selects the cells it names. A Series whose index is the default
    `0, 1, ...` is taken by position; one whose index names other labels is
    refused rather than read in its own order. Anything else is returned
    as given."""
    import pandas as pd

    if not isinstance(selection, pd.Series) or not pd.api.types.is_bool_dtype(selection.dtype):
        return selection
    if selection.isna().any():
        raise InputError(f"a boolean {what} mask holds missing values")
    index = selection.index
    if isinstance(index, pd.RangeIndex) and index.equals(pd.RangeIndex(len(index))):
        return selection.to_numpy(dtype=bool)
    labels = names()
    if index.equals(labels):
        return selection.to_numpy(dtype=bool)
    if len(index) != len(labels) or index.has_duplicates or not index.isin(labels).all():
        raise InputError(f"a boolean Series selects {what}s by its index, which must list each "
                         f"of the {len(labels)} {what} names once (or be 0, 1, ...); give "
                         f"`.to_numpy()` to select by position")
    return selection.reindex(labels).to_numpy(dtype=bool)


class Dataset:
    """An open deltacells dataset, named as scverse names an AnnData's parts.

    Rows are cells (`n_obs`, `obs_names`, `obs`) and columns genes (`n_vars`,
    `var_names`, `var`). The columns of every read follow `var_names`: the
    stored order, genes sorted by decreasing total count when the dataset was
    written with `sort_genes` (the default). Column `j` is column
    `gene_order[j]` of the source; `genes=np.argsort(ds.gene_order)` reads
    the columns back in the source's order.

    Reads release the GIL while the engine fetches and decodes, and hand the
    decoded buffers to numpy without copying them. The object pickles as its
    location and options, so it can be sent to DataLoader workers under any
    start method; each process opens its own engine on first use.
    """

    def __init__(self, location: "str | os.PathLike[str]", *, threads: Optional[int] = None,
                 pin: bool = False, cache_bytes: Optional[int] = None):
        self._location = os.fspath(location)
        self._options: dict = engine_options(threads, pin, cache_bytes)
        self._handle: Any = None
        self._pid: Optional[int] = None
        self._loaded: dict = {}
        self._h  # open now: a bad location fails here, not at the first read

    # -- process-aware handle -------------------------------------------------

    @property
    def _h(self) -> Any:
        if self._handle is not None and self._pid != os.getpid():
            _INHERITED.append(self._handle)
            self._handle = None
        if self._handle is None:
            self._handle = self._open_handle()
            self._pid = os.getpid()
        return self._handle

    def _open_handle(self) -> Any:
        """The engine's handle, opened in this process."""
        return _deltacells.Dataset(self._location, **self._options)

    def _reopened(self, **options: Any) -> "Dataset":
        """The same data opened anew (as another process does), with the open
        `options` (`threads`, `pin`, `cache_bytes`) changed."""
        state = self.__getstate__()
        state["options"] = {**state["options"], **options}
        new = object.__new__(type(self))
        new.__setstate__(state)
        return new

    def __getstate__(self) -> dict:
        return {"location": self._location, "options": self._options}

    def __setstate__(self, state: dict) -> None:
        self._location = state["location"]
        self._options = state["options"]
        self._handle = None
        self._pid = None
        self._loaded = {}

    def _once(self, key: str, load: Any) -> Any:
        """`load()`, computed on first use and kept."""
        if key not in self._loaded:
            self._loaded[key] = load()
        return self._loaded[key]

    def __repr__(self) -> str:
        return f"deltacells.Dataset({self._location!r}, n_obs={self.n_obs}, n_vars={self.n_vars})"

    # -- shape -------------------------------------------------------------------

    @property
    def location(self) -> str:
        """Where the dataset is, as it was opened."""
        return self._location

    @property
    def n_obs(self) -> int:
        """Number of cells (rows)."""
        return self._h.n_obs

    @property
    def n_vars(self) -> int:
        """Number of genes (columns)."""
        return self._h.n_vars

    @property
    def shape(self) -> Tuple[int, int]:
        """`(n_obs, n_vars)`."""
        return (self.n_obs, self.n_vars)

    def __len__(self) -> int:
        return self.n_obs

    @property
    def n_tiles(self) -> int:
        """Number of tiles (blocks of consecutive cells stored together)."""
        return self._h.n_tiles

    @property
    def tile_limits(self) -> np.ndarray:
        """First cell of every tile, then `n_obs`."""
        return self._h.limits

    @property
    def metadata(self) -> dict:
        """The manifest's free-form metadata."""
        return self._once("metadata", lambda: json.loads(self._h.metadata))

    @property
    def engine(self) -> dict:
        """The decode pool: `threads`, `pinned` and the `kernel_backend` in use."""
        threads, pinned, backend = self._h.engine
        return {"threads": threads, "pinned": pinned, "kernel_backend": backend}

    # -- names and side tables ---------------------------------------------------

    @property
    def var_names(self) -> Any:
        """Gene names in column order, a `pandas.Index` of strings
        (`var_names.txt`; "0", "1", ... when the dataset has none)."""
        def load() -> Any:
            names = self._h.var_names
            if names is None:
                return range_names(np.arange(self.n_vars))
            return string_index(names)

        return self._once("var_names", load)

    @property
    def gene_order(self) -> Optional[np.ndarray]:
        """Column `j` was column `gene_order[j]` of the source, or None when
        the columns are in the source's order. `np.argsort(gene_order)` lists
        the columns in source order: pass it as `genes=` to read them so."""
        return self._h.gene_order

    @property
    def var(self) -> Any:
        """The gene table (`var.parquet`) as a pandas DataFrame indexed by
        `var_names`, in column order; an empty frame when the dataset has
        none. Loaded on first access and kept."""
        def load() -> Any:
            # A build of several inputs: any input's (its gene table keeps a
            # column of any input).
            sources = self.metadata.get("sources")
            each = sources if isinstance(sources, list) else []
            at = [m.get(VAR_INDEX_IS_COLUMN_KEY) for m in [self.metadata, *each]
                  if isinstance(m, dict)]
            column_at = next((a for a in at if isinstance(a, int) and not isinstance(a, bool)
                              and a >= 0), None)
            return var_frame(self._h.var_table(), self.var_names, column_at)

        return self._once("var", load)

    @property
    def _parts(self) -> "list[tuple[int, Optional[str], bool]]":
        """`(cells, column of their ids or None, whether that column is also
        an obs column)` of each run of cells named alike, in cell order: the
        whole dataset, or each input of a build of several that kept their
        ids in different columns (`metadata["sources"]`), as a corpus has
        each member."""
        def parts() -> "list[tuple[int, Optional[str], bool]]":
            schema = self._h.obs_schema
            sources = self.metadata.get("sources")
            whole = [named_part(self.n_obs, self.metadata, schema)]
            if OBS_INDEX_KEY in self.metadata or not isinstance(sources, list):
                return whole
            counts = [s.get("n_obs") if isinstance(s, dict) else None for s in sources]
            if all(c is None for c in counts):
                return whole  # built before the counts were recorded
            if (not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
                    or sum(counts) != self.n_obs):
                raise FormatError(f"the manifest's metadata.sources give cell counts {counts}, "
                                  f"not counts that add up to the dataset's {self.n_obs} cells")
            # A source without an obs index names its cells by position.
            return [named_part(c, s, schema, legacy=False) for c, s in zip(counts, sources)]
        return self._once("parts", parts)

    @property
    def _index_column(self) -> Optional[str]:
        """The obs column that holds every cell's id, if one does (see
        `obs_names`); None too where parts keep theirs in different columns."""
        columns = {column for _, column, _ in self._parts}
        return columns.pop() if len(columns) == 1 else None

    @property
    def obs_names(self) -> Any:
        """Cell ids, a `pandas.Index` of strings: the obs index the dataset
        was written with, stored as an obs column (`deltacells.write` names
        that column in the manifest's metadata as `obs_index`; `deltacells
        convert` stores an h5ad's obs index as `cell_id`), else "0", "1", ...
        as anndata names cells. Loaded on first access and kept."""
        return self._once("obs_names", lambda: self._names(None))

    def _names(self, ids: Optional[np.ndarray]) -> Any:
        """The obs names of cells `ids` (every cell when None): where parts
        (see `_parts`) keep their cell ids in different columns, each part's
        own, as `anndata.concat` of the parts keeps them, a part without any
        naming its cells by their position in it ("0", "1", ...)."""
        if "obs_names" in self._loaded and ids is not None:
            return self._loaded["obs_names"][ids]
        parts = self._parts
        if len({column for _, column, _ in parts}) == 1:
            column = parts[0][1]
            if column is None:
                return range_names(np.arange(self.n_obs) if ids is None else ids)
            values = pandas_column(self._h.obs_column(column, ids))
            return string_index(values, index_name(column))
        cells = np.arange(self.n_obs, dtype=np.int64) if ids is None else np.asarray(ids)
        starts = np.cumsum([0] + [n for n, _, _ in parts])
        part = np.searchsorted(starts, cells, side="right") - 1
        names = (cells - starts[part]).astype(str).astype(object)
        for p, (_, column, _) in enumerate(parts):
            at = np.flatnonzero(part == p)
            if column is not None and at.size:
                values = pandas_column(self._h.obs_column(column, cells[at]))
                names[at] = np.asarray(string_index(values), dtype=object)
        return string_index(names)

    @property
    def _ordered(self) -> frozenset:
        """The categorical obs columns whose categories are ordered."""
        return self._once("ordered", lambda: ordered_columns(self.metadata))

    @property
    def obs_columns(self) -> list:
        """Names of the obs columns, as in `obs` (the column holding the cell
        ids is `obs_names`, and a column too when the obs index written was
        also one: of any part of a corpus or a build of several inputs, the
        other parts' cells then giving their ids there)."""
        parts = self._parts
        hidden = ({column for _, column, is_column in parts if not is_column}
                  - {column for _, column, is_column in parts if is_column})
        return [name for name, _, _ in self._h.obs_schema if name not in hidden]

    def _columns(self, setting: str, columns: Any) -> list:
        """Obs `columns` as `read_obs` and `batches` take them (None: every one)."""
        names = column_names(setting, columns)
        return self.obs_columns if names is None else names

    def categories(self, column: str) -> Optional[list]:
        """The vocabulary of obs column `column` when it is categorical (None
        otherwise), without reading the column."""
        for name, _, cats in self._h.obs_schema:
            if name == column:
                return cats
        raise InputError(f"no obs column {column!r}")

    @property
    def obs(self) -> Any:
        """Every obs column as a pandas DataFrame indexed by `obs_names`,
        loaded on first access and kept (`read_obs` reads some columns of
        some cells). The dtypes are ones anndata can write: categories as
        `pandas.Categorical`, missing numbers as NaN (pandas' nullable
        integer and boolean arrays where integers or booleans miss values),
        strings as objects."""
        return self._once("obs", lambda: self.read_obs())

    def read_obs(self, columns: "str | Sequence[str] | None" = None, cells: Any = None) -> Any:
        """Obs `columns` (default: every column of `obs`; the column holding
        the cell ids may be asked for by name too) for `cells` (default: every
        cell; any selection `read` takes, order kept) as a pandas DataFrame
        indexed by the cells' `obs_names`, with the dtypes of `obs` for the
        cells read: integers and booleans with a missing value among them
        come as pandas' nullable arrays (`Int64`, `boolean`), without one as
        numpy's (`CellDataset` gives every batch the same entries either way)."""
        import pandas as pd

        names = self._columns("columns", columns)
        ids = None if cells is None else self._cell_ids(cells)
        ordered = self._ordered
        data = {name: pandas_column(self._h.obs_column(name, ids), name in ordered)
                for name in names}
        return pd.DataFrame(data, index=self._names(ids))

    # -- selections ------------------------------------------------------------

    def _cells(self, cells: Any) -> "tuple[Any, Optional[np.ndarray]]":
        """A request as `(range, None)` or `(None, ids)`."""
        n = self.n_obs
        cells = by_label(cells, lambda: self.obs_names, "cell")
        if isinstance(cells, slice):
            start, stop, step = slice_indices(cells, n, "cells")
            if step == 1:
                return (start, max(start, stop)), None
            return None, np.arange(start, stop, step, dtype=np.int64)
        if isinstance(cells, range):
            if cells.step == 1 and 0 <= cells.start <= cells.stop <= n:
                return (cells.start, cells.stop), None
            # Neither len() nor min() of a range past 2^63 ids: the first
            # overflows, the second walks it.
            if not cells:
                return None, np.zeros(0, dtype=np.int64)
            # The ends are checked before any id is made.
            from_end(np.array([cells[0], cells[-1]], dtype=object), n, "cell")
            return None, from_end(np.asarray(cells, dtype=np.int64), n, "cell")
        if isinstance(cells, (int, np.integer)):
            return None, from_end(np.array([int(cells)], dtype=object), n, "cell")
        a = np.asarray(cells)
        if a.dtype == np.bool_:
            if a.shape != (n,):
                raise InputError(f"a boolean cell mask needs {n} entries, not {a.shape}")
            return None, np.flatnonzero(a).astype(np.int64)
        if a.size == 0:
            return None, np.zeros(0, dtype=np.int64)
        if not np.issubdtype(a.dtype, np.integer) or a.ndim != 1:
            raise InputError("cells must be an int, a slice, a range or a 1-D array of ints")
        return None, from_end(a, n, "cell")

    def _cell_ids(self, cells: Any) -> np.ndarray:
        """A selection of cells as int64 ids."""
        span, ids = self._cells(cells)
        if ids is None:
            return np.arange(span[0], span[1], dtype=np.int64)
        return ids

    def _genes(self, genes: Any) -> Optional[np.ndarray]:
        """Gene selection as column indices, from indices or names."""
        if genes is None:
            return None
        if isinstance(genes, slice):
            return np.arange(*slice_indices(genes, self.n_vars, "genes"), dtype=np.int64)
        if isinstance(genes, (str, int, np.integer)):
            genes = [genes]
        genes = by_label(genes, lambda: self.var_names, "gene")
        if isinstance(genes, np.ndarray) and genes.dtype == np.bool_:
            if genes.shape != (self.n_vars,):
                raise InputError(f"a boolean gene mask needs {self.n_vars} entries, not {genes.shape}")
            return np.flatnonzero(genes).astype(np.int64)
        try:
            items = list(genes)
        except TypeError:
            raise InputError("genes must be gene indices, gene names or a boolean mask, "
                             f"not {genes!r}") from None
        if items and all(isinstance(g, str) for g in items):
            index = self._once("gene_index", self._name_index)
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
        if a.dtype == np.bool_:
            # A list of booleans, as from `var["highly_variable"].tolist()`.
            return self._genes(a)
        if a.size == 0:
            return np.zeros(0, dtype=np.int64)
        if not np.issubdtype(a.dtype, np.integer) or a.ndim != 1:
            raise InputError("genes must be gene indices, gene names or a boolean mask")
        return from_end(a, self.n_vars, "gene")

    def _name_index(self) -> dict:
        """Column of each gene name; -1 for a name that appears twice."""
        index: dict = {}
        for i, name in enumerate(self.var_names):
            index[name] = -1 if name in index else i
        return index

    # -- reads -------------------------------------------------------------------

    def read(self, cells: Any = slice(None), genes: Any = None, format: str = "csr_matrix",
             dtype: Any = np.float32, *, missing: str = "error", normalize: Optional[float] = None,
             log1p: bool = False, tokenizer: Any = None) -> Any:
        """Rows of `cells` (ids in any order, duplicates allowed, a slice, a
        range or a boolean mask; order kept), keeping only `genes` (indices or
        names, in the order given, or a boolean mask of `n_vars`) when given.
        Columns follow `var_names`. Negative ids and indices count from the
        end, as numpy's do (`-1` is the last cell or gene).

        `missing`: "error" (a name the dataset lacks raises) or "zero" (it
        reads as a column of zeros: a fixed gene vocabulary over any dataset).
        `normalize`: a target sum, each cell divided by its total over all
        the dataset's genes (before the gene selection) and multiplied by it,
        as scanpy's `normalize_total`; `log1p`: `log(1 + x)` after that, as
        scanpy's `log1p`. Both run in the engine as rows decode, into float32
        values (formats as below; "numpy" rows are written dense directly).

        `format`: "csr_matrix" (`scipy.sparse.csr_matrix` over the decoded
        buffers), "csr_array" (`scipy.sparse.csr_array`, the same buffers),
        "torch" (a `torch.sparse_csr_tensor`, values not copied), "arrays"
        (`CsrArrays`: the CSR's numpy arrays) or "numpy" (a dense array).
        `dtype`: float32 or int32 (exact counts).

        With a `tokenizer` (`deltacells.tokenize.Geneformer` or `ScGPT`, which
        read every gene, so without `genes`): a dict of numpy arrays
        `[cells, max_len]`: `input_ids` (int32), `values` (float32, scGPT) and
        `attention_mask` (bool), for exactly `cells`, in order.
        """
        if tokenizer is not None:
            handle = tokenizer_handle(tokenizer)
            if genes is not None:
                raise InputError("a tokenizer reads every gene of a row: read without genes")
            span, ids = self._cells(cells)
            if span is not None:
                return self._h.read_range(span[0], span[1], tokenizer=handle)
            return self._h.read_cells(ids, tokenizer=handle)
        check_format(format)
        if missing != "error" or normalize is not None or log1p:
            return read_transformed(self, cells, genes, format, dtype, missing, normalize, log1p)
        span, ids = self._cells(cells)
        g = self._genes(genes)
        dt = dtype_name(dtype)
        if span is not None:
            parts = self._h.read_range(span[0], span[1], g, dt)
        else:
            parts = self._h.read_cells(ids, g, dt)
        return convert(parts, format)

    def __getitem__(self, key: Any) -> Any:
        """`ds[cells]` or `ds[cells, genes]`, as a scipy `csr_matrix`, float32."""
        if isinstance(key, tuple):
            if len(key) != 2:
                raise InputError("index with ds[cells] or ds[cells, genes]")
            return self.read(key[0], key[1])
        return self.read(key)

    def iter_tiles(self, genes: Any = None, format: str = "csr_matrix", dtype: Any = np.float32,
                   prefetch: int = 1) -> Iterator[Any]:
        """Every tile's rows in order (formats as in `read`); the next
        `prefetch` tiles decode on the engine while the caller works on the
        current one."""
        check_format(format)
        prefetch = integer("prefetch", prefetch)
        g = self._genes(genes)
        dt = dtype_name(dtype)
        h = self._h
        if prefetch <= 0:
            for t in range(h.n_tiles):
                yield convert(h.read_tile(t, g, dt), format)
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="deltacells-tiles") as pool:
            pending = [pool.submit(h.read_tile, t, g, dt)
                       for t in range(min(prefetch, h.n_tiles))]
            for t in range(h.n_tiles):
                parts = pending.pop(0).result()
                if t + prefetch < h.n_tiles:
                    pending.append(pool.submit(h.read_tile, t + prefetch, g, dt))
                yield convert(parts, format)

    def batches(self, batch_size: int = 256, *, shuffle: str = "block", seed: int = 0,
                epoch: int = 0, window_tiles: int = 4, genes: Any = None,
                obs_columns: "str | Sequence[str] | None" = (), format: str = "csr_matrix",
                dtype: Any = np.float32, drop_last: bool = False, rank: int = 0,
                world_size: int = 1, prefetch: int = 2, cache_bytes: int = 1 << 30,
                obs_cache_dir: "str | os.PathLike[str] | None" = None,
                delivered: "Sequence[tuple[int, int]]" = (), cells: Any = None,
                weights: Any = None, balance: "str | Sequence[str] | None" = None,
                samples_per_epoch: Optional[int] = None, normalize: Optional[float] = None,
                log1p: bool = False, tokenizer: Any = None, missing: str = "error",
                next_epoch_ahead: bool = False) -> Batches:
        """One rank's training batches of one epoch, as `Batch(position, cells,
        X, obs)`, decoded ahead on the engine while the caller works (no torch
        needed; `deltacells.torch.CellDataset` takes the same settings).

        * `batch_size`: cells per batch; every rank gets the same number of
          batches; `drop_last` drops the cells that do not fill a batch on
          every rank, otherwise every cell comes exactly once per epoch.
        * `shuffle`: "block" (shuffle tiles, then cells within windows of
          `window_tiles` tiles: each chunk decodes about once per epoch),
          "random" (a uniform permutation) or "none". The order depends on
          `(seed, epoch)` alone.
        * `genes`: a subset of genes (indices, names or a boolean mask, as
          in `read`), in the order given;
          columns otherwise follow `var_names`. `missing` as in `read`: with
          "zero", a name the dataset lacks is a column of zeros (a model's
          fixed gene vocabulary over any dataset).
        * `obs_columns`: obs columns returned with every batch in `Batch.obs`
          (None: every column of `obs`, as `read_obs` and `to_anndata` take it).
        * `format`, `dtype`: as in `read` ("numpy" gives dense rows).
        * `rank`, `world_size`: the epoch's cells are cut into `world_size`
          contiguous shares, one per rank.
        * `prefetch`: batches decoded ahead; `cache_bytes`: bound of the
          decoded tiles and chunks the iterator keeps (when two windows fit,
          the next one is built while this one's batches are used; below
          one window's rows, its batches are built a share at a time, each
          share decoding the window's chunks again);
          `obs_cache_dir`: where obs columns are localized (see the format's
          obs cache).
        * `delivered`: epoch positions (places in the epoch's order, not
          cell ids) already delivered, as sorted disjoint `(start, stop)`
          pairs: the ranks share the rest of the epoch, in its order, as they
          would a whole epoch (how `CellDataset` resumes an epoch with
          another world size or worker count).
        * `cells`: serve only these cells (ids, negative ones counted from
          the end, or a boolean mask of `n_obs`, as from a pandas query on
          `obs`), each once per epoch;
          block shuffle keeps its locality inside the subset.
        * `weights` (one per cell, finite, >= 0, not all 0) or `balance` (one
          or more categorical obs columns: each combination of their values
          present is a class, drawn equally often): draws with replacement,
          each cell with probability exactly its weight over the total;
          `samples_per_epoch` draws in all (every rank together; default:
          the cells of the subset, or of the dataset; given without weights
          or balance, uniform draws with replacement). Under block shuffle
          the draws are split over tiles by one multinomial draw and served
          a window at a time (locality, the same marginals); under "random"
          each draw is independent (random access).
        * `normalize` (a target sum), `log1p`: float32 values as `read`
          computes them.
        * `tokenizer` (`deltacells.tokenize.Geneformer` or `ScGPT`): `X` is
          the dict of `[batch, max_len]` arrays `read(cells, tokenizer=...)`
          gives for the batch's cells, but for scGPT's draw of a long cell's
          genes, which is keyed by these batches' `seed` and `epoch` (so each
          epoch draws anew) in place of the tokenizer's own.
        * `next_epoch_ahead`: once this epoch has nothing left to decode,
          make the first batch, then the first window, of the same batches'
          next epoch (`epoch + 1`, nothing delivered) in the background; the
          next `batches` call of this dataset with exactly those settings
          starts with them, its first batch ready as soon as it is made (any
          other call drops them). What `CellDataset` does between its epochs.
        """
        check_format(format)
        if shuffle not in SHUFFLES:
            raise InputError(f"shuffle must be one of {SHUFFLES}, not {shuffle!r}")
        rank, world_size = rank_in_world(rank, world_size)
        draws = draw_settings(weights, balance, samples_per_epoch, normalize, tokenizer)
        options = {
            "batch_size": unsigned("batch_size", batch_size, least=1),
            "seed": unsigned("seed", seed),
            "epoch": unsigned("epoch", epoch), "shuffle": shuffle,
            "window_tiles": unsigned("window_tiles", window_tiles, least=1), "rank": rank,
            "world_size": world_size, "drop_last": bool(drop_last),
            "prefetch": unsigned("prefetch", prefetch),
            "cache_bytes": unsigned("cache_bytes", cache_bytes),
            "genes": vocabulary(self, genes, missing), "missing": missing,
            "dense": format == "numpy",
            "obs_columns": self._columns("obs_columns", obs_columns),
            "obs_cache_dir": None if obs_cache_dir is None else os.fspath(obs_cache_dir),
            "dtype": dtype_name(dtype),
            "delivered": positions("delivered", delivered),
            **self._sampling(cells, draws),
            "normalize": draws["normalize"],
            "log1p": bool(log1p),
            "tokenizer": draws["tokenizer"],
            "next_epoch_ahead": bool(next_epoch_ahead),
        }
        tokenizer_alone(tokenizer, genes, normalize, log1p, format == "numpy")
        return Batches(self, options, format)

    def _sampling(self, cells: Any, draws: dict) -> dict:
        """The `cells`, `weights`, `balance` and `samples_per_epoch` settings
        of `batches` (the last three from `draw_settings`), checked against
        this dataset, with `epoch_cells`: the cells an epoch serves."""
        subset = None
        if cells is not None:
            subset = np.unique(self._cell_ids(cells)).astype(np.uint64)
        w, columns, per_epoch = draws["weights"], draws["balance"], draws["samples_per_epoch"]
        if w is not None and w.shape != (self.n_obs,):
            raise InputError(f"weights need one entry per cell ({self.n_obs}), not {w.shape}")
        population = self.n_obs if subset is None else len(subset)
        return {"cells": subset, "weights": w, "balance": columns,
                "samples_per_epoch": per_epoch, "epoch_cells": per_epoch or population}

    def to_anndata(self, cells: Any = None, genes: Any = None,
                   obs_columns: "str | Sequence[str] | None" = None, *,
                   dtype: Any = np.float32, format: str = "csr_matrix") -> Any:
        """`cells` (default: all) and `genes` (default: all, in `var_names`
        order) as an in-memory `anndata.AnnData`: `X` as `read` gives it
        (`format` "csr_matrix", "csr_array" or "numpy"; `dtype` float32 or
        int32), `obs` the cells' `obs_columns` (default: all) indexed by their
        `obs_names`, `var` the genes' rows of `var`. Its obs dtypes are ones
        `write_h5ad` stores. Needs anndata (`pip install "deltacells[anndata]"`).
        """
        check_format(format, _ANNDATA_FORMATS)
        try:
            import anndata
        except ImportError as e:
            raise ImportError('to_anndata needs anndata: pip install "deltacells[anndata]"') from e
        X = self.read(slice(None) if cells is None else cells, genes, format=format, dtype=dtype)
        obs = self.read_obs(obs_columns, cells)
        g = self._genes(genes)
        var = self.var.copy() if g is None else self.var.iloc[g]
        return anndata.AnnData(X=X, obs=obs, var=var)

    def verify(self) -> dict:
        """Checks every tile (structure, CRC, full decode), the obs shards and
        side files; raises `FormatError` on the first problem."""
        tiles, cells, nonzeros, size = self._h.verify()
        return {"tiles": tiles, "cells": cells, "nonzeros": nonzeros, "bytes": size}


__all__: Sequence[str] = ["Dataset", "FORMATS"]

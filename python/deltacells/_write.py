"""`deltacells.write`: scipy, dense or AnnData matrices into a new dataset."""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Iterator, Optional

import numpy as np

from . import _deltacells
from ._settings import unsigned, zstd_level
from ._tables import (OBS_INDEX_IS_COLUMN_KEY, OBS_INDEX_KEY, ORDERED_KEY, UNNAMED_INDEX,
                      VAR_INDEX_IS_COLUMN_KEY)
from .errors import InputError, StorageError

_MAX_COUNT = 2**31 - 1

#: Value dtypes the engine does not take, and the narrowest it does that
#: holds each exactly (scipy cannot hold float16 at all).
_WIDER = {np.dtype(t): np.dtype(w) for t, w in [
    (np.bool_, np.uint16), (np.uint8, np.uint16), (np.int8, np.int32), (np.int16, np.int32),
    (np.float16, np.float32)]}


def write(X, out_dir, obs=None, var=None, *, tile_size: Optional[int] = None,
          level: Optional[int] = None, n_chunks: Optional[int] = None, sort_genes: bool = True,
          layer: Optional[str] = None, raw: bool = False, block_rows: Optional[int] = None) -> dict:
    """Writes the count matrix `X` (cells x genes) as a deltacells dataset in `out_dir`.

    `X`: a scipy sparse matrix or array (CSR, CSC, COO), a dense numpy array,
    or an `anndata.AnnData`, in memory or backed; for AnnData, `X`, `raw.X`
    (`raw=True`) or the layer `layer`, and its `obs`/`var` unless given.
    Rows are streamed to the engine in blocks of `block_rows` cells, so memory
    stays bounded by a block plus the tiles being encoded (an in-memory CSC is
    converted to CSR once).

    Values must be non-negative integers, of any integer or float dtype
    (booleans count as 0 and 1, as a binarized matrix means them; stored
    zeros are dropped); the first
    entry that is not raises `InputError` (a `ValueError`) naming its cell and gene, before
    anything is renamed into place. The dataset is written in a temporary
    directory beside `out_dir` and renamed to `out_dir` when complete; on any
    failure nothing is left under `out_dir`.

    `level`: the zstd level of the tiles (negative levels are zstd's fast
    modes). `sort_genes`: order columns by decreasing total count (compresses better;
    `gene_order` records the order, and `var`/`var_names` follow it).
    `obs`: a DataFrame with one row per cell (categorical, string, numeric,
    boolean and nullable columns; a non-default index is kept as a string
    column, which the manifest's metadata names as `obs_index`, so that it
    comes back as `obs_names`; `obs_index` is null for the default index
    or no obs). `var`: a DataFrame with one row per gene; its
    index gives `var_names`; its columns are stored as text (a missing value
    as "", a categorical with the categories its values use, in the order
    they first appear). Returns `{"cells", "tiles", "path"}`.
    """
    matrix, obs, var = _source(X, obs, var, layer, raw)
    _check_tables(obs, var)
    n_obs, n_vars = _shape(matrix)
    tile_size = (_deltacells.DEFAULT_TILE_SIZE if tile_size is None
                 else unsigned("tile_size", tile_size, least=1))
    n_chunks = _deltacells.DEFAULT_CHUNKS if n_chunks is None else unsigned("n_chunks", n_chunks, least=1)
    block_rows = tile_size if block_rows is None else unsigned("block_rows", block_rows, least=1)
    level = _deltacells.DEFAULT_LEVEL if level is None else zstd_level("level", level)
    try:
        out_dir = os.fspath(out_dir)
    except TypeError:
        raise InputError(f"out_dir must be a path, not {out_dir!r}") from None
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", str(out_dir)):
        # os.path would take "s3://bucket/x" for a local folder named "s3:".
        raise InputError(f"write takes a local directory, not {out_dir!r}: write it locally, then "
                         "`deltacells convert DIR URL` copies a dataset to a bucket "
                         "(deltacells.build writes h5ad inputs to one directly)")
    out_dir = os.path.abspath(out_dir)
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise InputError(f"{out_dir} exists and is not an empty directory")
    obs_specs, metadata = _obs_specs(obs, n_obs) if obs is not None else ([], {OBS_INDEX_KEY: None})
    var_spec, var_names, index_at = (_var_spec(var, n_vars) if var is not None
                                     else (None, None, None))
    if index_at is not None:
        metadata[VAR_INDEX_IS_COLUMN_KEY] = index_at
    _check_text(obs_specs, var_spec)

    totals = None
    if sort_genes:
        totals = np.zeros(n_vars, dtype=np.float64)
        for start, block in _blocks(matrix, block_rows):
            _check(block, start)
            totals += np.bincount(block.indices, weights=block.data, minlength=n_vars)

    parent, name = os.path.split(out_dir)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        # As the engine reports a directory it cannot write.
        raise StorageError(e.errno, f"cannot create {parent}: {e.strerror}") from e
    tmp = os.path.join(parent, f".{name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    _remove_abandoned(parent, name)
    writer = None
    try:
        writer = _deltacells.Writer(
            tmp, n_vars, tile_size=tile_size,
            n_chunks=n_chunks,
            level=level,
            gene_totals=None if totals is None else totals.tolist(),
            var_names=var_names, obs=obs_specs, var=var_spec,
            metadata=json.dumps(metadata))
        for start, block in _blocks(matrix, block_rows):
            if not sort_genes:
                _check(block, start)
            writer.push(n_vars, block.indptr.astype(np.int64, copy=False),
                        block.indices.astype(np.int32, copy=False), block.data)
        cells, tiles = writer.finish()
        if os.path.isdir(out_dir):
            os.rmdir(out_dir)  # empty, checked above
        os.rename(tmp, out_dir)
    except BaseException:
        if writer is not None:
            writer.abort()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"cells": cells, "tiles": tiles, "path": out_dir}


def _source(X, obs, var, layer, raw):
    """The matrix to write, and obs/var (from an AnnData unless given)."""
    try:
        import anndata
    except ImportError:  # scipy/numpy input needs no anndata
        anndata = None
    if anndata is not None and isinstance(X, anndata.AnnData):
        adata = X
        if raw and layer is not None:
            raise InputError("give either raw=True or layer, not both")
        if raw:
            if adata.raw is None:
                raise InputError("the AnnData has no raw")
            matrix = adata.raw.X
            var = adata.raw.var if var is None else var
        elif layer is not None:
            if layer not in adata.layers:
                raise InputError(f"the AnnData has no layer {layer!r}")
            matrix = adata.layers[layer]
            var = adata.var if var is None else var
        else:
            matrix = adata.X
            var = adata.var if var is None else var
        obs = adata.obs if obs is None else obs
        if matrix is None:
            raise InputError("the AnnData has no X")
        return matrix, obs, var
    if layer is not None or raw:
        raise InputError("layer and raw apply to AnnData input only")
    return X, obs, var


def _remove_abandoned(parent: str, name: str) -> None:
    """Removes the temporary directories of earlier writes of `name` whose
    process is gone (killed before it could clean up); a live writer's is
    left alone."""
    prefix = f".{name}.partial-"
    for entry in os.listdir(parent):
        pid = entry[len(prefix):]
        if not (entry.startswith(prefix) and pid.isdigit()):
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
        except (PermissionError, OverflowError):
            pass  # alive, another user's; or no process id at all


def _check_tables(obs, var) -> None:
    """Refuses an obs or var that is no pandas DataFrame (a dict or a Series
    raised AttributeError deep in the writer, a list of names TypeError)."""
    import pandas as pd

    for name, table in (("obs", obs), ("var", var)):
        if table is not None and not isinstance(table, pd.DataFrame):
            raise InputError(f"{name} must be a pandas DataFrame (one row per "
                             f"{'cell' if name == 'obs' else 'gene'}) or None, "
                             f"not a {type(table).__name__}")


def _shape(matrix) -> "tuple[int, int]":
    """`(cells, genes)` of the matrix; anything that is not a 2-D matrix of
    numbers is refused, saying what is taken."""
    shape = getattr(matrix, "shape", None)
    dtype = getattr(matrix, "dtype", None)
    if shape is None or len(shape) != 2 or dtype is None or np.dtype(dtype).kind not in "biuf":
        got = type(matrix).__name__
        if shape is not None:
            got += f" of shape {tuple(shape)}"
        if dtype is not None:
            got += f" and dtype {dtype}"
        raise InputError("X must be a 2-D matrix of counts (cells x genes): a scipy sparse "
                         "matrix or array, a numpy array or an AnnData, of integers, floats or "
                         f"booleans; not a {got}")
    return int(shape[0]), int(shape[1])


def _blocks(matrix, block_rows: int) -> Iterator:
    """`(first row, canonical CSR block)` over the matrix: sorted indices, no
    duplicates (summed, as scipy reads them), no stored zeros, values of a
    dtype the engine takes (see `_WIDER`; a block of such a dtype is not
    copied)."""
    import scipy.sparse as sp

    if sp.issparse(matrix) and matrix.format != "csr":
        matrix = matrix.tocsr()  # in memory: one conversion, not one per block
    n = int(matrix.shape[0])
    for start in range(0, n, block_rows):
        block = matrix[start:min(n, start + block_rows)]
        if not sp.issparse(block):
            block = np.asarray(block)
        # In native byte order (scipy refuses big-endian values).
        native = block.dtype.newbyteorder("=")
        block = sp.csr_matrix(block.astype(_WIDER.get(native, native), copy=False))
        block.sum_duplicates()
        block.eliminate_zeros()
        yield start, block


def _check(block, start: int) -> None:
    """Raises ValueError naming the first entry that is not a count (the
    values are integers or floats, see `_blocks`)."""
    data = block.data
    if np.issubdtype(data.dtype, np.integer):
        bad = (data < 0) | (data > _MAX_COUNT)
    else:
        with np.errstate(invalid="ignore"):
            # 2^31 is exact in float32, where _MAX_COUNT rounds up to it.
            bad = (~np.isfinite(data) | (data < 0) | (data >= float(_MAX_COUNT + 1))
                   | (data != np.floor(data)))
    hits = np.flatnonzero(bad)
    if hits.size:
        i = int(hits[0])
        row = int(np.searchsorted(block.indptr, i, side="right")) - 1
        raise InputError(
            f"X[{start + row}, {int(block.indices[i])}] = {data[i]!r} is not a count "
            f"(counts are integers in 0..={_MAX_COUNT})")


def _obs_specs(obs, n_obs: int) -> tuple:
    """Obs columns as the engine's writer takes them, and the manifest
    metadata that says which holds the obs index: `obs_index` names it (None
    when it is not stored: a column named `cell_id` is then no index), and
    `obs_index_is_column` says when the index was a column too
    (`set_index(name, drop=False)`), stored once, so that it reads back as both;
    `ordered_categories` lists the categorical columns whose order counts."""
    import pandas as pd

    if len(obs) != n_obs:
        raise InputError(f"obs has {len(obs)} rows for {n_obs} cells")
    names = _column_names(obs, "obs")
    specs = []
    metadata: dict = {OBS_INDEX_KEY: None}
    # Only an unnamed 0, 1, ... is the index pandas makes when none is given
    # (which reads back as anndata's "0", "1", ...); any other is kept.
    implicit = (isinstance(obs.index, pd.RangeIndex) and obs.index.name is None
                and obs.index.start == 0 and obs.index.step == 1)
    if not implicit:
        name = str(obs.index.name or UNNAMED_INDEX)
        ids = [str(v) for v in obs.index]
        metadata[OBS_INDEX_KEY] = name
        if _index_is_column(obs, names, name, ids, "obs"):
            metadata[OBS_INDEX_IS_COLUMN_KEY] = True
        else:
            specs.append((name, "string", ids, None, None))
    for name in obs.columns:
        specs.append(_obs_spec(str(name), obs[name]))
    ordered = [str(name) for name in obs.columns
               if isinstance(obs[name].dtype, pd.CategoricalDtype) and obs[name].dtype.ordered]
    if ordered:
        metadata[ORDERED_KEY] = ordered
    return specs, metadata


def _obs_spec(name: str, s, what: str = "obs") -> tuple:
    """Column `s` (of obs, or of var) as the engine's writer takes it:
    `(name, kind, values, mask, categories)`."""
    import pandas as pd
    from pandas.api import types

    if isinstance(s.dtype, pd.SparseDtype):
        s = s.sparse.to_dense()  # obs are stored dense; its values are kept
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        cats = [str(c) for c in s.cat.categories]
        return (name, "category", s.cat.codes.to_numpy(dtype=np.int32), None, cats)
    if types.is_bool_dtype(dtype):
        mask = s.isna().to_numpy()
        values = s.fillna(False).to_numpy(dtype=bool)
        return (name, "bool", values, mask if mask.any() else None, None)
    if types.is_complex_dtype(dtype):
        raise InputError(f"{what} column {name!r}: unsupported numeric dtype {dtype}")
    if dtype == np.float16:
        # No half floats in the stores: float32 holds every value exactly.
        s = s.astype(np.float32)
        dtype = s.dtype
    if types.is_numeric_dtype(dtype):
        mask = s.isna().to_numpy()
        if isinstance(dtype, pd.api.extensions.ExtensionDtype):
            numpy_dtype = dtype.numpy_dtype
            values = s.to_numpy(dtype=numpy_dtype, na_value=0)
            return (name, "numeric", np.ascontiguousarray(values), mask if mask.any() else None, None)
        return (name, "numeric", np.ascontiguousarray(s.to_numpy()), None, None)
    if types.is_string_dtype(dtype) or dtype == object:
        values = [None if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA
                  else str(v) for v in s.tolist()]
        return (name, "string", values, None, None)
    raise InputError(f"{what} column {name!r} of dtype {dtype} is not supported "
                     "(categorical, string, numeric or boolean)")


def _var_spec(var, n_vars: int):
    """The gene table as the writer takes it, var_names (the index), and
    where the index is also a column (stored once, as the index) that
    column's position, else None."""
    import pandas as pd

    if len(var) != n_vars:
        raise InputError(f"var has {len(var)} rows for {n_vars} genes")
    index = [str(v) for v in var.index]
    names = _column_names(var, "var")
    index_name = str(var.index.name or "__index_level_0__")
    # A column of text that is the index (`set_index(..., drop=False)`) is
    # stored once, as the index. One of another type (numbers, categories)
    # keeps its type as a column, and the index, its values as text, goes
    # unnamed beside it, as anndata stores them.
    skip = index_name if _index_is_column(var, names, index_name, index, "var") else None
    if skip is not None and not _is_text(var.iloc[:, names.index(skip)]):
        skip, index_name = None, "__index_level_0__"
    # Each column typed as an obs column is (numbers, booleans, strings and
    # categories with their missing values), ordered categories named.
    columns = [_obs_spec(name, s, "var") for name, (_, s) in zip(names, var.items())
               if name != skip]
    ordered = [name for name, (_, s) in zip(names, var.items())
               if name != skip and isinstance(s.dtype, pd.CategoricalDtype) and s.dtype.ordered]
    spec = (index_name, index, columns, ordered)
    return spec, index, None if skip is None else names.index(skip)


def _check_text(obs_specs: list, var_spec) -> None:
    """Refuses, naming the column, a string that UTF-8 cannot hold (a lone
    surrogate, as a file name decoded with `surrogateescape` has): every
    string is stored as UTF-8, and the engine would fail without a name."""
    for name, kind, values, _, categories in obs_specs:
        _encodable(f"obs column {name!r}",
                   [name, *(values if kind == "string" else ()), *(categories or ())])
    if var_spec is not None:
        index_name, index, columns, _ = var_spec
        _encodable("the var index", [index_name, *index])
        for name, kind, values, _, categories in columns:
            _encodable(f"var column {name!r}",
                       [name, *(values if kind == "string" else ()), *(categories or ())])


def _encodable(what: str, strings: list) -> None:
    """Refuses `strings` (str or None) when one is not UTF-8 text."""
    try:
        "".join(s for s in strings if s is not None).encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(f"{what} holds {e.object[e.start:e.end]!r}, which UTF-8 cannot "
                         "encode") from None


def _column_names(frame, what: str) -> list:
    """The frame's column names as strings, refusing a name given twice."""
    names = [str(c) for c in frame.columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"{what} has more than one column named {twice[0]!r}")
    return names


def _is_text(s) -> bool:
    """Whether column `s` holds strings (object or string dtype, not categories)."""
    import pandas as pd
    from pandas.api import types

    if isinstance(s.dtype, pd.CategoricalDtype):
        return False
    return types.is_object_dtype(s.dtype) or types.is_string_dtype(s.dtype)


def _index_is_column(frame, names: list, name: str, ids: list, what: str) -> bool:
    """Whether the index, named `name`, is also the frame's column `name`
    (the same values, as strings); a column of that name with other values
    would lose one of the two, and is refused."""
    if name not in names:
        return False
    if [str(v) for v in frame.iloc[:, names.index(name)]] != ids:
        raise InputError(f"the {what} index is named {name!r}, as is a {what} column with other "
                         "values: rename one of them")
    return True


__all__ = ["write"]

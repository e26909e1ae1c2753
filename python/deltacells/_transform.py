"""Reads over a gene vocabulary that may name genes the dataset lacks,
normalized and/or log1p, computed by the engine while it decodes (the Rust
docs of `deltacells::engine::Transform` give the formulas)."""

from typing import Any, Optional

import numpy as np

from . import _deltacells
from ._formats import convert, dtype_name
from ._settings import positive
from .errors import InputError

MISSING = ("error", "zero")


def vocabulary(ds: Any, genes: Any, missing: str) -> Optional[np.ndarray]:
    """The output columns' genes as int64 (-1: a name the dataset lacks,
    a column of zeros), from indices or names."""
    if missing not in MISSING:
        raise InputError(f"missing must be one of {MISSING}, not {missing!r}")
    if genes is None or isinstance(genes, slice):
        return ds._genes(genes)
    items = [genes] if isinstance(genes, (str, int, np.integer)) else list(genes)
    if missing == "error" or not all(isinstance(g, str) for g in items):
        # Indices come back within 0..n_vars (a negative one counted from the
        # end): never the -1 that marks a missing name below.
        return ds._genes(items)
    index = ds._once("gene_index", ds._name_index)
    out = np.fromiter((index.get(g, -1) for g in items), dtype=np.int64, count=len(items))
    ambiguous = [g for g, i in zip(items, out) if i == -1 and g in index]
    if ambiguous:
        raise InputError(f"gene name {ambiguous[0]!r} appears more than once in var_names")
    return out


def read_transformed(ds: Any, cells: Any, genes: Any, format: str, dtype: Any, missing: str,
                     normalize: Optional[float], log1p: bool) -> Any:
    """`Dataset.read` with `missing`, `normalize` or `log1p` (see there)."""
    g = vocabulary(ds, genes, missing)
    dt = dtype_name(dtype)
    if (normalize is not None or log1p) and dt != "float32":
        raise InputError("normalized and log1p values are float32")
    span, ids = ds._cells(cells)
    start, stop = span if span is not None else (0, 0)
    target = None if normalize is None else positive("normalize", normalize)
    dense = format == "numpy"
    out = _deltacells.read_transformed(ds._h, start, stop, ids, g, target, bool(log1p), dense, dt)
    if dense:
        values, n_rows, n_cols = out
        return values.reshape(n_rows, n_cols)
    return convert(out, format)

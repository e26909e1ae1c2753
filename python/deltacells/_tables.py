"""Obs and var columns from the engine as pandas values that anndata can store.

A column crosses from the extension as `(kind, values, mask, categories)`
(see `python/src/columns.rs`). Missing values take the form `write_h5ad`
accepts: NaN in a plain float array, pandas' nullable integer and boolean
arrays, `None` in an object array of strings, code -1 of a `Categorical`.
pandas' nullable float arrays, which anndata cannot write, never appear.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .errors import FormatError

#: The obs column that `deltacells.write` stores an unnamed obs index in:
#: it becomes an unnamed `obs_names` again.
UNNAMED_INDEX = "obs_names"

#: The obs column that `deltacells convert` stores an h5ad's obs index in.
CONVERTED_INDEX = "cell_id"

#: The manifest metadata key naming the obs column that holds the obs index
#: (null: the dataset has none), which `deltacells.write` and `deltacells
#: convert` record.
OBS_INDEX_KEY = "obs_index"

#: The manifest metadata key that, when true, says the obs index was also an
#: obs column of its name (`set_index(name, drop=False)`): `deltacells.write`
#: stores it once, and it reads back as both.
OBS_INDEX_IS_COLUMN_KEY = "obs_index_is_column"

#: The manifest metadata key listing the obs columns whose categories are
#: ordered.
ORDERED_KEY = "ordered_categories"
#: The manifest metadata key giving the position among the var columns of
#: var.parquet's index where it was a column too (`set_index(name,
#: drop=False)`), stored once.
VAR_INDEX_IS_COLUMN_KEY = "var_index_is_column"


def ordered_columns(metadata: dict) -> frozenset:
    """The categorical obs columns whose categories are ordered, as
    `deltacells.write` records them ([`ORDERED_KEY`] in the manifest's
    metadata), `deltacells convert` records an h5ad's (under `source`), and a
    build of several inputs each input's (under `sources`): a column every
    input orders (as `anndata.concat` keeps an order only where all agree;
    one input's order is no order of the others' categories)."""
    def listed(m: Any) -> "list[str]":
        if not isinstance(m, dict):
            return []
        names = m.get(ORDERED_KEY)
        own = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
        return own + (listed(m["source"]) if "source" in m else [])

    own = set(listed(metadata))
    sources = metadata.get("sources")
    if isinstance(sources, list) and sources:
        own |= set.intersection(*(set(listed(s)) for s in sources))
    return frozenset(own)


def pandas_column(col: tuple, ordered: bool = False) -> Any:
    """An engine column as values for a pandas DataFrame column (`ordered`:
    a categorical column's categories are ordered)."""
    import pandas as pd

    kind, values, mask, categories = col
    if kind == "category":
        return pd.Categorical.from_codes(values, categories=categories, ordered=ordered)
    if kind == "string":
        return np.array(values, dtype=object)
    if mask is None:
        return values
    if kind == "bool":
        return pd.arrays.BooleanArray(values, mask)
    if np.issubdtype(values.dtype, np.integer):
        return pd.arrays.IntegerArray(values, mask)
    values = values.copy()
    values[mask] = np.nan
    return values


def index_column(metadata: dict, schema: list) -> Optional[str]:
    """The obs column that holds the obs index (cell ids): the one the
    manifest's metadata names under `obs_index` (of any type: the names are
    its values as strings), none when it records none.
    Without that key (a dataset converted before convert recorded it, or
    written before `deltacells.write` recorded an obs without an index), a
    string column `cell_id`, what convert stores an h5ad's obs index in;
    elsewhere `cell_id` is a column like any other."""
    kinds = {name: kind for name, kind, _ in schema}
    if OBS_INDEX_KEY not in metadata:
        return CONVERTED_INDEX if kinds.get(CONVERTED_INDEX) == "string" else None
    # Any stored column: an index that was also a column of numbers
    # (`set_index("n", drop=False)`) is that column, its values as strings.
    named = metadata[OBS_INDEX_KEY]
    if named is None:
        return None
    if not isinstance(named, str) or named not in kinds:
        raise FormatError(f"the manifest's metadata names {named!r} as the obs column of the "
                          f"cell ids (obs_index), and obs has no such column")
    return named


def index_name(column: str) -> Optional[str]:
    """The name the obs index takes when stored as obs column `column`."""
    return None if column == UNNAMED_INDEX else column


def string_index(values: Any, name: Optional[str] = None) -> Any:
    """A `pandas.Index` of strings (what anndata requires of obs and var names)."""
    import pandas as pd

    strings = np.array(["" if pd.isna(v) else str(v) for v in np.asarray(values, dtype=object)],
                       dtype=object)
    return pd.Index(strings, dtype=object, name=name)


def range_names(ids: np.ndarray) -> Any:
    """Names "0", "1", ... for positions `ids`, as anndata names unnamed rows."""
    import pandas as pd

    return pd.Index(np.asarray(ids).astype(str).astype(object), dtype=object)


def var_frame(table: Optional[tuple], var_names: Any, column_at: Optional[int] = None) -> Any:
    """`var.parquet` (`(index columns, [(name, column)], [ordered categorical
    columns])` from the engine) as
    a DataFrame indexed by `var_names`; an empty frame when there is none.

    The parquet's pandas index names `var_names` when it holds them, as it
    does for a var index `deltacells.write` stored; `column_at` (the index
    was a column too, stored once) puts it among the columns too, there. A 10x or
    Cell Ranger conversion indexes it by gene id (`gene_ids`) while
    `var_names` are the symbols, as scanpy's `read_10x_mtx` names genes: the
    ids are then a column, first, as there, and the index (`var_names`) is
    unnamed."""
    import pandas as pd

    if table is None:
        return pd.DataFrame(index=var_names)
    index_columns, columns, ordered = table
    values = {name: pandas_column(col, name in ordered) for name, col in columns}
    if len(index_columns) == 1 and string_index(values[index_columns[0]]).equals(var_names):
        name = index_columns[0]
        column = values.pop(name)
        if column_at is not None:
            items = list(values.items())
            items.insert(min(column_at, len(items)), (name, column))
            values = dict(items)
        if name in ("__index_level_0__", "_index"):
            name = None  # pandas' and anndata's names for an unnamed index
        return pd.DataFrame(values, index=var_names.rename(name))
    first = {name: values.pop(name) for name in index_columns}
    return pd.DataFrame({**first, **values}, index=var_names)


__all__: list = []

"""`Dataset.batches`: one rank's training batches of one epoch, without torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, NamedTuple, Optional, Union

import numpy as np

from ._formats import convert
from ._tables import pandas_column
from .errors import InputError

if TYPE_CHECKING:
    from ._dataset import Dataset


class Batch(NamedTuple):
    """One batch: unpack it as `position, cells, X, obs`."""

    position: int
    """Position of the batch in the rank's epoch."""
    cells: np.ndarray
    """Global cell id (int64) of each row of `X`."""
    X: Any
    """The rows, in the iterator's `format` and `dtype`; columns follow `var_names`."""
    obs: Dict[str, Any]
    """The requested obs columns for exactly `cells`, as pandas-ready values
    (`pandas.DataFrame(batch.obs, index=batch.cells)` makes a frame of them)."""


class Batches:
    """One rank's batches of one epoch (see `Dataset.batches`).

    Nothing is decoded until it is iterated; each iteration runs the epoch
    again from the start of this span. `len()` is the number of batches;
    `batches[i:j]` is the span of batches `i..j` (positions in the rank's
    epoch, which `Batch.position` keeps), and `batches[i]` decodes batch `i`.
    """

    def __init__(self, dataset: "Dataset", options: dict, format: str,
                 start: int = 0, stop: Optional[int] = None):
        self._dataset = dataset
        self._options = options
        self._format = format
        self._start = start
        self._stop = stop

    def _epoch_len(self) -> int:
        options = dict(self._options, prefetch=0, obs_columns=[])
        return len(self._dataset._h.batches(**options))

    def _bounds(self) -> "tuple[int, int]":
        if self._stop is None:
            self._stop = max(self._start, self._epoch_len())
        return self._start, self._stop

    def __len__(self) -> int:
        start, stop = self._bounds()
        return stop - start

    def __getitem__(self, key: Union[int, slice]) -> Union["Batches", Batch]:
        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                raise InputError("a span of batches is contiguous (step 1)")
            first = self._start + start
            return Batches(self._dataset, self._options, self._format, first,
                           max(first, self._start + stop))
        if isinstance(key, (int, np.integer)):
            i = int(key) + n if key < 0 else int(key)
            if not 0 <= i < n:
                raise IndexError(f"batch {key} is outside 0..{n}")
            return next(iter(self[i:i + 1]))
        raise InputError("index batches with an int or a slice")

    def __iter__(self) -> Iterator[Batch]:
        start, stop = self._bounds()
        it = self._dataset._h.batches(**self._options, first=start, count=stop - start)
        for position, cells, rows, labels in it:
            if rows[0] == "dense":
                X = rows[1]
            else:
                X = convert(rows[1:], self._format)
            yield Batch(position, cells, X, {name: pandas_column(col) for name, col in labels})

    def __repr__(self) -> str:
        o = self._options
        span = f"{self._start}.." if self._stop is None else f"{self._start}..{self._stop}"
        return (f"deltacells.Batches(batches {span} of rank {o['rank']}/{o['world_size']}, "
                f"batch_size={o['batch_size']}, shuffle={o['shuffle']!r}, seed={o['seed']}, "
                f"epoch={o['epoch']}, format={self._format!r})")


__all__ = ["Batch", "Batches"]

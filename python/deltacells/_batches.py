"""`Dataset.batches`: one rank's training batches of one epoch, without torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, NamedTuple, Optional, Union

import numpy as np

from . import _deltacells
from ._formats import convert, import_for
from ._settings import integer, unsigned
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
        # The cells an epoch serves (a subset's, or the draws), which the
        # ranks share; the core is not told it (it resolves the same).
        options = dict(options)
        self.epoch_cells = int(options.pop("epoch_cells", dataset.n_obs))
        self._options = options
        self._format = format
        self._start = start
        self._stop = stop

    def _with_epoch(self) -> dict:
        """The settings a span of these batches is made with."""
        return dict(self._options, epoch_cells=self.epoch_cells)

    def _share(self) -> Any:
        """The core's account of the rank's batches (`_deltacells.RankShare`)."""
        o = self._options
        return _deltacells.RankShare(self.epoch_cells, o["batch_size"], o["rank"],
                                     o["world_size"], o["drop_last"], o["delivered"])

    def _bounds(self) -> "tuple[int, int]":
        if self._stop is None:
            self._stop = max(self._start, len(self._share()))
        return self._start, self._stop

    @property
    def span(self) -> range:
        """The positions, in the rank's epoch, of the batches this yields."""
        return range(*self._bounds())

    def for_worker(self, worker: int, workers: int, delivered: int = 0) -> "Batches":
        """The batches data-loader worker `worker` of `workers` yields from
        this rank's epoch, for a loader that takes one batch from each worker
        in turn and has delivered `delivered` of them already (0: a fresh
        epoch). The rank's batches are cut into `workers` contiguous spans,
        longer ones first, so that each worker decodes only its own windows;
        the loader's turns then give the rank's batches in the same order
        wherever it resumed."""
        if self._start != 0 or self._stop not in (None, len(self._share())):
            raise InputError("for_worker splits a rank's whole epoch, not a span of it")
        worker, workers = integer("worker", worker), unsigned("workers", workers)
        if not 0 <= worker < workers:
            raise InputError(f"worker {worker} is outside 0..{workers}")
        delivered = unsigned("delivered", delivered)
        first, stop = self._share().worker_resume(worker, workers, delivered)
        return Batches(self._dataset, self._with_epoch(), self._format, first, stop)

    def __len__(self) -> int:
        return len(self.span)

    def __getitem__(self, key: Union[int, slice]) -> Union["Batches", Batch]:
        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                raise InputError("a span of batches is contiguous (step 1)")
            first = self._start + start
            return Batches(self._dataset, self._with_epoch(), self._format, first,
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
        import_for(self._format, bool(self._options["obs_columns"]))
        ordered = self._dataset._ordered
        for position, cells, rows, labels in it:
            if rows[0] in ("dense", "tokens"):
                X = rows[1]
            else:
                X = convert(rows[1:], self._format)
            yield Batch(position, cells, X,
                        {name: pandas_column(col, name in ordered) for name, col in labels})

    def __repr__(self) -> str:
        o = self._options
        span = f"{self._start}.." if self._stop is None else f"{self._start}..{self._stop}"
        return (f"deltacells.Batches(batches {span} of rank {o['rank']}/{o['world_size']}, "
                f"batch_size={o['batch_size']}, shuffle={o['shuffle']!r}, seed={o['seed']}, "
                f"epoch={o['epoch']}, format={self._format!r})")


__all__ = ["Batch", "Batches"]

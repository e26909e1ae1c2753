"""Per-gene statistics of a dataset or a corpus (the engine's
`Dataset::gene_stats`, `Corpus::gene_stats`), in this process or as tasks on
a Dask client whose shares merge exactly."""

import os
from typing import Any, Optional, Union

from . import _deltacells
from ._corpus import Corpus
from ._dataset import Dataset
from ._settings import unsigned
from .errors import InputError


def _part(ds: Dataset, start: int, stop: int) -> bytes:
    """One task's statistics, of cells `start..stop` (runs on a worker)."""
    return _deltacells.gene_stats_part(ds._h, start, stop)


def _shares(client: Any, ds: Dataset, tiles_per_task: int) -> list:
    """One task per `tiles_per_task` tiles of `ds` on `client`: their futures."""
    limits = [int(x) for x in ds.tile_limits]
    starts = limits[:-1:tiles_per_task]
    stops = starts[1:] + [limits[-1]]
    return client.map(_part, [ds] * len(starts), starts, stops, key="deltacells-gene-stats",
                      pure=False)


def gene_stats(location: Union[str, "os.PathLike[str]", Dataset], *, gene_key: Optional[str] = None,
               client: Any = None, tiles_per_task: int = 8) -> Any:
    """Per-gene statistics of every cell of the dataset at `location` (or of
    an open `Dataset`; or of a corpus: an open `Corpus` or a corpus file), as
    a pandas DataFrame indexed by the gene key (the var names, or the
    `var.parquet` column `gene_key`; a corpus's vocabulary as it keys its
    genes), one row per gene in column order, with the columns of
    `deltacells stats`' gene_stats.parquet:

    `n_cells` (cells with a count above zero), `sum`, `mean`, `var` of the
    counts; `norm_mean`, `norm_var` of the normalized counts
    `count / cell_total * 10_000` (`cell_total` over all the dataset's genes);
    `norm_median`, the lower median of the nonzero normalized counts (the
    value of rank `(n - 1) // 2` among a gene's `n` sorted values, where
    `np.median` averages the two middle ones when `n` is even) from a sketch
    with 1% relative error (NaN for a gene no cell expresses). Variances are
    over all cells, zeros included (ddof 0). The engine computes everything
    in parallel, with exact sums; the Rust docs of `deltacells::dataset::gene_stats`
    give the formulas and their order of floating-point operations.

    A corpus's statistics are its members' over their own genes (each
    cell's `cell_total` over all of its member's genes), placed in the
    vocabulary's columns (a member without a gene counts its cells as zeros)
    and merged.

    `client`: a `distributed.Client`: one task per `tiles_per_task` tiles
    (of each member, for a corpus) runs on its workers, and their shares
    merge here into exactly the figures of one pass.
    """
    import pandas as pd

    if isinstance(location, Dataset):
        ds = location
    elif os.path.isfile(location):
        ds = Corpus.from_file(location)
    else:
        ds = Dataset(location)
    tiles_per_task = unsigned("tiles_per_task", tiles_per_task, least=1)
    if isinstance(ds, Corpus):
        if gene_key is not None and gene_key != ds.gene_key:
            raise InputError(f"a corpus's genes are keyed as the corpus keys them "
                             f"({ds.gene_key or 'var names'}), not by {gene_key!r}")
        parts = None
        if client is not None:
            members = [Dataset(loc) for loc in ds.locations]
            shares = [_shares(client, m, tiles_per_task) for m in members]
            parts = [client.gather(futures) for futures in shares]
        key, keys, columns = _deltacells.corpus_gene_stats(ds._h, parts)
        return pd.DataFrame(dict(columns), index=pd.Index(keys, name=key, dtype=object))
    parts = None
    if client is not None:
        parts = client.gather(_shares(client, ds, tiles_per_task))
    key, keys, columns = _deltacells.gene_stats(ds._h, gene_key, parts)
    return pd.DataFrame(dict(columns), index=pd.Index(keys, name=key, dtype=object))

"""deltacells: huge single-cell count matrices, decoded fast, from Python.

    import deltacells
    ds = deltacells.open("pbmc_dc")      # n_obs, n_vars, obs_names, var_names, obs, var
    X = ds[0:4096]                       # scipy.sparse.csr_matrix, float32; columns follow var_names
    X = ds.read([7, 3, 9], genes=["CD3E", "MS4A1"], dtype="int32", format="csr_array")
    obs = ds.read_obs(["cell_type"], cells=range(100))  # pandas.DataFrame
    adata = ds.to_anndata(cells=range(1000))            # anndata.AnnData, in memory
    for position, cells, X, obs in ds.batches(batch_size=256, seed=1): ...
    deltacells.write(adata, "out_dc")    # scipy, dense or AnnData in
    deltacells.build(["a.h5ad", "b.h5ad"], "ab_dc", gene_key="gene_ids", client=None)
    corpus = deltacells.Corpus(["a_dc", "b_dc"], genes="union")  # read as one, nothing rewritten
    corpus.save("ab.json"); corpus = deltacells.open("ab.json")
    stats = deltacells.gene_stats("pbmc_dc")  # pandas.DataFrame: n_cells, sum, mean, var, norm_*
    tokens = ds.read(range(256), tokenizer=deltacells.tokenize.Geneformer("tokens.tsv", "medians.tsv"))

`deltacells.torch.CellDataset` is the PyTorch loader.
"""

import os as _os
from typing import Optional as _Optional

from . import _deltacells, tokenize
from ._batches import Batch, Batches
from ._build import BuildSummary, build
from ._corpus import Corpus, open_location
from ._dataset import Dataset
from ._formats import FORMATS, CsrArrays
from ._stats import gene_stats
from ._write import write
from .errors import DeltacellsError, FormatError, InputError, StorageError

__version__: str = _deltacells.__version__


def open(location: "str | _os.PathLike[str]", *, threads: _Optional[int] = None,  # noqa: A001
         pin: bool = False, cache_bytes: _Optional[int] = None) -> Dataset:
    """Opens the dataset at `location` (a directory, or any location the
    engine accepts), checking its manifest and side files; a corpus file
    (`Corpus.save`) opens as its `Corpus`.

    `threads`: decode threads (default: every core); `pin`: pin them to cores
    (off by default: several Python processes usually share a host);
    `cache_bytes`: bound of the cache of tiles and decoded chunks shared by reads.
    """
    return open_location(location, threads=threads, pin=pin, cache_bytes=cache_bytes)


__all__ = ["open", "write", "build", "gene_stats", "BuildSummary", "Dataset", "Corpus", "Batch", "Batches",
           "CsrArrays", "FORMATS",
           "DeltacellsError", "FormatError", "InputError", "StorageError", "tokenize", "__version__"]

"""deltacells: huge single-cell count matrices, decoded fast, from Python.

    import deltacells
    ds = deltacells.open("pbmc_dc")
    X = ds[0:4096]                       # scipy.sparse.csr_matrix, float32
    X = ds.read([7, 3, 9], genes=["CD3E", "MS4A1"], dtype="int32")
    obs = ds.obs(["cell_type"])          # pandas.DataFrame
    deltacells.write(adata, "out_dc")    # scipy, dense or AnnData in

`deltacells.torch.CellDataset` is the PyTorch loader.
"""

from . import _deltacells
from ._dataset import Dataset
from ._write import write
from .errors import DeltacellsError, FormatError, InputError, StorageError

__version__ = _deltacells.__version__


def open(location, *, threads=None, pin=False, cache_bytes=None) -> Dataset:  # noqa: A001
    """Opens the dataset at `location` (a directory, or any location the
    engine accepts), checking its manifest and side files.

    `threads`: decode threads (default: every core); `pin`: pin them to cores
    (off by default: several Python processes usually share a host);
    `cache_bytes`: bound of the cache of tiles and decoded chunks shared by reads.
    """
    return Dataset(location, threads=threads, pin=pin, cache_bytes=cache_bytes)


__all__ = ["open", "write", "Dataset", "DeltacellsError", "FormatError", "InputError",
           "StorageError", "__version__"]

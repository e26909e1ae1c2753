"""What a read hands back: the decoded CSR arrays as scipy, numpy or torch values.

Every format but "numpy" wraps the engine's buffers without copying them.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Tuple

import numpy as np

from .errors import InputError

#: The formats of `Dataset.read`, `Dataset.iter_tiles` and `Dataset.batches`.
FORMATS = ("csr_matrix", "csr_array", "numpy", "torch", "arrays")


class CsrArrays(NamedTuple):
    """CSR rows as plain numpy arrays (`format="arrays"`): row `i`'s columns
    are `indices[indptr[i]:indptr[i + 1]]` and its values the same slice of
    `data`. Needs neither scipy nor torch."""

    indptr: np.ndarray
    """Row pointers, int64, one more than the rows."""
    indices: np.ndarray
    """Column of each value, int32."""
    data: np.ndarray
    """The values, float32 or int32."""
    shape: Tuple[int, int]
    """`(rows, columns)`."""


def check_format(format: str, allowed: Tuple[str, ...] = FORMATS) -> str:
    """`format` when it is one of `allowed`, else an `InputError`."""
    if format not in allowed:
        raise InputError(f"format must be one of {allowed}, not {format!r}")
    return format


def dtype_name(dtype: Any) -> str:
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


def convert(parts: tuple, format: str) -> Any:
    """The engine's `(indptr, indices, data, n_cols)` in `format`."""
    indptr, indices, data, n_cols = parts
    shape = (len(indptr) - 1, int(n_cols))
    if format == "arrays":
        return CsrArrays(indptr, indices, data, shape)
    if format == "csr_matrix":
        import scipy.sparse as sp

        return sp.csr_matrix((data, indices, indptr), shape=shape, copy=False)
    if format == "csr_array":
        import scipy.sparse as sp

        return sp.csr_array((data, indices, indptr), shape=shape, copy=False)
    if format == "torch":
        return torch_csr(indptr, indices, data, shape[1])
    out = np.zeros(shape, dtype=data.dtype)
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    out[rows, indices] = data
    return out


def import_for(format: str, labels: bool) -> None:
    """Imports what batches in `format` are made into (scipy.sparse, torch),
    and pandas for their obs labels when `labels`, unless imported already.
    Called once the engine decodes an epoch's first batch, so that the
    imports run meanwhile instead of after it: scipy.sparse alone takes about
    a quarter of a second, which a process's first batch waited for."""
    if format in ("csr_matrix", "csr_array"):
        import scipy.sparse  # noqa: F401
    elif format == "torch":
        import torch  # noqa: F401
    if labels:
        import pandas  # noqa: F401


def torch_csr(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_cols: int) -> Any:
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


__all__ = ["CsrArrays", "FORMATS"]

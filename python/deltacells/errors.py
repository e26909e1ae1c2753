"""Exceptions raised by deltacells.

Every error from the Rust engine arrives as one of these, carrying the
engine's message (which names the tile, chunk, byte offset or cell at fault).
"""


class DeltacellsError(Exception):
    """Base class of every deltacells error."""


class FormatError(DeltacellsError):
    """Stored data breaks the format: a corrupt tile, manifest, side file or obs shard."""


class InputError(DeltacellsError, ValueError):
    """An argument is invalid: a cell or gene out of range, a bad count, a bad option."""


class StorageError(DeltacellsError, OSError):
    """Reading or writing the store failed (a missing directory, a failed write)."""


__all__ = ["DeltacellsError", "FormatError", "InputError", "StorageError"]

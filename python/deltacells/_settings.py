"""Checks of the settings the engine holds as numbers, so that a bad one is
an `InputError` naming it rather than the binding's `OverflowError` or
`TypeError`, or a value quietly truncated."""

import math
import numbers
import operator
from typing import Any

import numpy as np

from .errors import InputError


def integer(name: str, value: Any) -> int:
    """`value` as an int: an integer (Python's or numpy's), or a float that
    holds one (`cache_bytes=4e9`). A fractional float, a string or a bool is
    refused where `int()` would have truncated or parsed it."""
    if not isinstance(value, (bool, np.bool_)):
        try:
            return operator.index(value)
        except TypeError:
            if isinstance(value, numbers.Real) and float(value).is_integer():
                return int(value)
    raise InputError(f"{name} must be an integer, not {value!r}")


def unsigned(name: str, value: Any, least: int = 0) -> int:
    """`value` as an int in `least..2**64`, the range the engine's setting
    holds, else an `InputError` naming the setting."""
    v = integer(name, value)
    if not least <= v < 2**64:
        raise InputError(f"{name} must be an integer in {least}..2**64, not {value!r}")
    return v


def positive(name: str, value: Any) -> float:
    """`value` as a positive finite float (a target sum), else an
    `InputError` naming the setting; a string or a bool is refused rather
    than parsed."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        v = float(value)
        if math.isfinite(v) and v > 0:
            return v
    raise InputError(f"{name} must be a positive finite number, not {value!r}")


#: zstd's compression levels: its fast modes (negative, down to
#: `ZSTD_minCLevel()`), 0 for its default, and 1 up to `ZSTD_maxCLevel()`.
#: zstd clamps a level outside them without a word, so the manifest would
#: record a level the tiles were not written at.
ZSTD_LEVELS = range(-(1 << 17), 23)


def zstd_level(name: str, value: Any) -> int:
    """`value` as a zstd level, else an `InputError` naming the setting."""
    v = integer(name, value)
    if v not in ZSTD_LEVELS:
        raise InputError(f"{name} must be a zstd level in {ZSTD_LEVELS.start}..="
                         f"{ZSTD_LEVELS.stop - 1}, not {value!r}")
    return v

"""Checks of the integer settings the engine holds as unsigned numbers, so
that a bad one is an `InputError` naming it rather than the binding's
`OverflowError` or `TypeError`."""

from typing import Any

from .errors import InputError


def unsigned(name: str, value: Any, least: int = 0) -> int:
    """`value` as an int in `least..2**64`, the range the engine's setting
    holds, else an `InputError` naming the setting."""
    v = int(value)
    if not least <= v < 2**64:
        raise InputError(f"{name} must be an integer in {least}..2**64, not {value!r}")
    return v

"""The ranges of the numbers users give zoo's functions (and, through them, the ``zoo`` command).

Each check takes one argument and returns it, or raises ``ArgumentError`` naming the argument, its range
and the value given: Python callers and the CLI get the same message, and no out-of-range number reaches
torch (where a 26-digit seed overflows and an infinite temperature silently samples uniformly).
No torch here: ``zoo.train.config`` imports this module. (Recipe limits live in ``zoo.recipe.limits``.)
"""

from __future__ import annotations

import math
import operator
from typing import Any

from .errors import ArgumentError

MAX_SEED = 2**63 - 1
"""Seeds are 0 .. 2^63 - 1: what every torch generator accepts."""
MAX_SIZE = 2**31 - 1
"""The largest count (batch, sequence length, steps, intervals...): beyond any real use, inside tensor shapes."""


def check_int(name: str, value: Any, *, low: int = 0, high: int = MAX_SIZE) -> int:
    """``value`` as an int in ``[low, high]`` (a bool is not an int here)."""
    if isinstance(value, bool):
        raise ArgumentError(f"{name} must be an integer, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ArgumentError(f"{name} must be an integer, got {value!r}") from None
    if not low <= number <= high:
        raise ArgumentError(f"{name} must be >= {low} and <= {_bound(high)}, got {number}")
    return number


def check_float(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a finite float in the interval given (``low_open``: ``low`` itself excluded)."""
    if isinstance(value, bool):
        raise ArgumentError(f"{name} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ArgumentError(f"{name} must be a number, got {value!r}") from None
    interval = (
        f"{'(' if low_open or low is None else '['}{'-inf' if low is None else low}, "
        f"{'inf' if high is None else high}{')' if high_open or high is None else ']'}"
    )
    if not math.isfinite(number):
        raise ArgumentError(f"{name} must be a finite number in {interval}, got {value!r}")
    below = low is not None and (number <= low if low_open else number < low)
    above = high is not None and (number >= high if high_open else number > high)
    if below or above:
        raise ArgumentError(f"{name} must be in {interval}, got {value!r}")
    return number


def _bound(n: int) -> str:
    return {MAX_SEED: "2^63 - 1", MAX_SIZE: "2^31 - 1"}.get(n, f"{n:,}")


def count_argument(low: int = 1, high: int = MAX_SIZE) -> Any:
    """An ``argparse`` type for a count in ``[low, high]`` (the tools' ``--rounds``, ``--steps``...)."""
    import argparse

    def parse(text: str) -> int:
        try:
            return check_int("the value", int(text), low=low, high=high)
        except (ValueError, ArgumentError) as exc:
            message = str(exc) if isinstance(exc, ArgumentError) else f"expected an integer, got {text!r}"
            raise argparse.ArgumentTypeError(message) from None

    return parse

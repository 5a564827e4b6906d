"""Checks of the numbers Python callers pass (counts, indices, seeds, time spans): each refuses
a value of the wrong type or range with a ``TypeError`` / ``ValueError`` naming the argument and
what is accepted, where ``int()`` would truncate ``1.5`` and NumPy would raise an overflow error
that names nothing."""

from __future__ import annotations

import math
import numbers
from typing import Any


def _count(field: str, value: Any) -> int:
    """An integer count ≥ 1 (``int``, NumPy integers), or a ``TypeError``/``ValueError`` naming
    ``field``: ``1.5`` or ``True`` are refused rather than truncated."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{field}: got {value!r} ({type(value).__name__}); accepted: an integer ≥ 1")
    if value < 1:
        raise ValueError(f"{field}: got {value}; accepted: an integer ≥ 1")
    return int(value)


def _index(field: str, value: Any) -> int:
    """An integer index ≥ 0 (``int``, NumPy integers), or a ``TypeError``/``ValueError`` naming
    ``field``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{field}: got {value!r} ({type(value).__name__}); accepted: an integer ≥ 0")
    number = int(value)
    if number < 0:
        raise ValueError(f"{field}: got {number}; accepted: an integer ≥ 0")
    return number


def _seed(field: str, value: Any) -> int:
    """A seed: an integer in [0, 2**64) (``int``, NumPy integers), or a ``TypeError``/
    ``ValueError`` naming ``field`` (NumPy's own overflow errors name nothing)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{field}: got {value!r} ({type(value).__name__}); accepted: an integer in [0, 2**64)")
    number = int(value)
    if not 0 <= number < 2**64:
        raise ValueError(f"{field}: got {number}; accepted: an integer in [0, 2**64)")
    return number


def _seconds(field: str, value: Any) -> float:
    """A time span in seconds: a finite real number > 0 (``int``, ``float``, NumPy scalars), or
    a ``TypeError``/``ValueError`` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{field}: got {value!r} ({type(value).__name__}); accepted: a finite number > 0 (s)")
    number = float(value)
    if not (math.isfinite(number) and number > 0.0):
        raise ValueError(f"{field}: got {number!r}; accepted: a finite number > 0 (s)")
    return number

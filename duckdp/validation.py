"""One rule for every numeric parameter: a real number (int, float, numpy number, Fraction, Decimal),
never a boolean or a string, checked before anything runs.

Python's `float()` turns `True` into 1.0 and `"1e-6"` into 1e-6, so a typo or a CLI string would
silently become a privacy budget; refusing them everywhere keeps the API predictable.
"""
from __future__ import annotations

import decimal
import math
import numbers

import numpy as np

from .errors import InvalidParameter


def _is_real(value) -> bool:
    return (isinstance(value, (numbers.Real, decimal.Decimal))
            and not isinstance(value, (bool, np.bool_)))


def real(name: str, value) -> float:
    """`value` as a finite float; booleans, strings and non-numbers are refused."""
    if not _is_real(value):
        raise InvalidParameter(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v):
        raise InvalidParameter(f"{name} must be a finite number, got {value!r}")
    return v


def integer(name: str, value, low: int, high: int | None = None) -> int:
    """`value` as an int in [low, high]; booleans, strings, floats and non-numbers are refused."""
    bounds = f">= {low:,}" + (f" and <= {high:,}" if high is not None else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidParameter(f"{name} must be an integer {bounds}, got {value!r} ({type(value).__name__})")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise InvalidParameter(f"{name} must be an integer {bounds}, got {value!r}")
    return v


def seed(value) -> int | None:
    """A reproducibility seed: None (fresh secure randomness) or an integer in [0, 2¹²⁷) (the PRF key is
    derived from its 128-bit encoding, duckdp/prf.py)."""
    if value is None:
        return None
    value = integer("seed", value, 0)
    if value >= 2**127:
        raise InvalidParameter(f"seed must be below 2**127, got {value!r}")
    return value

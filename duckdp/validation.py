"""Every input check, in one place. One rule for every numeric parameter: a real number (int, float,
numpy number, Fraction, Decimal), never a boolean or a string, checked before anything runs.

Python's `float()` turns `True` into 1.0 and `"1e-6"` into 1e-6, so a typo or a CLI string would
silently become a privacy budget; refusing them everywhere keeps the API predictable.
"""
from __future__ import annotations

import decimal
import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from .errors import InvalidParameter

# Largest Δ0 accepted: far beyond any real per-user key count, exact as a float, and planned by
# `max_over_k` (privacy/calibration.py) in well under a second (2⁵³ would take seconds: float noise terms
# flatten there).
MAX_CONTRIBUTIONS = 10**15


def _is_real(value: object) -> bool:
    return (isinstance(value, (numbers.Real, decimal.Decimal))
            and not isinstance(value, (bool, np.bool_)))


def real(name: str, value: object) -> float:
    """`value` as a finite float; booleans, strings and non-numbers are refused."""
    if not _is_real(value):
        raise InvalidParameter(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    v = float(value)  # type: ignore[arg-type]   # a numbers.Real or Decimal (checked above)
    if not math.isfinite(v):
        raise InvalidParameter(f"{name} must be a finite number, got {value!r}")
    return v


def positive(name: str, value: object) -> float:
    """A finite float > 0 (ε, ρ, a ratio)."""
    v = real(name, value)
    if v <= 0:
        raise InvalidParameter(f"{name} must be a finite number > 0, got {value!r}")
    return v


def delta(value: object, name: str = "delta") -> float:
    """A δ: a float in (0, 1)."""
    v = real(name, value)
    if not (0.0 < v < 1.0):
        raise InvalidParameter(f"{name} must be in (0, 1), got {value!r}")
    return v


def between(name: str, value: object, low: float, high: float = math.inf) -> float:
    """A float in the open interval (low, high)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not (low < float(value) < high):
        raise InvalidParameter(f"{name} must be a number in ({low:g}, {high:g}), got {value!r}")
    return float(value)


def integer(name: str, value: object, low: int, high: int | None = None) -> int:
    """`value` as an int in [low, high]; booleans, strings, floats and non-numbers are refused."""
    bounds = f">= {low:,}" + (f" and <= {high:,}" if high is not None else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidParameter(f"{name} must be an integer {bounds}, got {value!r} ({type(value).__name__})")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise InvalidParameter(f"{name} must be an integer {bounds}, got {value!r}")
    return v


def max_contributions(value: object) -> int:
    """Δ0: an integer in [1, MAX_CONTRIBUTIONS]."""
    return integer("max_contributions", value, 1, MAX_CONTRIBUTIONS)


TRUNCATIONS = ("per_user", "global")


def truncation(value: object) -> str:
    """The Δ0 truncation order (stages/base.py `Engine.truncate`): "per_user" — each user keeps the Δ0 keys of
    smallest keyed hash of (user, key), a uniform subset independent across users — or "global" — each user
    keeps the Δ0 keys of smallest keyed hash of the key alone, one secret order of the keys for every user."""
    if not isinstance(value, str) or value not in TRUNCATIONS:
        raise InvalidParameter(f"truncation must be one of {', '.join(repr(t) for t in TRUNCATIONS)} "
                               f"(the order in which a user over Δ0 keeps keys), got {value!r}")
    return value


class Declared(Protocol):
    """A declared mechanism parameter (mechanisms.base.Param): name, default (None = derived), validator."""

    @property
    def name(self) -> str: ...

    @property
    def default(self) -> Any: ...

    @property
    def check(self) -> Callable[[Any], Any] | None: ...


def mechanism_params(mechanism: str, declared: Sequence[Declared], given: Mapping[str, Any],
                     unproven: str | None = None, none_is_default: bool = True) -> dict[str, Any]:
    """A mechanism's own parameters: `given` with defaults filled and each value validated by its
    declared check; unknown names are errors (typos must not pass silently). A mechanism kept only as
    a published baseline (`unproven`: why its guarantee is not established) needs allow_unproven=True.
    A value given as None means the default, unless `none_is_default` is False (then it is checked).
    """
    given = dict(given)
    if unproven:
        if given.pop("allow_unproven", False) is not True:
            raise InvalidParameter(f"{mechanism}: {unproven} It runs only with allow_unproven=True "
                                   "(e.g. to reproduce published baselines); do not use it to protect real data.")
    known = {p.name: p for p in declared}
    unknown = sorted(set(given) - set(known))
    if unknown:
        hint = f"; it takes {', '.join(sorted(known))}" if known else "; it takes no extra parameters"
        raise InvalidParameter(f"{mechanism} does not take {', '.join(unknown)}{hint}")
    out = {}
    for p in declared:
        value = p.default if (p.name not in given or (none_is_default and given[p.name] is None)) else given[p.name]
        out[p.name] = p.check(value) if (p.check and (value is not None or not none_is_default)) else value
    return out


def not_above(low_name: str, low: float, high_name: str, high: float) -> None:
    """Two settings that must be ordered, low ≤ high (e.g. adaptive SIPS's a_drop and a_full)."""
    if low > high:
        raise InvalidParameter(f"{low_name}={low:g} must not exceed {high_name}={high:g}")


def ledger_key(value: object) -> bytes | None:
    """A Session's chain key: None, or bytes of length ≥ 16 kept by the owner."""
    if value is not None and (not isinstance(value, bytes) or len(value) < 16):
        raise InvalidParameter("key must be bytes of length >= 16 (e.g. os.urandom(32)), kept by the owner")
    return value


def anchor(value: object) -> str | os.PathLike[str] | bool | None:
    """A ledger guard location: None (the default), a file path, or False (no guard file)."""
    if value is not None and value is not False and not isinstance(value, (str, os.PathLike)):
        raise InvalidParameter(f"anchor must be a file path or False (no guard file), got {value!r}")
    return value


def flag(name: str, value: object) -> bool:
    """True or False, nothing else (no truthy strings or numbers)."""
    if not isinstance(value, bool):
        raise InvalidParameter(f"{name} must be True or False, got {value!r}")
    return value


def seed(value: object) -> int | None:
    """A reproducibility seed: None (fresh secure randomness) or an integer in [0, 2¹²⁷) (the PRF key is
    derived from its 128-bit encoding, duckdp/prf.py)."""
    if value is None:
        return None
    value = integer("seed", value, 0)
    if value >= 2**127:
        raise InvalidParameter(f"seed must be below 2**127, got {value!r}")
    return value

"""Shared pieces of the paired A/B benchmarks (ab_*.py): the wall and CPU seconds of one call, and the
order in which a repeat runs its variants — reversed every other repeat, so a change of machine load
between two variants hits each side alike."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall s, CPU s of this process and its threads, result) of one call of `fn`."""
    t0, w = os.times(), time.perf_counter()
    out = fn()
    t1 = os.times()
    return time.perf_counter() - w, (t1.user + t1.system) - (t0.user + t0.system), out


def alternating(variants: Sequence[T], repeat: int) -> Sequence[T]:
    """The variants in order on even repeats, reversed on odd ones."""
    return variants if repeat % 2 == 0 else variants[::-1]

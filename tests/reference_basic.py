"""Numpy reference of the Basic mechanisms' weights (Gopi et al. ICML'20 §1.1, journal App. B)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable


def kept_weights(kept: Iterable[tuple[Hashable, float]], exponent: float) -> dict:
    """Per-key weights of kept (key, d) pairs, d = the pair's user's kept size: Σ d^(−exponent)."""
    weights: dict = defaultdict(float)
    for key, d in kept:
        weights[key] += d ** (-exponent)
    return dict(weights)


def basic_weights(users, items, exponent: float, max_contributions: int) -> dict:
    """Per-item weights when no user exceeds Δ0: Σ_u |W_u|^(−exponent) over users holding the item."""
    sets = defaultdict(set)
    for u, i in zip(users, items, strict=True):
        sets[u].add(i)
    if any(len(s) > max_contributions for s in sets.values()):
        raise ValueError("reference is for inputs without truncation")
    return kept_weights(((i, len(s)) for s in sets.values() for i in s), exponent)


EXPONENT = {"weighted_gaussian": 0.5, "weighted_laplace": 1.0, "count_gaussian": 0.0, "count_laplace": 0.0}

"""Numpy reference of the Basic mechanisms' weights (Gopi et al. ICML'20 §1.1, journal App. B)."""
from __future__ import annotations

from collections import defaultdict


def basic_weights(users, items, exponent: float, max_contributions: int) -> dict:
    """Per-item weights when no user exceeds Δ0: Σ_u |W_u|^(−exponent) over users holding the item."""
    sets = defaultdict(set)
    for u, i in zip(users, items, strict=True):
        sets[u].add(i)
    weights = defaultdict(float)
    for s in sets.values():
        if len(s) > max_contributions:
            raise ValueError("reference is for inputs without truncation")
        w = len(s) ** (-exponent)
        for i in s:
            weights[i] += w
    return dict(weights)


EXPONENT = {"weighted_gaussian": 0.5, "weighted_laplace": 1.0, "count_gaussian": 0.0, "count_laplace": 0.0}

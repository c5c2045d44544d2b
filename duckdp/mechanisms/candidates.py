"""How many open pairs per user a lazy-noise round ranks first (MAD2R and adaptive SIPS on DuckDB).

Both draw the noise of keys no user kept only where a truncation needs it: each user's first m pairs
not noised yet (adaptive SIPS: about m, under an order threshold), in the truncation's order, get their
noise; a user cut there with fewer than Δ0 of them still in play gets a second pass over all of theirs.
Any m ≥ 1 gives the same release; m only sets how often the second pass runs.
"""
from __future__ import annotations

import math

SLACK = 64          # candidates beyond the expected need: a user's R̃_u almost always lies among them


def candidate_limit(need: int, stay: float) -> int:
    """m for `need` pairs in play (Δ0) when a candidate stays in play with probability `stay`: about
    twice the expected need, need / stay, plus SLACK (the floor 1e-9 keeps m finite)."""
    return math.ceil(2 * need / max(stay, 1e-9)) + SLACK

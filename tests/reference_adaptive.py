"""Numpy reference of adaptive SIPS, written step by step from docs/specs/adaptive-sips.md.

Items are integers 0..m−1; a dataset is a list of per-user arrays of distinct items. Plans (σ_j, T_j,
c_j) come from duckdp's `plan()`, whose calibration is tested against independent values.
"""
from __future__ import annotations

import numpy as np


def user_vector(levels: np.ndarray, cap_factor: float, passes: int = 50) -> np.ndarray:
    """Step 3 literally: scale the levels to unit ℓ2 norm, cap each entry at c/√d, re-spread the mass
    the cap removed over the uncapped entries (water-filling passes), then a final clip."""
    levels = np.asarray(levels, dtype=float)
    d = len(levels)
    cap = cap_factor / np.sqrt(d)
    x = levels / np.linalg.norm(levels)
    capped = np.zeros(d, dtype=bool)
    for _ in range(passes):
        over = ~capped & (x > cap)
        if not over.any():
            break
        capped |= over
        x[capped] = cap
        rest = ~capped
        left = max(1.0 - capped.sum() * cap * cap, 0.0)
        if rest.any():
            x[rest] = levels[rest] * np.sqrt(left / np.sum(levels[rest] ** 2))
    return np.minimum(x, cap)


def truncate(sets: list[np.ndarray], d0: int, rng) -> list[np.ndarray]:
    """Step 2: a uniform min(|R_u|, Δ0)-subset of every user's remaining set."""
    return [R if len(R) <= d0 else rng.choice(R, d0, replace=False) for R in sets]


def round_weights(kept: list[np.ndarray], level: np.ndarray, cap_factor: float, m: int) -> np.ndarray:
    """Step 4's w = Σ_u x_u over the kept sets R̃_u with the keys' current levels."""
    w = np.zeros(m)
    for K in kept:
        if len(K):
            w[K] += user_vector(level[K], cap_factor)
    return w


def adaptive_sips(sets: list[np.ndarray], m: int, plan, params: dict, d0: int, rng,
                  support_only: bool = False, noise=None, trace: list | None = None) -> list[np.ndarray]:
    """Run every round; return the keys released per round.

    `support_only=True` is the WRONG rule of the spec's trap (keys outside the round's support
    ∪R̃_u are treated as dropped) and exists only so tests can show what it breaks. `noise(j, m)`
    may supply round j's standard normal draws (tests couple neighbouring datasets with it);
    `trace` receives every round's remaining sets R_u.
    """
    released = np.zeros(m, dtype=bool)
    dropped = np.zeros(m, dtype=bool)
    level = np.ones(m)
    out = []
    for j, rp in enumerate(plan):
        out_of_play = released | dropped
        remaining = [S[~out_of_play[S]] for S in sets]                              # step 1
        if trace is not None:
            trace.append(remaining)
        kept = truncate(remaining, d0, rng)                                         # step 2
        w = round_weights(kept, level, rp.extra.cap, m)                          # steps 3–4
        z = noise(j, m) if noise is not None else rng.standard_normal(m)
        noisy = w + rp.scale * z                                                    # every key
        support = np.zeros(m, dtype=bool)
        for K in kept:
            support[K] = True
        in_play = np.zeros(m, dtype=bool)
        for R in remaining:
            in_play[R] = True
        new = support & (noisy >= rp.threshold)                                     # step 5
        released |= new
        out.append(np.flatnonzero(new))
        zs = noisy / rp.scale                                                       # step 6
        dropped |= in_play & (zs < params["a_drop"])
        if support_only:
            dropped |= in_play & ~support
        level = np.where(zs >= params["a_full"], 1.0, params["beta_min"])
    return out

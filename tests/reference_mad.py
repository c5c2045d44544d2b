"""Numpy reference of MAD / MAD2R, written line by line from the pseudocode of docs/specs/mad-mad2r.md.

Items are integers 0..m−1 and a dataset is a list of per-user arrays of distinct items. Plans
(σ, T, τ, f, …) come from duckdp's `plan()`, whose calibration is tested against golden values.
"""
from __future__ import annotations

import numpy as np


def user_weights(bias: np.ndarray, beta_min: float, beta_max: float) -> np.ndarray:
    """UserWeights (spec §4, paper Alg. 2) for one user whose items carry biases `bias`."""
    d = len(bias)
    b = np.clip(bias, beta_min, 1.0)                 # biases only ever down-weight
    v = b / np.sqrt(d)                               # in [β_min/√d, 1/√d]
    s = np.sum(v ** 2)                               # in [β_min², 1]
    cap = beta_max / np.sqrt(d)
    w = np.minimum(v / np.sqrt(s), cap)              # normalise, then cap
    for _ in range(d):                               # the loop runs at most d times (§4)
        if not (np.linalg.norm(w) < 1 and np.any(w < cap)):
            break
        U = w < cap
        to_cap = cap / np.max(w[U])
        to_norm = np.sqrt((1 - np.sum(w[~U] ** 2)) / np.sum(w[U] ** 2))
        if to_cap <= to_norm:                        # the largest uncapped entries reach the cap
            hit = U & (w == np.max(w[U]))
            w[U] *= to_cap
            w[hit] = cap
        else:
            w[U] *= to_norm
    return w


def basic_weights(sets: list[np.ndarray], m: int) -> np.ndarray:
    """Basic weighting (spec §3): w_i = Σ_{u ∋ i} 1/√|S_u|."""
    w = np.zeros(m)
    for S in sets:
        w[S] += 1 / np.sqrt(len(S))
    return w


def mad_weights(sets: list[np.ndarray], m: int, tau: float, f: float, min_degree: int, max_degree: int,
                beta: np.ndarray | None = None, beta_min: float = 1.0, beta_max: float = 1.0,
                stages: bool = False):
    """MAD (spec §5, paper Alg. 3) on already-capped sets; `stages=True` also returns ŵ (stage 1)."""
    beta = np.ones(m) if beta is None else beta
    wu = [user_weights(beta[S], beta_min, beta_max) for S in sets]
    d = [len(S) for S in sets]
    A = [min_degree <= du <= max_degree for du in d]
    # Stage 1 — initial weight
    init = np.zeros(m)
    for S, w, du, a in zip(sets, wu, d, A, strict=True):
        if a:
            init[S] += w / np.sqrt(du)
    # Stage 2 — truncate at the adaptive threshold
    t = np.minimum(init, tau)
    rho = np.divide(init - t, init, out=np.zeros(m), where=init > 0)
    # Stage 3 — return the excess in proportion to contribution
    e = [np.sum(rho[S] * w / np.sqrt(du)) if a else 0.0 for S, w, du, a in zip(sets, wu, d, A, strict=True)]
    # Stage 4 — reroute f·e_u along w^u, then the top-up (1 − 1/√d)·w^u; non-adaptive users add w^u
    out = t.copy()
    for S, w, du, a, eu in zip(sets, wu, d, A, e, strict=True):
        if a:
            out[S] += f * eu * w + (1 - 1 / np.sqrt(du)) * w
        else:
            out[S] += w
    return (out, init) if stages else out


def cap_sets(sets: list[np.ndarray], d0: int, rng) -> list[np.ndarray]:
    """Alg. 1 step 1 (spec §2): a uniform subset of Δ0 items for every user above Δ0."""
    return [S if len(S) <= d0 else rng.choice(S, d0, replace=False) for S in sets]


def support(sets: list[np.ndarray], m: int) -> np.ndarray:
    on = np.zeros(m, dtype=bool)
    for S in sets:
        on[S] = True
    return on


def _mad_round(sets, m, plan, d0, rng, beta=None):
    capped = [S for S in cap_sets(sets, d0, rng) if len(S)]
    x = plan.extra
    w = mad_weights(capped, m, x.tau, x.reroute, x.min_degree, x.max_degree, beta,
                    x.beta_min, x.beta_max)
    return w, support(capped, m)


def mad_release(sets, m, plan, d0, rng) -> np.ndarray:
    """WeightAndThreshold with MAD (spec §2 steps 1–5): the released items as a boolean mask."""
    w, on = _mad_round(sets, m, plan, d0, rng)
    return on & (w + plan.scale * rng.standard_normal(m) >= plan.threshold)


def mad2r_release(sets, m, plans, d0, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MAD2R (spec §6, paper Alg. 4): the masks O1, O2 and the round-2 items with a bias below 1."""
    p1, p2 = plans
    w1, on1 = _mad_round(sets, m, p1, d0, rng)
    noisy1 = w1 + p1.scale * rng.standard_normal(m)                  # ŵ1 over the whole universe
    O1 = on1 & (noisy1 >= p1.threshold)
    L, U = noisy1 - p2.extra.lower, noisy1 + p2.extra.upper
    tau2 = p2.extra.tau
    keep = ~O1 & ~(U < p2.threshold)                                   # (a) and (b)
    beta = np.where(L > tau2, tau2 / np.where(L > tau2, L, 1.0), 1.0)  # (c)
    sets2 = [S[keep[S]] for S in sets]
    w2, on2 = _mad_round(sets2, m, p2, d0, rng, beta)
    O2 = on2 & (w2 + p2.scale * rng.standard_normal(m) >= p2.threshold)
    return O1, O2, keep & (beta < 1)

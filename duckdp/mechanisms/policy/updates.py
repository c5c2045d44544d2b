"""One user's update of the weights of their items under the sequential policies (pure numpy).

Each function takes `h`, the current weights of the user's items (in the user's order for GW),
and the cutoff Γ, and returns their new weights. Weights only grow, never past Γ; an item already
at or above Γ keeps its weight. Items that reach Γ are set to Γ exactly, so float rounding never
leaves a sliver below the cutoff.

Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially Private Set Union" (journal
version): ℓ1-descent with an ℓ1 budget (Alg. 4), ℓ2-descent (Alg. 7) and ℓ1-descent with an ℓ2
budget (Alg. 8). Carvalho, Wang, Gondara (AAAI 2022), as described in DP-SIPS §3.2.2: greedy
filling (GW). In the branch where the whole gap fits the budget (‖G‖ ≤ 1), Alg. 4 and Alg. 8 as
printed leave H unchanged; the text and the contractivity proofs move every item to Γ, as here.
"""
from __future__ import annotations

import numpy as np


def _gaps(h: np.ndarray, gamma: float) -> np.ndarray:
    """G = Γ − H, zero for items already at or above the cutoff."""
    return np.maximum(gamma - h, 0.0)


def _apply(h: np.ndarray, gaps: np.ndarray, increments: np.ndarray, gamma: float) -> np.ndarray:
    """H + increments, with items whose whole gap was filled set to Γ exactly."""
    out = h + increments
    out[(increments >= gaps) & (gaps > 0)] = gamma
    return out


def water_level(gaps: np.ndarray, power: float) -> float:
    """λ ≥ 0 with Σ min(G_u, λ)^p = 1, for gaps with Σ G_u^p > 1 (Alg. 4: p = 1; Alg. 8: p = 2).

    With the gaps sorted, s_0 ≤ … ≤ s_{n−1}, and c_k = Σ_{j<k} s_j^p, the level is
    λ_k = ((1 − c_k)/(n − k))^{1/p} at the first k with λ_k ≤ s_k (the items below k are filled).
    """
    s = np.sort(gaps)
    filled = np.concatenate(([0.0], np.cumsum(s[:-1] ** power)))
    rest = np.arange(len(s), 0, -1, dtype=np.float64)
    levels = (np.maximum(1.0 - filled, 0.0) / rest) ** (1.0 / power)
    fits = levels <= s
    fits[-1] = True   # exact in real arithmetic whenever Σ s^p > 1; guards the float edge
    return float(levels[np.argmax(fits)])


def l1_descent(h: np.ndarray, gamma: float) -> np.ndarray:
    """ℓ1-descent, ℓ1 budget 1 (journal Alg. 4): raise all items below Γ evenly, capped at Γ."""
    g = _gaps(h, gamma)
    if g.sum() <= 1.0:
        return _apply(h, g, g, gamma)
    return _apply(h, g, np.minimum(g, water_level(g, 1.0)), gamma)


def l2_descent(h: np.ndarray, gamma: float) -> np.ndarray:
    """ℓ2-descent (journal Alg. 7): move H towards (Γ, …, Γ) by an ℓ2 distance of at most 1."""
    g = _gaps(h, gamma)
    norm = float(np.sqrt(g @ g))
    if norm <= 1.0:
        return _apply(h, g, g, gamma)
    return h + g / norm


def l1_descent_l2(h: np.ndarray, gamma: float) -> np.ndarray:
    """ℓ1-descent, ℓ2 budget 1 (journal Alg. 8): λ with Σ min(G, λ)² = 1, each item gets min(G, λ).

    Not ℓ2-contractive in general, contrary to the journal's Prop. 5.1: the proof takes the
    Jacobian's lower-left block as 0, but ∂λ/∂x_j = (Γ − x_j)/((d − t)λ) there (spectral norm
    ‖G_f‖/(√(d−t)·λ), above 1 when the t filled gaps are near λ). The tests pin neighbour pairs
    whose histograms are up to 1.48 apart in ℓ2 at the journal's Δ0 = 100 (1.70 at Δ0 = 300).
    """
    g = _gaps(h, gamma)
    if float(g @ g) <= 1.0:
        return _apply(h, g, g, gamma)
    return _apply(h, g, np.minimum(g, water_level(g, 2.0)), gamma)


def greedy_fill(h: np.ndarray, gamma: float) -> np.ndarray:
    """GW (DP-SIPS §3.2.2): in the given order, each item gets min(G, budget left) of an ℓ1 budget 1."""
    g = _gaps(h, gamma)
    before = np.cumsum(g) - g
    return _apply(h, g, np.clip(1.0 - before, 0.0, g), gamma)

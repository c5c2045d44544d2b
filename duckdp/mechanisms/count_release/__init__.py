"""Private Count Release (Rogers 2024, Alg. 2) as a mechanism: keys with noisy distinct-user counts.

Rogers, "Private Count Release: A Simple and Scalable Approach for Private Data Analytics" (2024),
Alg. 2, with Unknown-Domain Gumbel (Alg. 1; Durfee & Rogers, NeurIPS 2019) as the selection step.

Sensitivity: a user adds at most 1 to each distinct-user count (ℓ∞ = ℓ2 sensitivity 1 per count)
and may touch any number of keys; no ℓ0 bound is needed. Privacy: each Unknown-Domain Gumbel call
with β = 1/ε and T = 1 + log(k̄/δ*)/ε is δ*-approximate ε²/8-zCDP (Thm 4, k = 1); each released
count gets discrete Gaussian noise N_Z(0, σ²) with σ > 2/ε, which is 1/(2σ²)-zCDP like the
continuous Gaussian of Rogers' Thm 2 (Canonne, Kamath, Steinke 2020, arXiv:2004.00010 Prop. 4): released
counts are exact integers, sampled exactly (duckdp/discrete.py), so no float artefact tells which
neighbour produced them (Mironov 2012). The loop is a privacy filter
(Whitehouse et al., Thm 5): it only starts a step while ρ_spent + ε²/4 ≤ ρ and δ_spent + δ* ≤ δ,
and a step costs at most ε²/8 + ε²/8, so the release is δ-approximate ρ-zCDP (Thm 6) — the
guarantee is the filter's (ρ, δ), reported as `spent`; the ledger records every actual charge.

The engine computes the k̄ + 1 largest counts once (this folder's own stage `top_counts`: duckdb.py
with ./sql/pcr_top_counts.sql, spark.py); the loop runs in numpy over that cached table. Removing found
keys from the cache is Alg. 1 on the histogram without them with k̄' = k̄ − m: its top k̄' are the
remaining cached keys and its (k̄'+1)-th count is still c_(k̄+1); the threshold keeps log(k̄/δ*) ≥
log(k̄'/δ*), so it is at least Thm 4's.
Noise comes from the run's PRF (duckdp/prf.py): Gumbel call i draws at counter (hi, lo) =
(i, position) for each cached key and (i, 2⁶⁴−1) for the threshold, all under one noise round
tag; the counts' discrete Gaussians read one AES counter-mode bit stream — fresh per draw,
reproducible under `seed`.

It releases counts, not a key set, so it is registered apart from the selection mechanisms
(`output`, duckdp/mechanisms/__init__.py): `select` refuses it and `duckdp.count_release` runs it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ...discrete import discrete_gaussian
from ...errors import InternalError, InvalidParameter
from ...privacy.accountant import Accountant
from ...privacy.budget import ZCDP, Budget
from ...privacy.calibration import _up, laplace_scale
from ...privacy.events import ComposedEvent, ZcdpEvent
from ...rng import Randomness
from ...stages.base import Engine
from ...validation import between, integer
from ..base import Mechanism, Param, Params, Round, RoundPlan

CITATION = ("Rogers, Private Count Release (2024), Alg. 1–2, Thm 4–6; "
            "Unknown-Domain Gumbel: Durfee & Rogers, NeurIPS 2019")
_THRESHOLD_SLOT = np.uint64(2**64 - 1)
_MAX_KBAR = 10**8           # keys cached and searched


def gumbel_threshold(epsilon: float, kbar: int, delta: float) -> float:
    """T = 1 + (1/ε)·log(k̄/δ), rounded up (Rogers 2024, Thm 4; Durfee & Rogers 2019)."""
    return _up(1.0 + math.log(kbar / delta) / epsilon)


def count_sigma(epsilon: float, kbar: int, delta: float, relative_error: float) -> float:
    """σ(ε) = (r/1.5)·(1 + log(k̄/δ*)/ε) (Rogers eq. (2)), kept above 2/ε as Alg. 2 requires.

    σ > 2/ε makes the count's charge 1/(2σ²) < ε²/8, which is what the filter reserves for it.
    """
    return _up(max(relative_error / 1.5 * (1.0 + math.log(kbar / delta) / epsilon), 2.0 / epsilon))


def gumbel_noise(randomness: Randomness, tag: int, call: int, positions: np.ndarray) -> np.ndarray:
    """Standard Gumbel draws of Gumbel call `call`: one per cached position, then the threshold's."""
    lo = np.append(positions.astype(np.uint64), _THRESHOLD_SLOT)
    return randomness.noise("gumbel", tag, np.full(lo.size, call, dtype=np.uint64), lo)


@dataclass
class PCRResult:
    """Alg. 2's output on a cached top list: found positions (in order), counts, σ, ledger."""

    positions: np.ndarray
    noisy_counts: np.ndarray
    sigmas: np.ndarray
    ledger: pa.Table


def private_count_release(counts: np.ndarray, next_count: float, budget: ZCDP, randomness: Randomness, *,
                          initial_epsilon: float, delta_per_call: float, kbar: int,
                          relative_error: float) -> PCRResult:
    """Alg. 2 on the cached top-k̄ `counts` (largest first) and c_(k̄+1) = `next_count`."""
    counts = np.asarray(counts, dtype=np.int64)
    tag, bits = randomness.next_round(), randomness.stream()
    remaining = np.arange(counts.size, dtype=np.int64)
    eps = initial_epsilon
    steps = Accountant.for_budget(budget)                         # the privacy filter's accountant
    log_rows: list[tuple] = []
    found: list[int] = []
    noisy: list[int] = []
    sigmas: list[float] = []
    call = 0
    # Privacy filter (Alg. 2 loop guard; Whitehouse et al. Thm 5): room for a Gumbel call and a count.
    while steps.check(ComposedEvent((ZcdpEvent(eps * eps / 8, delta_per_call), ZcdpEvent(eps * eps / 8, 0.0)))):
        beta = laplace_scale(eps)                                  # Thm 4: β = 1/ε, rounded up
        threshold = gumbel_threshold(eps, kbar, delta_per_call)
        g = gumbel_noise(randomness, tag, call, remaining)
        step = steps.commit(ZcdpEvent(eps * eps / 8, delta_per_call), label="gumbel")   # Thm 4 (k = 1)
        # Alg. 1 on counts relative to the largest remaining one, ref (every score and the threshold move by
        # −ref: the same comparisons in real arithmetic). Floats: a call releases one discrete outcome (a key
        # or ⊥), never a float; noisy counts are exact integers, and σ, β, T and the ledger depend only on the
        # sequence of outcomes. Counts are integers < 2⁵³, so c − ref is exact and a neighbour moves it by
        # exactly 1; only the sums with β·g round. An outcome can be close only among keys with c − ref ≥ −41β
        # (g ∈ [−3.61, 36.74] on the PRF's grid) and for a best score near T + (c_(k̄+1) − ref) + β·g, with
        # T = 1 + β·log(k̄/δ*) ≤ 1 + 46β (k̄ ≤ 10⁸, δ* ≥ 1e-12): sums of size M ≤ 1 + 130β, whose rounding moves
        # a decision point by ≤ 2⁻⁵⁰·M whatever the counts (raw c + β·g would round on the largest count's
        # grid: 2⁻³² at c ≈ 10⁶, whole units at 2⁵²). As in budget.py's MIN_DELTA argument, each call's outcome
        # law is then within TV ≲ 2⁻⁵⁰·M/β of the ideal one (the top-two Gumbel gap, and the best score minus
        # the threshold's draw, have density ≤ 1/β). tests/test_count_release.py: decisions depend on count
        # differences only.
        c = counts[remaining]
        ref = int(c.max()) if c.size else 0
        scores = (c - ref).astype(np.float64) + beta * g[:-1]
        best = int(np.argmax(scores)) if scores.size else -1
        hit = best >= 0 and scores[best] > threshold + (float(next_count) - ref) + beta * g[-1]   # Alg. 1
        log_rows.append(("gumbel", eps, beta, threshold, step.charge, step.charge_delta,
                         len(found) if hit else None, step.spent, step.spent_delta))
        if hit:
            sigma = count_sigma(eps, kbar, delta_per_call, relative_error)
            position = int(remaining[best])
            found.append(position)
            noisy.append(int(counts[position]) + discrete_gaussian(bits, sigma))   # exact N_Z(0, σ²)
            sigmas.append(sigma)
            remaining = np.delete(remaining, best)
            step = steps.commit(ZcdpEvent(0.5 / (sigma * sigma), 0.0), label="gaussian")   # Thm 2; CKS20 Prop. 4
            log_rows.append(("gaussian", eps, sigma, None, step.charge, step.charge_delta, len(found) - 1,
                             step.spent, step.spent_delta))
        else:
            eps *= math.sqrt(2.0)                                  # Alg. 2: ε ← √2·ε after ⊥
        call += 1
    columns: list[Sequence[Any]] = list(zip(*log_rows, strict=True)) if log_rows else [[]] * 9
    ledger = pa.table({
        "step": pa.array(range(len(log_rows)), pa.int64()),
        "mechanism": pa.array(columns[0], pa.string()),
        "epsilon": pa.array(columns[1], pa.float64()),
        "scale": pa.array(columns[2], pa.float64()),
        "threshold": pa.array(columns[3], pa.float64()),
        "rho": pa.array(columns[4], pa.float64()),
        "delta": pa.array(columns[5], pa.float64()),
        "item": pa.array(columns[6], pa.int64()),
        "rho_spent": pa.array(columns[7], pa.float64()),
        "delta_spent": pa.array(columns[8], pa.float64()),
    })
    return PCRResult(np.array(found, dtype=np.int64), np.array(noisy, dtype=np.int64),
                     np.array(sigmas, dtype=np.float64), ledger)


@dataclass(frozen=True)
class CountRound(Round):
    """One Gumbel ε level of count release as a Round, with its rows of the step ledger (`steps`)."""

    steps: pa.Table = field(repr=False, compare=False)


def ledger_rounds(ledger: pa.Table) -> list[Round]:
    """One Round per Gumbel ε level: its summed charges, β, threshold T, keys found at that level and
    its ledger rows (a level's rows are consecutive: its Gumbel calls and the counts they found)."""
    levels: list[dict] = []
    for i, row in enumerate(ledger.to_pylist()):
        if row["mechanism"] == "gumbel" and (not levels or row["epsilon"] != levels[-1]["epsilon"]):
            levels.append({"epsilon": row["epsilon"], "beta": row["scale"], "threshold": row["threshold"],
                           "rho": [], "delta": [], "calls": 0, "found": 0, "count_sigma": None, "start": i})
        level = levels[-1]
        level["rho"].append(row["rho"])
        level["delta"].append(row["delta"])
        if row["mechanism"] == "gumbel":
            level["calls"] += 1
        else:
            level["found"] += 1
            level["count_sigma"] = row["scale"]
    ends = [lv["start"] for lv in levels[1:]] + [ledger.num_rows]
    return [CountRound(i, RoundPlan(ZCDP(math.fsum(lv["rho"]), math.fsum(lv["delta"])), "gumbel", lv["beta"],
                                    lv["threshold"], {"epsilon": lv["epsilon"], "gumbel_calls": lv["calls"],
                                                      "count_sigma": lv["count_sigma"]}), lv["found"],
                       ledger.slice(lv["start"], end - lv["start"]))
            for i, (lv, end) in enumerate(zip(levels, ends, strict=True))]


def zcdp_budget(budget: Budget) -> ZCDP:
    """The δ-approximate ρ-zCDP budget count release takes (`check_budget` refused any other)."""
    if not isinstance(budget, ZCDP):
        raise InternalError(f"count release was planned with {budget!r}")
    return budget


class PrivateCountRelease(Mechanism):
    """Rogers 2024 Alg. 2: keys with noisy distinct-user counts under a privacy filter (no Δ0)."""

    name = "pcr"
    aliases = ("count_release",)
    citation = CITATION
    summary = ("Unknown-Domain Gumbel finds keys one by one, each released with a discrete Gaussian "
               "distinct-user count, while a privacy filter has room; no contribution bound.")
    params = (
        Param("initial_epsilon", 5e-4, "ε*: the first Gumbel call's ε (Rogers §4: 0.0005)",
              lambda v: between("initial_epsilon", v, 0.0)),
        Param("delta_per_call", 1e-11, "δ*: the δ charged per Gumbel call (Rogers §4: 1e-11)",
              lambda v: between("delta_per_call", v, 0.0, 1.0)),
        Param("kbar", 10_000, "k̄: keys cached and searched (Rogers §4: 10,000)",
              lambda v: integer("kbar", v, 1, _MAX_KBAR)),
        Param("relative_error", 0.1, "r: the target relative error of eq. (2) (Rogers §4: 0.1)",
              lambda v: between("relative_error", v, 0.0)),
    )
    budgets = (ZCDP,)
    truncates = False
    none_is_default = False          # count_release's keywords have defaults: None is a bad value
    output = "keys with noisy distinct-user counts"
    entry_point = "duckdp.count_release"

    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        """The filter's first Gumbel call: β = 1/ε*, T(ε*) (Thm 4). Alg. 2 is a privacy filter: how
        many calls and counts follow depends on the counts, so the plan's budget is the whole
        guarantee, δ-approximate ρ-zCDP (Thm 6). Refuses budgets below Alg. 2's first step."""
        zcdp = zcdp_budget(budget)
        eps, delta_per_call = params["initial_epsilon"], params["delta_per_call"]
        if not zcdp.rho > eps ** 2 / 4:
            raise InvalidParameter(f"rho={zcdp.rho!r} must exceed initial_epsilon²/4 (Rogers Alg. 2)")
        if not zcdp.delta > delta_per_call:
            raise InvalidParameter(f"delta={zcdp.delta!r} must exceed delta_per_call={delta_per_call!r} "
                                   "(Rogers Alg. 2)")
        return [RoundPlan(zcdp, "gumbel", laplace_scale(eps), gumbel_threshold(eps, params["kbar"], delta_per_call))]

    def run(self, stages: Engine, plan: list[RoundPlan], params: Params) -> tuple[pa.Table, list[Round]]:
        """Alg. 2 on the engine's k̄ + 1 largest counts: the found keys in the order found (internal key
        columns, `noisy_count`, `sigma`) and one CountRound per Gumbel ε level with its ledger rows."""
        (first,) = plan
        kbar = params["kbar"]
        top = self.own_stages(stages).top_counts(stages, kbar + 1)
        counts = top.column("_dp_count").to_numpy().astype(np.int64)
        next_count = float(counts[kbar]) if counts.size > kbar else 0.0
        result = private_count_release(counts[:kbar], next_count, zcdp_budget(first.budget), stages.randomness,
                                       **params)
        found = (top.drop_columns(["_dp_count"]).take(pa.array(result.positions, pa.int64()))
                 .append_column("noisy_count", pa.array(result.noisy_counts, pa.int64()))
                 .append_column("sigma", pa.array(result.sigmas, pa.float64())))
        return found, ledger_rounds(result.ledger)

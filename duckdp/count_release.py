"""Private Count Release: keys with noisy distinct-user counts and no contribution bound.

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

The engine computes the k̄ + 1 largest counts once (count release's own stage top_counts, in
duckdp/mechanisms/count_release/); the loop runs in numpy over that cached table. Removing found
keys from the cache is Alg. 1 on the histogram without them with k̄' = k̄ − m: its top k̄' are the
remaining cached keys and its (k̄'+1)-th count is still c_(k̄+1); the threshold keeps log(k̄/δ*) ≥
log(k̄'/δ*), so it is at least Thm 4's.
Noise comes from the run's PRF (duckdp/prf.py): Gumbel call i draws at counter (hi, lo) =
(i, position) for each cached key and (i, 2⁶⁴−1) for the threshold, all under one noise round
tag; the counts' discrete Gaussians read one AES counter-mode bit stream — fresh per draw,
reproducible under `seed`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .discrete import discrete_gaussian
from .engines import engine_for
from .errors import InternalError, InvalidParameter, SchemaError
from .mechanisms.base import Round, RoundPlan
from .mechanisms.count_release import own_stages
from .privacy.accountant import Accountant, nominal_spent, plan_hook
from .privacy.budget import ZCDP, make_budget
from .privacy.calibration import _up, laplace_scale
from .privacy.events import ComposedEvent, PrivacyEvent, ZcdpEvent, budget_event
from .release import Release
from .rng import Randomness
from .source import Source
from .validation import between, integer

CITATION = ("Rogers, Private Count Release (2024), Alg. 1–2, Thm 4–6; "
            "Unknown-Domain Gumbel: Durfee & Rogers, NeurIPS 2019")
_THRESHOLD_SLOT = np.uint64(2**64 - 1)
_MAX_KBAR = 10**8           # keys cached and searched
_OUTPUT_COLUMNS = ("noisy_count", "sigma")


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
        scores = counts[remaining] + beta * g[:-1]
        best = int(np.argmax(scores)) if scores.size else -1
        hit = best >= 0 and scores[best] > threshold + next_count + beta * g[-1]   # Alg. 1
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


def ledger_rounds(ledger: pa.Table) -> list[Round]:
    """One Round per Gumbel ε level: its summed charges, β, threshold T and keys found at that level."""
    levels: list[dict] = []
    for row in ledger.to_pylist():
        if row["mechanism"] == "gumbel" and (not levels or row["epsilon"] != levels[-1]["epsilon"]):
            levels.append({"epsilon": row["epsilon"], "beta": row["scale"], "threshold": row["threshold"],
                           "rho": [], "delta": [], "calls": 0, "found": 0, "count_sigma": None})
        level = levels[-1]
        level["rho"].append(row["rho"])
        level["delta"].append(row["delta"])
        if row["mechanism"] == "gumbel":
            level["calls"] += 1
        else:
            level["found"] += 1
            level["count_sigma"] = row["scale"]
    return [Round(i, RoundPlan(ZCDP(math.fsum(lv["rho"]), math.fsum(lv["delta"])), "gumbel", lv["beta"],
                               lv["threshold"], {"epsilon": lv["epsilon"], "gumbel_calls": lv["calls"],
                                                 "count_sigma": lv["count_sigma"]}), lv["found"])
            for i, lv in enumerate(levels)]


@dataclass
class CountRelease(Release):
    """A `Release` whose items carry `noisy_count` and `sigma`, plus the step-by-step `ledger`.

    `spent` is the filter's guarantee (ρ, δ) (Rogers Thm 6) with its (ε, δ) conversion;
    `ledger` (Arrow) has one row per Gumbel call or Gaussian count with its charge (`item`: the row of
    `items`, listed by key, that the step released).
    `max_contributions` is None: counts need no ℓ0 bound.
    """

    ledger: pa.Table = field(kw_only=True, repr=False)

    @property
    def event(self) -> PrivacyEvent:
        """The filter's guarantee (Rogers 2024 Thm 6): δ-approximate ρ-zCDP at the budget."""
        return budget_event(self.budget)

    @property
    def ledger_rho(self) -> float:
        return math.fsum(self.ledger.column("rho").to_pylist())

    @property
    def ledger_delta(self) -> float:
        return math.fsum(self.ledger.column("delta").to_pylist())

    def report(self) -> str:
        mech = self.ledger.column("mechanism").to_pylist()
        calls, counts = mech.count("gumbel"), mech.count("gaussian")
        lines = ["  Δ0        : none (distinct-user counts, ℓ∞ sensitivity 1, any number of keys per user)"
                 if line.startswith("  Δ0") else line for line in super().report().splitlines()]
        lines.insert(-1, f"  ledger    : {calls:,} Gumbel calls ({calls - counts:,} ⊥), {counts:,} Gaussian counts; "
                         f"charged ρ={self.ledger_rho:.6g}, δ={self.ledger_delta:.3g} (filter: ≤ budget)")
        return "\n".join(lines)


def count_release(con: Any, table: Any, *, rho: float, delta: float, user_col: str = "user_id",
                  item_col: str | list[str] = "item", seed: int | None = None,
                  initial_epsilon: float = 5e-4, delta_per_call: float = 1e-11, kbar: int = 10_000,
                  relative_error: float = 0.1, accountant: Accountant | None = None) -> CountRelease:
    """Release keys of `table` with noisy distinct-user counts under δ-approximate ρ-zCDP.

    Defaults are the paper's (Rogers §4): ε* = 0.0005, δ* = 1e-11, k̄ = 10,000, r = 0.1.
    `initial_epsilon` is ε* (the first Gumbel call's ε), `delta_per_call` is δ* (charged per
    Gumbel call), `kbar` is k̄ (keys cached and searched), `relative_error` is the target r of
    eq. (2). Alg. 2 needs ρ > ε*²/4 and δ > δ*. The input is only read; `seed` makes the release
    reproducible (tests and demos; the release says it was seeded). `accountant`
    (privacy/accountant.py; a Session passes its own) is charged the filter's guarantee ZcdpEvent(ρ, δ)
    once the input is resolved and before any data is read.
    """
    budget = make_budget(rho=rho, delta=delta)
    if not (isinstance(budget, ZCDP)):
        raise InternalError("invariant failed: rho= always builds a ZCDP budget")
    params: dict[str, Any] = {"initial_epsilon": between("initial_epsilon", initial_epsilon, 0.0),
              "delta_per_call": between("delta_per_call", delta_per_call, 0.0, 1.0),
              "kbar": integer("kbar", kbar, 1, _MAX_KBAR),
              "relative_error": between("relative_error", relative_error, 0.0)}
    if not budget.rho > params["initial_epsilon"] ** 2 / 4:
        raise InvalidParameter(f"rho={rho!r} must exceed initial_epsilon²/4 (Rogers Alg. 2)")
    if not budget.delta > params["delta_per_call"]:
        raise InvalidParameter(f"delta={delta!r} must exceed delta_per_call={delta_per_call!r} (Rogers Alg. 2)")
    randomness = Randomness(seed)
    on_plan = plan_hook(accountant, "pcr", budget_event(budget))
    kind = engine_for(con)

    def check_columns(source: Source) -> None:
        check_output_names(source.key_names)

    with kind.open_run(con, table, user_col, item_col, randomness, plan=[budget], on_plan=on_plan,
                       check_source=check_columns) as stages:
        source = stages.source
        top = own_stages(stages).top_counts(stages, int(params["kbar"]) + 1)
    key_cols = [f"_dp_k{i}" for i in range(len(source.key_names))]
    return release_top_counts(top, key_cols, source.key_names, source.description, budget, params, randomness,
                              lambda t, cols: kind.sort_by(con, t, cols),
                              lambda t: kind.relation(con, t, source.key_names))


def check_output_names(key_names: Sequence[str]) -> None:
    """Refuse key columns named like the release's own output columns."""
    clash = sorted(set(key_names) & set(_OUTPUT_COLUMNS))
    if clash:
        raise SchemaError(f"item_col {clash} collides with the output columns {list(_OUTPUT_COLUMNS)}; rename it")


def release_top_counts(top: pa.Table, key_cols: Sequence[str], key_names: Sequence[str], description: str,
                       budget: ZCDP, params: dict[str, Any], randomness: Randomness,
                       sort_by: Callable[[pa.Table, list[str]], pa.Table],
                       to_engine: Callable[[pa.Table], Any]) -> CountRelease:
    """Alg. 2 on the engine's k̄ + 1 largest counts (`top`, largest first) → the CountRelease.

    Shared by DuckDB and Spark: only the counts come from the engine; `sort_by(table, columns)` sorts
    an Arrow table by `columns` in the engine's order and `to_engine` turns the released Arrow table
    into the engine's relation (DuckDB relation or Spark DataFrame). Items are listed by key, as
    every release is (the order of discovery would be covered by Alg. 2's guarantee, but a key order
    makes the listing a function of the released keys and counts only); the ledger's `item` is the
    released key's row in `items`.
    """
    counts = top.column("_dp_count").to_numpy().astype(np.int64)
    next_count = float(counts[params["kbar"]]) if counts.size > params["kbar"] else 0.0
    result = private_count_release(counts[:params["kbar"]], next_count, budget, randomness, **params)
    found = (top.select(list(key_cols)).take(pa.array(result.positions, pa.int64()))
             .append_column("_dp_found", pa.array(np.arange(result.positions.size), pa.int64())))
    ordered = sort_by(found, list(key_cols))
    order = ordered.column("_dp_found").to_numpy()                  # discovery index of each sorted row
    row = np.empty_like(order)
    row[order] = np.arange(order.size)
    items = (ordered.select(list(key_cols)).rename_columns(list(key_names))
             .append_column("noisy_count", pa.array(result.noisy_counts[order], pa.int64()))
             .append_column("sigma", pa.array(result.sigmas[order], pa.float64())))
    ledger = result.ledger.set_column(result.ledger.schema.get_field_index("item"), "item",
                                      pc.take(pa.array(row, pa.int64()), result.ledger.column("item")))
    return CountRelease(items=to_engine(items), algo="pcr", citation=CITATION, budget=budget,
                        spent=nominal_spent(budget_event(budget)), rounds=ledger_rounds(ledger),
                        seeded=randomness.seeded,
                        max_contributions=None, params=params, input=description,
                        key_names=list(key_names), _table=items, ledger=ledger)

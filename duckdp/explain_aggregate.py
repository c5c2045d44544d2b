"""What a private GROUP BY will release, from its plan alone (no data): how many users a key needs to be released,
and how far each metric's noise moves it — the question an analyst asks before spending a budget.

`explain_aggregate` builds the very plan `duckdp.aggregate` would run with the same arguments
(privacy/aggregate.py `plan_aggregate`: σ per measure, the budget split, the links) and reads off it:
- keys=<a select() mechanism>: `duckdp.explain` of that mechanism at the selection's part of the budget;
- keys="threshold": the users a key needs for release probability ≥ 50 % / 95 % under the threshold's
  discrete Gaussian (spec §4.2);
- per metric, the noise's standard deviation and the ± half-width of its interval at `confidence`, in the
  metric's units — the same half-widths `aggregate(confidence=…)` puts around every released number; a mean's
  depends on its key's noisy count, so it is given for a few counts.
Every number is a function of the arguments only.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from . import mechanisms
from .errors import InternalError, InvalidParameter
from .explain import TARGETS, Explanation, UsersNeeded, _check_holdings, _explain_plan, default_holdings, smallest_users
from .mechanisms.base import Params
from .privacy.aggregate import (
    SPREADS,
    THRESHOLD_TAG,
    AggregatePlan,
    Threshold,
    _upper_tail,
    finish,
    grid_bounds,
    plan_aggregate,
)
from .privacy.budget import make_budget
from .validation import integer
from .validation import truncation as check_truncation

DEFAULT_COUNTS = (10, 100, 1000)     # the noisy counts a mean's interval is shown at


@dataclass(frozen=True)
class MetricNoise:
    """One metric's noise in its own units: `sd` its standard deviation (after linking, spec §3.2) and `half_width`
    its interval's ± at the plan's confidence; for a mean, variance or stddev (`sd`/`half_width` None),
    `mean_half_widths` gives the half-range of its interval at each noisy count in `counts` — for a mean at its
    bounds' midpoint, for a spread of values even over the bounds (variance (upper − lower)²/12)."""

    metric: str
    kind: str
    column: str | None
    sd: float | None
    half_width: float | None
    counts: tuple[int, ...] = ()
    mean_half_widths: tuple[float, ...] = ()
    threshold_draw: bool = False     # read from the threshold's noisy count (biased upward on released keys)


@dataclass
class AggregateExplanation:
    """`explain_aggregate`'s answer: the plan, what a key needs to be released, and each metric's noise."""

    plan: AggregatePlan
    selection: Explanation | None                  # keys=<a select() mechanism>
    threshold_users: UsersNeeded | None            # keys="threshold"
    metrics: list[MetricNoise]
    truncation: str
    notes: list[str] = field(default_factory=list)

    def to_arrow(self) -> pa.Table:
        """One row per metric and, for a mean, per noisy count: its sd and interval ± in the metric's units."""
        rows: list[tuple[MetricNoise, int | None, float | None]]
        rows = [(m, None, m.half_width) for m in self.metrics if not m.counts]
        rows += [(m, n, h) for m in self.metrics if m.counts
                 for n, h in zip(m.counts, m.mean_half_widths, strict=True)]
        order = {m.metric: i for i, m in enumerate(self.metrics)}
        rows.sort(key=lambda r: order[r[0].metric])
        return pa.table({
            "metric": pa.array([r[0].metric for r in rows], pa.string()),
            "kind": pa.array([r[0].kind for r in rows], pa.string()),
            "noisy_count": pa.array([r[1] for r in rows], pa.int64()),
            "sd": pa.array([r[0].sd for r in rows], pa.float64()),
            "half_width": pa.array([r[2] for r in rows], pa.float64()),
            "confidence": pa.array([self.plan.confidence] * len(rows), pa.float64()),
        })

    def lines(self) -> list[str]:
        plan = self.plan
        out = [f"  {line}" for line in plan.report_lines()]
        if self.selection is not None:
            out.append(f"  selection by {self.selection.algo} ({self.selection.citation}):")
            out += self.selection.lines()
        if self.threshold_users is not None and plan.threshold is not None:
            u, fmt = self.threshold_users, (lambda n: f"{n:,}" if n is not None else "never")
            shift = f" − {plan.pre_threshold - 1}" if plan.pre_threshold > 1 else ""
            out.append(f"  what a key needs to be released (data-free): {fmt(u.users_50)} users for ≥ 50 %, "
                       f"{fmt(u.users_95)} for ≥ 95 % (users{shift} + N_Z(0, {plan.threshold.sigma:.6g}²) ≥ "
                       f"{plan.threshold.threshold})")
        out.append(f"  each metric's noise on a released key (± at confidence {plan.confidence:g}, its own units):")
        for m in self.metrics:
            what = m.kind + (f"({m.column})" if m.column else "")
            if m.counts:
                mt = next(x for x in plan.metrics if x.name == m.metric)
                span = (mt.upper or 0) - (mt.lower or 0)
                top = {"mean": span, "variance": (span / 2) ** 2, "stddev": span / 2}[m.kind]   # its whole range
                whole = f" (all of [{mt.lower:g}, {mt.upper:g}])" if m.kind == "mean" else " (its whole range)"
                at = ", ".join(f"none at {n:,} rows (never released: below the threshold)" if math.isnan(h) else
                               f"±{h:.4g}{whole if 2 * h >= top * (1 - 1e-12) else ''} at {n:,} rows"
                               for n, h in zip(m.counts, m.mean_half_widths, strict=True))
                out.append(f"    {m.metric:<12} {what:<18} {at}, " + ("for a mean at its bounds' midpoint"
                           if m.kind == "mean" else "for values spread evenly over the bounds"))
            else:
                out.append(f"    {m.metric:<12} {what:<18} sd {m.sd:.4g}, ±{m.half_width:.6g}"
                           + (" (the threshold's draw: biased upward on released keys; near the threshold its "
                              "interval, given the release, reaches further down)" if m.threshold_draw else ""))
        out += [f"  note: {n}" for n in self.notes]
        return out

    def __str__(self) -> str:
        order = "one global key order" if self.truncation == "global" else "a per-user key order"
        return "\n".join([f"duckdp explain aggregate — Δ0 = {self.plan.max_contributions} keys per user, "
                          f"{self.plan.max_rows_per_key} row(s) per user and key, {order}", *self.lines()])


def explain_aggregate(metrics: dict, *, keys: str = "adaptive_sips", epsilon: float | None = None,
                      delta: float | None = None, rho: float | None = None, max_contributions: int = 100,
                      max_rows_per_key: int = 1, selection_share: float | None = None,
                      metric_shares: dict | None = None, pre_threshold: int = 1, confidence: float = 0.95,
                      not_null: str | list[str] | None = None, truncation: str = "global",
                      counts: Sequence[int] = DEFAULT_COUNTS, keys_per_user: list[int] | None = None,
                      **algo_params: Any) -> AggregateExplanation:
    """Explain, without data, what `duckdp.aggregate` with these arguments would release: the plan (σ per measure,
    the budget split), what a key needs to be released, and each metric's noise as an interval ± at `confidence`.

    keys: a select() mechanism, "threshold", or "public" (a public key set: which keys it holds changes no
    number here). `counts`: the noisy counts a mean's, variance's or stddev's interval is shown at.
    `keys_per_user`: the selection table's rows, as in `duckdp.explain`. The other arguments are `aggregate`'s,
    checked as it checks them.
    """
    if not isinstance(keys, str):
        raise InvalidParameter("keys must be a select() mechanism, 'threshold' or 'public' here: which public keys "
                               f"are given changes no number of the plan; got {type(keys).__name__}")
    if confidence is None:
        raise InvalidParameter("confidence is required: each metric's noise is shown as an interval ± at it")
    if isinstance(max_contributions, str):
        raise InvalidParameter("max_contributions='auto' is chosen from the data: explain a number of keys per user")
    name = keys.strip().lower()
    if name in ("threshold", "public"):
        mode, algo = name, None
    else:
        try:
            mode, algo = "select", mechanisms.get(keys).name
        except InvalidParameter as exc:
            raise InvalidParameter(f"keys: {exc}, or 'threshold' or 'public'") from None
    check_truncation(truncation)
    mech = mechanisms.get(algo) if algo is not None else None
    settings = mech.check_params(algo_params) if mech is not None else {}
    if mech is None and algo_params:
        raise InvalidParameter(f"unknown parameters {sorted(algo_params)}: only a select() mechanism takes any")
    plan = plan_aggregate(make_budget(epsilon=epsilon, delta=delta, rho=rho), metrics,
                          max_contributions=max_contributions, max_rows_per_key=max_rows_per_key, keys=mode, algo=algo,
                          selection_share=selection_share, metric_shares=metric_shares, confidence=confidence,
                          pre_threshold=pre_threshold, not_null=not_null)
    shown = _counts(counts)
    selection, notes = None, []
    if mech is not None and plan.selection_budget is not None:
        mech.check_budget(plan.selection_budget)
        holdings = (default_holdings(plan.max_contributions) if keys_per_user is None
                    else _check_holdings(keys_per_user, plan.max_contributions))
        selection = _explain_plan(mech, plan.selection_budget, Params(plan.max_contributions, settings), holdings,
                                  truncation=truncation)
        if plan.pre_threshold > 1:      # count selections only (plan_aggregate refuses the others)
            notes.append(f"pre_threshold {plan.pre_threshold}: the selection counts users − {plan.pre_threshold - 1},"
                         f" so a key needs {plan.pre_threshold - 1} more users than the tables above show")
    threshold_users = None if plan.threshold is None else _threshold_users(plan.threshold, plan.pre_threshold)
    return AggregateExplanation(plan, selection, threshold_users, _metric_noise(plan, shown), truncation, notes)


def _counts(counts: Iterable[int]) -> tuple[int, ...]:
    values = [] if isinstance(counts, (str, bytes)) or not isinstance(counts, Iterable) else list(counts)
    if not values:
        raise InvalidParameter(f"counts must be a non-empty list of integers >= 1, got {counts!r}")
    return tuple(sorted({integer("counts entries", n, 1, 10**15) for n in values}))


def _threshold_users(threshold: Threshold, pre_threshold: int) -> UsersNeeded:
    """Users a key needs for P[users − (k − 1) + Z ≥ T] ≥ 50 % / 95 %, Z ~ N_Z(0, σ²) (spec §4.2), from the
    discrete Gaussian's tail (`_upper_tail`: exact sums for σ ≤ 4096, within 1e-9)."""
    sigma, t = threshold.sigma, threshold.threshold

    def probability(users: np.ndarray) -> np.ndarray:
        out = []
        for n in users:
            gap = t - (int(n) - (pre_threshold - 1))       # P[Z ≥ gap]
            out.append(_upper_tail(gap, sigma) if gap >= 1 else 1.0 - _upper_tail(1 - gap, sigma))
        return np.array(out)

    return UsersNeeded(1, 1.0, *(smallest_users(probability, target) for target in TARGETS))


def _metric_noise(plan: AggregatePlan, counts: tuple[int, ...]) -> list[MetricNoise]:
    """Each metric's sd and interval ± in its own units, from the plan's measures, links and readings; a mean's from
    `finish` itself (the release's own post-processing, links and keys="threshold"'s conditional count interval
    included) at noisy counts `counts` and every sum at the grid midpoint's value, so that the numbers agree
    with the release — a count the threshold must pass but does not gets NaN (never released)."""
    sds = {i: sd for link in plan.links for i, sd in zip(link.measures, link.sd, strict=True)}
    means = _at_midpoint(plan, counts) if any(mt.kind in ("mean", *SPREADS) for mt in plan.metrics) else {}
    out = []
    for mt in plan.metrics:
        if mt.kind in ("mean", *SPREADS):
            half = (means[f"{mt.name}_high"] - means[f"{mt.name}_low"]) / 2
            on_threshold = plan.measure(mt.name, "count").tag == THRESHOLD_TAG
            if on_threshold and plan.threshold is not None:
                half = np.where(np.array(counts) - (plan.pre_threshold - 1) >= plan.threshold.threshold, half, np.nan)
            out.append(MetricNoise(mt.name, mt.kind, mt.column, None, None, counts, tuple(float(h) for h in half),
                                   on_threshold))
            continue
        ms, rd = plan.measure(mt.name, mt.kind), plan.reading(mt.name, mt.kind)
        unit = ms.step if mt.kind == "sum" else 1.0
        if rd.half_width is None:
            raise InternalError("invariant failed: a plan with a confidence has half-widths")
        out.append(MetricNoise(mt.name, mt.kind, mt.column, sds.get(plan.measures.index(ms), ms.sigma) * unit,
                               rd.half_width * unit, threshold_draw=ms.tag == THRESHOLD_TAG))
    return out


def _at_midpoint(plan: AggregatePlan, counts: tuple[int, ...]) -> dict[str, np.ndarray]:
    """`finish`'s columns for keys whose every count measure reads n ∈ `counts` (the threshold's draw: n shifted
    as it is released, and at least T so that it may be), whose values average their grid's midpoint o (centred
    sums 0, plain sums o·n: every identity of spec §3.2 holds, so linked estimates equal the draws) and spread
    as evenly as a uniform on the bounds (sums of squares n·h²/3)."""
    n = np.array(counts, dtype=np.int64)
    noisy: dict[tuple[str, str], np.ndarray] = {}
    for ms in plan.measures:
        if ms.part in ("users", "count"):
            x = n
            if ms.tag == THRESHOLD_TAG and plan.threshold is not None:   # never below T: unreleasable there
                x = np.maximum(n - (plan.pre_threshold - 1), plan.threshold.threshold)
        elif ms.part == "squares":
            mt = next(x for x in plan.metrics if x.name == ms.metric)
            if mt.lower is None or mt.upper is None:
                raise InternalError("invariant failed: a spread has bounds")
            lo, hi = grid_bounds(mt.lower, mt.upper, ms.step)
            x = n * (max(ms.offset - lo, hi - ms.offset) ** 2 // 3)
        elif ms.offset != 0 or ms.part == "centred":
            x = np.zeros_like(n)
        else:
            mt = next(x for x in plan.metrics if x.name == ms.metric)
            if mt.lower is None or mt.upper is None:
                raise InternalError("invariant failed: a sum has bounds")
            x = n * (sum(grid_bounds(mt.lower, mt.upper, ms.step)) // 2)
        noisy[(ms.metric, ms.part)] = x
    return finish(plan, noisy)


__all__ = ["explain_aggregate", "AggregateExplanation", "MetricNoise"]

"""The privacy core of private GROUP BY (docs/specs/private-group-by.md): metric specs, the budget
plan (selection share, one discrete Gaussian per measure, grids, thresholds, confidence) and the
post-processing of noisy integers into released columns. One measure per distinct per-key quantity: every
metric needing it reads the same noisy integer (spec §3.1), and each measure is charged once; measures whose true
values satisfy an exact linear identity (a sum and a mean on one column and bounds: S = S_c + o·C) are released
as one least-squares estimate (spec §3.2; post-processing, no charge). Engine-free:
engines supply per-key true integers on the plan's grids, this module says how much noise they get and what
is released.

Accounting is δ-approximate zCDP for both budget types. Each measure is a per-key histogram on the
released key set K with integer ℓ2 sensitivity Δ (a user adds to at most Δ0 keys of K, at most
`max_rows_per_key` rows per key, each value at most B grid steps); independent N_Z(0, σ²) per key is
ρ_m = Δ²/(2σ²)-zCDP: per coordinate D_α(N_Z(a, σ²) ‖ N_Z(b, σ²)) ≤ α(a − b)²/(2σ²) for integers a, b
(Canonne, Kamath & Steinke 2020, arXiv:2004.00010 Prop. 4) and Rényi divergences of independent
coordinates add, so the vector is α‖Δ‖²/(2σ²). The selection is δ-approximate ρ_sel-zCDP (its own
mechanism's theorem; DP-SIPS Thm 13, 14) and the measures run on its output, so the whole call is
δ-approximate (ρ_sel + Σ ρ_m)-zCDP by adaptive composition (DP-SIPS Lemma 6; Bun & Steinke 2016
Lemma 2.3 / 8.2). An (ε, δ) request is planned as the largest ρ whose DP-SIPS Cor. 9 conversion is
within it, because the discrete Gaussian's vector guarantee is a Rényi bound.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import ndtr, ndtri

from ..errors import InternalError, InvalidParameter
from ..validation import integer, real
from ..validation import max_contributions as check_max_contributions
from .budget import ZCDP, Budget, EpsDelta, _exact_parts
from .calibration import per_item_tail, zcdp_sigma
from .composition import Spent
from .conversions import approx_zcdp_epsilon, zcdp_delta
from .selective import selected_count_interval

if TYPE_CHECKING:
    from .auto_contributions import AutoChoice

KINDS = ("users", "count", "sum", "mean", "variance", "stddev")
SPREADS = ("variance", "stddev")   # kinds read from a centred sum, a count and a centred sum of squares (spec §3.1)
KEY_MODES = ("select", "threshold", "public")
# Selections whose weights are distinct-user counts with a novel key at exactly 1 (Gopi et al. journal
# Thm A.1/A.2): pre-thresholding keeps their proof (spec §pre-thresholding); weighted ones have none.
PRE_THRESHOLD_SELECTIONS = ("count_gaussian", "count_laplace")
# Share of ρ for key selection when a caller gives none, measured with `duckdp.aggregate` itself by
# benchmarks/bench_aggregate_split.py (benchmarks/RESULTS.md, "Private GROUP BY: selection share"): over
# MovieLens 100k (raters, ratings, mean rating), reddit and MovieLens latest-small (users), ρ ∈ {0.1, 1},
# Δ0 ∈ {100, 300}, the keys with every metric within 10 % of the truth summed over the grid are within 2 % of
# the best share for adaptive_sips (806 vs 814 at 0.3) and dpsips (730 vs 744 at 0.6).
DEFAULT_SELECTION_SHARE = 0.4
# keys="threshold"'s default share: its noisy users count is also the count and declared means' denominators
# (spec §4.2), so the threshold buys more than keys. Same method (MovieLens 100k, raters + ratings + mean rating,
# ρ ∈ {0.1, 1}, Δ0 ∈ {100, 300}, 3 trials; benchmarks/RESULTS.md "keys='threshold': one truncation"): useful
# keys summed over the grid 276 at 0.4, 294 at 0.5, 296 at 0.6 (best), 290 at 0.7; with rating declared
# not-null 303 / 333 / 348 / 354 — 0.6 is within 2 % of the best in both.
DEFAULT_THRESHOLD_SHARE = 0.6
# Grid of sums: 2^⌊log2((upper − lower)/2^16)⌋, so each value moves by at most 2^-17 of its range when
# rounded (negligible next to clipping and noise) and integers and halves are exact for ranges ≥ 2^16·2^-1.
_GRID_BITS = 16
# Above this σ, discrete Gaussian tails are bounded by integrals instead of summed (see `_upper_tail`).
_EXACT_TAIL_SIGMA = 4096.0
_TAIL_MARGIN = 1e-9          # relative margin on float tail sums: computed tails are upper bounds
_CLAMP = 2**62               # a linked estimate is clamped to ±2⁶² (the engines saturate measures there) before int64
THRESHOLD_TAG = 0            # PRF tag of the threshold's draw (keys="threshold"); measures use tags ≥ 1


@dataclass(frozen=True)
class Metric:
    """One released column: `kind` in KINDS; sum/mean/variance/stddev also read `column`, clipped to [lower, upper]."""

    name: str
    kind: str
    column: str | None = None
    lower: float | None = None
    upper: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParameter(f"a metric name must be a non-empty string, got {self.name!r}")
        if self.kind not in KINDS:
            raise InvalidParameter(f"metric {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind in ("users", "count"):
            if (self.column, self.lower, self.upper) != (None, None, None):
                raise InvalidParameter(f"metric {self.name!r}: {self.kind} takes no column or bounds")
            return
        if not isinstance(self.column, str) or not self.column:
            raise InvalidParameter(f"metric {self.name!r}: {self.kind} needs a column name (a non-empty string)")
        lower = real(f"metric {self.name!r} lower", self.lower)
        upper = real(f"metric {self.name!r} upper", self.upper)
        if not lower < upper:
            raise InvalidParameter(f"metric {self.name!r}: lower must be < upper, got [{lower!r}, {upper!r}]")
        if not math.isfinite(upper - lower):
            raise InvalidParameter(f"metric {self.name!r}: upper − lower overflows, got [{lower!r}, {upper!r}]")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)


def parse_metrics(metrics: Any) -> tuple[Metric, ...]:
    """Metrics from {name: "users" | "count" | (kind, column, lower, upper) | Metric}, in the given order."""
    if not isinstance(metrics, Mapping) or not metrics:
        raise InvalidParameter("metrics must be a non-empty dict {name: spec}")
    out = []
    for name, spec in metrics.items():
        if isinstance(spec, Metric):
            if spec.name != name:
                raise InvalidParameter(f"metric {name!r} is a Metric named {spec.name!r}")
            out.append(spec)
        elif isinstance(spec, str):
            out.append(Metric(name, spec))
        elif isinstance(spec, tuple) and len(spec) == 4:
            out.append(Metric(name, *spec))
        else:
            raise InvalidParameter(f"metric {name!r}: give 'users', 'count' or (kind, column, lower, upper), "
                                   f"got {spec!r}")
    return tuple(out)


@dataclass(frozen=True)
class Reading:
    """How one metric reads a measure: `role` is "users", "count" or "sum" (a mean reads a "sum" and a
    "count"; a sum may read a "link": a measure of its own that only links it, spec §3.2, no interval); `half_width`
    (grid steps) covers the measure's noise with probability `coverage` (a mean's two readings each at
    1 − (1 − c)/2, union bound), so metrics sharing a measure keep their own intervals."""

    metric: str
    role: str
    coverage: float | None
    half_width: int | None


@dataclass(frozen=True)
class Measure:
    """One noisy integer per released key, drawn once and read by every metric in `readers` (post-processing,
    Dwork & Roth Prop. 2.1). `part` is what the engine computes per key on the grid: "users" (distinct users),
    "count" (rows; for a mean's count, rows whose value is not NULL) or "sum" (Σ round(clip(v)/step) − offset
    per row; "centred" for a sum's own centred sum, spec §3.2), on the column and bounds of `metric`, its first
    reader; it gets N_Z(0, sigma²) from PRF
    sub-key K[b"aggm", tag]. `rho` = sensitivity²/(2σ²), or 0 for the threshold's own draw (tag
    THRESHOLD_TAG); `coverage`/`half_width` are the first reader's."""

    metric: str
    part: str
    sensitivity: float
    sigma: float
    rho: float
    step: float
    offset: int
    tag: int
    coverage: float | None
    half_width: int | None
    readers: tuple[Reading, ...] = ()


@dataclass(frozen=True)
class Link:
    """Measures released as one generalised-least-squares estimate (spec §3.2): their true per-key values satisfy
    the identities S = S_c + offset·C, one per (plain sum, centred sum, count, offset) in `identities` (indices
    into plan.measures); `measures` lists the linked indices and row i of `matrix` gives the estimate of
    measures[i] as Σ_j matrix[i][j]·(noisy value of measures[j]). `sd` is each estimate's standard deviation
    (grid steps / counts) from the σs, beside the σ it replaces. Post-processing of the noisy integers with
    public constants only (Dwork & Roth Prop. 2.1)."""

    measures: tuple[int, ...]
    identities: tuple[tuple[int, int, int, int], ...]
    matrix: tuple[tuple[float, ...], ...]
    sd: tuple[float, ...]


@dataclass(frozen=True)
class Threshold:
    """keys="threshold": release key k iff c_k + Z ≥ threshold, with c_k = distinct users − (pre_threshold − 1)
    over keys with c_k ≥ 1 and Z ~ N_Z(0, sigma²) from K[b"aggm", THRESHOLD_TAG]; c_k + Z + pre_threshold − 1
    is the released users count."""

    sigma: float
    threshold: int
    novel_delta: float
    rho: float


@dataclass(frozen=True)
class AggregatePlan:
    """Everything private about one aggregate, fixed before any data is read."""

    budget: Budget
    keys: str
    algo: str | None
    metrics: tuple[Metric, ...]
    measures: tuple[Measure, ...]
    max_contributions: int
    max_rows_per_key: int
    pre_threshold: int
    selection_share: float | None
    selection_budget: ZCDP | None          # what the selection mechanism gets (keys="select")
    threshold: Threshold | None            # keys="threshold"
    confidence: float | None
    rho: float                             # Σ of every part's ρ: the call's zCDP
    zcdp_delta: float                      # the selection's δ (0 with public keys)
    spent: Spent
    auto_rho: float = 0.0                  # max_contributions="auto": the Δ0 estimate's part of ρ (first part)
    auto: AutoChoice | None = None         # … and, once the data is read, what it chose
    not_null: tuple[str, ...] = ()         # value columns declared NOT NULL: a NULL is read as the midpoint (§3.1)
    links: tuple[Link, ...] = ()           # measures released as one estimate (spec §3.2)

    def measure(self, metric: str, role: str) -> Measure:
        """The measure that `metric` reads in `role` ("users", "count", "sum", "link")."""
        return self._read(metric, role)[0]

    def reading(self, metric: str, role: str) -> Reading:
        """How `metric` reads its `role` measure (its own coverage and half-width)."""
        return self._read(metric, role)[1]

    def _read(self, metric: str, role: str) -> tuple[Measure, Reading]:
        for m in self.measures:
            for r in m.readers:
                if (r.metric, r.role) == (metric, role):
                    return m, r
        raise KeyError((metric, role))

    def report_lines(self) -> list[str]:
        """The plan in words, for reports and `explain`."""
        lines = [f"budget {self.budget}; spends {self.spent}",
                 f"keys: {self.keys}" + (f" ({self.algo})" if self.algo else "")
                 + (f", pre_threshold {self.pre_threshold}" if self.pre_threshold > 1 else "")]
        if self.not_null:
            lines.append(f"declared not-null: {', '.join(self.not_null)} (means divide by the row count; a NULL "
                         f"there is read as its metric's grid midpoint)")
        if self.auto is not None:
            lines.append(f"auto Δ0: {self.auto.describe()}")
        elif self.auto_rho:
            lines.append(f"auto Δ0: ρ = {self.auto_rho:.6g} buys a private choice of Δ0 when the data is read")
        if self.selection_budget is not None:
            lines.append(f"selection: share {self.selection_share:g} → {self.selection_budget}")
        if self.threshold is not None:
            t = self.threshold
            lines.append(f"threshold: users + N_Z(0, {t.sigma:.6g}²) ≥ {t.threshold} (ρ = {t.rho:.6g}, "
                         f"δ = {t.novel_delta:.3g}; Gopi et al. Thm 5.1 / DP-SIPS Thm 13 with CKS20 Prop. 4)")
        for m in self.measures:
            read = ", ".join(f"{r.metric}.{r.role}" + (f" ±{r.half_width} at {r.coverage:g}" if r.half_width is not None
                                                        else "") for r in m.readers)
            lines.append(f"{m.metric}.{m.part} [tag {m.tag}]: ℓ2 sensitivity {m.sensitivity:.6g} (grid {m.step:g}), "
                         f"σ = {m.sigma:.6g} grid steps, ρ = {m.rho:.6g}; one draw read by {read}")
        for link in self.links:
            ms = self.measures
            ids = "; ".join(f"{ms[s].metric}.sum = {ms[c].metric}.{ms[c].part} + {o}·{ms[n].metric}.{ms[n].part}"
                            for s, c, n, o in link.identities)
            sds = ", ".join(f"{ms[i].metric}.{ms[i].part} {ms[i].sigma:.6g} → {sd:.6g}"
                            for i, sd in zip(link.measures, link.sd, strict=True))
            lines.append(f"linked (spec §3.2, post-processing): {ids} on the true values, so they are released as "
                         f"one least-squares estimate; sd {sds}")
        return lines


# ---------------------------------------------------------------- discrete Gaussian tails

def _upper_tail(t: int, sigma: float) -> float:
    """An upper bound on P[Z ≥ t] for Z ~ N_Z(0, σ²) and integer t ≥ 0.

    σ ≤ 4096: the exact sum of p(y) ∝ exp(−y²/2σ²) over |y| ≤ 40σ + 40 (the rest is < e^-800), scaled
    up by 1e-9 for float error. Larger σ: f(y) = exp(−y²/2σ²) decreases on y ≥ 0, so
    Σ_{y≥t} f(y) ≤ f(t) + ∫_t^∞ f = f(t) + σ√(2π)(1 − Φ(t/σ)) and the normaliser
    Σ_y f(y) ≥ 1 + 2∫_1^∞ f = 1 + 2σ√(2π)(1 − Φ(1/σ)) (sum–integral comparison); also for t > 40σ + 40.
    """
    if t <= 0:
        return 1.0
    n = int(40 * sigma) + 40
    if sigma <= _EXACT_TAIL_SIGMA and t <= n:
        f = np.exp(-np.arange(n + 1, dtype=np.float64) ** 2 / (2 * sigma * sigma))
        total = f[0] + 2 * math.fsum(f[1:])
        return min(1.0, math.fsum(f[t:]) / total * (1 + _TAIL_MARGIN))
    root = sigma * math.sqrt(2 * math.pi)
    tail = math.exp(-t * t / (2 * sigma * sigma)) + root * float(ndtr(-t / sigma))
    norm = 1 + 2 * root * float(ndtr(-1 / sigma))
    return min(1.0, max(tail / norm * (1 + _TAIL_MARGIN), math.ulp(0.0)))     # > 0 even where floats underflow


def _smallest(pred: Callable[[int], bool], start: int) -> int:
    """Smallest integer n ≥ 0 with pred(n), pred monotone, searched from a guess `start`."""
    lo, hi = -1, max(int(start), 1)
    while not pred(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def half_width(sigma: float, coverage: float) -> int:
    """Smallest integer h with P[|Z| ≤ h] ≥ coverage for Z ~ N_Z(0, σ²) (symmetric: 2·P[Z ≥ h + 1] ≤ 1 − coverage)."""
    guess = int(sigma * float(ndtri((1 + coverage) / 2)))
    return _smallest(lambda h: 2 * _upper_tail(h + 1, sigma) <= 1 - coverage, guess)


def threshold_for(sigma: float, novel_delta: float, max_contributions: int) -> int:
    """Smallest integer T with P[Z ≥ T − 1] ≤ 1 − (1 − δ)^{1/Δ0}, Z ~ N_Z(0, σ²).

    A user's k ≤ Δ0 novel keys have count exactly 1, so one of them passes with probability
    1 − (1 − P[Z ≥ T − 1])^k ≤ 1 − (1 − δ)^{k/Δ0} ≤ δ (Gopi et al. 2020 Thm 5.1 with ρ(k) = 1; DP-SIPS Thm 13).
    """
    q = float(per_item_tail(novel_delta, np.float64(max_contributions)))
    t = _smallest(lambda t: _upper_tail(t, sigma) <= q, int(-sigma * float(ndtri(q))))
    return t + 1


# ---------------------------------------------------------------- the plan

def grid_step(lower: float, upper: float) -> float:
    """2^⌊log2((upper − lower)/2^16)⌋: the sum grid of a clipped column (power of two, exact in floats)."""
    return math.ldexp(1.0, math.frexp((upper - lower) / 2**_GRID_BITS)[1] - 1)


def grid_bounds(lower: float, upper: float, step: float) -> tuple[int, int]:
    """The grid interval [round(lower/step), round(upper/step)] that clipped, rounded values lie in."""
    return round(lower / step), round(upper / step)


def _zcdp_rho_for(budget: EpsDelta, select_delta: float) -> float:
    """The largest ρ (up to 1e-9 relative) whose δ-approximate ρ-zCDP with δ = `select_delta` states at most
    (ε, δ) by DP-SIPS Cor. 9: the Spent conversion (δ' = select_delta, or δ' = δ with no selection)."""
    d_dp = select_delta + (1 - select_delta) * select_delta if select_delta else budget.delta
    target = (d_dp - select_delta) / (1 - select_delta)

    def ok(rho: float) -> bool:
        return zcdp_delta(rho, budget.epsilon)[0] <= target

    lo, hi = 0.0, budget.epsilon          # zCDP implies (ε, δ') only with ρ < ε
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        if hi - lo <= 1e-10 * hi:
            break
    rho = lo
    while rho > 0 and approx_zcdp_epsilon(rho, select_delta, d_dp) > budget.epsilon:
        rho *= 1 - 1e-9
    if rho <= 0:
        raise InvalidParameter(f"the budget {budget} is too small to plan any noise")
    return rho


def _shares(metric_shares: Any, names: list[str], free: list[str]) -> list[float]:
    """Each budgeted metric's share of the metrics' budget; `free` are the metrics that read only the
    threshold's noisy count (keys="threshold", spec §4.2) and so take no share."""
    if metric_shares is None:
        return [1.0 / len(names)] * len(names)
    if isinstance(metric_shares, Mapping) and set(metric_shares) & set(free):
        raise InvalidParameter(
            f"metric_shares: {sorted(set(metric_shares) & set(free))} read the threshold's noisy count "
            f"(keys='threshold', no budget of their own); give shares for exactly the metrics {names}")
    if not isinstance(metric_shares, Mapping) or set(metric_shares) != set(names):
        raise InvalidParameter(f"metric_shares must give a share for exactly the metrics {names}, "
                               f"got {metric_shares!r}")
    shares = [real(f"metric_shares[{n!r}]", metric_shares[n]) for n in names]
    if min(shares) <= 0 or not math.isclose(math.fsum(shares), 1.0, rel_tol=0, abs_tol=1e-9):
        raise InvalidParameter(f"metric_shares must be > 0 and sum to 1, got {metric_shares!r}")
    return shares


_THRESHOLD = ("users", "threshold")


def _quantities(metrics: tuple[Metric, ...], m: int, threshold: bool,
                not_null: frozenset[str] = frozenset()) -> dict[tuple, list[tuple[str, str, bool]]]:
    """{quantity: [(metric, role, is_mean)]} in order of first use: the distinct per-key integers the metrics
    read (spec §3.1). users with keys="threshold": the threshold's draw. users with m = 1: the row count (each
    kept (user, key) keeps exactly one row, so distinct users = rows); otherwise its own. count: rows per key —
    with keys="threshold" and m = 1 the threshold's draw (the measures read the very pairs the threshold counted,
    one kept row each: spec §4.2).
    A mean's count: rows with a non-NULL value in its column (≠ the count metric's rows where values are NULL,
    which the plan cannot know without reading data), shared by means on that column — unless the column is
    declared in `not_null` (public, data-independent): then every sampled row is counted, a NULL read as the
    grid midpoint, and the count is the row count itself. A mean's centred sum: shared by means with the same
    (column, lower, upper). A sum: shared only by identical sums — reading a mean's centred sum and count
    instead would add offset² times the count's variance (spec §3.1). A sum with offset ≠ 0 may also read a
    quantity of its own (role "link", spec §3.2): with keys="threshold", m = 1, a declared column and a mean on
    its bounds, `_LINK_COUNT`, an unconditioned row count ("The threshold's count"); with no mean on its bounds
    but a drawn count of exactly its rows (`_count_of_rows`), a centred sum on its bounds ("A count drawn
    anyway"). A variance or stddev (SPREADS) reads a mean's two quantities on its column and bounds, as a mean
    does (sharing them with means there), and a centred sum of squares Σ (v' − o)², shared by the spreads on the
    same (column, lower, upper)."""
    out: dict[tuple, list[tuple[str, str, bool]]] = {}
    rows = _THRESHOLD if threshold and m == 1 else ("count", None)     # the row count's draw
    for mt in metrics:
        if mt.kind == "users":
            q = _THRESHOLD if threshold else (rows if m == 1 else ("users",))
            out.setdefault(q, []).append((mt.name, "users", False))
        elif mt.kind == "count":
            out.setdefault(rows, []).append((mt.name, "count", False))
        elif mt.kind == "sum":
            out.setdefault(("sum", "plain", mt.column, mt.lower, mt.upper), []).append((mt.name, "sum", False))
        else:                       # a mean, or a spread: its centred sum and count read as a mean's (is_mean)
            out.setdefault(("sum", "centred", mt.column, mt.lower, mt.upper), []).append((mt.name, "sum", True))
            out.setdefault(_count_of_rows(mt.column, not_null, rows), []).append((mt.name, "count", True))
            if mt.kind in SPREADS:  # … and a centred sum of squares, shared by spreads on the same column and bounds
                out.setdefault(("squares", mt.column, mt.lower, mt.upper), []).append((mt.name, "squares", False))
    for key in [k for k in out if k[:2] == ("sum", "plain")]:   # one per distinct sum (identical sums: §3.1)
        col, lower, upper = key[2:]
        centred, owner = ("sum", "centred", col, lower, upper), out[key][0][0]
        count = _count_of_rows(col, not_null, rows)
        if not _link_gain(lower, upper):
            continue
        if centred in out:          # a mean on the same bounds: linked through its count (§3.2) ...
            if count == _THRESHOLD:     # ... which the threshold's draw cannot be: the sum buys a row count
                out.setdefault(_LINK_COUNT, []).append((owner, "link", False))
        elif count in out and count != _THRESHOLD:   # a count drawn anyway: the sum buys a centred sum to link
            out[centred] = [(owner, "link", False)]
    return out


_LINK_COUNT = ("count", None)       # with keys="threshold" and m = 1 the row count is otherwise the threshold's draw
_LINK_CAP = 63 / 64                 # the most of a sum's part its own link measure takes (_own_share)


def _grid(lower: float | None, upper: float | None) -> tuple[int, int, int]:
    """The grid numbers of a sum or mean on [lower, upper]: (s, h, o) = (max(|lo|, |hi|), max(o − lo, hi − o), o), the
    plain sum's and centred sum's per-row bounds and the offset, in grid steps (plan_aggregate's sensitivities)."""
    if lower is None or upper is None:
        raise InternalError("invariant failed: a sum or mean has bounds")
    lo, hi = grid_bounds(lower, upper, grid_step(lower, upper))
    o = (lo + hi) // 2
    return max(abs(lo), abs(hi)), max(o - lo, hi - o), o


def _link_gain(lower: float | None, upper: float | None) -> bool:
    """Whether a measure of the sum's own can help it: with offset 0, S = S_c and the optimal parts are 0."""
    return _grid(lower, upper)[2] != 0


def _own_share(lower: float | None, upper: float | None, buys: str, other: float, part: float) -> float:
    """The part of a sum's `part` of the metrics' budget that buys a measure of its own that links it (spec §3.2):
    `buys` "count", a row count C' (keys="threshold", m = 1, declared column: "The threshold's count"), given the
    part `other` of the mean's centred sum S_c on the same bounds; or "centred", a centred sum S_c on its own
    bounds, given the part `other` of a count C of exactly its rows drawn anyway ("A count drawn anyway").

    The sum is estimated from S̃ (part a) and S̃_c + o·C̃ (parts b, c), a + (the bought part) = `part`; per row and
    per unit of (m√Δ0)² the variances are s²/(2a), h²/(2b), o²/(2c), so the pooled precision is
    2[a/s² + 1/(h²/b + o²/c)], concave in the bought part x, whose derivative vanishes at x* = other·v(s − v)/w²
    with v the bought measure's per-row bound and w the other's (C': v = |o|, w = h; S_c: v = h, w = |o|). At
    the bounds [0, U], v = w = s/2: x* = other. x is capped at 63/64 of the part so the plain sum keeps a draw and
    the three draws stay one least-squares estimate; above the cap this loses at most 1/64 of the optimum's
    precision (the precision P is concave with P(0) > 0, so P(λx) ≥ λP(x))."""
    s, h, o = _grid(lower, upper)
    v, w = (abs(o), h) if buys == "count" else (h, abs(o))
    return min(other * v * (s - v) / w**2, _LINK_CAP * part)


def _not_null(not_null: Any, metrics: tuple[Metric, ...]) -> tuple[str, ...]:
    """The declared not-null columns, each one a sum/mean metric reads, in the given order."""
    if not_null is None:
        return ()
    cols = [not_null] if isinstance(not_null, str) else not_null
    if not isinstance(cols, (list, tuple)) or not all(isinstance(c, str) and c for c in cols):
        raise InvalidParameter(f"not_null must be a column name or a list of them, got {not_null!r}")
    read = {mt.column for mt in metrics if mt.column is not None}
    unread = [c for c in cols if c not in read]
    if unread:
        raise InvalidParameter(f"not_null names {unread}, which no sum or mean metric reads (they read {sorted(read)})")
    return tuple(dict.fromkeys(cols))


def _quantity_shares(quantities: dict[tuple, list[tuple[str, str, bool]]], metric_share: dict[str, float],
                     not_null: frozenset[str] = frozenset()) -> dict[tuple, float]:
    """Each budgeted quantity's share of the metrics' part of ρ (spec §4 "Budget"), summing to Σ metric_share.

    users/count/sum readers give their whole share to the quantity they read. The means reading one count C
    give theirs to their centred sums: S_j gets B_j, the shares of the means reading it, of which it passes
    x_j = max(0, B_j − t) to C, where t solves t = a + Σ_j max(0, B_j − t) (a: C's other readers' part) —
    so ρ_C = t and ρ_Sj = min(B_j, t). A mean's worst-case variance is ∝ 1/ρ_S + 1/ρ_C (spec §4), and given
    the rest of C's part, min over x of 1/(B − x) + 1/(a' + x) is at B − x = a' + x, or x = 0 when a' ≥ B:
    each centred sum's split is optimal given the others'. With C read by one mean only (a = 0) this is the
    even split ρ_S = ρ_C = B/2."""
    weights: dict[tuple, float] = {}
    centred: dict[tuple, float] = {}       # S_j → B_j
    count_of: dict[str, tuple] = {}        # mean → the count C it reads
    for q, readers in quantities.items():
        if q == _THRESHOLD:
            count_of |= {name: q for name, role, is_mean in readers if is_mean and role == "count"}
            continue
        weights[q] = math.fsum(metric_share[name] for name, role, is_mean in readers if not is_mean and role != "link")
        if any(is_mean and role == "sum" for _, role, is_mean in readers):
            centred[q] = math.fsum(metric_share[name] for name, _, _ in readers)
        count_of |= {name: q for name, role, is_mean in readers if is_mean and role == "count"}
    reads = {s_q: count_of[name] for s_q, readers in quantities.items() if s_q in centred for name, _, _ in readers}
    for s_q, c_q in reads.items():
        if c_q == _THRESHOLD:    # C is the threshold's draw, paid by the selection's part: S gets the mean's whole part
            weights[s_q] = centred[s_q]
    if _LINK_COUNT in quantities and any(role == "link" for _, role, _ in quantities[_LINK_COUNT]):
        for name, _, _ in quantities[_LINK_COUNT]:   # each linked sum passes part of its own part to the row count
            plain = next(q for q, rs in quantities.items() if q[:2] == ("sum", "plain") and rs[0][0] == name)
            c = _own_share(plain[3], plain[4], "count", weights[("sum", "centred") + plain[2:]], weights[plain])
            weights[plain] -= c
            weights[_LINK_COUNT] += c
    for c_q in dict.fromkeys(q for q in reads.values() if q != _THRESHOLD):
        parts = sorted((centred[s_q] for s_q in centred if reads[s_q] == c_q), reverse=True)
        a, k = weights[c_q], 0
        t = a                   # t = (a + the k largest B_j)/(k + 1), for the first k with B_k ≤ t
        while k < len(parts) and parts[k] > t:
            k += 1
            t = math.fsum([a, *parts[:k]]) / (k + 1)
        weights[c_q] = t
        for s_q in centred:
            if reads[s_q] == c_q:
                weights[s_q] = min(centred[s_q], t)
    for q, readers in quantities.items():          # a sum's own centred sum, once its count's part is final
        if q[:2] == ("sum", "centred") and readers[0][1] == "link":
            plain = ("sum", "plain") + q[2:]
            b = _own_share(q[3], q[4], "centred", weights[_count_of_rows(q[2], not_null)], weights[plain])
            weights[plain] -= b
            weights[q] += b
    return weights


def _count_of_rows(column: str | None, not_null: frozenset[str], rows: tuple = ("count", None)) -> tuple:
    """The count quantity that counts exactly the rows a sum or mean on `column` adds up (spec §3.1): `rows`, the
    row count's draw, for a declared column (every kept row, a NULL read as the midpoint), else the column's
    non-NULL count. `rows` is the threshold's draw with keys="threshold" and m = 1 (`_quantities`); a sum's own
    centred sum never links through that one, so its readers here pass the plain row count."""
    return rows if column in not_null else ("count", column)


def plan_aggregate(budget: Budget, metrics: Any, *, max_contributions: int, max_rows_per_key: int = 1,
                   keys: str = "select", algo: str | None = None, selection_share: float | None = None,
                   metric_shares: Mapping[str, float] | None = None, confidence: float | None = None,
                   pre_threshold: int = 1, auto_share: float | None = None,
                   not_null: Any = None) -> AggregatePlan:
    """The private plan of one aggregate (spec: docs/specs/private-group-by.md).

    keys: "select" (a select() mechanism `algo` picks keys on `selection_share` of the budget),
    "threshold" (Gaussian thresholding of distinct-user counts on that share, whose noisy count is the
    released `users` metric) or "public" (a public key set: no selection, no δ). `auto_share`: the first
    part of ρ, that share of it, pays a private choice of Δ0 (max_contributions="auto",
    privacy/auto_contributions.zcdp_part); the other parts share the rest as without it. `not_null`: value
    columns declared to hold no NULL (public): a mean on one divides by the row count (spec §3.1).
    """
    if not isinstance(budget, (EpsDelta, ZCDP)):
        raise InvalidParameter(f"budget must be EpsDelta or ZCDP, got {budget!r}")
    metric_specs = parse_metrics(metrics)
    declared = _not_null(not_null, metric_specs)
    d0 = check_max_contributions(max_contributions)
    m = integer("max_rows_per_key", max_rows_per_key, 1, 10**9)
    k = integer("pre_threshold", pre_threshold, 1, 10**9)
    if keys not in KEY_MODES:
        raise InvalidParameter(f"keys must be one of {KEY_MODES}, got {keys!r}")
    if (keys == "select") != (algo is not None):
        raise InvalidParameter("algo names the selection mechanism exactly when keys='select'")
    if confidence is not None:
        confidence = real("confidence", confidence)
        if not 0 < confidence < 1:
            raise InvalidParameter(f"confidence must be in (0, 1), got {confidence!r}")
    if k > 1 and keys == "public":
        raise InvalidParameter("pre_threshold does not apply to public keys: every public key is released")
    if k > 1 and keys == "select" and algo not in PRE_THRESHOLD_SELECTIONS:
        raise InvalidParameter(
            f"pre_threshold has no privacy proof for the weighted selection {algo!r}: the user who brings a "
            f"key to {k} users moves its weight by every holder's contribution, not only their own. "
            f"Use keys='threshold' or one of {PRE_THRESHOLD_SELECTIONS}")
    names = [mt.name for mt in metric_specs]
    out_cols = names + ([f"{n}_{s}" for n in names for s in ("low", "high")] if confidence is not None else [])
    if len(set(out_cols)) != len(out_cols):
        raise InvalidParameter(f"metric names and their _low/_high columns must be distinct, got {names}")

    # Distinct quantities (spec §3.1): each is noised once and read by every metric that needs it, and gets
    # its readers' parts (spec §4 "Budget"; a mean's part split between its centred sum and its count).
    quantities = _quantities(metric_specs, m, keys == "threshold", frozenset(declared))
    # Which metrics get budget: every metric, except those reading only the threshold's noisy count (users; with
    # m = 1 count too, spec §4.2) — a mean reading it as its count still pays for its centred sum.
    on_threshold = {name for name, _, _ in quantities.get(_THRESHOLD, [])}
    only_threshold = on_threshold - {name for q, rs in quantities.items() if q != _THRESHOLD for name, _, _ in rs}
    budgeted = [mt for mt in metric_specs if mt.name not in only_threshold]
    selects = keys != "public"
    if not selects:
        if selection_share is not None:
            raise InvalidParameter("selection_share does not apply to public keys: they need no selection budget")
        share = None
    elif not budgeted:
        if selection_share is not None:
            raise InvalidParameter("with keys='threshold' and only metrics the threshold's noisy count answers (users; "
                                   "count with max_rows_per_key=1) the threshold gets the whole budget")
        share = 1.0
    else:
        default = DEFAULT_THRESHOLD_SHARE if keys == "threshold" else DEFAULT_SELECTION_SHARE
        share = default if selection_share is None else real("selection_share", selection_share)
        if not 0 < share < 1:
            raise InvalidParameter(f"selection_share must be in (0, 1), got {selection_share!r}")
    free = [mt.name for mt in metric_specs if mt.name in only_threshold]
    if not budgeted and metric_shares is not None:
        raise InvalidParameter(f"metric_shares does not apply: every metric ({free}) reads the threshold's "
                               f"noisy count (keys='threshold'), which takes the whole budget")
    shares = _shares(metric_shares, [mt.name for mt in budgeted], free) if budgeted else []

    # A spread's share goes half to its sum of squares, half to its centred sum and count (split as a mean's):
    # its error is O(σ_Q/C) + O(h²σ_C/C) + O(h·σ_S/C) per key (spec §3.1), so no part may starve.
    spreads = {mt.name for mt in budgeted if mt.kind in SPREADS}
    weights = _quantity_shares(quantities, {mt.name: s / 2 if mt.name in spreads else s
                                            for mt, s in zip(budgeted, shares, strict=True)}, frozenset(declared))

    # Total ρ and the selection's δ (spec §accounting).
    if isinstance(budget, ZCDP):
        rho, sel_delta = budget.rho, (budget.delta if selects else 0.0)
    else:
        sel_delta = budget.delta / 2 if selects else 0.0
        rho = _zcdp_rho_for(budget, sel_delta)
    q_shares = list(weights.values())
    fractions = ([share] + [(1 - share) * w for w in q_shares]) if share is not None else q_shares
    if auto_share is not None:
        fractions = [auto_share] + [(1 - auto_share) * f for f in fractions]
    parts = _exact_parts(rho, fractions)          # Σ parts == ρ exactly, the last part takes the rest
    auto_rho = parts.pop(0) if auto_share is not None else 0.0
    sel_rho = parts.pop(0) if selects else None

    mean_coverage = None if confidence is None else 1 - (1 - confidence) / 2     # union bound over 2 parts
    spread_coverage = None if confidence is None else 1 - (1 - confidence) / 3   # … over 3 (S_c, C, Q)
    spread_names = {mt.name for mt in metric_specs if mt.kind in SPREADS}
    threshold = None
    root = math.sqrt(d0)
    if keys == "threshold":
        if sel_rho is None:
            raise InternalError("invariant failed: a threshold plan has a selection ρ")
        # Distinct-user counts: ℓ2 sensitivity √Δ0 over existing keys (Gopi et al. journal Thm A.2).
        sigma = zcdp_sigma(sel_rho, root)
        threshold = Threshold(sigma, threshold_for(sigma, sel_delta, d0), sel_delta, sel_rho)
    measures: list[Measure] = []
    tag = THRESHOLD_TAG + 1
    for q, readers in quantities.items():
        owner = next(mt for mt in metric_specs if mt.name == readers[0][0])
        part = "centred" if q[:2] == ("sum", "centred") and owner.kind == "sum" else q[0]   # a sum's own S_c
        if q == _THRESHOLD:
            if threshold is None:
                raise InternalError("invariant failed: a threshold plan has a threshold")
            sens, r, step, off, sigma, q_tag = root, 0.0, 1.0, 0, threshold.sigma, THRESHOLD_TAG
        else:
            r, step, off, q_tag = parts.pop(0), 1.0, 0, tag
            tag += 1
            if part == "users":          # a user adds 1 to each of ≤ Δ0 keys: ℓ2 = √Δ0
                sens = root
            elif part == "squares":      # ≤ m values (v' − o)² ≤ h² per key: ℓ2 = m·h²·√Δ0, h = max(o − lo, hi − o)
                if not (owner.lower is not None and owner.upper is not None):
                    raise InternalError("invariant failed: a spread has bounds")
                step = grid_step(owner.lower, owner.upper)
                lo, hi = grid_bounds(owner.lower, owner.upper, step)
                off = (lo + hi) // 2
                sens = m * max(off - lo, hi - off) ** 2 * root
            elif part == "count":        # ≤ m rows on each of ≤ Δ0 keys: ℓ2 = m√Δ0
                sens = m * root
            else:
                if not (owner.lower is not None and owner.upper is not None):
                    raise InternalError("invariant failed: owner.lower is not None and owner.upper is not None")
                step = grid_step(owner.lower, owner.upper)
                lo, hi = grid_bounds(owner.lower, owner.upper, step)
                if q[1] == "plain":      # ≤ m values in [lo, hi] grid steps per key: ℓ2 = m·max(|lo|, |hi|)·√Δ0
                    sens = m * max(abs(lo), abs(hi)) * root
                else:                    # a centred sum: values within max(o − lo, hi − o) of the offset
                    off = (lo + hi) // 2
                    sens = m * max(off - lo, hi - off) * root
            sigma = zcdp_sigma(r, sens)  # σ = Δ/√(2ρ) (Bun & Steinke 2016 Prop. 1.6; CKS20 Prop. 4)
        reads = []
        for name, role, is_mean in readers:
            cov = (None if role == "link" else spread_coverage if name in spread_names
                   else mean_coverage if is_mean else confidence)
            reads.append(Reading(name, role, cov, None if cov is None else half_width(sigma, cov)))
        measures.append(Measure(owner.name, part, float(sens), sigma, r, step, off, q_tag, reads[0].coverage,
                                reads[0].half_width, tuple(reads)))

    measures, links = _linked(quantities, measures, frozenset(declared))
    total = math.fsum([auto_rho, sel_rho or 0.0] + [x.rho for x in measures])
    spent = _spent(budget, total, sel_delta)
    sel_budget = ZCDP(sel_rho, sel_delta) if keys == "select" and sel_rho is not None else None
    return AggregatePlan(budget, keys, algo, metric_specs, tuple(measures), d0, m, k,
                         share if selects else None, sel_budget, threshold, confidence, total, sel_delta, spent,
                         auto_rho, not_null=declared, links=links)


def _spent(budget: Budget, rho: float, sel_delta: float) -> Spent:
    """The call's guarantee: δ-approximate ρ-zCDP, stated as (ε, δ) by DP-SIPS Cor. 9 with δ' = δ
    (= privacy.accountant.spent_of), or with no selection δ' = the request's δ."""
    d_dp = sel_delta + (1 - sel_delta) * sel_delta if sel_delta else budget.delta
    return Spent(approx_zcdp_epsilon(rho, sel_delta, d_dp), d_dp, rho, sel_delta)


# ---------------------------------------------------------------- linked measures (spec §3.2)

def _linked(quantities: dict[tuple, list[tuple[str, str, bool]]], measures: list[Measure],
            not_null: frozenset[str] = frozenset()) -> tuple[list[Measure], tuple[Link, ...]]:
    """The identities S = S_c + o·C between the plan's measures and, per group of identities sharing a count,
    its least-squares matrix; the group's readers get half-widths for the combined estimate (spec §3.2).

    An identity needs a `sum` and a `mean` on the same (column, lower, upper): the sum's draw S = Σ v', the
    mean's centred sum S_c = Σ (v' − o) and the mean's count C (rows with a value, or every kept row of a
    declared column, whose NULLs are read as o) are over the same kept rows with the same grid values (§2 stages
    3–5), so S = S_c + o·C holds exactly on the true integers (short of the ±2⁶² saturation). Not linked: a count
    that is the threshold's draw (keys="threshold", m = 1, declared column: its noise is conditioned on the key
    passing, so a sum read through it would lose its unbiasedness and its interval) — there the sum's own row
    count C' (`_LINK_COUNT`, bought with part of the sum's part: _own_share) takes its place —, and quantities
    on other bounds or columns, whose clipping differs. A sum with no mean on its bounds links through its own
    centred sum (role "link", _own_share) and the drawn count of its rows (`_count_of_rows`). Each identity
    has its own plain sum, so they are independent."""
    index = {q: i for i, q in enumerate(quantities)}
    count_of = {name: q for q, rs in quantities.items() for name, role, is_mean in rs if is_mean and role == "count"}
    mean_reads = {(name, role) for rs in quantities.values() for name, role, is_mean in rs if is_mean}
    groups: dict[int, list[tuple[int, int, int, int]]] = {}
    for q, readers in quantities.items():
        plain = ("sum", "plain", *q[2:])
        if q[:2] != ("sum", "centred") or plain not in index:
            continue
        count = _count_of_rows(q[2], not_null) if readers[0][1] == "link" else count_of[readers[0][0]]
        if count == _THRESHOLD and _LINK_COUNT in index:
            count = _LINK_COUNT   # the sum's own row count (keys="threshold", m = 1, declared column)
        c = index[count]
        if measures[c].tag != THRESHOLD_TAG:
            groups.setdefault(c, []).append((index[plain], index[q], c, measures[index[q]].offset))
    links = []
    for c, identities in groups.items():
        members = sorted({i for ident in identities for i in ident[:3]})
        sigmas = [measures[i].sigma for i in members]
        matrix, sd = _projection(members, identities, sigmas)
        links.append(Link(tuple(members), tuple(identities), matrix, sd))
        for row, i in enumerate(members):
            reads = tuple(r if r.coverage is None else
                          replace(r, half_width=linked_half_width(matrix[row], sigmas, members.index(c), r.coverage,
                                                                  rounded=(r.metric, r.role) not in mean_reads))
                          for r in measures[i].readers)
            measures[i] = replace(measures[i], readers=reads, half_width=reads[0].half_width)
    return measures, tuple(links)


def _projection(members: list[int], identities: list[tuple[int, int, int, int]], sigmas: list[float]
                ) -> tuple[tuple[tuple[float, ...], ...], tuple[float, ...]]:
    """P = I − ΣAᵀ(AΣAᵀ)⁻¹A and each estimate's sd √(PΣPᵀ)_ii, for the rows of A (one per identity: +1 on S,
    −1 on S_c, −o on C) and Σ = diag(σ²), in exact rational arithmetic (so every platform gets the same floats).

    y = x + Z with Z independent, E Z = 0, Cov Z = Σ, and Ax = 0 on the true x: x̂ = Py is the generalised
    least-squares estimate under the constraint (Aitken 1935; Hay, Rastogi, Miklau & Suciu 2010, "Boosting the
    accuracy of differentially private histograms through consistency", §3, with unequal variances): Px = x
    for every x with Ax = 0 (AΣAᵀ invertible: the rows are independent), so E x̂ = x (unbiased), and Cov x̂ =
    PΣPᵀ = Σ − ΣAᵀ(AΣAᵀ)⁻¹AΣ ⪯ Σ, so for every fixed vector ℓ, Var(ℓᵀx̂) ≤ Var(ℓᵀy) (Gauss–Markov: ℓᵀx̂ is
    the best linear unbiased estimate of ℓᵀx) — no measure, and no linear statistic of them, gets noisier. Σ uses
    σ², the discrete Gaussian's parameter: its variance is ≤ σ² and within a relative 3·10⁻⁷ of it for σ ≥ 1 (CKS20
    Cor. 9 and Poisson summation); unbiasedness holds for any weights, only optimality uses Σ."""
    pos = {m: j for j, m in enumerate(members)}
    n, k = len(members), len(identities)
    var = [Fraction(s) ** 2 for s in sigmas]
    a = [[Fraction(0)] * n for _ in range(k)]
    for r, (s, c, cnt, off) in enumerate(identities):
        a[r][pos[s]], a[r][pos[c]], a[r][pos[cnt]] = Fraction(1), Fraction(-1), Fraction(-off)
    m = [[sum((a[r][j] * var[j] * a[q][j] for j in range(n)), Fraction(0)) for q in range(k)] for r in range(k)]
    w = [row[:] for row in a]                       # solve M W = A (Gauss–Jordan; M is positive definite)
    for col in range(k):
        piv = m[col][col]
        m[col] = [x / piv for x in m[col]]
        w[col] = [x / piv for x in w[col]]
        for r in range(k):
            if r != col and m[r][col]:
                f = m[r][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
                w[r] = [x - f * y for x, y in zip(w[r], w[col], strict=True)]
    p = [[Fraction(int(i == j)) - var[i] * sum((a[r][i] * w[r][j] for r in range(k)), Fraction(0)) for j in range(n)]
         for i in range(n)]
    sd = tuple(math.sqrt(float(sum((p[i][j] ** 2 * var[j] for j in range(n)), Fraction(0)))) for i in range(n))
    return tuple(tuple(float(x) for x in row) for row in p), sd


def _tv_to_gaussian(sigma: float) -> float:
    """An upper bound on the total variation distance between Z + U and N(0, σ²), Z ~ N_Z(0, σ²) and U uniform
    on [−½, ½] independent (about 0.1/σ).

    Z + U has density q(x) = f(round x)/N, f(x) = exp(−x²/2σ²), N = Σ_k f(k); the Gaussian's is f(x)/M,
    M = σ√(2π). ∫|q − f/M| ≤ |1 − N/M| + (1/M)Σ_k ∫_{k−½}^{k+½}|f(k) − f(x)|dx. Poisson summation gives
    N = M(1 + 2Σ_{j≥1} e^{−2π²σ²j²}), so |1 − N/M| ≤ 2e^{−2π²σ²}/(1 − e^{−2π²σ²}). On a unit cell
    |f(k) − f(x)| ≤ |x − k|·sup_cell|f'| and ∫_cell|x − k| = ¼; |f'| is monotone on the four pieces split at
    −σ, 0, σ with maximum e^{−½}/σ and ∫|f'| = 2, so Σ_k sup_cell|f'| ≤ 2 + 8e^{−½}/σ. TV = ½∫|q − f/M|."""
    e = math.exp(-2 * math.pi**2 * sigma * sigma)
    return e / (1 - e) + (0.5 + 2 * math.exp(-0.5) / sigma) / (2 * sigma * math.sqrt(2 * math.pi))


def linked_half_width(row: tuple[float, ...], sigmas: list[float], exact: int, coverage: float, *,
                      rounded: bool) -> int:
    """Smallest integer h found with P[|released − true| > h] ≤ 1 − coverage for the estimate Σ_j row_j·(x_j + Z_j),
    Z_j ~ N_Z(0, σ_j²) independent; `rounded`: the estimate is released rounded to the nearest integer (grid step).

    The error is X = Σ_j row_j Z_j; the smaller of two valid bounds is used (both are upper bounds on the
    non-coverage, so their minimum is):
    (a) near-Gaussian: for an auxiliary U_j uniform on [−½, ½], X + Σ_{j≠e} row_j U_j differs from X by at most
        r = ½Σ_{j≠e}|row_j|, and replacing each Z_j + U_j (j ≠ e) by N(0, σ_j²) moves the probability of any event
        by at most Σ TV_j (`_tv_to_gaussian`; total variation is subadditive over independent coordinates), so
        P[|X| ≥ t] ≤ Σ_z p_e(z)·P[|G + row_e z| ≥ t − r] + Σ_{j≠e} TV_j with G ~ N(0, Σ_{j≠e} row_j²σ_j²), summed
        over the exact pmf p_e of the count e (σ_e ≤ 4096; above, e is treated like the others);
    (b) union bound: |X| ≤ Σ_j |row_j|·h_j with h_j = half_width(σ_j, 1 − α/k) over the k non-zero terms.
    Rounded: round(x + X) for integer x is within h of x when |X| < h + ½."""
    alpha = 1 - coverage
    nz = [j for j, a in enumerate(row) if a != 0.0]
    h_u = [half_width(sigmas[j], 1 - alpha / len(nz)) for j in nz]
    t_u = math.fsum(abs(row[j]) * h for j, h in zip(nz, h_u, strict=True))
    best = math.floor(t_u - 0.5) + 1 if rounded else math.ceil(t_u)
    e = exact if sigmas[exact] <= _EXACT_TAIL_SIGMA and row[exact] != 0.0 else None
    cont = [j for j in nz if j != e]
    tv = math.fsum(_tv_to_gaussian(sigmas[j]) for j in cont)
    s = math.sqrt(math.fsum((row[j] * sigmas[j]) ** 2 for j in cont))
    if not cont or tv >= alpha:
        return best
    r = 0.5 * math.fsum(abs(row[j]) for j in cont)
    if e is not None:
        n = int(40 * sigmas[e]) + 40               # the pmf beyond |z| > 40σ + 40 is < e^-800 (as `_upper_tail`)
        z = np.arange(-n, n + 1, dtype=np.float64)
        f = np.exp(-z * z / (2 * sigmas[e] ** 2))
        pz, shift = f / math.fsum(f), row[e] * z
    else:
        pz, shift = np.ones(1), np.zeros(1)

    def bound(t: float) -> float:
        g = math.fsum(pz * (ndtr((shift - (t - r)) / s) + ndtr((-shift - (t - r)) / s)))
        return min(1.0, g * (1 + _TAIL_MARGIN) + tv)

    def ok(h: int) -> bool:
        return bound(h + 0.5 if rounded else float(h)) <= alpha

    guess = int(s * float(ndtri(1 - alpha / 2)))
    return min(best, _smallest(ok, guess))


def _estimates(plan: AggregatePlan, noisy: Mapping[tuple[str, str], np.ndarray]) -> dict[tuple[str, str], np.ndarray]:
    """The linked measures' estimates per key, Σ_j P_ij·noisy_j in float64 (a fixed order of exact IEEE operations,
    so the same on every engine and platform): a function of the noisy integers and the public plan only."""
    out: dict[tuple[str, str], np.ndarray] = {}
    for link in plan.links:
        ys = [np.asarray(noisy[(plan.measures[j].metric, plan.measures[j].part)], dtype=np.float64)
              for j in link.measures]
        for i, row in zip(link.measures, link.matrix, strict=True):
            acc = np.zeros(ys[0].shape, dtype=np.float64)
            for a, y in zip(row, ys, strict=True):
                acc = acc + a * y
            out[(plan.measures[i].metric, plan.measures[i].part)] = acc
    return out


# ---------------------------------------------------------------- post-processing

def finish_mean(noisy_sum: np.ndarray, noisy_count: np.ndarray, lower: float, upper: float, step: float,
                offset: int) -> np.ndarray:
    """Mean = offset + noisy centred sum / noisy count, in value units, clamped to [lower, upper]
    (post-processing, Dwork & Roth Prop. 2.1); the midpoint where the noisy count is ≤ 0."""
    s = np.asarray(noisy_sum, dtype=np.float64)
    c = np.asarray(noisy_count, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(c > 0, (offset + s / np.where(c > 0, c, 1.0)) * step, (lower + upper) / 2)
    return np.clip(mean, lower, upper)


def mean_interval(noisy_sum: np.ndarray, count_low: np.ndarray, count_high: np.ndarray, lower: float, upper: float,
                  step: float, offset: int, sum_half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """Interval of the mean from the box [Ŝ ± h_S] × [count_low, count_high] (each at 1 − (1 − c)/2, so both hold
    with probability ≥ c; the count's interval Ĉ ± h_C, or keys="threshold"'s given the release, privacy/selective.py):
    the range of offset + S/C over the box, clamped; [lower, upper] if C ≤ 0 fits."""
    hs = float(sum_half_width)                                      # the box's four corners per key:
    s = np.asarray(noisy_sum, dtype=np.float64)[:, None] + np.array([-hs, -hs, hs, hs])
    lo_c, hi_c = np.asarray(count_low, dtype=np.float64), np.asarray(count_high, dtype=np.float64)
    c = np.stack([lo_c, hi_c, lo_c, hi_c], axis=1)
    bounded = c[:, 0] > 0          # the box's smallest count; S/C is monotone in S and C there, so corners suffice
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = (offset + s / np.where(c > 0, c, 1.0)) * step
    low = np.where(bounded, ratios.min(axis=1), lower)
    high = np.where(bounded, ratios.max(axis=1), upper)
    return np.clip(low, lower, upper), np.clip(high, lower, upper)


def finish_variance(noisy_squares: np.ndarray, noisy_sum: np.ndarray, noisy_count: np.ndarray, lower: float,
                    upper: float, step: float) -> np.ndarray:
    """Variance = (Q/C − (S_c/C)²)·step² from the noisy centred sum of squares Q, centred sum S_c and count C (the
    population variance of the bounded values: the offset cancels), clamped to [0, ((upper − lower)/2)²], the
    range of a variance on [lower, upper]; a uniform's (upper − lower)²/12 where C ≤ 0 (post-processing)."""
    q, s, c = (np.asarray(x, dtype=np.float64) for x in (noisy_squares, noisy_sum, noisy_count))
    with np.errstate(divide="ignore", invalid="ignore"):
        safe = np.where(c > 0, c, 1.0)
        var = np.where(c > 0, (q / safe - (s / safe) ** 2) * step * step, (upper - lower) ** 2 / 12)
    return np.clip(var, 0.0, ((upper - lower) / 2) ** 2)


def variance_interval(noisy_squares: np.ndarray, noisy_sum: np.ndarray, count_low: np.ndarray,
                      count_high: np.ndarray, lower: float, upper: float, step: float, squares_half_width: int,
                      sum_half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """Interval of the variance from the box [Q̂ ± h_Q] × [Ŝ ± h_S] × [count_low, count_high] (each at 1 − (1 − c)/3:
    all three hold with probability ≥ c): the range of g = Q/C − S²/C² over the box, clamped; [0, (range/2)²] where
    the box reaches C ≤ 0. g grows with Q and falls with |S|; in C it rises up to C* = 2S²/Q then falls (Q > 0) or
    only rises (Q ≤ 0), so its maximum is at Q's top, the S nearest 0 and C at C* clamped to the count's
    interval, its minimum at Q's bottom, the largest |S| and one of the count's ends."""
    q, s = np.asarray(noisy_squares, dtype=np.float64), np.asarray(noisy_sum, dtype=np.float64)
    c1, c2 = np.asarray(count_low, dtype=np.float64), np.asarray(count_high, dtype=np.float64)
    q1, q2, s1, s2 = q - squares_half_width, q + squares_half_width, s - sum_half_width, s + sum_half_width
    near = np.where((s1 <= 0) & (s2 >= 0), 0.0, np.minimum(np.abs(s1), np.abs(s2)))
    far = np.maximum(np.abs(s1), np.abs(s2))
    bounded = c1 > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = np.where(bounded, c1, 1.0), np.where(bounded, c2, 1.0)

        def g(qv: np.ndarray, sv: np.ndarray, cv: np.ndarray) -> np.ndarray:
            return qv / cv - (sv / cv) ** 2

        peak = np.clip(np.where(q2 > 0, 2 * near**2 / np.where(q2 > 0, q2, 1.0), b), a, b)
        high = np.maximum.reduce([g(q2, near, a), g(q2, near, b), g(q2, near, peak)])
        low = np.minimum(g(q1, far, a), g(q1, far, b))
    top = ((upper - lower) / 2) ** 2
    low = np.where(bounded, np.clip(low * step * step, 0.0, top), 0.0)
    high = np.where(bounded, np.clip(high * step * step, 0.0, top), top)
    return low, high


def finish(plan: AggregatePlan, noisy: Mapping[tuple[str, str], np.ndarray]) -> dict[str, np.ndarray]:
    """Released columns (name, then name_low/name_high with confidence) from each measure's noisy integers
    per key (keyed by the measure's (metric, part)), in the keys' (sorted) order: a function of the noisy
    integers and the plan only. Metrics sharing a measure read the same noisy integers; linked measures (spec
    §3.2) are read as their least-squares estimate (sums and counts rounded to the grid, means unrounded)."""
    out: dict[str, np.ndarray] = {}
    linked = _estimates(plan, noisy)
    shift = plan.pre_threshold - 1

    def selected(ms: Measure, rd: Reading, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A count's interval: the noise's x ± h, or for the threshold's draw (released users − shift ≥ T only)
        the interval that holds given the release (privacy/selective.py), shifted back."""
        if rd.half_width is None:
            raise InternalError("invariant failed: a reading with a confidence has a half-width")
        if ms.tag != THRESHOLD_TAG or plan.threshold is None or rd.coverage is None:
            return x - rd.half_width, x + rd.half_width
        lo, hi = selected_count_interval(x - shift, plan.threshold.threshold, plan.threshold.sigma, rd.coverage,
                                         rd.half_width)
        return lo + shift, hi + shift

    def read(metric: str, role: str, *, exact: bool = True) -> tuple[Measure, Reading, np.ndarray]:
        """The measure's noisy integers, or its linked estimate (§3.2): rounded to the nearest integer (a count, a
        sum's grid step) where `exact`, as float for a mean."""
        ms, rd = plan._read(metric, role)
        key = (ms.metric, ms.part)
        if key in linked:
            est = linked[key]
            return ms, rd, np.clip(np.rint(est), -_CLAMP, _CLAMP).astype(np.int64) if exact else est
        x = np.asarray(noisy[key], dtype=np.int64)
        if ms.tag == THRESHOLD_TAG:      # the threshold's noisy c_k = users − (pre_threshold − 1): shift back
            x = x + (plan.pre_threshold - 1)
        return ms, rd, x

    for mt in plan.metrics:
        if mt.kind in SPREADS:
            if not (mt.lower is not None and mt.upper is not None):
                raise InternalError("invariant failed: a spread has bounds")
            (ms, rs, s), (mc, rc, c) = read(mt.name, "sum", exact=False), read(mt.name, "count", exact=False)
            _, rq, q = read(mt.name, "squares")
            var = finish_variance(q, s, c, mt.lower, mt.upper, ms.step)
            out[mt.name] = var if mt.kind == "variance" else np.sqrt(var)
            if plan.confidence is not None:
                if rs.half_width is None or rq.half_width is None:
                    raise InternalError("invariant failed: a spread's readings have half-widths")
                c_lo, c_hi = selected(mc, rc, c)       # the threshold's draw: its interval given the release
                lo, hi = variance_interval(q, s, c_lo, c_hi, mt.lower, mt.upper, ms.step, rq.half_width,
                                           rs.half_width)
                out[f"{mt.name}_low"], out[f"{mt.name}_high"] = (lo, hi) if mt.kind == "variance" \
                    else (np.sqrt(lo), np.sqrt(hi))
            continue
        if mt.kind == "mean":
            if not (mt.lower is not None and mt.upper is not None):
                raise InternalError("invariant failed: mt.lower is not None and mt.upper is not None")
            (ms, rs, s), (mc, rc, c) = read(mt.name, "sum", exact=False), read(mt.name, "count", exact=False)
            out[mt.name] = finish_mean(s, c, mt.lower, mt.upper, ms.step, ms.offset)
            if plan.confidence is not None:
                if rs.half_width is None:
                    raise InternalError("invariant failed: both halves of a mean have half-widths")
                c_lo, c_hi = selected(mc, rc, c)       # C ± h_C, or the threshold's interval given the release
                out[f"{mt.name}_low"], out[f"{mt.name}_high"] = mean_interval(
                    s, c_lo, c_hi, mt.lower, mt.upper, ms.step, ms.offset, rs.half_width)
            continue
        ms, rd, x = read(mt.name, mt.kind)
        if mt.kind == "sum":
            out[mt.name] = x.astype(np.float64) * ms.step        # exact: power-of-two step, |x| < 2^53
        else:
            out[mt.name] = x
        if plan.confidence is not None:
            lo_i, hi_i = selected(ms, rd, x)
            if mt.kind == "sum":
                out[f"{mt.name}_low"], out[f"{mt.name}_high"] = lo_i * ms.step, hi_i * ms.step
            else:                  # counts are ≥ 0: clamping the interval is post-processing
                out[f"{mt.name}_low"], out[f"{mt.name}_high"] = np.maximum(lo_i, 0), hi_i
    return out

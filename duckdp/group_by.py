"""`aggregate()`: private GROUP BY — noisy users, counts, sums and means for selected or public keys.

validate → plan (no data: duckdp/privacy/aggregate.py) → open the run (charge once, before any read) →
keys (a select() mechanism, Gaussian thresholding, or public) → engine stages (restrict, bound keys,
sample rows, clip, per-key measures: duckdp/mechanisms/aggregate/; keys="threshold" runs them once over every key
and thresholds the users of the same kept pairs) → exact discrete Gaussian noise per (measure, key) from the
run's PRF → `finish` → a result sorted by key. Runs on DuckDB and Spark: the stages come from the engine's
module; the plan, the noise (the same PRF: on the driver, except keys="threshold"'s rule, which Spark runs on its
executors) and `finish` are shared, so a seeded call releases the same numbers on both wherever the engines' true
integers agree. Spec:
docs/specs/private-group-by.md.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from . import aggregate_noise, draw_pool, mechanisms
from .aggregate_noise import NOISY_USERS, Threshold, counters
from .engines import engine_for
from .errors import InternalError, InvalidParameter, SchemaError
from .mechanisms.aggregate import own_stages, pre_thresholded_selection
from .mechanisms.base import Params, Round, RoundPlan
from .privacy import auto_contributions
from .privacy.accountant import Accountant, plan_hook
from .privacy.aggregate import THRESHOLD_TAG, AggregatePlan, finish, plan_aggregate
from .privacy.budget import make_budget
from .privacy.events import ZcdpEvent
from .release import Spent
from .rng import Randomness
from .source import distinct_keys
from .validation import truncation as check_truncation

# aggregate's Δ0 truncation order (spec §7, benchmarks/RESULTS.md "Truncation order"): "global" releases as many
# or more keys whose numbers are within 10 % of the truth than "per_user" in 47 of 50 cells measured (4 datasets,
# ε ∈ {1, 4}, Δ0 ∈ {10, 100}, three key modes; the 3 others at Δ0 = 100, 4–5 % fewer), up to 356 → 2,142 keys;
# select() keeps "per_user", which releases more keys on the text datasets.
DEFAULT_TRUNCATION = "global"


# Keys per call of the exact sampler in `_exact_noise` (~50 ms of draws): how long a failed call waits for it.
NOISE_CHUNK = 4096


@dataclass
class Aggregate:
    """The result of `duckdp.aggregate`: released keys with one column per metric (+ _low/_high), sorted by key.

    Everything in it is a function of the released keys, the released numbers and the public plan."""

    items: Any                  # DuckDBPyRelation, or a Spark DataFrame on Spark
    plan: AggregatePlan
    spent: Spent
    seeded: bool
    input: str
    key_names: list[str]
    rounds: list[Round] = field(default_factory=list)     # the selection's rounds (keys=<algo>)
    truncation: str = DEFAULT_TRUNCATION                  # the order users over Δ0 keep keys in
    _table: pa.Table | None = field(default=None, repr=False)

    def to_arrow(self) -> pa.Table:
        """The released rows as one contiguous pyarrow Table, sorted by key."""
        if self._table is None:
            raise InvalidParameter("this result holds no table")
        return self._table

    def __len__(self) -> int:
        return 0 if self._table is None else self._table.num_rows

    def report(self) -> str:
        """The plan (σ per measure, selection, split), what was released, and the randomness."""
        lines = [f"duckdp aggregate — {len(self)} keys released",
                 f"  input     : {self.input}  (keys: {', '.join(self.key_names)})",
                 f"  Δ0        : {self.plan.max_contributions} keys per user, "
                 f"{self.plan.max_rows_per_key} row(s) per user and key"
                 + (", one global key order" if self.truncation == "global" else ", a per-user key order"),
                 f"  spent     : {self.spent}",
                 f"  randomness: {'SEEDED (reproducible; not for real releases)' if self.seeded else 'fresh'}"]
        lines += [f"  {line}" for line in self.plan.report_lines()]
        readers = [f"{r.metric}.{r.role}" for m in self.plan.measures if m.tag == THRESHOLD_TAG for r in m.readers]
        if readers:         # spec §4.2: users, and at m = 1 count and declared means' denominators, read it
            lines.append(f"  note      : {', '.join(readers)} read the threshold's noisy count, which passed the "
                         "threshold, so it is biased upward (a mean dividing by it is pulled toward its bounds' "
                         "midpoint); their intervals hold given the release (privacy/selective.py: near the "
                         "threshold they reach below the count by more than the noise's ±)")
        if self.plan.confidence is not None:
            lines.append("  intervals : cover the bounded statistic (after Δ0, the row cap and clipping)")
        return "\n".join(lines)


def _mode(keys: Any) -> tuple[str, str | None]:
    """("select", algo) | ("threshold", None) | ("public", None) from the `keys=` argument."""
    if isinstance(keys, str):
        if keys.strip().lower() == "threshold":
            return "threshold", None
        try:
            return "select", mechanisms.get(keys).name
        except InvalidParameter:
            return "public", None          # a table name holding public keys
    return "public", None


def _public_keys(con: Any, keys: Any, key_names: list[str], own: ModuleType) -> pa.Table:
    """The public key set as Arrow columns named like the input's keys (NULL keys refused; made distinct once
    cast to the input's key types)."""
    if isinstance(keys, (list, tuple)):
        if not keys:
            raise InvalidParameter("keys= is an empty list: give at least one public key")
        if len(key_names) == 1:
            rows = [k[0] if isinstance(k, tuple) and len(k) == 1 else k for k in keys]
            table = pa.table({key_names[0]: pa.array(rows)})
        else:
            if not all(isinstance(k, (tuple, list)) and len(k) == len(key_names) for k in keys):
                raise InvalidParameter(f"public keys for {key_names} must be tuples of {len(key_names)} values")
            table = pa.table({n: pa.array([k[i] for k in keys]) for i, n in enumerate(key_names)})
    else:
        table = own.read_keys(con, keys)       # a table name, relation or DataFrame of the engine
        missing = [n for n in key_names if n not in table.column_names]
        if missing:
            raise SchemaError(f"the public key set lacks the key column(s) {missing}; it has {table.column_names}")
        table = table.select(key_names)
    for n in key_names:
        if table.column(n).null_count:
            raise InvalidParameter(f"the public key set has NULL in {n!r}: keys are never NULL")
    return table


def _check_source(source: Any, con: Any, plan: AggregatePlan, own: ModuleType) -> None:
    """Schema checks before any data is read: value columns exist and are numeric; names do not collide."""
    types = own.column_types(con, source)
    for mt in plan.metrics:
        if mt.name in source.key_names:
            raise InvalidParameter(f"metric {mt.name!r} has the name of a key column")
        if mt.column is None:
            continue
        if mt.column not in types:
            raise SchemaError(f"metric {mt.name!r}: column {mt.column!r} is not in {source.description} "
                              f"(columns: {list(types)})")
        if not types[mt.column][1]:
            raise SchemaError(f"metric {mt.name!r}: column {mt.column!r} is {types[mt.column][0]}, not numeric")
    extra = [f"{n}_{s}" for n in (m.name for m in plan.metrics) for s in ("low", "high")] if plan.confidence else []
    clash = sorted(set(extra) & set(source.key_names))
    if clash:
        raise InvalidParameter(f"a confidence column would have the name of a key column: {clash}")


def aggregate(con: Any, table: Any, *, by: str | list[str], user_col: str = "user_id", metrics: dict,
              keys: Any = "adaptive_sips", epsilon: float | None = None, delta: float | None = None,
              rho: float | None = None, max_contributions: int | str = 100, max_rows_per_key: int = 1,
              selection_share: float | None = None, metric_shares: dict | None = None, pre_threshold: int = 1,
              confidence: float | None = None, seed: int | None = None, accountant: Accountant | None = None,
              auto_share: float = auto_contributions.DEFAULT_SHARE, not_null: str | list[str] | None = None,
              truncation: str = DEFAULT_TRUNCATION,
              **algo_params: Any) -> Aggregate:
    """Private GROUP BY `by` of `table`: one noisy column per metric for selected or public keys, sorted by key.

    metrics: {name: "users" | "count" | ("sum" | "mean" | "variance" | "stddev", column, lower, upper)}.
    keys: a select() algorithm
    (it selects on `selection_share` of ρ), "threshold" (Gaussian thresholding of distinct-user counts on
    `selection_share` of ρ, default 0.6, released as the users metric and, with max_rows_per_key=1, as count and
    a not_null column's mean denominator: one truncation, spec §4.2), or public keys (table name, relation,
    DataFrame, list: every one released, no other). The whole call is δ-approximate ρ-zCDP (spec §4) and is
    charged to `accountant` once, before any data is read. `seed` makes it reproducible (tests, demos; the
    result says so).
    `max_contributions="auto"`: the share `auto_share` of the call's ρ buys a private choice of Δ0
    (privacy/auto_contributions.py) before the other parts run with it; `plan` and `report()` show both.
    `not_null`: value column(s) the analyst declares free of NULLs (public, like a NOT NULL constraint): a mean
    on one divides by the noisy row count that users/count metrics read too, so fewer draws share the budget;
    a NULL found there anyway is read as its metric's midpoint (counted, adding 0 to a mean's centred sum),
    never an error (spec §3.1).
    `truncation`: the order every Δ0 truncation of the call (selection and metrics) keeps a user's keys in, as
    in select(): "global" (default here) or "per_user" (spec §7: global concentrates the truncation bias on
    some keys and leaves the others whole — many more released keys with usable numbers on every shared dataset).
    """
    kind = engine_for(con)
    own = own_stages(kind.name)                          # the engine's aggregate stages; refused before any charge
    mode, algo = _mode(keys)
    if mode == "public" and delta is None:
        raise InvalidParameter("delta is required: public keys spend none of it (the release is pure zCDP), but the "
                               "budget names the δ it is reported at as (ε, δ)-DP, e.g. delta=1e-6")
    budget = make_budget(epsilon=epsilon, delta=delta, rho=rho)
    check_truncation(truncation)
    mech = mechanisms.get(algo) if algo is not None else None
    settings = mech.check_params(algo_params) if mech is not None else {}
    if mech is None and algo_params:
        raise InvalidParameter(f"unknown parameters {sorted(algo_params)}: only a select() mechanism takes any")
    auto = auto_contributions.is_auto(max_contributions)
    if auto:
        auto_contributions.check_share(auto_share)
    elif auto_share != auto_contributions.DEFAULT_SHARE:
        raise InvalidParameter("auto_share applies only with max_contributions='auto'")

    def planned(d0: Any) -> AggregatePlan:
        return plan_aggregate(budget, metrics, max_contributions=d0, max_rows_per_key=max_rows_per_key, keys=mode,
                              algo=algo, selection_share=selection_share, metric_shares=metric_shares,
                              confidence=confidence, pre_threshold=pre_threshold,
                              auto_share=auto_share if auto else None, not_null=not_null)

    def selection(plan: AggregatePlan) -> tuple[Params | None, list[RoundPlan] | None]:
        """The selection mechanism's parameters and rounds at the plan's Δ0 (none without a mechanism)."""
        if mech is None:
            return None, None
        if plan.selection_budget is None:
            raise InternalError("invariant failed: a selection needs a selection budget")
        mech.check_budget(plan.selection_budget)
        params = Params(plan.max_contributions, settings)
        return params, mech.plan(plan.selection_budget, params)

    plan = planned(auto_contributions.CAP if auto else max_contributions)   # the charge: ρ, δ do not depend on Δ0
    if mech is not None:
        mech.check_engine(kind.name)
    params, rounds_plan = selection(plan)
    by_cols = [by] if isinstance(by, str) else list(by)
    public = None
    if mode == "public":
        if not by_cols or not all(isinstance(c, str) for c in by_cols):
            raise InvalidParameter(f"by must be a column name or a list of them, got {by!r}")
        public = _public_keys(con, keys, by_cols, own)
    randomness = Randomness(seed)
    on_plan = plan_hook(accountant, "aggregate", ZcdpEvent(plan.rho, plan.zcdp_delta))
    rounds: list[Round] = []
    with ExitStack() as stack:
        stages = stack.enter_context(kind.open_run(con, table, user_col, by, randomness, plan=[plan], on_plan=on_plan,
                                                   check_source=lambda s: _check_source(s, con, plan, own),
                                                   truncation=truncation, key_param="by"))
        pool = stack.enter_context(draw_pool.DrawPool(own.draw_workers(stages)))    # the exact draws' processes
        source = stages.source
        if auto:                                         # Δ0 first, on its own part of ρ; then re-plan with it
            choice = auto_contributions.estimate(stages, auto_contributions.zcdp_part(plan.auto_rho, auto_share),
                                                 randomness.key)
            final = planned(choice.max_contributions)
            if (final.rho, final.zcdp_delta, final.auto_rho) != (plan.rho, plan.zcdp_delta, plan.auto_rho):
                raise InternalError("the aggregate's privacy changed with Δ0 after the charge")
            plan = replace(final, auto=choice)
            params, rounds_plan = selection(plan)
        names = [f"_dp_k{i}" for i in range(len(source.key_names))]
        users_noisy = None
        if mode == "threshold":      # one truncation: the threshold's users and the measures of the same kept pairs
            if plan.threshold is None:
                raise InternalError("invariant failed: a threshold plan has a threshold")
            rule = Threshold(plan.threshold.sigma, plan.threshold.threshold, randomness, THRESHOLD_TAG)
            true = own.thresholded(stages, plan, rule, pool)
            users_noisy = true.column(NOISY_USERS).to_numpy(zero_copy_only=False)
        elif mode == "select":
            if mech is None or rounds_plan is None or params is None:
                raise InternalError("invariant failed: a selection needs its mechanism")
            if plan.pre_threshold > 1:      # count selections on users − (k − 1) (plan_aggregate refused the rest)
                selected, rounds = pre_thresholded_selection(stages, own, mech, rounds_plan, params.delta0,
                                                             plan.pre_threshold)
            else:
                selected, rounds = mech.run(stages, rounds_plan, params)
            stages.original_keys()                       # it may have run on key ids; the stages below read keys
            keyset_table = selected.select(source.key_names).rename_columns(names)
        else:
            if public is None:
                raise InternalError("invariant failed: public keys were not resolved")
            head = own.key_schema(stages)
            try:
                typed = public.rename_columns(names).cast(head)
            except (pa.ArrowException, ValueError) as exc:
                raise SchemaError(f"the public keys do not have the input's key types {head.types}: {exc}") from None
            keyset_table = distinct_keys(typed)   # as the engine's GROUP BY sees keys (source.canonical_key)
        drawn: dict[int, np.ndarray] | None = None
        if mode != "threshold":
            keyset = own.keyset(stages, keyset_table)
            early = counters(own.counters(stages, keyset))      # the measures' counters, in their row order
            stop = threading.Event()
            with ThreadPoolExecutor(max_workers=1) as drawer:    # the exact noise, drawn while the engine sums
                pending = drawer.submit(_exact_noise, randomness, plan, *early, stop, pool)
                try:
                    true = own.key_measures(stages, plan, keyset)   # one grouped pass: pairs carry their sums
                except BaseException:                          # e.g. Ctrl-C: the draws stop within a chunk
                    stop.set()
                    raise
                drawn = pending.result()
        hi, lo = counters(true)
        if mode == "threshold":      # its keys arrive with their sums: the same draws, made now
            drawn = _exact_noise(randomness, plan, hi, lo, threading.Event(), pool)
        elif not (np.array_equal(hi, early[0]) and np.array_equal(lo, early[1])):
            raise InternalError("invariant failed: the measures' counters are not those the noise was drawn for")
        if drawn is None:
            raise InternalError("invariant failed: the exact noise stopped without a reason")
        noisy: dict[tuple[str, str], np.ndarray] = {}
        for i, m in enumerate(plan.measures):
            if m.tag == THRESHOLD_TAG:
                noisy[(m.metric, m.part)] = np.asarray(users_noisy, dtype=np.int64)
                continue
            x = true.column(f"_dp_m{i}").to_numpy(zero_copy_only=False).astype(np.int64)
            noisy[(m.metric, m.part)] = x + drawn[i]
        columns = finish(plan, noisy)
        out = true.select(names).rename_columns(list(source.key_names))
        for name, values in columns.items():
            out = out.append_column(name, pa.array(values))
    out = out.combine_chunks()
    return Aggregate(items=kind.relation(con, out, list(source.key_names)), plan=plan, spent=plan.spent,
                     seeded=randomness.seeded, input=source.description, key_names=list(source.key_names),
                     rounds=rounds, truncation=truncation, _table=out)


def _exact_noise(randomness: Randomness, plan: AggregatePlan, hi: np.ndarray, lo: np.ndarray,
                 stop: threading.Event, pool: draw_pool.DrawPool) -> dict[int, np.ndarray] | None:
    """Each budgeted measure's exact N_Z(0, σ²) per key (aggregate_noise.noise), by measure index; None once `stop`
    is set. A draw is a function of (K, the measure's tag, the key's counter and collision rank) only, not of any
    sum, so it can be drawn in a thread while the engine computes the sums (DuckDB and Spark run outside the GIL):
    the Python sampler (~10⁵ draws per second per worker) then costs no wall time where the metrics' grouped pass
    takes longer (keys="threshold", whose keys come with their sums, calls it afterwards). Drawn in chunks of
    NOISE_CHUNK keys, or MIN_PARALLEL per worker process of `pool` (the same draws: ranks are those of all the
    keys), so a failed or interrupted call waits for one chunk, not for every draw of a large public key set."""
    ranks = aggregate_noise.collision_ranks(hi, lo)
    out: dict[int, np.ndarray] = {}
    for i, m in enumerate(plan.measures):
        if m.tag == THRESHOLD_TAG:
            continue
        parts = [np.zeros(0, dtype=np.int64)]
        chunk = NOISE_CHUNK if pool.workers == 1 else draw_pool.MIN_PARALLEL * pool.workers     # every worker busy
        for start in range(0, hi.size, chunk):
            if stop.is_set():
                return None
            part = slice(start, start + chunk)
            parts.append(aggregate_noise.noise(randomness, m.tag, hi[part], lo[part], m.sigma, ranks[part], pool))
        out[i] = np.concatenate(parts)
    return out


__all__ = ["Aggregate", "aggregate"]

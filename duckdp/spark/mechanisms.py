"""The registered mechanisms' runs on Spark, composed from the stages (plans stay engine-neutral).

Each runner takes (SparkRun, plan, params) and returns (released keys as Arrow under internal
names, executed rounds), mirroring `Mechanism.run` of the DuckDB path stage by stage and drawing
its salts in the same order.
"""
from __future__ import annotations

import pyarrow as pa

from ..errors import InvalidParameter
from ..mechanisms.base import Round
from ..mechanisms.truncated_geometric import keep_probabilities
from . import mad, stages
from .noise import standard_draws
from .run import SparkRun

_EXPONENT = {"weighted_gaussian": 0.5, "weighted_laplace": 1.0, "count_gaussian": 0.0, "count_laplace": 0.0}


def basic(run: SparkRun, plan, params, exponent: float):
    """Gopi et al. Basic (mechanisms/basic.py): weights, noise, one threshold."""
    (rp,) = plan
    w = stages.weights(run.pairs(), run.keys, params["max_contributions"], exponent, run.randomness)
    table = run.collect(stages.noise_threshold(w, run.keys, rp.noise, rp.scale, rp.threshold, run.randomness))
    return table, [Round.from_plan(0, rp, table.num_rows)]


def dpsips(run: SparkRun, plan, params):
    """DP-SIPS Alg. 3 (mechanisms/dpsips.py): each round removes the keys released so far and
    re-truncates what remains; the pairs are read once and cached."""
    pairs = run.pairs(cached=True)
    found: list[pa.Table] = []
    rounds = []
    for i, rp in enumerate(plan):
        remaining = stages.remove(pairs, run.frame(pa.concat_tables(found)), run.keys) if found else pairs
        w = stages.weights(remaining, run.keys, params["max_contributions"], 0.5, run.randomness)
        table = run.collect(stages.noise_threshold(w, run.keys, rp.noise, rp.scale, rp.threshold, run.randomness))
        found.append(table.cast(found[0].schema) if found else table)
        rounds.append(Round.from_plan(i, rp, table.num_rows))
    return pa.concat_tables(found), rounds


def truncated_geometric(run: SparkRun, plan, params):
    """Desfontaines et al. 2022 Thm 1 (mechanisms/truncated_geometric.py): keep a key held by n
    users with probability π(n), by one fresh keyed uniform draw below π(n)."""
    from pyspark.sql import functions as F

    (rp,) = plan
    probs = keep_probabilities(rp.extra["per_key_epsilon"], rp.extra["per_key_delta"])
    counts = stages.weights(run.pairs(), run.keys, params["max_contributions"], 0.0, run.randomness)
    table = pa.table({"_dp_n": pa.array(range(1, len(probs) + 1), pa.int64()), "_dp_p": pa.array(probs, pa.float64())})
    keep = run.frame(table)
    drawn = (counts.withColumn("_dp_n", F.round(F.col("_dp_w")).cast("long")).join(keep, "_dp_n", "left")
             .withColumn("_dp_p", F.coalesce(F.col("_dp_p"), F.lit(1.0))))
    drawn = standard_draws(drawn, run.keys, "uniform", run.randomness, "_dp_u")
    released = run.collect(drawn.where(F.col("_dp_u") < F.col("_dp_p")))
    return released, [Round.from_plan(0, rp, released.num_rows)]


RUNNERS = {name: (lambda e: lambda run, plan, params: basic(run, plan, params, e))(e) for name, e in _EXPONENT.items()}
RUNNERS |= {"dpsips": dpsips, "truncated_geometric": truncated_geometric, "mad": mad.run_mad, "mad2r": mad.run_mad2r}


def runner(name: str):
    """The Spark run of mechanism `name`, or a clear error for the sequential ones (DuckDB only)."""
    if name not in RUNNERS:
        raise InvalidParameter(f"{name} runs only on DuckDB: its users are processed one after another "
                               f"(a sequential policy), which a Spark stage cannot express; "
                               f"on Spark choose one of {', '.join(sorted(RUNNERS))}")
    return RUNNERS[name]

"""Mechanism runs over `SparkStages`, stage for stage the stage library's `Mechanism.run(stages, …)`.

Once the stage library (branch "stages") is merged, `Mechanism.run` takes any engine's stages and
these bodies are the same code: this table then reduces to the set of mechanisms Spark supports.
"""
from __future__ import annotations

import functools

from ..errors import InvalidParameter
from ..mechanisms.base import Round
from ..mechanisms.truncated_geometric import keep_probabilities
from .stages import SparkStages, _x

_EXPONENT = {"weighted_gaussian": 0.5, "weighted_laplace": 1.0, "count_gaussian": 0.0, "count_laplace": 0.0}


def basic_weights(stages: SparkStages, max_contributions: int, exponent: float, pairs=None):
    """pairs → sized → truncate (fresh salt) → weights (mechanisms/basic.py)."""
    pairs = stages.pairs() if pairs is None else pairs
    return stages.weights(stages.truncate(stages.sized(pairs), max_contributions), exponent)


def basic(stages: SparkStages, plan, params, exponent: float):
    """Gopi et al. Basic: weights, noise, one threshold."""
    (round_plan,) = plan
    table = stages.output(stages.release(basic_weights(stages, params["max_contributions"], exponent), round_plan))
    return table, [Round.from_plan(0, round_plan, stages.num_rows(table))]


def dpsips(stages: SparkStages, plan, params):
    """DP-SIPS Alg. 3: every round removes the keys released so far and re-truncates the rest."""
    max_contributions = params["max_contributions"]
    pairs = stages.store(stages.pairs(), "pairs")           # distinct pairs, read from the input once
    released = stages.empty_keys(pairs)                     # P_0 ∪ … ∪ P_{i−1}
    rounds = []
    for i, round_plan in enumerate(plan[:-1]):
        weights = basic_weights(stages, max_contributions, 0.5, stages.remove(pairs, released))
        released, count = stages.append(released, stages.release(weights, round_plan))
        rounds.append(Round.from_plan(i, round_plan, count))
    weights = basic_weights(stages, max_contributions, 0.5, stages.remove(pairs, released))
    table = stages.output(stages.union(released, stages.release(weights, plan[-1])))
    stored = sum(r.released for r in rounds)
    rounds.append(Round.from_plan(len(plan) - 1, plan[-1], stages.num_rows(table) - stored))
    return table, rounds


def mad(stages: SparkStages, plan, params):
    """MAD (spec §5, Alg. 3)."""
    (round_plan,) = plan
    pairs = stages.store(stages.sized(stages.pairs()), "pairs")
    vectors = stages.mad_vectors(stages.truncate(pairs, params["max_contributions"]))
    table = stages.output(stages.release(stages.mad_weights(vectors, round_plan), round_plan))
    return table, [Round.from_plan(0, round_plan, stages.num_rows(table))]


def mad2r(stages: SparkStages, plan, params):
    """MAD2R (spec §6, Alg. 4): unbiased MAD screen, then biased MAD on what round 1 left."""
    plan1, plan2 = plan
    max_contributions = params["max_contributions"]
    pairs = stages.store(stages.sized(stages.pairs()), "pairs")
    vectors1 = stages.mad_vectors(stages.truncate(pairs, max_contributions))
    status = stages.mad2r_screen(pairs, vectors1, plan1, plan2, max_contributions)
    first = stages.output(stages.mad2r_released(status))
    stages.drop(vectors1)
    vectors2 = stages.mad2r_vectors(pairs, status, max_contributions, _x(plan2, "beta_min"), _x(plan2, "beta_max"))
    second = stages.output(stages.release(stages.mad_weights(vectors2, plan2), plan2))
    table = stages.concat([first, second])
    return table, [Round.from_plan(0, plan1, stages.num_rows(first)), Round.from_plan(1, plan2, stages.num_rows(second))]


def truncated_geometric(stages: SparkStages, plan, params):
    """Desfontaines et al. 2022 Thm 1: keep a key held by n users with probability π(n)."""
    (round_plan,) = plan
    probs = keep_probabilities(_x(round_plan, "per_key_epsilon"), _x(round_plan, "per_key_delta"))
    table = stages.output(stages.geometric_release(basic_weights(stages, params["max_contributions"], 0.0), probs))
    return table, [Round.from_plan(0, round_plan, stages.num_rows(table))]


RUNS = {name: functools.partial(basic, exponent=e) for name, e in _EXPONENT.items()}
RUNS |= {"dpsips": dpsips, "mad": mad, "mad2r": mad2r, "truncated_geometric": truncated_geometric}


def spark_run(name: str):
    """The Spark run of mechanism `name`, or a clear error for those that need DuckDB."""
    if name not in RUNS:
        raise InvalidParameter(f"{name} runs only on DuckDB: it processes users one after another (a sequential "
                               f"policy), which Spark stages do not express; on Spark use one of {', '.join(sorted(RUNS))}")
    return RUNS[name]

"""`Engine`: the generic stages every engine implements (contract in `duckdp/stages/__init__.py`).

It names no mechanism: a mechanism composes these stages, passes its own decision rule to `decide`,
and brings its own stages per engine in its folder (duckdp/mechanisms/<family>/duckdb.py, spark.py).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from ..rng import Randomness

Frame = Any     # the engine's handle: DuckDB `Query`, Spark DataFrame
# rule(weights, noisy) -> (mask of rows to keep, {column: values} added to the kept rows); weights are
# NaN where `_dp_w` is NULL. The mechanism's own numpy decision (e.g. MAD2R's screen).
Rule = Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, dict[str, np.ndarray]]"]


class NoisePlan(Protocol):
    """What a noise stage reads from a round's plan (a mechanism's `RoundPlan` is one; engines import no
    mechanism): the noise kind, its scale and the release threshold."""

    @property
    def noise(self) -> str: ...

    @property
    def scale(self) -> float: ...

    @property
    def threshold(self) -> float: ...


class Engine(ABC):
    """One engine's implementation of the generic stages; mechanisms see only this and their own stages."""

    name: str          # the engine's registry name ("duckdb", "spark"): picks a mechanism's own stages
    source: Any        # the resolved input (`key_names`, `description`, `keys` = internal key columns)
    randomness: Randomness   # the run's keyed randomness (salts, noise), for numpy steps of a mechanism
    truncation: str    # the order `truncate` keeps keys in: "per_user" or "global" (validation.truncation)

    # -- shared stages ----------------------------------------------------------------------
    @abstractmethod
    def pairs(self) -> Frame:
        """Distinct (`_dp_user`, keys) pairs of the input."""

    def round_pairs(self) -> Frame:
        """`pairs` for a mechanism that reads them over several rounds; an engine may replace the key
        columns by one injective integer id for the rest of the run (`output` maps ids back)."""
        return self.pairs()

    def original_keys(self) -> None:
        """Back to the input's key columns after a run on `round_pairs` ids (nothing to do where an engine
        keeps the key columns), for stages that read the input again."""
        return None

    @abstractmethod
    def sized(self, pairs: Frame) -> Frame:
        """`pairs` with `_dp_size` = the user's number of pairs |W_u|."""

    @abstractmethod
    def truncate(self, sized: Frame, max_contributions: int, salt: int | None = None) -> Frame:
        """Each user's Δ0 pairs of smallest keyed hash (fresh salt, or `salt` the caller drew from the run's
        randomness) of (user, key), or of the key alone under truncation="global", ties of the hash broken by the
        key (never by the order rows arrive in: DESIGN §3); carried columns plus `_dp_d`."""

    @abstractmethod
    def contribution_histogram(self, pairs: Frame, edges: list[int]) -> list[tuple[int, int]]:
        """(bucket b, users) for the non-empty buckets edges[b] ≤ |W_u| < edges[b+1] (last open-ended)."""

    @abstractmethod
    def weights(self, kept: Frame, exponent: float) -> Frame:
        """Per key Σ `_dp_d`^(−exponent) over the users who kept it: (keys, `_dp_w`)."""

    @abstractmethod
    def release(self, weights: Frame, plan: NoisePlan) -> Frame:
        """Noise + threshold: the keys whose `_dp_w` + plan.scale · fresh keyed `plan.noise` noise reaches
        `plan.threshold` (keys only: the noisy weights are never released)."""

    @abstractmethod
    def decide(self, weights: Frame, plan: NoisePlan, rule: Rule, added: dict[str, str],
               round_tag: int | None = None) -> Frame:
        """Noise on EVERY row of `weights` (`_dp_w` + plan.scale · fresh keyed `plan.noise` noise, NULL
        weights as 0), then the mechanism's numpy `rule(weights, noisy)` picks rows batch by batch:
        the kept keys plus the columns the rule adds (`added`: name → SQL type `boolean`/`double`/`int`).
        `round_tag`: a tag the caller drew (`randomness.next_round()`) instead of a fresh one, so that a
        later `decide` with the same tag draws more of the same round's noise: a key's draw is then the
        same in both calls wherever its PRF counter does not depend on the other keys present (integer
        keys and key ids; not digest counters, which rank collisions: duckdp/counters.py)."""

    @abstractmethod
    def remove(self, pairs: Frame, keys: Frame) -> Frame:
        """The pairs whose key is not in `keys`."""

    @abstractmethod
    def store(self, frame: Frame, name: str) -> Frame:
        """Materialise `frame` for reuse (dropped when the run closes)."""

    @abstractmethod
    def empty_keys(self, like: Frame) -> Frame:
        """A stored, empty key frame with the key columns of `like`."""

    @abstractmethod
    def append(self, stored: Frame, keys: Frame) -> tuple[Frame, int]:
        """`stored` ∪ `keys` (disjoint) and the number of rows added."""

    @abstractmethod
    def union(self, first: Frame, second: Frame) -> Frame:
        """Two key frames concatenated."""

    @abstractmethod
    def output(self, keys: Frame) -> Any:
        """The released keys under the input's column names, as the engine's result table, sorted by
        the key columns: the order must be a function of the released set alone (never of the
        engine's hash tables, input order or threads), so mechanisms call it once on all their keys."""

    @abstractmethod
    def num_rows(self, table: Any) -> int:
        """Rows of a result table returned by `output`."""

    @abstractmethod
    def drop(self, frame: Frame) -> None:
        """Free a stored frame early (memory before the next round)."""

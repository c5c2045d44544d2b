"""`Stages`: the engine interface every mechanism composes (contract in `duckdp/stages/__init__.py`)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

import numpy as np

Frame = Any     # the engine's handle: DuckDB `Query`, Spark DataFrame


class Stages(ABC):
    """One engine's implementation of every stage; mechanisms see only this."""

    engine: str

    # -- shared stages ----------------------------------------------------------------------
    @abstractmethod
    def pairs(self) -> Frame:
        """Distinct (`_dp_user`, keys) pairs of the input."""

    @abstractmethod
    def sized(self, pairs: Frame) -> Frame:
        """`pairs` with `_dp_size` = the user's number of pairs |W_u|."""

    @abstractmethod
    def truncate(self, sized: Frame, max_contributions: int) -> Frame:
        """Each user's Δ0 pairs of smallest keyed hash (fresh salt), carried columns plus `_dp_d`."""

    @abstractmethod
    def contribution_histogram(self, pairs: Frame, edges: list[int]) -> list[tuple[int, int]]:
        """(bucket b, users) for the non-empty buckets edges[b] ≤ |W_u| < edges[b+1] (last open-ended)."""

    @abstractmethod
    def weights(self, kept: Frame, exponent: float) -> Frame:
        """Per key Σ `_dp_d`^(−exponent) over the users who kept it: (keys, `_dp_w`)."""

    @abstractmethod
    def release(self, weights: Frame, plan) -> Frame:
        """Noise + threshold: the keys whose weight plus fresh keyed noise reaches `plan.threshold`."""

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
    def output(self, keys: Frame):
        """The released keys under the input's column names, as the engine's result table, sorted by
        the key columns: the order must be a function of the released set alone (never of the
        engine's hash tables, input order or threads), so mechanisms call it once on all their keys."""

    @abstractmethod
    def num_rows(self, table) -> int:
        """Rows of a result table returned by `output`."""

    # -- mechanism-specific stages ---------------------------------------------------------
    @abstractmethod
    def mad_vectors(self, kept: Frame) -> Frame:
        """Stored MAD user vectors (`_dp_user`, keys, `_dp_d`, `_dp_uw` = 1/√d)."""

    @abstractmethod
    def mad_weights(self, vectors: Frame, plan) -> Frame:
        """MAD stages 1–4 over user vectors → (keys, `_dp_w`)."""

    @abstractmethod
    def mad2r_screen(self, pairs: Frame, vectors: Frame, plan1, plan2, max_contributions: int) -> Frame:
        """Stored exceptions (keys, `_dp_released`, `_dp_round2`, `_dp_beta`) of MAD2R round 1."""

    @abstractmethod
    def mad2r_vectors(self, pairs: Frame, status: Frame, max_contributions: int, beta_min: float,
                      beta_max: float) -> Frame:
        """Stored round-2 user vectors (`_dp_user`, keys, `_dp_d`, `_dp_v`, `_dp_uw`, `_dp_biased`)."""

    @abstractmethod
    def mad2r_released(self, status: Frame) -> Frame:
        """The keys MAD2R round 1 released (O1)."""

    @abstractmethod
    def adaptive_sips_remaining(self, pairs: Frame, state: Frame | None) -> Frame:
        """R_u: the stored pairs whose key is in play in `state` (None: round 1, all), with `_dp_level`."""

    @abstractmethod
    def adaptive_sips_vectors(self, kept: Frame, cap: float) -> Frame:
        """(`_dp_user`, keys, `_dp_x`): each user's capped unit-norm vector over the kept pairs R̃_u."""

    @abstractmethod
    def adaptive_sips_weights(self, vectors: Frame) -> Frame:
        """(keys, `_dp_w` = Σ_u x_ui) over ∪R̃_u."""

    @abstractmethod
    def adaptive_sips_state(self, remaining: Frame, vectors: Frame, state: Frame | None, plan, params: dict,
                            index: int) -> tuple[Frame, int]:
        """Noise on every key of ∪R_u, `mechanisms.adaptive_sips.next_state` → the stored next state
        (keys, `_dp_level`, `_dp_round`; released keys kept) and this round's number of released keys."""

    @abstractmethod
    def adaptive_sips_released(self, state: Frame) -> Frame:
        """The keys a state records as released."""

    @abstractmethod
    def drop(self, frame: Frame) -> None:
        """Free a stored frame early (memory before the next round)."""

    @abstractmethod
    def policy_pairs(self, counted: bool, max_contributions: int) -> tuple[Frame, Frame, int]:
        """(pairs with `_dp_n`, items with dense `_dp_item` ids, number of items)."""

    @abstractmethod
    def count_users(self, pairs: Frame) -> int:
        """Distinct users of a pairs frame."""

    @abstractmethod
    def policy_lists(self, pairs: Frame, items: Frame, batch_users: int) -> Iterator:
        """Arrow record batches of one list column of item ids per user, in keyed-random user order."""

    @abstractmethod
    def policy_release(self, weights: np.ndarray, items: Frame, plan) -> Frame:
        """Noise + threshold over the sequential histogram's support."""

    @abstractmethod
    def geometric_release(self, weights: Frame, keep_prob: np.ndarray) -> Frame:
        """Truncated geometric: keys kept with probability π(n) by one keyed uniform draw each."""

    @abstractmethod
    def top_counts(self, top: int):
        """Count release: the `top` largest distinct-user counts (keys, `_dp_count`), Arrow, ties keyed."""

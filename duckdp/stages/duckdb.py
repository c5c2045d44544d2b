"""The DuckDB engine: every stage as a checked SQL template (sql/stage_*.sql, sql/<algo>_*.sql).

Frames are `Query`s — SQL text with quoted identifiers and bound values — composed lazily, so a
chain like pairs → sized → truncate → weights runs as one DuckDB query; `store` makes a
run-unique TEMP table where a mechanism reads a frame more than once. Noise + threshold is the
noise stage (duckdp/noise_stage.py: keyed AES PRF over injective per-key counters, vectorised in
numpy): `release` runs it on the weights query and returns the released keys as a frame over
its Arrow result.
"""
from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..noise_stage import release_keys, scan_noisy
from . import Query
from .base import Stages

# Memory one source row needs in one truncation pass (measured: 30M rows in 8 passes fit 600 MB).
BYTES_PER_ROW_PASS = 200
_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def memory_limit_bytes(con) -> float:
    """DuckDB's `memory_limit` in bytes (0 when unreadable)."""
    (limit,), = con.sql("SELECT current_setting('memory_limit')").fetchall()
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]+)\s*", str(limit))
    return float(m.group(1)) * _UNITS[m.group(2)] if m and m.group(2) in _UNITS else 0.0


def merge(*params: dict) -> dict:
    """Bound values of composed frames; one name must not carry two values (e.g. two salts)."""
    out: dict = {}
    for p in params:
        for name, value in p.items():
            if name in out and out[name] is not value and out[name] != value:
                raise RuntimeError(f"composed stages bind ${name} twice with different values")
            out[name] = value
    return out


class _UniformDraw(NamedTuple):
    """A noise-stage plan keeping a key iff weight − u ≥ 0 for one fresh uniform u."""

    noise: str = "uniform"
    scale: float = -1.0
    threshold: float = 0.0


class DuckDBStages(Stages):
    """Stages over one run's `RunContext` (connection, input, randomness, TEMP tables)."""

    engine = "duckdb"

    def __init__(self, ctx):
        self.ctx = ctx        # DuckDB-only; mechanisms never read it
        self._passes: int | None = None
        self._tables: dict[str, str] = {}     # SQL of a stored frame → its TEMP table name

    def _query(self, template: str, idents: dict, params: dict | None = None) -> Query:
        return Query(*self.ctx.render(template, idents, params or {}))

    def _table(self, name: str) -> Query:
        frame = Query(f"SELECT * FROM {name}", {})
        self._tables[frame.sql] = name
        return frame

    def _name(self, frame: Query) -> str:
        """The TEMP table behind a stored frame (stages that update or re-read a table need one)."""
        if frame.sql not in self._tables:
            raise RuntimeError("this stage needs a stored frame (stages.store)")
        return self._tables[frame.sql]

    def _store_as(self, frame: Query, stage: str) -> str:
        name = self.ctx.temp_table(stage)
        self.ctx.execute("stage_store", {"target": name, "query": frame.sql}, frame.params)
        return name

    # -- truncation passes ---------------------------------------------------------------------
    def source_rows(self) -> int:
        """The input's row count: the catalog estimate for tables, else one count (parquet files
        answer it from their metadata), done only when truncation needs it."""
        if self.ctx.source.estimated_rows is None:
            self.ctx.source.estimated_rows = self.ctx.scalar(f"SELECT count(*) FROM {self.ctx.source.sql}")
        return self.ctx.source.estimated_rows

    def truncation_passes(self) -> int:
        """User-hash partitions truncation needs so each window fits DuckDB's memory limit (once per run)."""
        if self._passes is None:
            budget = memory_limit_bytes(self.ctx.con)
            rows = self.source_rows() if budget else 0
            self._passes = max(1, math.ceil(rows * BYTES_PER_ROW_PASS / budget)) if budget else 1
        return self._passes

    # -- shared stages -------------------------------------------------------------------------
    def pairs(self) -> Query:
        base = self.ctx.base_idents()
        return self._query("stage_pairs", {k: base[k] for k in ("source", "user", "key_select")})

    def sized(self, pairs: Query, user_aggregates: str = "") -> Query:
        return self._query("stage_sized", {"pairs": pairs.sql, "user_aggregates": user_aggregates}, pairs.params)

    def truncate(self, sized: Query, max_contributions: int) -> Query:
        """One query when the input fits; else the same rows built in user-hash passes into a TEMP table."""
        params = {"max_contributions": max_contributions, "trunc_salt": self.ctx.randomness.salt()}
        keys = self.ctx.key_aliases
        passes = self.truncation_passes()
        stored = sized.sql in self._tables
        if passes == 1:
            name = self._name(sized) if stored else "sized"
            window = self._query("stage_truncate_window", {"sized": name, "keys": keys}, params)
            body = self._query("stage_truncate", {"sized": name, "window": window.sql}, window.params)
            if stored:
                return body
            return self._query("stage_with", {"name": "sized", "query": sized.sql, "body": body.sql},
                               merge(sized.params, body.params))
        table = self._tables[sized.sql] if stored else self._store_as(sized, "sized")   # read once per pass; spills
        kept = self.ctx.temp_table("kept")
        self.ctx.execute("stage_truncate_light", {"kept": kept, "sized": table},
                         {"max_contributions": max_contributions})
        window = self._query("stage_truncate_window", {"sized": "part", "keys": keys}, params)
        for part in range(passes):
            self.ctx.execute("stage_truncate_pass", {"kept": kept, "sized": table, "window": window.sql},
                             window.params | {"nparts": passes, "part": part})
        if not stored:
            self.ctx.drop(table)                      # free its memory and spill before the next stage
        return self._table(kept)

    def contribution_histogram(self, pairs: Query, edges: list[int]) -> list[tuple[int, int]]:
        return self.ctx.fetch("stage_contribution_histogram", {"pairs": pairs.sql},
                              merge(pairs.params, {"edges": list(edges)}))

    def weights(self, kept: Query, exponent: float) -> Query:
        return self._query("stage_weights", {"kept": kept.sql, "keys": self.ctx.key_aliases},
                           merge(kept.params, {"exponent": exponent}))

    def release(self, weights: Query, plan) -> Query:
        keys = release_keys(self.ctx, weights.sql, weights.params, plan, self.ctx.key_aliases)
        return self._arrow(keys, "selected")

    def _arrow(self, table: pa.Table, stage: str) -> Query:
        """A frame over an Arrow table of internal-name columns (a run-unique view, gone at close)."""
        return self._table(self.ctx.register(stage, table))

    def remove(self, pairs: Query, keys: Query) -> Query:
        return self._query("stage_remove", {"pairs": f"({pairs.sql})", "keys_table": f"({keys.sql})",
                                            "match": self.ctx.key_match("p", "r")}, merge(pairs.params, keys.params))

    def store(self, frame: Query, name: str) -> Query:
        return self._table(self._store_as(frame, name))

    def empty_keys(self, like: Query) -> Query:
        target = self.ctx.temp_table("released")
        self.ctx.execute("stage_empty_keys", {"target": target, "like": f"({like.sql})", "keys": self.ctx.key_aliases},
                         like.params)
        return self._table(target)

    def append(self, stored: Query, keys: Query) -> tuple[Query, int]:
        target = self._name(stored)
        (count,), = self.ctx.fetch("stage_append", {"target": target, "query": keys.sql}, keys.params)
        return stored, int(count)

    def union(self, first: Query, second: Query) -> Query:
        return self._query("stage_union", {"first": first.sql, "second": second.sql},
                           merge(first.params, second.params))

    def output(self, keys: Query) -> pa.Table:
        return self.ctx.arrow("stage_output", {"keys_query": keys.sql, "key_output": self.ctx.key_output},
                              keys.params)

    def num_rows(self, table: pa.Table) -> int:
        return table.num_rows

    def drop(self, frame) -> None:
        self.ctx.drop(self._name(frame))

    # -- MAD / MAD2R -----------------------------------------------------------------------------
    def mad_vectors(self, kept: Query) -> Query:
        target = self.ctx.temp_table("vectors")
        self.ctx.execute("mad_vectors", {"target": target, "kept": kept.sql, "keys": self.ctx.key_aliases},
                         kept.params)
        return self._table(target)

    def mad_weights(self, vectors: Query, plan) -> Query:
        x = plan.extra
        return self._query("mad_weights", {"bounded": self._name(vectors),
                                           "keys": self.ctx.key_aliases},
                           {"min_degree": x.min_degree, "max_degree": x.max_degree, "tau": x.tau,
                            "reroute": x.reroute})

    def mad2r_screen(self, pairs: Query, vectors: Query, plan1, plan2, max_contributions: int) -> Query:
        """Round-1 noisy weights ŵ1 on the whole universe (support ∪ keys of users over Δ0) from the
        noise stage, MAD2R's decisions in numpy (mechanisms.mad.screen_round1), and only the
        exceptions (released, removed or biased keys) stored."""
        from ..mechanisms.mad import (
            screen_round1,  # the mechanism's rule; engines only run it
        )
        weighted = self.mad_weights(vectors, plan1)
        universe = self._query("mad2r_universe", {"weighted": weighted.sql, "pairs": self._name(pairs),
                                                  "keys": self.ctx.key_aliases},
                               merge(weighted.params, {"max_contributions": max_contributions}))
        keys = self.ctx.key_aliases

        def exceptions_of(w, noisy):      # store only the exceptions: released, removed or biased keys
            decided = screen_round1(w, noisy, plan1, plan2)
            return ~decided["_dp_round2"] | (decided["_dp_beta"] < 1), decided

        exceptions = scan_noisy(self.ctx, universe.sql, universe.params, plan1.noise, plan1.scale,
                                exceptions_of, keys)
        target = self.ctx.temp_table("status")
        self.ctx.execute("mad2r_status", {"target": target, "universe": universe.sql, "keys": keys}, universe.params)
        self._insert_by_name(target, exceptions)
        return self._table(target)

    def _insert_by_name(self, target: str, rows: pa.Table) -> None:
        """Append Arrow rows to a TEMP table typed from the input (the insert casts keys back to the
        input's types: HUGEINT, UUID, BLOB, lists, structs)."""
        view = self.ctx.register("rows", rows)
        self.ctx.con.execute(f"INSERT INTO temp.main.{target} BY NAME SELECT * FROM {view}")

    def mad2r_vectors(self, pairs: Query, status: Query, max_contributions: int, beta_min: float,
                      beta_max: float) -> Query:
        keys = self.ctx.key_aliases
        remaining = self._query("mad2r_remaining", {"pairs": self._name(pairs),
                                                    "keys": keys, "status": self._name(status)},
                                {"beta_min": beta_min})
        kept = self.truncate(self.sized(remaining, ", bool_or(_dp_b < 1) AS _dp_biased"), max_contributions)
        target = self.ctx.temp_table("vectors2")
        self.ctx.execute("mad2r_vectors", {"target": target, "kept": kept.sql, "keys": keys}, kept.params)
        self.ctx.execute("mad2r_biased", {"target": target, "keys": keys, "match": self.ctx.key_match("t", "s")},
                         {"beta_max": beta_max})
        return self._table(target)

    def mad2r_released(self, status: Query) -> Query:
        return self._query("mad2r_released", {"status": self._name(status), "keys": self.ctx.key_aliases})

    # -- adaptive SIPS ---------------------------------------------------------------------------
    def adaptive_sips_remaining(self, pairs: Query, state: Query | None) -> Query:
        if state is None:
            return self._query("adaptive_sips_first", {"pairs": self._name(pairs)})
        return self._query("adaptive_sips_remaining", {"pairs": self._name(pairs), "state": self._name(state),
                                                       "match": self.ctx.key_match("p", "s")})

    def adaptive_sips_vectors(self, kept: Query, cap: float) -> Query:
        return self._query("adaptive_sips_vectors", {"kept": kept.sql, "keys": self.ctx.key_aliases},
                           merge(kept.params, {"cap": cap}))

    def adaptive_sips_weights(self, vectors: Query) -> Query:
        return self._query("adaptive_sips_weights", {"vectors": vectors.sql, "keys": self.ctx.key_aliases},
                           vectors.params)

    def adaptive_sips_state(self, remaining: Query, vectors: Query, state: Query | None, plan, params: dict,
                            index: int) -> tuple[Query, int]:
        from ..mechanisms.adaptive_sips import (
            next_state,  # the mechanism's rule; engines only run it
        )
        keys = self.ctx.key_aliases
        weighted = self.adaptive_sips_weights(vectors)
        universe = self._query("adaptive_sips_universe", {"remaining": remaining.sql, "weighted": weighted.sql,
                                                          "keys": keys}, merge(remaining.params, weighted.params))
        counted = [0]

        def decide(w, noisy):             # keys still in play or released this round get a state row
            released, level = next_state(w, noisy, plan, params)
            counted[0] += int(released.sum())
            return (level > 0) | released, {"_dp_level": level, "_dp_released": released}

        decided = scan_noisy(self.ctx, universe.sql, universe.params, plan.noise, plan.scale, decide, keys)
        target = self.ctx.temp_table("state")
        self.ctx.execute("adaptive_sips_state", {"target": target, "universe": universe.sql, "keys": keys},
                         universe.params)
        view = self.ctx.register("decided", decided)
        self.ctx.execute("adaptive_sips_decided", {"target": target, "decided": view, "keys": keys}, {"round": index})
        if state is not None:             # the keys earlier rounds released stay in the output
            self.ctx.execute("adaptive_sips_carry", {"target": target, "state": self._name(state), "keys": keys}, {})
        return self._table(target), counted[0]

    def adaptive_sips_released(self, state: Query) -> Query:
        return self._query("adaptive_sips_released", {"state": self._name(state), "keys": self.ctx.key_aliases})

    # -- sequential policies -----------------------------------------------------------------
    def policy_pairs(self, counted: bool, max_contributions: int) -> tuple[Query, Query, int]:
        pairs, items = self.ctx.temp_table("pairs"), self.ctx.temp_table("items")
        base = self.ctx.base_idents()
        if counted:
            self.ctx.execute("gw_pairs", {"pairs": pairs, "source": base["source"], "user": base["user"],
                                          "key_select": base["key_select"]}, {})
        else:
            kept = self.truncate(self.sized(self.pairs()), max_contributions)
            self.ctx.execute("policy_pairs", {"pairs": pairs, "kept": kept.sql, "keys": base["keys"]}, kept.params)
        self.ctx.execute("policy_items", {"items": items, "pairs": pairs, "keys": base["keys"]}, {})
        return self._table(pairs), self._table(items), self.ctx.scalar(f"SELECT count(*) FROM {items}")

    def count_users(self, pairs: Query) -> int:
        return self.ctx.scalar(f"SELECT count(DISTINCT _dp_user) FROM ({pairs.sql})")

    def policy_lists(self, pairs: Query, items: Query, batch_users: int):
        params = {"order_salt": self.ctx.randomness.salt(), "tie_salt": self.ctx.randomness.salt()}
        return self.ctx.reader("policy_lists", {"pairs": self._name(pairs),
                                                "items": self._name(items),
                                                "keys": self.ctx.key_aliases}, params, batch_users)

    def policy_release(self, weights: np.ndarray, items: Query, plan) -> Query:
        view = self.ctx.register("weights", pa.table({"_dp_item": np.arange(len(weights), dtype=np.int64),
                                                      "_dp_w": weights}))
        weighted = self._query("policy_weights", {"weights": view, "items": self._name(items),
                                                  "keys": self.ctx.key_aliases})
        return self.release(weighted, plan)

    # -- truncated geometric and count release ------------------------------------------------
    def geometric_release(self, weights: Query, keep_prob: np.ndarray) -> Query:
        """π(n) as each key's weight through the noise stage with noise −u and threshold 0:
        kept iff a fresh uniform u ≤ π(n) (Desfontaines et al. 2022 Thm 1)."""
        keep = self._query("truncated_geometric", {"weighted": weights.sql, "keys": self.ctx.key_aliases},
                           merge(weights.params, {"keep_prob": keep_prob.tolist()}))
        return self.release(keep, _UniformDraw())

    def top_counts(self, top: int) -> pa.Table:
        """The `top` largest distinct-user counts (keys, `_dp_count`), ties in keyed-hash order."""
        idents = {k: v for k, v in self.ctx.base_idents().items() if k != "key_output"}
        return self.ctx.arrow("pcr_top_counts", idents, {"top": top, "tie_salt": self.ctx.randomness.salt()})

    # -- evaluate (non-private, DuckDB only) ---------------------------------------------------
    def frequency_buckets(self, released: pa.Table, bucket_case: str) -> list[tuple]:
        """Per bucket of `bucket_case` (over `_dp_users`): keys, released keys, entries, captured entries."""
        view = self.ctx.register("released", released.rename_columns(self.ctx.key_aliases.split(", ")))
        base = self.ctx.base_idents()
        return self.ctx.fetch("evaluate_buckets", {
            "source": base["source"], "user": base["user"], "key_select": base["key_select"], "keys": base["keys"],
            "released": view, "match": self.ctx.key_match("f", "r"), "bucket": bucket_case}, {})

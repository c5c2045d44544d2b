"""The DuckDB engine: every generic stage as a checked SQL template (sql/stage_*.sql).

Frames are `Query`s — SQL text with quoted identifiers and bound values — composed lazily, so a
chain like pairs → sized → truncate → weights runs as one DuckDB query; `store` makes a
run-unique TEMP table where a mechanism reads a frame more than once. Noise + threshold is the
noise stage (duckdp/noise_stage.py: keyed AES PRF over injective per-key counters, vectorised in
numpy): `release` runs it on the weights query and returns the released keys as a frame over
its Arrow result; `decide` runs it with a mechanism's own rule. Unseeded multi-round mechanisms run on
key ids (`round_pairs`; duckdp/counters.py, "Key ids"): non-integer keys are replaced by an injective
UBIGINT id once per run, and `output` maps the released ids back to the key columns. Mechanisms' own
DuckDB stages live in their folders (duckdp/mechanisms/<family>/duckdb.py) and build on the helpers here.
"""
from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Callable

import duckdb
import pyarrow as pa

from ..counters import collisions_possible, hash_injective, hashable, key_id_sql, second_id_sql
from ..errors import InternalError
from ..noise_stage import release_keys, scan_noisy
from ..run import RunContext
from ..source import Source
from ..validation import truncation as check_truncation
from . import Query
from .base import Engine, NoisePlan, Rule

# Shared keys (stage_key_ids_shared.sql) whose hashes the truncation order reads off a bound list (a linear search per
# pair, ~free at this length); with more, the pairs carry the hash as a column (`_dp_h`).
SHARED_LOOKUP = 64
# Memory one source row needs in one truncation pass (measured: 30M rows in 8 passes fit 600 MB).
BYTES_PER_ROW_PASS = 200
_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def memory_limit_bytes(con: duckdb.DuckDBPyConnection) -> float:
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
                raise InternalError(f"invariant failed: composed stages bind ${name} twice with different values")
            out[name] = value
    return out


def ids_collide(ctx: RunContext, dictionary: str) -> bool:
    """Whether two keys of the run's dictionary (stage_key_ids.sql) share an id candidate, checked exactly: its
    keys are distinct, so fewer distinct ids than rows means a shared id (one aggregate, a little cheaper than
    listing the shared ids with GROUP BY … HAVING: 0.25 vs 0.30 CPU s at 2.8M keys on the 2-core VM)."""
    return bool(ctx.scalar(f"SELECT count(*) <> count(DISTINCT _dp_id) FROM temp.main.{dictionary}"))


def ids_clash(ctx: RunContext, dictionary: str, shared: str) -> bool:
    """Whether the second id candidates of the keys that share a hash (stage_key_ids_shared.sql) fail to be
    injective next to the other keys' hashes: two are equal, or one is a key's hash in the run's dictionary
    (chance about |keys|·|shared|/2⁶⁴ for a 64-bit digest). Then every key is numbered instead."""
    return bool(ctx.scalar(f"SELECT count(*) <> count(DISTINCT _dp_id) OR (SELECT count(*) FROM temp.main.{dictionary} "
                           f"WHERE _dp_id IN (SELECT _dp_id FROM temp.main.{shared})) > 0 FROM temp.main.{shared}"))


class DuckDBStages(Engine):
    """Stages over one run's `RunContext` (connection, input, randomness, TEMP tables)."""

    name = "duckdb"

    def __init__(self, ctx: RunContext, truncation: str = "per_user"):
        self.ctx = ctx        # DuckDB-only: a mechanism's own DuckDB stages (its folder's duckdb.py) use it
        self.randomness = ctx.randomness
        self.truncation = check_truncation(truncation)
        self._passes: int | None = None
        self._memory: float | None = None      # memory_limit in bytes, read once a run
        self._tables: dict[str, str] = {}     # SQL of a stored frame → its TEMP table name

    @property
    def source(self) -> Source:
        return self.ctx.source

    # -- helpers for the stages here and in the mechanism folders ------------------------------
    def query(self, template: str, idents: dict, params: dict | None = None) -> Query:
        """The frame of `template` rendered with `idents` and bound `params` (not run yet)."""
        return Query(*self.ctx.render(template, idents, params or {}))

    def table(self, name: str) -> Query:
        """The frame over one of this run's TEMP tables or views (quoted name)."""
        frame = Query(f"SELECT * FROM {name}", {})
        self._tables[frame.sql] = name
        return frame

    def table_name(self, frame: Query) -> str:
        """The TEMP table behind a stored frame (stages that update or re-read a table need one)."""
        if frame.sql not in self._tables:
            raise InternalError("invariant failed: this stage needs a stored frame (stages.store)")
        return self._tables[frame.sql]

    def stored(self, frame: Query) -> bool:
        """Whether `frame` reads one of this run's TEMP tables as it is (`store`, `table`), not a query."""
        return frame.sql in self._tables

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

    def memory_budget(self) -> float:
        """`memory_limit_bytes`, read once a run (every truncation of the run sizes its passes by it)."""
        if self._memory is None:
            self._memory = memory_limit_bytes(self.ctx.con)
        return self._memory

    def passes_for(self, rows: int) -> int:
        """User-hash partitions a truncation over `rows` pairs needs so each window fits DuckDB's memory limit."""
        budget = self.memory_budget()
        return max(1, math.ceil(rows * BYTES_PER_ROW_PASS / budget)) if budget else 1

    def truncation_passes(self) -> int:
        """`passes_for` the input's rows, an upper bound on any truncation's pairs known before a pair is
        built (once per run): 1 means every truncation of the run is one query."""
        if self._passes is None:
            self._passes = self.passes_for(self.source_rows()) if self.memory_budget() else 1
        return self._passes

    def user_part(self, nparts: int, part: int) -> Query:
        """The filter on `_dp_user` of one user-hash pass (stage_user_part.sql): truncation's passes and
        `store_by_user_part` split users by it."""
        return self.query("stage_user_part", {}, {"nparts": nparts, "part": part})

    def store_by_user_part(self, query_of: Callable[[str, dict], Query], name: str) -> Query:
        """Store a per-user query (a window partitioned by user) in the truncation's user-hash passes, so
        each window fits memory as the truncation's do: `query_of(filter, values)` is the query over the
        users a ` WHERE` filter on `_dp_user` (with its bound values) selects — none when the input fits,
        else `user_part`'s, one pass per part."""
        passes = self.truncation_passes()
        if passes == 1:
            return self.store(query_of("", {}), name)
        first = self.user_part(passes, 0)
        stored = self.store(query_of(f" {first.sql}", first.params), name)
        for i in range(1, passes):
            users = self.user_part(passes, i)
            q = query_of(f" {users.sql}", users.params)
            self.ctx.execute("stage_append", {"target": self.table_name(stored), "query": q.sql}, q.params)
        return stored

    # -- shared stages -------------------------------------------------------------------------
    def pairs(self) -> Query:
        base = self.ctx.base_idents()
        return self.query("stage_pairs", {k: base[k] for k in ("source", "user", "key_select")})

    def round_pairs(self) -> Query:
        """`pairs` on key ids where keys are not one integer column and the release is unseeded: the run's
        distinct keys go once into a dictionary [stage_key_ids.sql] with an id injective over them, the pairs
        carry the id as `_dp_k0` [stage_pairs_ids.sql], and every later stage reads the id (RunContext.key_ids)
        until `output` maps ids back. The id is the key's hash where no two keys share it; where a few do, those
        keys take their second candidate [stage_key_ids_shared.sql], which each pair computes from its own key;
        keys of types that are not `hashable`, or runs where those candidates clash, take the dictionary's
        rowids [stage_key_ids_numbered.sql] through a join of every pair. Seeded releases keep the key columns
        (digest counters: duckdp/counters.py)."""
        ctx = self.ctx
        source = ctx.source
        if ctx.key_ids is None:
            if ctx.randomness.seeded or not collisions_possible(source.key_types):
                return self.pairs()
            self._key_ids()
        n = len(source.keys)
        key_hash = key_id_sql([f"s._dp_k{i}" for i in range(n)])
        base = ctx.base_idents()
        idents = {"source": base["source"], "user": base["user"], "key_select": base["key_select"],
                  "key_id": key_hash, "join": "", "carried": f", {key_hash} AS _dp_h" if ctx.pairs_carry_hash else ""}
        if ctx.shared_ids is not None:
            idents["key_id"] = (f"CASE WHEN {key_hash} IN (SELECT _dp_h FROM temp.main.{ctx.shared_ids}) "
                                f"THEN {second_id_sql(source.key_types)} ELSE {key_hash} END")
        elif ctx.pairs_carry_hash:
            match = " AND ".join(f"s._dp_k{i} IS NOT DISTINCT FROM d._dp_k{i}" for i in range(n))
            idents.update(join=f" JOIN temp.main.{ctx.key_ids} AS d ON {match}", key_id="d._dp_id")
        return self.query("stage_pairs_ids", idents)

    def _key_ids(self) -> None:
        """The run's dictionary and how its ids are assigned (`round_pairs`), once per run."""
        ctx = self.ctx
        types = ctx.source.key_types
        keys = [f"_dp_k{i}" for i in range(len(types))]
        target = ctx.temp_table("key_ids")
        ctx.key_ids = target
        ctx.execute("stage_key_ids", {"target": target, "source": ctx.source.sql, "key_select": ctx.key_select,
                                      "key_id": key_id_sql(keys)}, {})
        hashes = hashable(types)
        if hashes and not ids_collide(ctx, target):
            return
        second = second_id_sql(types)
        if hashes:
            shared = ctx.temp_table("key_ids_shared")
            ctx.execute("stage_key_ids_shared", {"shared": shared, "target": target, "second": second}, {})
            if not ids_clash(ctx, target, shared):
                ctx.execute("stage_key_ids_renumber", {"target": target, "shared": shared, "second": second}, {})
                ctx.shared_ids = shared
                pairs = ctx.con.sql(f"SELECT _dp_id, _dp_h FROM temp.main.{shared} ORDER BY _dp_id "
                                    f"LIMIT {SHARED_LOOKUP + 1}").fetchall()
                if len(pairs) <= SHARED_LOOKUP:        # the order reads each shared id's hash off a short list
                    ctx.shared_lookup = ([int(i) for i, _ in pairs], [int(h) for _, h in pairs])
                else:                                  # too many for a list: the pairs carry the hash
                    ctx.pairs_carry_hash = True
                return
            ctx.drop(shared)                   # clashing candidates: number every key instead
        ctx.pairs_carry_hash = True
        ctx.execute("stage_key_ids_numbered", {"target": target, "keys": ", ".join(keys), "second": second}, {})

    def original_keys(self) -> None:
        """Back to the input's key columns after a mechanism ran on key ids (its output is decoded):
        stages that read the input again (e.g. aggregate's) see its keys. The ids' dictionary (every
        distinct key) is dropped now, before those stages, not when the run closes."""
        if self.ctx.key_ids is not None:
            self.ctx.drop(*[t for t in (self.ctx.key_ids, self.ctx.shared_ids) if t])
        self.ctx.key_ids = None
        self.ctx.shared_ids = None
        self.ctx.shared_lookup = None
        self.ctx.pairs_carry_hash = False

    def sized(self, pairs: Query) -> Query:
        return self.query("stage_sized", {"pairs": pairs.sql}, pairs.params)

    def truncation_hashed(self) -> str:
        """The columns `truncate` hashes with its salt (stage_truncate_window.sql's {hashed}), for a stage that
        must order pairs as a truncation will: (user, key), or the key alone under truncation="global"; on key
        ids the hash of the key columns (RunContext.pair_keys), a fixed function of the pair."""
        keys = self.ctx.pair_keys
        return keys if self.truncation == "global" else f"_dp_user, {keys}"

    def truncation_order(self, salt: int) -> Query:
        """The keyed hash `truncate` ranks each user's pairs by under `salt` (stage_truncation_order.sql), for the
        truncation and every stage that must order pairs as it will; ties on it go by `truncation_ties()`."""
        return self.query("stage_truncation_order", {"hashed": self.truncation_hashed()},
                          {"trunc_salt": salt} | self.ctx.pair_keys_params)

    def truncation_ties(self) -> str:
        """`, <columns>` that break ties of the truncation's keyed hash, "" where none can occur. A tie left to
        row_number() would go by the order rows arrive in, which follows other users' data and the threads
        (DESIGN §3: a user's kept keys are a function of their own pairs and the salt). DuckDB's hash of one
        ≤ 64-bit integer (or float, or DECIMAL of ≤ 18 digits) is a bijection and hash(user, k) is injective in
        hash(k), so such keys and hash ids (distinct by construction) cannot tie (counters.hash_injective);
        strings, composites and 128-bit types can, so the key breaks the tie; on ids that are not all hashes the
        id does: ties occur only between keys of one hash, whose ids follow (second candidate, key), a function
        of the keys (stage_key_ids_shared.sql, stage_key_ids_numbered.sql)."""
        ctx = self.ctx
        if ctx.key_ids is not None:
            return ", _dp_k0" if ctx.pairs_carry_hash or ctx.shared_ids is not None else ""
        return "" if hash_injective(ctx.source.key_types) else f", {ctx.key_aliases}"

    def truncate(self, sized: Query, max_contributions: int, salt: int | None = None) -> Query:
        """One query when the pairs fit; else the same rows built in user-hash passes into a TEMP table.
        The order hashes (user, key), or the key alone under truncation="global" (stage_truncate_window.sql;
        stage_truncate_cut.sql keeps the same pairs where `cut_applies`).
        Where the input's rows ask for passes, the pass count follows the stored pairs' count instead (e.g.
        aggregate's pairs, restricted to the released keys, are a fraction of the input). The count is not
        public, but it only sets how users are split into passes: each user's kept pairs are a function of
        their own pairs and the salt whatever the split, so the rows kept — and everything released — are
        the same for every pass count; only time and memory follow it. Pairs stored here are dropped as soon
        as they are read (in passes: once the over-Δ0 users' pairs are copied out; in one query: once the kept
        rows are built into a TEMP table)."""
        params = {"max_contributions": max_contributions}
        order = self.truncation_order(self.ctx.randomness.salt() if salt is None else salt)
        passes = self.truncation_passes()
        table = self._tables.get(sized.sql)           # a stored frame, read in place
        if passes > 1:      # the input's rows ask for passes: store the pairs once (it spills), size by their count
            owned = table is None
            if table is None:
                table = self._store_as(sized, "sized")
            passes = min(passes, self.passes_for(self.ctx.scalar(f"SELECT count(*) FROM {table}")))
            if passes > 1:
                return self.table(self._truncate_passes(table, owned, passes, order, params))
            if not owned:
                return self._truncate_one(table, order, params)
            kept = self._store_as(self._truncate_one(table, order, params), "kept")    # run now: the pairs can go
            self.ctx.drop(table)                  # free its memory and spill before the next stage
            return self.table(kept)
        if table is not None:
            return self._truncate_one(table, order, params)
        body = self._truncate_one("sized", order, params)
        return self.query("stage_with", {"name": "sized", "query": sized.sql, "body": body.sql},
                          merge(sized.params, body.params))

    def _truncate_passes(self, sized: str, owned: bool, passes: int, order: Query, params: dict) -> str:
        """`truncate` in user-hash passes into a TEMP table (returned): users within Δ0 keep every pair
        [stage_truncate_light.sql]; the pairs of the users over Δ0 are stored once [stage_truncate_over.sql] (`sized`
        dropped then where `owned`), and each pass reads them alone [stage_truncate_pass.sql]."""
        kept, over = self.ctx.temp_table("kept"), self.ctx.temp_table("over")
        self.ctx.execute("stage_truncate_light", {"kept": kept, "sized": sized}, params)
        self.ctx.execute("stage_truncate_over", {"over": over, "sized": sized}, params)
        if owned:
            self.ctx.drop(sized)
        window = self._window("part", order, params)
        for part in range(passes):
            users = self.user_part(passes, part)
            self.ctx.execute("stage_truncate_pass", {"kept": kept, "sized": over, "users": users.sql,
                                                     "window": window.sql}, merge(window.params, users.params))
        self.ctx.drop(over)
        return kept

    def cut_applies(self) -> bool:
        """Whether the users over Δ0 are truncated by the cut (stage_truncate_cut.sql, the window's pairs exactly)
        rather than by the window alone: wherever the window needs a tie-break (`truncation_ties`: the input's key
        columns for strings, composites and 128-bit types; the id where key ids are not all hashes), which makes
        every pair's sort key a struct. Integer keys and hash ids rank on the hash alone, where the cut's extra
        aggregate and join cost more than they save (benchmarks/RESULTS.md, "truncation cut (stop 30)"; rowid
        ids: 30M VARCHAR rows, 16 threads, mad −0.56 CPU s, "16-core device, main 595edbf")."""
        return self.truncation_ties() != ""

    def _window(self, sized: str, order: Query, params: dict) -> Query:
        """The users over Δ0 of `sized` with their Δ0 kept pairs: the window [stage_truncate_window.sql], or
        the cut with the window as its fallback [stage_truncate_cut.sql] where `cut_applies`."""
        ties, bound = self.truncation_ties(), merge(params, order.params)
        if not self.cut_applies():
            return self.query("stage_truncate_window", {"sized": sized, "order": order.sql, "ties": ties}, bound)
        window = self.query("stage_truncate_window", {"sized": "_dp_fallback", "order": order.sql, "ties": ties}, bound)
        return self.query("stage_truncate_cut", {"sized": sized, "order": order.sql, "window": window.sql}, bound)

    def _truncate_one(self, sized: str, order: Query, params: dict) -> Query:
        """`truncate` as one query over the table (or CTE) named `sized` [stage_truncate.sql]."""
        window = self._window(sized, order, params)
        return self.query("stage_truncate", {"sized": sized, "window": window.sql}, window.params)

    def contribution_histogram(self, pairs: Query, edges: list[int]) -> list[tuple[int, int]]:
        return self.ctx.fetch("stage_contribution_histogram", {"pairs": pairs.sql},
                              merge(pairs.params, {"edges": list(edges)}))

    def weights(self, kept: Query, exponent: float) -> Query:
        return self.query("stage_weights", {"kept": kept.sql, "keys": self.ctx.key_aliases},
                           merge(kept.params, {"exponent": exponent}))

    def release(self, weights: Query, plan: NoisePlan) -> Query:
        keys = release_keys(self.ctx, weights.sql, weights.params, plan, self.ctx.key_aliases)
        return self.arrow_frame(keys, "selected")

    def decide(self, weights: Query, plan: NoisePlan, rule: Rule, added: dict[str, str],
               round_tag: int | None = None) -> Query:
        """The noise stage's general step (noise_stage.scan_noisy) with the mechanism's rule; the kept
        rows stored in a run-unique TEMP table (`table_name` gives its name). How: `decide_into`, whose
        reader copies the rows into the table. `round_tag`: as in `Engine.decide` (noise_stage.scan_noisy's)."""
        target = self.ctx.temp_table("decided")
        self.decide_into(weights, plan, rule, lambda view: self.ctx.execute(
            "stage_store", {"target": target, "query": f"SELECT * FROM {view}"}, {}), round_tag)
        return self.table(target)

    def decide_into(self, weights: Query, plan: NoisePlan, rule: Rule, read: Callable[[str], None],
                    round_tag: int | None = None) -> None:
        """`decide` for a mechanism that only copies the kept rows into its own table: `read(view)` runs
        the one statement that reads them, from a view that can be read once (no TEMP table to create,
        fill and drop: adaptive SIPS inserts them into its next state).

        The kept rows can be as many as the keys (adaptive SIPS's state: every key still in play), so
        Python never holds them: each decided batch is appended to an Arrow IPC stream file in a
        private temporary directory (tempfile under $TMPDIR, mode 0700, removed before this returns;
        the rows are internal state, never output, as DuckDB's own spill files are) while DuckDB
        streams the weights, and DuckDB reads the file back batch by batch once the weights query is
        done (a connection runs one query at a time, so it cannot insert while it streams). Python's
        memory stays one batch per noise thread; the rows read go to DuckDB, within its memory limit."""
        with tempfile.TemporaryDirectory(prefix="duckdp_decided_") as folder:
            path = os.path.join(folder, "decided.arrows")
            writer: pa.ipc.RecordBatchStreamWriter | None = None
            sink = pa.OSFile(path, "wb")
            try:
                def write(batch: pa.RecordBatch) -> None:
                    nonlocal writer
                    if writer is None:
                        writer = pa.ipc.new_stream(sink, batch.schema)
                    writer.write_batch(batch)

                scan_noisy(self.ctx, weights.sql, weights.params, plan.noise, plan.scale, rule,
                           self.ctx.key_aliases, sink=write, round_tag=round_tag)
                if writer is not None:                # scan_noisy sends at least one batch
                    writer.close()
            finally:
                sink.close()
            with pa.OSFile(path, "rb") as source:
                read(self.ctx.register("decided", pa.ipc.open_stream(source)))

    def arrow_frame(self, table: pa.Table, stage: str) -> Query:
        """A frame over an Arrow table of internal-name columns (a run-unique view, gone at close)."""
        return self.table(self.ctx.register(stage, table))

    def remove(self, pairs: Query, keys: Query) -> Query:
        return self.query("stage_remove", {"pairs": f"({pairs.sql})", "keys_table": f"({keys.sql})",
                                            "match": self.ctx.key_match("p", "r")}, merge(pairs.params, keys.params))

    def store(self, frame: Query, name: str) -> Query:
        return self.table(self._store_as(frame, name))

    def empty_keys(self, like: Query) -> Query:
        target = self.ctx.temp_table("released")
        self.ctx.execute("stage_empty_keys", {"target": target, "like": f"({like.sql})", "keys": self.ctx.key_aliases},
                         like.params)
        return self.table(target)

    def append(self, stored: Query, keys: Query) -> tuple[Query, int]:
        target = self.table_name(stored)
        (count,), = self.ctx.fetch("stage_append", {"target": target, "query": keys.sql}, keys.params)
        return stored, int(count)

    def union(self, first: Query, second: Query) -> Query:
        return self.query("stage_union", {"first": first.sql, "second": second.sql},
                           merge(first.params, second.params))

    def output(self, keys: Query) -> pa.Table:
        if self.ctx.key_ids is not None:     # released ids back to the dictionary's key columns
            return self.ctx.arrow("stage_output_ids", {"dictionary": f"temp.main.{self.ctx.key_ids}",
                                                       "keys_query": keys.sql, "key_output": self.ctx.key_output},
                                  keys.params)
        return self.ctx.arrow("stage_output", {"keys_query": keys.sql, "key_output": self.ctx.key_output},
                              keys.params)

    def num_rows(self, table: pa.Table) -> int:
        return table.num_rows

    def drop(self, frame: Query) -> None:
        self.ctx.drop(self.table_name(frame))

"""The fixed cost of a release is mostly its DuckDB statements (each a round trip: parse, plan, run; about
0.2 ms for a trivial one, 1–2.5 ms for a small CREATE TEMP TABLE on the 2-core VM): issue #21 item 1 at 16
threads, where the floor is 0.15 s. Pinned here: how many statements (execute, sql, register, unregister on
the release's connection) one seeded release of each multi-round mechanism runs on integer keys, so a change
that adds a round trip per round shows up. Removed so far: DROPs that `close` repeated for tables already
dropped (one statement drops the rest), DuckDB's `threads` read per noise round and `memory_limit` per
truncation sizing (once a run), adaptive SIPS's count of released keys (counted while the noise stage
decides), its per-round TEMP table of unsettled users (counted in one query; stored only when some are) and its
per-round TEMP table of decisions (inserted into the next state straight from the noise stage's stream), and
likewise MAD2R's TEMP tables of screened exceptions (inserted into its status table), MAD2R's lazy
round-1 statements where its cost rule picks the eager screen, as on this table (one scan of the pairs' sizes
instead of ten statements), and adaptive SIPS's empty CREATE of each later round's state (created from the
rows it carries), per-round DROP of its candidates (dropped with the open pairs that its lazy rounds ≥ 2 store,
once a round, instead of joining every pair with the state twice), and the last round's table of open pairs
(it reads the round before's). Added back: one DROP of the last round's candidates and the round before's
(freed before the last release, not when the run closes), and adaptive SIPS's heavy-user gate (one sampled
count in round 2, adaptive_sips_heavy_gate.sql; with no heavy user nothing else of the heavy path runs).
"""
from __future__ import annotations

from unittest import mock

import pytest
from conftest import leftovers, make_table, random_sets

import duckdp
from duckdp import run
from duckdp.rng import Randomness
from duckdp.source import resolve

# statements of one release on the table below (seed 3, Δ0 = 8); mad2r's round 2 writes its kept pairs' biases
# by one in-place UPDATE before the water-filling's (stop 30: cheaper than carrying them through the truncation);
# adaptive SIPS's round 2 counts a 1/32 sample of its stored pairs per user (the heavy-user gate, stop 31)
EXPECTED = {"adaptive_sips": 31, "dpsips": 17, "mad2r": 20, "mad": 8}


class Counting:
    """A connection that counts the statements run through it."""

    def __init__(self, con, log: list[str]):
        self._con, self._log = con, log

    def __getattr__(self, name):
        return getattr(self._con, name)

    def _count(self, what: str, fn, *args, **kwargs):
        self._log.append(f"{what} {' '.join(str(args[0]).split())[:80]}")
        return fn(*args, **kwargs)

    def execute(self, *args, **kwargs):
        return self._count("execute", self._con.execute, *args, **kwargs)

    def sql(self, *args, **kwargs):
        return self._count("sql", self._con.sql, *args, **kwargs)

    def register(self, *args, **kwargs):
        return self._count("register", self._con.register, *args, **kwargs)

    def unregister(self, *args, **kwargs):
        return self._count("unregister", self._con.unregister, *args, **kwargs)


@pytest.mark.parametrize("algo", sorted(EXPECTED))
def test_statements_per_release(con, algo):
    users, items = random_sets(400, 300, 40, seed=7)
    make_table(con, "t", users, items)
    con.execute("CREATE OR REPLACE TABLE t AS SELECT user_id, CAST(substr(item, 2) AS BIGINT) AS item FROM t")
    log: list[str] = []
    init = run.RunContext.__init__

    def counting(self, connection, *args, **kwargs):
        init(self, Counting(connection, log), *args, **kwargs)

    with mock.patch.object(run.RunContext, "__init__", counting):
        result = duckdp.select(con, "t", algo=algo, rho=1.0, delta=1e-5, max_contributions=8, item_col="item",
                               seed=3)
    assert len(result.to_arrow()) > 0
    assert len(log) == EXPECTED[algo], "\n".join(log)
    assert leftovers(con) == []


def test_drop_of_no_tables_runs_no_statement(con):
    """`RunContext.drop()` with nothing to drop (e.g. adaptive SIPS with no frames before) is a no-op,
    not an empty statement's round trip."""
    make_table(con, "t", [1, 2], ["a", "b"])
    log: list[str] = []
    ctx = run.RunContext(Counting(con, log), resolve(con, "t", "user_id", "item", "t"), Randomness(1))
    try:
        ctx.drop()
        assert log == []
    finally:
        ctx.close()

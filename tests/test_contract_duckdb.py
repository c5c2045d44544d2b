"""The stage contract (tests/contract_stages.py) on DuckDB and on the reference engine itself."""
from __future__ import annotations

from contextlib import contextmanager

import duckdb
import pyarrow as pa
from contract_stages import StageContract

from duckdp.lifecycle import open_run
from duckdp.rng import Randomness
from duckdp.stages import Query


class TestDuckDBStages(StageContract):
    @contextmanager
    def open_stages(self, table, seed):
        con = duckdb.connect()
        try:
            with open_run(con, table, "user_id", "item", Randomness(seed)) as stages:
                yield stages
        finally:
            con.close()

    def frame(self, stages, table: pa.Table) -> Query:
        return Query(f"SELECT * FROM {stages.ctx.register('contract', table)}", {})

    def collect(self, stages, frame: Query) -> pa.Table:
        return stages.ctx.con.sql(frame.sql, params=frame.params).to_arrow_table()


class TestReferenceEngine(StageContract):
    """The oracle against itself and the known answers (weights, sizes, truncation's properties)."""

    @contextmanager
    def open_stages(self, table, seed):
        yield self.reference(table, seed)

    def frame(self, stages, table: pa.Table) -> pa.Table:
        return table

    def collect(self, stages, frame: pa.Table) -> pa.Table:
        return frame

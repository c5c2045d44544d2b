"""RunContext: everything one release needs while it touches data, cleaned up in `close()`."""
from __future__ import annotations

import secrets
from typing import Any

import duckdb
import pyarrow as pa

from .rng import Randomness
from .source import Source, canonical_key
from .templates import load, quote_ident


def raise_if_interrupted(exc: BaseException) -> None:
    """Re-raise DuckDB's report of a cancelled query as the KeyboardInterrupt it stands for: Ctrl-C
    during a query gives RuntimeError('Query interrupted'), `con.interrupt()` duckdb.InterruptException."""
    if isinstance(exc, duckdb.InterruptException) or (type(exc) is RuntimeError and str(exc) == "Query interrupted"):
        raise KeyboardInterrupt(str(exc)) from exc


class RunContext:
    """Connection, resolved input, randomness and run-unique TEMP tables of one run.

    Internal columns: `_dp_user` for the user, `_dp_k0, _dp_k1, …` for the key columns, so no
    input column name can collide with duckdp's own. While a mechanism runs on key ids
    (DuckDBStages.round_pairs; duckdp/counters.py, "Key ids"), `key_ids` names the run's dictionary
    and the key is the one UBIGINT column `_dp_k0`, the id: the key accessors below follow.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, source: Source, randomness: Randomness,
                 run_id: str | None = None):
        self.con = con
        self.source = source
        self.randomness = randomness
        self.run_id = run_id or secrets.token_hex(6)
        self._temps: list[str] = []
        self._views: list[str] = []
        self.key_ids: str | None = None     # the dictionary (`_dp_id`, key columns) while keys are ids
        self.pairs_carry_hash = False       # the pairs carry `_dp_h` (rowid ids, or many shared keys)
        self.shared_ids: str | None = None  # the keys sharing a hash (`_dp_h`, their id `_dp_id`), if they have ids
        self.shared_lookup: tuple[list[int], list[int]] | None = None   # their (ids, hashes) for the order
        self._threads: int | None = None
        self._created = 0                   # TEMP tables and views named so far (`_serial`)

    # -- SQL fragments built from quoted identifiers only -------------------------------------
    @property
    def key_count(self) -> int:
        """Internal key columns: the input's, or 1 (the id) while keys are ids."""
        return 1 if self.key_ids else len(self.source.keys)

    @property
    def key_types(self) -> list[str]:
        """DuckDB types of the internal key columns (the PRF counters follow them: duckdp/counters.py)."""
        return ["UBIGINT"] if self.key_ids else self.source.key_types

    @property
    def key_aliases(self) -> str:
        """`_dp_k0, _dp_k1, …`"""
        return ", ".join(f"_dp_k{i}" for i in range(self.key_count))

    @property
    def pair_keys(self) -> str:
        """What truncation hashes with the user: the key columns, or on ids the hash of the key columns (the
        id itself; for keys that share a hash, that hash looked up by their id in `pair_keys_params`, or the
        pairs' `_dp_h` where those are many or ids are rowids), the same order whichever id a key got."""
        if self.key_ids is None:
            return self.key_aliases
        if self.shared_lookup is not None:        # a shared key's id → its hash, off the bound lists
            return ("CASE WHEN list_contains($shared_ids::UBIGINT[], _dp_k0) THEN "
                    "list_extract($shared_hashes::UBIGINT[], list_position($shared_ids::UBIGINT[], _dp_k0)) "
                    "ELSE _dp_k0 END")
        return "_dp_h" if self.pairs_carry_hash else "_dp_k0"

    @property
    def pair_keys_params(self) -> dict:
        """The bound values `pair_keys` reads: the shared keys' ids and hashes, where it reads them."""
        if self.key_ids is None or self.shared_lookup is None:
            return {}
        ids, hashes = self.shared_lookup
        return {"shared_ids": ids, "shared_hashes": hashes}

    @property
    def key_select(self) -> str:
        """`"item" AS _dp_k0, …`: the input's key columns under internal names, each in its canonical form
        (`canonical_key`: the key a group shows is then a function of the group, not of the row read first)."""
        kinds = dict(self.source.schema)
        return ", ".join(f"{canonical_key(k, kinds[n])} AS _dp_k{i}"
                         for i, (k, n) in enumerate(zip(self.source.keys, self.source.key_names, strict=True)))

    @property
    def key_output(self) -> str:
        """`_dp_k0 AS "item", …`: internal key columns (on ids: the dictionary's) back under the input's names."""
        return ", ".join(f"_dp_k{i} AS {quote_ident(n)}" for i, n in enumerate(self.source.key_names))

    def key_match(self, left: str, right: str) -> str:
        """Null-safe equality of all key columns between two aliases."""
        return " AND ".join(f"{left}._dp_k{i} IS NOT DISTINCT FROM {right}._dp_k{i}"
                            for i in range(self.key_count))

    def base_idents(self) -> dict[str, str]:
        return {"source": self.source.sql, "user": self.source.user, "key_select": self.key_select,
                "keys": self.key_aliases, "key_output": self.key_output}

    def render(self, template: str, idents: dict[str, str], params: dict) -> tuple[str, dict]:
        """SQL text and bound values of `template`; the text may fill another template's hole."""
        return load(template).render(idents, params)

    @property
    def threads(self) -> int:
        """DuckDB's `threads` setting, read once a run (the noise pool follows it; a release runs between
        two statements of the caller, which sets it before, so one read serves every round)."""
        if self._threads is None:
            (threads,), = self.con.sql("SELECT current_setting('threads')").fetchall()
            self._threads = max(1, int(threads))
        return self._threads

    # -- execution --------------------------------------------------------------------------------
    def _serial(self) -> int:
        """A number no TEMP table or view of this run had: they share one namespace, and a stage may
        name both (`DuckDBStages.decide` makes a "decided" view and table). Counted, not read off the
        lists: `drop` takes tables off them."""
        self._created += 1
        return self._created - 1

    def temp_table(self, stage: str) -> str:
        """A quoted, run-unique TEMP table name for `stage`, dropped in `close()`."""
        name = quote_ident(f"_duckdp_{self.run_id}_{stage}{self._serial()}")
        self._temps.append(name)
        return name

    def sql(self, template: str, idents: dict[str, str], params: dict) -> duckdb.DuckDBPyRelation:
        """Render `template` with identifier fragments and bound params; return the relation."""
        text, bound = self.render(template, idents, params)
        return self.con.sql(text, params=bound)

    def execute(self, template: str, idents: dict[str, str], params: dict) -> None:
        text, bound = self.render(template, idents, params)
        self.con.execute(text, bound)

    def arrow(self, template: str, idents: dict[str, str], params: dict) -> pa.Table:
        return self.sql(template, idents, params).to_arrow_table()

    def fetch(self, template: str, idents: dict[str, str], params: dict) -> list[tuple]:
        """Execute `template` and return its result rows (e.g. an INSERT's row count)."""
        text, bound = self.render(template, idents, params)
        return self.con.execute(text, bound).fetchall()

    def reader(self, template: str, idents: dict[str, str], params: dict, batch_rows: int) -> pa.RecordBatchReader:
        """A streaming Arrow reader over `template`'s result (the caller closes it)."""
        return self.sql(template, idents, params).to_arrow_reader(batch_rows)

    def scalar(self, sql: str) -> Any:
        """The single value of a query duckdp wrote itself (quoted identifiers, no values)."""
        return self.con.sql(sql).fetchall()[0][0]

    def register(self, stage: str, table: pa.Table) -> str:
        """Register an Arrow table as a run-unique view (quoted name), unregistered in `close()`."""
        name = f"_duckdp_{self.run_id}_{stage}{self._serial()}"
        self.con.register(name, table)
        self._views.append(name)
        return quote_ident(name)

    def drop(self, *tables: str) -> None:
        """Drop some of this run's TEMP tables early (frees memory and spill before the next stage), in one
        statement; `close` then has those fewer to drop. No tables, no statement."""
        if not tables:
            return
        self.con.execute("; ".join(f"DROP TABLE IF EXISTS temp.main.{table}" for table in tables))
        for table in tables:
            if table in self._temps:
                self._temps.remove(table)

    def close(self) -> None:
        """Drop TEMP tables and unregister the input view, whatever happened. The tables go in one
        statement (one round trip); if it fails (e.g. the connection was interrupted), one by one."""
        drops = [f"DROP TABLE IF EXISTS temp.main.{name}" for name in reversed(self._temps)]
        try:
            if drops:
                self.con.execute("; ".join(drops))
        except Exception:
            for drop in drops:
                try:
                    self.con.execute(drop)
                except Exception:
                    pass
        self._temps.clear()
        for view in self._views:
            try:
                self.con.unregister(view)
            except Exception:
                pass
        self._views.clear()
        if self.source.registered:
            try:
                self.con.unregister(self.source.registered)
            except Exception:
                pass

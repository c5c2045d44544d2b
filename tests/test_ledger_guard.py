"""The guard file of a persisted ledger (issue #18.3): by default a ledger in a database file notices
on the next open that it was emptied, edited, reset or dropped; guard files live in the (test's)
XDG_CONFIG_HOME with safe permissions; `anchor=False` opts out; creation is race-free."""
import json
import os
import shutil
import stat

import duckdb
import pytest
from conftest import make_table, random_sets, run_together, spend

from duckdp import BudgetExceeded, LedgerError, Session
from duckdp.ledger import chain_of

RUN = {"max_contributions": 5, "seed": 1}
HEAD = '"L__duckdp_head"'


@pytest.fixture
def db(tmp_path) -> str:
    """A database file holding table "t"."""
    path = str(tmp_path / "db.duckdb")
    with duckdb.connect(path) as con:
        users, items = random_sets(300, 40, 5, 1)
        make_table(con, "t", users, items)
    return path


def guards(config_home) -> list:
    return sorted((config_home / "duckdp" / "ledgers").glob("*.json"))


def charge(path, rho=0.1, **kw) -> Session:
    with duckdb.connect(path) as con:
        s = Session(con, rho=1.0, delta=1e-5, ledger_table="L", **kw)
        spend(s, rho)
    return s


def reopen(path, **kw) -> float:
    """Open the ledger again (a new process would do the same) and return ρ spent."""
    with duckdb.connect(path) as con:
        return Session(con, rho=1.0, delta=1e-5, ledger_table="L", **kw).spent.value


def two_charges(path, **kw) -> None:
    charge(path, 0.1, **kw)
    charge(path, 0.2, **kw)


def tamper(path, *statements, params=None) -> None:
    with duckdb.connect(path) as con:
        for sql in statements:
            con.execute(sql, params)


def rechain(con, rows) -> None:
    """What someone who can write the database (but not the guard) does after editing or deleting rows:
    recompute the public SHA-256 chain and the head so the ledger is consistent again."""
    (ledger_id,), = con.execute(f"SELECT ledger_id FROM {HEAD}").fetchall()
    previous = ledger_id
    con.execute("DELETE FROM L")
    for row in rows:
        row["chain"] = previous = chain_of(None, previous, row)
        con.execute(f"INSERT INTO L VALUES ({', '.join('$' + c for c in row)})", row)
    con.execute(f"UPDATE {HEAD} SET count = $n, chain = $c, mac = NULL", {"n": len(rows), "c": previous})


def rows_of(con) -> list[dict]:
    return con.sql("SELECT * FROM L ORDER BY seq").to_arrow_table().to_pylist()


# -- reopening, where the guard is and how it is protected ----------------------------------------

def test_reopen_after_legit_charges_and_the_guard_is_private(db, config_home):
    two_charges(db)
    assert reopen(db) == pytest.approx(0.3)
    (guard,) = guards(config_home)                 # in the test's XDG_CONFIG_HOME, never the real home
    data = json.loads(guard.read_text())
    assert data["count"] == 2 and data["database"] == os.path.realpath(db) and len(bytes.fromhex(data["key"])) == 32
    assert stat.S_IMODE(guard.stat().st_mode) == 0o600
    assert stat.S_IMODE(guard.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(guard.parent.parent.stat().st_mode) == 0o700
    with duckdb.connect(db) as con:                # rows are HMAC-chained under the guard's random key
        assert rows_of(con)[0]["chain"] != chain_of(None, con.sql(f"SELECT ledger_id FROM {HEAD}").fetchall()[0][0],
                                                    rows_of(con)[0])


def test_concurrent_charges_keep_the_guard_current(db, config_home):
    """Eight sessions charge at once; the guard's anchor never moves back and the ledger reopens."""
    root = duckdb.connect(db)
    sessions = [Session(root.cursor(), rho=1.0, delta=1e-5, ledger_table="L") for _ in range(8)]
    assert run_together([lambda s=s: spend(s, 0.1) for s in sessions]) == [None] * 8
    root.close()
    assert reopen(db) == pytest.approx(0.8)
    (guard,) = guards(config_home)
    assert json.loads(guard.read_text())["count"] == 8


def test_in_memory_ledgers_need_no_guard(con, config_home):
    users, items = random_sets(100, 30, 4, 3)
    make_table(con, "t", users, items)
    Session(con, rho=1.0, delta=1e-5, ledger_table="L").select("t", algo="weighted_gaussian", rho=0.1,
                                                                 delta=1e-6, **RUN)
    assert guards(config_home) == []


# -- what someone who can write the database does: each must be refused on the next open ----------

def test_deleted_rows_with_a_recomputed_head_are_refused(db):
    two_charges(db)
    with duckdb.connect(db) as con:
        rechain(con, rows_of(con)[:1])
    with pytest.raises(LedgerError):
        reopen(db)


def test_an_edited_epsilon_with_a_recomputed_chain_is_refused(db):
    with duckdb.connect(db) as con:
        Session(con, epsilon=1.0, delta=1e-5, ledger_table="L").select("t", algo="weighted_gaussian", epsilon=0.8,
                                                                      delta=1e-6, **RUN)
        rows = rows_of(con)
        events = json.loads(rows[0]["events"])
        for e in events:
            e["mu"] /= 100                                 # the release's ε, 0.8 → about 0.01
        rows[0] |= {"charge": 0.01, "spent": 0.01, "events": json.dumps(events)}
        rechain(con, rows)
    with duckdb.connect(db) as con, pytest.raises(LedgerError):
        Session(con, epsilon=1.0, delta=1e-5, ledger_table="L")


def test_head_reset_is_refused(db):
    """The issue's statement: DELETE FROM ledger; UPDATE <head> SET count = 0, chain = <id>."""
    two_charges(db)
    tamper(db, "DELETE FROM L", f"UPDATE {HEAD} SET count = 0, chain = ledger_id")
    with pytest.raises(LedgerError, match="MAC"):
        reopen(db)
    tamper(db, f"UPDATE {HEAD} SET mac = NULL")          # and without the MAC, the guard's anchor
    with pytest.raises(LedgerError):
        reopen(db)


def test_one_dropped_table_is_refused(db):
    two_charges(db)
    tamper(db, "CREATE TABLE L_copy AS SELECT * FROM L LIMIT 0", "DROP TABLE L", "ALTER TABLE L_copy RENAME TO L",
           f"UPDATE {HEAD} SET count = 0, chain = ledger_id, mac = NULL")   # dropped, recreated empty, head reset
    with pytest.raises(LedgerError):
        reopen(db)
    tamper(db, f"DROP TABLE {HEAD}")
    with pytest.raises(LedgerError, match="missing"):
        reopen(db)


def test_both_dropped_tables_are_refused_not_a_fresh_ledger(db):
    two_charges(db)
    tamper(db, "DROP TABLE L", f"DROP TABLE {HEAD}")
    with pytest.raises(LedgerError, match="records 2 charge.*was deleted"):
        reopen(db)
    with duckdb.connect(db) as con:                     # data untouched: nothing was created
        assert con.sql("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'L%'").fetchall() == [(0,)]
    assert reopen(db, adopt=True) == 0                  # starting over is possible, on purpose only


def test_an_older_copy_of_the_database_is_refused(db, tmp_path):
    charge(db, 0.1)
    shutil.copy(db, tmp_path / "backup.duckdb")
    charge(db, 0.2)
    shutil.copy(tmp_path / "backup.duckdb", db)           # the budget spent since the copy is forgotten
    with pytest.raises(LedgerError, match="does not extend its guard"):
        reopen(db)


def test_eps_0_9_after_0_957_spent_and_a_reset_is_refused(db):
    """The issue's scenario: ε = 0.957 of 1 spent, the ledger reset, then ε = 0.9 must not be admitted."""
    with duckdb.connect(db) as con:
        s = Session(con, epsilon=1.0, delta=1e-5, ledger_table="L")
        s.select("t", algo="weighted_gaussian", epsilon=1.13, delta=1e-6, **RUN)   # composes to ε = 0.957
        assert s.spent.value == pytest.approx(0.957, abs=1e-3)
        with pytest.raises(BudgetExceeded):
            s.select("t", algo="weighted_gaussian", epsilon=0.9, delta=1e-6, **RUN)
    tamper(db, "DELETE FROM L", f"UPDATE {HEAD} SET count = 0, chain = ledger_id")
    with duckdb.connect(db) as con, pytest.raises(LedgerError):
        Session(con, epsilon=1.0, delta=1e-5, ledger_table="L").select(
            "t", algo="weighted_gaussian", epsilon=0.9, delta=1e-6, **RUN)


# -- the guard itself ----------------------------------------------------------------------------

def test_deleted_guard_is_refused_and_adopt_recovers(db, config_home):
    two_charges(db)
    with duckdb.connect(db) as con:
        s = Session(con, rho=1.0, delta=1e-5, ledger_table="L")
        (guard,) = guards(config_home)
        saved = guard.read_text()
        guard.unlink()
        with pytest.raises(LedgerError, match="deleted while in use"):          # an open session notices too
            s.select("t", algo="weighted_gaussian", rho=0.1, delta=1e-6, **RUN)
    with pytest.raises(LedgerError, match="guard .* is missing.*adopt=True"):
        reopen(db)
    # its key went with the guard: the keyed ledger cannot be verified, so even adopt refuses it ...
    with pytest.raises(LedgerError, match="keyed"):
        reopen(db, adopt=True)
    guard.write_text(saved)                             # ... until the guard is restored
    guard.chmod(0o600)
    assert reopen(db) == pytest.approx(0.3)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d | {"count": 1}, "does not extend its guard"),
    (lambda d: d | {"key": "00" * 32}, "MAC"),
    (lambda d: d | {"ledger_id": "0" * 32}, "records another ledger"),
    (lambda d: d | {"count": "2"}, "not a duckdp ledger guard"),
])
def test_edited_guard_is_refused(db, config_home, edit, message):
    two_charges(db)
    (guard,) = guards(config_home)
    guard.write_text(json.dumps(edit(json.loads(guard.read_text()))))
    with pytest.raises(LedgerError, match=message):
        reopen(db)


def test_a_guard_others_can_read_or_write_is_refused(db, config_home):
    two_charges(db)
    (guard,) = guards(config_home)
    guard.chmod(0o644)
    with pytest.raises(LedgerError, match="group or others"):
        reopen(db)


def test_wrong_key(db, config_home):
    """An owner's key= is used instead of a random one and stays with the owner (the guard holds none)."""
    key = b"k" * 32
    two_charges(db, key=key)
    (guard,) = guards(config_home)
    assert json.loads(guard.read_text())["key"] is None
    assert reopen(db, key=key) == pytest.approx(0.3)
    with pytest.raises(LedgerError, match="MAC"):
        reopen(db, key=b"x" * 32)
    with pytest.raises(LedgerError, match="keyed"):
        reopen(db)
    tamper(db, "DROP TABLE L", f"DROP TABLE {HEAD}")     # the owner's key alone never detected this
    with pytest.raises(LedgerError, match="was deleted"):
        reopen(db, key=key)


def test_key_differs_from_the_guards_key(db):
    two_charges(db)
    with pytest.raises(LedgerError, match="wrong key"):
        reopen(db, key=b"x" * 32)


# -- opting out, explicit paths, moved databases, legacy ledgers ----------------------------------

def test_anchor_false_opts_out(db, config_home):
    two_charges(db, anchor=False)
    assert guards(config_home) == []
    tamper(db, "DROP TABLE L", f"DROP TABLE {HEAD}")
    assert reopen(db, anchor=False) == 0                 # a throw-away ledger: starting over is accepted
    with pytest.raises(LedgerError, match="is missing.*adopt=True"):
        reopen(db)                                       # the default still refuses an unguarded ledger


def test_explicit_guard_path(db, tmp_path, config_home):
    path = tmp_path / "secure" / "L.guard"
    path.parent.mkdir(mode=0o700)
    two_charges(db, anchor=path)
    assert guards(config_home) == [] and json.loads(path.read_text())["count"] == 2
    tamper(db, "DROP TABLE L", f"DROP TABLE {HEAD}")
    with pytest.raises(LedgerError, match="was deleted"):
        reopen(db, anchor=path)


def test_moved_database_names_its_old_guard_and_adopt_moves_it(db, tmp_path):
    two_charges(db)
    moved = str(tmp_path / "moved.duckdb")
    os.replace(db, moved)
    with pytest.raises(LedgerError, match="a guard of this ledger is at"):
        reopen(moved)
    with duckdb.connect(db) as con:                      # a new database at the old path, with a new ledger "L"
        users, items = random_sets(50, 10, 3, 2)
        make_table(con, "t", users, items)
    with pytest.raises(LedgerError, match="records 2 charge"):
        reopen(db)
    assert reopen(db, adopt=True) == 0                   # the old ledger's guard is set aside, not lost
    assert reopen(moved, adopt=True) == pytest.approx(0.3)   # verified against the old guard's key and anchor
    assert reopen(moved) == pytest.approx(0.3)
    tamper(moved, "DELETE FROM L", f"UPDATE {HEAD} SET count = 0, chain = ledger_id")
    with pytest.raises(LedgerError):
        reopen(moved)


def test_legacy_unguarded_ledger_is_adopted_then_guarded(db, config_home):
    two_charges(db, anchor=False)                        # as ledgers were written before guards
    assert reopen(db, adopt=True) == pytest.approx(0.3)
    (guard,) = guards(config_home)
    assert json.loads(guard.read_text())["count"] == 2
    tamper(db, "DELETE FROM L", f"UPDATE {HEAD} SET count = 0, chain = ledger_id")
    with pytest.raises(LedgerError, match="does not extend its guard"):
        reopen(db)


# -- creation race ------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["file", "memory"])
@pytest.mark.parametrize("handles", ["cursors", "connections"])
def test_six_threads_creating_one_ledger(tmp_path, where, handles):
    """Issue #18.3: six sessions creating the same ledger at once all open it (two used to die with
    "ledger is missing": the tables' existence was read in two snapshots). In a file the creation is
    also serialised by the guard's lock; a (shared, named) in-memory database has no guard, so there
    only the one-snapshot read prevents the race."""
    path = str(tmp_path / "db.duckdb") if where == "file" else f":memory:{tmp_path.name}"
    keep = duckdb.connect(path)                          # keeps a named in-memory database alive
    for trial in range(20):
        root = duckdb.connect(path)
        cons = [root.cursor() if handles == "cursors" else duckdb.connect(path) for _ in range(6)]
        errors = run_together([lambda c=c, name=f"L{trial}": Session(c, rho=1.0, delta=1e-5, ledger_table=name)
                               for c in cons])
        for c in cons + [root]:
            c.close()
        assert errors == [None] * 6, f"trial {trial}"
    assert all(Session(keep, rho=1.0, delta=1e-5, ledger_table=f"L{trial}").spent.value == 0  # each reopens
               for trial in range(20))
    keep.close()

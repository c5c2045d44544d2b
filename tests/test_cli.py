"""The `duckdp` command, driven as a subprocess: happy paths, output files, bad input, exit codes."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

import duckdp
from duckdp import cli
from duckdp.macros import macro_sql

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=None) -> subprocess.CompletedProcess:
    """`duckdp ARGS` in a subprocess with pipes (so not a terminal: progress must stay quiet)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "duckdp.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A parquet and a CSV copy of a small (user_id, item, lang) table, and a DuckDB database file."""
    d = tmp_path_factory.mktemp("cli")
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range % 300 AS user_id, 'w' || (range % 60) AS item, range % 2 AS lang "
                "FROM range(6000)")
    for name, fmt in (("in.parquet", "PARQUET"), ("in.csv", "CSV")):
        con.execute(f"COPY t TO '{d / name}' (FORMAT {fmt})")
    con.close()
    db = duckdb.connect(str(d / "in.duckdb"))
    db.execute("CREATE TABLE reviews AS SELECT * FROM read_parquet($p)", {"p": str(d / "in.parquet")})
    db.execute("CREATE TABLE other AS SELECT 1 AS x")
    db.close()
    return d


BUDGET = ["--epsilon", "5", "--delta", "1e-6", "--max-contributions", "4"]


def test_select_parquet_writes_released_keys(data):
    out = data / "out.parquet"
    before = (data / "in.parquet").read_bytes()
    proc = run("select", data / "in.parquet", "--algo", "dpsips", *BUDGET, "-o", out, "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # quiet when piped
    assert "duckdp release — dpsips" in proc.stdout and "SEEDED" in proc.stdout
    keys = pq.read_table(out)
    assert keys.column_names == ["item"]
    assert set(keys.column("item").to_pylist()) <= {f"w{i}" for i in range(60)}
    assert f"wrote {keys.num_rows:,} keys" in proc.stdout
    assert (data / "in.parquet").read_bytes() == before  # the input is only read


def test_select_json_seeded_runs_repeat(data):
    outs = []
    for name in ("a.csv", "b.csv"):
        proc = run("select", data / "in.csv", *BUDGET, "-o", data / name, "--seed", "7", "--json")
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout))
    a, b = outs
    assert a["released"] == b["released"] and a["seeded"] is True
    assert (data / "a.csv").read_text() == (data / "b.csv").read_text()
    assert a["spent"] == {"epsilon": 5.0, "delta": 1e-6}
    assert a["rounds"][0]["sigma"] > 0 and a["rounds"][0]["threshold"] > 0
    assert len((data / "a.csv").read_text().splitlines()) == a["released"] + 1  # header + keys


def test_select_database_glob_and_composite_keys(data):
    proc = run("select", data / "in.duckdb", "--table", "reviews", "--rho", "1", "--delta", "1e-6",
               "--item-col", "item", "--item-col", "lang", "-o", data / "db.parquet", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["key_columns"] == ["item", "lang"] and summary["input"].endswith(":: reviews")
    assert summary["spent"]["rho"] == 1.0
    assert pq.read_table(data / "db.parquet").column_names == ["item", "lang"]
    proc = run("select", "in.*et", *BUDGET, "-o", "glob.parquet", "--param", "iterations=2", "--algo", "dpsips",
               "--json", cwd=data)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["params"]["iterations"] == 2 and len(json.loads(proc.stdout)["rounds"]) == 2


BAD = [
    (["select", "in.parquet", *BUDGET, "--item-col", "nope", "-o", "x.parquet"], "item_col 'nope' is not a column"),
    (["select", "in.parquet", "--epsilon", "-1", "--delta", "1e-6", "-o", "x.parquet"], "epsilon must be"),
    (["select", "in.parquet", "--epsilon", "1", "--delta", "2", "-o", "x.parquet"], "delta must be in (0, 1)"),
    (["select", "in.parquet", "--epsilon", "1", "--delta", "1e-12", "-o", "x.parquet"], "below the floor MIN_DELTA"),
    (["select", "in.parquet", *BUDGET, "--algo", "nope", "-o", "x.parquet"], "unknown algo 'nope'"),
    (["select", "in.parquet", *BUDGET, "--param", "bogus=1", "-o", "x.parquet"], "does not take bogus"),
    (["select", "in.parquet", "--rho", "1", "--delta", "1e-6", "--algo", "weighted_laplace", "-o", "x.parquet"],
     "takes a budget given as epsilon="),
    (["select", "in.parquet", *BUDGET, "-o", "in.parquet"], "must not overwrite the input"),
    (["select", "in.*", *BUDGET, "-o", "in.csv"], "must not overwrite the input"),
    (["select", "in.parquet", *BUDGET, "-o", "x.txt"], "must end in .parquet or .csv"),
    (["select", "in.duckdb", *BUDGET, "-o", "x.parquet"], "choose one with --table"),
    (["select", "in.duckdb", "--table", "nope", *BUDGET, "-o", "x.parquet"], "no table or view named 'nope'"),
    (["select", "nothing*.parquet", *BUDGET, "-o", "x.parquet"], "No files found"),
    (["select", "in.csv", *BUDGET, "--table", "t", "-o", "x.parquet"], "--table only applies"),
    (["demo", "--algos", "nope"], "unknown algo"),
    (["demo", "--epsilon", "-1"], "epsilon must be a finite number > 0"),       # once, not "skipped" per mechanism
    (["demo", "--delta", "2"], "delta must be in (0, 1)"),
    (["demo", "--delta", "2e-10"], "below the floor MIN_DELTA"),
    (["demo", "--max-contributions", "0"], "max_contributions must be an integer >= 1"),
    (["demo", "--algos", "gw"], "no mechanism could run"),
    (["select", "in.parquet", *BUDGET, "-o", "x.parquet", "--total-rho", "1"], "add --ledger FILE"),
    (["select", "in.parquet", *BUDGET, "-o", "x.parquet", "--ledger", "l.duckdb"], "needs the ledger's total budget"),
    (["select", "in.parquet", *BUDGET, "-o", "x.parquet", "--ledger", "l.duckdb", "--total-rho", "1",
      "--total-epsilon", "1", "--total-delta", "1e-5"], "needs the ledger's total budget"),
    (["select", "in.duckdb", "--table", "reviews", *BUDGET, "-o", "x.parquet", "--ledger", "in.duckdb",
      "--total-epsilon", "9", "--total-delta", "1e-5"], "must not be the input"),
    (["count-release", "in.parquet", "--rho", "-1", "--delta", "1e-6", "-o", "x.parquet"], "rho must be"),
    (["count-release", "in.parquet", "--rho", "1", "--delta", "1e-6", "-o", "x.parquet", "--param", "kbar=0"],
     "kbar"),
    (["explain", "nope", "--rho", "1", "--delta", "1e-6"], "unknown algo 'nope'"),
    (["explain", "dpsips", "--rho", "1", "--delta", "1e-13"], "below the floor MIN_DELTA"),
]


@pytest.mark.parametrize("args,message", [
    (["select", "missing.parquet", *BUDGET, "-o", "x.parquet"], "does not exist"),
    (["select", "in.parquet", *BUDGET, "--user-col", "nope", "-o", "x.parquet"], "user_col 'nope' is not a column"),
    (["select", "in.parquet", "--epsilon", "abc", "--delta", "1e-6", "-o", "x.parquet"], "invalid float value"),
    (["select", "in.parquet", "--epsilon", "1", "--rho", "1", "--delta", "1e-6", "-o", "x.parquet"], "not allowed"),
])
def test_bad_usage_exits_2_in_a_subprocess(data, args, message):
    before = (data / "in.parquet").read_bytes()
    proc = run(*args, cwd=data)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not (data / "x.parquet").exists()
    assert (data / "in.parquet").read_bytes() == before


@pytest.mark.parametrize("args,message", BAD)
def test_bad_input_exits_2_with_a_clear_message(data, monkeypatch, capsys, args, message):
    """The same contract for more bad inputs, through cli.main in-process (no interpreter start-up)."""
    monkeypatch.chdir(data)
    before = (data / "in.parquet").read_bytes()
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (data / "x.parquet").exists()
    assert (data / "in.parquet").read_bytes() == before


def test_count_release_command_writes_keys_with_noisy_counts(tmp_path):
    duckdb.sql("SELECT u AS user_id, 'w' || ((u + j) % 10) AS item FROM range(2000) r(u), range(2) s(j)").write_parquet(
        str(tmp_path / "pcr_in.parquet"))                   # 10 keys of ~400 users each
    proc = run("count-release", "pcr_in.parquet", "--rho", "0.5", "--delta", "1e-6", "-o", "pcr.csv", "--seed", "3",
               "--param", "kbar=20", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    table = duckdb.sql(f"SELECT * FROM read_csv('{tmp_path / 'pcr.csv'}')").to_arrow_table()
    assert out["algo"] == "pcr" and out["seeded"] and out["released"] == table.num_rows > 0
    assert table.column_names == ["item", "noisy_count", "sigma"]
    assert table.column("item").to_pylist() == sorted(table.column("item").to_pylist())


def test_explain_command_text_and_json():
    text = run("explain", "dpsips", "--rho", "0.1", "--delta", "1e-6", "--max-contributions", "10")
    assert text.returncode == 0, text.stderr
    ex = duckdp.explain("dpsips", rho=0.1, delta=1e-6, max_contributions=10)
    assert text.stdout.strip() == str(ex).strip()
    js = run("explain", "weighted_gaussian", "--epsilon", "1", "--delta", "1e-6", "--keys-per-user", "1", "7",
             "--json")
    assert js.returncode == 0, js.stderr
    rows = json.loads(js.stdout)["users_needed"]
    assert [r["keys_per_user"] for r in rows] == [1, 7] and all(r["users_50"] > 0 for r in rows)
    glob = run("explain", "mad2r", "--rho", "0.1", "--delta", "1e-6", "--truncation", "global", "--json")
    assert glob.returncode == 0, glob.stderr
    out = json.loads(glob.stdout)
    assert out["truncation"] == "global" and any("one secret order of the keys" in n for n in out["notes"])


def test_ledger_charges_runs_across_commands_and_refuses_an_overrun(data, tmp_path):
    """--ledger FILE: each run is charged to the file's Session ledger; the run that would exceed the
    total is refused before reading data (exit 2, no output) and the ledger remembers across processes."""
    ledger = tmp_path / "budget.duckdb"
    total = ["--ledger", ledger, "--total-rho", "0.7", "--total-delta", "1e-6"]
    args = ["in.parquet", "--rho", "0.3", "--delta", "1e-7", "--max-contributions", "4"]
    first = run("select", *args, "-o", tmp_path / "a.parquet", *total, "--json", cwd=data)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["ledger"]["remaining"]["rho"] == pytest.approx(0.4)
    second = run("count-release", "in.parquet", "--rho", "0.3", "--delta", "1e-7", "-o", tmp_path / "b.parquet",
                 *total, cwd=data)
    assert second.returncode == 0, second.stderr
    assert "remaining ρ=0.1" in second.stdout
    third = run("select", *args, "-o", tmp_path / "c.parquet", *total, cwd=data)
    assert third.returncode == 2 and "would exceed the session budget" in third.stderr
    assert not (tmp_path / "c.parquet").exists()
    con = duckdb.connect()
    con.execute(f"ATTACH '{ledger}' AS l")
    session = duckdp.Session(con, rho=0.7, delta=1e-6, ledger_table=("l", "main", "duckdp_ledger"))
    assert session.ledger.column("algo").to_pylist() == ["weighted_gaussian", "pcr"]
    assert session.remaining.value == pytest.approx(0.1)
    con.close()
    other = run("select", *args, "-o", tmp_path / "d.parquet", "--ledger", ledger, "--total-rho", "0.9",
                "--total-delta", "1e-6", cwd=data)
    assert other.returncode == 2 and "total budget" in other.stderr


def test_internal_error_exits_1_without_traceback(monkeypatch, capsys, data):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "select", broken)
    assert cli.main(["select", str(data / "in.parquet"), *BUDGET, "-o", str(data / "y.parquet")]) == 1
    err = capsys.readouterr().err
    assert "internal error (RuntimeError): boom" in err and "Traceback" not in err


def test_demo_compares_every_registered_mechanism():
    proc = run("demo", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    table = proc.stdout.split("mechanism", 1)[1]
    described = duckdp.algorithms()
    proven = [m["name"] for m in described if not m.get("unproven")]
    rows = {line.split()[0]: line for line in table.splitlines()[1:] if line.split() and line.split()[0] in proven}
    assert set(rows) == set(proven)
    for m in described:
        if m.get("unproven"):
            assert f"skipped {m['name']}: not proven private" in proc.stdout
    eps_only = [n for n in proven if "rho/delta" not in next(m for m in described if m["name"] == n)["budgets"]]
    assert all("*" in rows[n] for n in eps_only) and all("ρ=0.5" in rows[n] for n in set(proven) - set(eps_only))
    assert ("DP-SIPS Cor. 9" in proc.stdout) == bool(eps_only)
    group_by = proc.stdout.split("private GROUP BY at the same budget", 1)[1].splitlines()
    rows = [line.split() for line in group_by[2:7]]          # word, users, [low, high], true users
    assert group_by[1].split() == ["word", "users", "95", "%", "interval", "true", "users"] and len(rows) == 5
    for word, users, low, high, true in rows:
        low_i, high_i, users_i = (int(v.strip("[],").replace(",", "")) for v in (low, high, users))
        assert word.startswith("item_") and low_i < users_i < high_i and int(true.replace(",", "")) > 0


def test_algorithms_and_macros_commands():
    proc = run("algorithms", "--json")
    assert proc.returncode == 0
    assert [m["name"] for m in json.loads(proc.stdout)] == [m["name"] for m in duckdp.algorithms()]
    text = run("algorithms").stdout
    assert all(m["citation"] in text for m in duckdp.algorithms())
    proc = run("macros")  # the file with a fresh secret in place of the template's placeholder
    assert proc.returncode == 0
    assert re.sub(r"duckdp_secret\(\) AS '[0-9a-f]{64}'", "", proc.stdout) == \
        re.sub(r"duckdp_secret\(\) AS '[0-9a-f]{64}'", "", macro_sql())


def test_progress_shows_on_a_terminal_only(data):
    """With stderr on a pseudo-terminal the command reports its phases; piped runs stay quiet (above)."""
    pty = pytest.importorskip("pty")
    import select as _select

    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run([sys.executable, "-m", "duckdp.cli", "select", str(data / "in.parquet"), *BUDGET,
                               "-o", str(data / "tty.parquet")], stdout=subprocess.PIPE, stderr=slave, env=env,
                              timeout=120)
        chunks = []
        while _select.select([master], [], [], 0.5)[0]:
            chunks.append(os.read(master, 65536).decode())
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 0
    err = "".join(chunks)
    assert "duckdp: reading" in err and "duckdp: running weighted_gaussian" in err and "duckdp: writing" in err
    assert proc.stdout.decode().startswith("duckdp release")

"""The shell macro file: run by the real `duckdb` CLI and by duckdp.install_macros.

Checks: scalar math against scipy, σ and thresholds against duckdp.privacy.calibration (1e-9
relative, over a grid), released counts against the exact expectation Σ P(w + noise ≥ T) within
4 standard errors, MAD weights against a numpy reference, bad input, the keyed PRF (noise values
recomputed from the secret with hashlib), secrets per file, and reproducibility under a test key.
"""
from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

import duckdb
import numpy as np
import pytest
from scipy.special import erf, ndtr, ndtri
from scipy.stats import kstest

import duckdp
from duckdp.macros import macro_sql, secret_of_test_key
from duckdp.mechanisms import get
from duckdp.mechanisms.base import Params
from duckdp.mechanisms.basic import gaussian_round
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.calibration import constant_novelty, gaussian_release_probability, weighted_l2_novelty
from duckdp.templates import sql_dir

CLI = shutil.which("duckdb")
needs_cli = pytest.mark.skipif(CLI is None, reason="the duckdb CLI is not installed (pip install duckdb-cli)")


def run_cli(sql: str, macros: str | None = None) -> list[dict]:
    """Run `sql` after `.read`-ing a macro file (default: test key 7's) in the duckdb CLI; rows of
    the last statement."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(macro_sql(test_key=7) if macros is None else macros)
    try:
        script = f".read '{f.name}'\n.mode csv\n{sql}\n"
        proc = subprocess.run([CLI, "-batch"], input=script, capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(f.name)
    if proc.returncode != 0 or "Error" in proc.stderr:
        raise RuntimeError(proc.stderr or proc.stdout)
    return list(csv.DictReader(io.StringIO(proc.stdout)))


def record_noise_inputs(con, record) -> None:
    """Replace the noise macro by a Python UDF `record(value, scale, salt, key_id)` (Arrow arrays)."""
    con.execute("DROP MACRO duckdp_gaussian_noise")
    con.create_function("duckdp_gaussian_noise", record, ["DOUBLE", "DOUBLE", "UBIGINT", "UBIGINT"], "DOUBLE",
                        type="arrow", side_effects=True)


@pytest.fixture
def mcon():
    c = duckdb.connect()
    duckdp.install_macros(c, seed=11)
    yield c
    c.close()


# --- scalar math and calibration ---------------------------------------------------------------

def test_scalar_math_matches_scipy(mcon):
    x = np.concatenate([np.linspace(-37, 37, 1481), [-0.6744, 0.6745, 5.65, 5.66, 1e-9, -1e-300]])
    p = np.concatenate([np.logspace(-300, -1, 400), np.linspace(0.01, 0.99, 99), 1 - np.logspace(-15, -1, 40)])
    got = np.array(mcon.sql("SELECT duckdp_ndtr(x), duckdp_erf(x) FROM unnest($x) t(x)", params={"x": x.tolist()})
                   .fetchall())
    assert np.allclose(got[:, 0], ndtr(x), rtol=1e-12, atol=0)
    assert np.allclose(got[:, 1], erf(x), rtol=1e-14, atol=0)
    got = np.array(mcon.sql("SELECT duckdp_ndtri(p), duckdp_log1p(-p), duckdp_expm1(-p), duckdp_expm1(p) "
                            "FROM unnest($p) t(p)", params={"p": p.tolist()}).fetchall())
    assert np.allclose(got[:, 0], ndtri(p), rtol=1e-14, atol=0)
    assert np.allclose(got[:, 1], np.log1p(-p), rtol=1e-14, atol=0)
    assert np.allclose(got[:, 2], np.expm1(-p), rtol=1e-14, atol=0)
    assert np.allclose(got[:, 3], np.expm1(p), rtol=1e-14, atol=0)


EPS = [0.1, 0.5, 1.0, 2.0, 5.0]
RHO = [0.01, 0.1, 1.0, 5.0]
DELTAS = [1e-10, 1e-6, 1e-3]
D0S = [1, 10, 100, 1000]


def _python_plan(kind, budget, d0):
    if kind == "weighted":
        return gaussian_round(budget, d0)
    return gaussian_round(budget, d0, math.sqrt(d0), constant_novelty(1.0))


@needs_cli
def test_cli_calibration_equals_python():
    """σ and T from the macros in the CLI equal duckdp's Python calibration to 1e-9 relative."""
    grid = [("epsilon", e, d, n) for e in EPS for d in DELTAS for n in D0S]
    grid += [("rho", r, d, n) for r in RHO for d in DELTAS for n in D0S]
    values = ", ".join(f"('{k}', {v!r}, {d!r}, {n})" for k, v, d, n in grid)
    rows = run_cli(f"""
        WITH grid(kind, v, delta, d0) AS (VALUES {values}),
        kinds(kind2, sens, expo) AS (VALUES ('weighted', NULL, 0.5), ('count', 1, 0.0)),
        calibrated AS (
          SELECT *, coalesce(sens * sqrt(d0), 1) AS sensitivity,
                 CASE WHEN kind = 'epsilon'
                      THEN duckdp_analytic_gaussian_sigma(v, delta / 2, coalesce(sens * sqrt(d0), 1))
                      ELSE duckdp_zcdp_sigma(v, coalesce(sens * sqrt(d0), 1)) END AS sigma,
                 CASE WHEN kind = 'epsilon' THEN delta / 2 ELSE delta END AS novel_delta
          FROM grid, kinds)
        SELECT kind, v, delta, d0, kind2, sigma,
               duckdp_gaussian_threshold(sigma, novel_delta, d0, 1, expo) AS threshold FROM calibrated;""")
    assert len(rows) == 2 * len(grid)
    for r in rows:
        v, delta, d0 = float(r["v"]), float(r["delta"]), int(r["d0"])
        budget = EpsDelta(v, delta) if r["kind"] == "epsilon" else ZCDP(v, delta)
        plan = _python_plan(r["kind2"], budget, d0)
        assert float(r["sigma"]) == pytest.approx(plan.scale, rel=1e-9, abs=0), r
        assert float(r["threshold"]) == pytest.approx(plan.threshold, rel=1e-9, abs=0), r


def test_golden_values_from_python(mcon):
    """Spec test vector ε = 1, δ = 1e-5, Δ0 = 100: σ = 3.884141, T = 20.789744 (spec §2)."""
    ((sigma, threshold),) = mcon.sql("SELECT sigma, threshold FROM duckdp_plan(epsilon := 1, delta := 1e-5)").fetchall()
    assert sigma == pytest.approx(3.884141, abs=5e-7) and threshold == pytest.approx(20.789744, abs=5e-7)


@pytest.mark.parametrize("budget", [ZCDP(0.1, 1e-5), EpsDelta(1.0, 1e-6)])
@pytest.mark.parametrize("ratio,iterations", [(1 / 3, 3), (1.0, 3), (2.0, 3), (1 / 3, 1), (0.5, 6)])
@pytest.mark.parametrize("algo,beta_min", [("dpsips", 1.0), ("adaptive_sips", 0.5), ("adaptive_sips", 0.2)])
def test_sips_plan_equals_python(mcon, budget, ratio, iterations, algo, beta_min):
    """duckdp_sips_plan's per-round budgets, σ and T equal duckdp's DP-SIPS / adaptive SIPS plan."""
    kind = "epsilon" if isinstance(budget, EpsDelta) else "rho"
    amount = budget.epsilon if kind == "epsilon" else budget.rho
    rows = mcon.sql(f"SELECT {kind}, delta, sigma, threshold FROM duckdp_sips_plan({kind} := $a, delta := $d, "
                    "max_contributions := 50, iterations := $i, ratio := $r, beta_min := $b)",
                    params={"a": amount, "d": budget.delta, "r": ratio, "i": iterations, "b": beta_min}).fetchall()
    params = {"iterations": iterations, "ratio": ratio}
    if algo == "adaptive_sips":
        params.update(beta_min=beta_min, a_drop=-0.5, a_full=0.5)
    plan = get(algo).plan(budget, Params(50, params))
    assert len(rows) == len(plan) == iterations
    for (a, d, sigma, threshold), p in zip(rows, plan, strict=True):
        want = p.budget.epsilon if kind == "epsilon" else p.budget.rho
        assert a == pytest.approx(want, rel=1e-12) and d == pytest.approx(p.budget.delta, rel=1e-12)
        assert sigma == pytest.approx(p.scale, rel=1e-9) and threshold == pytest.approx(p.threshold, rel=1e-9)


# --- released counts against the exact expectation --------------------------------------------

LEVELS, BLOCKS = (4, 5, 6, 7), 25  # block b of size c: c users who all hold the same 4 keys


def _table_sql() -> str:
    """Every user holds exactly 4 keys (= Δ0: no truncation, so weights are fixed): per block size
    c, 25 blocks whose 4 keys each get c users. Weighted: w = c/2; counts: w = c. All weights sit
    below the thresholds used, so the expected count reacts to any change of σ, T or weights."""
    blocks = ", ".join(f"({c})" for c in LEVELS)
    return f"""CREATE TEMP TABLE t AS
        SELECT 'u' || c || '_' || b || '_' || m AS user_id, 'k' || c || '_' || b || '_' || unnest(range(4)) AS item
        FROM (VALUES {blocks}) v(c), range({BLOCKS}) r(b), LATERAL (SELECT unnest(range(c)) AS m);"""


def _expected(sigma, threshold, weight_of_one):
    """E and Var of the released count: 4·BLOCKS keys of weight c·w1 for each block size c."""
    w = np.repeat(np.array(LEVELS, dtype=float) * weight_of_one, 4 * BLOCKS)
    p = gaussian_release_probability(w, sigma, threshold)
    return p.sum(), (p * (1 - p)).sum()


@needs_cli
@pytest.mark.parametrize("macro,weight,sens", [("duckdp_weighted_gaussian", 0.5, 1.0),
                                               ("duckdp_count_gaussian", 1.0, 2.0)])
def test_cli_released_counts_match_expectation(macro, weight, sens):
    seeds = 30
    novelty = weighted_l2_novelty if weight == 0.5 else constant_novelty(1.0)
    plan = gaussian_round(ZCDP(0.5, 1e-3), 4, sens, novelty)
    runs = "\n".join(f"CREATE OR REPLACE TEMP TABLE s AS SELECT setseed({(i + 1) / (seeds + 2)});\n"
                     f"INSERT INTO counts SELECT {i}, count(*) FROM {macro}('t', 'user_id', 'item', rho := 0.5, "
                     f"delta := 1e-3, max_contributions := 4);" for i in range(seeds))
    rows = run_cli(f"{_table_sql()}\nCREATE TEMP TABLE counts(seed INT, n BIGINT);\n{runs}\n"
                   "SELECT sum(n) AS total, count(*) AS runs FROM counts;")
    mean, var = _expected(plan.scale, plan.threshold, weight)
    assert 20 < mean < 100  # keys near (below) the threshold: the count is informative
    assert int(rows[0]["runs"]) == seeds
    assert abs(int(rows[0]["total"]) - seeds * mean) <= 4 * math.sqrt(seeds * var)


@needs_cli
def test_cli_dpsips_counts_match_expectation():
    """Single-key users keep weight 1 in every round, so key i (w_i users) is released with
    probability 1 − Π_r (1 − Φ((w_i − T_r)/σ_r)), independently across keys and rounds. An even
    split (ratio 1) makes the rounds alike, so noise shared across rounds would show."""
    seeds = 20
    plan = get("dpsips").plan(ZCDP(0.5, 1e-3), Params(4, {"iterations": 3, "ratio": 1.0}))
    w = np.array([3 + j % 4 for j in range(200)], dtype=float)
    miss = np.prod([1 - gaussian_release_probability(w, r.scale, r.threshold) for r in plan], axis=0)
    p = 1 - miss
    runs = "\n".join(f"CREATE OR REPLACE TEMP TABLE s AS SELECT setseed({(i + 1) / (seeds + 2)});\n"
                     "INSERT INTO counts SELECT count(*) FROM duckdp_dpsips('t', 'user_id', 'item', rho := 0.5, "
                     "delta := 1e-3, max_contributions := 4, ratio := 1);" for i in range(seeds))
    rows = run_cli("CREATE TEMP TABLE t AS SELECT 'u' || j || '_' || m AS user_id, 'k' || j AS item "
                   "FROM range(200) r(j), LATERAL (SELECT unnest(range(3 + j % 4)) AS m);\n"
                   f"CREATE TEMP TABLE counts(n BIGINT);\n{runs}\nSELECT sum(n) AS total FROM counts;")
    mean, var = p.sum(), (p * (1 - p)).sum()
    assert 20 < mean < 180  # the keys straddle the rounds' thresholds
    assert abs(int(rows[0]["total"]) - seeds * mean) <= 4 * math.sqrt(seeds * var)


def test_installed_released_counts_match_expectation():
    """The same check through install_macros (Python connection): every call draws a fresh nonce,
    so the 30 calls are independent releases."""
    seeds, plan = 30, gaussian_round(ZCDP(0.5, 1e-3), 4)
    c = duckdb.connect()
    try:
        duckdp.install_macros(c, seed=5)
        c.execute(_table_sql())
        counts = [c.sql("SELECT count(*) FROM duckdp_weighted_gaussian('t', 'user_id', 'item', rho := 0.5, "
                        "delta := 1e-3, max_contributions := 4)").fetchall()[0][0] for _ in range(seeds)]
    finally:
        c.close()
    total = sum(counts)
    mean, var = _expected(plan.scale, plan.threshold, 0.5)
    assert abs(total - seeds * mean) <= 4 * math.sqrt(seeds * var)


@needs_cli
def test_cli_noise_hook_is_fresh_standard_normal():
    """The keyed noise gives every (salt, key id) its own N(0, 1) draw: 20,000 key ids under one
    salt are distinct and pass a KS test; a second salt gives uncorrelated values for the same ids."""
    rows = run_cli("""CREATE TEMP TABLE salts AS SELECT duckdp_salt(n, 0, 'n') AS a, duckdp_salt(n, 1, 'n') AS b
        FROM (SELECT duckdp_nonce() AS n);
        SELECT duckdp_gaussian_noise(0, 1, a, i) AS x, duckdp_gaussian_noise(0, 1, b, i) AS y
        FROM range(20000) r(i), salts;""")
    x = np.array([float(r["x"]) for r in rows])
    y = np.array([float(r["y"]) for r in rows])
    assert len(np.unique(x)) == len(x) == 20000
    assert kstest(x, "norm").pvalue > 1e-4 and kstest(y, "norm").pvalue > 1e-4
    assert abs(np.corrcoef(x, y)[0, 1]) < 4 / math.sqrt(len(x))


# --- MAD weights against a numpy reference ------------------------------------------------------

def _mad_reference(sets: dict, tau: float, min_degree: int, max_degree: int) -> dict:
    """Unbiased MAD stages 1–4 (docs/specs/mad-mad2r.md §5) for sets already within Δ0."""
    f = 1 / math.sqrt(max_degree) - 1 / (2 * max_degree)
    adaptive = {u: min_degree <= len(s) <= max_degree for u, s in sets.items()}
    init: dict = {}
    for u, s in sets.items():
        for i in s:
            init[i] = init.get(i, 0.0) + (1 / len(s) if adaptive[u] else 0.0)
    ratio = {i: (w - min(w, tau)) / w if w > 0 else 0.0 for i, w in init.items()}
    excess = {u: sum(ratio[i] / len(s) for i in s) for u, s in sets.items() if adaptive[u]}
    out = {i: min(w, tau) for i, w in init.items()}
    for u, s in sets.items():
        d = len(s)
        for i in s:
            out[i] += (f * excess[u] + 1 - 1 / math.sqrt(d)) / math.sqrt(d) if adaptive[u] else 1 / math.sqrt(d)
    return out


def test_mad_weights_equal_reference(mcon):
    """Capture MAD's pre-noise weights through a recording noise hook and compare to numpy."""
    rng = np.random.default_rng(3)
    sets = {u: set(rng.choice(30, size=int(rng.integers(1, 7)), replace=False, p=None).tolist())
            for u in range(400)}
    for u in range(20):  # a heavy item shared by many users, so truncation at τ happens
        sets[u].add(99)
    users = [u for u, s in sets.items() for _ in s]
    items = [f"i{i}" for s in sets.values() for i in s]
    mcon.execute("CREATE TABLE t AS SELECT unnest($u) AS user_id, unnest($i) AS item", {"u": users, "i": items})
    seen = []

    def record(value, scale, salt, key_id):
        seen.extend(value.to_pylist())
        return value

    record_noise_inputs(mcon, record)
    ((sigma, threshold),) = mcon.sql("SELECT sigma, threshold FROM duckdp_plan(rho := 5, delta := 1e-3, "
                                     "max_contributions := 8)").fetchall()
    tau = threshold + 0.5 * sigma
    mcon.sql("SELECT * FROM duckdp_mad('t', 'user_id', 'item', rho := 5, delta := 1e-3, max_contributions := 8, "
             "adaptive_excess := 0.5, max_adaptive_degree := 5)").fetchall()
    ref = _mad_reference({u: {f"i{i}" for i in s} for u, s in sets.items()}, tau, 2, 5)
    assert ref["i99"] > tau  # the heavy item was truncated and its excess rerouted
    assert sorted(seen) == pytest.approx(sorted(ref.values()), rel=1e-12)


# --- behaviour ----------------------------------------------------------------------------------

@needs_cli
def test_cli_reproducible_under_setseed_and_quoted_names():
    """Under a test key: same setseed → same keys, another seed → other keys; awkward names work.

    200 keys held by 1..10 single-key users straddle every mechanism's threshold, so two seeds
    giving the same key set has negligible probability.
    """
    setup = ('CREATE TEMP TABLE "my t" AS SELECT \'u\' || j || \'_\' || m AS "User Id", \'k\' || j AS "it""em" '
             "FROM range(200) r(j), LATERAL (SELECT unnest(range(j % 10 + 1)) AS m);\n")
    query = ("SELECT string_agg(\"it\"\"em\", ',' ORDER BY \"it\"\"em\") AS keys FROM duckdp_{m}('my t', 'User Id', "
             "'it\"em', rho := 0.5, delta := 1e-3, max_contributions := 4);")
    for m in ("weighted_gaussian", "count_gaussian", "dpsips", "mad", "adaptive_sips"):
        runs = [run_cli(f"{setup}CREATE TEMP TABLE s AS SELECT setseed({s});\n{query.format(m=m)}")[0]["keys"]
                for s in (0.25, 0.25, 0.75)]
        assert runs[0] == runs[1], m
        assert runs[0] != runs[2], m
        assert runs[0] and set(runs[0].split(",")) <= {f"k{j}" for j in range(200)}, m


@needs_cli
@pytest.mark.parametrize("args,message", [
    ("'t', 'user_id', 'nope', epsilon := 1, delta := 1e-5", 'Could not find key "nope"'),
    ("'t', 'nobody', 'item', epsilon := 1, delta := 1e-5", 'Could not find key "nobody"'),
    ("'missing', 'user_id', 'item', epsilon := 1, delta := 1e-5", "missing"),
    ("'t', 'user_id', 'item', epsilon := 1, rho := 1, delta := 1e-5", "exactly one of epsilon"),
    ("'t', 'user_id', 'item', epsilon := 1", "delta := is required"),
    ("'t', 'user_id', 'item', epsilon := -1, delta := 1e-5", "finite number > 0"),
    ("'t', 'user_id', 'item', epsilon := 1, delta := 2", "delta must be in (0, 1)"),
    ("'t', 'user_id', 'user_id', epsilon := 1, delta := 1e-5", "distinct columns"),
    ("'n', 'user_id', 'item', epsilon := 1, delta := 1e-5", "NULL user ids or items"),
])
def test_cli_bad_input_errors(args, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        run_cli(f"{_table_sql()}\nCREATE TEMP TABLE n AS SELECT 'u' AS user_id, NULL AS item;\n"
                f"SELECT * FROM duckdp_weighted_gaussian({args});")


@pytest.mark.parametrize("macro", ["weighted_gaussian", "count_gaussian", "dpsips", "mad", "adaptive_sips"])
def test_unknown_column_is_named(mcon, macro):
    """An unknown user or item column fails naming it (not DuckDB's "empty set of columns"); issue #14 item 8."""
    mcon.execute("CREATE TABLE cols AS SELECT range % 9 AS user_id, 'k' || (range % 4) AS item FROM range(90)")
    for user, item, missing in (("user_id", "nope", "nope"), ("nobody", "item", "nobody"), ("USER_ID", "itm", "itm")):
        with pytest.raises(duckdb.BinderException, match=f'Could not find key "{missing}"') as info:
            mcon.sql(f"SELECT * FROM duckdp_{macro}('cols', '{user}', '{item}', rho := 0.5, delta := 1e-5)").fetchall()
        assert "empty set" not in str(info.value)
    assert mcon.sql(f"SELECT count(*) FROM duckdp_{macro}('cols', 'User_Id', 'ITEM', rho := 0.5, delta := 1e-5)"
                    ).fetchall()[0][0] >= 0


@needs_cli
def test_cli_version_reported():
    out = subprocess.run([CLI, "--version"], capture_output=True, text=True, timeout=30).stdout
    assert out.startswith("v1.") or out.startswith("v2."), out


def test_install_is_repeatable_and_the_template_needs_a_secret(mcon):
    duckdp.install_macros(mcon, seed=11)  # reinstalling replaces the macros instead of failing
    template = (sql_dir() / "macros.sql").read_text(encoding="utf-8")
    with pytest.raises(duckdb.Error):     # the unrendered template fails to load: no keyless file
        duckdb.connect().execute(template)


def test_colliding_keys_get_independent_noise_in_the_macros(mcon):
    """Issue #11 part 1 in the macros: keys that collide under DuckDB's 64-bit hash must still get
    different PRF inputs. The old macros' counter was xor(hash(item), salt), equal for the pinned
    STRUCT pair below, so both keys drew the same noise. The recording hook sees each round's
    (salt, key id) pairs: key ids are ranks, not hashes, so they are distinct within a round."""
    pair = "{'a': 42::BIGINT, 'b': 1001::BIGINT}", "{'a': 43::BIGINT, 'b': 2676856443368798602::BIGINT}"
    h0, h1 = mcon.sql(f"SELECT hash({pair[0]}), hash({pair[1]})").fetchall()[0]
    assert h0 == h1                                                      # the pinned collision
    mcon.execute(f"CREATE TABLE c AS SELECT (i % 300)::VARCHAR AS user_id, CASE i % 52 WHEN 50 THEN {pair[0]} "
                 f"WHEN 51 THEN {pair[1]} ELSE {{'a': (i % 52)::BIGINT, 'b': 0::BIGINT}} END AS item "
                 "FROM range(3000) r(i)")
    seen = []

    def record(value, scale, salt, key_id):
        seen.extend(zip(salt.to_pylist(), key_id.to_pylist(), strict=True))
        return value

    record_noise_inputs(mcon, record)
    for macro in ("duckdp_weighted_gaussian", "duckdp_dpsips", "duckdp_mad", "duckdp_adaptive_sips"):
        seen.clear()
        mcon.sql(f"SELECT * FROM {macro}('c', 'user_id', 'item', rho := 1, delta := 1e-5, "
                 "max_contributions := 5)").fetchall()
        assert len(seen) >= 50 and len(set(seen)) == len(seen), macro    # one draw per (round, key)


# --- keyed randomness (issue #18 §4) -------------------------------------------------------------

def _secret_of(text: str) -> str:
    (secret,) = re.findall(r"duckdp_secret\(\) AS '([0-9a-f]{64})';", text)
    return secret


def _prf(secret: str, msg: str) -> int:
    return int(hashlib.sha256((secret + msg).encode()).hexdigest()[:16], 16)


def _straddling_keys(con, macro: str = "weighted_gaussian", seed: float = 0.25) -> str:
    """Keys released from 200 keys held by 1..10 single-key users (they straddle the threshold, so
    two independent runs give the same set with negligible probability), after setseed(seed)."""
    con.execute("CREATE OR REPLACE TEMP TABLE s200 AS SELECT 'u' || j || '_' || m AS user_id, 'k' || j AS item "
                "FROM range(200) r(j), LATERAL (SELECT unnest(range(j % 10 + 1)) AS m)")
    con.execute("SELECT setseed(?)", [seed]).fetchall()
    return con.sql(f"SELECT string_agg(item, ',' ORDER BY item) FROM duckdp_{macro}('s200', 'user_id', 'item', "
                   "rho := 0.5, delta := 1e-3, max_contributions := 4)").fetchall()[0][0]


def test_noise_is_the_keyed_prf_of_salt_and_key_id():
    """duckdp_gaussian_noise(0, 1, salt, id) = Φ⁻¹(u) with u from the first 64 bits of
    sha256(secret ‖ 'N' ‖ hex16(salt) ‖ hex16(id)), recomputed here with hashlib; the salts are the
    PRF of (nonce, round, purpose). The old macros used hash(salt, id): no secret at all."""
    text = macro_sql()
    secret = _secret_of(text)
    con = duckdb.connect()
    con.execute(text)
    salt, ids = 0x0123456789ABCDEF, [0, 1, 2, 10**12, 2**64 - 1]
    got = [r[0] for r in con.sql("SELECT duckdp_gaussian_noise(0, 1, $s::UBIGINT, i) FROM unnest($i::UBIGINT[]) t(i)",
                                 params={"s": salt, "i": ids}).fetchall()]
    words = [_prf(secret, f"N{salt:016X}{i:016X}") for i in ids]
    assert got == pytest.approx(ndtri([((w >> 12) * 2 + 1) * 2.0**-53 for w in words]), rel=1e-14)
    (s,) = con.sql("SELECT duckdp_salt(5, 2, 't')").fetchall()[0]
    assert s == _prf(secret, f"S{5:016X}{2:016X}t")
    (t,) = con.sql("SELECT duckdp_trunc_order('u', 'k', 9::UBIGINT)").fetchall()[0]
    (h,) = con.sql("SELECT hash('u', 'k')").fetchall()[0]
    assert t == _prf(secret, f"T{9:016X}{h:016X}")
    code = [line.split("--")[0] for line in text.splitlines()]
    assert not any("random()" in line for line in code)  # noise never comes from DuckDB's generator


def test_two_files_give_different_noise_under_the_same_setseed():
    """Two rendered files hold different 256-bit secrets, so under the same setseed() they release
    different keys (the old file, secretless, released the same); one secret file is not
    reproducible by setseed() either (a fresh nonce per call). Test keys are reproducible and say so."""
    texts = [macro_sql(), macro_sql()]
    assert _secret_of(texts[0]) != _secret_of(texts[1])
    runs = []
    for text in texts:
        con = duckdb.connect()
        con.execute(text)
        runs.append((_straddling_keys(con), _straddling_keys(con)))
        assert "duckdp_seeded" not in con.sql("SELECT * FROM duckdp_weighted_gaussian('s200', 'user_id', 'item', "
                                              "rho := 0.5, delta := 1e-3)").columns
    assert runs[0][0] != runs[1][0] and runs[0][0] != runs[0][1]
    seeded = []
    for _ in range(2):
        con = duckdb.connect()
        con.execute(macro_sql(test_key=3))
        seeded.append(_straddling_keys(con))
        rel = con.sql("SELECT * FROM duckdp_weighted_gaussian('s200', 'user_id', 'item', rho := 0.5, delta := 1e-3)")
        assert rel.columns == ["item", "duckdp_seeded"] and all(r[1] is True for r in rel.fetchall())
    assert seeded[0] == seeded[1]
    documented = hashlib.sha256(b"duckdp macros test key 3").hexdigest()
    assert _secret_of(macro_sql(test_key=3)) == secret_of_test_key(3) == documented


def test_truncation_order_is_keyed():
    """Which Δ0 keys a user keeps depends on the secret (the old order was hash(xor(hash(u, i), salt))
    with a salt from random(): known to anyone who knows the seed)."""
    kept = []
    for key in (1, 2):
        con = duckdb.connect()
        con.execute(macro_sql(test_key=key))
        kept.append(con.sql("SELECT list(i ORDER BY i) FROM (SELECT i FROM range(40) r(i) "
                            "ORDER BY duckdp_trunc_order('u', i, 77::UBIGINT), i LIMIT 5)").fetchall()[0][0])
    assert kept[0] != kept[1]


def test_cli_macros_writes_a_private_file(tmp_path):
    """`duckdp macros -o FILE` creates FILE mode 0600 with a fresh secret; --test-key N is fixed and noted."""
    def run(*args):
        return subprocess.run([sys.executable, "-m", "duckdp.cli", "macros", *args], capture_output=True,
                              text=True, timeout=60, env={**os.environ, "PYTHONPATH": os.getcwd()})
    paths = [tmp_path / "a.sql", tmp_path / "b.sql"]
    paths[1].write_text("old")
    paths[1].chmod(0o644)
    for p in paths:
        assert run("-o", str(p)).returncode == 0
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert _secret_of(paths[0].read_text()) != _secret_of(paths[1].read_text())
    assert _secret_of(run().stdout) not in (_secret_of(paths[0].read_text()), _secret_of(paths[1].read_text()))
    proc = run("--test-key", "4")
    assert proc.returncode == 0 and _secret_of(proc.stdout) == secret_of_test_key(4) and "NOT private" in proc.stderr
    assert run("--test-key", "-1").returncode == 2


def test_word_uniform_is_inside_the_open_interval_and_symmetric(mcon):
    """u = (2(v >> 12) + 1)·2⁻⁵³ for the extreme words: 2⁻⁵³ for v < 2¹², 1 − 2⁻⁵³ (not 1.0, which
    the old ((v >> 11) + 0.5)·2⁻⁵³ gave and which made Φ⁻¹ infinite) for v = 2⁶⁴ − 1; u(v) + u(~v) = 1
    exactly, so the normal's extremes are ±8.29 alike."""
    top = 2**64 - 1
    words = [0, 1, 2**12 - 1, 2**12, 2**63, top - 2**12 + 1, top]
    rng = np.random.default_rng(0)
    words += [int(w) for w in rng.integers(0, 2**63, 200, dtype=np.uint64)]
    words += [top - w for w in words]
    got = dict(mcon.sql("SELECT w, duckdp_word_uniform(w) FROM unnest($w::UBIGINT[]) t(w)",
                        params={"w": words}).fetchall())
    assert got[0] == got[2**12 - 1] == 2.0**-53 and got[2**12] == 3 * 2.0**-53
    assert got[top] == got[top - 2**12 + 1] == 1 - 2.0**-53 < 1.0
    assert all(got[w] == ((w >> 12) * 2 + 1) / 2**53 for w in words)          # exact, no rounding
    assert all(got[w] + got[top - w] == 1.0 for w in words)                    # symmetric grid
    lo, hi = mcon.sql("SELECT duckdp_ndtri(duckdp_word_uniform(0::UBIGINT)), "
                      "duckdp_ndtri(duckdp_word_uniform(18446744073709551615::UBIGINT))").fetchall()[0]
    assert math.isfinite(hi) and lo == -hi and hi == pytest.approx(8.2095, abs=1e-3)


MACROS = ("weighted_gaussian", "count_gaussian", "dpsips", "mad", "adaptive_sips")


@pytest.mark.parametrize("macro", MACROS)
def test_output_order_is_a_function_of_the_released_set(macro):
    """Issue #18 §1 in the shell: D = 400 users holding keys A and B; D' = D plus one user holding B
    and 50 keys nobody else has. Both release exactly {A, B}; with threads = 2 and several seeds the
    rows must come out in the same, sorted order (the old macros emitted hash-aggregate order,
    which the extra user's unreleased keys change: an ε lower bound of 3.8 against a claimed 1)."""
    con = duckdb.connect(config={"threads": 2})
    duckdp.install_macros(con, seed=1)
    con.execute("CREATE TABLE d AS SELECT 'u' || i AS user_id, unnest(['A', 'B']) AS item FROM range(400) r(i)")
    con.execute("CREATE TABLE d2 AS SELECT * FROM d UNION ALL SELECT 'extra', 'B' "
                "UNION ALL SELECT 'extra', 'x' || i FROM range(50) r(i)")
    for seed in range(3):
        for tbl in ("d", "d2"):
            con.execute("SELECT setseed(?)", [seed / 10]).fetchall()
            rows = con.sql(f"SELECT item FROM duckdp_{macro}('{tbl}', 'user_id', 'item', epsilon := 1, "
                           "delta := 1e-5, max_contributions := 60)").fetchall()
            assert rows == [("A",), ("B",)], (macro, tbl, seed)


@pytest.mark.parametrize("macro", MACROS)
def test_output_is_sorted_when_rounds_release_different_keys(macro):
    """Keys k0..k19 held by a decreasing number of users straddle the thresholds, so DP-SIPS releases
    them in different rounds; the result is still sorted by key (the old DP-SIPS macro returned its
    rounds one after the other: k0, k1, k2, k5, k10, … under this seed)."""
    con = duckdb.connect(config={"threads": 2})
    duckdp.install_macros(con, seed=1)
    con.execute("CREATE TABLE e AS SELECT 'u' || i AS user_id, 'k' || j AS item FROM range(300) r(i), range(20) s(j) "
                "WHERE j <= i % 20 UNION ALL SELECT 'v' || i, 'z' || i FROM range(3000) r(i)")
    rows = [r[0] for r in con.sql(f"SELECT item FROM duckdp_{macro}('e', 'user_id', 'item', epsilon := 1, "
                                  "delta := 1e-5, max_contributions := 20)").fetchall()]
    assert len(rows) >= 10 and rows == sorted(rows)


@pytest.mark.parametrize("macro", MACROS)
def test_float_keys_are_released_in_one_form(macro):
    """Neighbour pair: D's 300 users hold the keys 0.0 and NaN; D' adds one user holding −0.0 and −NaN (equal
    keys to GROUP BY). A macro that showed its group's first row's form could release −0.0 or −NaN on D' only,
    naming the extra user; the canonical form is 0.0 and one NaN on both — here every other row is −0.0/−NaN
    too, so an uncanonicalised GROUP BY has no +0.0 row to show (the test's power). The type stays FLOAT."""
    con = duckdb.connect(config={"threads": 2})
    duckdp.install_macros(con, seed=1)
    con.execute("CREATE TABLE d AS SELECT 'u' || i AS user_id, "
                "unnest(['-0.0'::FLOAT, -'NaN'::FLOAT]) AS item FROM range(300) r(i)")
    con.execute("CREATE TABLE d2 AS SELECT * FROM d UNION ALL SELECT 'extra', unnest(['-0.0'::FLOAT, -'NaN'::FLOAT])")
    for tbl in ("d", "d2"):
        out = con.sql(f"SELECT item FROM duckdp_{macro}('{tbl}', 'user_id', 'item', epsilon := 1, delta := 1e-5, "
                      "max_contributions := 2)").to_arrow_table()
        assert str(out.schema.field("item").type) == "float"
        bits = out["item"].to_numpy().view(np.uint32).tolist()
        assert bits == [0x00000000, 0x7FC00000], (macro, tbl, [hex(b) for b in bits])


def test_canonical_key_keeps_every_other_float_bit_for_bit(mcon):
    """duckdp_canonical_key changes only −0.0 and NaNs: every other double and float (random bit patterns, both
    signs, subnormals, extremes, ±inf) comes back bit for bit, and other types pass unchanged."""
    rng = np.random.default_rng(5)
    doubles = rng.integers(0, 2**64, 20000, dtype=np.uint64).view(np.float64)
    extremes = np.array([5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, np.inf, 0.1, 1 / 3])
    doubles = np.concatenate([doubles[np.isfinite(doubles) & (doubles != 0)], extremes, -extremes])
    floats = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    floats = floats[np.isfinite(floats) & (floats != 0)]
    import pyarrow as pa
    mcon.register("d", pa.table({"x": doubles}))
    mcon.register("f", pa.table({"x": floats}))
    got = mcon.sql("SELECT duckdp_canonical_key(x) AS y FROM d").to_arrow_table()["y"].to_numpy()
    assert np.array_equal(got.view(np.uint64), doubles.view(np.uint64))
    got = mcon.sql("SELECT duckdp_canonical_key(x) AS y FROM f").to_arrow_table()["y"].to_numpy()
    assert np.array_equal(got.view(np.uint32), floats.view(np.uint32))
    assert mcon.sql("SELECT duckdp_canonical_key(42::HUGEINT), duckdp_canonical_key('A' COLLATE nocase), "
                    "duckdp_canonical_key([-0.0]), typeof(duckdp_canonical_key(1::TINYINT))").fetchall() == [
        (42, "A", [-0.0], "TINYINT")]


@pytest.mark.parametrize("collation", ["nocase", "noaccent", "nfc", "nocase.noaccent", "de", None])
def test_collated_string_keys_are_refused(collation):
    """A NOCASE column groups 'A' with 'a' and shows whichever row came first (D: users hold 'a'; D': one more
    holding 'A' might flip the released spelling). The macros refuse collated keys, and the connection's
    default_collation, by a probe of the column's type; COLLATE "binary" (the fix the error names) runs."""
    con = duckdb.connect()
    duckdp.install_macros(con, seed=1)
    if collation is None:
        con.execute("SET default_collation = 'nocase'")
    try:
        con.execute(f"CREATE TABLE t (user_id VARCHAR, item VARCHAR{' COLLATE ' + collation if collation else ''})")
        con.execute("INSERT INTO t SELECT 'u' || i, 'a' FROM range(300) r(i)")
    except duckdb.Error as exc:   # an ICU locale where the ICU extension is not loaded
        pytest.skip(str(exc))
    with pytest.raises(duckdb.Error, match="compares strings under a collation"):
        con.sql("SELECT * FROM duckdp_weighted_gaussian('t', 'user_id', 'item', epsilon := 1, "
                "delta := 1e-5)").fetchall()
    con.execute("CREATE VIEW v AS SELECT user_id, item COLLATE \"binary\" AS item FROM t")
    assert con.sql("SELECT * FROM duckdp_weighted_gaussian('v', 'user_id', 'item', epsilon := 1, "
                   "delta := 1e-5)").fetchall() == [("a", True)]


def test_delta_below_the_floor_is_refused(mcon):
    """δ below duckdp.privacy.budget.MIN_DELTA (the noise sampler's resolution) is a duckdp error."""
    from duckdp.privacy.budget import MIN_DELTA
    mcon.execute("CREATE TABLE f AS SELECT 'u' || i AS user_id, 'k' AS item FROM range(10) r(i)")
    for call in (f"duckdp_plan(epsilon := 1, delta := {MIN_DELTA / 2!r})",
                 f"duckdp_weighted_gaussian('f', 'user_id', 'item', rho := 1, delta := {MIN_DELTA / 2!r})"):
        with pytest.raises(duckdb.Error, match=re.escape(f"delta must be >= {MIN_DELTA!r}")):
            mcon.sql(f"SELECT * FROM {call}").fetchall()
    assert mcon.sql(f"SELECT count(*) FROM duckdp_plan(epsilon := 1, delta := {MIN_DELTA!r})").fetchall() == [(1,)]


def test_adaptive_sips_counts_match_expectation(mcon):
    """Single-key users give their key weight w = (number of holders) in every round whatever its
    level (x_u = 1 for d = 1), so key i is released with probability Σ_j Π_{l<j} P(a_drop·σ_l ≤ ŵ_l < T_l)
    · P(ŵ_j ≥ T_j): it continues while its noisy weight is neither released nor dropped. 20 runs,
    within 4 standard errors. Exercises the chained rounds, the drops and the per-round plan."""
    runs, a_drop = 20, -0.5
    plan = get("adaptive_sips").plan(ZCDP(0.5, 1e-3), Params(4, {"iterations": 3, "ratio": 1.0, "beta_min": 0.5,
                                                           "a_drop": a_drop, "a_full": 0.5}))
    w = np.array([3 + j % 6 for j in range(200)], dtype=float)
    p, go_on = np.zeros_like(w), np.ones_like(w)
    for r in plan:
        release = gaussian_release_probability(w, r.scale, r.threshold)
        p += go_on * release
        go_on *= 1 - release - ndtr((a_drop * r.scale - w) / r.scale)
    mcon.execute("CREATE TABLE a AS SELECT 'u' || j || '_' || m AS user_id, 'k' || j AS item "
                 "FROM range(200) r(j), LATERAL (SELECT unnest(range(3 + j % 6)) AS m)")
    total = sum(mcon.sql("SELECT count(*) FROM duckdp_adaptive_sips('a', 'user_id', 'item', rho := 0.5, "
                         "delta := 1e-3, max_contributions := 4, ratio := 1)").fetchall()[0][0] for _ in range(runs))
    mean, var = p.sum(), (p * (1 - p)).sum()
    assert 20 < mean < 180
    assert abs(total - runs * mean) <= 4 * math.sqrt(runs * var)


@pytest.mark.parametrize("args,message", [
    ("max_contributions := 1e12", "max_contributions must be an integer in [1, 1000000]"),
    ("max_contributions := 0", "max_contributions must be an integer"),
    ("max_contributions := 2.5", "max_contributions must be an integer"),
    ("iterations := 0", "iterations must be an integer"),
    ("ratio := 0", "ratio must be a finite number > 0"),
    ("ratio := 1e-300, iterations := 5", "leaves a round with no budget"),
    ("beta_min := 2", "beta_min must be in (0, 1]"),
    ("a_drop := 1, a_full := 0", "a_drop must not exceed a_full"),
    ("a_drop := 'infinity'::DOUBLE", "must be finite numbers"),
    ("truncation := 'random'", "truncation must be 'per_user' or 'global'"),
])
def test_bad_arguments_are_duckdp_errors(mcon, args, message):
    """Bad arguments fail with a duckdp error naming them (Δ0 = 1e12 gave "Lists larger than 2^32")."""
    mcon.execute("CREATE TABLE b AS SELECT 'u' || i AS user_id, 'k' AS item FROM range(10) r(i)")
    with pytest.raises(duckdb.Error, match=re.escape(message)):
        mcon.sql(f"SELECT * FROM duckdp_adaptive_sips('b', 'user_id', 'item', rho := 1, delta := 1e-5, {args})"
                 ).fetchall()
    if args.startswith("max_contributions"):      # the scalar threshold macro checks it as well
        with pytest.raises(duckdb.Error, match=re.escape(message)):
            mcon.sql(f"SELECT duckdp_gaussian_threshold(1, 1e-5, {args.split(':= ')[1]})").fetchall()
    if "a_" not in args and "beta" not in args:
        with pytest.raises(duckdb.Error, match=re.escape(message)):
            mcon.sql(f"SELECT * FROM duckdp_dpsips('b', 'user_id', 'item', rho := 1, delta := 1e-5, {args})").fetchall()


def test_adaptive_sips_rounds_equal_the_numpy_reference(mcon):
    """With the noise replaced by 0 (a recording hook) and every set within Δ0 (no truncation), the
    shell's adaptive SIPS must give tests/reference_adaptive.py's weights per round on every key
    in play (step 4: unkept keys none here) and its released keys: drops, levels β_min and the
    capped water-filled vectors of later rounds all enter."""
    from reference_adaptive import adaptive_sips as reference
    from reference_adaptive import round_weights
    rng = np.random.default_rng(5)
    m = 60
    popularity = np.linspace(3, 0.05, m)
    sets = [np.flatnonzero(rng.random(m) < popularity / popularity.sum() * rng.integers(1, 9))[:8] for _ in range(300)]
    sets = [s for s in sets if len(s)]
    params = {"iterations": 3, "ratio": 1 / 3, "beta_min": 0.4, "a_drop": 0.3, "a_full": 1.5}
    plan = get("adaptive_sips").plan(ZCDP(2.0, 1e-3), Params(8, params))
    trace: list = []
    want = reference(sets, m, plan, params, 8, rng, noise=lambda j, size: np.zeros(size), trace=trace)
    users = [u for u, s in enumerate(sets) for _ in s]
    items = [int(i) for s in sets for i in s]
    mcon.execute("CREATE TABLE r AS SELECT unnest($u) AS user_id, unnest($i) AS item", {"u": users, "i": items})
    seen: list = []

    def record(value, scale, salt, key_id):
        seen.extend(zip(scale.to_pylist(), value.to_pylist(), strict=True))
        return value

    record_noise_inputs(mcon, record)
    got = {r[0] for r in mcon.sql("SELECT item FROM duckdp_adaptive_sips('r', 'user_id', 'item', rho := 2, "
                                  "delta := 1e-3, max_contributions := 8, beta_min := 0.4, a_drop := 0.3, "
                                  "a_full := 1.5)").fetchall()}
    assert got == {int(i) for r in want for i in r}
    assert sum(len(r) > 0 for r in want) >= 2                                 # keys released in 2+ rounds
    levels = np.ones(m)                     # the reference's levels, rebuilt from its zero-noise weights
    for j, rp in enumerate(plan):
        in_play = sorted({int(i) for R in trace[j] for i in R})
        w_ref = round_weights(trace[j], levels, rp.extra.cap, m)
        levels = np.where(w_ref / rp.scale >= params["a_full"], 1.0, params["beta_min"])
        w_got = sorted(v for s, v in seen if s == pytest.approx(rp.scale, rel=1e-12))
        assert w_got == pytest.approx(sorted(w_ref[in_play]), rel=1e-12, abs=1e-12), j


def test_truncation_keeps_the_delta0_smallest_prf_keys(mcon):
    """duckdp_trunc_rank: a user over Δ0 keeps the Δ0 keys of smallest keyed PRF value; a user within
    Δ0 keeps all (no PRF needed). In a release, 30 users with 10 keys each and Δ0 = 4 give total
    weight 30·4·(1/√4) = 60 (recorded before noise)."""
    mcon.execute("CREATE TABLE tr AS SELECT 'u' || (i // 10) AS user_id, i % 10 + 100 * (i // 10) AS item "
                 "FROM range(300) r(i) UNION ALL SELECT 'small', 5000 + i FROM range(3) r(i)")
    kept = dict(mcon.sql("""SELECT user_id, list(item ORDER BY item) FROM (
            SELECT *, duckdp_trunc_rank(user_id, item, 42::UBIGINT, n, 4) AS rk
            FROM (SELECT *, count(*) OVER (PARTITION BY user_id) AS n FROM tr))
        WHERE rk <= 4 GROUP BY user_id""").fetchall())
    want = dict(mcon.sql("""SELECT user_id, list(item ORDER BY item) FROM (
            SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY duckdp_trunc_order(user_id, item, 42::UBIGINT))
              AS rk FROM tr WHERE user_id <> 'small') WHERE rk <= 4 GROUP BY user_id""").fetchall())
    assert kept.pop("small") == [5000, 5001, 5002] and kept == want and len(kept) == 30
    seen: list = []

    def record(value, scale, salt, key_id):
        seen.extend(value.to_pylist())
        return value

    record_noise_inputs(mcon, record)
    mcon.sql("SELECT * FROM duckdp_weighted_gaussian('tr', 'user_id', 'item', rho := 1, delta := 1e-5, "
             "max_contributions := 4)").fetchall()
    assert sum(seen) == pytest.approx(30 * 4 / 2 + 3 / math.sqrt(3), rel=1e-12) and len(seen) == 30 * 4 + 3


TRUNCATING_MACROS = {"weighted_gaussian": "", "count_gaussian": "", "dpsips": ", iterations := 1",
                     "adaptive_sips": ", iterations := 1", "mad": ""}


def _recorded_weights(con, macro: str, table: str, truncation: str | None, seen: list) -> list[float]:
    """The weights `macro` passes to the noise (one round) under `truncation :=` (None: the default), as
    recorded into `seen` by the hook record_noise_inputs installed; the same setseed() each time, so under the
    fixture's test key every call draws the same salts."""
    seen.clear()
    con.execute("SELECT setseed(0.25)").fetchall()
    arg = "" if truncation is None else f", truncation := '{truncation}'"
    con.sql(f"SELECT * FROM duckdp_{macro}('{table}', 'user_id', 'item', rho := 1, delta := 1e-5, "
            f"max_contributions := 4{TRUNCATING_MACROS[macro]}{arg})").fetchall()
    return sorted(seen)


@pytest.mark.parametrize("macro", list(TRUNCATING_MACROS))
def test_global_truncation_keeps_one_key_order_in_every_macro(mcon, macro):
    """truncation := 'global' (spec private-group-by.md §7): 30 users holding the same 10 keys, Δ0 = 4, all
    keep the same 4 keys, so exactly 4 keys get weight; 'per_user' (also the default, unchanged) spreads
    them over all 10. Users within Δ0 are not truncated: there both orders give the same weights."""
    mcon.execute("CREATE TABLE same AS SELECT 'u' || (i // 10) AS user_id, i % 10 AS item FROM range(300) r(i)")
    mcon.execute("CREATE TABLE small AS SELECT 'u' || (i // 3) AS user_id, (i * 7) % 20 AS item FROM range(90) r(i)")
    seen: list = []
    record_noise_inputs(mcon, lambda value, scale, salt, key_id: seen.extend(value.to_pylist()) or value)
    glob = _recorded_weights(mcon, macro, "same", "global", seen)
    per_user = _recorded_weights(mcon, macro, "same", "per_user", seen)
    assert sum(w > 0 for w in glob) == 4 and sum(w > 0 for w in per_user) == 10
    assert _recorded_weights(mcon, macro, "same", None, seen) == per_user
    small = [_recorded_weights(mcon, macro, "small", t, seen) for t in ("global", "per_user")]
    assert small[0] == small[1] and len(small[0]) > 0


def test_global_truncation_order_is_the_keyed_prf_of_the_key_alone():
    """duckdp_trunc_order(…, truncation := 'global') = PRF(salt ‖ hash(key)), whoever the user; the default
    is unchanged: PRF(salt ‖ hash(user, key))."""
    text = macro_sql(test_key=4)
    con = duckdb.connect()
    con.execute(text)
    secret = _secret_of(text)
    got = con.sql("SELECT duckdp_trunc_order('u', 'k', 9::UBIGINT, truncation := 'global'), "
                  "duckdp_trunc_order('v', 'k', 9::UBIGINT, truncation := 'global'), "
                  "duckdp_trunc_order('u', 'k', 9::UBIGINT), hash('k'), hash('u', 'k')").fetchall()[0]
    assert got[0] == got[1] == _prf(secret, f"T{9:016X}{got[3]:016X}")
    assert got[2] == _prf(secret, f"T{9:016X}{got[4]:016X}")


@pytest.mark.parametrize("macro", ["weighted_gaussian", "count_gaussian", "mad"])
def test_bad_truncation_is_refused(mcon, macro):
    mcon.execute("CREATE TABLE b AS SELECT 'u' || i AS user_id, 'k' AS item FROM range(10) r(i)")
    with pytest.raises(duckdb.Error, match="truncation must be 'per_user' or 'global'"):
        mcon.sql(f"SELECT * FROM duckdp_{macro}('b', 'user_id', 'item', rho := 1, delta := 1e-5, "
                 "truncation := 'per_key')").fetchall()


# --- max_contributions 'auto' in the shell (issue 21) -------------------------------------------

def test_auto_choose_macro_equals_python(mcon):
    """duckdp_auto_choose is auto_contributions.choose: same Δ0 on random counts, σ and draws (gaps, ties at 0)."""
    from duckdp.privacy import auto_contributions as ac
    rng = np.random.default_rng(21)
    for _ in range(300):
        counts = rng.integers(0, 60, 7) * (rng.random(7) < 0.6)
        sigma, z = float(rng.uniform(0.5, 30)), rng.standard_normal(7)
        got = mcon.execute("SELECT duckdp_auto_choose(?, ?, ?)", [counts.tolist(), sigma, z.tolist()]).fetchone()[0]
        assert got == ac.choose(counts, sigma, z), (counts, sigma, z)


def test_auto_contributions_macro_budget_and_choice(mcon):
    """50 users with 2 keys, 50 with 8: p90 = 4·4^0.8 → Δ0 = 13 at negligible noise; the estimate spends
    share·(ε|ρ, δ) with the σ of duckdp.privacy.calibration, the mechanism gets the rest (never more)."""
    from duckdp.privacy.auto_contributions import DEFAULT_SHARE as s  # the macro's default is Python's
    from duckdp.privacy.calibration import analytic_gaussian_sigma, zcdp_sigma
    mcon.execute("CREATE TABLE a AS SELECT u AS user_id, 'k' || i AS item FROM range(100) r(u), range(8) s(i) "
                 "WHERE i < CASE WHEN u < 50 THEN 2 ELSE 8 END")
    (d0, eps, rho, delta, c_eps, c_rho, c_delta, sigma, how, seeded), = mcon.sql(
        "SELECT * FROM duckdp_auto_contributions('a', 'user_id', 'item', rho := 1e6, delta := 1e-5)").fetchall()
    assert d0 == 13 and seeded and how == "zcdp" and eps is None and c_eps is None
    assert c_rho == pytest.approx(1e6 * s, rel=1e-9) and c_delta == pytest.approx(1e-5 * s, rel=1e-9)
    assert rho + c_rho <= 1e6 and delta + c_delta <= 1e-5
    assert sigma == pytest.approx(zcdp_sigma(1e6 * s), rel=1e-12)
    row = mcon.sql("SELECT * FROM duckdp_auto_contributions('a', 'user_id', 'item', epsilon := 0.05, delta := 0.05)"
                   ).fetchall()[0]                 # ε_m < ε/2 here: basic composition, as in duckdp.select
    assert row[8] == "basic" and row[1] + row[4] <= 0.05 and row[3] + row[6] <= 0.05 and row[2] is None
    assert row[7] == pytest.approx(analytic_gaussian_sigma(0.05 * s, 0.05 * s), rel=1e-9)
    # the two-step use: the mechanism with what is left
    released = mcon.sql(f"SELECT * FROM duckdp_dpsips('a', 'user_id', 'item', rho := {rho!r}, delta := {delta!r}, "
                        f"max_contributions := {d0})").fetchall()
    assert len(released) == 8                      # every key has ≥ 50 users at ρ ≈ 1e6
    with pytest.raises(duckdb.Error, match=re.escape("share must be a number in (0, 0.25]")):
        mcon.sql("SELECT * FROM duckdp_auto_contributions('a', 'user_id', 'item', rho := 1, delta := 1e-5, "
                 "share := 0.5)").fetchall()
    with pytest.raises(duckdb.Error, match="exactly one of epsilon"):
        mcon.sql("SELECT * FROM duckdp_auto_contributions('a', 'user_id', 'item', delta := 1e-5)").fetchall()


def test_auto_contributions_macro_noise_is_keyed_and_fresh(mcon):
    """Under a test key and setseed the choice is reproducible; each call draws a fresh salt (nonce), so
    two calls' noisy choices differ at a σ_a that matters."""
    mcon.execute("CREATE TABLE n AS SELECT u AS user_id, 'k' || i AS item FROM range(300) r(u), range(40) s(i) "
                 "WHERE i < 1 + u % 37")
    q = "SELECT max_contributions FROM duckdp_auto_contributions('n', 'user_id', 'item', rho := 0.0005, delta := 1e-5)"
    mcon.execute("SELECT setseed(0.25)").fetchall()
    first = [mcon.sql(q).fetchall()[0][0] for _ in range(6)]
    mcon.execute("SELECT setseed(0.25)").fetchall()
    assert [mcon.sql(q).fetchall()[0][0] for _ in range(6)] == first
    assert len(set(first)) > 1


@pytest.mark.parametrize("epsilon, delta, share", [(1.0, 1e-5, 0.01), (3.0, 1e-6, 0.1), (0.3, 1e-8, 0.25)])
def test_auto_contributions_macro_gdp_split_is_python_and_admitted(mcon, epsilon, delta, share):
    """(ε, δ): the macro's split is duckdp.select's exact Gaussian-DP split (σ_a and ε_m to 1e-8), and the
    repo's accountant admits the estimate composed with a shell mechanism run at the (ε_m, δ_m) it returns."""
    from duckdp.privacy import accounting
    from duckdp.privacy import auto_contributions as ac
    from duckdp.privacy.accountant import curves
    from duckdp.privacy.events import ComposedEvent, GaussianEvent
    mcon.execute("CREATE TABLE g AS SELECT u AS user_id, 'k' || (u % 7) AS item FROM range(50) r(u)")
    _, eps_m, _, delta_m, _, _, _, sigma, how, _ = mcon.sql(
        f"SELECT * FROM duckdp_auto_contributions('g', 'user_id', 'item', epsilon := {epsilon}, delta := {delta}, "
        f"share := {share})").fetchall()[0]
    mech = get("dpsips")
    settings = mech.check_params({})
    auto, _ = ac.plan(EpsDelta(epsilon, delta), share, lambda b, d: mech.plan(b, Params(d, settings)))
    assert how == auto.composition == "gdp"
    assert sigma == pytest.approx(auto.sigma, rel=1e-8) and sigma >= auto.sigma * (1 - 1e-9)
    assert eps_m == pytest.approx(auto.mechanism().epsilon, rel=1e-8) and delta_m <= auto.mechanism().delta
    rounds = [r.event for r in mech.plan(EpsDelta(eps_m, delta_m), Params(100, settings))]
    events = curves(ComposedEvent((GaussianEvent(1 / sigma, 0.0), *rounds)))
    assert accounting.admits(events, epsilon, delta)

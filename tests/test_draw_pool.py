"""Exact draws on worker processes (duckdp/draw_pool.py): the same array as the sampler in this process, whatever
the number of workers, a worker that dies, or a key set split into many requests; workers end with the pool."""
from __future__ import annotations

import duckdb
import numpy as np
import pytest

import duckdp
from duckdp import draw_pool
from duckdp.discrete import discrete_gaussian_array, thresholded_array
from duckdp.draw_pool import DrawPool
from duckdp.prf import PRFKey


def _counters(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(-2**63, 2**63, n, dtype=np.int64), rng.integers(-2**63, 2**63, n, dtype=np.int64)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_pool_draws_the_same_array(monkeypatch, workers):
    """Many small requests (TASK = 7 keys) over 1–3 workers, two σ in a row on the same workers: equal draw by draw
    to discrete_gaussian_array in this process. With 2–3 workers the sampler here is broken meanwhile, so the draws
    are the workers' (not this process's fallback)."""
    monkeypatch.setattr(draw_pool, "MIN_PARALLEL", 10)
    monkeypatch.setattr(draw_pool, "TASK", 7)
    key = PRFKey.from_seed(9).derive(b"aggm", 2)
    hi, lo = _counters(101)
    expected = {sigma: discrete_gaussian_array(key, hi, lo, sigma) for sigma in (3.5, 1234.5)}
    if workers > 1:
        monkeypatch.setattr(draw_pool, "discrete_gaussian_array", None)
    with DrawPool(workers) as pool:
        for sigma in (3.5, 1234.5):
            assert np.array_equal(pool.draw(key, hi, lo, sigma), expected[sigma])
        assert len(pool._all) == (workers if workers > 1 else 0)      # 101 keys: one worker per 10 asked for
        procs = [w.proc for w in pool._all]
    assert all(p.poll() is not None for p in procs)          # closed with the pool


@pytest.mark.parametrize("workers", [1, 2])
def test_pool_draws_the_same_thresholded_array(monkeypatch, workers):
    """keys="threshold"'s requests (floors travel with the counters): equal to thresholded_array here, then a plain
    request on the same workers; with 2 workers the in-process versions are broken meanwhile."""
    monkeypatch.setattr(draw_pool, "MIN_PARALLEL", 10)
    monkeypatch.setattr(draw_pool, "TASK", 7)
    key = PRFKey.from_seed(8)
    hi, lo = _counters(90, seed=3)
    floors = np.random.default_rng(5).integers(-10, 40, hi.size)
    expected = thresholded_array(key, hi, lo, 9.13, floors)
    plain = discrete_gaussian_array(key, hi, lo, 9.13)
    if workers > 1:
        monkeypatch.setattr(draw_pool, "thresholded_array", None)
        monkeypatch.setattr(draw_pool, "discrete_gaussian_array", None)
    with DrawPool(workers) as pool:
        assert np.array_equal(pool.draw(key, hi, lo, 9.13, floors), expected)
        assert np.array_equal(pool.draw(key, hi, lo, 9.13), plain)
        assert len(pool._all) == (workers if workers > 1 else 0)


def test_workers_start_as_the_draws_need_them(monkeypatch):
    """One worker per MIN_PARALLEL draws asked for, up to `workers`: 25 keys start 3 of 8, 80 keys all 8."""
    monkeypatch.setattr(draw_pool, "MIN_PARALLEL", 10)
    monkeypatch.setattr(draw_pool, "TASK", 4)
    key = PRFKey.from_seed(6)
    with DrawPool(8) as pool:
        for n, started in ((25, 3), (12, 3), (80, 8)):
            hi, lo = _counters(n, seed=n)
            assert np.array_equal(pool.draw(key, hi, lo, 2.5), discrete_gaussian_array(key, hi, lo, 2.5))
            assert len(pool._all) == started


def test_a_dead_worker_costs_no_draw(monkeypatch):
    """A worker killed between requests: its next request is drawn in this process, the array is unchanged."""
    monkeypatch.setattr(draw_pool, "MIN_PARALLEL", 10)
    monkeypatch.setattr(draw_pool, "TASK", 5)
    key = PRFKey.from_seed(4)
    hi, lo = _counters(60, seed=2)
    expected = discrete_gaussian_array(key, hi, lo, 40.0)
    with DrawPool(2) as pool:
        assert np.array_equal(pool.draw(key, hi, lo, 40.0), expected)
        pool._all[0].proc.kill()
        pool._all[0].proc.wait()
        assert np.array_equal(pool.draw(key, hi, lo, 40.0), expected)


@pytest.mark.parametrize("executable,frozen", [("/usr/bin/uwsgi", False), ("/opt/app/myapp", True), ("", False)])
def test_no_workers_where_the_executable_is_no_interpreter(monkeypatch, executable, frozen):
    """An embedding server's binary, a frozen application (PyInstaller sets sys.frozen) or no executable: nothing is
    started (running it with -c could start the application again); the draws are made here, the same."""
    monkeypatch.setattr(draw_pool, "MIN_PARALLEL", 1)
    monkeypatch.setattr(draw_pool.sys, "executable", executable)
    if frozen:
        monkeypatch.setattr(draw_pool.sys, "frozen", True, raising=False)
    monkeypatch.setattr(draw_pool.subprocess, "Popen", None)          # any start would fail loudly
    key, (hi, lo) = PRFKey.from_seed(2), _counters(30, seed=5)
    with DrawPool(4) as pool:
        assert pool.workers == 1
        assert np.array_equal(pool.draw(key, hi, lo, 5.0), discrete_gaussian_array(key, hi, lo, 5.0))


def test_a_bad_sigma_fails_as_without_workers(monkeypatch):
    monkeypatch.setattr(draw_pool, "MIN_PARALLEL", 1)
    with DrawPool(2) as pool, pytest.raises(ValueError, match="sigma"):
        pool.draw(PRFKey.from_seed(1), np.zeros(3, np.int64), np.arange(3, dtype=np.int64), float("nan"))


@pytest.mark.parametrize("keys", ["threshold", "public"])
def test_aggregate_releases_the_same_on_any_number_of_threads(monkeypatch, keys):
    """A seeded aggregate on 1 and 2 DuckDB threads (1 and 2 draw workers, every draw of ≥ 8 keys on them): the same
    table, for keys="threshold" (the rule's draws) and a public key set (the measures' draws)."""
    monkeypatch.setattr(draw_pool, "MIN_PARALLEL", 8)
    monkeypatch.setattr(draw_pool, "TASK", 16)
    rng = np.random.default_rng(3)
    users = rng.integers(0, 400, 6000)
    items = (rng.zipf(1.4, 6000) % 300).astype(np.int64)
    import pyarrow as pa
    table = pa.table({"user_id": users, "item": items, "v": rng.uniform(0, 5, 6000)})
    public = list(range(250)) if keys == "public" else "threshold"
    outs = []
    for threads in (1, 2):
        con = duckdb.connect(config={"threads": threads})
        outs.append(duckdp.aggregate(con, table, by="item", keys=public, rho=1.0, delta=1e-6, max_contributions=20,
                                     metrics={"n": "users", "s": ("sum", "v", 0, 5)}, seed=11).to_arrow())
    assert outs[0].num_rows > 10 and outs[0].equals(outs[1])

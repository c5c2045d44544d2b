"""Import cost (benchmarks/RESULTS.md "import cost (stop 31)"): `import duckdp` and what Spark's Python workers
import to run duckdp's UDFs load no planning code — no scipy, dp_accounting, DuckDB or mechanism — while the
public names stay those of an eager import. Each check runs in a fresh interpreter (this one has loaded all)."""
from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

import duckdp
from duckdp.aggregate_noise import NOISY_USERS, Threshold
from duckdp.rng import Randomness

ROOT = Path(__file__).resolve().parents[1]
# modules a worker never needs: the planning stack (scipy, dp_accounting), the DuckDB engine, the mechanisms
HEAVY = ("scipy", "dp_accounting", "matplotlib", "duckdb", "duckdp.mechanisms", "duckdp.group_by", "duckdp.api")


def _loaded(code: str, stdin: bytes = b"") -> list[str]:
    """The HEAVY modules a fresh interpreter has loaded after running `code` (this checkout first on its path)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    probe = f"{code}\nimport sys\nprint(sorted({{m.split('.')[0] if m.startswith(('scipy.', 'duckdb.')) else m " \
            f"for m in sys.modules}} & set({HEAVY!r})))"
    out = subprocess.run([sys.executable, "-c", probe], input=stdin, capture_output=True, check=True, cwd=ROOT, env=env)
    return ast.literal_eval(out.stdout.decode().strip().splitlines()[-1])


def test_import_duckdp_loads_no_planning_code():
    assert _loaded("import duckdp") == []


def test_spark_noise_udf_modules_load_no_planning_code():
    """The select noise UDF (duckdp/spark/noise.py `noised`) runs `standard` with the release's Randomness."""
    assert _loaded("import duckdp.spark.noise, duckdp.rng") == []


def test_threshold_rule_unpickled_on_a_worker_loads_no_planning_code():
    """keys="threshold" on Spark ships the `Threshold` rule to the executors; pickle (as Spark's cloudpickle does
    for a class of an importable module) stores the class by reference, so a worker imports its module. Unpickled
    and run in a fresh interpreter, it draws what it draws here and loads none of HEAVY."""
    rule = Threshold(sigma=3.0, threshold=4.5, randomness=Randomness(seed=7), tag=5)
    batch = pa.RecordBatch.from_pydict({"_dp_chi": pa.array([0, 0, -1, 0], pa.int64()),
                                        "_dp_clo": pa.array([1, 2, -5, 2], pa.int64()),
                                        "_dp_c": pa.array([1, 6, 3, 9], pa.int64()),
                                        "_dp_rank": pa.array([0, 0, 0, 1], pa.int64())})
    payload = pickle.dumps((rule, batch))
    code = ("import pickle, sys\nrule, batch = pickle.loads(sys.stdin.buffer.read())\n"
            f"print(rule(batch).column({NOISY_USERS!r}).to_pylist())")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, check=True, cwd=ROOT,
                         env=env)
    assert ast.literal_eval(out.stdout.decode()) == rule(batch).column(NOISY_USERS).to_pylist()
    assert _loaded(code, payload) == []


def test_laplace_draw_needs_no_scipy_and_gaussian_loads_it_on_use():
    """prf's Φ⁻¹ (scipy.special.ndtri) is imported where a Gaussian is drawn, not with the module."""
    draw = ("import numpy as np\nfrom duckdp.rng import Randomness\n"
            "Randomness(seed=1).noise('{}', 0, np.zeros(3, np.uint64), np.arange(3, dtype=np.uint64))")
    assert _loaded(draw.format("laplace")) == []
    assert _loaded(draw.format("gaussian")) == ["scipy"]
    z = Randomness(seed=1).noise("gaussian", 0, np.zeros(3, np.uint64), np.arange(3, dtype=np.uint64))
    assert np.isfinite(z).all()


def test_public_names_are_those_of_an_eager_import():
    """Every name of `__all__` resolves (dir() lists it), and the three functions named like their submodule
    (count_release, evaluate, explain) stay functions after the submodule is imported."""
    from duckdp.count_release import count_release
    from duckdp.evaluate import evaluate
    from duckdp.explain import explain

    assert set(duckdp.__all__) <= set(dir(duckdp))
    assert all(getattr(duckdp, name) is not None for name in duckdp.__all__)
    assert (duckdp.count_release, duckdp.evaluate, duckdp.explain) == (count_release, evaluate, explain)
    code = ("import duckdp.explain, duckdp.evaluate, duckdp.count_release\nimport duckdp\n"
            "assert all(callable(f) and f.__module__ == 'duckdp.' + f.__name__\n"
            "           for f in (duckdp.explain, duckdp.evaluate, duckdp.count_release))")
    _loaded(code)                                   # check=True: an assertion error there fails here


def test_submodules_load_on_attribute_access():
    """`import duckdp` then `duckdp.mechanisms.get(...)`, `duckdp.datasets...`, `duckdp.privacy...` work as after
    the eager import (benchmarks/bench_large.py broke on `duckdp.mechanisms` when names turned lazy); a name that
    is neither public nor a submodule is an AttributeError."""
    code = ("import duckdp\nassert duckdp.mechanisms.get('dpsips') is not None\n"
            "assert callable(duckdp.datasets.create_synthetic) and duckdp.privacy.accounting is not None\n"
            "try:\n    duckdp.no_such_thing\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(1)\n"
            "assert not hasattr(duckdp, '_no_such')")
    _loaded(code)                                   # check=True: a failure there fails here

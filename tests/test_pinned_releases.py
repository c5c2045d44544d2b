"""Seeded releases stay bit-identical: every mechanism and count release against tests/pinned_releases.json.

The pins were written by benchmarks/pin_releases.py (its docstring says when to regenerate); a refactor
that changes any released key, count, round σ/threshold or noisy count fails here.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("pin_releases", ROOT / "benchmarks" / "pin_releases.py")
assert _spec is not None and _spec.loader is not None
pin_releases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pin_releases)

PINS = json.loads(pin_releases.PIN_FILE.read_text())
CASES = [(f"{name}[{key_type}]", key_type, algo, kwargs)
         for key_type in pin_releases.KEY_TYPES for name, algo, kwargs in pin_releases.cases()]


@pytest.fixture(scope="module")
def tables():
    con = duckdb.connect()
    yield con, pin_releases.make_tables(con)
    con.close()


def test_every_case_is_pinned():
    """A new mechanism (or budget kind) needs a pin: regenerate with benchmarks/pin_releases.py."""
    assert sorted(PINS) == sorted(case for case, *_ in CASES)


@pytest.mark.parametrize("case,key_type,algo,kwargs", CASES, ids=[c[0] for c in CASES])
def test_seeded_release_is_pinned(tables, case, key_type, algo, kwargs):
    con, names = tables
    got = pin_releases.pin_entry(pin_releases.run_case(con, names[key_type], algo, kwargs))
    assert got == PINS[case]

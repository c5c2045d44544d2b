"""Golden rendered SQL (tests/golden_sql/): every template each mechanism renders, as committed.

A template or stage edit changes a rendering and fails here until `python tests/golden_sql/regenerate.py`
rewrites the files, so the change shows in review as a diff of the SQL DuckDB actually runs.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden_sql"
_spec = importlib.util.spec_from_file_location("golden_regenerate", GOLDEN / "regenerate.py")
assert _spec is not None and _spec.loader is not None
regenerate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regenerate)

CASES = sorted(regenerate.cases())
HINT = "rendered SQL changed: review it, then run `PYTHONPATH=. python tests/golden_sql/regenerate.py`"


def test_every_case_has_a_folder():
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir() and p.name != "__pycache__") == CASES, HINT


@pytest.mark.parametrize("case", CASES)
def test_rendered_sql_is_golden(case):
    rendered = regenerate.render_case(case)
    stored = {p.name: p.read_text(encoding="utf-8") for p in (GOLDEN / case).glob("*.sql")}
    assert sorted(rendered) == sorted(stored), HINT
    for name, text in rendered.items():
        assert text == stored[name], f"{case}/{name}: {HINT}"

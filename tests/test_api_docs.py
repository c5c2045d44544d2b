"""The API reference (docs/, issue #19 item 6): every mechanism has its paper-symbol table, and the
Sphinx build passes with warnings as errors (slow tests, where Sphinx is installed: `pip install '.[docs]'`)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import duckdp

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_spec = importlib.util.spec_from_file_location("mechanism_table", DOCS / "_ext" / "mechanism_table.py")
assert _spec is not None and _spec.loader is not None
table_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table_module)
SYMBOLS, load, problems = table_module.SYMBOLS, table_module.load, table_module.problems
example_kwargs = table_module.example_kwargs


def test_symbol_table_covers_every_registered_mechanism_and_parameter():
    assert problems(duckdp.algorithms(), load(str(DOCS / SYMBOLS))) == []


def test_symbol_table_check_finds_gaps():
    infos, table = duckdp.algorithms(), load(str(DOCS / SYMBOLS))
    del table["gw"]
    del table["dpsips"]["symbols"]["ratio"]
    table["mad"]["symbols"]["no_such_param"] = ["x", "stale"]
    table["retired_mechanism"] = {"assumptions": ["x"], "refuses": []}
    del table["weighted_laplace"]["refuses"]
    found = "\n".join(problems(infos, table))
    for needle in ("'gw' has no entry", "[dpsips]: parameter 'ratio'", "'no_such_param' is not a parameter of mad",
                   "[retired_mechanism]: no registered mechanism", "[weighted_laplace]: no 'refuses'"):
        assert needle in found


@pytest.mark.parametrize("info", duckdp.algorithms(), ids=lambda i: i["name"])
def test_each_mechanism_page_example_runs(con, info):
    con.execute("CREATE TABLE reviews AS SELECT u AS user_id, 'w' || ((u * 7 + i) % 30) AS item "
                "FROM range(300) t(u), range(4) s(i)")
    kwargs = example_kwargs(info, duckdp.mechanisms.get(info["name"]))
    release = duckdp.select(con, "reviews", seed=1, **kwargs)
    assert release.algo == info["name"]


def _build(src_root: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           str(src_root / "docs"), str(out)], capture_output=True, text=True, env=env, timeout=300)


def _copy_docs(tmp_path: Path) -> Path:
    shutil.copytree(DOCS, tmp_path / "docs", ignore=shutil.ignore_patterns("_build", "mechanisms"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")     # the user guide page includes it
    return tmp_path


@pytest.mark.slow      # a full Sphinx build (~5 s); .ci/run installs the docs extra before the slow suite
def test_docs_build_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    src = _copy_docs(tmp_path / "src")
    result = _build(src, tmp_path / "html")
    assert result.returncode == 0, result.stderr
    pages = {p.stem for p in (tmp_path / "html" / "mechanisms").glob("*.html")}
    assert pages == {m["name"] for m in duckdp.algorithms()} | {"index"}
    dpsips = (tmp_path / "html" / "mechanisms" / "dpsips.html").read_text(encoding="utf-8")
    assert "budget allocation factor" in dpsips and "Swanberg" in dpsips


@pytest.mark.slow
def test_docs_build_fails_without_a_symbol_table(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    src = _copy_docs(tmp_path / "src")
    toml = src / "docs" / SYMBOLS
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text[:text.index("[gw]")] + text[text.index("[truncated_geometric]"):], encoding="utf-8")
    result = _build(src, tmp_path / "html")
    assert result.returncode != 0
    assert "'gw' has no entry" in result.stderr

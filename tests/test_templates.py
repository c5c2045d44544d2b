"""Every shipped template: header matches holes and parameters, systematic names, no stale references."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from duckdp.templates import load, template_files

ROOT = Path(__file__).resolve().parents[1]
FILES = template_files()          # sql/ and every mechanism folder's sql/
TEMPLATES = sorted(name for name in FILES if name != "macros")   # macros.sql: shell file
# `stage_*` for shared stages, `noise_*` for the noise + threshold stage (duckdp/noise_stage.py),
# `<algo>_<stage>` otherwise.
PREFIXES = ("stage_", "noise_", "dpsips_", "adaptive_sips_", "mad_", "mad2r_", "policy_", "gw_", "pcr_",
            "evaluate_", "agg_")
SINGLES = {"truncated_geometric"}


@pytest.mark.parametrize("name", TEMPLATES)
def test_header_declares_exactly_the_holes_and_params(name):
    text = FILES[name].read_text(encoding="utf-8")
    assert re.search(r"^-- idents:", text, re.MULTILINE) and re.search(r"^-- params:", text, re.MULTILINE), name
    t = load(name)          # raises if declared and used idents/params differ
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    assert set(re.findall(r"\{([a-z_][a-z0-9_]*)\}", body)) == t.idents
    assert set(re.findall(r"\$([a-z_][a-z0-9_]*)", body)) == t.params


@pytest.mark.parametrize("name", TEMPLATES)
def test_systematic_name(name):
    assert name in SINGLES or name.startswith(PREFIXES), name


def test_every_template_is_used_and_every_reference_exists():
    code = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "duckdp").rglob("*.py"))
    used = set(re.findall(r'"([a-z0-9_]+)"', code))
    assert [n for n in TEMPLATES if n not in used] == []
    sql_texts = [p.read_text(encoding="utf-8") for p in FILES.values()]
    referenced = {m for t in sql_texts for m in re.findall(r"\b([a-z0-9_]+)\.sql\b", t)}
    # in Python, `x.sql` is also an attribute: count `sql/name.sql` and bracketed `[name.sql…]` references
    referenced |= set(re.findall(r"(?:sql/|\s\[)([a-z0-9_]+)\.sql\b", code))
    referenced.discard("duckdp")      # `duckdp macros > duckdp.sql`: the printed shell file
    assert sorted(r for r in referenced if r not in FILES) == []


def test_truncation_window_is_written_once():
    """The truncation order (each user's Δ0 pairs first in the keyed hash, ties on the key) lives in one
    window template, its keyed hash in one fragment that every stage ordering pairs as a truncation will
    fills in (DuckDBStages.truncation_order: MAD2R's and adaptive SIPS's lazy candidates). sql/macros.sql
    (the shell file) aside."""
    window = re.compile(r"row_number\(\)\s+OVER\s*\(\s*PARTITION\s+BY\s+_dp_user\s+ORDER\s+BY\s+"
                        r"(hash\(xor\(hash\(|row\(\{order\})", re.IGNORECASE)
    found = {name: len(window.findall(load(name).text)) for name in TEMPLATES}
    assert {name: n for name, n in found.items() if n} == {"stage_truncate_window": 1}
    keyed = {name for name in TEMPLATES if "hash(xor(hash({hashed}), $trunc_salt))" in load(name).text}
    assert keyed == {"stage_truncation_order"}

"""Cited specifications ship with the repository (issue #14 item 13)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for d in ("duckdp", "sql", "tests", "benchmarks", "notebooks") for p in (ROOT / d).rglob("*")
           if p.suffix in (".py", ".sql", ".md", ".ipynb")] + [ROOT / "README.md"]


def test_every_spec_citation_points_into_docs_specs():
    cited = {}
    for path in SOURCES:
        for m in re.finditer(r"([\w./-]*)specs/([\w-]+\.md)", path.read_text(encoding="utf-8")):
            cited.setdefault((m.group(1), m.group(2)), []).append(path.relative_to(ROOT))
    assert cited, "no spec citations found"
    for (prefix, name), where in cited.items():
        assert prefix.endswith("docs/"), f"{where}: cite docs/specs/{name}, not {prefix}specs/{name}"
        assert (ROOT / "docs" / "specs" / name).is_file(), f"{where}: docs/specs/{name} is not in the repository"
    assert {"mad-mad2r.md", "adaptive-sips.md"} <= {p.name for p in (ROOT / "docs" / "specs").glob("*.md")}

"""SQL templates: loading from the shipped `sql/` folder and the mechanism folders, identifier quoting,
checked rendering.

Generic stages' templates sit in `sql/` (shipped as `duckdp/sql`); a mechanism family's own templates
sit in its folder, `duckdp/mechanisms/<family>/sql/`. Template names are unique across all of them.

Templates hold two kinds of holes: `{name}` for identifiers and SQL fragments that duckdp builds
itself from catalog-checked, quoted names, and `$name` for values, which are always bound.
Each template declares both sets in header comments (`-- idents: …`, `-- params: …`); rendering
fails if the declared, supplied and used names disagree.
"""
from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path

_IDENT_HOLE = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")


def quote_ident(name: str) -> str:
    """Quote an identifier for DuckDB: wrap in double quotes, double embedded quotes."""
    if not isinstance(name, str) or name == "" or "\x00" in name:
        raise ValueError(f"not a valid identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def sql_dir() -> Path:
    """Folder of the shipped .sql files: inside the installed package, or the source checkout."""
    packaged = resources.files("duckdp") / "sql"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "sql"


def template_files() -> dict[str, Path]:
    """Every shipped template by name (`sql/` and each mechanism folder's `sql/`), macros.sql included."""
    mechanisms = Path(str(resources.files("duckdp") / "mechanisms"))
    files: dict[str, Path] = {}
    for folder in [sql_dir(), *sorted(mechanisms.glob("*/sql"))]:
        for path in sorted(folder.glob("*.sql")):
            if path.stem in files:
                raise RuntimeError(f"template {path.stem} exists twice: {files[path.stem]} and {path}")
            files[path.stem] = path
    return files


class Template:
    """One parsed .sql template with its declared identifier holes and bound parameters."""

    def __init__(self, name: str, text: str):
        self.name = name
        self.text = text
        self.idents = self._declared("idents")
        self.params = self._declared("params")
        used_idents = set(_IDENT_HOLE.findall(text))
        used_params = set(_PARAM.findall(self._body()))
        if used_idents != self.idents or used_params != self.params:
            raise RuntimeError(
                f"template {name}: declared idents {sorted(self.idents)} / params {sorted(self.params)} "
                f"but uses {sorted(used_idents)} / {sorted(used_params)}")

    def _declared(self, kind: str) -> set[str]:
        m = re.search(rf"^-- {kind}:(.*)$", self.text, re.M)
        return {p.strip() for p in m.group(1).split(",") if p.strip()} if m else set()

    def _body(self) -> str:
        return "\n".join(line for line in self.text.splitlines() if not line.lstrip().startswith("--"))

    def render(self, idents: dict[str, str], params: dict) -> tuple[str, dict]:
        """SQL text with identifier holes filled, and the bound values it needs.

        A hole may hold another rendered template; the supplied params must then be exactly the
        union of both templates' params.
        """
        if set(idents) != self.idents:
            raise RuntimeError(f"template {self.name}: idents {sorted(idents)} != {sorted(self.idents)}")
        sql = _IDENT_HOLE.sub(lambda m: idents[m.group(1)], self._body())
        used = set(_PARAM.findall(sql))   # its own $params plus those of filled-in sub-templates
        if not self.params <= set(params) or set(params) != used:
            raise RuntimeError(f"template {self.name}: params {sorted(params)} but the SQL uses {sorted(used)}")
        return sql, dict(params)


@cache
def load(name: str) -> Template:
    """The template `<name>.sql` from `sql/` or a mechanism folder."""
    return Template(name, _files()[name].read_text(encoding="utf-8"))


@cache
def _files() -> dict[str, Path]:
    return template_files()

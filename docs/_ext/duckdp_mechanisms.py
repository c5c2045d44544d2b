"""Sphinx extension: one page per registered mechanism, written at build time from duckdp's registry.

Each page combines what the mechanism declares (`duckdp.algorithms()`: name, aliases, budgets,
citation, summary, status, parameters with default and doc; `duckdp.mechanisms.get(name)` for whether
it truncates users to Δ0 keys, and the object whose class and module docstrings are shown verbatim)
with its hand-written entry in docs/mechanism_symbols.toml: each parameter's symbol in the paper, the
assumptions and what the mechanism refuses. Only the public registry is read, so moving mechanism
modules does not touch the docs. A registered mechanism without
an entry, a parameter without a symbol, or an entry for a parameter or mechanism that no longer exists
is a Sphinx warning, so the CI build (`-W`) fails until the table is written.

It also makes plain-text docstrings safe for reST: `|x|` (a norm or a count in the math prose) would
otherwise be read as a substitution reference.
"""
from __future__ import annotations

import inspect
import os
import re
import sys
from typing import Any

from mechanism_table import COMMON, SYMBOLS, example_kwargs, load, problems
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

PAGES = "mechanisms"                    # generated folder under docs/ (ignored by git)


def _cell(text: Any) -> str:
    """A Markdown table cell: no line breaks, `|` escaped."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def _code(value: Any) -> str:
    return "derived" if value is None else f"`{value!r}`"


def _refusals(info: dict, mech: Any, entry: dict) -> list[str]:
    """What the registry itself implies, then the hand-written refusals."""
    out = []
    budgets = info.get("budgets", [])
    if "rho/delta" not in budgets:
        out.append("a zCDP budget (`rho=`): it takes `epsilon=` and `delta=` only.")
    if "epsilon/delta" not in budgets:
        out.append("an (ε, δ) budget (`epsilon=`): it takes `rho=` and `delta=` only.")
    if info.get("unproven"):
        out.append("running at all without `allow_unproven=True`: its privacy is not established (see Status).")
    if getattr(mech, "truncates", True) is False:
        out.append("`max_contributions='auto'`: it does not bound users to Δ0 keys.")
    out.append("δ below `duckdp.privacy.budget.MIN_DELTA` = 2⁻³² ≈ 2.33e-10, and unknown parameter names "
               "(typos are errors, not ignored).")
    return out + list(entry.get("refuses", []))


def _page(info: dict, mech: Any, entry: dict, common: dict) -> str:
    name = info["name"]
    lines = [f"# `{name}`", "", info.get("summary", ""), ""]
    aliases = ", ".join(f"`{a}`" for a in info.get("aliases", [])) or "none"
    budgets = {"epsilon/delta": "(ε, δ)-DP: `epsilon=`, `delta=`",
               "rho/delta": "δ-approximate ρ-zCDP: `rho=`, `delta=`"}
    status = (f"**privacy not established** — {info['unproven']}" if info.get("unproven")
              else "privacy argument: see the citation")
    lines += ["| | |", "|---|---|",
              f"| algo | `{name}` (aliases: {aliases}) |",
              f"| budgets | {_cell('; '.join(budgets.get(b, b) for b in info.get('budgets', [])))} |",
              f"| citation | {_cell(info.get('citation', ''))} |",
              f"| status | {_cell(status)} |", ""]
    if entry.get("paper"):
        lines += [f"Paper: {entry['paper']}", ""]

    params = info.get("params", {})
    lines += ["## Parameters", ""]
    if params:
        lines += ["Keyword arguments of `duckdp.select` (CLI: `--param name=value`); `None` or omitted "
                  "gives the default.", "", "| parameter | default | meaning |", "|---|---|---|"]
        lines += [f"| `{p}` | {_code(d.get('default'))} | {_cell(d.get('doc', ''))} |" for p, d in params.items()]
    else:
        lines += ["No parameters beyond the budget and `max_contributions`."]
    lines += [""]

    budgets_taken = info.get("budgets", [])
    takes = {"epsilon": "epsilon/delta" in budgets_taken, "rho": "rho/delta" in budgets_taken}
    truncates = getattr(mech, "truncates", True) is not False
    symbols = {**{p: common[p] for p in COMMON if p in common and takes.get(p, True)}, **entry.get("symbols", {})}
    if not truncates and "max_contributions" in symbols:
        symbols["max_contributions"] = ["—", f"not used: {name} does not bound users to Δ0 keys"]
    lines += ["## Paper symbols", "", "| parameter | symbol | in the paper |", "|---|---|---|"]
    lines += [f"| `{p}` | {_cell(s[0])} | {_cell(s[1])} |" for p, s in symbols.items()]
    for sym, meaning in entry.get("derived", {}).items():
        lines += [f"| (derived) | {_cell(sym)} | {_cell(meaning)} |"]
    lines += ["", "## Assumptions", ""]
    lines += [f"- {a}" for a in entry.get("assumptions", [])]
    lines += ["", "## Refuses", ""]
    lines += [f"- {r}" for r in _refusals(info, mech, entry)]
    args = ", ".join(f"{k}={v!r}" for k, v in example_kwargs(info, mech).items())
    lines += _source_notes(type(mech))
    lines += ["", "## Example", "", "```python", f"release = duckdp.select(con, \"reviews\", {args})",
              "```", ""]
    return "\n".join(lines)


def _preformatted(text: str) -> list[str]:
    fence = "~" * max(3, 1 + max((len(r) for r in re.findall(r"~{3,}", text)), default=0))
    return [fence + "text", text, fence]


def _source_notes(cls: type) -> list[str]:
    """The module's and the class's own docstrings, verbatim: they hold the privacy argument and the
    deviations from the paper, written as plain text (indented lists, math), not reST."""
    module_doc = inspect.getdoc(sys.modules[cls.__module__])
    class_doc = inspect.getdoc(cls) if cls.__dict__.get("__doc__") else None
    if not module_doc and not class_doc:
        return []
    lines = ["", "## Implementation notes", "",
             f"From the source, verbatim: the docstring of `{cls.__module__}` (shared by the mechanisms it defines)"
             + (f" and of `{cls.__qualname__}`" if class_doc else "") + ".",
             ""]
    for doc in (module_doc, class_doc):
        if doc:
            lines += _preformatted(doc) + [""]
    return lines


def _index(infos: list[dict]) -> str:
    lines = ["# Mechanisms", "",
             "One page per mechanism of `duckdp.algorithms()`, generated when the docs are built: what the "
             "registry declares, each parameter's symbol in the paper, the assumptions and the refusals. "
             "Every mechanism runs on DuckDB; the Spark engine runs all but the sequential policies.", "",
             "| algo | budgets | summary |", "|---|---|---|"]
    lines += [f"| [`{i['name']}`]({i['name']}.md) | {_cell(', '.join(i.get('budgets', [])))} | "
              f"{_cell(i.get('summary', ''))} |" for i in infos]
    lines += ["", "```{toctree}", ":hidden:", ""] + [i["name"] for i in infos] + ["```", ""]
    return "\n".join(lines)


def _write(path: str, text: str) -> None:
    """Write only on change, so Sphinx rebuilds only pages whose content moved."""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_pages(app: Sphinx) -> None:
    import duckdp
    from duckdp import mechanisms

    src = str(app.srcdir)
    table = load(os.path.join(src, SYMBOLS))
    common = table.pop("common", {})
    infos = duckdp.algorithms()
    names = {i["name"] for i in infos}
    for problem in problems(infos, table):
        logger.warning(problem)
    out = os.path.join(src, PAGES)
    os.makedirs(out, exist_ok=True)
    for info in infos:
        _write(os.path.join(out, f"{info['name']}.md"),
               _page(info, mechanisms.get(info["name"]), table.get(info["name"], {}), common))
    _write(os.path.join(out, "index.md"), _index(infos))
    for f in os.listdir(out):                   # pages of mechanisms that left the registry
        if f.endswith(".md") and f != "index.md" and f[:-3] not in names:
            os.remove(os.path.join(out, f))


_CODE = re.compile(r"(``.*?``|`[^`]*`)")


def escape_bars(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Escape `|` outside code spans: docstrings write |W| for sizes and norms, not substitutions."""
    for i, line in enumerate(lines):
        if "|" in line:
            lines[i] = "".join(part if _CODE.fullmatch(part) else part.replace("|", "\\|")
                               for part in _CODE.split(line))


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", write_pages)
    app.connect("autodoc-process-docstring", escape_bars)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

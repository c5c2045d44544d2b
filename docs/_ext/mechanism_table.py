"""The hand-written half of the mechanism pages (docs/mechanism_symbols.toml) and its completeness check.

Kept free of Sphinx so the fast test suite can check it (tests/test_docs.py) without building the docs.
"""
from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:                                   # Python 3.10: the same parser from PyPI (docs and test extras)
    import tomli as tomllib

SYMBOLS = "mechanism_symbols.toml"
COMMON = ("epsilon", "delta", "rho", "max_contributions")   # parameters of every duckdp.select call


def load(path: str) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


def problems(infos: list[dict], table: dict) -> list[str]:
    """What the table lacks or has too many of, for the registry's `infos` (`duckdp.algorithms()`)."""
    out = []
    names = {i["name"] for i in infos}
    for stale in sorted(set(table) - names - {"common"}):
        out.append(f"{SYMBOLS} [{stale}]: no registered mechanism of that name")
    for info in infos:
        name, entry = info["name"], table.get(info["name"])
        if entry is None:
            out.append(f"mechanism {name!r} has no entry [{name}] in {SYMBOLS}: write its parameters' paper "
                       "symbols, assumptions and refusals there")
            continue
        declared, symbols = set(info.get("params", {})), set(entry.get("symbols", {}))
        out += [f"{SYMBOLS} [{name}]: parameter {p!r} has no paper symbol" for p in sorted(declared - symbols)]
        out += [f"{SYMBOLS} [{name}]: {p!r} is not a parameter of {name} (stale entry?)"
                for p in sorted(symbols - declared - set(COMMON))]
        if not entry.get("assumptions"):
            out.append(f"{SYMBOLS} [{name}]: no 'assumptions' list")
        if "refuses" not in entry:      # may be empty: the registry-implied refusals are always listed
            out.append(f"{SYMBOLS} [{name}]: no 'refuses' list (write refuses = [] if there is none beyond "
                       "the registry's)")
    return out


def example_kwargs(info: dict, mech: Any) -> dict:
    """The keyword arguments of the page's `duckdp.select` example (tests/test_api_docs.py runs them)."""
    budgets = info.get("budgets", [])
    out: dict[str, Any] = {"algo": info["name"]}
    out.update({"epsilon": 1.0, "delta": 1e-6} if "epsilon/delta" in budgets else {"rho": 0.1, "delta": 1e-6})
    if getattr(mech, "truncates", True) is not False:
        out["max_contributions"] = 100
    out.update({p: d["default"] for p, d in info.get("params", {}).items()     # defaults short enough to read
                if d.get("default") is not None and len(repr(d["default"])) <= 6})
    if info.get("unproven"):
        out["allow_unproven"] = True
    return out

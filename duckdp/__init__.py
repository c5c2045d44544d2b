"""duckdp: differentially private partition selection inside DuckDB.

The public names below load on first use (PEP 562 `__getattr__`), so `import duckdp` — and every import of a
submodule, which imports this package first — stays cheap: Spark's Python workers import duckdp to run its noise
UDFs and need none of the planning code (scipy, the mechanisms, DuckDB). The names, `__all__` and their types are
those of an eager import.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .errors import BudgetExceeded, DataError, DuckDPError, InvalidParameter, SchemaError

if TYPE_CHECKING:
    from .api import algorithms, select
    from .count_release import CountRelease, count_release
    from .evaluate import Evaluation, evaluate
    from .explain import Explanation, explain
    from .explain_aggregate import AggregateExplanation, explain_aggregate
    from .group_by import Aggregate, aggregate
    from .macros import install_macros
    from .privacy.accountant import Accountant
    from .privacy.budget import ZCDP, EpsDelta
    from .release import Release, Spent
    from .session import LedgerError, Session

__version__ = "0.1.0"

__all__ = ["select", "algorithms", "Release", "Spent", "EpsDelta", "ZCDP", "DuckDPError",
           "InvalidParameter", "SchemaError", "DataError", "BudgetExceeded", "__version__",
           "count_release", "CountRelease", "Session", "LedgerError", "install_macros",
           "explain", "Explanation", "evaluate", "Evaluation", "Accountant", "aggregate", "Aggregate",
           "explain_aggregate", "AggregateExplanation"]

# public name -> the submodule defining it (relative to this package)
_LAZY = {"select": ".api", "algorithms": ".api", "count_release": ".count_release", "CountRelease": ".count_release",
         "evaluate": ".evaluate", "Evaluation": ".evaluate", "explain": ".explain", "Explanation": ".explain",
         "aggregate": ".group_by", "Aggregate": ".group_by", "install_macros": ".macros",
         "explain_aggregate": ".explain_aggregate", "AggregateExplanation": ".explain_aggregate",
         "Accountant": ".privacy.accountant", "ZCDP": ".privacy.budget", "EpsDelta": ".privacy.budget",
         "Release": ".release", "Spent": ".release", "Session": ".session", "LedgerError": ".session"}


if not TYPE_CHECKING:    # hidden from mypy, which then types every public name by its import above
    def __getattr__(name: str) -> Any:
        """Load a public name from its submodule on first use and keep it (later reads are plain lookups); a
        submodule's name (`duckdp.mechanisms`, `duckdp.datasets`, ...) imports it, as the eager import had."""
        if name in _LAZY:
            value = getattr(importlib.import_module(_LAZY[name], __name__), name)
            setattr(sys.modules[__name__], name, value)
            return value
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f".{name}", __name__)      # binds itself on the package
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(ModuleType):
    """This package's module type. Three public functions share their submodule's name (`count_release`,
    `evaluate`, `explain`); importing such a submodule makes Python bind it as an attribute of the package,
    which would hide the function. As the eager `from .explain import explain` did, the function is bound
    in its place (`from duckdp.explain import Explanation` still reads the submodule from sys.modules)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and value.__name__ == f"{__name__}.{name}" and name in _LAZY:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

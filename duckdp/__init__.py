"""duckdp: differentially private partition selection inside DuckDB."""
from .api import algorithms, select
from .count_release import CountRelease, count_release
from .errors import BudgetExceeded, DataError, DuckDPError, InvalidParameter, SchemaError
from .evaluate import Evaluation, evaluate
from .explain import Explanation, explain
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
           "explain", "Explanation", "evaluate", "Evaluation", "Accountant", "aggregate", "Aggregate"]

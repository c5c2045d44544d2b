"""Registry of mechanisms by name and alias."""
from __future__ import annotations

from ..errors import InvalidParameter
from .adaptive_sips import AdaptiveSIPS
from .base import Mechanism
from .basic import CountGaussian, CountLaplace, WeightedGaussian, WeightedLaplace
from .dpsips import DPSIPS
from .mad import Mad, Mad2R
from .policy import GW, PolicyGaussian, PolicyGaussianL1, PolicyLaplace
from .truncated_geometric import TruncatedGeometric

MECHANISMS: dict[str, Mechanism] = {m.name: m for m in (
    WeightedGaussian(), WeightedLaplace(), CountGaussian(), CountLaplace(),
    DPSIPS(), AdaptiveSIPS(),
    Mad(), Mad2R(),
    PolicyLaplace(), PolicyGaussian(), PolicyGaussianL1(), GW(),
    TruncatedGeometric(),
)}
_ALIASES = {alias: m for m in MECHANISMS.values() for alias in m.aliases}


def get(algo: str) -> Mechanism:
    """The mechanism called `algo` (name or alias), or a clear error listing the choices."""
    if isinstance(algo, str):
        key = algo.strip().lower()
        if key in MECHANISMS:
            return MECHANISMS[key]
        if key in _ALIASES:
            return _ALIASES[key]
    raise InvalidParameter(f"unknown algo {algo!r}; choose one of {', '.join(sorted(MECHANISMS))}"
                           f" (aliases: {', '.join(sorted(_ALIASES))})")

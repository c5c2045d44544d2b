"""Registry of mechanisms by name and alias, by what their releases hold (`Mechanism.output`)."""
from __future__ import annotations

from ..errors import InvalidParameter
from .adaptive_sips import AdaptiveSIPS
from .base import KEYS, Mechanism
from .basic import CountGaussian, CountLaplace, WeightedGaussian, WeightedLaplace
from .count_release import PrivateCountRelease
from .dpsips import DPSIPS
from .mad import Mad, Mad2R
from .policy import GW, PolicyGaussian, PolicyGaussianL1, PolicyLaplace
from .truncated_geometric import TruncatedGeometric

REGISTRY: dict[str, Mechanism] = {m.name: m for m in (
    WeightedGaussian(), WeightedLaplace(), CountGaussian(), CountLaplace(),
    DPSIPS(), AdaptiveSIPS(),
    Mad(), Mad2R(),
    PolicyLaplace(), PolicyGaussian(), PolicyGaussianL1(), GW(),
    TruncatedGeometric(),
    PrivateCountRelease(),
)}
# The partition-selection mechanisms (releases hold a key set): what `select` runs and `algorithms()` lists.
MECHANISMS: dict[str, Mechanism] = {name: m for name, m in REGISTRY.items() if m.output == KEYS}
COUNTS = PrivateCountRelease.output
_ALIASES = {alias: m for m in REGISTRY.values() for alias in m.aliases}


def get(algo: str, output: str = KEYS) -> Mechanism:
    """The mechanism called `algo` (name or alias) whose releases hold `output`, or a clear error: one
    listing the choices, or naming the entry point of a mechanism whose releases hold something else."""
    mech = None
    if isinstance(algo, str):
        key = algo.strip().lower()
        mech = REGISTRY.get(key) or _ALIASES.get(key)
    if mech is not None and mech.output != output:
        raise InvalidParameter(f"{mech.name} releases {mech.output}, not {output}: call {mech.entry_point}(...)")
    if mech is None:
        choices = {name: m for name, m in REGISTRY.items() if m.output == output}
        aliases = sorted(alias for alias, m in _ALIASES.items() if m.output == output)
        raise InvalidParameter(f"unknown algo {algo!r}; choose one of {', '.join(sorted(choices))}"
                               f" (aliases: {', '.join(aliases)})")
    return mech

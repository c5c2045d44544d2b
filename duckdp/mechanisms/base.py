"""The mechanism interface: declared parameters, a data-free plan, and a run over SQL."""
from __future__ import annotations

import dataclasses
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any, ClassVar

import pyarrow as pa

from ..errors import InternalError, InvalidParameter
from ..privacy.budget import ZCDP, Budget, EpsDelta
from ..privacy.events import CalibratedEvent, ComposedEvent, round_event
from ..stages.base import Engine
from ..validation import max_contributions as check_max_contributions
from ..validation import mechanism_params
from .guarantee import RoundGuarantee, basic_bound

KEYS = "a key set"                      # `Mechanism.output` of the partition-selection mechanisms


@dataclass(frozen=True)
class Param:
    """A mechanism parameter: name, default (None = derived), description and validator."""

    name: str
    default: Any
    doc: str
    check: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Params(Mapping[str, Any]):
    """One run's parameters, frozen: Δ0 and the mechanism's own validated settings.

    Δ0 is `max_contributions` (validated here, validation.max_contributions; None for a mechanism that
    bounds no user's keys, count release); the mechanism's settings (`Mechanism.check_params`) read as
    a read-only mapping, `params["alpha"]`. `plan` and `run` both take this object, so Δ0 has one
    source; `select`'s automatic Δ0 builds a new one per candidate Δ0, never edits one.
    """

    max_contributions: int | None
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.max_contributions is not None:
            object.__setattr__(self, "max_contributions", check_max_contributions(self.max_contributions))
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))

    @property
    def delta0(self) -> int:
        """Δ0 of a mechanism that truncates users to Δ0 keys (an InternalError where the run has none)."""
        if self.max_contributions is None:
            raise InternalError("invariant failed: a mechanism that truncates users was given no Δ0")
        return self.max_contributions

    def __getitem__(self, name: str) -> Any:
        return self.settings[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.settings)

    def __len__(self) -> int:
        return len(self.settings)


@dataclass(frozen=True)
class RoundPlan:
    """What one round will do, fixed before any data is read.

    `scale` is σ for Gaussian noise or λ for Laplace/Gumbel, in the units of `threshold`; `extra`
    is the mechanism's own typed plan fields (a dataclass, e.g. MAD's τ), or None.
    `sensitivity` is the noised vector's sensitivity in those units (ℓ2 for Gaussian, ℓ1 for
    Laplace), so a Gaussian round is (sensitivity/σ)-GDP on the keys it can release; `novel_delta`
    is the δ the threshold spends on novel keys (None: the round's whole δ, the safe bound); `mu` is
    μ_j = sensitivity/σ where the round belongs to Gaussian rounds composed exactly
    (privacy/composition.gaussian_rounds; None otherwise), its `budget` then a share of the request.
    `event` is the round's privacy event (privacy/events.py), what accountants compose.
    """

    budget: Budget
    noise: str
    scale: float
    threshold: float
    extra: Any = None
    sensitivity: float = 1.0
    novel_delta: float | None = None
    mu: float | None = None

    @property
    def event(self) -> CalibratedEvent:
        return round_event(self.budget, self.noise, self.scale, self.sensitivity, self.novel_delta)


@dataclass(frozen=True)
class Round:
    """One executed round as reported in `Release.rounds`: its plan and how many keys it released."""

    index: int
    plan: RoundPlan
    released: int

    @classmethod
    def from_plan(cls, index: int, plan: RoundPlan, released: int) -> Round:
        return cls(index, plan, released)

    @property
    def budget(self) -> Budget:
        return self.plan.budget

    @property
    def noise(self) -> str:
        return self.plan.noise

    @property
    def sigma(self) -> float:
        """The round's noise scale (σ, or λ/β for Laplace/Gumbel: RoundPlan.scale)."""
        return self.plan.scale

    @property
    def threshold(self) -> float:
        return self.plan.threshold

    @property
    def extra(self) -> Any:
        return self.plan.extra

    @property
    def sensitivity(self) -> float:
        return self.plan.sensitivity

    @property
    def novel_delta(self) -> float | None:
        return self.plan.novel_delta

    @property
    def mu(self) -> float | None:
        return self.plan.mu

    @property
    def event(self) -> CalibratedEvent:
        return self.plan.event

    def extra_fields(self) -> dict[str, Any]:
        """`extra` as a plain dict (typed plan fields, or count release's per-level values)."""
        extra = self.plan.extra
        if extra is None:
            return {}
        return dict(extra) if isinstance(extra, dict) else dataclasses.asdict(extra)


def approx_budget(budget: Budget) -> EpsDelta:
    """The (ε, δ) budget of a mechanism that takes only (ε, δ) (`check_budget` refused any other)."""
    if not isinstance(budget, EpsDelta):
        raise InternalError(f"an (ε, δ) mechanism was planned with {budget!r}")
    return budget


def plan_event(plan: Sequence[RoundPlan | Round]) -> ComposedEvent:
    """The privacy event of a whole plan (or of executed rounds): its rounds, in order."""
    return ComposedEvent(tuple(r.event for r in plan))


class Mechanism(ABC):
    """A partition-selection mechanism: weight → noise → threshold, possibly over rounds."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    citation: ClassVar[str]
    summary: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()
    budgets: ClassVar[tuple[type, ...]] = (EpsDelta, ZCDP)
    # Why the privacy guarantee is not established, for mechanisms kept only as published baselines;
    # they run only with allow_unproven=True.
    unproven: ClassVar[str | None] = None
    # The Basic weighting exponent e its users table uses (None: no per-user translation), and
    # whether users are truncated to Δ0 keys.
    exponent: ClassVar[float | None] = None
    truncates: ClassVar[bool] = True
    # The engines (duckdp.engines names) this mechanism runs on: `select` refuses any other before a
    # budget is charged. A family with its own stages implements them once per engine it lists, in
    # its folder: duckdp/mechanisms/<family>/<engine>.py (see `own_stages`).
    engines: ClassVar[tuple[str, ...]] = ("duckdb", "spark")
    engine_note: ClassVar[str] = ""        # why an engine is missing, for the refusal
    # What a release of this mechanism holds and the entry point that makes it: key-set mechanisms run
    # through `select`; count release (keys with noisy counts) only through `count_release`, and
    # `mechanisms.get` refuses to hand one kind to the other's entry point.
    output: ClassVar[str] = KEYS
    entry_point: ClassVar[str] = "duckdp.select"
    # Whether a parameter given as None means its default (select's keywords, the CLI) or is refused
    # like any other bad value (count_release, whose keywords carry their defaults).
    none_is_default: ClassVar[bool] = True

    def own_stages(self, engine: Engine) -> ModuleType:
        """The family's own stages for `engine`: the module `<engine.name>` in the mechanism's folder
        (e.g. duckdp.mechanisms.mad.spark), functions taking the engine as first argument."""
        return importlib.import_module(f"{type(self).__module__}.{engine.name}")

    def check_engine(self, engine: str) -> None:
        """Refuse an engine this mechanism does not run on (before any budget is charged)."""
        if engine not in self.engines:
            raise InvalidParameter(self.engine_note or f"{self.name} runs only on {', '.join(self.engines)}, "
                                   f"not on {engine}")

    def check_params(self, given: Mapping[str, Any]) -> Mapping[str, Any]:
        """The mechanism's own settings, defaults filled and validated (validation.mechanism_params),
        read-only; `Params(max_contributions, settings)` adds Δ0 for `plan` and `run`."""
        return MappingProxyType(mechanism_params(self.name, self.params, given, self.unproven, self.none_is_default))

    def check_budget(self, budget: Budget) -> None:
        if not isinstance(budget, self.budgets):
            kinds = " or ".join("epsilon=" if b is EpsDelta else "rho=" for b in self.budgets)
            raise InvalidParameter(f"{self.name} takes a budget given as {kinds} with delta=")

    @abstractmethod
    def plan(self, budget: Budget, params: Params) -> list[RoundPlan]:
        """Every round's budget, noise scale and threshold, computed without data (Δ0:
        `params.delta0`); pure."""

    @abstractmethod
    def run(self, stages: Engine, plan: list[RoundPlan], params: Params) -> tuple[pa.Table, list[Round]]:
        """Compose the engine's generic stages (`stages`, a duckdp.stages.base.Engine) and the family's
        own (`self.own_stages(stages)`); return the released keys and the executed rounds."""

    def explain_round(self, index: int, plan: RoundPlan, params: Params) -> RoundGuarantee:
        """What round `index` guarantees in users; by default the Basic bound for `exponent`."""
        if self.exponent is None:
            return RoundGuarantee("none", "not translated to users")
        return basic_bound(plan, self.exponent)

    def explain_overall(self, rounds: list[RoundGuarantee]) -> tuple[Callable | None, list[str]]:
        """The whole release's release probability (None: no bound) and notes; by default a
        one-round mechanism's round bound."""
        if len(rounds) == 1 and rounds[0].kind == "bound":
            return rounds[0].probability, []
        return None, []

    def describe(self) -> dict:
        return {"name": self.name, "aliases": list(self.aliases), "citation": self.citation,
                "summary": self.summary, "unproven": self.unproven,
                "budgets": ["epsilon/delta" if b is EpsDelta else "rho/delta" for b in self.budgets],
                "params": {p.name: {"default": p.default, "doc": p.doc} for p in self.params}}

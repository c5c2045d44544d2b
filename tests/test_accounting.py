"""Accounting of privacy events: GDP closed form, PLD against dp-accounting, rounding and edge cases."""
import math

import pytest
from dp_accounting import GaussianDpEvent, LaplaceDpEvent
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

from duckdp.mechanisms import MECHANISMS
from duckdp.mechanisms.base import Params, plan_event
from duckdp.privacy.accountant import curves
from duckdp.privacy.accounting import composed_delta, composed_epsilon, gdp_delta
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.events import DpEvent, GaussianEvent, LaplaceEvent, curve_delta, dumps, loads


def Event(kind, value, delta):
    """A curve event by its ledger name (privacy/events.py)."""
    return {"gaussian": GaussianEvent, "laplace": LaplaceEvent, "dp": DpEvent}[kind](value, delta)


def events_of(plan):
    return curves(plan_event(plan))


def test_gdp_closed_form_matches_dp_accounting_for_many_gaussians():
    sigmas = [3.0, 5.0, 8.0, 13.0]
    events = [Event("gaussian", 1 / s, 0.0) for s in sigmas]
    acc = PLDAccountant()
    for s in sigmas:
        acc.compose(GaussianDpEvent(s))
    assert composed_epsilon(events, 1e-6) == pytest.approx(acc.get_epsilon(1e-6), abs=1e-3)
    mu = math.sqrt(sum(1 / s ** 2 for s in sigmas))
    assert composed_delta(events, 1.0) == pytest.approx(gdp_delta(mu, 1.0), rel=1e-9)


def test_epsilon_and_delta_are_consistent_and_rounded_up():
    events = [Event("gaussian", 0.3, 1e-7), Event("laplace", 0.2, 1e-7)]
    eps = composed_epsilon(events, 1e-5)
    assert composed_delta(events, eps) <= 1e-5 * (1 + 1e-6)
    assert composed_delta(events, eps * 0.99) > 1e-5
    only = [Event("gaussian", 0.4, 0.0)]
    eps = composed_epsilon(only, 1e-6)
    assert gdp_delta(0.4, eps) <= 1e-6


def test_pld_is_no_looser_than_rdp_and_no_tighter_than_the_truth():
    """Laplace rounds: the PLD ε lies between the exact single-round ε and the RDP bound."""
    events = [Event("laplace", 0.1, 0.0)] * 10
    rdp = RdpAccountant()
    rdp.compose(LaplaceDpEvent(10.0), 10)
    eps = composed_epsilon(events, 1e-6)
    assert 0.1 < eps <= rdp.get_epsilon(1e-6) and eps < 1.0      # basic composition: 1.0


def test_novel_delta_adds_and_exhausts():
    events = [Event("gaussian", 0.1, 4e-6), Event("gaussian", 0.1, 6e-6)]
    assert composed_epsilon(events, 1e-5) == math.inf
    assert composed_delta(events, 10.0) == pytest.approx(1e-5)


def test_events_roundtrip_and_reject_garbage():
    events = [Event("gaussian", 0.25, 1e-6), Event("laplace", 0.5, 1e-6), Event("dp", 1.0, 1e-7)]
    assert loads(dumps(events)) == events
    for bad in ['[]', '{}', '[{"type": "gaussian", "epsilon": 1, "delta": 0}]',
                '[{"type": "x", "epsilon": 1, "delta": 0}]',
                '[{"type": "dp", "epsilon": -1, "delta": 0}]', '[{"type": "dp", "epsilon": "1", "delta": 0}]',
                '[{"type": "dp", "epsilon": 1, "delta": 1}]', '[1]', '[{"type": "dp", "epsilon": NaN, "delta": 0}]']:
        with pytest.raises(ValueError):
            loads(bad)


def test_huge_budgets_stay_fast_and_sound():
    events = [Event("dp", 1e6, 0.0), Event("gaussian", 2.0, 0.0)]
    eps = composed_epsilon(events, 1e-5)
    assert eps >= 1e6 and composed_delta(events, eps) <= 1e-5


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_mechanism_plan_yields_sound_events(name):
    """Each round becomes events whose δ's sum to at most the release's δ, and whose composition at
    the release's own ε stays within its δ (the release is never charged less than it states)."""
    mech = MECHANISMS[name]
    for budget in (EpsDelta(1.0, 1e-5), ZCDP(0.1, 1e-5)):
        if not isinstance(budget, mech.budgets):
            continue
        params = mech.check_params({"allow_unproven": True} if mech.unproven else {})
        plan = mech.plan(budget, Params(10, params))
        events = events_of(plan)
        assert len(events) >= len(plan)
        assert sum(curve_delta(e) for e in events) <= budget.delta * (1 + 1e-12)
        if isinstance(budget, EpsDelta) and not mech.unproven:
            assert composed_delta(events, 1.0) <= 1e-5 * (1 + 1e-9)

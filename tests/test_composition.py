"""Exact composition of Gaussian rounds (privacy/composition.py): golden values, the (ε, δ) → μ
calibration against mpmath and dp-accounting's PLD, zCDP shares, sensitivities, and bad input."""
from __future__ import annotations

import math

import dp_accounting
import mpmath
import pytest
from conftest import make_table
from dp_accounting.pld import privacy_loss_distribution as pld
from hypothesis import given, settings
from hypothesis import strategies as st

import duckdp
from duckdp.errors import InvalidParameter
from duckdp.mechanisms.dpsips import round_shares
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.calibration import analytic_gaussian_delta
from duckdp.privacy.composition import gaussian_rounds

SHARES = round_shares(3, 1 / 3)           # 1/13, 3/13, 9/13 (DP-SIPS Alg. 3)


def mp_gdp_delta(mu, epsilon):
    """δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) of μ-GDP (Dong, Roth & Su 2022 Cor. 2.13), in mpmath."""
    mu, epsilon = mpmath.mpf(mu), mpmath.mpf(epsilon)
    return mpmath.ncdf(-epsilon / mu + mu / 2) - mpmath.exp(epsilon) * mpmath.ncdf(-epsilon / mu - mu / 2)


def mp_mu(epsilon, delta):
    """μ with δ_μ(ε) = δ, by mpmath bisection at 50 digits (δ_μ(ε) increases in μ)."""
    with mpmath.workdps(50):
        lo, hi = mpmath.mpf("1e-6"), mpmath.mpf(100)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if mp_gdp_delta(mid, epsilon) < delta else (lo, mid)
        return float(hi)


def composed_mu(rounds, sensitivities=None):
    sensitivities = sensitivities or [1.0] * len(rounds.sigmas)
    return math.sqrt(math.fsum((d / s) ** 2 for s, d in zip(rounds.sigmas, sensitivities, strict=True)))


def test_golden_dpsips_rounds():
    """ε = 1, δ = 1e-5, I = 3, r = 1/3: μ = 0.257457, σ_j = 1/(μ√share_j), δ_j = share_j·δ/2."""
    mu, sigmas, novel = gaussian_rounds(EpsDelta(1.0, 1e-5), SHARES)
    assert mu == pytest.approx(0.2574571959, abs=1e-10)
    assert sigmas == pytest.approx([14.0044688, 8.0854839, 4.6681563], abs=1e-7)
    assert novel == pytest.approx([0.5e-5 / 13, 1.5e-5 / 13, 4.5e-5 / 13], rel=1e-14)
    assert math.fsum(novel) == 0.5e-5


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-5), (0.1, 1e-9), (5.0, 1e-3), (0.5, 0.2)])
def test_mu_matches_mpmath_gdp_closed_form(epsilon, delta):
    mu = gaussian_rounds(EpsDelta(epsilon, delta), [1.0]).mu
    assert mu == pytest.approx(mp_mu(epsilon, delta / 2), rel=1e-9)
    assert mp_gdp_delta(mu, epsilon) <= delta / 2          # μ is rounded down (σ up): never over budget


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-5), (0.3, 1e-7), (3.0, 1e-4)])
def test_composed_rounds_spend_delta_half_by_mpmath_and_pld(epsilon, delta):
    """The composed rounds' √Σσ_j⁻² is μ-GDP with δ(ε) = δ/2 to 1e-8 (mpmath), and dp-accounting's
    PLD of the three Gaussians composed gives the same δ at ε (pessimistic PLD: from above, to 1e-5)."""
    rounds = gaussian_rounds(EpsDelta(epsilon, delta), SHARES)
    mu = composed_mu(rounds)
    assert mu <= rounds.mu
    with mpmath.workdps(40):
        got = float(mp_gdp_delta(mu, epsilon))
    assert delta / 2 * (1 - 1e-8) <= got <= delta / 2
    loss = pld.from_gaussian_mechanism(rounds.sigmas[0])
    for sigma in rounds.sigmas[1:]:
        loss = loss.compose(pld.from_gaussian_mechanism(sigma))
    assert loss.get_delta_for_epsilon(epsilon) == pytest.approx(delta / 2, rel=1e-5)


def test_pld_accountant_epsilon_of_composed_rounds():
    """dp-accounting's PLDAccountant on the composed GaussianDpEvents returns ε ≈ 1 at δ/2."""
    rounds = gaussian_rounds(EpsDelta(1.0, 1e-5), SHARES)
    acc = dp_accounting.pld.PLDAccountant()
    acc.compose(dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(s) for s in rounds.sigmas]))
    assert acc.get_epsilon(0.5e-5) == pytest.approx(1.0, abs=1e-3)


def test_sensitivities_scale_sigma():
    """μ_j = Δ_j/σ_j: a round with sensitivity Δ gets Δ times the σ and the same μ_j."""
    unit = gaussian_rounds(EpsDelta(1.0, 1e-5), [0.1, 0.9])
    scaled = gaussian_rounds(EpsDelta(1.0, 1e-5), [0.1, 0.9], [3.0, 0.5])
    assert scaled.sigmas == pytest.approx([3.0 * unit.sigmas[0], 0.5 * unit.sigmas[1]], rel=1e-12)
    assert composed_mu(scaled, [3.0, 0.5]) <= scaled.mu == unit.mu
    z = gaussian_rounds(ZCDP(0.2, 1e-6), [0.25, 0.75], [2.0, 1.0])
    assert z.sigmas == pytest.approx([2.0 / math.sqrt(0.1), 1 / math.sqrt(0.3)], rel=3e-12)   # σ rounded up by 1e-12


def test_zcdp_rounds_split_rho_and_delta():
    """zCDP: ρ_j = share_j·ρ, σ_j = 1/√(2ρ_j), δ_j = share_j·δ (DP-SIPS Alg. 3, Thm 14); μ = √(2ρ)."""
    mu, sigmas, novel = gaussian_rounds(ZCDP(0.1, 1e-5), SHARES)
    assert mu == pytest.approx(math.sqrt(0.2), rel=1e-15)
    assert sigmas == pytest.approx([1 / math.sqrt(0.2 * s) for s in SHARES], rel=1e-11)
    assert sum(1 / (2 * s * s) for s in sigmas) <= 0.1
    assert math.fsum(novel) == 1e-5


@settings(max_examples=60, deadline=None)
@given(st.floats(0.01, 10), st.floats(1e-12, 0.5), st.integers(1, 6), st.floats(0.05, 3.0))
def test_composed_rounds_never_exceed_the_budget(epsilon, delta, iterations, ratio):
    rounds = gaussian_rounds(EpsDelta(epsilon, delta), round_shares(iterations, ratio))
    assert analytic_gaussian_delta(1 / composed_mu(rounds), epsilon) <= delta / 2
    assert math.fsum(rounds.novel_deltas) <= delta / 2


@pytest.mark.parametrize("shares, sensitivities", [([0.5, 0.4], None), ([1.0, 0.0], None), ([], None),
                                                    ([0.5, 0.5], [1.0]), ([0.5, 0.5], [1.0, -1.0]),
                                                    ([0.5, 0.5], [1.0, math.inf])])
def test_bad_shares_or_sensitivities(shares, sensitivities):
    with pytest.raises(InvalidParameter):
        gaussian_rounds(EpsDelta(1.0, 1e-5), shares, sensitivities)


def test_explain_and_report_state_mu_sigmas_and_conversion(con):
    text = str(duckdp.explain("dpsips", epsilon=1.0, delta=1e-5, keys_per_user=[1]))
    assert "μ = √Σ(Δ_j/σ_j)² = 0.257457, σ_j = 14.0045, 8.08548, 4.66816" in text
    assert "(ε, δ/2) ↔ μ-GDP by the analytic Gaussian" in text and "δ/2 over the rounds' novel-key events" in text
    assert "μ = √Σ(Δ_j/σ_j)² = 0.447214" in str(duckdp.explain("mad2r", rho=0.1, delta=1e-5, keys_per_user=[1]))
    assert "μ-GDP" not in str(duckdp.explain("weighted_gaussian", epsilon=1.0, delta=1e-5, keys_per_user=[1]))
    make_table(con, "t", [u % 20 for u in range(200)], [u % 7 for u in range(200)])
    report = duckdp.select(con, "t", algo="mad2r", epsilon=1.0, delta=1e-5, max_contributions=10, seed=0).report()
    assert "accounting: rounds jointly μ-GDP, μ = √Σ(Δ_j/σ_j)² = 0.257457, σ_j = 12.2827, 4.09424" in report
    assert "(ε, δ/2) ↔ μ-GDP" in report and "μ=0.08142 δ=5e-07" in report

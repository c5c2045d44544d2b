"""Thresholds without enumerating Δ0 (issue #14 item 4): the same floats as enumeration for Δ0 ≤ 10⁴,
Δ0 = 10⁹ planned in well under a second, absurd Δ0 refused with a duckdp error (API, explain, CLI)."""
import itertools
import math
import time

import numpy as np
import pytest
from scipy.special import ndtri

import duckdp
from duckdp import InvalidParameter, cli
from duckdp.mechanisms import MECHANISMS
from duckdp.mechanisms.base import Params
from duckdp.privacy import calibration as cal
from duckdp.privacy.budget import ZCDP, EpsDelta
from duckdp.privacy.mad import biased_novelty

NOVELTIES = {"l2": cal.weighted_l2_novelty, "l1": cal.weighted_l1_novelty, "count": cal.constant_novelty(1.0),
             "biased": biased_novelty(1.2)}


def enumerated_gaussian(sigma, delta, d0, novelty):
    """The pre-#14 code: evaluate every k = 1..Δ0 and take the maximum."""
    k = np.arange(1, d0 + 1, dtype=np.float64)
    return cal._up(np.max(novelty(k) - sigma * ndtri(cal.per_item_tail(delta, k))))


def enumerated_laplace(scale, delta, d0, novelty):
    k = np.arange(1, d0 + 1, dtype=np.float64)
    return cal._up(np.max(novelty(k) - scale * np.log(2 * cal.per_item_tail(delta, k))))


@pytest.mark.parametrize("novelty", NOVELTIES)
def test_thresholds_equal_enumeration_to_the_ulp(novelty):
    """Golden: bit-for-bit the enumerated maximum over a grid of scales, δ and Δ0 ≤ 10⁴."""
    nov = NOVELTIES[novelty]
    scales = [0.3, 1.0, 1.3327913, 3.884141, 10.0, 100.0, 1e4]
    deltas = [0.4, 1e-3, 5e-6, math.exp(-10), 1e-12]
    d0s = [1, 2, 3, 7, 10, 31, 100, 999, 1000, 4096, 10_000]
    for scale, delta, d0 in itertools.product(scales, deltas, d0s):
        assert cal.gaussian_threshold(scale, delta, d0, nov) == enumerated_gaussian(scale, delta, d0, nov)
        assert cal.laplace_threshold(scale, delta, d0, nov) == enumerated_laplace(scale, delta, d0, nov)


def test_search_finds_an_interior_maximum():
    """ρ + g rising to k = 77,777 and falling after: the search lands on the interior maximum."""
    def noise(k):
        return np.minimum(k, 77_777.0) * 1e-4          # non-decreasing, flat after 77,777
    k = np.arange(1, 1_000_001, dtype=np.float64)
    expected = np.max(cal.weighted_l2_novelty(k) + noise(k))
    assert expected == cal.weighted_l2_novelty(77_777.0) + noise(77_777.0)
    assert cal.max_over_k(cal.weighted_l2_novelty, noise, 1_000_000) == expected


def test_huge_max_contributions_plan_in_under_a_second():
    for name, mech in MECHANISMS.items():
        params = mech.check_params({"allow_unproven": True} if mech.unproven else {})
        for budget in (EpsDelta(1.0, 1e-5), ZCDP(0.5, 1e-6)):
            if not isinstance(budget, mech.budgets):
                continue
            start = time.perf_counter()
            try:
                plans = mech.plan(budget, Params(10**9, params))
            except InvalidParameter as exc:            # truncated geometric: π would need > 2M steps
                assert name == "truncated_geometric" and "max_contributions" in str(exc)
                continue
            assert time.perf_counter() - start < 1.0, name
            assert all(math.isfinite(p.threshold) and p.threshold > 0 for p in plans)


def test_huge_max_contributions_thresholds_grow_and_stay_private():
    """Larger Δ0 never lowers T; and a novel user's release probability at k = Δ0 is ≤ δ/2."""
    from scipy.stats import norm

    budget = EpsDelta(1.0, 1e-5)
    plans = [MECHANISMS["weighted_gaussian"].plan(budget, Params(d0))[0] for d0 in (10**4, 10**6, 10**9, 10**12)]
    assert [p.threshold for p in plans] == sorted(p.threshold for p in plans)
    p = plans[2]
    assert -math.expm1(10**9 * norm.logcdf((p.threshold - 10**-4.5) / p.scale)) <= 5e-6 * (1 + 1e-9)


def test_select_and_explain_with_huge_max_contributions(con):
    con.execute("CREATE TABLE t AS SELECT range % 50 AS user_id, 'w' || (range % 7) AS item FROM range(500)")
    start = time.perf_counter()
    r = duckdp.select(con, "t", algo="weighted_gaussian", epsilon=1, delta=1e-5, max_contributions=10**9, seed=1)
    assert time.perf_counter() - start < 5 and r.max_contributions == 10**9
    explained = duckdp.explain("weighted_gaussian", epsilon=1, delta=1e-5, max_contributions=10**12)
    assert "Δ0 = 1000000000000\n" in str(explained)
    for bad in (10**16, 10**30):
        with pytest.raises(InvalidParameter,
                           match="max_contributions must be an integer >= 1 and <= 1,000,000,000,000,000"):
            duckdp.select(con, "t", algo="weighted_gaussian", epsilon=1, delta=1e-5, max_contributions=bad)
        with pytest.raises(InvalidParameter, match="max_contributions"):
            duckdp.explain("mad", epsilon=1, delta=1e-5, max_contributions=bad)


def test_cli_huge_max_contributions(tmp_path, capsys):
    import duckdb

    duckdb.sql(f"COPY (SELECT range % 50 AS user_id, 'w' || (range % 7) AS item FROM range(500)) "
               f"TO '{tmp_path / 'in.parquet'}' (FORMAT PARQUET)")
    base = ["select", str(tmp_path / "in.parquet"), "--epsilon", "1", "--delta", "1e-5",
            "-o", str(tmp_path / "o.parquet")]
    assert cli.main(base + ["--max-contributions", str(10**12), "--seed", "1"]) == 0
    capsys.readouterr()
    assert cli.main(base + ["--max-contributions", str(10**16)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "max_contributions must be an integer >= 1 and <= 1,000,000,000,000,000" in err, err

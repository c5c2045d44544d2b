"""Frozen run parameters (issue #19 §5): Δ0 and a mechanism's settings in one validated object that
`plan` and `run` both read; count release a registered Mechanism that `select` refuses."""
import dataclasses
import inspect

import numpy as np
import pytest
from conftest import make_table

import duckdp
from duckdp import mechanisms
from duckdp.errors import InternalError, InvalidParameter
from duckdp.mechanisms.base import Mechanism, Params
from duckdp.mechanisms.count_release import PrivateCountRelease
from duckdp.privacy.accountant import Accountant
from duckdp.privacy.budget import ZCDP, EpsDelta


def test_params_are_frozen_and_read_only():
    params = Params(5, mechanisms.get("dpsips").check_params({"iterations": 2}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.max_contributions = 6                              # type: ignore[misc]
    with pytest.raises(TypeError):
        params.settings["iterations"] = 9                         # type: ignore[index]
    with pytest.raises(TypeError):
        mechanisms.get("dpsips").check_params({})["ratio"] = 1.0  # type: ignore[index]
    assert dict(params) == {"iterations": 2, "ratio": 1 / 3} and params.delta0 == 5
    with pytest.raises(KeyError):                                  # Δ0 is not a setting: one channel only
        params["max_contributions"]


@pytest.mark.parametrize("bad", [0, True, 2.0, "5", 10**16])
def test_params_validate_delta0_like_select(bad):
    with pytest.raises(InvalidParameter, match="max_contributions"):
        Params(bad)


def test_a_run_without_delta0_has_none_and_truncating_mechanisms_refuse_it():
    assert Params(None).max_contributions is None
    with pytest.raises(InternalError):
        mechanisms.get("weighted_gaussian").plan(EpsDelta(1.0, 1e-5), Params(None))


@pytest.mark.parametrize("name", sorted(mechanisms.REGISTRY))
def test_plan_takes_delta0_only_inside_params(name):
    mech = mechanisms.REGISTRY[name]
    assert list(inspect.signature(mech.plan).parameters) == ["budget", "params"]
    assert list(inspect.signature(mech.run).parameters) == ["stages", "plan", "params"]


def test_plan_reads_delta0_from_params():
    mech = mechanisms.get("weighted_gaussian")
    small, large = (mech.plan(EpsDelta(1.0, 1e-5), Params(d))[0].threshold for d in (1, 100))
    assert small < large


def test_count_release_is_a_registered_mechanism_apart_from_select():
    mech = mechanisms.REGISTRY["pcr"]
    assert isinstance(mech, Mechanism) and isinstance(mech, PrivateCountRelease)
    assert mechanisms.get("pcr", output=mechanisms.COUNTS) is mech
    assert mechanisms.get("count_release", output=mechanisms.COUNTS) is mech
    assert "pcr" not in mechanisms.MECHANISMS
    assert "pcr" not in [m["name"] for m in duckdp.algorithms()]
    with pytest.raises(InvalidParameter, match=r"releases a key set.*duckdp\.select"):
        mechanisms.get("weighted_gaussian", output=mechanisms.COUNTS)


@pytest.mark.parametrize("algo", ["pcr", "count_release", "PCR"])
def test_select_refuses_count_release_before_any_charge(con, algo):
    make_table(con, "t", np.arange(40) % 9, np.arange(40) % 5)
    accountant = Accountant.for_budget(ZCDP(1.0, 1e-5))
    with pytest.raises(InvalidParameter, match=r"noisy distinct-user counts.*duckdp\.count_release"):
        duckdp.select(con, "t", algo=algo, rho=0.5, delta=1e-6, accountant=accountant)
    assert accountant.spent.value == 0


def test_count_release_plan_checks_alg2_before_data_and_keeps_none_a_bad_value(con):
    mech = mechanisms.REGISTRY["pcr"]
    settings = mech.check_params({})
    (first,) = mech.plan(ZCDP(1.0, 1e-6), Params(None, settings))
    assert first.budget == ZCDP(1.0, 1e-6) and first.noise == "gumbel"
    with pytest.raises(InvalidParameter, match="initial_epsilon"):
        mech.plan(ZCDP(1e-8, 1e-6), Params(None, settings))
    with pytest.raises(InvalidParameter, match="kbar"):        # count_release's keywords: None is refused
        duckdp.count_release(con, "t", rho=1.0, delta=1e-6, kbar=None)

"""Every input check lives in duckdp/validation.py: one rule per kind of input, the same message everywhere."""
from __future__ import annotations

import math

import pytest

from duckdp import validation
from duckdp.errors import InvalidParameter


@pytest.mark.parametrize("check,bad", [
    (lambda v: validation.positive("rho", v), [0, -1.0, math.inf, True, "1"]),
    (validation.delta, [0, 1, 1.5, -1e-9, math.nan, "1e-6"]),
    (lambda v: validation.between("kbar_ratio", v, 0.0, 1.0), [0.0, 1.0, True, "0.5"]),
    (validation.max_contributions, [0, 1.0, True, 10**15 + 1, "5"]),
    (validation.ledger_key, [b"short", "a" * 32]),
    (validation.anchor, [True, 3]),
    (lambda v: validation.flag("adopt", v), [1, "yes", None]),
])
def test_checks_refuse_bad_values(check, bad):
    for value in bad:
        with pytest.raises(InvalidParameter):
            check(value)


def test_checks_accept_good_values():
    assert validation.positive("rho", 2) == 2.0 and validation.delta(1e-6) == 1e-6
    assert validation.between("x", 0.5, 0.0, 1.0) == 0.5 and validation.max_contributions(10**15) == 10**15
    assert validation.ledger_key(None) is None and validation.anchor(False) is False and validation.flag("a", True)

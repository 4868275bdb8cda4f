"""Assumption 4.2: exact residual vs Monte-Carlo; which families satisfy it."""

from __future__ import annotations

import pytest

from mesadyn.analysis.assumption42 import check, exact_mse, limit_mse, mc_mse
from mesadyn.errors import MesadynError
from mesadyn.process import gaussian, ones, rademacher, sparse, uniform


@pytest.mark.parametrize(
    "fam,T_te",
    [(gaussian(3, 0.8), 6), (uniform(3), 9), (rademacher(3), 5), (sparse(3, 1.5), 7),
     (ones(3), 4)],
)
def test_exact_mse_matches_monte_carlo(fam, T_te):
    s = 0.7 * check(fam).step  # off the optimum too, to test every term
    mean, se = mc_mse(fam, T_te, s=s, n=20_000, seed=4)
    exact = exact_mse(fam, T_te, s=s)
    assert abs(mean - exact) < 4 * se + 1e-12, (mean, se, exact)


def test_which_families_satisfy():
    d = 5
    assert check(sparse(d, 0.5)).satisfied
    assert check(rademacher(d)).satisfied
    assert not check(gaussian(d, 1.0)).satisfied
    assert not check(uniform(d)).satisfied
    # closed forms of the limit residual (module docstring)
    assert limit_mse(gaussian(d, 2.0)) == pytest.approx(0.4 * d * 4.0, rel=1e-12)
    assert limit_mse(uniform(d)) == pytest.approx(4 * d / 75, rel=1e-12)


def test_off_diagonal_decays_like_one_over_T():
    fam = rademacher(4)
    r1, r2 = exact_mse(fam, 11), exact_mse(fam, 101)
    assert r1 == pytest.approx(10 * r2, rel=1e-12)  # limit is 0, pure 1/(T−1)
    assert exact_mse(sparse(4, 2.0), 3) == pytest.approx(0.0, abs=1e-14)


def test_bad_T():
    with pytest.raises(MesadynError, match="T_te"):
        exact_mse(gaussian(2, 1.0), 1)

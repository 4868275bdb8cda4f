"""Theorems 4.1 / 4.3 and Lemma 5.3's constants, recomputed from the paper's own formulas."""

from __future__ import annotations

from fractions import Fraction

import pytest

from mesadyn.errors import MesadynError
from mesadyn.process import gaussian, iid, ones, rademacher, sparse, uniform
from mesadyn.theory import check_T, constants, harmonic, predicted_ratio


def theorem_41(k1: float, k2: float, k3: float, T: int) -> float:
    """ãb̃ = κ1 / (κ2 + κ3/(T−2) Σ_{t=2}^{T−1} 1/(t−1)), as printed in Theorem 4.1."""
    s = sum(Fraction(1, t - 1) for t in range(2, T))
    return k1 / (k2 + k3 / (T - 2) * float(s))


def test_harmonic_exact():
    for n in (0, 1, 2, 7, 98):
        assert harmonic(n) == pytest.approx(float(sum(Fraction(1, k) for k in range(1, n + 1))),
                                            rel=1e-15)


@pytest.mark.parametrize("fam", [gaussian(5, 1.0), gaussian(3, 0.5), sparse(5, 0.5),
                                 rademacher(4), uniform(2), iid(3, 2.0, 5.0, 20.0)],
                         ids=lambda f: f.name)
@pytest.mark.parametrize("T", [3, 5, 100])
def test_ab_star_is_theorem_41(fam, T):
    c = constants(fam, T)
    assert c.ab_star == pytest.approx(theorem_41(fam.kappa1, fam.kappa2, fam.kappa3, T),
                                      rel=1e-13)
    assert c.ab_limit == pytest.approx(fam.kappa1 / fam.kappa2, rel=1e-15)
    assert c.c2 == pytest.approx((T - 2) * fam.kappa1)


def test_paper_numbers():
    # gaussian σ: T→∞ limit 1/(5σ²); at d=5, T=100 Theorem 4.1 gives ≈ 0.1919/σ² (DESIGN §2)
    for s in (0.5, 1.0, 2.0):
        c = constants(gaussian(5, s), 100)
        assert c.ab_limit == pytest.approx(1 / (5 * s * s), rel=1e-13)
        assert c.ab_star * s * s == pytest.approx(0.1919, abs=5e-5)
        assert predicted_ratio(gaussian(5, s), 100) == pytest.approx(c.ab_star * s * s)
    # sparse c: κ3 = 0 so ab* = 1/c² at every T, and the ratio is 1 (Theorem 4.2)
    for cc in (0.5, 1.0, 2.0):
        assert constants(sparse(5, cc), 7).ab_star == pytest.approx(1 / cc**2, rel=1e-13)
        assert predicted_ratio(sparse(5, cc), 7) == pytest.approx(1.0, rel=1e-13)


@pytest.mark.parametrize(("d", "T"), [(5, 100), (3, 5), (1, 10)])
def test_ones_is_theorem_43(d, T):
    s = sum(Fraction(1, t - 1) for t in range(2, T))
    expected = 1 / (1 + (d - 1) / (T - 2) * float(s))
    assert constants(ones(d), T).ab_star == pytest.approx(expected, rel=1e-13)


def test_bad_T():
    with pytest.raises(MesadynError, match="T=2"):
        check_T(2)
    with pytest.raises(MesadynError, match="T=1"):
        constants(gaussian(2, 1.0), 1)

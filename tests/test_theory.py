"""Theorems 4.1 / 4.3 and Lemma 5.3's constants, recomputed from the paper's own formulas."""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField
from mesadyn.model import active_mask, block_labels, diagonal_init, diagonal_mask
from mesadyn.process import (
    fixed,
    gaussian,
    iid,
    mixture,
    moments,
    ones,
    rademacher,
    sampled,
    shifted,
    sparse,
    uniform,
)
from mesadyn.reduced import ReducedSystem
from mesadyn.theory import (
    HARMONIC_EXACT_MAX,
    NoReducedSystem,
    Reduction,
    check_T,
    constants,
    harmonic,
    predicted_ratio,
    radius_sums,
)


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


# ---- issue 12: H_n in O(1), T without an upper limit in the closed forms --------------------
@pytest.mark.parametrize("n", [HARMONIC_EXACT_MAX, HARMONIC_EXACT_MAX + 1, 12_345, 10**6, 10**9,
                               10**20, 10**200])
def test_harmonic_against_mpmath(n):
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(50):
        ref = float(mpmath.harmonic(n))
    assert harmonic(n) == pytest.approx(ref, rel=2e-16)


def test_harmonic_continuous_across_the_threshold():
    n = HARMONIC_EXACT_MAX
    exact = float(sum(Fraction(1, k) for k in range(n - 50, n + 51)))  # the 101 terms, exactly
    assert harmonic(n + 50) - harmonic(n - 51) == pytest.approx(exact, rel=1e-12)


def test_huge_T_answers_at_once():
    start = time.perf_counter()
    c = constants(gaussian(5, 1.0), 10**20)
    c9 = constants(gaussian(5, 1.0), 10**20, radius=0.9)
    assert time.perf_counter() - start < 0.5
    assert c.ab_star == pytest.approx(c.ab_limit, rel=1e-17 * 1e3)  # H_n/n ~ 5e-19
    assert c9.ab_star == pytest.approx(constants(gaussian(5, 1.0), 10**5, radius=0.9).ab_star,
                                       rel=1e-14)
    with pytest.raises(MesadynError, match="T must be <= 1e300"):
        check_T(10**301)


# ---- the radius: closed form, against the exact field restricted to the diagonal ------------
def _direct_sums(T, r):
    """c1/c2 building blocks by the defining double sums over (t, i) (no geometric series)."""
    a = b = c = 0.0
    for t in range(2, T):
        S = sum(r ** (2 * (i - 2)) for i in range(2, t + 1))
        Q = sum(r ** (4 * (i - 2)) for i in range(2, t + 1))
        a += r ** (2 * t) * S * S / (t - 1) ** 2
        b += r ** (2 * t) * Q / (t - 1) ** 2
        c += r ** (2 * t) * S / (t - 1)
    return a, b, c


@pytest.mark.parametrize("r", [0.3, 0.5, 0.8, 0.9, 0.999, 1.0, 1.05])
@pytest.mark.parametrize("T", [3, 10, 200])
def test_radius_sums_are_the_double_sums(r, T):
    assert radius_sums(T, r) == pytest.approx(_direct_sums(T, r), rel=1e-13)


ZERO_MEAN = {
    "gaussian": lambda d: gaussian(d, 0.8),
    "rademacher": rademacher,
    "uniform": uniform,
    "sparse": lambda d: sparse(d, 1.3),
    "shifted0": lambda d: shifted(d, 0.0, 1.2),
    "moments": lambda d: moments(d, [0.0, 0.5, 0.0, 0.6, 0.0, 1.0]),
    "mixture": lambda d: mixture([(0.25, sparse(d, 0.9)), (0.75, gaussian(d, 0.6))]),
}


def _diag_grad(field, d, a, b):
    g = field.grad(diagonal_init(d, a, b))
    labels, diag = block_labels(d), diagonal_mask(d)
    kq = g[diag & (labels == "W_KQ_32")].numpy()
    pv = g[diag & (labels == "W_PV_12")].numpy()
    off = g[~torch.as_tensor(diag)]
    off_block = g[torch.as_tensor(~diag & np.isin(labels, ["W_KQ_32", "W_PV_12"]))]
    return kq, pv, off, off_block


@pytest.mark.parametrize("name", list(ZERO_MEAN))
@pytest.mark.parametrize("r", [0.5, 0.8, 0.9, 1.0])
def test_constants_are_the_exact_field_on_the_diagonal(name, r, tmp_path):
    d, T = 3, 8
    fam = ZERO_MEAN[name](d)
    c = constants(fam, T, radius=r)
    assert c.reduction is Reduction.DIAGONAL
    field = ExactField(fam, T, radius=r, cache_dir=tmp_path)
    for a, b in ((0.3, 0.7), (-1.2, 0.4)):
        kq, pv, off, _ = _diag_grad(field, d, a, b)
        np.testing.assert_allclose(kq, a * b * b * c.c1 - b * c.c2, rtol=1e-10)
        np.testing.assert_allclose(pv, a * a * b * c.c1 - a * c.c2, rtol=1e-10)
        assert np.abs(off.numpy()).max() < 1e-12 * max(1.0, np.abs(kq).max())


@pytest.mark.parametrize("fam", [shifted(2, 0.7, 0.5), mixture([(0.3, ones(2)),
                                                             (0.7, gaussian(2, 1.0))]),
                                 moments(2, [0.3, 1.0, 0.2, 2.0, 0.5, 5.0]), ones(2)],
                         ids=["shifted", "mixture-ones", "moments-skewed", "ones"])
@pytest.mark.parametrize("r", [0.8, 1.0])
def test_masked_reduction_where_assumption_41_fails(fam, r, tmp_path):
    """A token with a mean: the diagonal entries still follow the 2-D system (the masked flow
    reduces, as Lemma A.5 for ones), but the off-diagonal gradient is nonzero (Prop. 4.2)."""
    T = 7
    c = constants(fam, T, radius=r)
    assert c.reduction is Reduction.MASKED and not fam.assumption_41
    field = ExactField(fam, T, radius=r, cache_dir=tmp_path)
    a, b = 0.4, 0.9
    kq, pv, _, off_block = _diag_grad(field, fam.d, a, b)
    np.testing.assert_allclose(kq, a * b * b * c.c1 - b * c.c2, rtol=1e-10)
    np.testing.assert_allclose(pv, a * a * b * c.c1 - a * c.c2, rtol=1e-10)
    assert np.abs(off_block.numpy()).max() > 1e-6


def _full_flow_ab(field, d, a0, b0, t_end):
    """Integrate the full exact gradient flow (every active entry, no mask) with LSODA and the
    exact Hessian; return the final diagonal (a, b) and the largest off-diagonal entry."""
    from scipy.integrate import solve_ivp

    theta0 = diagonal_init(d, a0, b0)
    act = np.flatnonzero(active_mask(d))
    base = theta0.numpy().copy()

    def full(y):
        th = base.copy()
        th[act] = y
        return torch.from_numpy(th)

    sol = solve_ivp(lambda t, y: -field.grad(full(y)).numpy()[act], (0.0, t_end),
                    base[act], method="LSODA", rtol=1e-12, atol=1e-14,
                    jac=lambda t, y: -field.hessian(full(y)).numpy()[np.ix_(act, act)])
    assert sol.success, sol.message
    th = full(sol.y[:, -1]).numpy()
    labels, diag = block_labels(d), diagonal_mask(d)
    a = th[diag & (labels == "W_KQ_32")]
    b = th[diag & (labels == "W_PV_12")]
    off = np.abs(th[~diag & np.isin(labels, ["W_KQ_32", "W_PV_12"])]).max()
    return a, b, off


@pytest.mark.parametrize("name", ["gaussian", "uniform", "sparse", "moments", "mixture"])
@pytest.mark.parametrize("r", [0.5, 0.8, 0.9, 1.0])
def test_full_exact_flow_ends_on_the_hyperbola(name, r, tmp_path):
    d, T = 2, 8
    fam = ZERO_MEAN[name](d)
    c = constants(fam, T, radius=r)
    system = ReducedSystem(c.c1, c.c2)
    a0, b0 = 0.5, 0.3
    t_end = 40.0 / system.rate(a0, b0)
    a, b, off = _full_flow_ab(ExactField(fam, T, radius=r, cache_dir=tmp_path), d, a0, b0, t_end)
    assert np.abs(a * b - c.c2 / c.c1).max() <= 1e-9 * c.c2 / c.c1
    assert off < 1e-12


def test_no_reduced_system_is_typed():
    with pytest.raises(NoReducedSystem, match="exchangeable"):
        constants(moments(2, [[0, 1, 0, 3, 0, 15], [0, 2, 0, 12, 0, 120]]), 10)
    with pytest.raises(NoReducedSystem, match="c·1_d"):
        constants(fixed([1.0, 2.0]), 10)
    with pytest.raises(NoReducedSystem, match="no exact moments"):
        constants(sampled(2, lambda n, g, dev: torch.zeros(n, 2)), 10)
    with pytest.raises(NoReducedSystem, match="component 'fixed'"):
        constants(mixture([(0.5, fixed([1.0, 2.0])), (0.5, gaussian(2))]), 10)
    with pytest.raises(MesadynError, match="radius=1.5 with T=1000 overflows"):
        constants(gaussian(2), 1000, radius=1.5)
    with pytest.raises(MesadynError, match="radius"):
        constants(gaussian(2), 10, radius=-1.0)

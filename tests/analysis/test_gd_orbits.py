"""Periodic orbits of GD (:mod:`mesadyn.analysis.gd_orbits`): the exact Jacobian of
``G^k − I`` and its η-derivative against finite differences; the reduced map's flip at
``1/c2`` and its period-2 branch against the closed form; in the full space (d = 3, T = 20)
the flip at the flattest point against 2/λ_max and GD itself, the branch to ``G²(θ) = θ``
within 1e-10, GD converging onto a computed 2-cycle, and no cycle born where the flip mode is
unbalanced."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mesadyn.analysis import gd_limits as GL
from mesadyn.analysis import gd_map as G
from mesadyn.analysis import gd_orbits as O
from mesadyn.analysis.fixedpoint import balanced_point
from mesadyn.field import FieldSpec, make_field
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian
from mesadyn.theory import constants

C1, C2 = 290.9706484691779, 54.0  # gaussian σ = 1, d = 3, T = 20


@pytest.fixture(scope="module")
def g3():
    fam, T = gaussian(3, 1.0), 20
    f = make_field(FieldSpec("exact", fam, T))
    fp = balanced_point(fam, T)
    flat = GL.flattest_point(f, fp)
    th = GL.orbit_theta(fp, flat.alpha)
    return f, fp, flat, O.FieldMap(f, th)


def test_reduced_constants_are_the_field_s():
    c = constants(gaussian(3, 1.0), 20)
    assert (c.c1, c.c2) == pytest.approx((C1, C2), rel=1e-14)


@pytest.mark.parametrize("period", [1, 2, 3])
def test_orbit_jacobian_and_eta_derivative_against_finite_differences(period):
    gd = O.ReducedMap(C1, C2)
    x, eta = np.array([0.31, 0.52]), 0.012
    _, F, DF, Fe = O.orbit_residual(gd, x, eta, period)
    h = 1e-7
    fd = np.stack([(O.orbit_residual(gd, x + h * e, eta, period)[1]
                    - O.orbit_residual(gd, x - h * e, eta, period)[1]) / (2 * h)
                   for e in np.eye(2)], axis=1)
    np.testing.assert_allclose(DF, fd, rtol=1e-6, atol=1e-8)
    fe = (O.orbit_residual(gd, x, eta * (1 + 1e-7), period)[1]
          - O.orbit_residual(gd, x, eta * (1 - 1e-7), period)[1]) / (2e-7 * eta)
    np.testing.assert_allclose(Fe, fe, rtol=1e-6, atol=1e-9)


def test_field_orbit_jacobian_against_finite_differences(g3):
    f, _, _, gd = g3
    x = gd.coords(gd.base) + np.random.default_rng(1).normal(0, 0.01, gd.n)
    _, _, DF, _ = O.orbit_residual(gd, x, 0.011, 2)
    v = np.random.default_rng(2).normal(size=gd.n)
    h = 1e-6
    fd = (O.orbit_residual(gd, x + h * v, 0.011, 2)[1]
          - O.orbit_residual(gd, x - h * v, 0.011, 2)[1]) / (2 * h)
    np.testing.assert_allclose(DF @ v, fd, rtol=1e-6, atol=1e-8)


def test_reduced_flip_and_period2_branch_are_the_closed_form():
    gd = O.ReducedMap(C1, C2)
    flip = O.flip_point(gd, gd.balanced(), (0.5 / C2, 2 / C2))
    assert flip.eta == pytest.approx(1 / C2, rel=1e-12)  # located far below 1e-8
    assert flip.multiplier == pytest.approx(-1.0, abs=1e-12)
    assert flip.mode_balance == pytest.approx(0.0, abs=1e-12)
    branch = O.follow_period2(gd, flip, 1.3 / C2)
    assert branch.status is Outcome.REACHED_END
    assert branch.eta_end == pytest.approx(1.3 / C2, rel=1e-12)
    assert branch.max_residual <= 1e-10
    for eta, x in zip(branch.eta, branch.x, strict=True):
        cycle = O.reduced_period2(eta, C1, C2)
        assert min(np.abs(x - cycle[0]).max(), np.abs(x - cycle[1]).max()) <= 1e-10
    # the cycle is born stable (supercritical) and doubles again where its multiplier on
    # a = b, 9 − 2(1 + ηc2)², reaches −1: at ηc2 = √5 − 1
    assert branch.stable[0] and not branch.stable[-1]
    k = branch.eta * C2
    assert k[branch.stable].max() < math.sqrt(5) - 1 < k[~branch.stable].min()


def test_reduced_periodic_orbit_newton_and_gd_agree():
    """Newton from a perturbed closed-form cycle returns it; GD from near it converges to it."""
    gd = O.ReducedMap(C1, C2)
    eta = 1.1 / C2
    cycle = O.reduced_period2(eta, C1, C2)
    orb = O.periodic_orbit(gd, cycle[0] + [1e-3, -2e-3], eta, 2)
    assert orb.status is Outcome.CONVERGED and orb.minimal_period == 2 and orb.stable
    assert min(np.abs(orb.points[0] - cycle[0]).max(), np.abs(orb.points[0] - cycle[1]).max()
               ) <= 1e-12
    x = cycle[0] + [2e-3, 1e-3]
    for _ in range(4000):
        x = gd.step(x, eta)
    assert min(np.abs(x - cycle[0]).max(), np.abs(x - cycle[1]).max()) <= 1e-10
    # a fixed point solves every period: Newton from near one reports period 1
    fp = O.periodic_orbit(gd, gd.balanced() + 1e-9, 0.5 / C2, 2)
    assert fp.minimal_period == 1


def test_full_space_flip_at_the_flattest_point(g3):
    f, _, flat, gd = g3
    x_star = gd.coords(gd.base)
    flip = O.flip_point(gd, x_star, (0.5 * flat.eta_max, 1.5 * flat.eta_max))
    assert flip.eta == pytest.approx(flat.eta_max, rel=1e-12)
    assert abs(flip.mode_balance) < 1e-9  # the flip mode weighs A and P equally
    observed, _ = G.onset_of_instability(f, gd.base, rtol=1e-8)
    assert observed == pytest.approx(flip.eta, rel=1e-7)  # GD itself


def test_full_space_period2_branch(g3):
    f, _, flat, gd = g3
    flip = O.flip_point(gd, gd.coords(gd.base), (0.5 * flat.eta_max, 1.5 * flat.eta_max))
    branch = O.follow_period2(gd, flip, 1.2 * flip.eta)
    assert branch.status is Outcome.REACHED_END and branch.max_residual <= 1e-10
    assert branch.eta.min() > flip.eta  # supercritical
    # amplitude² grows linearly from the flip: its fit through the first points hits zero
    # at the located flip
    k = branch.amplitude[:4] ** 2
    slope, icept = np.polyfit(branch.eta[:4], k, 1)
    assert -icept / slope == pytest.approx(flip.eta, rel=2e-3)
    # GD at a stable point of the branch runs into that very cycle
    i = len(branch.eta) // 2
    assert branch.stable[i]
    eta, x = branch.eta[i], branch.x[i].copy()
    y = x + 1e-4 * np.random.default_rng(3).normal(size=x.size)
    for _ in range(3000):
        y = gd.step(y, eta)
    other = gd.step(x, eta)
    assert min(np.abs(y - x).max(), np.abs(y - other).max()) <= 1e-9


def test_no_cycle_is_born_where_the_flip_mode_is_unbalanced(g3):
    """At the balanced point the flip mode has ‖u_A‖² − ‖u_P‖² ≈ 0.49: the invariant drifts
    at second order, so no period-2 orbit continues the flip there."""
    f, fp, _, _ = g3
    gd = O.FieldMap(f, fp)
    flip = O.flip_point(gd, gd.coords(fp), (0.005, 0.015))
    assert flip.mode_balance == pytest.approx(0.488, abs=1e-3)
    orbit, _ = O.switch_to_period2(gd, flip, 1e-2)
    assert orbit.status is Outcome.FAILED and orbit.residual > 1e-8


def test_map_lyapunov_is_the_field_s(g3):
    """The Lyapunov exponent of a FieldMap orbit equals lyapunov_exponent on the field."""
    f, fp, _, _ = g3
    gd = O.FieldMap(f, fp)
    eta = 1.05 * G.critical_step(f, fp)
    orbit = np.repeat(gd.coords(fp)[None], 80, axis=0)
    full = np.repeat(fp[None], 80, axis=0)
    assert O.map_lyapunov(gd, orbit, eta, burn_in=20) == pytest.approx(
        G.lyapunov_exponent(f, full, eta, burn_in=20), rel=1e-10)
    want = math.log(abs(1 - eta * GL.point_limit(f, fp).lambda_max))
    assert O.map_lyapunov(gd, orbit, eta, burn_in=60) == pytest.approx(want, rel=1e-3)


def test_bad_input():
    from mesadyn.errors import MesadynError

    gd = O.ReducedMap(C1, C2)
    with pytest.raises(MesadynError, match="empty"):
        O.flip_point(gd, gd.balanced(), (0.02, 0.01))
    with pytest.raises(MesadynError, match="crosses"):
        O.flip_point(gd, gd.balanced(), (0.1 / C2, 0.5 / C2))
    with pytest.raises(MesadynError, match="period"):
        O.periodic_orbit(gd, gd.balanced(), 0.01, 0)
    with pytest.raises(MesadynError, match="eta"):
        O.periodic_orbit(gd, gd.balanced(), -0.01, 2)
    with pytest.raises(MesadynError, match="no 2-cycle"):
        O.reduced_period2(0.5 / C2, C1, C2)

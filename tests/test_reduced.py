"""The reduced system of Lemma 5.2 and its closed form, against independent computations.

- the closed form ``(a(τ), b(τ))`` against scipy's DOP853 at rtol 1e-12, in every regime
  (Δ > 0, Δ < 0, Δ = 0 logistic, the stable manifold a0 = −b0, the origin, ab < 0 crossing 0,
  both branches of the hyperbola, starts above the hyperbola);
- near the saddle (where a float solver cannot be trusted) against a 40-digit mpmath solve;
- the ODE itself by central differences of the closed form, and the invariant a² − b²;
- the limit point, the exponential rate (vs the Jacobian), the time to reach a distance;
- Lemma 5.3's surrogate as the potential of the flow, Lemma 5.4's PL identity.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from mesadyn.errors import MesadynError
from mesadyn.process import gaussian, ones, sparse
from mesadyn.reduced import ReducedSystem

SYSTEMS = {
    "gaussian1": ReducedSystem.from_family(gaussian(5, 1.0), 100),
    "gaussian0.5": ReducedSystem.from_family(gaussian(5, 0.5), 100),
    "sparse2": ReducedSystem.from_family(sparse(5, 2.0), 100),
    "ones-masked": ReducedSystem.from_family(ones(5), 100),
}

#: (a0, b0, regime)
STARTS = [
    (0.1, 0.1, "Δ=0 logistic from below"),
    (2.0, 2.0, "Δ=0 logistic from above"),
    (-0.3, -0.3, "Δ=0, negative branch"),
    (0.7, -0.7, "stable manifold a=−b"),
    (-1.2, 1.2, "stable manifold, other side"),
    (0.5, 1.5, "Δ<0"),
    (-0.5, -1.5, "Δ<0, negative branch"),
    (1.5, 0.2, "Δ>0"),
    (0.3, -0.5, "ab<0 crossing to the negative branch"),
    (-0.3, 0.2, "ab<0 crossing, Δ>0"),
    (0.0, 0.4, "a0=0"),
    (5.0, -4.0, "ab<0, far"),
    (3.0, 0.001, "large Δ"),
    (1e-3, -1e-3 + 1e-6, "near the stable manifold"),
    (1e-8, 2e-8, "near the origin"),
]


def _numeric(system: ReducedSystem, a0: float, b0: float, tau: np.ndarray) -> np.ndarray:
    def f(_t: float, y: np.ndarray) -> list[float]:
        da, db = system.rhs(y[0], y[1])
        return [float(da), float(db)]

    atol = 1e-15 * min(1.0, math.hypot(a0, b0))  # relative accuracy also near the origin
    sol = solve_ivp(f, (0.0, float(tau[-1])), [a0, b0], method="DOP853", rtol=1e-12,
                    atol=atol, t_eval=tau)
    assert sol.success
    return sol.y


def _horizon(system: ReducedSystem, a0: float, b0: float) -> float:
    return min(60.0 / system.rate(a0, b0), 20.0)


@pytest.mark.parametrize("name", list(SYSTEMS))
@pytest.mark.parametrize("a0,b0,regime", STARTS)
def test_closed_form_matches_dop853(name: str, a0: float, b0: float, regime: str) -> None:
    system = SYSTEMS[name]
    tau = np.linspace(0.0, _horizon(system, a0, b0), 60)
    y = _numeric(system, a0, b0, tau)
    a, b = system.solution(a0, b0, tau)
    scale = max(1.0, abs(a0) + abs(b0))
    assert np.max(np.hypot(a - y[0], b - y[1])) < 1e-9 * scale, regime
    assert a[0] == pytest.approx(a0, abs=1e-15 * scale)
    assert b[0] == pytest.approx(b0, abs=1e-15 * scale)


@pytest.mark.parametrize("a0,b0,regime", STARTS)
def test_invariant_and_ode_residual(a0: float, b0: float, regime: str) -> None:
    system = SYSTEMS["gaussian1"]
    tau = np.linspace(0.0, _horizon(system, a0, b0), 40)[1:]
    a, b = system.solution(a0, b0, tau)
    delta = (a0 - b0) * (a0 + b0)
    assert np.max(np.abs(a * a - b * b - delta)) < 1e-13 * max(1.0, a0 * a0 + b0 * b0)
    h = 1e-6 / system.rate(a0, b0)  # central differences vs Lemma 5.2's right-hand side
    ap, bp = system.solution(a0, b0, tau + h)
    am, bm = system.solution(a0, b0, tau - h)
    da, db = system.rhs(a, b)
    scale = max(1.0, float(np.max(np.abs(da))), float(np.max(np.abs(db))))
    assert np.max(np.abs((ap - am) / (2 * h) - da)) < 1e-5 * scale, regime
    assert np.max(np.abs((bp - bm) / (2 * h) - db)) < 1e-5 * scale, regime


@pytest.mark.slow
@pytest.mark.parametrize("a0,b0", [(0.2, -0.2 + 1e-14), (1e-3, -1e-3 - 1e-12)])
def test_closed_form_near_the_saddle_against_mpmath(a0: float, b0: float) -> None:
    mp = pytest.importorskip("mpmath")
    system = SYSTEMS["gaussian1"]
    mp.mp.dps = 40
    c1, c2 = mp.mpf(system.c1), mp.mpf(system.c2)
    sol = mp.odefun(lambda _t, y: [y[1] * (c2 - c1 * y[0] * y[1]),
                                   y[0] * (c2 - c1 * y[0] * y[1])], 0, [mp.mpf(a0), mp.mpf(b0)])
    for t in (0.02, 0.06, 0.1):
        ref = sol(t)
        a, b = system.solution(a0, b0, t)
        assert abs(float(ref[0]) - float(a)) < 1e-13
        assert abs(float(ref[1]) - float(b)) < 1e-13


@pytest.mark.parametrize("a0,b0", [(0.1, 0.1), (0.5, 1.5), (2.0, 2.0), (1.5, 0.2), (0.3, -0.5),
                                   (-0.5, -1.5), (-0.3, 0.2)])
def test_limit_is_on_the_hyperbola_branch(a0: float, b0: float) -> None:
    system = SYSTEMS["sparse2"]
    a, b = system.limit(a0, b0)
    assert a * b == pytest.approx(system.ab_star, rel=1e-13)
    assert a * a - b * b == pytest.approx(a0 * a0 - b0 * b0, abs=1e-13)
    # the branch: the sign of a (Δ > 0) or of b (Δ < 0) is kept; a0 b0 > 0 keeps its sign
    if a0 * a0 > b0 * b0:
        assert math.copysign(1, a) == math.copysign(1, a0)
    elif b0 * b0 > a0 * a0:
        assert math.copysign(1, b) == math.copysign(1, b0)
    y = _numeric(system, a0, b0, np.array([0.0, 40.0 / system.rate(a0, b0)]))
    assert np.hypot(y[0, -1] - a, y[1, -1] - b) < 1e-9


def test_stable_manifold_and_origin() -> None:
    system = SYSTEMS["gaussian1"]
    assert system.limit(0.7, -0.7) == (0.0, 0.0)
    a, b = system.solution(0.7, -0.7, np.linspace(0, 0.1, 20))
    np.testing.assert_array_equal(a, -b)
    assert np.all(np.diff(np.abs(a)) < 0)
    a, b = system.solution(0.0, 0.0, np.linspace(0, 1, 5))
    assert np.all(a == 0) and np.all(b == 0)


@pytest.mark.parametrize("a0,b0", [(0.1, 0.1), (0.5, 1.5), (3.0, 0.001), (0.7, -0.7)])
def test_rate_is_the_transverse_eigenvalue(a0: float, b0: float) -> None:
    system = SYSTEMS["gaussian1"]
    a, b = system.limit(a0, b0)
    eig = np.linalg.eigvalsh(system.jacobian(a, b))
    rate = system.rate(a0, b0)
    if a == 0.0 and b == 0.0:  # the saddle: eigenvalues ±c2, the stable one along a = −b
        assert eig == pytest.approx([-system.c2, system.c2], rel=1e-12)
    assert rate == pytest.approx(-eig.min(), rel=1e-10)
    # and the measured decay of the distance, late in the run
    t = np.array([12.0, 13.0]) / rate
    dist = system.distance_to_limit(a0, b0, t)
    assert -math.log(dist[1] / dist[0]) == pytest.approx(1.0, rel=1e-3)


@pytest.mark.parametrize("a0,b0", [(0.1, 0.1), (2.0, 2.0), (0.5, 1.5), (1.5, 0.2), (0.3, -0.5),
                                   (0.7, -0.7), (-2.0, -1.0)])
@pytest.mark.parametrize("distance", [1e-2, 1e-6, 1e-11])
def test_time_to_reach(a0: float, b0: float, distance: float) -> None:
    system = SYSTEMS["gaussian1"]
    tau = system.time_to_reach(a0, b0, distance)
    assert tau > 0
    assert float(system.distance_to_limit(a0, b0, tau)) == pytest.approx(distance, rel=1e-7)
    # first passage: the distance before tau is larger (sampled), and DOP853 agrees at tau
    before = system.distance_to_limit(a0, b0, np.linspace(0, tau, 50)[:-1])
    assert np.all(before > distance)
    y = _numeric(system, a0, b0, np.array([0.0, tau]))
    al, bl = system.limit(a0, b0)
    assert np.hypot(y[0, -1] - al, y[1, -1] - bl) == pytest.approx(distance, rel=1e-3,
                                                                    abs=1e-12)


def test_time_to_reach_zero_when_already_close() -> None:
    system = SYSTEMS["gaussian1"]
    a, b = system.limit(0.5, 1.5)
    assert system.time_to_reach(a, b, 1e-3) == 0.0


def test_surrogate_is_the_potential_and_pl() -> None:
    system = SYSTEMS["sparse2"]
    rng = np.random.default_rng(0)
    for a, b in rng.normal(size=(10, 2)):
        h = 1e-6
        ga = (system.surrogate(a + h, b) - system.surrogate(a - h, b)) / (2 * h)
        gb = (system.surrogate(a, b + h) - system.surrogate(a, b - h)) / (2 * h)
        da, db = system.rhs(a, b)
        assert -ga == pytest.approx(float(da), rel=1e-6, abs=1e-6)
        assert -gb == pytest.approx(float(db), rel=1e-6, abs=1e-6)
        assert da * da + db * db == pytest.approx(
            float(system.pl_constant(a, b) * system.surrogate(a, b)), rel=1e-10)


def test_bad_input() -> None:
    system = SYSTEMS["gaussian1"]
    with pytest.raises(MesadynError, match="τ"):
        system.solution(0.1, 0.1, -1.0)
    with pytest.raises(MesadynError, match="a0"):
        system.solution(float("nan"), 0.1, 1.0)
    with pytest.raises(MesadynError, match="distance"):
        system.time_to_reach(0.1, 0.1, 0.0)
    with pytest.raises(MesadynError, match="c1"):
        ReducedSystem(-1.0, 1.0)


# ---- settling and horizon: one home (issue 11) -----------------------------------------------
@pytest.mark.parametrize("a0,b0,regime", STARTS)
@pytest.mark.parametrize("tol", [1e-2, 1e-9])
def test_settle_time_ab_measure(a0: float, b0: float, regime: str, tol: float) -> None:
    """``|ab − ab*| = tol·ab*`` exactly at the returned τ (closed form), not before (sampled),
    and DOP853 agrees; on the stable manifold the distance to the saddle has shrunk by tol."""
    system = SYSTEMS["gaussian1"]
    tau = system.settle_time(a0, b0, tol, measure="ab")
    p = system.ab_star
    if a0 == -b0:
        assert float(system.distance_to_limit(a0, b0, tau)) == pytest.approx(
            tol * math.hypot(a0, b0), rel=1e-7)
        return
    a, b = system.solution(a0, b0, tau)
    assert abs(float(a * b) - p) == pytest.approx(tol * p, rel=1e-5)
    a, b = system.solution(a0, b0, np.linspace(0.0, tau, 60)[:-1])
    assert np.all(np.abs(a * b - p) > tol * p)
    if tol == 1e-2:
        y = _numeric(system, a0, b0, np.array([0.0, tau]))
        assert abs(y[0, -1] * y[1, -1] - p) == pytest.approx(tol * p, rel=1e-6)


def test_settle_time_distance_measure_and_horizon() -> None:
    system = SYSTEMS["gaussian1"]
    for a0, b0 in [(0.5, 1.5), (2.0, 2.0), (3.0, 0.001), (1e-8, 2e-8)]:
        tau = system.settle_time(a0, b0)  # default tol 1e-12, relative to max(1, ‖(a0, b0)‖)
        scale = max(1.0, math.hypot(a0, b0))
        assert tau == system.time_to_reach(a0, b0, 1e-12 * scale)
        assert float(system.distance_to_limit(a0, b0, tau)) == pytest.approx(1e-12 * scale,
                                                                             rel=1e-6)
        # the CLI's automatic --t-end of 0.1 (cli/integrate._auto_t_end), bit for bit
        assert system.horizon(a0, b0) == max(3.0 * tau, 50.0 / system.c2)
    a, b = system.limit(0.5, 1.5)
    assert system.settle_time(a, b) == 0.0 and system.horizon(a, b) == 50.0 / system.c2
    assert system.settle_time(a, b, 1e-3, measure="ab") == 0.0
    assert system.settle_time(0.0, 0.0, 1e-3, measure="ab") == 0.0
    with pytest.raises(MesadynError, match="tol"):
        system.settle_time(0.5, 1.5, 0.0)
    with pytest.raises(MesadynError, match="unknown settle measure 'time'"):
        system.settle_time(0.5, 1.5, 1e-3, measure="time")


@pytest.mark.parametrize("name", list(SYSTEMS))
@pytest.mark.parametrize("a0,b0,regime", STARTS)
def test_max_rate_is_the_largest_jacobian_radius_on_the_orbit(name: str, a0: float, b0: float,
                                                              regime: str) -> None:
    system = SYSTEMS[name]
    taus = np.concatenate([[0.0], np.geomspace(1e-6, 1.0, 400) * system.horizon(a0, b0)])
    a, b = system.solution(a0, b0, taus)
    radii = [np.abs(np.linalg.eigvalsh(system.jacobian(x, y))).max()
             for x, y in zip(a, b, strict=True)]
    rate = system.max_rate(a0, b0)
    assert max(radii) <= rate * (1 + 1e-9)
    assert max(radii) == pytest.approx(rate, rel=1e-6)

"""Where GD lands (:mod:`mesadyn.analysis.gd_landing`): the reduced limit's imbalance against
the exact product ``Δ0 Π(1 − η²r_k²)`` along GD's own trajectory, the flow's closed-form limit
against the integrated flow, the modified flow against its exact drift ``dΔ/dτ = −η r² Δ``,
the stability bound, ab at every limit, and the full-space landing against the flow's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from mesadyn.analysis import gd_landing as GLd
from mesadyn.analysis.gd_map import reduced_step

C1, C2 = 290.9706484691779, 54.0


def test_reduced_landing_delta_is_the_product_over_the_trajectory():
    a0, b0 = 0.5, 1.5
    etas = [1e-3, 2e-3, 3e-3]  # η·λ_max(θ0) = 0.73, 1.45, 2.18 (the last a catapult)
    land = GLd.reduced_landing(a0, b0, etas, C1, C2, modified=False)
    for i, eta in enumerate(etas):
        assert land.converged[i]
        a, b, prod = a0, b0, 1.0
        for _ in range(land.steps[i]):
            r = C2 - C1 * a * b
            prod *= 1 - eta * eta * r * r
            a, b = (float(v) for v in reduced_step(a, b, eta, C1, C2))
        assert land.delta[i] == pytest.approx((a0 * a0 - b0 * b0) * prod, rel=1e-9, abs=1e-12)
        assert land.ab[i] == pytest.approx(C2 / C1, rel=1e-10)
        assert abs(land.delta[i]) <= land.bound[i] * (1 + 1e-9)
    # larger steps balance |a| and |b| more (Wang et al.'s balancing)
    assert abs(land.abs_gap[0]) > abs(land.abs_gap[1]) > abs(land.abs_gap[2])


def test_flow_limit_is_the_integrated_flow():
    a0, b0 = 0.3, 1.2

    def rhs(_t, y):
        r = C2 - C1 * y[0] * y[1]
        return [y[1] * r, y[0] * r]

    sol = solve_ivp(rhs, (0, 2.0), [a0, b0], method="LSODA", rtol=1e-12, atol=1e-14)
    assert GLd.flow_limit(a0, b0, C1, C2) == pytest.approx(tuple(sol.y[:, -1]), rel=1e-8)


def test_modified_flow_drift_is_exact():
    """Along the reduced modified flow Δ(τ) = Δ0 exp(−η ∫ r² dτ): integrate Δ's own equation
    beside (a, b) and compare with the workflow's end value."""
    from mesadyn.analysis.gd_map import reduced_hessian

    a0, b0, eta = 0.5, 1.5, 2e-3

    def rhs(_t, y):
        r = C2 - C1 * y[0] * y[1]
        g = np.array([-y[1] * r, -y[0] * r])
        v = -(g + 0.5 * eta * reduced_hessian(y[0], y[1], C1, C2) @ g)
        return [v[0], v[1], -eta * r * r]  # the last: log(Δ/Δ0)

    sol = solve_ivp(rhs, (0, 5.0), [a0, b0, 0.0], method="DOP853", rtol=1e-12, atol=1e-14)
    want = (a0 * a0 - b0 * b0) * math.exp(sol.y[2, -1])
    assert sol.y[0, -1] ** 2 - sol.y[1, -1] ** 2 == pytest.approx(want, rel=1e-9)
    land = GLd.reduced_landing(a0, b0, [eta], C1, C2)
    assert land.modified_delta[0] == pytest.approx(want, rel=1e-8)


def test_stability_bound_and_no_landing_beyond_it():
    assert GLd.stability_bound(1.0 / C2, C1, C2) == pytest.approx(0.0, abs=1e-8)
    assert math.isnan(GLd.stability_bound(1.01 / C2, C1, C2))
    land = GLd.reduced_landing(0.1, 0.1, [1.05 / C2], C1, C2, max_steps=2000, modified=False)
    assert not land.converged[0] and math.isnan(land.delta[0])


def test_field_landing_matches_the_flow_for_small_steps():
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import gaussian_init
    from mesadyn.process import gaussian

    f = make_field(FieldSpec("exact", gaussian(2, 1.0), 6))
    th0 = gaussian_init(2, 0.1, seed=2).numpy()
    land = GLd.field_landing(f, th0, [5e-3, 4e-2], max_steps=20_000, test=500)
    assert all(land.landed)
    small, large = land.gd
    assert small is not None and large is not None
    flow = land.flow
    # every limit is a minimiser with Theorem 4.1's ab; the in-context ratio is the flow's
    for lim in (small, large):
        assert lim.ab == pytest.approx(flow.ab, rel=1e-9)
        assert lim.loss == pytest.approx(flow.loss, rel=1e-12)
        assert lim.ratio == pytest.approx(flow.ratio, abs=1e-9)
    # the small step lands next to the flow's limit, the large one (past the balanced point's
    # critical step 0.0352, below the flattest point's 0.0436) farther along the orbit, at
    # the edge of its stable part
    assert abs(small.invariant - flow.invariant) < abs(large.invariant - flow.invariant)
    assert 4e-2 * large.lambda_max == pytest.approx(2.0, abs=0.1)

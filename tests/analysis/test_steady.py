"""Where a flow stopped (:mod:`mesadyn.analysis.steady`): the curvature against finite
differences, a saddle told from a minimum, and the verdict of a flow stopped near θ = 0."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.steady import curvature, stop_verdict
from mesadyn.field import FieldSpec, fd_hessian, make_field
from mesadyn.flow import integrate
from mesadyn.model import diagonal_init, free_mask, gaussian_init
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian
from mesadyn.theory import constants

FAM, T = gaussian(2, 1.0), 6


@pytest.fixture(scope="module")
def field():
    return make_field(FieldSpec("exact", FAM, T))


def test_curvature_matches_finite_differences_at_the_saddle(field):
    """At θ = 0 (the saddle of Lemma 5.2) the exact Hessian's extreme eigenvalues, and the count
    of negative ones, equal those of a central-difference Hessian of the gradient."""
    theta = np.zeros(18 * 4)
    free = free_mask("none", 2)
    c = curvature(field, theta, free)
    H = fd_hessian(field, theta)[np.ix_(free, free)]
    ev = np.linalg.eigvalsh(0.5 * (H + H.T))
    assert c.saddle and c.n_negative == int(np.sum(ev < -1e-6 * np.abs(ev).max()))
    assert c.lambda_min == pytest.approx(ev[0], rel=1e-6)
    assert c.lambda_max == pytest.approx(ev[-1], rel=1e-6)


def test_the_balanced_point_is_a_minimum(field):
    s = math.sqrt(constants(FAM, T).ab_star)
    c = curvature(field, diagonal_init(2, s, s).numpy(), free_mask("none", 2))
    assert not c.saddle and c.lambda_max > 0


def test_a_flow_stopped_near_the_saddle_is_a_saddle_not_converged(field):
    """The steady-state test fires at τ = 0 for a start of size 1e-12 (its gradient is ~1e-12):
    the flow layer says converged; the verdict says saddle."""
    theta0 = gaussian_init(2, 1e-12, 1)
    res = integrate(field, theta0, t_end=10.0, solver="LSODA", steady_tol=1e-9, n_save=2)
    assert res.status is Outcome.CONVERGED and res.t[-1] == 0.0
    status, message = stop_verdict(res, field)
    assert status is Outcome.SADDLE and not status.ok and "negative" in message


def test_a_converged_flow_at_a_minimum_keeps_its_verdict(field):
    res = integrate(field, diagonal_init(2, 0.5, 1.5), t_end=200.0, solver="LSODA",
                    steady_tol=1e-9, n_save=2)
    assert res.status is Outcome.CONVERGED and res.t[-1] > 0
    assert stop_verdict(res, field)[0] is Outcome.CONVERGED
    g = field.grad(torch.as_tensor(res.final)).numpy()
    assert np.abs(g).max() < 1e-9


def test_curvatures_of_a_batch_equal_one_by_one(field):
    """:func:`curvatures` (one batched Hessian, the scaling orbit projected out per row) gives
    each row's :func:`curvature`; an overflowing row has none (NaN, no negative count)."""
    from mesadyn.analysis.steady import curvatures

    free = free_mask(None, 2)
    rows = np.stack([np.zeros(72), diagonal_init(2, 0.42559614128, 0.42559614128).numpy(),
                     gaussian_init(2, 0.3, 4).numpy(), diagonal_init(2, 1e200, 1e200).numpy()])
    batch = curvatures(field, rows, free)
    for row, c in zip(rows[:3], batch[:3], strict=True):
        one = curvature(field, row, free)
        assert c.n_negative == one.n_negative
        assert c.lambda_min == pytest.approx(one.lambda_min, rel=1e-10, abs=1e-12)
        assert c.lambda_max == pytest.approx(one.lambda_max, rel=1e-10)
    assert batch[0].n_negative == 2 and batch[1].n_negative == 0  # saddle; a minimum
    assert math.isnan(batch[3].lambda_min) and batch[3].n_negative == 0
    assert math.isnan(curvature(field, rows[3], free).lambda_min)


def test_leave_saddle_continues_a_flow_stopped_at_a_saddle(field):
    """A flow stopped by the steady-state test at τ = 0 near the saddle is judged ``saddle``
    and continued without the test to its horizon, where it has reached the hyperbola and is
    ``converged``; a flow stopped at a minimum is returned as it is."""
    from mesadyn.analysis.steady import leave_saddle

    th0 = gaussian_init(2, 1e-12, 1)
    flow = integrate(field, th0, t_end=50.0, steady_tol=1e-9)
    assert flow.status is Outcome.CONVERGED and flow.t[-1] == 0.0

    def leg(theta, span):
        return integrate(field, theta, t_end=span, steady_tol=0.0)

    joined, status, message = leave_saddle(flow, field, 50.0, 1e-9, leg, 200)
    assert status is Outcome.CONVERGED and joined.t[-1] == pytest.approx(50.0)
    from mesadyn.model import ab

    c = constants(FAM, T)
    np.testing.assert_allclose(ab(torch.as_tensor(joined.final)).numpy(), c.ab_star, rtol=1e-6)
    again, status2, _ = leave_saddle(joined, field, 50.0, 1e-9, leg, 200)
    assert again is joined and status2 is Outcome.CONVERGED

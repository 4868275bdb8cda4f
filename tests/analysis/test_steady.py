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

"""The central flow (:mod:`mesadyn.analysis.central_flow`): the exact third derivative from
gradients against autodiff of the HVP, the semidefinite complementarity problem's KKT
conditions, the gradient flow below the edge, and — against GD itself — the time-averaged
trajectory and loss at the edge of stability (d = 2, T = 6, from a Gaussian init, at
η = 0.05, past the largest stable step of every diagonal minimiser — 0.0436 with both
coordinates' signs alike, 0.0459 with one flipped — so GD never converges)."""

from __future__ import annotations

import numpy as np
import pytest

from mesadyn.analysis import central_flow as CF
from mesadyn.analysis.gd_flow import flow_at_steps
from mesadyn.field import FieldSpec, make_field
from mesadyn.model import gaussian_init
from mesadyn.process import gaussian


@pytest.fixture(scope="module")
def f2():
    return make_field(FieldSpec("exact", gaussian(2, 1.0), 6))


def test_third_derivative_from_gradients_is_autodiff(f2):
    rng = np.random.default_rng(0)
    for _ in range(3):
        th, w = rng.normal(0, 0.5, f2.n_params), rng.normal(size=f2.n_params)
        poly = CF.sharpness_gradient(f2, th, w)
        auto = CF.sharpness_gradient(f2, th, w, method="autodiff")
        np.testing.assert_allclose(poly, auto, rtol=1e-8, atol=1e-9 * np.abs(auto).max())


@pytest.mark.parametrize("k", [1, 2, 3])
def test_sdcp_solution_satisfies_its_kkt_conditions(k):
    rng = np.random.default_rng(k)
    G = rng.normal(size=(k, k, 7))
    G = 0.5 * (G + G.transpose(1, 0, 2))
    B = np.einsum("ijn,lmn->ijlm", G, G)
    A = rng.normal(size=(k, k))
    A = 0.5 * (A + A.T) - 0.5 * np.eye(k)
    A[0, 0] = -1.0 - float(np.abs(A).sum())  # at least one direction needs X > 0
    X = CF.solve_sdcp(A, B)
    R = A + np.einsum("ijlm,lm->ij", B, X)
    assert np.linalg.eigvalsh(X).min() >= -1e-10
    assert np.linalg.eigvalsh(R).min() >= -1e-8
    assert abs(float(np.sum(X * R))) <= 1e-8 * max(1.0, float(np.abs(X).max()))
    assert np.trace(X) > 0


def test_below_the_edge_it_is_the_gradient_flow(f2):
    """With every eigenvalue below 1.95/η the central flow is the gradient flow, integrated
    by Euler substeps: one substep per step is GD itself, and the error against the exact
    flow falls like 1/substeps."""
    from mesadyn.analysis.gd_regime import descend

    th0 = gaussian_init(2, 0.3, seed=1).numpy()
    eta, steps = 5e-3, 40
    gd = descend(f2, th0, eta, steps, sharpness_every=0).theta
    cf1 = CF.central_flow(f2, th0, eta, steps, substeps=1)
    assert cf1.edge_steps == 0 and np.all(cf1.predicted_loss == cf1.loss)
    np.testing.assert_allclose(cf1.theta, gd, rtol=0, atol=1e-14)
    flow = flow_at_steps(f2, th0, eta, steps)
    errs = [float(np.abs(CF.central_flow(f2, th0, eta, steps, substeps=sub).theta - flow).max())
            for sub in (4, 8)]
    assert errs[1] == pytest.approx(errs[0] / 2, rel=0.1)


def test_at_the_edge_it_predicts_gd_s_time_average(f2):
    th0 = gaussian_init(2, 0.01, seed=1).numpy()
    eta = 0.05
    cmp = CF.compare_central(f2, th0, eta, 200)
    cf = cmp.central
    assert cmp.edge_steps > 150
    # the sharpness is held at 2/η (to the Euler substep's error)
    assert float((cf.sharpness[cf.variance > 0] * eta).max()) < 2.02
    assert cf.sharpness_end * eta == pytest.approx(2.0, rel=1e-3)
    # GD's time-averaged θ and loss: the central flow is far closer than the modified flow
    assert cmp.central_theta_gap_end < 0.1 * cmp.modified_theta_gap_end
    assert cmp.central_loss_gap_mean < 0.5 * cmp.modified_loss_gap_mean
    assert cmp.central_loss_gap_mean < 0.06
    # the predicted loss is above L(θ) by tr(X)/η, the oscillation's share
    np.testing.assert_allclose(cf.predicted_loss - cf.loss, cf.variance / eta, rtol=1e-12)


def test_moving_average_and_bad_input(f2):
    x = np.arange(10.0)
    np.testing.assert_allclose(CF.moving_average(x, 1), x)
    np.testing.assert_allclose(CF.moving_average(x, 2)[1:], x[1:] - 0.5)
    alt = np.array([1.0, -1.0] * 5)
    np.testing.assert_allclose(CF.moving_average(alt, 2), 0.0)  # a 2-cycle averages out
    from mesadyn.errors import MesadynError

    with pytest.raises(MesadynError, match="method"):
        CF.sharpness_gradient(f2, np.zeros(f2.n_params), np.ones(f2.n_params), method="fd")
    with pytest.raises(MesadynError, match="diverged"):
        CF.compare_central(f2, gaussian_init(2, 0.5, seed=1).numpy(), 5.0, 20)

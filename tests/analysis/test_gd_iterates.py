"""k steps of (preconditioned) GD on the in-context least squares: the autodiff prediction
against hand-written GD and Corollary 4.1's one step, the closed-form iterates against both,
and their Jacobian against central differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.analysis.gd_iterates import GDIterates, Preconditioner, Side, gd_prediction
from mesadyn.analysis.mesa import mesa_check, ols_gd_step
from mesadyn.errors import MesadynError
from mesadyn.models import PAPER
from mesadyn.process import gaussian, make_generator, sample, sequences


def _x(fam, n=24, T=10, seed=3):
    x1, lam = sample(fam, n, T, make_generator(seed))
    return sequences(x1, lam, T)


def _mats(k, d, seed, scale=0.5):
    return scale * np.random.default_rng(seed).standard_normal((k, d, d))


def test_one_step_is_corollary_41_and_the_paper_model():
    d, a0, b0 = 3, 0.7, 1.3
    theta = PAPER.diagonal_init(d, a0, b0)
    x = _x(gaussian(d, 0.8))
    y_model = PAPER.predict(theta, x)
    assert mesa_check(theta, x).max_rel_err < 1e-12
    for t in range(2, x.shape[1] + 1):
        W = ols_gd_step(x, t, a0 * b0 / (t - 1))
        y_ols = torch.einsum("nab,nb->na", W, x[:, t - 1])
        y_gd = gd_prediction(x, t, [a0 * b0])
        assert (y_gd - y_ols).abs().max() < 1e-12
        assert (y_gd - y_model[:, t - 2]).abs().max() < 1e-12


def _hand_gd(x, t, etas, lambdas=None):
    """GD with the closed-form gradient ∇L = −Σ (x_{i+1} − W x_i) x_i^*; this is the steepest
    descent direction, which is what torch's complex gradient (2 ∂L/∂W̄) is.  A step is a number
    η (``η I``) or a matrix Γ on the right; ``lambdas`` the matrices on the left."""
    n, _, d = x.shape
    W = torch.zeros(n, d, d, dtype=torch.complex128)
    xi, xn = x[:, : t - 1], x[:, 1:t]
    for j, eta in enumerate(etas):
        r = xn - torch.einsum("nab,nib->nia", W, xi)
        grad = -torch.einsum("nia,nib->nab", r, xi.conj())
        gam = torch.as_tensor(eta * np.eye(d) if np.ndim(eta) == 0 else eta, dtype=torch.complex128)
        lam = torch.eye(d, dtype=torch.complex128) if lambdas is None else torch.as_tensor(
            lambdas[j], dtype=torch.complex128)
        W = W - lam @ grad @ gam / (t - 1)
    return torch.einsum("nab,nb->na", W, x[:, t - 1])


@pytest.mark.parametrize("etas", [[0.9, -0.4], [0.3, 1.1, 0.5]])
def test_k_steps_match_hand_written_gd(etas):
    x = _x(gaussian(4, 0.6), n=16, T=9)
    for t in (2, 5, 9):
        assert (gd_prediction(x, t, etas) - _hand_gd(x, t, etas)).abs().max() < 1e-12


def test_the_closed_form_iterates_match_autodiff_gd():
    x = _x(gaussian(3, 0.7), n=8, T=8)
    ts = [2, 4, 8]
    etas = np.array([0.8, -0.3, 0.6])
    closed = GDIterates(x, ts).predict(etas[:, None, None] * np.eye(3))
    for j, t in enumerate(ts):
        ref = gd_prediction(x, t, etas.tolist()).numpy()
        assert np.abs(closed[:, j] - ref).max() < 1e-12


@pytest.mark.parametrize("side", list(Side))
def test_preconditioned_iterates_match_autodiff_and_hand_written_gd(side):
    d, k = 3, 3
    x = _x(gaussian(d, 0.7), n=8, T=8)
    gammas = _mats(k, d, 1) if side.right else np.stack([np.eye(d)] * k)
    lambdas = np.eye(d) + _mats(k, d, 2, 0.3) if side.left else None
    ts = [2, 5, 8]
    closed = GDIterates(x, ts).predict(gammas, lambdas)
    for j, t in enumerate(ts):
        auto = gd_prediction(x, t, list(gammas), None if lambdas is None else list(lambdas))
        hand = _hand_gd(x, t, list(gammas), lambdas)
        assert (auto - hand).abs().max() < 1e-12
        assert np.abs(closed[:, j] - auto.numpy()).max() < 1e-12


@pytest.mark.parametrize("structure", list(Preconditioner))
@pytest.mark.parametrize("side", list(Side))
def test_the_jacobian_is_exact(structure, side):
    """ŷ is linear in every single parameter, so a central difference of any width is exact."""
    d, k = 2, 3
    gd = GDIterates(_x(gaussian(d, 0.8), n=6, T=6))
    size = structure.size(d)
    p = np.random.default_rng(4).standard_normal(k * size * (2 if side is Side.BOTH else 1))

    def mats(q):
        n = k * size
        lam = structure.matrices(q[:n], k, d) if side.left else np.stack([np.eye(d)] * k)
        gam = structure.matrices(q[n if side.left else 0:], k, d) if side.right else \
            np.stack([np.eye(d)] * k)
        return gam, lam

    J = gd.jacobian(*mats(p), structure, side)
    h = 0.5
    for i in range(p.size):
        e = np.zeros(p.size)
        e[i] = h
        fd = (gd.predict(*mats(p + e)) - gd.predict(*mats(p - e))) / (2 * h)
        assert np.abs(J[..., i] - fd).max() < 1e-11 * max(1.0, np.abs(fd).max())


def test_bad_input_names_the_value():
    x = _x(gaussian(2, 1.0), n=4, T=5)
    with pytest.raises(MesadynError, match="steps"):
        gd_prediction(x, 3, [])
    with pytest.raises(MesadynError, match=r"steps\[1\] must be a number or a real 2x2"):
        gd_prediction(x, 3, [0.5, np.eye(3)])
    with pytest.raises(MesadynError, match="left must hold one matrix per step"):
        gd_prediction(x, 3, [0.5, 0.5], left=[np.eye(2)])

"""Newton and the curvature verdict of any model (:mod:`mesadyn.analysis.model_fixedpoint`).

- the declared symmetry tangents are orthogonal to the gradient at any point (the loss is
  constant along their orbits), and a mask keeps only the combinations that move free entries;
- central differences of the gradient agree with the exact (autodiff) Hessian, over the free
  entries and over a basis;
- the verdict is the spectrum across the orbits: a constructed matrix with known
  eigenvalues, and the origin of the two-layer model (a critical point whose Hessian has the
  ``[[0, B], [Bᵀ, 0]]`` form, so its spectrum is symmetric about 0: a saddle);
- Newton from near a minimum reaches ``max|∇L| <= tol`` (checked by a fresh gradient), moves
  across the orbits only, and lands on the same point with the exact Hessian and with
  differences.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.analysis.model_fixedpoint import (
    CriticalKind,
    curvature_verdict,
    difference_hessian,
    free_hessian,
    newton_polish,
    projected_curvature,
    symmetry_basis,
    transverse_basis,
)
from mesadyn.errors import MesadynError
from mesadyn.field import FiniteModelField
from mesadyn.models import DeepLinearAttention
from mesadyn.process import gaussian

MODEL = DeepLinearAttention(2)


def _field(d: int = 1, T: int = 4, m: int = 32) -> FiniteModelField:
    return FiniteModelField(MODEL, gaussian(d), T, m, 1)


def _point(d: int, seed: int) -> np.ndarray:
    return (MODEL.diagonal_init(d, 0.4, 0.7) + MODEL.gaussian_init(d, 0.1, seed)).numpy()


def _grad(fld: FiniteModelField, th: np.ndarray) -> np.ndarray:
    return fld.loss_and_grad(torch.from_numpy(th))[1].numpy()


def test_the_symmetry_tangents_are_orthogonal_to_the_gradient() -> None:
    d = 2
    fld, th = _field(d, 5), _point(d, 3)
    free = MODEL.free_mask("none", d)
    U = symmetry_basis(MODEL, th, free)
    # two layer scalings and 2d² = 8 stream shears, independent at a generic point
    assert U.shape == (int(free.sum()), 10)
    assert np.allclose(U.T @ U, np.eye(10), atol=1e-12)
    g = _grad(fld, th)[free]
    assert np.abs(U.T @ g).max() <= 1e-10 * np.abs(g).max()
    Z = transverse_basis(MODEL, th, free)
    assert Z.shape == (U.shape[0], U.shape[0] - 10) and np.abs(Z.T @ U).max() < 1e-12
    # on the layered diagonals only the per-layer scalings keep the other entries fixed
    diag = MODEL.diagonal_init(d, 0.4, 0.7).numpy()
    assert symmetry_basis(MODEL, diag, MODEL.free_mask("diagonal", d)).shape[1] == 2


def test_differences_agree_with_the_exact_hessian() -> None:
    fld, th = _field(), _point(1, 4)
    free = MODEL.free_mask("none", 1)
    H = free_hessian(fld, th, free)
    D = difference_hessian(lambda x: _grad(fld, x), th, free)
    assert np.abs(D - H).max() <= 1e-6 * np.abs(H).max()
    B = np.linalg.qr(np.random.default_rng(0).normal(size=(int(free.sum()), 5)))[0]
    basis = np.zeros((th.size, 5))
    basis[free] = B
    Db = difference_hessian(lambda x: _grad(fld, x), th, free, basis=basis)
    assert np.abs(Db - B.T @ H @ B).max() <= 1e-6 * np.abs(H).max()


def test_the_verdict_is_the_spectrum_across_the_orbits() -> None:
    Q = np.linalg.qr(np.random.default_rng(1).normal(size=(5, 5)))[0]
    H = Q @ np.diag([5.0, 2.0, 0.0, 0.0, -1.0]) @ Q.T
    c = projected_curvature(H, Q[:, 2:3])
    assert c.kind is CriticalKind.SADDLE and c.saddle and c.outcome.value == "saddle"
    assert (c.n_negative, c.n_flat, c.n_symmetry) == (1, 1, 1)
    assert c.lambda_min == pytest.approx(-1.0) and c.lambda_max == pytest.approx(5.0)
    m = projected_curvature(Q @ np.diag([3.0, 1.0, 0.0, 2.0, 4.0]) @ Q.T, Q[:, 2])
    assert m.kind is CriticalKind.MINIMUM and m.n_flat == 0
    assert m.smallest_positive == pytest.approx(1.0) and "a minimum" in m.describe()
    with pytest.raises(MesadynError, match="not finite"):
        projected_curvature(np.full((2, 2), np.nan), np.zeros((2, 0)))


def test_the_origin_is_a_saddle_with_a_symmetric_spectrum() -> None:
    fld = _field()
    free = MODEL.free_mask("none", 1)
    th = np.zeros(MODEL.n_params(1))
    assert np.abs(_grad(fld, th)).max() == 0.0  # ŷ has degree >= 2 in θ
    c = curvature_verdict(fld, MODEL, th, free)
    assert c.saddle and c.n_symmetry == 0  # every tangent vanishes at θ = 0
    assert c.lambda_min == pytest.approx(-c.lambda_max, rel=1e-10)
    assert c.n_negative == int((np.linalg.eigvalsh(free_hessian(fld, th, free)) > 1e-9).sum())


def test_newton_lands_on_one_point_across_the_orbits() -> None:
    from mesadyn.workflows._model_flow import model_flow

    fld = _field(1, 5, 64)
    free = MODEL.free_mask("none", 1)
    flow = model_flow(fld, MODEL.diagonal_init(1, 0.3, 0.4).numpy(), free, t_end=1e4,
                      solver="auto", rtol=1e-6, atol=1e-9, steady_tol=1e-4, max_steps=10**5,
                      n_save=2, jacobian="differences")
    start = flow.final
    exact = newton_polish(fld, MODEL, start, free, tol=1e-11)
    diff = newton_polish(fld, MODEL, start, free, tol=1e-11,
                         hessian_fn=lambda x: difference_hessian(lambda y: _grad(fld, y), x,
                                                                 free))
    for run in (exact, diff):
        assert run.converged and run.theta is not None and run.residual <= 1e-11
        assert np.abs(_grad(fld, run.theta)[free]).max() == pytest.approx(run.residual)
        assert run.residuals[0] == pytest.approx(float(flow.grad_max[-1]))
        assert run.saddles_seen == 0 and not run.curvature_at_start.saddle  # type: ignore[union-attr]
    assert exact.theta is not None and diff.theta is not None
    assert abs(exact.loss - diff.loss) <= 1e-12 * abs(exact.loss)
    assert np.abs(exact.theta - diff.theta).max() <= 1e-8
    # each step is orthogonal to the orbit where it starts: the whole move has no component
    # along the tangents beyond second order in its length
    move = (exact.theta - start)[free]
    U = symmetry_basis(MODEL, start, free)
    assert np.abs(U.T @ move).max() <= 1e-2 * np.abs(move).max()
    assert exact.hessians >= 1 and exact.gradients > exact.iterations


def test_a_tangent_that_is_no_zero_mode_is_not_projected_out() -> None:
    """Near θ = 0 a layer's scaling tangent ``(−a, b)`` is tiny and its direction arbitrary:
    at ``a = −1e-9, b = 1.3e-9`` on ``L ≈ −6ab`` it is no zero mode of ``H``, and projecting it
    out would hide the saddle's unstable direction ``(1, 1)``."""
    from mesadyn.analysis.model_fixedpoint import projected_curvature

    H = np.array([[0.0, -6.0], [-6.0, 0.0]])
    t = np.array([[1.0e-9], [1.3e-9]])
    c = projected_curvature(H, t)
    assert c.saddle and c.n_symmetry == 0 and c.lambda_min == pytest.approx(-6.0)
    # a tangent H annihilates is projected out
    H0 = np.diag([0.0, 5.0])
    c0 = projected_curvature(H0, np.array([[2.0], [0.0]]))
    assert not c0.saddle and c0.n_symmetry == 1 and c0.lambda_min == pytest.approx(5.0)

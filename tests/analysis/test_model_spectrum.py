"""The spectrum of ``−∇²L`` at a point of a model: signs, counts and zero modes explained."""

from __future__ import annotations

import numpy as np

from mesadyn.analysis.model_spectrum import model_spectrum
from mesadyn.models import model_of


def _hessian_with(mu: np.ndarray, theta: np.ndarray, model, rng) -> np.ndarray:
    """A symmetric H whose −H has eigenvalues ``mu`` on the active entries orthogonal to the
    model's declared tangents at ``theta`` and 0 elsewhere."""
    d = model.dim_of(theta)
    act = model.active_mask(d)
    S = model.symmetries(theta)
    basis = np.eye(theta.size)[:, act]
    Q, _ = np.linalg.qr(S)
    comp = basis - Q @ (Q.T @ basis)
    U, s, _ = np.linalg.svd(comp, full_matrices=False)
    U = U[:, s > 1e-8]
    assert U.shape[1] == mu.size
    R, _ = np.linalg.qr(rng.standard_normal((mu.size, mu.size)))
    V = U @ R
    return -(V * mu) @ V.T


def test_signs_counts_and_the_declared_scaling() -> None:
    rng = np.random.default_rng(3)
    model = model_of("deep", 1)
    theta = rng.standard_normal(model.n_params(1))
    n_free = int(model.active_mask(1).sum()) - 1  # one scaling tangent
    mu = -np.linspace(1.0, 50.0, n_free)
    mu[0], mu[1] = 0.003, -0.002  # one unstable mode, the smallest |μ| stable
    spec = model_spectrum(_hessian_with(mu, theta, model, rng), theta, model)

    assert spec.n_unstable == 1 and spec.n_stable == n_free - 1
    assert np.allclose(spec.smallest_nonzero[:2], [-0.002, 0.003], rtol=1e-9)
    assert np.allclose(spec.leading[0], -50.0, rtol=1e-9)
    assert spec.inactive == theta.size - n_free - 1
    assert spec.symmetry == 1 and spec.unexplained == 0
    assert spec.n_zero == spec.inactive + 1
    assert spec.symmetry_residual < 1e-10


def test_a_zero_mode_no_symmetry_explains_is_unexplained() -> None:
    rng = np.random.default_rng(4)
    model = model_of("deep", 1)
    theta = rng.standard_normal(model.n_params(1))
    n_free = int(model.active_mask(1).sum()) - 1
    mu = -np.linspace(1.0, 10.0, n_free)
    mu[3] = 0.0
    spec = model_spectrum(_hessian_with(mu, theta, model, rng), theta, model)
    assert spec.unexplained == 1 and spec.n_zero == spec.inactive + 2

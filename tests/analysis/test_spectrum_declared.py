"""``classify(symmetries=...)``: declared symmetry tangents explain the zero modes they span,
and only those (a Hessian built with a known null space), counted in ``n_symmetry`` and in
``declared_symmetry``."""

from __future__ import annotations

import numpy as np
import pytest

from mesadyn.analysis.spectrum import classify
from mesadyn.model import active_mask


def _hessian_with_null(d: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric Hessian on the active entries of θ with ``k`` zero modes along random
    directions ``N`` (n × k) of the active entries, every other eigenvalue in [0.5, 3] in size
    (both signs); inactive rows zero."""
    act = np.flatnonzero(active_mask(d))
    n = active_mask(d).size
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(act.size, act.size)))
    mu = rng.uniform(0.5, 3.0, act.size) * rng.choice([-1.0, 1.0], act.size)
    mu[:k] = 0.0
    H = np.zeros((n, n))
    H[np.ix_(act, act)] = (Q * mu) @ Q.T
    N = np.zeros((n, k))
    N[act] = Q[:, :k]
    return H, N


def test_declared_tangents_explain_the_zero_modes_they_span():
    d, k = 1, 2
    H, N = _hessian_with_null(d, k)
    n_inactive = int((~active_mask(d)).sum())
    plain = classify(H)
    assert plain.n_zero == n_inactive + k
    assert plain.n_unexplained == k and plain.n_declared_symmetry is None
    assert "declared_symmetry" not in plain.to_dict()["zero_modes"]
    one = classify(H, symmetries=3.0 * N[:, :1])  # any length
    assert one.n_declared_symmetry == 1 and one.n_unexplained == 1 and one.n_symmetry == 1
    both = classify(H, symmetries=np.concatenate([N, N.sum(axis=1, keepdims=True)], axis=1))
    assert both.n_declared_symmetry == 2 and both.n_unexplained == 0  # rank, not columns
    assert both.to_dict()["zero_modes"]["declared_symmetry"] == 2
    assert both.n_zero == n_inactive + both.n_symmetry


def test_a_declared_direction_that_is_not_a_zero_mode_is_not_used():
    H, N = _hessian_with_null(1, 1, seed=3)
    rng = np.random.default_rng(1)
    v = np.where(active_mask(1), rng.normal(size=H.shape[0]), 0.0)  # ‖Hv‖ ~ ‖v‖
    sp = classify(H, symmetries=v[:, None])
    assert sp.n_declared_symmetry == 0 and sp.n_unexplained == 1
    # a zero column and a column on the inactive entries alone explain nothing new
    inactive = np.where(active_mask(1), 0.0, 1.0)
    sp = classify(H, symmetries=np.stack([np.zeros_like(v), inactive], axis=1))
    assert sp.n_declared_symmetry == 0 and sp.n_unexplained == 1


@pytest.mark.parametrize("eps", [1e-3, 1e-9])
def test_a_nearly_null_tangent_is_used_only_within_the_zero_tolerance(eps):
    """A tangent tilted out of the null space by ε: ‖Hv‖ ≈ ε·|μ| is inside ``tol = rtol·max|μ|``
    for ε = 1e-9, outside for ε = 1e-3."""
    H, N = _hessian_with_null(1, 1, seed=5)
    mu, V = np.linalg.eigh(H)
    far = V[:, np.argmax(np.abs(mu))]  # a unit eigenvector of the largest |μ|
    v = N[:, 0] + eps * far
    sp = classify(H, symmetries=v[:, None])
    used = eps * np.abs(mu).max() <= sp.tol * np.linalg.norm(v)
    assert used == (eps < 1e-6)
    assert sp.n_declared_symmetry == int(used) and sp.n_unexplained == 1 - int(used)

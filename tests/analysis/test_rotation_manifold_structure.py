"""The 3-D manifold of real rotations as the workflows use it, against the exact full field.

- its five constants (closed form at r = 1, read off the loss otherwise) against the exact
  gradient and Hessian of the full field restricted to the manifold, and the manifold's
  invariance (the full gradient has no component off it);
- the balanced fixed point, the saddle's rate and the closed-form eigenvalues on the
  fixed-point curve against the 3-D Jacobian and the full field;
- the structure of θ: the distance from the manifold and the end points' classes;
- the T → ∞ limit of ``k*`` and the block-norm moments against the closed forms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mesadyn.analysis.ensemble import Basin
from mesadyn.analysis.rotation_manifold import (
    ManifoldSystem,
    block_moments,
    classify_ends,
    coordinates,
    distance,
    embed,
    k_limit,
    manifold_mask,
    off_manifold,
)
from mesadyn.field import ExactField
from mesadyn.model import active_mask
from mesadyn.process import gaussian, rademacher, sparse
from mesadyn.theory import rotation_constants

#: (family, T, process, where the constants come from)
CASES = [
    (gaussian(2), 6, {}, "closed"),
    (rademacher(4), 5, {}, "closed"),
    (gaussian(2), 6, {"noise": 0.3}, "field"),
    (gaussian(2), 6, {"radius": 0.9}, "field"),
    (sparse(4, 1.2), 5, {"noise": 0.2, "radius": 1.1}, "field"),
]
POINTS = [(0.4, -0.2, 0.7), (-0.3, 0.5, 0.2), (1.1, 0.05, -0.6)]


def _system(fam, T, proc, how) -> tuple[ExactField, ManifoldSystem]:
    f = ExactField(fam, T, rotation="real", cache=False, **proc)
    ms = (ManifoldSystem.from_constants(rotation_constants(fam, T)) if how == "closed"
          else ManifoldSystem.from_field(f))
    return f, ms


@pytest.mark.parametrize(("fam", "T", "proc", "how"), CASES)
def test_the_constants_give_the_full_gradient_and_hessian_on_the_manifold(fam, T, proc, how):
    """Per entry of a manifold block, ∂L/∂θ is ∂ℓ/∂(a, c, b) = −rhs; the Hessian on the three
    block directions is d·∇²ℓ = −d·jacobian; every other entry of ∇L is 0 (invariance)."""
    f, ms = _system(fam, T, proc, how)
    d = fam.d
    units = [embed(d, *e) for e in np.eye(3)]
    for p in POINTS:
        th = embed(d, *p)
        g = f.grad(th)
        scale = max(1.0, float(g.abs().max()))
        np.testing.assert_allclose(coordinates(g.numpy()), -ms.rhs(*p), rtol=1e-11,
                                   atol=1e-12 * scale)
        assert distance(g.numpy()) < 1e-12 * scale  # no component off the manifold
        hess = np.array([[float(u @ f.hvp(th, v)) for v in units] for u in units]) / d
        np.testing.assert_allclose(hess, -ms.jacobian(*p), rtol=1e-10,
                                   atol=1e-11 * float(np.abs(hess).max()))


def test_the_comparison_can_fail():
    """A constant off by 1e-6 relative breaks the gradient identity above."""
    f, ms = _system(gaussian(2), 6, {}, "closed")
    wrong = ManifoldSystem(ms.g11, ms.g12 * (1 + 1e-6), ms.g22, ms.h1, ms.h2)
    g = coordinates(f.grad(embed(2, *POINTS[0])).numpy())
    assert np.abs(np.array(g) + wrong.rhs(*POINTS[0])).max() > 1e-7


@pytest.mark.parametrize(("fam", "T", "proc", "how"), CASES[:3])
def test_the_balanced_point_is_a_fixed_point_of_the_full_field(fam, T, proc, how):
    f, ms = _system(fam, T, proc, how)
    a, c, b = ms.balanced()
    assert b > 0 and a * a + c * c == pytest.approx(b * b, rel=1e-14)
    np.testing.assert_allclose(b * np.array([a, c]), ms.k_star, rtol=1e-14)
    assert float(f.grad(embed(fam.d, a, c, b)).abs().max()) < 1e-12


def test_the_saddle_rate_and_the_fixed_point_eigenvalues():
    ms = ManifoldSystem.from_constants(rotation_constants(gaussian(4), 12))
    np.testing.assert_allclose(np.linalg.eigvalsh(ms.jacobian(0, 0, 0)),
                               [-ms.saddle_rate, 0, ms.saddle_rate], atol=1e-12)
    for start in [(0.5, 0.0, 0.5), (1.5, 0.0, 0.2), (0.1, 0.0, 2.0)]:
        for p in ms.limit_candidates(*start):
            assert np.abs(ms.rhs(*p)).max() < 1e-12
            num = np.sort(np.linalg.eigvalsh(0.5 * (ms.jacobian(*p) + ms.jacobian(*p).T)))
            np.testing.assert_allclose(ms.fixed_point_eigenvalues(*p), num, rtol=1e-10,
                                       atol=1e-10 * float(np.abs(num).max()))


def test_the_explicit_and_implicit_solvers_agree():
    ms = ManifoldSystem.from_constants(rotation_constants(gaussian(2), 8))
    ends = [ms.solve((0.5, 0.0, 0.5), 20.0, method=m).y[:, -1] for m in ("LSODA", "DOP853")]
    np.testing.assert_allclose(ends[0], ends[1], atol=1e-9)
    np.testing.assert_allclose(ends[0], ms.limit(0.5, 0.0, 0.5), atol=1e-9)


def test_off_manifold_measures_the_active_entries_off_it():
    d = 4
    th = embed(d, 0.3, -0.1, 0.8).numpy()
    assert off_manifold(th)[0] == 0.0
    rng = np.random.default_rng(0)
    # inactive entries do not count; an active entry off the manifold counts by its size
    noisy = th.copy()
    noisy[~active_mask(d)] = rng.normal(size=int((~active_mask(d)).sum()))
    assert off_manifold(noisy)[0] == 0.0
    free = np.flatnonzero(active_mask(d) & ~manifold_mask(d))
    moved = noisy.copy()
    moved[free[7]] = 2e-3
    assert off_manifold(moved)[0] == pytest.approx(2e-3, rel=1e-12)
    inert = np.zeros_like(th, dtype=bool)
    inert[free[7]] = True
    assert off_manifold(moved, inert)[0] == 0.0
    # a manifold diagonal that is not a multiple of I is off it by its spread
    uneven = th.copy()
    uneven[np.flatnonzero(manifold_mask(d))[0]] += 4e-3
    assert off_manifold(uneven)[0] == pytest.approx(3e-3, rel=1e-9)  # 4e-3 · (1 − 1/d)
    rows = off_manifold(np.stack([th, moved]))
    assert rows.shape == (2,) and rows[1] == pytest.approx(2e-3, rel=1e-12)


def test_the_end_points_are_classified_against_the_manifolds_fixed_points():
    d = 2
    ms = ManifoldSystem.from_constants(rotation_constants(gaussian(d), 6))
    plus, minus = ms.limit_candidates(0.5, 0.0, 0.5)
    off = embed(d, *plus).numpy()
    off[np.flatnonzero(active_mask(d) & ~manifold_mask(d))[0]] = 0.1
    rows = np.stack([embed(d, *plus).numpy(), embed(d, *minus).numpy(), embed(d, 0, 0, 0).numpy(),
                     off, embed(d, *(plus * 1.01)).numpy(), embed(d, *plus).numpy()])
    stationary = np.array([True, True, True, True, True, False])
    got = classify_ends(rows, stationary, ms.k_star).tolist()
    assert got == [Basin.BRANCH_PLUS, Basin.BRANCH_MINUS, Basin.OTHER, Basin.DENSE,
                   Basin.OTHER, Basin.NOT_CONVERGED]


@pytest.mark.parametrize(("fam", "mu2", "mu3"), [
    (gaussian(2), 8.0, 48.0),          # ρ ~ χ²_2: E ρ^k = 2^k k!
    (gaussian(4, 0.5), 0.5, 0.75),      # σ² ρ
    (rademacher(2), 4.0, 8.0),         # ρ = 2
    (sparse(4, 1.5), 1.5**4 / 2, 1.5**6 / 2),  # ρ = c² with probability 2/d
])
def test_block_moments_and_the_long_context_limit(fam, mu2, mu3):
    assert block_moments(fam) == pytest.approx((mu2, mu3), rel=1e-14)
    lim = k_limit(fam)
    assert lim[0] == pytest.approx(2 * mu2 / mu3, rel=1e-14) and lim[1] == 0
    for T in (10**3, 10**5):  # k* = k_limit + O(log T / T)
        k = ManifoldSystem.from_constants(rotation_constants(fam, T)).k_star
        assert np.abs(k - lim).max() < 4 * lim[0] * math.log(T) / T


def test_the_full_exact_hessian_holds_the_manifolds_eigenvalues():
    """At the balanced fixed point the manifold's two nonzero eigenvalues are eigenvalues of
    the full −∇²L (its tangent space is invariant under ∇²L)."""
    f, ms = _system(gaussian(2), 6, {}, "closed")
    p = ms.balanced()
    full = np.linalg.eigvalsh(-f.hessian(embed(2, *p)).numpy())
    for mu in ms.fixed_point_eigenvalues(*p)[:2]:
        assert np.abs(full - mu).min() < 1e-10 * abs(mu)

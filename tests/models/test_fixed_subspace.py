"""The fixed subspace of the loss's coordinate symmetry (:meth:`Model.fixed_subspace`)
against independent computations.

- the group of each family (:attr:`Family.coordinate_group`) leaves the exact loss invariant:
  ``L(g·θ) = L(θ)`` for a random signed permutation (or permutation) ``g`` acting blockwise,
  by the moment-tensor field (the paper's model) and by quadrature (two layers);
- the exact gradient at a random θ of the fixed subspace lies in it (to round-off), while a
  finite-sample gradient (whose draws have no symmetry) does not: the test can fail;
- the basis is orthonormal, supported on the free entries, and refuses a mask that cuts an
  orbit of entries.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.field import ExactField, FieldSpec, FiniteField
from mesadyn.field._quadrature_field import QuadratureField
from mesadyn.models import PAPER, DeepLinearAttention
from mesadyn.process import CoordinateGroup, Family, gaussian, ones, rademacher, shifted, sparse


def _act(model, d: int, D: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``g·θ``: every 3d×3d block ``M ↦ (I_3 ⊗ D) M (I_3 ⊗ D)ᵀ``."""
    G = np.kron(np.eye(3), D)
    out = theta.copy()
    for b in model.blocks(d):
        M = theta[b.start:b.stop].reshape(b.rows, b.cols)
        out[b.start:b.stop] = (G @ M @ G.T).ravel()
    return out


def _group_element(group: CoordinateGroup, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    D = np.eye(d)[rng.permutation(d)]
    if group is CoordinateGroup.SIGNED_PERMUTATIONS:
        D = D * rng.choice([-1.0, 1.0], size=d)[:, None]
    return D


def _fixed_point_of(P: np.ndarray, seed: int) -> np.ndarray:
    return P @ np.random.default_rng(seed).normal(0.0, 0.3, P.shape[1])


@pytest.mark.parametrize("family,group", [
    (gaussian(3), CoordinateGroup.SIGNED_PERMUTATIONS),
    (sparse(3), CoordinateGroup.SIGNED_PERMUTATIONS),
    (rademacher(3), CoordinateGroup.SIGNED_PERMUTATIONS),
    (ones(3), CoordinateGroup.PERMUTATIONS),
    (shifted(3, mu=0.5), CoordinateGroup.PERMUTATIONS),
])
def test_the_exact_loss_is_invariant_under_the_family_group(family: Family,
                                                            group: CoordinateGroup) -> None:
    assert family.coordinate_group is group
    d, T = 3, 5
    fld = ExactField(family, T)
    theta = PAPER.gaussian_init(d, 0.4, 3).numpy()
    L = float(fld.loss(torch.from_numpy(theta)))
    for seed in range(3):
        moved = _act(PAPER, d, _group_element(group, d, seed), theta)
        assert abs(float(fld.loss(torch.from_numpy(moved))) - L) <= 1e-12 * abs(L)
    # the gradient at a point of the fixed subspace lies in it
    free = PAPER.active_mask(d)
    P = PAPER.fixed_subspace(d, group, free)
    assert P is not None and np.allclose(P.T @ P, np.eye(P.shape[1]), atol=1e-15)
    assert not P[~free].any()
    g = fld.grad(torch.from_numpy(_fixed_point_of(P, 1))).numpy()
    assert np.abs(g - P @ (P.T @ g)).max() <= 1e-12 * np.abs(g).max()


def test_a_finite_sample_gradient_leaves_the_subspace() -> None:
    """The finite field's draws are not symmetric: its gradient has a large part off the
    subspace (so the exact test above is not vacuous)."""
    d = 3
    P = PAPER.fixed_subspace(d, CoordinateGroup.SIGNED_PERMUTATIONS, PAPER.active_mask(d))
    assert P is not None
    g = FiniteField(gaussian(d), 5, 50, seed=2).grad(
        torch.from_numpy(_fixed_point_of(P, 1))).numpy()
    assert np.abs(g - P @ (P.T @ g)).max() >= 1e-3 * np.abs(g).max()


def test_two_layer_quadrature_gradient_stays_in_the_subspace() -> None:
    model, d, T = DeepLinearAttention(2), 2, 4
    fld = QuadratureField(model, gaussian(d), T)
    P = model.fixed_subspace(d, CoordinateGroup.SIGNED_PERMUTATIONS, model.active_mask(d))
    assert P is not None and P.shape[1] == 22
    theta = _fixed_point_of(P, 4)
    g = fld.grad(torch.from_numpy(theta)).numpy()
    assert np.abs(g - P @ (P.T @ g)).max() <= 1e-11 * np.abs(g).max()
    # and the loss is invariant under a signed permutation of a generic θ
    th = model.gaussian_init(d, 0.3, 5).numpy()
    D = _group_element(CoordinateGroup.SIGNED_PERMUTATIONS, d, 7)
    L0 = float(fld.loss(torch.from_numpy(th)))
    L1 = float(fld.loss(torch.from_numpy(_act(model, d, D, th))))
    assert abs(L1 - L0) <= 1e-12 * abs(L0)


def test_the_spec_group_and_the_refusals() -> None:
    fam = gaussian(2)
    assert FieldSpec("exact", fam, 5).coordinate_group is CoordinateGroup.SIGNED_PERMUTATIONS
    assert FieldSpec("finite", fam, 5, m=10).coordinate_group is CoordinateGroup.TRIVIAL
    assert FieldSpec("exact", fam, 5, rotation="real").coordinate_group is \
        CoordinateGroup.TRIVIAL
    d = 2
    assert PAPER.fixed_subspace(d, CoordinateGroup.TRIVIAL, PAPER.active_mask(d)) is None
    cut = PAPER.active_mask(d).copy()
    cut[np.flatnonzero(cut)[0]] = False  # one entry of a diagonal orbit
    assert PAPER.fixed_subspace(d, CoordinateGroup.SIGNED_PERMUTATIONS, cut) is None
    # the diagonal mask is a union of orbits: its subspace is the diagonal manifold (a, b)
    diag = PAPER.free_mask("diagonal", d)
    P = PAPER.fixed_subspace(d, CoordinateGroup.SIGNED_PERMUTATIONS, diag)
    assert P is not None and P.shape[1] == 2

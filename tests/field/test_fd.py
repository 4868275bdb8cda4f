"""FiniteDifferenceHessian (a field wrapper) against the exact Hessian of ExactField."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.field import FieldSpec, FiniteDifferenceHessian, fd_hessian, make_field
from mesadyn.model import active_mask
from mesadyn.process import gaussian, ones, sparse


@pytest.mark.parametrize("fam", [gaussian(2, 0.9), sparse(2, 1.2), ones(2)],
                         ids=["gaussian", "sparse", "ones"])
def test_fd_hessian_matches_the_exact_hessian(fam) -> None:
    exact = make_field(FieldSpec("exact", fam, 5))
    theta = 0.4 * torch.randn(exact.n_params, generator=torch.Generator().manual_seed(3),
                              dtype=torch.float64)
    fd = FiniteDifferenceHessian(exact, h=1e-4)
    H = exact.hessian(theta).numpy()
    Hfd = fd.hessian(theta).numpy()
    scale = np.abs(H).max()
    # central differences of a polynomial gradient: error O(h²) times its third derivative
    assert np.abs(Hfd - H).max() <= 1e-6 * scale
    # inactive entries are exactly zero in both
    act = active_mask(fam.d)
    assert not Hfd[~act].any() and not Hfd[:, ~act].any()
    # the wrapper's loss and gradient are the base field's, and it describes its Hessian
    L0, g0 = exact.loss_and_grad(theta)
    L1, g1 = fd.loss_and_grad(theta)
    assert float(L0) == float(L1) and torch.equal(g0, g1)
    assert fd.describe()["hessian"] == "central differences, h=0.0001"
    assert fd.describe()["field"] == "exact" and fd.name == "exact"


def test_fd_hessian_mask_differences_only_the_given_columns() -> None:
    exact = make_field(FieldSpec("exact", gaussian(1, 1.0), 4))
    theta = 0.5 * np.random.default_rng(1).normal(size=exact.n_params)
    mask = np.zeros(exact.n_params, bool)
    cols = np.flatnonzero(active_mask(1))[:2]
    mask[cols] = True
    H = fd_hessian(exact, theta, mask=mask)
    Hx = exact.hessian(torch.as_tensor(theta)).numpy()
    # column k of the (symmetrised) result: half of the differenced column, half of its row
    np.testing.assert_allclose(H[np.ix_(cols, cols)], Hx[np.ix_(cols, cols)], rtol=1e-6,
                               atol=1e-9)
    other = np.flatnonzero(~mask)
    assert not H[np.ix_(other, other)].any()

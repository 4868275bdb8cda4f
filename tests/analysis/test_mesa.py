"""Corollary 4.1 and Appendix B.5: model forward pass vs one OLS GD step (autodiff)."""

from __future__ import annotations

import pytest
import torch

from mesadyn.analysis.mesa import (
    mesa_check,
    ols_gd_step,
    preconditioned_predictions,
    structure_residual,
)
from mesadyn.errors import MesadynError
from mesadyn.model import block, diagonal_init, gaussian_init, predict, unpack
from mesadyn.process import gaussian, make_generator, sample, sequences, sparse


def _x(fam, n=64, T=12, seed=3):
    x1, lam = sample(fam, n, T, make_generator(seed))
    return sequences(x1, lam, T)


def test_gd_step_matches_closed_form():
    x = _x(gaussian(3, 0.7))
    t = 7
    W = ols_gd_step(x, t, 0.3)
    closed = 0.3 * torch.einsum("nia,nib->nab", x[:, 1:t], x[:, : t - 1].conj())
    assert torch.allclose(W, closed, atol=1e-13)


@pytest.mark.parametrize("fam", [gaussian(5, 0.5), sparse(5, 2.0)])
def test_corollary_41_at_diagonal_point(fam):
    theta = diagonal_init(5, 0.8, 1.7)
    x = _x(fam, n=32, T=20)
    res = mesa_check(theta, x)
    assert res.structure_residual == 0.0
    assert res.ab == pytest.approx(0.8 * 1.7)
    assert res.max_abs_err < 1e-10
    assert res.max_rel_err < 1e-12


def test_corollary_41_fails_off_structure():
    """A dense θ is not a GD step: the check must be able to fail."""
    theta = gaussian_init(5, 0.3, seed=2)
    res = mesa_check(theta, _x(gaussian(5, 1.0), n=16, T=10))
    assert res.structure_residual > 0.01
    assert res.max_abs_err > 1e-3


def test_preconditioned_form_b5():
    d = 4
    theta = torch.zeros(18 * d * d, dtype=torch.float64)
    W_KQ, W_PV = unpack(theta)
    gen = torch.Generator().manual_seed(5)
    block(W_KQ, 3, 2).copy_(torch.randn(d, d, generator=gen, dtype=torch.float64))
    block(W_PV, 1, 2).copy_(torch.randn(d, d, generator=gen, dtype=torch.float64))
    x = _x(gaussian(d, 1.0), n=16, T=15)
    assert torch.allclose(preconditioned_predictions(theta, x), predict(theta, x), atol=1e-11)
    assert structure_residual(theta) > 0.1


def test_bad_t():
    with pytest.raises(MesadynError, match="t=1"):
        ols_gd_step(_x(gaussian(2, 1.0), n=2, T=5), 1, 0.1)

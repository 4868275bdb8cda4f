"""Fixed points: Newton refinement, the scaling-symmetry direction, Proposition 4.2."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.analysis.fixedpoint import (
    balanced_point,
    flow_to_fixed_point,
    gradient_split,
    refine,
    symmetry_direction,
)
from mesadyn.analysis.spectrum import classify
from mesadyn.errors import MesadynError
from mesadyn.field.exact import ExactField
from mesadyn.model import P_and_A, diagonal_init, diagonal_mask, gaussian_init, unpack
from mesadyn.process import gaussian, ones, rademacher, sparse, uniform
from mesadyn.theory import constants


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MESADYN_CACHE_DIR", str(tmp_path / "cache"))


def _scaled(theta: np.ndarray, alpha: float) -> np.ndarray:
    th = torch.as_tensor(theta).clone()
    W_KQ, W_PV = unpack(th)
    d = W_KQ.shape[0] // 3
    W_PV[:d, d:] *= alpha
    W_KQ[d:, d:] /= alpha
    return th.numpy()


def test_symmetry_orbit_has_constant_loss_and_tangent_formula():
    field = ExactField(gaussian(2, 1.0), 6)
    theta = gaussian_init(2, 0.5, seed=4).numpy()
    L0 = float(field.loss(torch.as_tensor(theta)))
    for alpha in (0.5, 0.9, 1.7, -1.3):
        assert abs(float(field.loss(torch.as_tensor(_scaled(theta, alpha)))) - L0) <= 1e-12 * L0
    # tangent = derivative of the orbit (central difference in α)
    h = 1e-6
    tangent = (_scaled(theta, 1 + h) - _scaled(theta, 1 - h)) / (2 * h)
    s = symmetry_direction(theta)
    assert np.allclose(s, tangent / np.linalg.norm(tangent), atol=1e-8)
    # away from a fixed point:  H (P, −A) = (−∇_P L, +∇_A L)
    th = torch.as_tensor(theta)
    g = field.grad(th)
    H = field.hessian(th).numpy()
    P, A = P_and_A(th)
    raw = torch.zeros_like(th)
    rW_KQ, rW_PV = unpack(raw)
    rW_PV[:2, 2:] = P
    rW_KQ[2:, 2:] = -A
    gW_KQ, gW_PV = unpack(g.clone())
    expect = torch.zeros_like(th)
    eW_KQ, eW_PV = unpack(expect)
    eW_PV[:2, 2:] = -gW_PV[:2, 2:]
    eW_KQ[2:, 2:] = gW_KQ[2:, 2:]
    assert np.allclose(H @ raw.numpy(), expect.numpy(), atol=1e-10 * np.abs(H).max())


def test_newton_refines_to_the_hyperbola():
    d, T = 2, 6
    fam = gaussian(d, 0.7)
    field = ExactField(fam, T)
    start = diagonal_init(d, 0.9, 0.35).numpy() + 1e-3 * gaussian_init(d, 1.0, 5).numpy()
    fp = refine(field, start)
    assert fp.converged and fp.residual <= 1e-12
    s = classify(field.hessian(torch.as_tensor(fp.theta)).numpy(), fp.theta)
    assert s.n_unstable == 0 and s.n_symmetry == 1
    # the refined point is a global minimiser: its loss equals d·(½ (T−2) m2 − c2²/(2 c1))
    c = constants(fam, T)
    L_star = d * (0.5 * (T - 2) * fam.second_moment - c.c2**2 / (2 * c.c1))
    assert abs(fp.loss - L_star) <= 1e-10 * abs(L_star)


@pytest.mark.parametrize("make", [lambda d: gaussian(d, 1.0), lambda d: sparse(d, 1.0),
                                  rademacher, uniform],
                         ids=["gaussian", "sparse", "rademacher", "uniform"])
def test_diagonal_point_is_a_full_fixed_point_for_assumption_41(make):
    d, T = 3, 10
    fam = make(d)
    field = ExactField(fam, T)
    fp = refine(field, balanced_point(fam, T), mask=diagonal_mask(d))
    split = gradient_split(fp.grad)
    assert split["grad_norm"] < 1e-12
    assert split["offdiag_grad_norm"] < 1e-12


def test_proposition_42_ones_offdiagonal_gradient_and_release():
    d, T = 3, 10
    fam = ones(d)
    field = ExactField(fam, T)
    masked = refine(field, balanced_point(fam, T), mask=diagonal_mask(d))
    split = gradient_split(masked.grad)
    assert split["diag_grad_norm"] < 1e-12  # fixed point of the masked flow (Theorem 4.3)
    assert split["offdiag_32_12_grad_norm"] > 1e-2  # …but not of the full flow
    assert split["rest_grad_norm"] < 1e-12
    dense, end = flow_to_fixed_point(field, masked.theta, t_end=1e3)
    assert end.status == "converged"
    assert dense.grad_norm < 1e-9
    assert dense.loss < masked.loss - 1e-3
    sp = classify(field.hessian(torch.as_tensor(dense.theta)).numpy(), dense.theta, field=field)
    assert sp.n_unstable == 0 and sp.n_unexplained == 0
    W_KQ, W_PV = unpack(torch.as_tensor(dense.theta))
    W1 = W_KQ[2 * d:, d:2 * d].numpy()
    off = W1 - np.diag(np.diag(W1))
    assert np.abs(off).max() > 1e-3  # dense, not diagonal (Appendix B.5)
    for blk in (W_KQ[d:2 * d, d:], W_KQ[2 * d:, 2 * d:], W_PV[:d, 2 * d:]):
        assert blk.abs().max() < 1e-10


def test_refine_rejects_bad_input():
    field = ExactField(gaussian(2, 1.0), 5)
    with pytest.raises(MesadynError, match="length"):
        refine(field, np.zeros(7))
    bad = np.zeros(72)
    bad[3] = np.nan
    with pytest.raises(MesadynError, match="non-finite"):
        refine(field, bad)


def test_unfinished_flow_is_not_called_a_fixed_point():
    """Issue 12: Newton from where a stopped flow left off may not reach a critical point; the
    residual says so (it used to be reported as a fixed point)."""
    field = ExactField(gaussian(1, 1.0), 5)
    fp, end = flow_to_fixed_point(field, diagonal_init(1, 1e6, 1e6).numpy(), t_end=1e-15)
    assert end.status == "t_end" and not fp.converged
    g = field.grad(torch.as_tensor(fp.theta)).numpy()  # recomputed at Newton's last point
    assert fp.residual == float(np.abs(g).max()) > 1e3
    assert fp.to_dict()["converged"] is False
    assert end.to_dict()["status"] == "t_end"


def test_newton_stops_where_the_hessian_overflows():
    field = ExactField(gaussian(1, 1.0), 5)
    fp = refine(field, diagonal_init(1, 1e120, 1e120).numpy())
    assert not fp.converged and fp.iterations == 0

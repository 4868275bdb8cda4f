"""Eq. 2's finite-sample loss and the Monte-Carlo field: vs direct sums, FD, and Lemma 5.2."""

from __future__ import annotations

import math

import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import FiniteField, MonteCarloField
from mesadyn.model import diagonal_init, gaussian_init, predict, sequence_loss
from mesadyn.process import gaussian, sequences, sparse
from mesadyn.theory import constants


def test_finite_loss_equals_direct_mean():
    fam, T = gaussian(2, 0.9), 7
    f = FiniteField(fam, T, m=40, seed=3, device="cpu")
    theta = gaussian_init(2, 0.3, seed=2)
    x = sequences(f.x1, f.lam, T)
    # Eq. 2: mean over sequences of Σ_{t=2}^{T−1} ½‖ŷ_t − x_{t+1}‖², ŷ from the general path
    y = predict(theta, x)[:, : T - 2]
    r = y - x[:, 2:]
    direct = 0.5 * (r.abs() ** 2).sum(dim=(1, 2)).mean()
    assert float(f.loss(theta)) == pytest.approx(float(direct), rel=1e-12)
    assert float(f.loss(theta)) == pytest.approx(float(sequence_loss(theta, x).mean()), rel=1e-12)


def test_chunking_does_not_change_loss_or_grad():
    fam, T = gaussian(2, 1.0), 6
    theta = gaussian_init(2, 0.4, seed=1)
    a = FiniteField(fam, T, 23, seed=1, device="cpu", chunk=5).loss_and_grad(theta)
    b = FiniteField(fam, T, 23, seed=1, device="cpu").loss_and_grad(theta)
    assert torch.allclose(a[0], b[0], rtol=1e-13) and torch.allclose(a[1], b[1], rtol=1e-12)


def test_autograd_matches_finite_differences():
    fam, T = gaussian(2, 1.1), 6
    f = FiniteField(fam, T, m=12, seed=4, device="cpu")
    theta = gaussian_init(2, 0.5, seed=6)
    g = f.grad(theta)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        v = torch.randn(theta.shape, generator=gen, dtype=torch.float64)
        h = 1e-5
        fd = (f.loss(theta + h * v) - f.loss(theta - h * v)) / (2 * h)
        assert float(g @ v) == pytest.approx(float(fd), rel=1e-7, abs=1e-9)
    # Hessian-vector product vs finite differences of the gradient
    v = torch.randn(theta.shape, generator=gen, dtype=torch.float64)
    h = 1e-5
    fd = (f.grad(theta + h * v) - f.grad(theta - h * v)) / (2 * h)
    hv = f.hvp(theta, v)
    assert torch.allclose(hv, fd, rtol=1e-6, atol=1e-7 * float(fd.abs().max()))


@pytest.mark.parametrize(("fam", "a", "b"), [(gaussian(2, 1.0), 0.3, 0.2),
                                             (sparse(2, 1.2), -0.4, 0.5)],
                         ids=["gaussian", "sparse"])
def test_monte_carlo_gradient_matches_lemma_52(fam, a, b):
    """∂L/∂(W^KQ_32)_jj = a b² c1 − b c2, ∂L/∂(W^PV_12)_jj = a² b c1 − a c2 (Lemma 5.2),
    L = d(½ c1 s² − c2 s + ½ (T−2) E[x_j²]) with s = ab, all within 4 standard errors."""
    d, T = fam.d, 6
    mc = MonteCarloField(fam, T, samples=20_000, seed=5, batches=20, device="cpu")
    est = mc.estimate(diagonal_init(d, a, b))
    c = constants(fam, T)
    n = 9 * d * d
    for j in range(d):
        i_kq = (2 * d + j) * 3 * d + (d + j)  # W^KQ_32[j, j]
        i_pv = n + j * 3 * d + (d + j)  # W^PV_12[j, j]
        for i, exact in ((i_kq, a * b * b * c.c1 - b * c.c2),
                         (i_pv, a * a * b * c.c1 - a * c.c2)):
            assert abs(float(est.grad[i]) - exact) <= 4 * float(est.grad_se[i]), (i, exact)
    s = a * b
    L = d * (0.5 * c.c1 * s * s - c.c2 * s + 0.5 * (T - 2) * fam.second_moment)
    assert abs(float(est.loss) - L) <= 4 * float(est.loss_se)


def test_monte_carlo_common_random_numbers():
    fam = gaussian(2, 1.0)
    th = diagonal_init(2, 0.2, 0.3)
    a = MonteCarloField(fam, 5, samples=200, seed=2, batches=4, device="cpu").estimate(th)
    b = MonteCarloField(fam, 5, samples=200, seed=2, batches=4, device="cpu").estimate(th)
    c = MonteCarloField(fam, 5, samples=200, seed=3, batches=4, device="cpu").estimate(th)
    assert torch.equal(a.grad, b.grad) and float(a.loss) == float(b.loss)
    assert float(a.loss) != float(c.loss)
    assert math.isfinite(float(a.loss_se)) and float(a.loss_se) > 0


def test_field_rejects_bad_input():
    with pytest.raises(MesadynError, match="T=2"):
        FiniteField(gaussian(2, 1.0), 2, m=10, device="cpu")
    with pytest.raises(MesadynError, match="m=0"):
        FiniteField(gaussian(2, 1.0), 5, m=0, device="cpu")
    f = FiniteField(gaussian(2, 1.0), 5, m=10, device="cpu")
    with pytest.raises(MesadynError, match="length"):
        f.loss_and_grad(torch.zeros(10, dtype=torch.float64))
    with pytest.raises(MesadynError, match="non-finite"):
        f.loss_and_grad(torch.full((72,), float("nan"), dtype=torch.float64))
    with pytest.raises(MesadynError, match="samples"):
        MonteCarloField(gaussian(2, 1.0), 5, samples=3, batches=8, device="cpu")

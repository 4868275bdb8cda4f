"""The fused CPU kernel of k-layer linear attention (:mod:`mesadyn.field._deep_fused`) against
autograd through the model's own forward pass (:meth:`DeepLinearAttention.sequence_loss`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.field import _deep_fused
from mesadyn.field._model_fields import FiniteModelField, MonteCarloModelField
from mesadyn.field._quadrature_field import QuadratureField
from mesadyn.models import DeepLinearAttention, SoftmaxAttention
from mesadyn.process import gaussian, rademacher


def _autograd(model: DeepLinearAttention, theta: torch.Tensor, x: torch.Tensor,
              w: torch.Tensor) -> tuple[float, np.ndarray]:
    th = theta.clone().requires_grad_(True)
    loss = (model.sequence_loss(th, x) * w).sum()
    (g,) = torch.autograd.grad(loss, th)
    return float(loss.detach()), g.numpy()


@pytest.mark.parametrize(("k", "d", "T", "n"), [(1, 2, 6, 7), (2, 2, 6, 70), (3, 1, 5, 5),
                                                (2, 3, 8, 4), (2, 1, 3, 3)])
def test_kernel_equals_autograd(k: int, d: int, T: int, n: int) -> None:
    """Loss and gradient of random dense θ on random complex sequences with random weights
    (n not a multiple of the lanes: the padding contributes nothing)."""
    gen = torch.Generator().manual_seed(10 * k + d)
    model = DeepLinearAttention(k)
    theta = 0.3 * torch.randn(model.n_params(d), generator=gen, dtype=torch.float64)
    x = torch.randn(n, T, d, generator=gen, dtype=torch.complex128)
    w = torch.rand(n, generator=gen, dtype=torch.float64)
    want_loss, want_grad = _autograd(model, theta, x, w)
    loss, grad = _deep_fused.loss_and_grad(model, theta, [(x[: n // 2], w[: n // 2]),
                                                          (x[n // 2:], w[n // 2:])])
    assert float(loss) == pytest.approx(want_loss, rel=1e-13)
    np.testing.assert_allclose(grad.numpy(), want_grad, rtol=0,
                               atol=1e-13 * np.abs(want_grad).max())


def test_only_deep_linear_attention_on_the_cpu() -> None:
    cpu, meta = torch.device("cpu"), torch.device("meta")
    assert _deep_fused.applies(DeepLinearAttention(2), cpu)
    assert not _deep_fused.applies(DeepLinearAttention(2), meta)
    assert not _deep_fused.applies(SoftmaxAttention(), cpu)


def test_finite_field_takes_the_kernel_and_matches_the_direct_path() -> None:
    """A finite field's loss_and_grad (fused) against the torch direct path of the same field,
    chunk by chunk, and the same bits on one and on two threads."""
    model = DeepLinearAttention(2)
    fld = FiniteModelField(model, gaussian(2), 7, 300, 3)
    theta = model.diagonal_init(2, 0.4, 0.9) + model.gaussian_init(2, 0.05, 4)
    th = theta.clone().requires_grad_(True)
    want_loss = 0.0
    want_grad = torch.zeros_like(theta)
    for x, w in fld._weighted():
        part = fld._chunk_loss(th, x, w)
        (g,) = torch.autograd.grad(part, th)
        want_loss += float(part.detach())
        want_grad += g
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        loss1, grad1 = fld.loss_and_grad(theta)
        torch.set_num_threads(2)
        loss2, grad2 = fld.loss_and_grad(theta)
    finally:
        torch.set_num_threads(threads)
    assert float(loss1) == pytest.approx(want_loss, rel=1e-13)
    np.testing.assert_allclose(grad1.numpy(), want_grad.numpy(), rtol=0,
                               atol=1e-13 * float(want_grad.abs().max()))
    assert float(loss1) == float(loss2)
    assert torch.equal(grad1, grad2)


@pytest.mark.parametrize("field", ["mc", "quadrature"])
def test_fused_gradient_against_central_differences(field: str) -> None:
    """The gradient the fields now return (fused) against central differences of their loss
    (the torch forward pass)."""
    model = DeepLinearAttention(2)
    fld = (MonteCarloModelField(model, rademacher(1), 5, samples=64, seed=2) if field == "mc"
           else QuadratureField(model, rademacher(1), 4))
    theta = model.gaussian_init(1, 0.5, 7)
    _, grad = fld.loss_and_grad(theta)
    h = 1e-6
    idx = torch.from_numpy(np.flatnonzero(model.active_mask(1)))
    for i in idx[:12]:
        e = torch.zeros_like(theta)
        e[i] = h
        fd = (float(fld.loss(theta + e)) - float(fld.loss(theta - e))) / (2 * h)
        assert float(grad[i]) == pytest.approx(fd, rel=1e-6, abs=1e-8)


_BITS = """
import hashlib, torch
from mesadyn.field import _deep_fused
from mesadyn.models import DeepLinearAttention
gen = torch.Generator().manual_seed(5)
model = DeepLinearAttention(2)
theta = 0.3 * torch.randn(model.n_params(2), generator=gen, dtype=torch.float64)
x = torch.randn(150, 7, 2, generator=gen, dtype=torch.complex128)
w = torch.rand(150, generator=gen, dtype=torch.float64)
loss, grad = _deep_fused.loss_and_grad(model, theta, [(x, w)])
print(loss.numpy().tobytes().hex(), hashlib.sha256(grad.numpy().tobytes()).hexdigest())
"""


def test_the_same_bits_compiled_afresh_for_a_generic_cpu(tmp_path) -> None:
    """IEEE arithmetic and fixed-order sums: the kernel compiled afresh (an empty cache) for
    numba's generic x86-64 target (no AVX, no FMA) gives the bits of this process's kernel."""
    import contextlib
    import io
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_CPU_NAME="generic", NUMBA_CACHE_DIR=str(tmp_path))
    generic = subprocess.run([sys.executable, "-c", _BITS], capture_output=True, text=True,
                             check=True, env=env).stdout
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(_BITS, {})  # the same script in this process, with its compiled kernel
    here = out.getvalue()
    assert here.split()
    assert generic == here

"""The fused CPU kernels (mesadyn/field/_fused.py) on their own: the written contract (rows,
``need``), the hand-written gradient against finite differences, the weighted sum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.field import _fused
from mesadyn.field._ar_autograd import _fused_index
from mesadyn.field._ar_kernels import ARBatch, Kernel
from mesadyn.model import gaussian_init
from mesadyn.process import gaussian, make_generator, sample


def _part(prefix: bool, radius: float = 1.0):
    """One fused part (closed form, or prefix Grams at T below the closed form's minimum)."""
    d, T, n = 3, 12 if prefix else 40, 6
    x1, lam = sample(gaussian(d, 1.0), n, T, make_generator(5), "cpu", radius=radius)
    (part,) = ARBatch(x1, lam, T, kernel=Kernel.fused)._parts
    assert type(part).__name__ == ("_PrefixGram" if prefix else "_ClosedForm")
    return part


def _blocks(theta: torch.Tensor, d: int) -> np.ndarray:
    return theta[_fused_index(d)].reshape(6, d, d).numpy().copy()


@pytest.mark.parametrize("prefix", [False, True], ids=["closed", "prefix-gram"])
def test_rows_outside_the_range_and_the_gradient_without_need_are_untouched(prefix):
    part = _part(prefix)
    n, d = part.x1.shape
    blocks = _blocks(gaussian_init(d, 0.4, seed=1), d)
    loss = np.full(n, -7.0)
    grad = np.full((n, 6, d, d), -7.0)
    part.fused_loss(blocks, 2, 4, loss, grad, True)
    assert np.all(loss[[0, 1, 4, 5]] == -7.0) and np.all(loss[2:4] > 0)
    assert np.all(grad[[0, 1, 4, 5]] == -7.0) and not np.any(grad[2:4] == -7.0)
    again = np.full((n, 6, d, d), -7.0)
    part.fused_loss(blocks, 0, n, loss, again, False)
    assert np.all(again == -7.0)


@pytest.mark.parametrize("radius", [1.0, 0.7])
@pytest.mark.parametrize("prefix", [False, True], ids=["closed", "prefix-gram"])
def test_gradient_equals_central_differences(prefix, radius):
    """The hand-written gradient in θ's six blocks against central differences of the
    kernel's own loss (step 1e-6, agreement to 1e-7 relative)."""
    part = _part(prefix, radius)
    n, d = part.x1.shape
    blocks = _blocks(gaussian_init(d, 0.4, seed=2), d)
    loss = np.empty(n)
    grad = np.empty((n, 6, d, d))
    part.fused_loss(blocks, 0, n, loss, grad, True)
    h = 1e-6
    fd = np.empty_like(grad)
    up, down = np.empty(n), np.empty(n)
    for idx in np.ndindex(blocks.shape):
        b = blocks.copy()
        b[idx] += h
        part.fused_loss(b, 0, n, up, grad[:0], False)
        b[idx] -= 2 * h
        part.fused_loss(b, 0, n, down, grad[:0], False)
        fd[(slice(None), *idx)] = (up - down) / (2 * h)
    assert np.abs(fd - grad).max() <= 1e-7 * np.abs(grad).max()


def test_weighted_sum_equals_numpy():
    rng = np.random.default_rng(0)
    c, g = rng.normal(size=37), rng.normal(size=(37, 54))
    out = np.empty(54)
    _fused.weighted_sum(c, g, out)
    np.testing.assert_allclose(out, c @ g, rtol=1e-13, atol=1e-13)

"""Sequences of the AR process (mesadyn/process/sequences.py): λ uniform on the torus, the
recursion, seeding, the radius, real and Haar rotations and the AR noise."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.process import (
    fixed,
    gaussian,
    make_generator,
    sample,
    sample_lambdas,
    sample_sequences,
    sample_transitions,
    sequences,
)

N = 50_000


def _mean_se(v: np.ndarray) -> tuple[float, float]:
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v)))


def test_lambdas_uniform_on_torus():
    lam = sample_lambdas(N, 2, make_generator(3), "cpu")
    assert lam.dtype == torch.complex128
    assert torch.allclose(lam.abs(), torch.ones_like(lam.real), atol=1e-14)
    for n in (1, 2, 3):
        z = (lam[:, 0] ** n).numpy()
        for part in (z.real, z.imag):
            mean, se = _mean_se(part)
            assert abs(mean) <= 4 * se
    # the two coordinates are independent: E[λ_1 conj(λ_2)] = 0
    z = (lam[:, 0] * lam[:, 1].conj()).numpy()
    assert abs(z.real.mean()) <= 4 * z.real.std() / math.sqrt(N)


def test_sequences_follow_the_recursion():
    fam = gaussian(3, 1.0)
    x1, lam = sample(fam, 10, 7, make_generator(5), "cpu")
    x = sequences(x1, lam, 7)
    assert x.shape == (10, 7, 3) and x.dtype == torch.complex128
    assert torch.allclose(x[:, 0], x1.to(torch.complex128))
    for t in range(6):
        assert torch.allclose(x[:, t + 1], lam * x[:, t], atol=1e-13)


def test_seeded_sampling_is_reproducible():
    fam = gaussian(3, 1.0)
    a = sample(fam, 20, 5, make_generator(9), "cpu")
    b = sample(fam, 20, 5, make_generator(9), "cpu")
    c = sample(fam, 20, 5, make_generator(10), "cpu")
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_radius_sequences():
    fam = gaussian(2, 1.0)
    x1, lam = sample(fam, 50, 6, make_generator(4), "cpu", radius=0.7)
    assert torch.allclose(lam.abs(), torch.full((50, 2), 0.7, dtype=torch.float64))
    x = sequences(x1, lam, 6)
    for t in range(5):
        assert torch.allclose(x[:, t + 1], lam * x[:, t], atol=1e-13)
    # r = 1 draws the same numbers as before the radius existed
    a = sample(fam, 20, 5, make_generator(9), "cpu")
    b = sample(fam, 20, 5, make_generator(9), "cpu", radius=1.0)
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))


def test_real_rotations_keep_sequences_real_and_block_norms():
    fam = gaussian(4, 1.0)
    x = sample_sequences(fam, 200, 6, make_generator(1), "cpu", rotation="real")
    assert x.imag.abs().max().item() == 0.0
    blocks = x.real.reshape(200, 6, 2, 2).square().sum(-1)  # ‖(x_{2k}, x_{2k+1})‖² per block
    assert torch.allclose(blocks, blocks[:, :1].expand_as(blocks), rtol=1e-12)
    W = sample_transitions(20_000, 4, make_generator(2), "cpu", rotation="real", radius=0.5)
    assert torch.allclose(W.real[:, 0, 0] ** 2 + W.real[:, 1, 0] ** 2,
                          torch.full((20_000,), 0.25, dtype=torch.float64))
    for v in (W.real[:, 0, 0].numpy(), W.real[:, 1, 0].numpy()):  # cos, sin of a uniform angle
        mean, se = _mean_se(v)
        assert abs(mean) <= 4 * se
        mean, se = _mean_se(v**2)
        assert abs(mean - 0.125) <= 4 * se


def test_haar_transitions_are_unitary_and_isotropic():
    W = sample_transitions(20_000, 3, make_generator(3), "cpu", rotation="haar")
    eye = torch.eye(3, dtype=torch.complex128)
    assert torch.allclose(W @ W.conj().transpose(1, 2), eye.expand_as(W), atol=1e-12)
    for i, j in ((0, 0), (1, 2)):  # E|W_ij|² = 1/d, E W_ij = 0, E[W_ij²] = 0 (Haar invariance)
        z = W[:, i, j].numpy()
        mean, se = _mean_se(np.abs(z) ** 2)
        assert abs(mean - 1 / 3) <= 4 * se
        for part in (z.real, z.imag, (z * z).real):
            mean, se = _mean_se(part)
            assert abs(mean) <= 4 * se
    x = sample_sequences(gaussian(3), 50, 5, make_generator(4), "cpu", rotation="haar")
    norms = x.abs().square().sum(-1)
    assert torch.allclose(norms, norms[:, :1].expand_as(norms), rtol=1e-12)


def test_noise_adds_its_variance_each_step():
    """x_1 = 0: x_t = Σ_{s<t} W^{t−1−s} ε_s, so E|x_{t,k}|² = (t−1) s² for unitary W."""
    s = 0.3
    x = sample_sequences(fixed([0.0, 0.0]), 40_000, 5, make_generator(5), "cpu", noise=s)
    for t in range(5):
        mean, se = _mean_se((x[:, t, 0].abs() ** 2).numpy())
        assert abs(mean - t * s * s) <= 4 * se + 1e-15
    # diagonal and noiseless: the same draws as sample + sequences
    x1, lam = sample(gaussian(2), 10, 4, make_generator(6), "cpu", radius=0.8)
    y = sample_sequences(gaussian(2), 10, 4, make_generator(6), "cpu", radius=0.8)
    assert torch.equal(y, sequences(x1, lam, 4))


@pytest.mark.parametrize(("call", "match"), [
    (lambda: sample_transitions(2, 3, make_generator(0), "cpu", rotation="real"), "d=3"),
    (lambda: sample_transitions(2, 2, make_generator(0), "cpu", rotation="spin"), "'spin'"),
    (lambda: sample_sequences(gaussian(2), 2, 3, make_generator(0), "cpu", noise=-1.0),
     "noise=-1.0"),
])
def test_bad_process_input(call, match):
    with pytest.raises(MesadynError, match=match):
        call()

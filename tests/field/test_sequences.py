"""The sampled fields over general sequences (:mod:`mesadyn.field._sequences`).

Checked against independent computations: on diagonal-W sequences against the existing
:class:`FiniteField` / :class:`MonteCarloField` on the same draws (1e-12); the polynomial form
against the direct path; the gradient against central finite differences; for real rotations at
d = 2 against an exact quadrature (Gauss rules in x_1, a uniform grid in the angle, exact for
the polynomial and trigonometric degrees involved); Haar and noisy processes against a large
independent sample (4 standard errors); and the noisy AR loss at θ = 0 against its closed form.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import mesadyn.field._sequences as _sequences
from mesadyn.errors import MesadynError
from mesadyn.field import (
    ExactField,
    FieldSpec,
    FiniteField,
    FiniteSequenceField,
    Form,
    MonteCarloField,
    MonteCarloSequenceField,
    SequenceField,
    make_field,
)
from mesadyn.model import (
    active_mask,
    block,
    diagonal_init,
    diagonal_mask,
    gaussian_init,
    sequence_loss,
    unpack,
)
from mesadyn.process import gaussian, make_generator, rademacher, sample_sequences

CLOSE = {"rtol": 1e-12, "atol": 1e-12}


def _theta(d: int, seed: int = 3, scale: float = 0.3) -> torch.Tensor:
    return gaussian_init(d, scale, seed)


# ---- the paper's process: the same numbers as the existing fields ------------------------
@pytest.mark.parametrize("radius", [1.0, 0.8])
@pytest.mark.parametrize("form", [Form.POLYNOMIAL, Form.DIRECT])
def test_diagonal_sequences_equal_the_finite_field(radius, form):
    fam = gaussian(2, 0.8)
    old = FiniteField(fam, 7, 300, seed=5, device="cpu", form=form, radius=radius)
    new = FiniteSequenceField(fam, 7, 300, 5, radius=radius, device="cpu", form=form)
    th = _theta(2)
    v = _theta(2, seed=9)
    L0, g0 = old.loss_and_grad(th)
    L1, g1 = new.loss_and_grad(th)
    assert torch.allclose(L1, L0, **CLOSE)
    assert torch.allclose(g1, g0, **CLOSE)
    assert torch.allclose(new.hvp(th, v), old.hvp(th, v), **CLOSE)
    assert torch.allclose(new.loss(th), old.loss(th), **CLOSE)
    if form is Form.POLYNOMIAL:
        assert torch.allclose(new.hessian(th), old.hessian(th), **CLOSE)
        assert new.build().const == pytest.approx(old.build().const, rel=1e-13)


def test_diagonal_sequences_equal_the_monte_carlo_field():
    fam = gaussian(2)
    old = MonteCarloField(fam, 6, samples=400, seed=2, batches=8, device="cpu")
    new = MonteCarloSequenceField(fam, 6, samples=400, seed=2, batches=8, device="cpu")
    th = _theta(2)
    a, b = old.estimate(th), new.estimate(th)
    for x, y in ((a.loss, b.loss), (a.loss_se, b.loss_se), (a.grad, b.grad),
                 (a.grad_se, b.grad_se)):
        assert torch.allclose(y, x, **CLOSE)
    assert (b.samples, b.batches) == (400, 8)


def test_batch_methods_match_single_evaluations():
    f = FiniteSequenceField(gaussian(2), 6, 50, 1, rotation="haar", noise=0.2, device="cpu",
                            form="direct")
    ths = torch.stack([_theta(2, 1), _theta(2, 2)])
    L, G = f.batch_loss_and_grad(ths)
    for i in range(2):
        Li, gi = f.loss_and_grad(ths[i])
        assert torch.allclose(L[i], Li, **CLOSE) and torch.allclose(G[i], gi, **CLOSE)
    assert torch.allclose(f.batch_loss(ths), L, **CLOSE)


# ---- the two forms and the draws -------------------------------------------------------
@pytest.mark.parametrize(("rotation", "noise"), [("haar", 0.0), ("real", 0.0), ("haar", 0.3),
                                                 ("diagonal", 0.5)])
def test_polynomial_form_equals_direct_path(rotation, noise):
    kw = {"radius": 0.9, "rotation": rotation, "noise": noise, "device": "cpu"}
    poly = FiniteSequenceField(gaussian(2), 6, 120, 4, form="polynomial", **kw)
    direct = FiniteSequenceField(gaussian(2), 6, 120, 4, form="direct", **kw)
    th, v = _theta(2), _theta(2, seed=8)
    Lp, gp = poly.loss_and_grad(th)
    Ld, gd = direct.loss_and_grad(th)
    assert torch.allclose(Lp, Ld, rtol=1e-11, atol=1e-12)
    assert torch.allclose(gp, gd, rtol=1e-10, atol=1e-11)
    assert torch.allclose(poly.hvp(th, v), direct.hvp(th, v), rtol=1e-10, atol=1e-11)
    Hp, Hd = poly.hessian(th), direct.hessian(th)
    assert torch.allclose(Hp, Hd, rtol=1e-10, atol=1e-10)
    assert torch.count_nonzero(Hp[~torch.from_numpy(active_mask(2))]) == 0


def test_gradient_matches_finite_differences():
    f = FiniteSequenceField(gaussian(2), 6, 80, 7, rotation="haar", noise=0.3, device="cpu",
                            form="direct")
    th = _theta(2)
    g = f.grad(th)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        v = torch.randn(th.shape, generator=gen, dtype=torch.float64)
        h = 1e-5
        fd = (f.loss(th + h * v) - f.loss(th - h * v)) / (2 * h)
        assert float(fd) == pytest.approx(float(g @ v), rel=1e-7, abs=1e-9)
    v = torch.randn(th.shape, generator=gen, dtype=torch.float64)
    fd_hv = (f.grad(th + 1e-5 * v) - f.grad(th - 1e-5 * v)) / 2e-5
    assert torch.allclose(f.hvp(th, v), fd_hv, rtol=1e-6, atol=1e-7)


def test_cached_prefix_grams_equal_model_sequence_loss(monkeypatch):
    """The direct path through cached :class:`SequenceBatch` (default at this size) against
    the same field with the cache off (:func:`mesadyn.model.sequence_loss` on the sequences),
    including Monte-Carlo batches that cut chunks."""
    kw = {"rotation": "haar", "noise": 0.2, "radius": 0.9, "device": "cpu", "form": "direct",
          "chunk": 9, "samples": 60, "batches": 7, "seed": 2}
    cached = MonteCarloSequenceField(gaussian(2), 6, **kw)
    monkeypatch.setattr(_sequences, "BATCH_CACHE_BYTES", 0)
    plain = MonteCarloSequenceField(gaussian(2), 6, **kw)
    th, v = _theta(2), _theta(2, seed=5)
    a, b = cached.estimate(th), plain.estimate(th)
    for x, y in ((a.loss, b.loss), (a.loss_se, b.loss_se), (a.grad, b.grad),
                 (a.grad_se, b.grad_se)):
        assert torch.allclose(x, y, **CLOSE)
    assert torch.allclose(cached.hvp(th, v), plain.hvp(th, v), **CLOSE)
    assert torch.allclose(cached.hessian(th), plain.hessian(th), **CLOSE)
    x = torch.cat(list(plain.sequences()))
    assert torch.allclose(cached.per_sequence_loss(th), sequence_loss(th, x), **CLOSE)
    assert cached.memory_bytes() > plain.memory_bytes()


def test_draws_are_fixed_by_the_seed_across_blocks_and_regeneration(monkeypatch):
    monkeypatch.setattr(_sequences, "DRAW_BLOCK", 16)
    kw = {"rotation": "haar", "noise": 0.1, "device": "cpu", "form": "direct", "chunk": 7}
    kept = FiniteSequenceField(gaussian(2), 5, 50, 3, **kw)
    x = torch.cat(list(kept.sequences()))
    assert x.shape == (50, 5, 2)
    assert torch.equal(x[:16], sample_sequences(gaussian(2), 16, 5, make_generator(3),
                                                rotation="haar", noise=0.1))
    gen = make_generator(_sequences.block_seed(3, 2))
    assert torch.equal(x[32:48], sample_sequences(gaussian(2), 16, 5, gen, rotation="haar",
                                                  noise=0.1))
    assert torch.equal(torch.cat(list(kept.sequences(10, 40, chunk=4))), x[10:40])
    monkeypatch.setattr(_sequences, "KEEP_BYTES", 0)
    monkeypatch.setattr(_sequences, "BATCH_CACHE_BYTES", 0)
    again = FiniteSequenceField(gaussian(2), 5, 50, 3, **kw)  # draws regenerated every pass
    th = _theta(2)
    assert torch.allclose(again.loss(th), kept.loss(th), **CLOSE)
    assert torch.equal(again.loss(th), again.loss(th))
    assert again.memory_bytes() == 0 < kept.memory_bytes()
    calls = []
    draw = _sequences.sample_sequences

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[1])
        return draw(*args, **kwargs)

    monkeypatch.setattr(_sequences, "sample_sequences", counted)
    again.loss(th)  # one pass in chunks of 7: each of the 4 blocks drawn once
    assert calls == [16, 16, 16, 2]


# ---- the population: exact quadrature, independent samples, closed forms ------------------
def _real_rotation_quadrature(fam_name: str, T: int, radius: float, n_phi: int = 48
                              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted sequences whose weighted mean is the exact expectation for real rotations at
    d = 2: a Gauss rule per coordinate of x_1 (exact to degree 11 for gaussian; the two atoms
    for rademacher) and ``n_phi`` equally spaced angles (exact for trigonometric degree below
    ``n_phi``; the loss has degree at most 3(T − 1) = 15 in e^{±iφ} per term)."""
    if fam_name == "gaussian":
        nodes, weights = np.polynomial.hermite_e.hermegauss(6)
        weights = weights / weights.sum()
    else:
        nodes, weights = np.array([-1.0, 1.0]), np.array([0.5, 0.5])
    xs, ws = [], []
    for (a, wa), (b, wb) in itertools.product(zip(nodes, weights, strict=True), repeat=2):
        for phi in 2 * math.pi * np.arange(n_phi) / n_phi:
            R = radius * np.array([[math.cos(phi), -math.sin(phi)],
                                   [math.sin(phi), math.cos(phi)]])
            x = np.zeros((T, 2))
            x[0] = (a, b)
            for t in range(1, T):
                x[t] = R @ x[t - 1]
            xs.append(x)
            ws.append(wa * wb / n_phi)
    return torch.tensor(np.array(xs), dtype=torch.complex128), torch.tensor(ws)


def _quadrature_loss_and_grad(x: torch.Tensor, w: torch.Tensor, th: torch.Tensor
                              ) -> tuple[float, torch.Tensor]:
    th = th.detach().clone().requires_grad_(True)
    L = (sequence_loss(th, x) * w).sum()
    (g,) = torch.autograd.grad(L, th)
    return float(L.detach()), g


def test_quadrature_reproduces_the_exact_field_for_diagonal_w():
    """The quadrature idea, checked where an exact field exists: a 2-D grid of phases."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(6)
    weights = weights / weights.sum()
    T, n_phi = 5, 16
    phis = 2 * math.pi * np.arange(n_phi) / n_phi
    xs, ws = [], []
    for (a, wa), (b, wb) in itertools.product(zip(nodes, weights, strict=True), repeat=2):
        for p1, p2 in itertools.product(phis, phis):
            lam = np.exp(1j * np.array([p1, p2]))
            xs.append(np.array([lam**t * np.array([a, b]) for t in range(T)]))
            ws.append(wa * wb / n_phi**2)
    th = _theta(2)
    L, g = _quadrature_loss_and_grad(torch.tensor(np.array(xs)), torch.tensor(ws), th)
    Le, ge = ExactField(gaussian(2), T, cache=False).loss_and_grad(th)
    assert L == pytest.approx(float(Le), rel=1e-12)
    assert torch.allclose(g, ge, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("fam", "radius"), [("gaussian", 1.0), ("rademacher", 0.9)])
def test_real_rotation_monte_carlo_within_4_se_of_exact_quadrature(fam, radius):
    T = 6
    family = gaussian(2) if fam == "gaussian" else rademacher(2)
    x, w = _real_rotation_quadrature(fam, T, radius)
    mc = MonteCarloSequenceField(family, T, samples=6000, seed=11, batches=20,
                                 rotation="real", radius=radius, device="cpu")
    for th in (_theta(2), diagonal_init(2, 0.3, 0.5)):
        L, g = _quadrature_loss_and_grad(x, w, th)
        est = mc.estimate(th)
        assert abs(float(est.loss) - L) <= 4 * float(est.loss_se)
        act = torch.from_numpy(active_mask(2))
        z = ((est.grad - g)[act] / est.grad_se[act]).abs()
        assert float(z.max()) <= 4.5, float(z.max())  # 4.5 SE over 48 coordinates


def test_real_rotation_leaves_the_diagonal_manifold():
    """Docs claim: for real rotations the diagonal manifold is not invariant, even for a
    rotation-invariant (gaussian) token: at a diagonal point the exact gradient has
    ``W^KQ_23 = c·I`` with ``c ≠ 0`` (and nothing else off the diagonal blocks)."""
    x, w = _real_rotation_quadrature("gaussian", 6, 1.0)
    _, g = _quadrature_loss_and_grad(x, w, diagonal_init(2, 0.3, 0.5))
    KQ, _ = unpack(g)
    c = block(KQ, 2, 3)
    assert torch.allclose(c, c[0, 0] * torch.eye(2, dtype=torch.float64), atol=1e-12)
    assert float(c[0, 0]) == pytest.approx(1.3697916666666667, rel=1e-10)
    off = g.clone()
    off[torch.from_numpy(diagonal_mask(2))] = 0
    KQo, _ = unpack(off)
    block(KQo, 2, 3).zero_()
    assert float(off.abs().max()) < 1e-12


def _independent(family, T, n, seed, th, **process) -> tuple[float, float, torch.Tensor,
                                                                torch.Tensor]:
    """Mean and iid standard error of the loss and gradient over ``n`` fresh sequences."""
    x = sample_sequences(family, n, T, make_generator(seed), **process)
    th = th.detach().clone().requires_grad_(True)
    k = 40  # per-group gradients give the gradient's standard error
    pers, grads = [], []
    for part in x.chunk(k):
        per = sequence_loss(th, part)
        (g,) = torch.autograd.grad(per.mean(), th)
        pers.append(per.detach())
        grads.append(g)
    G = torch.stack(grads)
    per = torch.cat(pers)
    return (float(per.mean()), float(per.std() / math.sqrt(n)), G.mean(0),
            G.std(0) / math.sqrt(k))


@pytest.mark.parametrize("process", [
    {"rotation": "haar"},
    {"rotation": "haar", "noise": 0.4, "radius": 0.9},
    {"rotation": "diagonal", "noise": 0.3},
    {"rotation": "real", "noise": 0.2},
])
def test_monte_carlo_within_4_se_of_a_large_independent_sample(process):
    fam, T = gaussian(2, 0.9), 6
    mc = MonteCarloSequenceField(fam, T, samples=4000, seed=1, batches=20, device="cpu",
                                 **process)
    th = _theta(2)
    est = mc.estimate(th)
    L, L_se, g, g_se = _independent(fam, T, 20_000, 99, th, **process)
    assert abs(float(est.loss) - L) <= 4 * math.hypot(float(est.loss_se), L_se)
    act = torch.from_numpy(active_mask(2))
    z = ((est.grad - g)[act] / torch.hypot(est.grad_se, g_se)[act]).abs()
    assert float(z.max()) <= 4.5, float(z.max())  # 4.5 SE over 48 coordinates
    # the estimate is the field's own loss and gradient (same draws)
    L_f, g_f = mc.loss_and_grad(th)
    assert float(L_f) == pytest.approx(float(est.loss), rel=1e-10)
    assert torch.allclose(g_f, est.grad, rtol=1e-9, atol=1e-10)


def noisy_zero_loss(mean_sq_norm: float, d: int, T: int, radius: float, noise: float) -> float:
    """``L(0) = ½ Σ_{t=3}^{T} E‖x_t‖²`` for ``x_{t+1} = r U x_t + ε_t`` (U unitary,
    ``E|ε_k|² = s²``, ε independent of x_t): ``E‖x_{t+1}‖² = r² E‖x_t‖² + d s²``, so
    ``E‖x_t‖² = r^{2(t−1)} E‖x_1‖² + d s² Σ_{j<t−1} r^{2j}``."""
    total = 0.0
    for t in range(3, T + 1):
        total += radius ** (2 * (t - 1)) * mean_sq_norm + d * noise**2 * sum(
            radius ** (2 * j) for j in range(t - 1))
    return 0.5 * total


@pytest.mark.parametrize(("rotation", "radius", "noise"), [
    ("haar", 1.0, 0.5), ("haar", 0.8, 1.0), ("diagonal", 1.0, 0.3), ("real", 0.9, 0.7)])
def test_noisy_loss_at_zero_matches_its_closed_form(rotation, radius, noise):
    fam, T = gaussian(2, 1.0), 8
    mc = MonteCarloSequenceField(fam, T, samples=8000, seed=5, batches=20, device="cpu",
                                 rotation=rotation, radius=radius, noise=noise)
    zero = torch.zeros(mc.n_params, dtype=torch.float64)
    est = mc.estimate(zero)
    want = noisy_zero_loss(fam.mean_sq_norm, 2, T, radius, noise)
    assert abs(float(est.loss) - want) <= 4 * float(est.loss_se)
    assert float(est.grad.abs().max()) == 0.0  # every term has P and A
    assert mc.build().const == pytest.approx(float(est.loss), rel=1e-12)
    # the noise adds d s² per step: the constant grows past the noiseless one by that much
    assert want - noisy_zero_loss(fam.mean_sq_norm, 2, T, radius, 0.0) == pytest.approx(
        0.5 * 2 * noise**2 * sum(sum(radius ** (2 * j) for j in range(t - 1))
                                 for t in range(3, T + 1)), rel=1e-12)


# ---- FieldSpec and make_field ----------------------------------------------------------
def test_make_field_builds_the_sequence_field_beyond_the_diagonal():
    fam = gaussian(2)
    spec = FieldSpec("mc", fam, 6, samples=100, batches=4, rotation="haar", noise=0.1)
    f = make_field(spec, reuse=False)
    assert isinstance(f, MonteCarloSequenceField) and isinstance(f, SequenceField)
    desc = f.describe()
    assert desc["rotation"] == "haar" and desc["noise"] == 0.1 and desc["field"] == "mc"
    assert spec.describe()["rotation"] == "haar"
    fin = make_field(FieldSpec("finite", fam, 6, m=20, rotation="real"), reuse=False)
    assert isinstance(fin, FiniteSequenceField) and fin.rotation == "real"
    plain = make_field(FieldSpec("finite", fam, 6, m=20), reuse=False)
    assert isinstance(plain, FiniteField)


def test_bad_process_is_one_line():
    with pytest.raises(MesadynError, match="d=3"):
        FiniteSequenceField(gaussian(3), 6, 10, 1, rotation="real")
    with pytest.raises(MesadynError, match="noise=-0.1"):
        FiniteSequenceField(gaussian(2), 6, 10, 1, noise=-0.1)
    with pytest.raises(MesadynError, match="spiral"):
        FiniteSequenceField(gaussian(2), 6, 10, 1, rotation="spiral")
    with pytest.raises(MesadynError, match="samples must be >= batches"):
        MonteCarloSequenceField(gaussian(2), 6, samples=3, batches=4)
    with pytest.raises(MesadynError, match=r"one block of 8192 sequences at d=2 T=10000000"):
        FiniteSequenceField(gaussian(2), 10**7, 10**5, 1)

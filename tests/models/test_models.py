"""The models of :mod:`mesadyn.models` against independent computations.

- the paper's :class:`LinearAttention` is :mod:`mesadyn.model` and its exact and sampled
  fields to 1e-14; :class:`DeepLinearAttention` with one layer is the paper's model to 1e-14;
- the two-layer forward pass and softmax attention against a token-by-token loop over the
  definitions of docs/design.md §7 (the full 3d embedding, no prefix sums);
- the layout (blocks, active entries, diagonal init, labels), the declared symmetries (finite
  transformations leave ŷ unchanged; their tangents are orthogonal to the gradient; the
  per-layer invariants are conserved to first order) and the bad inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField, FiniteField
from mesadyn.model import (
    active_mask,
    diagonal_init,
    gaussian_init,
    invariant,
    predict,
    sequence_loss,
)
from mesadyn.models import (
    PAPER,
    DeepLinearAttention,
    LinearAttention,
    SoftmaxAttention,
    model_from,
    model_of,
)
from mesadyn.process import gaussian, make_generator, sample_sequences, sequences


def _seqs(d: int, T: int, n: int = 7, seed: int = 3) -> torch.Tensor:
    return sample_sequences(gaussian(d, 0.9), n, T, make_generator(seed), "cpu")


def _embed(x: torch.Tensor, t: int, d: int) -> torch.Tensor:
    """``e_t = (0_d, x_t, x_{t−1})`` for one sequence ``x`` (T, d), t 1-based."""
    prev = x[t - 2] if t >= 2 else torch.zeros(d, dtype=x.dtype)
    return torch.cat([torch.zeros(d, dtype=x.dtype), x[t - 1], prev])


def _deep_loop(model: DeepLinearAttention, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """ŷ_2..ŷ_T of docs/design.md §7's recursion, token by token on the full stream."""
    n, T, d = x.shape
    mats = [m.to(torch.complex128) for m in model.matrices(theta)]
    out = torch.zeros(n, T - 1, d, dtype=torch.complex128)
    for s in range(n):
        stream = [_embed(x[s], t, d) for t in range(1, T + 1)]
        for layer in range(model.k):
            KQ, PV = mats[2 * layer], mats[2 * layer + 1]
            new = [stream[0]]
            for t in range(2, T + 1):
                G = sum(torch.outer(stream[i], stream[i].conj()) for i in range(t))
                new.append(stream[t - 1] + PV @ G @ KQ @ stream[t - 1] / (t - 1))
            stream = new
        for t in range(2, T + 1):
            out[s, t - 2] = stream[t - 1][:d]
    return out


def _softmax_loop(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    n, T, d = x.shape
    m = 9 * d * d
    KQ = theta[:m].reshape(3 * d, 3 * d).to(torch.complex128)
    PV = theta[m:].reshape(3 * d, 3 * d).to(torch.complex128)
    out = torch.zeros(n, T - 1, d, dtype=torch.complex128)
    for s in range(n):
        e = [_embed(x[s], t, d) for t in range(1, T + 1)]
        for t in range(2, T + 1):
            scores = torch.stack([(e[i].conj() @ KQ @ e[t - 1]).real for i in range(t)])
            w = torch.softmax(scores, 0)
            out[s, t - 2] = (PV @ sum(w[i] * e[i] for i in range(t)))[:d]
    return out


# ---- the paper's model ---------------------------------------------------------------------
def test_paper_model_is_the_module() -> None:
    d, T = 2, 6
    x, th = _seqs(d, T), gaussian_init(d, 0.5, 3)
    assert PAPER == LinearAttention() and PAPER.is_paper and PAPER.moment_exact
    assert torch.equal(PAPER.predict(th, x), predict(th, x))
    assert torch.equal(PAPER.sequence_loss(th, x), sequence_loss(th, x))
    assert torch.equal(PAPER.diagonal_init(d, 0.3, 0.7), diagonal_init(d, 0.3, 0.7))
    assert np.array_equal(PAPER.active_mask(d), active_mask(d))
    assert PAPER.n_params(d) == 18 * d * d and PAPER.dim_of(th) == d
    assert float(PAPER.invariant(th)) == float(invariant(th))
    assert PAPER.describe() == {"model": "linear"} and str(PAPER) == "linear"


def test_paper_model_loss_is_the_exact_and_finite_fields() -> None:
    """The model's per-sequence loss averaged over FiniteField's draws is that field's loss
    (1e-14); the exact field at θ = 0 is ½(T−2)E‖x_1‖²."""
    d, T, m = 2, 5, 300
    th = gaussian_init(d, 0.4, 5)
    fin = FiniteField(gaussian(d, 0.9), T, m, seed=4)
    x = sequences(fin.x1, fin.lam, T)
    ours = PAPER.sequence_loss(th, x).mean()
    assert math.isclose(float(ours), float(fin.loss(th)), rel_tol=1e-14)
    ex = ExactField(gaussian(d, 0.9), T)
    zero = torch.zeros(PAPER.n_params(d), dtype=torch.float64)
    assert math.isclose(float(ex.loss(zero)), 0.5 * (T - 2) * d * 0.81, rel_tol=1e-14)


# ---- k-layer linear attention ----------------------------------------------------------------
def test_one_layer_deep_is_the_paper() -> None:
    d, T = 3, 6
    x, th = _seqs(d, T), gaussian_init(d, 0.5, 7)
    deep = DeepLinearAttention(1)
    assert deep.n_params(d) == PAPER.n_params(d)
    assert np.array_equal(deep.active_mask(d), active_mask(d))
    assert np.array_equal(deep.diagonal_mask(d), PAPER.diagonal_mask(d))
    y, y0 = deep.predict(th, x), predict(th, x)
    assert float((y - y0).abs().max()) <= 1e-14 * float(y0.abs().max())
    th1 = th.clone().requires_grad_(True)
    th2 = th.clone().requires_grad_(True)
    g1 = torch.autograd.grad(deep.sequence_loss(th1, x).sum(), th1)[0]
    g2 = torch.autograd.grad(sequence_loss(th2, x).sum(), th2)[0]
    assert float((g1 - g2).abs().max()) <= 1e-14 * float(g2.abs().max())
    assert torch.equal(deep.diagonal_init(d, 0.2, 0.4), diagonal_init(d, 0.2, 0.4))


@pytest.mark.parametrize("k", [2, 3])
def test_deep_forward_against_the_recursion(k: int) -> None:
    d, T = 2, 5
    model = DeepLinearAttention(k)
    x, th = _seqs(d, T, n=3), model.gaussian_init(d, 0.4, 11)
    y, ref = model.predict(th, x), _deep_loop(model, th, x)
    assert float((y - ref).abs().max()) <= 1e-12 * float(ref.abs().max())


def test_deep_layout_and_active_entries() -> None:
    d, k = 2, 2
    model = DeepLinearAttention(k)
    assert model.n_params(d) == 36 * d * d and model.dim_of(torch.zeros(144)) == d
    names = [b.name for b in model.blocks(d)]
    assert names == ["L1.W_KQ", "L1.W_PV", "L2.W_KQ", "L2.W_PV"]
    assert model.block_labels(d)[0] == "L1.W_KQ_11"
    # the gradient vanishes off the active entries and not on all of them
    x, th = _seqs(d, 5), model.gaussian_init(d, 0.5, 2).requires_grad_(True)
    g = torch.autograd.grad(model.sequence_loss(th, x).sum(), th)[0]
    act = torch.from_numpy(model.active_mask(d))
    assert float(g[~act].abs().max()) == 0.0 and bool((g[act] != 0).all())
    # the layered diagonal init: diag W^KQ_32 = a0, diag W^PV_12 = b0 in every layer
    th0 = model.diagonal_init(d, 0.3, 0.7)
    for layer in range(k):
        KQ, PV = model.matrices(th0)[2 * layer], model.matrices(th0)[2 * layer + 1]
        assert torch.equal(KQ[2 * d:, d:2 * d], 0.3 * torch.eye(d, dtype=torch.float64))
        assert torch.equal(PV[:d, d:2 * d], 0.7 * torch.eye(d, dtype=torch.float64))
        assert float(KQ.abs().sum() + PV.abs().sum()) == pytest.approx(d * (0.3 + 0.7))
    a, b = model.diagonal_entries(th0)
    assert a.shape == (k, d) and np.allclose(model.ab(th0), k * 0.21)


def test_deep_symmetries_leave_the_prediction_unchanged() -> None:
    """Finite transformations: the per-layer scaling and the stream change of basis
    ``S = [[I,0,0],[S21,I,0],[S31,0,I]]`` (PV → S PV S⁻¹, KQ → S⁻ᵀ KQ S⁻¹) give the same ŷ;
    each declared tangent is orthogonal to the gradient of a random loss."""
    d, k = 2, 2
    model = DeepLinearAttention(k)
    x, th = _seqs(d, 5, n=4), model.gaussian_init(d, 0.4, 9)
    y = model.predict(th, x)
    mats = list(model.matrices(th))
    scaled = [m.clone() for m in mats]
    scaled[2] = mats[2] / 1.7
    scaled[3] = mats[3] * 1.7
    assert torch.allclose(model.predict(model.pack(*scaled), x), y, rtol=0, atol=1e-12)
    gen = torch.Generator().manual_seed(0)
    S = torch.eye(3 * d, dtype=torch.float64)
    S[d:, :d] = 0.3 * torch.randn(2 * d, d, generator=gen, dtype=torch.float64)
    Si = torch.linalg.inv(S)
    sheared = []
    for layer in range(k):
        sheared += [Si.T @ mats[2 * layer] @ Si, S @ mats[2 * layer + 1] @ Si]
    assert torch.allclose(model.predict(model.pack(*sheared), x), y, rtol=0, atol=1e-12)
    V = model.symmetries(th.numpy())
    assert V.shape == (model.n_params(d), k + 2 * d * d)
    assert len(model.symmetry_names(d)) == V.shape[1]
    assert np.linalg.matrix_rank(V) == V.shape[1]
    thg = th.clone().requires_grad_(True)
    g = torch.autograd.grad(model.sequence_loss(thg, x).sum(), thg)[0].numpy()
    assert np.abs(g @ V).max() <= 1e-10 * np.abs(g).max() * np.abs(V).max()
    # the per-layer invariants have zero derivative along the gradient
    inv = torch.func.jacrev(lambda t: model.invariants(t))(th)
    assert float((inv @ torch.from_numpy(g)).abs().max()) <= 1e-10 * float(np.abs(g).max())


def test_paper_symmetry_is_the_scaling() -> None:
    d = 2
    x, th = _seqs(d, 5), gaussian_init(d, 0.5, 1)
    thg = th.clone().requires_grad_(True)
    g = torch.autograd.grad(sequence_loss(thg, x).sum(), thg)[0].numpy()
    V = PAPER.symmetries(th.numpy())
    assert V.shape == (18 * d * d, 1) and np.abs(V).max() > 0
    assert abs(float(g @ V[:, 0])) <= 1e-10 * np.abs(g).max() * np.abs(V).max()


# ---- softmax attention -------------------------------------------------------------------------
def test_softmax_forward_against_the_loop() -> None:
    d, T = 2, 6
    model = SoftmaxAttention()
    x, th = _seqs(d, T, n=3), gaussian_init(d, 0.6, 4)
    y, ref = model.predict(th, x), _softmax_loop(th, x)
    assert float((y - ref).abs().max()) <= 1e-13 * float(ref.abs().max())
    assert not model.polynomial and model.token_degree is None and model.loss_degree is None
    assert model.symmetries(th.numpy()).shape == (18 * d * d, 0)


# ---- identity and bad input ----------------------------------------------------------------------
def test_model_of_and_descriptions() -> None:
    assert model_of() is PAPER and model_of("linear", 1) is PAPER
    assert model_of("deep", 2) == DeepLinearAttention(2)
    assert model_of("softmax") == SoftmaxAttention()
    assert model_of("deep", 2).describe() == {"model": "deep", "layers": 2}
    assert str(model_of("deep", 3)) == "deep(layers=3)"
    assert model_from({}) is PAPER
    assert model_from({"model": "deep", "layers": 2}) == DeepLinearAttention(2)
    assert hash(DeepLinearAttention(2)) == hash(model_of("deep", 2))
    assert DeepLinearAttention(2).token_degree == 9 and DeepLinearAttention(2).loss_degree == 18
    assert DeepLinearAttention(2).phase_degree(6) == 36


@pytest.mark.parametrize(("name", "layers", "needle"), [
    ("transformer", 1, "'transformer'"), ("deep", 0, "layers"), ("linear", 2, "layers=2"),
    ("softmax", 3, "layers=3"), ("deep", "two", "layers"),
])
def test_bad_models_name_the_value(name: object, layers: object, needle: str) -> None:
    with pytest.raises(MesadynError, match=needle):
        model_of(name, layers)


def test_bad_theta_and_sequences() -> None:
    model = DeepLinearAttention(2)
    with pytest.raises(MesadynError, match="length"):
        model.dim_of(torch.zeros(17))
    with pytest.raises(MesadynError, match="d=3"):
        model.predict(model.gaussian_init(2, 0.1), _seqs(3, 4))
    with pytest.raises(MesadynError, match="shape"):
        model.check_theta(torch.zeros(3, 144), 2)
    with pytest.raises(MesadynError, match="sigma_w"):
        model.gaussian_init(2, -1.0)

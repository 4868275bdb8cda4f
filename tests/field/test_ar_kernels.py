"""The sampled fields' AR-batch kernels (mesadyn/field/_ar_kernels.py, _ar_autograd.py): the
closed form, the prefix Grams and the single-coordinate sum over t, by either kernel, against
Section 3.2's O(T²) formula and the model's general predict with autograd."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import _ar_autograd, _ar_kernels
from mesadyn.field._ar_kernels import ARBatch, Kernel
from mesadyn.model import (
    active_mask,
    diagonal_init,
    gaussian_init,
    sequence_loss,
    unpack,
)
from mesadyn.process import gaussian, make_generator, sample, sequences, sparse


def direct_predictions(theta: torch.Tensor, x: torch.Tensor) -> np.ndarray:
    """Section 3.2 verbatim: e_t = (0_d, x_t, x_{t−1}) ∈ C^{3d}, E_t = (e_1..e_t),
    ŷ_t = [W^PV E_t E_t^* W^KQ e_t / (t−1)]_{1:d}, recomputing every prefix (O(T²))."""
    W_KQ, W_PV = (w.numpy().astype(np.complex128) for w in unpack(theta))
    xs = x.numpy()
    n, T, d = xs.shape
    out = np.zeros((n, T - 1, d), dtype=np.complex128)
    for s in range(n):
        E = np.zeros((3 * d, T), dtype=np.complex128)
        for t in range(T):
            E[d : 2 * d, t] = xs[s, t]
            if t > 0:
                E[2 * d :, t] = xs[s, t - 1]
        for t in range(2, T + 1):  # 1-indexed t, ρ_t = t − 1
            Et = E[:, :t]
            y = W_PV @ Et @ Et.conj().T @ W_KQ @ E[:, t - 1] / (t - 1)
            out[s, t - 2] = y[:d]
    return out



def test_inactive_blocks_get_no_gradient():
    d, T = 2, 6
    theta = gaussian_init(d, 0.5, seed=5)
    x1, lam = sample(gaussian(d, 1.0), 4, T, make_generator(1), "cpu")
    mask = torch.as_tensor(active_mask(d))
    th = theta.clone().requires_grad_(True)
    loss = ARBatch(x1, lam, T).sequence_loss(th).sum()
    (g,) = torch.autograd.grad(loss, th)
    assert torch.all(g[~mask] == 0) and torch.any(g[mask] != 0)


def test_ar_loss_equals_general_loss():
    d, T = 3, 10
    theta = gaussian_init(d, 0.3, seed=8)
    x1, lam = sample(gaussian(d, 1.0), 7, T, make_generator(6), "cpu")
    ref = sequence_loss(theta, sequences(x1, lam, T))
    fast = ARBatch(x1, lam, T).sequence_loss(theta)
    assert torch.allclose(fast, ref, rtol=1e-12)



# ---- the closed form of the AR fast path (issue 16) ------------------------------------------
def _with_phases(lam: torch.Tensor, pairs: dict[int, float]) -> torch.Tensor:
    """λ with coordinate k's phase set to coordinate 0's plus ``pairs[k]`` (same modulus)."""
    ang = torch.angle(lam).clone()
    for k, gap in pairs.items():
        ang[:, k] = ang[:, 0] + gap
    return torch.polar(lam.abs(), ang)


def _loss_and_grad(fn, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    th = theta.clone().requires_grad_(True)
    loss = fn(th)
    (g,) = torch.autograd.grad(loss.sum(), th)
    return loss.detach(), g


def _assert_hvp_equal(fast_fn, ref_fn, theta: torch.Tensor) -> None:
    """Hessian-vector products (double backward) of two per-sequence losses agree to 1e-12."""
    v = torch.randn(theta.numel(), dtype=torch.float64,
                    generator=torch.Generator().manual_seed(3))

    def hvp(fn):
        th = theta.clone().requires_grad_(True)
        (gr,) = torch.autograd.grad(fn(th).sum(), th, create_graph=True)
        (hv,) = torch.autograd.grad(gr, th, grad_outputs=v)
        return hv

    fast, ref = hvp(fast_fn), hvp(ref_fn)
    assert float((fast - ref).abs().max()) <= 1e-12 * float(ref.abs().max())


def _direct_loss(theta: torch.Tensor, x1: torch.Tensor, lam: torch.Tensor, T: int) -> np.ndarray:
    """Eq. 2's summand per sequence from the O(T²) predictions of Section 3.2 verbatim."""
    x = sequences(x1, lam, T)
    y = direct_predictions(theta, x[:, :-1])
    return 0.5 * (np.abs(y - x[:, 2:].numpy()) ** 2).sum(axis=(1, 2))


@pytest.mark.parametrize(
    ("case", "radius", "pairs", "n_gram"),
    [
        ("random", 1.0, {}, None),
        ("nearly equal phases", 1.0, {1: 3e-3, 2: -2e-3}, 0),  # above NEAR_ONE: closed form
        ("near-one ratios", 1.0, {1: 2e-4}, 7),  # below NEAR_ONE: every sequence on G'_t
        ("exactly equal", 1.0, {1: 0.0}, 0),  # z = 1 off the diagonal: E has that pair
        ("radius 0.5", 0.5, {}, 0),
        ("radius 0.9", 0.9, {1: 5e-3}, 0),
    ],
)
@pytest.mark.parametrize("kernel", [None, Kernel.batched], ids=["auto", "batched"])
def test_closed_form_equals_direct_and_general(case, radius, pairs, n_gram, kernel, monkeypatch):
    """Loss and gradient of ARBatch (closed form, prefix-Gram fallback; either kernel) against
    Section 3.2's O(T²) formula (loss) and model.predict with autograd (loss and gradient),
    1e-12.  ``auto`` takes the fused kernel except where E is not the identity (exactly
    equal phases), which takes the batched one."""
    monkeypatch.setattr(_ar_kernels, "CLOSED_FORM_MIN_T", 3)  # the closed form at this T too
    d, T, n = 3, 12, 7
    x1, lam = sample(gaussian(d, 1.0), n, T, make_generator(21), "cpu", radius=radius)
    lam = _with_phases(lam, pairs)
    theta = gaussian_init(d, 0.4, seed=5)
    batch = ARBatch(x1, lam, T, kernel=kernel)
    want = kernel or (Kernel.batched if case == "exactly equal" else Kernel.fused)
    assert {type(p).__name__: p.kernel for p in batch._parts}.get("_ClosedForm", want) == want
    if n_gram is not None:
        assert batch.n_prefix_gram == n_gram
    loss, g = _loss_and_grad(batch.sequence_loss, theta)
    ref_loss, ref_g = _loss_and_grad(lambda th: sequence_loss(th, sequences(x1, lam, T)), theta)
    direct = _direct_loss(theta, x1, lam, T)
    np.testing.assert_allclose(loss.numpy(), direct, rtol=1e-12, atol=0)
    np.testing.assert_allclose(loss.numpy(), ref_loss.numpy(), rtol=1e-12, atol=0)
    assert float((g - ref_g).abs().max()) <= 1e-12 * float(ref_g.abs().max())


def test_closed_form_keeps_the_order_of_a_mixed_batch(monkeypatch):
    """Sequences split between the two paths come back in the order given; below
    CLOSED_FORM_MIN_T every sequence takes the prefix-Gram path."""
    d, T, n = 3, 10, 9
    x1, lam = sample(gaussian(d, 1.0), n, T, make_generator(4), "cpu")
    assert ARBatch(x1, lam, T).n_prefix_gram == n  # T = 10 < CLOSED_FORM_MIN_T
    monkeypatch.setattr(_ar_kernels, "CLOSED_FORM_MIN_T", 3)
    near = torch.zeros(n, dtype=torch.bool)
    near[[1, 4, 5]] = True
    lam = torch.where(near[:, None], _with_phases(lam, {2: 1e-5}), lam)
    batch = ARBatch(x1, lam, T)
    assert batch.n_prefix_gram == 3
    theta = gaussian_init(d, 0.5, seed=9)
    np.testing.assert_allclose(batch.sequence_loss(theta).numpy(),
                               _direct_loss(theta, x1, lam, T), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kernel", list(Kernel))
@pytest.mark.parametrize("min_T", [3, 10**9], ids=["closed", "prefix-gram"])
def test_closed_form_batched_theta_and_hvp(min_T, kernel, monkeypatch):
    """A batch of θ (k, 18d²) gives each θ's loss and gradient; a Hessian-vector product
    (double backward) equals the general path's (both paths, both kernels)."""
    monkeypatch.setattr(_ar_kernels, "CLOSED_FORM_MIN_T", min_T)
    d, T, n = 2, 9, 6
    x1, lam = sample(gaussian(d, 1.0), n, T, make_generator(8), "cpu")
    batch = ARBatch(x1, lam, T, kernel=kernel)
    assert batch.n_prefix_gram == (0 if min_T == 3 else n)
    thetas = torch.stack([gaussian_init(d, 0.5, seed=s) for s in (1, 2, 3)])
    loss, g = _loss_and_grad(batch.sequence_loss, thetas)
    assert loss.shape == (3, n) and g.shape == thetas.shape
    for i in range(3):
        li, gi = _loss_and_grad(batch.sequence_loss, thetas[i])
        np.testing.assert_allclose(loss[i].numpy(), li.numpy(), rtol=1e-13, atol=0)
        np.testing.assert_allclose(g[i].numpy(), gi.numpy(), rtol=1e-12, atol=1e-14)
    x = sequences(x1, lam, T)
    _assert_hvp_equal(batch.sequence_loss, lambda th: sequence_loss(th, x), thetas[0])


def test_closed_form_error_at_the_threshold():
    """NEAR_ONE's justification: just above it (gap 1.05e-3) the closed form is within 3e-13
    of the prefix-Gram path at the paper's T = 100, per sequence (measured 8.7e-14)."""
    from mesadyn import model

    d, T, n = 5, 100, 40
    x1, lam = sample(gaussian(d, 1.0), n, T, make_generator(3), "cpu")
    lam = _with_phases(lam, {1: 1.05 * model.NEAR_ONE})
    theta = gaussian_init(d, 0.3, seed=4)
    closed = ARBatch(x1, lam, T)
    assert closed.n_prefix_gram == 0
    saved = model.NEAR_ONE
    model.NEAR_ONE = float("inf")  # every sequence on the stored G'_t
    try:
        gram = ARBatch(x1, lam, T)
    finally:
        model.NEAR_ONE = saved
    assert gram.n_prefix_gram == n
    l1, g1 = _loss_and_grad(closed.sequence_loss, theta)
    l0, g0 = _loss_and_grad(gram.sequence_loss, theta)
    assert float(((l1 - l0).abs() / l0.abs()).max()) <= 3e-13
    assert float((g1 - g0).abs().max()) <= 3e-13 * float(g0.abs().max())


def test_closed_form_hessian_through_the_sampled_field(monkeypatch):
    """The sampled field's direct Hessian (batched double backward, vmap over the backward
    pass) through the closed form equals the one through the stored prefix Grams."""
    from mesadyn import model
    from mesadyn.field import FiniteField

    theta = gaussian_init(2, 0.3, seed=1)
    out = {}
    for label, near in (("closed", model.NEAR_ONE), ("gram", float("inf"))):
        monkeypatch.setattr(model, "NEAR_ONE", near)
        field = FiniteField(gaussian(2, 1.0), _ar_kernels.CLOSED_FORM_MIN_T + 4, 30, seed=1,
                            form="direct")
        n_gram = sum(b.n_prefix_gram for b in field._chunks())
        assert n_gram == (0 if label == "closed" else 30)
        out[label] = field.direct_hessian(theta)
    assert float((out["closed"] - out["gram"]).abs().max()) <= 1e-12 * float(
        out["gram"].abs().max())


@pytest.mark.parametrize("kernel", list(Kernel))
def test_closed_form_blocks_in_threads_give_the_same_numbers(kernel, monkeypatch):
    """With two torch threads the blocks run in two Python threads (one torch thread each):
    the same loss and gradient, bit for bit, as one thread; the thread count is restored."""
    monkeypatch.setattr(_ar_autograd, "BLOCK_ROWS", 40)  # several blocks of a few sequences
    d, T, n = 2, _ar_kernels.CLOSED_FORM_MIN_T + 2, 23
    x1, lam = sample(gaussian(d, 1.0), n, T, make_generator(6), "cpu")
    batch = ARBatch(x1, lam, T, kernel=kernel)
    assert batch.n_prefix_gram == 0
    theta = gaussian_init(d, 0.4, seed=2)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _loss_and_grad(batch.sequence_loss, theta)
        torch.set_num_threads(2)
        two = _loss_and_grad(batch.sequence_loss, theta)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one[0], two[0]) and torch.equal(one[1], two[1])


@pytest.mark.parametrize("radius", [1.0, 0.8])
def test_fused_kernel_equals_batched_at_the_papers_size(radius):
    """At d = 5, T = 100 (Section 6) the fused kernel (closed form and, at r = 1, prefix
    Grams for five sequences whose phases nearly coincide) gives the batched kernel's loss
    and gradient to 1e-13, and its Hessian-vector product (double backward) equals the
    general path's."""
    d, T, n = 5, 100, 60
    x1, lam = sample(gaussian(d, 1.0), n, T, make_generator(12), "cpu", radius=radius)
    near = torch.zeros(n, dtype=torch.bool)
    near[[3, 17, 18, 40, 59]] = True
    lam = torch.where(near[:, None], _with_phases(lam, {2: 2e-4}), lam)
    fused, batched = (ARBatch(x1, lam, T, kernel=k) for k in (Kernel.fused, Kernel.batched))
    assert fused.n_prefix_gram == (5 if radius == 1 else 0)  # |z| = r² when r < 1: not near 1
    assert {p.kernel for p in fused._parts} == {Kernel.fused}
    theta = diagonal_init(d, 0.3, 0.2) + gaussian_init(d, 0.05, seed=3)
    l1, g1 = _loss_and_grad(fused.sequence_loss, theta)
    l0, g0 = _loss_and_grad(batched.sequence_loss, theta)
    assert float(((l1 - l0).abs() / l0.abs()).max()) <= 1e-13
    assert float((g1 - g0).abs().max()) <= 1e-13 * float(g0.abs().max())
    x = sequences(x1, lam, T)
    few = slice(0, 6)
    sub = ARBatch(x1[few], lam[few], T, kernel=Kernel.fused)
    _assert_hvp_equal(sub.sequence_loss, lambda th: sequence_loss(th, x[few]), theta)


def test_fused_kernel_refuses_what_it_cannot_do():
    """Asked for explicitly, the fused closed form refuses an exactly equal pair of phases
    off the diagonal (E not the identity) in one line; left to choose, it takes the batched
    kernel there and the fused one elsewhere."""
    d, T, n = 3, _ar_kernels.CLOSED_FORM_MIN_T + 4, 5
    x1, lam = sample(gaussian(d, 1.0), n, T, make_generator(2), "cpu")
    equal = _with_phases(lam, {1: 0.0})
    with pytest.raises(MesadynError, match="fused kernel needs .*exactly equal"):
        ARBatch(x1, equal, T, kernel=Kernel.fused)
    assert [p.kernel for p in ARBatch(x1, equal, T)._parts] == [Kernel.batched]
    assert [p.kernel for p in ARBatch(x1, lam, T)._parts] == [Kernel.fused]


@pytest.mark.parametrize(("radius", "T"), [(1.0, 12), (1.0, 100), (0.8, 12), (0.8, 40)])
def test_single_coordinate_sequences_equal_direct_and_general(radius, T):
    """Sequences with x_1 = c e_k (Example 4.1's sparse draws, and x_1 = 0) take the closed sum
    over t: loss, gradient and a Hessian-vector product against Section 3.2's O(T²) formula
    and model.predict with autograd, 1e-12, for a batch of θ; mixed with gaussian draws, each
    sequence comes back in its place."""
    d = 3
    xs, ls = sample(sparse(d, 0.7), 8, T, make_generator(3), "cpu", radius=radius)
    xs[2] = 0.0
    xg, lg = sample(gaussian(d, 1.0), 3, T, make_generator(4), "cpu", radius=radius)
    order = torch.randperm(11, generator=torch.Generator().manual_seed(1))
    x1, lam = torch.cat([xs, xg])[order], torch.cat([ls, lg])[order]
    batch = ARBatch(x1, lam, T)
    assert batch.n_single == 8
    thetas = torch.stack([gaussian_init(d, 0.4, seed=s) for s in (1, 2)])
    loss, g = _loss_and_grad(batch.sequence_loss, thetas)
    x = sequences(x1, lam, T)
    for i in range(2):
        ref_loss, ref_g = _loss_and_grad(lambda th: sequence_loss(th, x), thetas[i])
        np.testing.assert_allclose(loss[i].numpy(), ref_loss.numpy(), rtol=1e-12, atol=0)
        assert float((g[i] - ref_g).abs().max()) <= 1e-12 * float(ref_g.abs().max())
    if T <= 12:
        np.testing.assert_allclose(loss[0].numpy(), _direct_loss(thetas[0], x1, lam, T),
                                   rtol=1e-12, atol=0)
    _assert_hvp_equal(batch.sequence_loss, lambda th: sequence_loss(th, x), thetas[1])

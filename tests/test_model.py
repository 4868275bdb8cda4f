"""Section 3.2: the fast predictions against a direct O(T²) evaluation, Corollary 4.1, blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.model import (
    ARBatch,
    Kernel,
    Mask,
    P_and_A,
    ab,
    active_mask,
    block,
    block_labels,
    diagonal_entries,
    diagonal_init,
    diagonal_mask,
    free_mask,
    gaussian_init,
    invariant,
    n_params,
    pack,
    predict,
    predict_ar,
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


@pytest.mark.parametrize("fam", [gaussian(3, 1.3), sparse(3, 0.7)], ids=["gaussian", "sparse"])
def test_fast_paths_equal_direct_formula(fam):
    T = 9
    theta = gaussian_init(3, 0.4, seed=3)  # every block nonzero, inactive ones included
    x1, lam = sample(fam, 6, T, make_generator(2), "cpu")
    x = sequences(x1, lam, T)
    ref = direct_predictions(theta, x)
    fast = predict(theta, x).numpy()
    ar = predict_ar(theta, x1, lam, T).numpy()
    scale = np.abs(ref).max()
    assert np.abs(fast - ref).max() <= 1e-12 * scale
    assert np.abs(ar - ref).max() <= 1e-12 * scale
    assert np.abs(ar - fast).max() <= 1e-12 * scale


def test_predict_on_general_sequences():
    """predict() does not need the AR structure: arbitrary complex tokens."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, 2, dtype=torch.complex128, generator=g)
    theta = gaussian_init(2, 0.5, seed=1)
    ref = direct_predictions(theta, x)
    assert np.allclose(predict(theta, x).numpy(), ref, rtol=1e-12, atol=1e-13)


def test_corollary_41_at_diagonal_init():
    """ŷ_t = (ab/(t−1)) Σ_{i<t} x_{i+1} x_i^* x_t: one GD step on the in-context OLS."""
    d, T, a0, b0 = 3, 12, 0.7, -1.9
    theta = diagonal_init(d, a0, b0)
    x1, lam = sample(gaussian(d, 1.0), 5, T, make_generator(4), "cpu")
    x = sequences(x1, lam, T).numpy()
    y = predict_ar(theta, x1, lam, T).numpy()
    for t in range(2, T + 1):
        S = sum(np.einsum("ni,nj->nij", x[:, i], x[:, i - 1].conj()) for i in range(1, t))
        ref = a0 * b0 / (t - 1) * np.einsum("nij,nj->ni", S, x[:, t - 1])
        assert np.allclose(y[:, t - 2], ref, rtol=1e-12, atol=1e-12)


def test_inactive_blocks_do_not_reach_predictions():
    d, T = 2, 6
    theta = gaussian_init(d, 0.5, seed=5)
    x1, lam = sample(gaussian(d, 1.0), 4, T, make_generator(1), "cpu")
    mask = torch.as_tensor(active_mask(d))
    other = theta.clone()
    other[~mask] = torch.randn(int((~mask).sum()), dtype=torch.float64)
    assert torch.allclose(predict_ar(theta, x1, lam, T), predict_ar(other, x1, lam, T))
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


def test_blocks_and_masks():
    d = 3
    theta = torch.arange(n_params(d), dtype=torch.float64)
    W_KQ, W_PV = unpack(theta)
    assert torch.equal(pack(W_KQ, W_PV), theta)
    labels = block_labels(d)
    assert labels.shape == (18 * d * d,)
    assert (labels == "W_KQ_32").sum() == d * d and labels[0] == "W_KQ_11"
    # block() and the labels agree
    assert np.all(labels[: 9 * d * d].reshape(3 * d, 3 * d)[2 * d :, d : 2 * d] == "W_KQ_32")
    assert active_mask(d).sum() == 4 * d * d + 2 * d * d
    dm = diagonal_mask(d)
    assert dm.sum() == 2 * d
    th = diagonal_init(d, 0.3, 0.5)
    assert torch.equal(th != 0, torch.as_tensor(dm))
    assert torch.allclose(ab(th), torch.full((d,), 0.15, dtype=torch.float64))
    P, A = P_and_A(th)
    assert torch.equal(P[:, :d], block(unpack(th)[1], 1, 2))
    assert torch.equal(A[d:, :d], block(unpack(th)[0], 3, 2))


def test_gaussian_init_is_seeded():
    a, b, c = gaussian_init(2, 0.1, 1), gaussian_init(2, 0.1, 1), gaussian_init(2, 0.1, 2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert abs(float(a.std()) - 0.1) < 0.03


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: unpack(torch.zeros(17)), "length 17"),
        (lambda: predict(torch.zeros(18), torch.zeros(2, 3, 2, dtype=torch.complex128)), "d=1"),
        (lambda: predict(torch.zeros(18), torch.zeros(3, 2)), "shape"),
        (lambda: diagonal_init(0, 1.0, 1.0), "d=0"),
        (lambda: diagonal_init(2, float("nan"), 1.0), "a0"),
        (lambda: gaussian_init(2, 0.0), "sigma_w"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(MesadynError, match=match):
        call()


# ---- θ geometry: one home (issue 11) ------------------------------------------------------
def _direct_blocks(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """W^KQ_32, W^PV_12, A and P of one flat θ by explicit row/column slicing of Section 3.2."""
    d = int(round((theta.size / 18) ** 0.5))
    kq = theta[: 9 * d * d].reshape(3 * d, 3 * d)
    pv = theta[9 * d * d :].reshape(3 * d, 3 * d)
    return (kq[2 * d : 3 * d, d : 2 * d], pv[0:d, d : 2 * d],
            np.block([[kq[d:2 * d, d:2 * d], kq[d:2 * d, 2 * d:]],
                      [kq[2 * d:, d:2 * d], kq[2 * d:, 2 * d:]]]),
            np.hstack([pv[:d, d:2 * d], pv[:d, 2 * d:]]))


@pytest.mark.parametrize("d", [1, 2, 4])
def test_diagonal_entries_ab_and_invariant_against_direct_blocks(d: int) -> None:
    rng = np.random.default_rng(d)
    batch = rng.normal(size=(2, 3, n_params(d)))
    a, b = diagonal_entries(batch)
    assert a.shape == b.shape == (2, 3, d)
    inv = invariant(batch)
    assert inv.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            kq32, pv12, A, P = _direct_blocks(batch[i, j])
            np.testing.assert_array_equal(a[i, j], np.diag(kq32))
            np.testing.assert_array_equal(b[i, j], np.diag(pv12))
            assert inv[i, j] == pytest.approx(np.sum(A * A) - np.sum(P * P), rel=1e-13)
            Pt, At = P_and_A(torch.from_numpy(batch[i, j]))
            np.testing.assert_array_equal(Pt.numpy(), P)
            np.testing.assert_array_equal(At.numpy(), A)
    # torch in, torch out; one θ gives a 0-d invariant
    th = torch.from_numpy(batch[1, 2])
    ta, tb = diagonal_entries(th)
    assert isinstance(ta, torch.Tensor) and torch.equal(ta, torch.from_numpy(a[1, 2]))
    assert torch.equal(ab(th), ta * tb)
    np.testing.assert_array_equal(ab(batch), a * b)
    assert float(invariant(th)) == inv[1, 2] and np.ndim(invariant(batch[0, 0])) == 0
    # Assumption 3.1: (a0, b0) on every coordinate, invariant d (a0² − b0²)
    a0, b0 = diagonal_entries(diagonal_init(d, 0.3, -0.7))
    assert torch.all(a0 == 0.3) and torch.all(b0 == -0.7)
    assert float(invariant(diagonal_init(d, 0.3, -0.7))) == pytest.approx(d * (0.09 - 0.49))


def test_invariant_is_conserved_by_the_gradient() -> None:
    """``⟨∇I, ∇L⟩ = 0``: I is constant along the flow (checked with the exact field's ∇L)."""
    from mesadyn.field import ExactField

    field = ExactField(gaussian(2, 0.9), 6)
    theta = gaussian_init(2, 0.4, seed=11).requires_grad_(True)
    (g_inv,) = torch.autograd.grad(invariant(theta), theta)
    g_loss = field.grad(theta.detach())
    assert abs(float(g_inv @ g_loss)) < 1e-12 * float(g_inv.norm() * g_loss.norm())


def test_mask_and_free_mask() -> None:
    d = 3
    assert [m.value for m in Mask] == ["none", "diagonal"] and Mask("diagonal") == "diagonal"
    np.testing.assert_array_equal(free_mask(None, d), active_mask(d))
    np.testing.assert_array_equal(free_mask("none", d), active_mask(d))
    np.testing.assert_array_equal(free_mask(Mask.diagonal, d), diagonal_mask(d))
    # a boolean selection is intersected with the active entries (inactive never evolve)
    sel = np.zeros(n_params(d), dtype=bool)
    sel[:9 * d * d] = True  # all of W^KQ
    free = free_mask(sel, d)
    labels = block_labels(d)
    assert set(labels[free]) == {"W_KQ_22", "W_KQ_23", "W_KQ_32", "W_KQ_33"}
    assert free.sum() == 4 * d * d
    with pytest.raises(MesadynError, match="unknown mask 'upper'"):
        free_mask("upper", d)
    with pytest.raises(MesadynError, match="length 162"):
        free_mask(np.ones(5, dtype=bool), d)
    with pytest.raises(MesadynError, match="no trainable"):
        free_mask(~active_mask(d), d)


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
    from mesadyn import model

    monkeypatch.setattr(model, "CLOSED_FORM_MIN_T", 3)  # the closed form at this short T too
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
    from mesadyn import model

    d, T, n = 3, 10, 9
    x1, lam = sample(gaussian(d, 1.0), n, T, make_generator(4), "cpu")
    assert ARBatch(x1, lam, T).n_prefix_gram == n  # T = 10 < CLOSED_FORM_MIN_T
    monkeypatch.setattr(model, "CLOSED_FORM_MIN_T", 3)
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
    from mesadyn import model

    monkeypatch.setattr(model, "CLOSED_FORM_MIN_T", min_T)
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
        field = FiniteField(gaussian(2, 1.0), model.CLOSED_FORM_MIN_T + 4, 30, seed=1,
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
    from mesadyn import model

    monkeypatch.setattr(model, "BLOCK_ROWS", 40)  # several blocks of a few sequences
    d, T, n = 2, model.CLOSED_FORM_MIN_T + 2, 23
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
    from mesadyn import model

    d, T, n = 3, model.CLOSED_FORM_MIN_T + 4, 5
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


@pytest.mark.parametrize("radius", [1.0, 0.8])
def test_predictions_at_chosen_times_equal_the_fast_path(radius):
    """predict_ar_at (the prefix Grams' closed form at a few times) against predict_ar's full
    trajectory, 1e-13 relative: gaussian, sparse and ones draws, with nearly equal phases (the
    summed fallback) and exactly equal ones (z = 1 off the diagonal), t from 2 to 200."""
    from mesadyn.model import predict_ar_at
    from mesadyn.process import ones

    ts = [2, 3, 10, 57, 200]
    for fam in (gaussian(3, 1.0), sparse(3, 0.7), ones(3)):
        x1, lam = sample(fam, 40, 10, make_generator(2), "cpu", radius=radius)
        ang = torch.angle(lam).clone()
        ang[:5, 1] = ang[:5, 0] + 2e-4
        ang[5:8, 2] = ang[5:8, 0]
        lam = torch.polar(lam.abs(), ang)
        theta = gaussian_init(3, 0.4, seed=3)
        ref = predict_ar(theta, x1, lam, 200)[:, np.array(ts) - 2]
        got = predict_ar_at(theta, x1, lam, ts)
        assert float((got - ref).abs().max()) <= 1e-13 * float(ref.abs().max())
    with pytest.raises(MesadynError, match="times >= 2"):
        predict_ar_at(theta, x1, lam, [1, 5])
    with pytest.raises(MesadynError, match="one flat θ for d=3"):
        predict_ar_at(gaussian_init(2, 0.4), x1, lam, [5])

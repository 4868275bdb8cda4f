"""Section 3.2: the fast predictions against a direct O(T²) evaluation, Corollary 4.1, blocks,
the θ geometry and masks (the sampled fields' AR-batch kernels: tests/field/test_ar_kernels.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.model import (
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
    loss = sequence_loss(th, sequences(x1, lam, T)).sum()
    (g,) = torch.autograd.grad(loss, th)
    assert torch.all(g[~mask] == 0) and torch.any(g[mask] != 0)


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

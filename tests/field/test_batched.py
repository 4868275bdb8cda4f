"""The batched field evaluations (issue 15): the batched exact Hessian against the field's own
Hessian row by row and against finite differences of the batched gradient; the batched loss and
gradient at a radius r ≠ 1; sampled fields through their own batch method or their polynomial."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField, FiniteField
from mesadyn.field.batched import (
    active_grad,
    active_hessian,
    active_index,
    batched_hessian,
    batched_loss_and_grad,
)
from mesadyn.model import active_mask, diagonal_mask
from mesadyn.process import gaussian, ones


def _rows(field, k: int = 5, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(k, field.n_params)) * rng.uniform(0.05, 1.5, size=(k, 1))


@pytest.mark.parametrize("fam", [gaussian(2, 1.0), ones(2)], ids=["gaussian", "ones"])
def test_batched_hessian_equals_the_fields_row_by_row(fam) -> None:
    field = ExactField(fam, 8)
    X = _rows(field)
    H = batched_hessian(field, X)
    assert H.shape == (5, field.n_params, field.n_params)
    for k, x in enumerate(X):
        ref = field.hessian(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(H[k], ref, rtol=0, atol=1e-12 * np.abs(ref).max())
        np.testing.assert_array_equal(H[k], H[k].T)
    inactive = ~active_mask(2)
    assert not H[:, inactive].any() and not H[:, :, inactive].any()
    # a subset by boolean mask or by integer indices, in the given order
    sub = diagonal_mask(2)
    np.testing.assert_array_equal(batched_hessian(field, X, sub), H[:, sub][:, :, sub])
    idx = np.array([5, 0, 3, int(np.flatnonzero(inactive)[0])])
    np.testing.assert_array_equal(batched_hessian(field, X, idx), H[:, idx][:, :, idx])


def test_batched_hessian_against_finite_differences_of_the_batched_gradient() -> None:
    field = ExactField(gaussian(2, 1.0), 8)
    X = _rows(field, 3, seed=1)
    H = batched_hessian(field, X)
    eps = 1e-6
    fd = np.zeros_like(H)
    for i in np.flatnonzero(active_mask(2)):
        e = np.zeros(field.n_params)
        e[i] = eps
        fd[:, :, i] = (batched_loss_and_grad(field, X + e)[1]
                       - batched_loss_and_grad(field, X - e)[1]) / (2 * eps)
    scale = np.abs(H).max()
    assert np.abs(H - fd).max() < 1e-7 * scale


def test_active_coordinates_agree_with_theta_coordinates() -> None:
    field = ExactField(gaussian(2, 1.0), 8)
    X = _rows(field, 4, seed=2)
    idx = active_index(field)
    Z = X[:, idx]
    ref = batched_loss_and_grad(field, X)[1][:, idx]
    np.testing.assert_allclose(active_grad(field, Z), ref, rtol=0,
                               atol=1e-12 * np.abs(ref).max())
    np.testing.assert_array_equal(active_hessian(field, Z), batched_hessian(field, X, idx))


def test_batched_loss_and_grad_at_radius_below_one() -> None:
    """r = 0.8: the field stores its own G, C and constant; the batch uses them."""
    field = ExactField(gaussian(2, 1.0), 6, radius=0.8)
    at_one = ExactField(gaussian(2, 1.0), 6)
    X = _rows(field, 4, seed=3)
    loss, grad = batched_loss_and_grad(field, X)
    H = batched_hessian(field, X)
    for k, x in enumerate(X):
        v, g = field.loss_and_grad(torch.from_numpy(x))
        assert loss[k] == pytest.approx(float(v), rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(grad[k], g.numpy(), rtol=0,
                                   atol=1e-12 * float(g.abs().max()))
        ref = field.hessian(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(H[k], ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    assert np.abs(loss - batched_loss_and_grad(at_one, X)[0]).min() > 1e-3  # r matters


@pytest.mark.parametrize("form", ["direct", "polynomial"])
def test_sampled_field_batches_through_its_own_methods(form, monkeypatch) -> None:
    field = FiniteField(gaussian(2, 1.0), 5, 64, seed=3, form=form)
    X = _rows(field, 3, seed=4) * 0.5
    calls = []
    if form == "direct":
        orig = field.batch_loss_and_grad
        monkeypatch.setattr(field, "batch_loss_and_grad",
                            lambda th: calls.append(th.shape[0]) or orig(th))
    loss, grad = batched_loss_and_grad(field, X)
    if form == "direct":
        assert calls == [3]  # one batched call, not a loop over rows
    for k, x in enumerate(X):
        v, g = field.loss_and_grad(torch.from_numpy(x))
        assert loss[k] == pytest.approx(float(v), rel=1e-12)
        np.testing.assert_allclose(grad[k], g.numpy(), rtol=0,
                                   atol=1e-12 * float(g.abs().max()))
    H = batched_hessian(field, X[:2])
    for k in range(2):
        ref = field.hessian(torch.from_numpy(X[k])).numpy()
        np.testing.assert_allclose(H[k], ref, rtol=0, atol=1e-10 * np.abs(ref).max())


def test_a_sequence_field_in_polynomial_form_batches_through_its_closed_form() -> None:
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import gaussian_init

    f = make_field(FieldSpec("mc", gaussian(2, 1.0), 6, samples=2000, seed=1,
                             rotation="haar"), reuse=False)
    assert str(f.form) == "polynomial"
    th = torch.stack([gaussian_init(2, 0.3, s) for s in range(3)]).numpy()
    v, g = batched_loss_and_grad(f, th)
    for k in range(3):
        L, G = f.loss_and_grad(torch.from_numpy(th[k]))
        assert abs(float(L) - v[k]) <= 1e-12 * abs(v[k])
        assert np.abs(G.numpy() - g[k]).max() <= 1e-12 * np.abs(g[k]).max()


def test_bad_input() -> None:
    field = ExactField(gaussian(1, 1.0), 4)
    X = _rows(field, 2)
    with pytest.raises(MesadynError, match="shape"):
        batched_hessian(field, X[:, :-1])
    with pytest.raises(MesadynError, match="index"):
        batched_hessian(field, X, [0, field.n_params])
    with pytest.raises(MesadynError, match="length"):
        batched_hessian(field, X, np.ones(3, dtype=bool))

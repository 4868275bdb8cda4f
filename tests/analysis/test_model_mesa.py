"""Corollary 4.1, k-step GD fits and Proposition 4.1's ratio for every model, each against an
independent computation (the model's own forward pass, hand-written closed-form GD, the paper's
path of :mod:`mesadyn.analysis.incontext`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.incontext import ContextBatch, draw_test_set
from mesadyn.analysis.mesa import mesa_check, ols_gd_step
from mesadyn.analysis.model_mesa import (
    _GDIterates,
    fit_gd_steps,
    gd_prediction,
    model_incontext,
    model_mse,
    model_ratio,
)
from mesadyn.errors import MesadynError
from mesadyn.models import PAPER, DeepLinearAttention, SoftmaxAttention
from mesadyn.process import gaussian, make_generator, sample, sequences, sparse


def _x(fam, n=24, T=10, seed=3):
    x1, lam = sample(fam, n, T, make_generator(seed))
    return sequences(x1, lam, T)


# ---- gd_prediction ----------------------------------------------------------------------------
def test_one_step_is_corollary_41_and_the_paper_model():
    d, a0, b0 = 3, 0.7, 1.3
    theta = PAPER.diagonal_init(d, a0, b0)
    x = _x(gaussian(d, 0.8))
    y_model = PAPER.predict(theta, x)
    assert mesa_check(theta, x).max_rel_err < 1e-12
    for t in range(2, x.shape[1] + 1):
        W = ols_gd_step(x, t, a0 * b0 / (t - 1))
        y_ols = torch.einsum("nab,nb->na", W, x[:, t - 1])
        y_gd = gd_prediction(x, t, [a0 * b0])
        assert (y_gd - y_ols).abs().max() < 1e-12
        assert (y_gd - y_model[:, t - 2]).abs().max() < 1e-12


def _hand_gd(x, t, etas):
    """GD with the closed-form gradient ∇L = −Σ (x_{i+1} − W x_i) x_i^*; this is the steepest
    descent direction, which is what torch's complex gradient (2 ∂L/∂W̄) is."""
    n, _, d = x.shape
    W = torch.zeros(n, d, d, dtype=torch.complex128)
    xi, xn = x[:, : t - 1], x[:, 1:t]
    for eta in etas:
        r = xn - torch.einsum("nab,nib->nia", W, xi)
        grad = -torch.einsum("nia,nib->nab", r, xi.conj())
        W = W - eta / (t - 1) * grad
    return torch.einsum("nab,nb->na", W, x[:, t - 1])


@pytest.mark.parametrize("etas", [[0.9, -0.4], [0.3, 1.1, 0.5]])
def test_k_steps_match_hand_written_gd(etas):
    x = _x(gaussian(4, 0.6), n=16, T=9)
    for t in (2, 5, 9):
        assert (gd_prediction(x, t, etas) - _hand_gd(x, t, etas)).abs().max() < 1e-12


def test_the_fit_closed_form_matches_autodiff_gd():
    x = _x(gaussian(3, 0.7), n=8, T=8)
    ts = [2, 4, 8]
    etas = np.array([0.8, -0.3, 0.6])
    closed = _GDIterates(x, ts).predict(etas)
    for j, t in enumerate(ts):
        ref = gd_prediction(x, t, etas.tolist()).numpy()
        assert np.abs(closed[:, j] - ref).max() < 1e-12


# ---- fit_gd_steps ------------------------------------------------------------------------------
def test_paper_diagonal_fits_one_step_of_size_ab():
    d, a0, b0 = 4, 0.6, 1.5
    theta = PAPER.diagonal_init(d, a0, b0)
    fit = fit_gd_steps(PAPER, theta, _x(gaussian(d, 0.9)), 1)
    assert fit.k == 1 and fit.sequences == 24 and fit.t_checked == tuple(range(2, 11))
    assert abs(fit.etas[0] - a0 * b0) < 1e-10
    assert fit.rel_residual <= 1e-12
    assert fit.structure == 0.0
    assert fit.to_dict()["etas"] == fit.etas


def test_deep_with_an_empty_second_layer_is_one_step():
    d, a, b = 3, 0.9, 0.8
    model = DeepLinearAttention(2)
    theta = model.diagonal_init(d, a, b)
    theta[9 * d * d * 2:] = 0.0  # layer 2 all zero; layer 1 diagonal (a, b)
    x = _x(gaussian(d, 0.7), n=16, T=8)
    fit = fit_gd_steps(model, theta, x, 1)
    assert abs(fit.etas[0] - a * b) < 1e-10
    assert fit.rel_residual <= 1e-12
    two = fit_gd_steps(model, theta, x, 2)
    assert two.rel_residual <= 1e-10


def test_a_generic_deep_theta_is_not_gd():
    model = DeepLinearAttention(2)
    d = 3
    theta = model.gaussian_init(d, 0.4, seed=7)
    x = _x(gaussian(d, 0.8), n=16, T=8)
    one = fit_gd_steps(model, theta, x, 1)
    two = fit_gd_steps(model, theta, x, 2)
    assert one.rel_residual > 1e-3 and two.rel_residual > 1e-3
    assert two.rel_residual <= one.rel_residual * (1 + 1e-9)  # [η_1, 0] is a start
    assert one.structure > 0.1


# ---- Proposition 4.1's ratio -----------------------------------------------------------------
def _perturbed_paper_theta(d):
    return PAPER.diagonal_init(d, 0.8, 1.1) + PAPER.gaussian_init(d, 0.05, seed=4)


@pytest.mark.parametrize("fam", [gaussian(3, 0.9), sparse(3, 1.5)])
def test_model_ratio_equals_the_paper_path(fam):
    d, n, T_te, seed = 3, 40, 7, 11
    theta = _perturbed_paper_theta(d)
    x1, lam = sample(fam, n, T_te + 1, make_generator(seed))
    batch = ContextBatch(x1, lam, T_te)
    ref_r, ref_m = batch.ratio(theta), batch.mse(theta)
    x = sequences(x1, lam, T_te + 1)
    got_r, got_m = model_ratio(PAPER, theta, x), model_mse(PAPER, theta, x)
    for key in ("value", "se", "imag", "imag_se"):
        assert abs(getattr(got_r, key) - getattr(ref_r, key)) < 1e-12, key
    assert (got_r.used, got_r.excluded) == (ref_r.used, ref_r.excluded)
    assert abs(got_m.value - ref_m.value) < 1e-12 and abs(got_m.se - ref_m.se) < 1e-12
    assert abs(got_m.baseline - ref_m.baseline) < 1e-12
    if fam.name == "sparse":  # x_1 = ±c e_i: d − 1 zero denominators per sequence
        assert got_r.excluded == n * (d - 1) and got_r.used == n
    else:
        assert got_r.excluded == 0
    # model_incontext draws the same test set from the same seed
    rep = model_incontext(PAPER, theta, fam, T_te, n, seed)
    x1b, lamb = draw_test_set(fam, n, seed)
    assert torch.equal(x1b, x1) and torch.equal(lamb, lam)
    assert abs(rep.ratio.value - ref_r.value) < 1e-12
    assert rep.ratio.excluded == ref_r.excluded
    assert rep.gd_fit_1 is None and rep.ab is not None and len(rep.ab) == d


def test_model_incontext_softmax_and_deep():
    fam = gaussian(2, 0.8)
    soft = SoftmaxAttention()
    rep = model_incontext(soft, soft.gaussian_init(2, 0.3, seed=2), fam, 6, 12, 5)
    assert rep.ab is None and rep.gd_fit_1 is None and rep.gd_fit.k == 1
    vals = [rep.ratio.value, rep.ratio.se, rep.mse.value, rep.mse.baseline,
            rep.gd_fit.rel_residual, rep.gd_fit.etas[0]]
    assert all(math.isfinite(v) for v in vals)
    out = rep.to_dict()
    assert out["model"] == {"model": "softmax"} and out["ab"] is None
    deep = DeepLinearAttention(2)
    rep2 = model_incontext(deep, deep.diagonal_init(2, 0.5, 0.6), fam, 5, 8, 1)
    assert rep2.gd_fit.k == 2 and rep2.gd_fit_1 is not None and rep2.gd_fit_1.k == 1
    assert rep2.ab == pytest.approx([0.6, 0.6])
    # both layers diagonal: the second reads the untouched x-blocks, so ŷ is one step of Σ ab
    assert abs(rep2.gd_fit_1.etas[0] - 0.6) < 1e-10 and rep2.gd_fit_1.rel_residual <= 1e-12
    assert rep2.gd_fit.rel_residual <= rep2.gd_fit_1.rel_residual * (1 + 1e-9)


def test_bad_input_names_the_value():
    fam = gaussian(2, 1.0)
    theta = PAPER.diagonal_init(2, 1.0, 1.0)
    x = _x(fam, n=4, T=5)
    with pytest.raises(MesadynError, match="k"):
        fit_gd_steps(PAPER, theta, x, 0)
    with pytest.raises(MesadynError, match="k"):
        model_incontext(PAPER, theta, fam, 5, 4, 0, k=0)
    with pytest.raises(MesadynError, match="T_te"):
        model_incontext(PAPER, theta, fam, 1, 4, 0)
    with pytest.raises(MesadynError, match="length 72"):
        model_incontext(PAPER, torch.zeros(50, dtype=torch.float64), fam, 5, 4, 0)
    with pytest.raises(MesadynError, match="50"):
        model_ratio(PAPER, torch.zeros(50, dtype=torch.float64), x)
    with pytest.raises(MesadynError, match="t=9"):
        fit_gd_steps(PAPER, theta, x, 1, ts=[2, 9])
    with pytest.raises(MesadynError, match="etas"):
        gd_prediction(x, 3, [])

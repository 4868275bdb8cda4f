"""The least-squares fit of k preconditioned GD steps to given predictions: known
preconditioners recovered, left and two-sided fits reproducing their predictions, and the
Frobenius projection onto c I + c'(J − I)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.analysis.gd_fit import fit_gd_predictions, gamma_form
from mesadyn.analysis.gd_iterates import GDIterates, Preconditioner, Side, gd_prediction
from mesadyn.errors import MesadynError
from mesadyn.models import PAPER
from mesadyn.process import gaussian, make_generator, sample, sequences


def _x(fam, n=24, T=10, seed=3):
    x1, lam = sample(fam, n, T, make_generator(seed))
    return sequences(x1, lam, T)


def _mats(k, d, seed, scale=0.5):
    return scale * np.random.default_rng(seed).standard_normal((k, d, d))


@pytest.mark.parametrize("structure", [Preconditioner.FULL, Preconditioner.DIAGONAL])
def test_the_fit_recovers_known_right_preconditioners(structure):
    d, k, T = 3, 2, 7
    x = _x(gaussian(d, 0.7), n=12, T=T)
    gammas = _mats(k, d, 5)
    if structure is Preconditioner.DIAGONAL:
        gammas = np.stack([np.diag(np.diag(g)) for g in gammas])
    y = torch.stack([gd_prediction(x, t, list(gammas)) for t in range(2, T + 1)], 1)
    fit = fit_gd_predictions(x, y, k, preconditioner=structure)
    assert np.abs(np.asarray(fit.gammas) - gammas).max() < 1e-8
    assert fit.rel_residual < 1e-12 < fit.scalar_residual and fit.improvement > 1 - 1e-10
    assert np.allclose(fit.lambdas, np.eye(d)) and fit.lambda_forms == []


@pytest.mark.parametrize("side", [Side.LEFT, Side.BOTH])
def test_left_and_two_sided_fits_reproduce_their_predictions(side):
    """Left steps enter ŷ only through Σ_j Λ_j and products such as Λ_1 Λ_0 (and two-sided ones
    up to ``(α Λ_j, Γ_j/α)``), so the fit recovers the prediction, not the matrices."""
    d, k, T = 2, 2, 7
    x = _x(gaussian(d, 0.7), n=12, T=T)
    lambdas = np.eye(d) + _mats(k, d, 6, 0.3)
    gammas = _mats(k, d, 7) if side is Side.BOTH else np.stack([np.eye(d)] * k)
    y = torch.stack([gd_prediction(x, t, list(gammas), list(lambdas)) for t in range(2, T + 1)],
                    1)
    fit = fit_gd_predictions(x, y, k, preconditioner="full", side=side)
    assert fit.rel_residual < 1e-9 < fit.scalar_residual
    again = GDIterates(x).predict(np.asarray(fit.gammas), np.asarray(fit.lambdas))
    assert np.abs(again - y.numpy()).max() < 1e-8 * float(y.abs().max())
    if side is Side.BOTH:  # the fit's gauge: tr Λ_j = d
        assert np.allclose(np.trace(np.asarray(fit.lambdas), axis1=1, axis2=2), d, atol=1e-8)


def test_gamma_form_is_the_frobenius_projection():
    g = np.array([[2.0, 0.5, 0.1], [0.3, 1.0, 0.2], [0.4, 0.0, 3.0]])
    form = gamma_form(g)
    assert form.c == pytest.approx(2.0) and form.c_off == pytest.approx(1.5 / 6)
    near = form.c * np.eye(3) + form.c_off * (np.ones((3, 3)) - np.eye(3))
    resid = g - near  # orthogonal to I and J − I
    assert abs(np.trace(resid)) < 1e-12 and abs(resid.sum() - np.trace(resid)) < 1e-12
    assert form.rel_distance == pytest.approx(np.linalg.norm(resid) / np.linalg.norm(g))
    assert gamma_form(np.zeros((2, 2))).rel_distance == 0.0
    assert gamma_form([[4.0]]) == type(form)(c=4.0, c_off=0.0, rel_distance=0.0)


def test_bad_input_names_the_value():
    x = _x(gaussian(2, 1.0), n=4, T=5)
    theta = PAPER.diagonal_init(2, 1.0, 1.0)
    y = PAPER.predict(theta, x)
    with pytest.raises(MesadynError, match="k must be >= 1, got k=0"):
        fit_gd_predictions(x, y, 0, preconditioner="full")
    with pytest.raises(MesadynError, match=r"y must have shape \(4, 4, 2\)"):
        fit_gd_predictions(x, y[:, :2], 1)
    with pytest.raises(MesadynError, match="unknown preconditioner 'dense'; choose scalar, "
                                           "diagonal, full"):
        fit_gd_predictions(x, y, 1, preconditioner="dense")
    with pytest.raises(MesadynError, match="unknown side 'middle'"):
        fit_gd_predictions(x, y, 1, preconditioner="full", side="middle")

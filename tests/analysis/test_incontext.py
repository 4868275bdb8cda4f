"""Proposition 4.1's ratio and Theorem 4.2's MSE: fast paths vs direct formulas, vs theory."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.incontext import (
    ContextBatch,
    context_curve,
    draw_test_set,
    mse_estimate,
    ratio_estimate,
)
from mesadyn.errors import MesadynError
from mesadyn.model import diagonal_init, gaussian_init, predict
from mesadyn.process import gaussian, make_generator, sample, sequences, sparse


def test_context_batch_equals_model_predict():
    fam, T = gaussian(3, 1.0), 9
    x1, lam = sample(fam, 20, T, make_generator(1), "cpu")
    theta = gaussian_init(3, 0.4, seed=2)
    ref = predict(theta, sequences(x1, lam, T))[:, -1]  # ŷ_T
    got = ContextBatch(x1, lam, T).predict(theta)
    assert torch.allclose(got, ref, rtol=1e-12, atol=1e-13)
    # ...and the curve (predict_ar path) agrees at several T_te
    curve = context_curve(theta, x1, lam, [2, 5, 9])
    for k, t in enumerate((2, 5, 9)):
        cb = ContextBatch(x1, lam, t)
        assert cb.mse(theta).value == pytest.approx(curve.mse[k], rel=1e-10)
        assert cb.ratio(theta).value == pytest.approx(curve.ratio[k], rel=1e-9)


def test_eq3_at_diagonal_point():
    """ŷ_{T_te} = W (ab Σ_{i<T_te} x_i x_i^*/(T_te−1)) x_{T_te} (Eq. 3)."""
    fam, T, a, b = gaussian(3, 1.0), 11, 0.6, 0.35
    x1, lam = sample(fam, 8, T, make_generator(3), "cpu")
    x = sequences(x1, lam, T).numpy()
    S = np.einsum("nti,ntj->nij", x[:, : T - 1], x[:, : T - 1].conj())
    ref = lam.numpy() * (a * b / (T - 1) * np.einsum("nij,nj->ni", S, x[:, -1]))
    got = ContextBatch(x1, lam, T).predict(diagonal_init(3, a, b)).numpy()
    assert np.allclose(got, ref, rtol=1e-12, atol=1e-13)


def test_ratio_estimator_against_a_direct_loop():
    g = torch.Generator().manual_seed(0)
    yhat = torch.randn(50, 4, dtype=torch.complex128, generator=g)
    target = torch.randn(50, 4, dtype=torch.complex128, generator=g)
    target[::3, 1] = 0
    target[7] = 0  # a sequence with no usable entry
    est = ratio_estimate(yhat, target)
    vals, groups = [], []
    for i in range(50):
        row = [complex(yhat[i, j] / target[i, j]) for j in range(4) if target[i, j] != 0]
        vals += row
        if row:
            groups.append([v.real for v in row])
    assert est.used == len(vals) and est.excluded == 200 - len(vals)
    R = np.mean([v.real for v in vals])
    assert est.value == pytest.approx(R, rel=1e-12)
    assert est.imag == pytest.approx(np.mean([v.imag for v in vals]), rel=1e-12)
    n = len(groups)
    resid = [sum(gr) - R * len(gr) for gr in groups]
    se = math.sqrt(n / (n - 1) * sum(r * r for r in resid)) / len(vals)
    assert est.se == pytest.approx(se, rel=1e-10)
    with pytest.raises(MesadynError, match="nonzero denominator"):
        ratio_estimate(yhat, torch.zeros_like(target))


def test_ratio_gaussian_is_ab_sigma2():
    """Proposition 4.1 at a diagonal point: E[(ŷ)_j/(Wx)_j] = ab σ² (Appendix A.4)."""
    sigma, a, b, T = 0.8, 0.5, 0.6, 20
    x1, lam = draw_test_set(gaussian(4, sigma), 4000, seed=9)
    est = ContextBatch(x1, lam, T).ratio(diagonal_init(4, a, b))
    assert est.excluded == 0 and est.used == 4 * 4000
    assert abs(est.value - a * b * sigma**2) <= 4 * est.se
    assert abs(est.imag) <= 4 * est.imag_se


def test_ratio_and_mse_sparse_are_exact():
    """Example 4.1 at ab = 1/c²: ŷ_{T_te} = W x_{T_te} exactly (Theorem 4.2)."""
    c, d = 0.5, 5
    x1, lam = draw_test_set(sparse(d, c), 300, seed=1)
    theta = diagonal_init(d, 2.0, 1 / (2.0 * c * c))
    curve = context_curve(theta, x1, lam, [2, 10, 40])
    assert np.all(curve.excluded == 300 * (d - 1)) and np.all(curve.used == 300)
    assert np.allclose(curve.ratio, 1.0, rtol=1e-12)
    assert np.all(curve.mse <= 1e-24)


def test_mse_gaussian_matches_closed_form():
    """At a diagonal point with s = ab, for iid x_1 (moments m2, m4, m6) and T_te:
    E‖ŷ − Wx‖² = d [s² m6 − 2 s m4 + m2 + s² (d−1) m2 m4 / (T_te − 1)]."""
    sigma, d, s = 1.0, 3, 0.19
    fam = gaussian(d, sigma)
    x1, lam = draw_test_set(fam, 6000, seed=4)
    T_te = [3, 8, 25]
    curve = context_curve(diagonal_init(d, 1.0, s), x1, lam, T_te)
    m2, m4, m6 = fam.m2, fam.m4, fam.m6
    for k, t in enumerate(T_te):
        exact = d * (s * s * m6 - 2 * s * m4 + m2 + s * s * (d - 1) * m2 * m4 / (t - 1))
        assert abs(curve.mse[k] - exact) <= 4 * curve.mse_se[k], (t, curve.mse[k], exact)
    assert np.allclose(curve.baseline, d * m2, rtol=0.05)


def test_mse_estimate_and_bad_input():
    y = torch.tensor([[1 + 1j, 0], [0, 2]], dtype=torch.complex128)
    t = torch.zeros_like(y)
    est = mse_estimate(y, t)
    assert est.value == pytest.approx((2 + 4) / 2) and est.sequences == 2
    with pytest.raises(MesadynError, match="T_te"):
        ContextBatch(torch.zeros(3, 2), torch.ones(3, 2, dtype=torch.complex128), 1)
    with pytest.raises(MesadynError, match="shape"):
        mse_estimate(y[:, :1], t)
    with pytest.raises(MesadynError, match="d=2"):
        ContextBatch(torch.ones(3, 2), torch.ones(3, 2, dtype=torch.complex128), 4).predict(
            diagonal_init(3, 1.0, 1.0))

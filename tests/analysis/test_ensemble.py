"""Ensemble analysis (issue 15): Wilson intervals against a direct binomial computation, the
outcome classes on constructed points, the saddle's linearisation against the reduced system,
and the escape-time prediction against batched full flows (within 3% for σ_w <= 1e-4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.ensemble import (
    Outcome,
    classify,
    escape_time_prediction,
    fractions,
    saddle_modes,
    wilson,
)
from mesadyn.errors import MesadynError
from mesadyn.field import ExactField
from mesadyn.flow import integrate_batch
from mesadyn.model import active_mask, diagonal_entries, diagonal_init, diagonal_mask, gaussian_init
from mesadyn.process import gaussian, ones
from mesadyn.reduced import ReducedSystem


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (480, 1000), (1, 2)])
def test_wilson_interval_inverts_the_score_test(k: int, n: int) -> None:
    """The interval's ends are exactly the p with |p̂ − p| = z √(p(1−p)/n)."""
    iv = wilson(k, n)
    z = 1.959963984540054
    assert iv.fraction == k / n and 0 <= iv.low <= iv.fraction <= iv.high <= 1
    for p in (iv.low, iv.high):
        if 1e-9 < p < 1 - 1e-9:
            assert abs(k / n - p) == pytest.approx(z * math.sqrt(p * (1 - p) / n), rel=1e-9)
    with pytest.raises(MesadynError, match="k=3, n=2"):
        wilson(3, 2)


def test_classify_constructed_points() -> None:
    d, p = 2, 0.2
    r = math.sqrt(p)
    plus = diagonal_init(d, r, r).numpy()
    minus = diagonal_init(d, -r, -r).numpy()
    mixed = plus.copy()
    idx = np.flatnonzero(diagonal_mask(d))
    mixed[idx[0]], mixed[idx[d]] = -r, -r  # coordinate 0 on the a < 0 branch
    dense = plus.copy()
    dense[np.flatnonzero(active_mask(d) & ~diagonal_mask(d))[0]] = 0.3
    saddle = np.zeros_like(plus)
    pts = np.stack([plus, minus, mixed, dense, saddle, plus])
    conv = np.array([True, True, True, True, True, False])
    out = classify(pts, conv, p)
    assert list(out) == ["branch_plus", "branch_minus", "branch_mixed", "dense", "other",
                         "not_converged"]
    fr = fractions(out)
    assert set(fr) == {o.value for o in Outcome} and fr["branch_plus"].k == 1
    assert sum(iv.k for iv in fr.values()) == 6
    assert list(classify(pts[:1], [True], None)) == ["other"]


def test_saddle_modes_gaussian_is_the_diagonal_mode_at_c2_ones_is_not() -> None:
    fam, T = gaussian(3, 1.0), 12
    modes = saddle_modes(ExactField(fam, T))
    system = ReducedSystem.from_family(fam, T)
    assert modes.lambda_top == pytest.approx(system.c2, rel=1e-12) and modes.multiplicity == 3
    assert modes.diagonal_weight == pytest.approx(1.0, abs=1e-12)
    assert modes.block_weights == pytest.approx({"W_KQ_32": 0.5, "W_PV_12": 0.5})
    # the spectrum is ± pairs (−∇²L(0) = [[0, C], [Cᵀ, 0]])
    top = np.sort(modes.rates[modes.rates > 1e-9])
    bottom = np.sort(-modes.rates[modes.rates < -1e-9])
    np.testing.assert_allclose(top, bottom, rtol=1e-9)
    ones_modes = saddle_modes(ExactField(ones(3), T))
    assert ones_modes.lambda_top > ReducedSystem.from_family(ones(3), T).c2 * (1 + 1e-6)
    assert ones_modes.diagonal_weight < 1 - 1e-6  # not (only) the diagonal mode
    assert math.isnan(escape_time_prediction(ones_modes, system, np.zeros(162))[0])


@pytest.mark.parametrize("sigma_w", [1e-4, 1e-6, 1e-8])
def test_escape_time_prediction_within_3_percent(sigma_w: float) -> None:
    fam, T, d = gaussian(3, 1.0), 20, 3
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)
    modes = saddle_modes(field)
    th0 = torch.stack([gaussian_init(d, sigma_w, seed) for seed in range(12)]).numpy()
    pred = escape_time_prediction(modes, system, th0)

    def half(th: np.ndarray) -> np.ndarray:
        a, b = diagonal_entries(th)
        return np.mean(a * b, axis=1) - system.ab_star / 2

    res = integrate_batch(field, th0, t_end=1.5 * float(np.max(pred)), rtol=1e-10,
                          atol=1e-12 * sigma_w, steady_tol=0, event=half)
    rel = np.abs(res.event_t - pred) / pred
    assert np.median(rel) < 0.03 and np.all(np.isfinite(rel))

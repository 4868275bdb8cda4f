"""PL diagnostics (Lemma 5.4) and convergence rates along the flow."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.analysis.fixedpoint import flow_to_fixed_point
from mesadyn.analysis.pl import dominant_rate, fitted_rate, pl_trace
from mesadyn.analysis.spectrum import classify
from mesadyn.field.exact import ExactField
from mesadyn.model import diagonal_init, diagonal_mask
from mesadyn.process import gaussian, sparse
from mesadyn.reduced import ReducedSystem


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MESADYN_CACHE_DIR", str(tmp_path / "cache"))


def test_full_loss_is_d_copies_of_the_surrogate():
    """At a diagonal point: L − L* = d·ℓ̃ and ‖∇L‖² = d·‖∇ℓ̃‖² (the factor d cancels)."""
    d, T = 3, 8
    fam = gaussian(d, 0.8)
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)
    L_star = d * (0.5 * (T - 2) * fam.second_moment - system.c2**2 / (2 * system.c1))
    for a, b in [(0.2, 0.9), (1.5, -0.3), (0.05, 0.05)]:
        L, g = field.loss_and_grad(diagonal_init(d, a, b))
        da, db = system.rhs(a, b)
        assert abs((float(L) - L_star) - d * system.surrogate(a, b)) <= 1e-10 * float(L)
        assert abs(float((g * g).sum()) - d * (da**2 + db**2)) <= 1e-9 * float((g * g).sum())
        ratio = float((g * g).sum()) / (float(L) - L_star)
        assert abs(ratio - system.pl_constant(a, b)) <= 1e-8 * ratio


@pytest.mark.parametrize("fam", [gaussian(2, 1.0), sparse(2, 1.0)], ids=["gaussian", "sparse"])
def test_pl_ratio_along_flow_and_rates(fam):
    T = 6
    field = ExactField(fam, T)
    system = ReducedSystem.from_family(fam, T)
    fp, end = flow_to_fixed_point(field, diagonal_init(2, 0.2, 0.6).numpy(), t_end=1e3,
                                  mask=diagonal_mask(2))
    tr = pl_trace(field, end.t_series, end.theta_series, fp.loss, system.c1)
    ok = np.isfinite(tr.ratio)
    assert ok.sum() > 20
    # Lemma 5.4 holds with equality along a diagonal trajectory
    assert np.abs(tr.ratio[ok] / tr.lemma[ok] - 1).max() < 1e-5
    # the measured late rate matches the linearisation at the limit point
    sp = classify(field.hessian(torch.as_tensor(fp.theta)).numpy(), fp.theta)
    measured = fitted_rate(tr.t, tr.loss_gap)
    linear, blocks = dominant_rate(tr, end.theta_series, fp.theta, sp)
    a, b = tr.a[-1], tr.b[-1]
    assert abs(measured / linear - 1) < 1e-2
    assert abs(linear / system.pl_constant(a, b) - 1) < 1e-6
    assert set(blocks) <= {"W_KQ_32", "W_PV_12"}


def test_fitted_rate_recovers_an_exponential():
    t = np.linspace(0, 10, 400)
    gap = 3.0 * np.exp(-2.5 * t) + 1e-3 * np.exp(-9.0 * t)
    assert abs(fitted_rate(t, gap) - 2.5) < 1e-6
    assert np.isnan(fitted_rate(t[:2], gap[:2]))

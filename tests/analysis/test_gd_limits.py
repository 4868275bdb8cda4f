"""Stability limits over the minimiser set (:mod:`mesadyn.analysis.gd_limits`): the Hessian
along the scaling orbit against the Hessian itself, ``dλ_max/d log α`` against finite
differences, the flattest point and the stable part against direct evaluation, the diagonal
(masked) field against the reduced model's closed forms, and every critical step against GD
itself (the onset of instability, bisected) at d = 3, T = 20 and d = 5, T = 100."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mesadyn.analysis import gd_limits as GL
from mesadyn.analysis import gd_map as G
from mesadyn.analysis.fixedpoint import balanced_point
from mesadyn.field import FieldSpec, make_field
from mesadyn.process import gaussian
from mesadyn.theory import constants


@pytest.fixture(scope="module")
def g3():
    fam, T = gaussian(3, 1.0), 20
    return make_field(FieldSpec("exact", fam, T)), balanced_point(fam, T), constants(fam, T)


@pytest.fixture(scope="module")
def g5():
    fam, T = gaussian(5, 1.0), 100
    return make_field(FieldSpec("exact", fam, T)), balanced_point(fam, T), constants(fam, T)


def test_orbit_keeps_the_loss_and_conjugates_the_hessian(g3):
    """L(θ(α)) = L(θ) and ∇²L(θ(α)) = D⁻¹∇²L(θ)D⁻¹ with D = diag(α on P, 1/α on A)."""
    import torch

    f, fp, _ = g3
    th = fp + np.random.default_rng(0).normal(0, 0.05, fp.size)  # off the minimiser too
    alpha = 1.7
    moved = GL.orbit_theta(th, alpha)
    assert float(f.loss(torch.from_numpy(moved))) == pytest.approx(
        float(f.loss(torch.from_numpy(th))), rel=1e-12)
    in_P, in_A = GL._blocks(3)
    D = np.ones(th.size)
    D[in_P], D[in_A] = alpha, 1 / alpha
    H, Hm = (f.hessian(torch.from_numpy(x)).numpy() for x in (th, moved))
    np.testing.assert_allclose(Hm, H / D[:, None] / D[None, :], rtol=1e-10, atol=1e-10)


def test_sharpness_slope_along_the_orbit_is_twice_lambda_times_the_balance(g3):
    f, fp, _ = g3
    free = G._free(f, None)
    for alpha in (0.6, 1.0, 1.5):
        pt = GL.point_limit(f, GL.orbit_theta(fp, alpha), alpha=alpha)
        h = 1e-5
        lam = [GL._lam(f, GL.orbit_theta(fp, alpha * math.exp(s)), free) for s in (-h, h)]
        slope = (lam[1] - lam[0]) / (2 * h)
        assert slope == pytest.approx(2 * pt.lambda_max * pt.mode_balance, rel=1e-6)


def test_flattest_point_is_the_minimum_of_the_sharpness(g3):
    f, fp, c = g3
    flat = GL.flattest_point(f, fp, c1=c.c1)
    assert abs(flat.point.mode_balance) < 1e-9 and flat.kind == "balanced"
    free = G._free(f, None)
    for s in (-0.05, -1e-3, 1e-3, 0.05):
        assert GL._lam(f, GL.orbit_theta(fp, flat.alpha * math.exp(s)), free) > flat.lambda_max
    assert flat.eta_max == pytest.approx(2 / flat.lambda_max, rel=1e-15)
    # gaussian x_1: an off-diagonal mode (W^KQ_22, W^KQ_33, W^PV_13) decides, below 1/c2
    assert flat.point.top_mode == "off_diagonal" and flat.point.top_mode_diagonal < 1e-12
    assert set(flat.point.top_mode_blocks) == {"W_KQ_22", "W_KQ_33", "W_PV_13"}
    assert flat.eta_max < 1 / c.c2


def test_the_diagonal_field_is_the_reduced_model(g3):
    """With Theorem 4.3's mask only the diagonal mode exists: λ_max = c1(a² + b²) along the
    hyperbola, the flattest point is the balanced one and η_max = 1/c2, and the stable part
    is the closed form's."""
    f, fp, c = g3
    lim = GL.stability_limits(f, fp, eta=0.8 / c.c2, mask="diagonal", constants=c)
    for pt in lim.points:
        assert pt.top_mode == "diagonal"
        assert pt.critical_step == pytest.approx(pt.reduced_critical_step, rel=1e-10)
    assert lim.flattest.alpha == pytest.approx(1.0, abs=1e-7)
    assert lim.flattest.eta_max == pytest.approx(1 / c.c2, rel=1e-12)
    assert lim.stable_alpha == pytest.approx(lim.reduced_stable_alpha, rel=1e-9)
    assert "diagonal mode decides" in lim.note


def test_stable_part_ends_where_eta_lambda_is_two(g3):
    f, fp, c = g3
    eta = 0.0105
    lim = GL.stability_limits(f, fp, eta=eta, constants=c)
    free = G._free(f, None)
    assert lim.stable_alpha is not None
    for alpha in lim.stable_alpha:
        assert eta * GL._lam(f, GL.orbit_theta(fp, alpha), free) == pytest.approx(2.0, rel=1e-10)
    lo, hi = lim.stable_alpha
    assert eta * GL._lam(f, GL.orbit_theta(fp, math.sqrt(lo * hi)), free) < 2
    # the balanced point itself is not in it: its off-diagonal mode is too sharp
    assert not lo <= 1.0 <= hi and eta * lim.base.lambda_max > 2
    # the reduced model's stable part is wider and holds the balanced point
    rlo, rhi = lim.reduced_stable_alpha
    assert rlo < lo and rhi > 1.0
    assert GL.stable_part(f, fp, 1.01 * lim.flattest.eta_max, flattest=lim.flattest) is None
    assert "off-diagonal mode decides" in lim.note


def test_reduced_stable_part_closed_form():
    c1, a, b, eta = 37.0, 0.7, 0.3, 0.05
    lo, hi = GL.reduced_stable_part(a, b, eta, c1)
    for al in (lo, hi):
        assert eta * c1 * ((a / al) ** 2 + (al * b) ** 2) == pytest.approx(2.0, rel=1e-12)
    assert GL.reduced_stable_part(a, b, 1.001 / (c1 * a * b), c1) is None


@pytest.mark.parametrize("alpha", [1.0, "flattest", 1.6])
def test_critical_step_is_the_onset_of_instability_d3(g3, alpha):
    """2/λ_max against GD from the fixed point + 1e-8 along the top mode, bisected in η."""
    f, fp, c = g3
    a = GL.flattest_point(f, fp).alpha if alpha == "flattest" else alpha
    th = GL.orbit_theta(fp, a)
    pt = GL.point_limit(f, th, c1=c.c1)
    observed, predicted = G.onset_of_instability(f, th, rtol=1e-7)
    assert predicted == pytest.approx(pt.critical_step, rel=1e-12)
    assert observed == pytest.approx(pt.critical_step, rel=1e-6)
    assert pt.reduced_critical_step > 1.05 * pt.critical_step  # the full space is sharper


@pytest.mark.parametrize("alpha", [1.0, "flattest"])
def test_critical_step_is_the_onset_of_instability_d5(g5, alpha):
    """The paper's size (d = 5, T = 100): about 1 s per point."""
    f, fp, c = g5
    a = GL.flattest_point(f, fp).alpha if alpha == "flattest" else alpha
    th = GL.orbit_theta(fp, a)
    pt = GL.point_limit(f, th, c1=c.c1)
    observed, _ = G.onset_of_instability(f, th, rtol=1e-7)
    assert observed == pytest.approx(pt.critical_step, rel=1e-6)
    assert pt.top_mode == "off_diagonal"
    assert pt.reduced_critical_step == pytest.approx(2 / (c.c1 * (pt.a ** 2 + pt.b ** 2)))


def test_limits_record_is_json_ready(g3):
    from mesadyn.io import to_json

    f, fp, c = g3
    lim = GL.stability_limits(f, fp, eta=0.02, constants=c, alphas=[0.5, 1.0, 2.0])
    obj = lim.to_dict()
    assert obj["stable_alpha"] is None and obj["reduced_stable_alpha"] is None  # η > 1/c2
    assert "points" not in obj and len(lim.points) == 3
    to_json(obj)
    ds = lim.to_dataset()
    assert ds.sizes["alpha"] == 3

"""Ensemble analysis: Wilson intervals against a direct binomial computation, the
outcome classes on constructed points, the saddle's linearisation against the reduced system,
and the escape-time prediction against batched full flows (within 3% for σ_w <= 1e-4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.ensemble import (
    Basin,
    classify,
    escape_time_prediction,
    flat_check,
    fractions,
    inert_mask,
    inert_size,
    off_structure,
    saddle_modes,
    wilson,
)
from mesadyn.errors import MesadynError
from mesadyn.field import ExactField
from mesadyn.flow import integrate_batch
from mesadyn.model import active_mask, diagonal_entries, diagonal_init, diagonal_mask, gaussian_init
from mesadyn.process import gaussian, ones, sparse
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
    assert set(fr) == {o.value for o in Basin} and fr["branch_plus"].k == 1
    assert sum(iv.k for iv in fr.values()) == 6
    assert list(classify(pts[:1], [True], None)) == ["other"]


@pytest.mark.parametrize("family,n_inert", [(sparse, 8), (gaussian, 0)])
def test_inert_entries_are_those_the_loss_does_not_depend_on(family, n_inert: int) -> None:
    """The inert mask (zero gradient at random dense θ) against the loss itself: moving an
    inert entry leaves L unchanged to rounding, moving any other active entry changes it."""
    d, T = 2, 6
    field = ExactField(family(d), T)
    inert = inert_mask(field)
    assert inert.sum() == n_inert and not (inert & diagonal_mask(d)).any()
    if n_inert:  # sparse: the off-diagonal entries of the W^KQ blocks
        from mesadyn.model import block_labels

        assert set(block_labels(d)[inert]) == {"W_KQ_22", "W_KQ_23", "W_KQ_32", "W_KQ_33"}
    th = torch.from_numpy(np.random.default_rng(5).standard_normal(field.n_params))
    base = float(field.loss(th))
    for i in np.flatnonzero(active_mask(d)):
        moved = th.clone()
        moved[i] += 0.5
        change = abs(float(field.loss(moved)) - base)
        if inert[i]:
            assert change <= 1e-12 * max(1.0, abs(base)), i
        else:
            assert change > 1e-8, i


def test_classify_leaves_inert_entries_out_and_reports_them() -> None:
    """sparse: a point on the hyperbola with inert off-diagonal entries at 1e-2 is on the branch
    (it was "dense" before); a moved off-diagonal entry that the loss sees still makes it dense."""
    d, T = 2, 6
    fam = sparse(d)
    field = ExactField(fam, T)
    p = ReducedSystem.from_family(fam, T).ab_star
    inert = inert_mask(field)
    on = diagonal_init(d, math.sqrt(p), math.sqrt(p)).numpy()
    on[inert] = 1e-2
    seen = on.copy()
    seen[np.flatnonzero(active_mask(d) & ~diagonal_mask(d) & ~inert)[0]] = 1e-3
    pts = np.stack([on, seen])
    # the constructed point is a fixed point: the gradient vanishes there
    assert np.max(np.abs(field.loss_and_grad(torch.from_numpy(on))[1].numpy())) < 1e-12
    assert list(classify(pts, [True, True], p, inert=inert)) == ["branch_plus", "dense"]
    assert list(classify(pts, [True, True], p)) == ["dense", "dense"]
    np.testing.assert_allclose(off_structure(pts, inert), [0.0, 1e-3])
    np.testing.assert_allclose(inert_size(pts, inert), [1e-2, 1e-2])
    assert inert_size(pts, np.zeros_like(inert)).tolist() == [0.0, 0.0]


def test_sparse_end_point_is_its_projection_moved_along_a_flat_valley() -> None:
    """sparse from a Gaussian start: the flow's end keeps reachable off-diagonal entries of the
    init's size, yet its diagonal projection θ_s is a fixed point on the hyperbola with the same
    loss — checked independently: L is constant and ∇L vanishes along the segment θ_s → θ.  A
    displacement the loss does see (the constructed point) is not flat."""
    d, T = 2, 6
    fam = sparse(d)
    field = ExactField(fam, T)
    p = ReducedSystem.from_family(fam, T).ab_star
    inert = inert_mask(field)
    th0 = gaussian_init(d, 1e-3, seed=3).numpy()
    res = integrate_batch(field, th0[None], t_end=400.0, rtol=1e-8, atol=1e-11,
                          steady_tol=1e-9)
    assert res.converged.all()
    th = res.theta[0]
    assert off_structure(th, inert) > 1e-5  # the residual: a tenth of the init or more
    check = flat_check(field, res.theta, grad_tol=1e-9)
    assert check.flat.all() and check.projected_grad_max[0] < 1e-12
    assert list(classify(res.theta, [True], p, inert=inert)) == ["dense"]
    assert list(classify(res.theta, [True], p, inert=inert, flat=check.flat))[0].startswith(
        "branch")
    from mesadyn.analysis.ensemble import structure_projection

    ths = structure_projection(th)
    delta = float(np.max(np.abs(th - ths)))
    for t in np.linspace(0, 1, 5):  # L constant, ∇L only second order in the displacement
        loss, g = field.loss_and_grad(torch.from_numpy(ths + t * (th - ths)))
        assert abs(float(loss) - float(res.loss[0])) < 1e-12
        assert float(g.abs().max()) < delta**2
    seen = diagonal_init(d, math.sqrt(p), math.sqrt(p)).numpy()
    seen[np.flatnonzero(active_mask(d) & ~diagonal_mask(d) & ~inert)[0]] = 1e-3
    assert not flat_check(field, seen, grad_tol=1e-9).flat.any()
    # a displacement the loss sees: the gradient is first order in it
    assert float(field.loss_and_grad(torch.from_numpy(seen))[1].abs().max()) > 0.1 * 1e-3


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


def test_basins_and_records_keep_their_words() -> None:
    """The basins' strings (the run files' ``outcome`` column) and the records' JSON keys."""
    assert [b.value for b in Basin] == ["branch_plus", "branch_minus", "branch_mixed", "dense",
                                        "other", "not_converged"]
    iv = wilson(3, 10)
    assert iv.k == iv.count == 3
    assert iv.to_dict() == {"count": 3, "n": 10, "fraction": 0.3, "low": iv.low,
                            "high": iv.high}
    modes = saddle_modes(ExactField(gaussian(2), 6))
    assert list(modes.to_dict()) == ["lambda_top", "multiplicity", "block_weights",
                                     "diagonal_weight"]
    assert modes.top_vectors.shape == (72, modes.multiplicity)

"""``mesadyn.analysis.model_ensemble``: the classifier of a model's ensemble, against
hand-built cases — the symmetry projection of the curvature, the grouping of the converged
end points by loss, the fractions that count every row once, and the model's own geometry
(Σ_l a_l b_l and the per-layer invariants computed by hand from the blocks)."""

from __future__ import annotations

import numpy as np
import pytest

from mesadyn.analysis.ensemble import wilson
from mesadyn.analysis.model_ensemble import (
    LOSS_RTOL,
    end_geometry,
    fixed_points,
    fractions,
    group_by_loss,
)
from mesadyn.analysis.model_fixedpoint import projected_curvature
from mesadyn.errors import MesadynError
from mesadyn.models import DeepLinearAttention


def _rotated(eigs: list[float], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((len(eigs), len(eigs))))
    return Q @ np.diag(eigs) @ Q.T, Q


def test_a_symmetry_direction_is_projected_out_of_the_curvature() -> None:
    # a small negative eigenvalue along a declared symmetry (above the zero-mode threshold
    # ZERO_RTOL · 5, as a point just off the orbit of critical points has) is not a saddle ...
    H, Q = _rotated([-1e-6, 2.0, 3.0, 5.0])
    assert projected_curvature(H, np.zeros((4, 0))).n_negative == 1
    c = projected_curvature(H, 7.0 * Q[:, :1])  # any scale of the tangent
    assert c.n_negative == 0 and c.lambda_max == pytest.approx(5.0)
    # ... but negative curvature off the symmetries is, whatever the tangents
    H, Q = _rotated([-0.5, 0.0, 2.0, 5.0], seed=1)
    c = projected_curvature(H, np.stack([Q[:, 1], 2 * Q[:, 1]], axis=1))  # dependent tangents
    assert c.saddle and c.n_negative == 1 and c.lambda_min == pytest.approx(-0.5)
    with pytest.raises(MesadynError, match="not finite"):
        projected_curvature(np.full((2, 2), np.nan), np.zeros((2, 0)))


def test_converged_end_points_are_grouped_by_loss() -> None:
    loss = np.array([0.5, 0.1, 0.1 + 1e-9, 0.3, np.nan, 0.1 + 1e-3, 0.2])
    conv = np.array([True, True, True, True, True, True, False])
    group = group_by_loss(loss, conv)
    assert group.tolist() == [3, 0, 0, 2, -1, 1, -1]
    # the tolerance is relative to max(1, |L|): a gap just above it splits, just below joins
    big = np.array([1e3, 1e3 * (1 + 0.9 * LOSS_RTOL), 1e3 * (1 + 2.1 * LOSS_RTOL)])
    assert group_by_loss(big, np.ones(3, bool)).tolist() == [0, 0, 1]
    assert group_by_loss(loss, np.zeros(7, bool)).tolist() == [-1] * 7


def test_every_row_is_counted_once() -> None:
    group = np.array([0, 0, 1, -1, -1, -1])
    status = np.array(["converged", "converged", "converged", "saddle", "t_end", "saddle"])
    out = fractions(group, status)
    assert list(out) == ["fixed_point_1", "fixed_point_2", "t_end", "saddle"]
    assert sum(v["count"] for v in out.values()) == 6
    assert out["saddle"] == wilson(2, 6).to_dict()
    pts = fixed_points(group, np.array([0.1, 0.1 + 1e-12, 0.4, 0.2, 0.3, 0.2]),
                       np.array([[0.2], [0.2 + 1e-9], [0.7], [0.0], [0.1], [0.0]]),
                       np.full(6, 1e-9), np.full(6, 1e-10), np.full(6, 1e-3))
    assert [p.label for p in pts] == ["fixed_point_1", "fixed_point_2"]
    assert pts[0].count == 2 and pts[0].ab_min == 0.2 and pts[0].ab_max == 0.2 + 1e-9
    assert pts[0].loss_spread == pytest.approx(1e-12) and pts[1].loss == 0.4
    assert (pts[1].low, pts[1].high) == (wilson(1, 6).low, wilson(1, 6).high)


def test_the_geometry_is_the_models_own() -> None:
    model = DeepLinearAttention(2)
    d = 2
    rng = np.random.default_rng(3)
    th0 = rng.standard_normal((2, model.n_params(d)))
    th = rng.standard_normal((2, model.n_params(d)))
    geo = end_geometry(model, th0, th)
    act = model.active_mask(d)
    for r in range(2):
        mats = [th[r, b.start:b.stop].reshape(b.rows, b.cols) for b in model.blocks(d)]
        acts = [act[b.start:b.stop].reshape(b.rows, b.cols) for b in model.blocks(d)]
        # Σ_l diag(W^KQ_l block (3,2)) · diag(W^PV_l block (1,2)), by hand
        ab = sum(np.diag(mats[2 * l][2 * d:, d:2 * d]) * np.diag(mats[2 * l + 1][:d, d:2 * d])
                 for l in range(2))
        np.testing.assert_allclose(geo["ab"][r], ab, rtol=1e-14)
        inv = [np.sum((mats[2 * l] * acts[2 * l]) ** 2)
               - np.sum((mats[2 * l + 1] * acts[2 * l + 1]) ** 2) for l in range(2)]
        np.testing.assert_allclose(geo["invariants"][r], inv, rtol=1e-12)
    off = act & ~model.diagonal_mask(d)
    np.testing.assert_array_equal(geo["off_diagonal"], np.abs(th[:, off]).max(axis=1))
    np.testing.assert_array_equal(geo["off_inactive"], np.abs(th[:, ~act]).max(axis=1))
    assert geo["invariant_drift"] == pytest.approx(
        np.abs(geo["invariants"] - geo["invariants0"]).max(axis=1))

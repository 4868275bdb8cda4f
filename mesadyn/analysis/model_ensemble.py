"""Where the flows of an ensemble of a model other than the paper's end, in the model's own
terms (:class:`~mesadyn.models.Model`).

The paper's :class:`~mesadyn.analysis.ensemble.Basin` (the branches of Theorems 4.1/4.3) is a
statement about its one-layer model; for every other model an end point is described by what
every model defines:

- :func:`stop_verdict` — a flow the steady-state test stopped is ``converged`` at a minimum,
  ``saddle`` at negative curvature across the model's symmetry orbits
  (:func:`mesadyn.analysis.model_fixedpoint.curvature_verdict`), and ``failed`` where it
  stopped at τ = 0 at a point that is no fixed point by the scale-free Newton test
  (:func:`mesadyn.analysis.steady.newton_gap`);
- :func:`end_geometry` — per row: the per-coordinate step ``Σ_l a_l b_l``
  (:meth:`~mesadyn.models.Model.ab`; linear attention only), the per-layer invariants at the
  start and the end and their drift, the largest active entry off the layered diagonals and
  the largest inactive entry (the flow never moves it: reported, not hidden);
- :func:`group_by_loss` — the converged end points grouped into distinct fixed points by their
  loss: sorted, a new group where consecutive losses differ by more than
  :data:`LOSS_RTOL` ``· max(1, |L|)`` (a connected set of critical points has one loss, so
  points on one orbit of the symmetries are one fixed point);
- :func:`fixed_points` and :func:`fractions` — each group's loss and size with its 95% Wilson
  interval (:func:`mesadyn.analysis.ensemble.wilson`), and the fraction of rows in each group
  and in each outcome other than ``converged``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..outcome import Outcome
from ..record import Record

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..field import Field
    from ..models import Model
    from .model_fixedpoint import ModelCurvature

__all__ = ["LOSS_RTOL", "FixedPoint", "end_geometry", "fixed_points", "fractions",
           "group_by_loss", "stop_verdict"]

#: Two converged end points are the same fixed point when their losses differ by at most this
#: times ``max(1, |L|)``.  A row stops at ``max|∇L| < steady_tol`` (1e-8 by default), so its
#: loss is within about ``steady_tol²/μ`` of the fixed point's for the smallest non-zero
#: curvature μ; distinct fixed points of the two-layer model at d = 1, T = 4 differ by more than
#: 1e-3 (``docs/ensembles.md``).
LOSS_RTOL = 1e-6
def stop_verdict(fld: Field, model: Model, theta: np.ndarray, free: np.ndarray, *,
                 at_start: bool) -> tuple[Outcome, ModelCurvature, str]:
    """The verdict on a row the steady-state test stopped at ``theta`` (module docstring):
    ``(outcome, curvature, what it says)``; ``at_start``: it stopped at τ = 0.  The curvature
    is :func:`mesadyn.analysis.model_fixedpoint.curvature_verdict`'s, across the model's
    symmetry orbits."""
    from .model_fixedpoint import curvature_verdict
    from .steady import FIXED_POINT_RTOL, newton_gap

    c = curvature_verdict(fld, model, theta, free)
    if c.saddle:
        return Outcome.SADDLE, c, c.describe()
    if at_start:
        gap, scale = newton_gap(fld, theta, free)
        if gap > FIXED_POINT_RTOL * scale:
            return Outcome.FAILED, c, (f"θ0 is not a fixed point (a Newton step of {gap:.3g} "
                                       "from it): the loss is that flat at this scale; give a "
                                       "smaller steady_tol")
    return Outcome.CONVERGED, c, c.describe()


def end_geometry(model: Model, theta0: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
    """The model's own description of rows of end points ``theta`` (N, n) from ``theta0``:
    ``ab`` (N, d; NaN where ŷ is not polynomial: the GD-step reading is linear attention's),
    ``invariants`` and ``invariants0`` (N, layers; none for a model that conserves nothing),
    ``invariant_drift`` (N: the largest per-layer change), ``off_diagonal`` (N: the largest
    active entry off the layered diagonals) and ``off_inactive`` (N: the largest inactive
    entry, which keeps its start value)."""
    th0 = np.atleast_2d(np.asarray(theta0, dtype=np.float64))
    th = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    d = model.dim_of(th)
    active = model.active_mask(d)
    off = active & ~model.diagonal_mask(d)
    with np.errstate(all="ignore"):
        ab = (np.asarray(model.ab(th), dtype=np.float64) if model.polynomial
              else np.full((th.shape[0], d), np.nan))
        inv = np.asarray(model.invariants(th), dtype=np.float64).reshape(th.shape[0], -1)
        inv0 = np.asarray(model.invariants(th0), dtype=np.float64).reshape(th.shape[0], -1)
        drift = (np.max(np.abs(inv - inv0), axis=1) if inv.shape[1]
                 else np.full(th.shape[0], np.nan))

    def largest(mask: npt.NDArray[np.bool_]) -> np.ndarray:
        return (np.max(np.abs(th[:, mask]), axis=1) if mask.any()
                else np.zeros(th.shape[0]))

    return {"ab": ab, "invariants": inv, "invariants0": inv0, "invariant_drift": drift,
            "off_diagonal": largest(off), "off_inactive": largest(~active)}


def group_by_loss(loss: Any, converged: Any, rtol: float = LOSS_RTOL) -> np.ndarray:
    """Each row's fixed point: 0, 1, … in increasing loss over the ``converged`` rows (a new
    group where consecutive sorted losses differ by more than ``rtol · max(1, |L|)``), −1 for
    the others."""
    L = np.asarray(loss, dtype=np.float64)
    conv = np.asarray(converged, dtype=bool) & np.isfinite(L)
    out = np.full(L.shape, -1, dtype=np.int64)
    idx = np.flatnonzero(conv)
    if not idx.size:
        return out
    order = idx[np.argsort(L[idx], kind="stable")]
    group = 0
    out[order[0]] = 0
    for prev, cur in zip(order[:-1], order[1:], strict=True):
        if L[cur] - L[prev] > rtol * max(1.0, abs(L[prev])):
            group += 1
        out[cur] = group
    return out


@dataclass(frozen=True)
class FixedPoint(Record):
    """One distinct fixed point of an ensemble (a group of :func:`group_by_loss`).

    ``label`` (``fixed_point_1`` is the lowest loss), its ``loss`` (the median over its rows)
    and ``loss_spread`` (max − min), ``count`` of ``n`` rows with the 95% Wilson interval
    ``[low, high]`` of the ``fraction``; over its rows: the range of ``Σ_l a_l b_l``
    (``ab_min``, ``ab_max``; ``None`` where ŷ is not polynomial), the largest ``max|∇L|``, the
    largest entry off the layered diagonals and the smallest curvature (symmetries projected
    out, :func:`model_curvature`)."""

    label: str
    loss: float
    loss_spread: float
    count: int
    n: int
    fraction: float
    low: float
    high: float
    ab_min: float | None
    ab_max: float | None
    grad_max: float
    off_diagonal_max: float
    lambda_min: float


def fixed_points(group: Any, loss: Any, ab: Any, grad_max: Any, off_diagonal: Any,
                 lambda_min: Any) -> list[FixedPoint]:
    """The :class:`FixedPoint` of every group of ``group`` (:func:`group_by_loss`), with
    fractions of all the rows."""
    from .ensemble import wilson

    g = np.asarray(group)
    n = int(g.size)
    L, A = np.asarray(loss, dtype=np.float64), np.asarray(ab, dtype=np.float64)
    lam = np.asarray(lambda_min, dtype=np.float64)
    out = []
    for k in range(int(g.max(initial=-1)) + 1):
        rows = g == k
        iv = wilson(int(rows.sum()), n)
        a = A[rows]
        finite = a[np.isfinite(a)]
        judged = lam[rows][np.isfinite(lam[rows])]
        out.append(FixedPoint(
            label=f"fixed_point_{k + 1}", loss=float(np.median(L[rows])),
            loss_spread=float(np.ptp(L[rows])), count=iv.count, n=n, fraction=iv.fraction,
            low=iv.low, high=iv.high,
            ab_min=float(finite.min()) if finite.size else None,
            ab_max=float(finite.max()) if finite.size else None,
            grad_max=float(np.max(np.asarray(grad_max)[rows])),
            off_diagonal_max=float(np.max(np.asarray(off_diagonal)[rows])),
            lambda_min=float(judged.min()) if judged.size else math.nan))
    return out


def fractions(group: Any, status: Any) -> dict[str, dict[str, float | int]]:
    """The fraction of rows (with its 95% Wilson interval) at each fixed point
    (``fixed_point_1``, …) and with each outcome other than ``converged``, in the enum's
    order: every row is counted once."""
    from .ensemble import wilson

    g = np.asarray(group)
    s = np.asarray(status).astype(str)
    n = int(g.size)
    out = {f"fixed_point_{k + 1}": wilson(int(np.sum(g == k)), n).to_dict()
           for k in range(int(g.max(initial=-1)) + 1)}
    rest = s[g < 0]
    for o in Outcome:
        count = int(np.sum(rest == o.value))
        if count:
            out[o.value] = wilson(count, n).to_dict()
    return out

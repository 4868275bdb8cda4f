"""Where a flow stopped: a minimum, a saddle, or no fixed point at all.

A small gradient is not a minimum.  The steady-state test ``max|∇L| < steady_tol`` of
:func:`mesadyn.flow.integrate` stops a flow wherever the loss is flat at that scale — at a
minimum, but also near the saddle at θ = 0 (Lemma 5.2: eigenvalues ``±c2``), where a start of
size σ_w ≪ steady_tol/c2 is already below the threshold.  :func:`stop_verdict` classifies the
stop by the Hessian over the free coordinates (the scaling orbit of
:func:`~mesadyn.analysis.fixedpoint.symmetry_direction` projected out, zero modes below
:data:`~mesadyn.tolerances.ZERO_RTOL` left out):

- ``converged`` — a minimum: no negative curvature;
- ``saddle`` — a stationary point with negative curvature (its count and the smallest
  eigenvalue are in the message); a workflow asked to reach a minimum integrates on;
- ``failed`` — a flow that "converged" at τ = 0 from a start that is not a fixed point by the
  scale-free Newton test (:func:`newton_gap`): the loss is merely flat there.

:func:`curvatures` is :func:`curvature` for a batch of end points (one batched Hessian), and
:func:`saddle_verdict` the hook through which the batched solver
(:func:`mesadyn.flow.integrate_batch`) asks, for every row the steady-state test would stop,
whether it sits at a minimum (the row stops, ``converged``) or at a saddle (the row integrates
on; one still there at its horizon is ``saddle``).  :func:`leave_saddle` does the same for one
flow: a flow stopped at a saddle is continued without the test to its horizon.

:func:`relaxation_time` is the linearised time on which the slowest mode's gradient decays (or
escapes): how much longer a sampled flow needs to reach its own fixed point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..outcome import Outcome
from ..record import Record
from ..tolerances import ZERO_RTOL

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt

    from ..field import Field
    from ..flow import FlowResult

__all__ = ["FIXED_POINT_RTOL", "Curvature", "curvature", "curvatures", "leave_saddle",
           "newton_gap", "relaxation_time", "saddle_verdict", "settled", "stop_verdict"]

#: A start is a fixed point when the Newton step ``‖H⁺∇L‖`` is below this times ``max(1, ‖θ‖)``.
FIXED_POINT_RTOL = 1e-6


@dataclass(frozen=True)
class Curvature(Record):
    """The extreme curvatures of ``L`` at a point over the free coordinates, the scaling orbit
    projected out: ``lambda_min``, ``lambda_max`` and the number of eigenvalues below
    ``−ZERO_RTOL · max|λ|`` (``n_negative``)."""

    lambda_min: float
    lambda_max: float
    n_negative: int

    @property
    def saddle(self) -> bool:
        """Whether there is negative curvature."""
        return self.n_negative > 0


def _hessian(f: Field, theta: np.ndarray, free: np.ndarray) -> np.ndarray:
    import torch

    H = f.hessian(torch.from_numpy(np.ascontiguousarray(theta))).detach().cpu().numpy()
    return np.asarray(H[np.ix_(free, free)], dtype=np.float64)


def _projected(H: np.ndarray, theta: np.ndarray, free: np.ndarray) -> np.ndarray:
    """``Q H Q`` with ``Q`` the projector off the scaling orbit's tangent (``L`` is constant
    along it, so the gradient has no component there)."""
    from .fixedpoint import symmetry_direction

    v = symmetry_direction(theta)[free]
    n = float(np.linalg.norm(v))
    if n == 0:
        return H
    v = v / n
    Q = np.eye(len(v)) - np.outer(v, v)
    return Q @ H @ Q


def curvature(f: Field, theta: np.ndarray, free: np.ndarray) -> Curvature:
    """The :class:`Curvature` of ``f`` at ``theta`` over the ``free`` indices (dense Hessian);
    ``Curvature(nan, nan, 0)`` where the Hessian is not finite."""
    with np.errstate(all="ignore"):
        H = _projected(_hessian(f, theta, free), theta, free)
    if not H.size or not np.isfinite(H).all():  # an overflowing point has no curvature
        return Curvature(math.nan, math.nan, 0)
    ev = np.linalg.eigvalsh(0.5 * (H + H.T))
    top = float(np.max(np.abs(ev)))
    return Curvature(float(ev[0]), float(ev[-1]), int(np.sum(ev < -ZERO_RTOL * top)))


def _projected_batch(H: np.ndarray, thetas: np.ndarray, free: np.ndarray) -> np.ndarray:
    """:func:`_projected` of every row of a batch of Hessians (M, k, k)."""
    from .fixedpoint import symmetry_direction

    out = np.empty_like(H)
    for k, (Hk, th) in enumerate(zip(H, thetas, strict=True)):
        v = symmetry_direction(th)[free]
        n = float(np.linalg.norm(v))
        if n == 0:
            out[k] = Hk
            continue
        v = v / n
        Hv = Hk @ v
        # Q H Q with Q = I − vvᵀ, without forming Q: H − v(Hv)ᵀ − (Hv)vᵀ + (vᵀHv) vvᵀ
        out[k] = Hk - np.outer(v, Hv) - np.outer(Hv, v) + float(v @ Hv) * np.outer(v, v)
    return out


def curvatures(f: Field, thetas: np.ndarray, free: np.ndarray) -> list[Curvature]:
    """:func:`curvature` of every row of ``thetas`` (M, 18d²), from one batched Hessian
    (:func:`mesadyn.field.batched.batched_hessian`) over the ``free`` entries (a boolean
    mask); a row whose Hessian is not finite gets ``Curvature(nan, nan, 0)``."""
    from ..field.batched import batched_hessian

    th = np.asarray(thetas, dtype=np.float64).reshape(-1, f.n_params)
    mask = np.asarray(free, dtype=bool)
    if th.shape[0] == 0:
        return []
    with np.errstate(all="ignore"):
        H = _projected_batch(batched_hessian(f, th, mask), th, mask)
    out = []
    for Hk in H:
        if not Hk.size or not np.isfinite(Hk).all():
            out.append(Curvature(math.nan, math.nan, 0))
            continue
        ev = np.linalg.eigvalsh(0.5 * (Hk + Hk.T))
        top = float(np.max(np.abs(ev)))
        out.append(Curvature(float(ev[0]), float(ev[-1]), int(np.sum(ev < -ZERO_RTOL * top))))
    return out


def saddle_verdict(f: Field, free: np.ndarray) -> Callable[[np.ndarray], npt.NDArray[np.str_]]:
    """The verdict hook of :func:`mesadyn.flow.integrate_batch` for the field ``f``: given the
    rows the steady-state test would stop (full θ, (M, 18d²)), ``saddle`` where the Hessian has
    negative curvature over the ``free`` entries (:func:`curvatures`), else ``converged``."""

    def verdict(thetas: np.ndarray) -> npt.NDArray[np.str_]:
        cs = curvatures(f, thetas, free)
        return np.array([Outcome.SADDLE.value if c.saddle else Outcome.CONVERGED.value
                         for c in cs], dtype="<U9")

    return verdict


def newton_gap(f: Field, theta: np.ndarray, free: np.ndarray) -> tuple[float, float]:
    """``(‖H⁺∇L‖, max(1, ‖θ‖))`` over the free coordinates: the Newton step to the nearest
    stationary point, scale-free where a raw gradient threshold is not."""
    import torch

    th = torch.from_numpy(np.ascontiguousarray(theta))
    g = f.grad(th).detach().cpu().numpy()[free]
    H = _hessian(f, theta, free)
    step = np.linalg.lstsq(H, g, rcond=1e-12)[0]
    return float(np.linalg.norm(step)), max(1.0, float(np.linalg.norm(theta)))


def stop_verdict(flow: FlowResult, f: Field) -> tuple[Outcome, str]:
    """The honest ``(outcome, message)`` of a full flow (module docstring): a flow the
    steady-state test stopped is ``converged`` only at a minimum, ``saddle`` at negative
    curvature, ``failed`` when it stopped at τ = 0 away from any fixed point; every other
    outcome is the flow's own."""
    if flow.status is not Outcome.CONVERGED:
        return flow.status, flow.message
    theta = flow.final
    if flow.t[-1] <= 0.0:
        gap, scale = newton_gap(f, theta, flow.free)
        if gap > FIXED_POINT_RTOL * scale:
            g0 = float(flow.grad_max[0])
            return Outcome.FAILED, (
                f"max|∇L| = {g0:.3g} < steady_tol at τ=0, but θ0 is not a fixed point (a "
                f"Newton step of {gap:.3g} from it): the loss is that flat at this scale; give "
                f"a smaller steady_tol (e.g. {g0 * 1e-3:.1g}) or 0 to integrate to t_end")
    c = curvature(f, theta, flow.free)
    if c.saddle:
        return Outcome.SADDLE, (
            f"the flow stopped at τ={float(flow.t[-1]):.6g} where max|∇L| = "
            f"{float(flow.grad_max[-1]):.3g} < steady_tol, but ∇²L has {c.n_negative} negative "
            f"eigenvalue(s) there (the smallest {c.lambda_min:.4g}): a saddle, not a minimum")
    return Outcome.CONVERGED, flow.message


def settled(flow: FlowResult, steady_tol: float) -> FlowResult:
    """A flow continued without the steady-state test, seen by that test at its end:
    ``converged`` when it reached its horizon with its last gradient below ``steady_tol``."""
    import dataclasses

    if flow.status is Outcome.T_END and steady_tol > 0 and flow.grad_max[-1] < steady_tol:
        return dataclasses.replace(flow, status=Outcome.CONVERGED, message=(
            f"{flow.message}; max|∇L| < {steady_tol:.3g} there"))
    return flow


def leave_saddle(flow: FlowResult, f: Field, horizon: float, steady_tol: float,
                 leg: Callable[[np.ndarray, float], FlowResult | None],
                 n_save: int) -> tuple[FlowResult, Outcome, str]:
    """The one rule for a single flow the steady-state test stopped: judged by
    :func:`stop_verdict`; at a saddle it integrates on from there without the test,
    ``leg(θ, τ_span) -> FlowResult`` (``None``: no step budget left), to ``horizon`` (a run
    asked for a minimum does not stop at a saddle), and the joined flow (at most ``n_save``
    points) is judged again (:func:`settled`).  Returns the flow, its outcome and message."""
    import dataclasses

    status, message = stop_verdict(flow, f)
    if status is not Outcome.SADDLE:
        return flow, status, message
    t1 = float(flow.t[-1])
    if t1 >= horizon:
        return flow, status, message
    more = leg(flow.final, horizon - t1)
    if more is None:
        return flow, status, message
    more = dataclasses.replace(more, message=(
        f"{more.message} (τ counted from τ={t1:.6g}, where the steady-state test stopped the "
        "flow at a saddle and it was continued to its horizon without that test)"))
    joined = settled(flow.join(more, n_save), steady_tol)
    status, message = stop_verdict(joined, f)
    return joined, status, message


def relaxation_time(f: Field, theta: np.ndarray, free: np.ndarray, grad_max: float,
                    steady_tol: float) -> tuple[float, float]:
    """``(μ_min, τ)``: the smallest non-zero curvature ``|μ|`` of ``L`` at ``theta`` over the free
    coordinates and the time ``τ = log(max|∇L| / steady_tol) / μ_min`` on which the linearised
    flow ``δθ̇ = −∇²L δθ`` changes the gradient along that mode by the factor
    ``max|∇L| / steady_tol`` (decay along a positive curvature; escape along a negative one, a
    saddle the flow has to leave).

    The scaling orbit ``(αP, A/α)`` is projected out first: ``L`` is constant along it, so the
    gradient has no component there, but away from a fixed point its curvature is small and not
    zero.  Eigenvalues within ``ZERO_RTOL`` of the largest are zero modes and carry no gradient
    either.  ``μ_min`` is ``nan`` (and ``τ`` 0) when no curvature is left (a flat end).
    """
    H = _projected(_hessian(f, theta, free), theta, free)
    ev = np.abs(np.linalg.eigvalsh(0.5 * (H + H.T)))
    top = float(np.max(ev)) if ev.size else 0.0
    nonzero = ev[ev > ZERO_RTOL * top]
    if nonzero.size == 0 or grad_max <= steady_tol:
        return (float(nonzero.min()) if nonzero.size else math.nan), 0.0
    mu = float(nonzero.min())
    return mu, math.log(grad_max / steady_tol) / mu

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
    from ..field import Field
    from ..flow import FlowResult

__all__ = ["FIXED_POINT_RTOL", "Curvature", "curvature", "newton_gap", "relaxation_time",
           "stop_verdict"]

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
    """The :class:`Curvature` of ``f`` at ``theta`` over the ``free`` indices (dense Hessian)."""
    H = _projected(_hessian(f, theta, free), theta, free)
    ev = np.linalg.eigvalsh(0.5 * (H + H.T)) if H.size else np.zeros(0)
    if not ev.size or not np.isfinite(ev).all():
        return Curvature(math.nan, math.nan, 0)
    top = float(np.max(np.abs(ev)))
    return Curvature(float(ev[0]), float(ev[-1]), int(np.sum(ev < -ZERO_RTOL * top)))


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

"""Fixed points of the gradient flow ``dθ/dτ = −∇L(θ)`` and their continuum of minimisers.

* :func:`balanced_point` — the diagonal point ``a = b = √(ab*)`` of Theorem 4.1 (Theorem 4.3 for
  ones with the diagonal mask), ``ab* = c2/c1``.
* :func:`refine` — Newton on ``∇L = 0`` with the exact Hessian and a pseudo-inverse step: the
  Hessian is singular (inactive entries, the scaling symmetry), so the step is the minimum-norm
  least-squares solution in the non-singular eigenspace.  Returns the residual ``max|∇L|``.
* :func:`symmetry_direction` — ``L`` depends on ``(P, A)`` only through ``P M A``, so
  ``(αP, A/α)`` is a curve of equal loss; its tangent at α = 1 is ``(P, −A)``.  At a fixed point
  differentiating ``∇L(αP, A/α) = (∇_P L/α, α ∇_A L) = 0`` in α gives ``∇²L (P, −A) = 0``: a zero
  mode of the Hessian; away from fixed points ``∇²L (P, −A) = (−∇_P L, ∇_A L)``.
* :func:`flow_to_fixed_point` — follow the flow from an initial θ (:func:`mesadyn.flow.integrate`,
  LSODA) and refine the end point.  Whether the result *is* a fixed point is data
  (:attr:`FixedPoint.residual`, :attr:`FixedPoint.converged`), never assumed.

Every other model (:mod:`mesadyn.models`) has the same Newton in its own layout, with all its
declared symmetries projected out: :mod:`mesadyn.analysis.model_fixedpoint`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import check_int, check_positive
from ..field import Field
from ..model import MaskLike, active_mask, diagonal_init, diagonal_mask, dim_of, free_mask, unpack
from ..process import Family
from ..theory import constants
from ._newton import PINV_RTOL, backtrack

#: The solver of :func:`flow_to_fixed_point` (implicit, with the exact Jacobian −∇²L).
FLOW_SOLVER = "LSODA"


def _np(x: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy().astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def balanced_point(fam: Family, T: int) -> np.ndarray:
    """``diagonal_init(d, √ab*, √ab*)`` with ``ab* = c2/c1`` (Theorems 4.1, 4.3)."""
    s = math.sqrt(constants(fam, T).ab_star)
    return _np(diagonal_init(fam.d, s, s))


def symmetry_direction(theta: np.ndarray | torch.Tensor) -> np.ndarray:
    """Unit tangent ``d/dα (αP, A/α)|_{α=1} = (P, −A)`` of the scaling orbit, as a flat θ.

    Zero where θ has no P/A content (then the orbit is a point and the vector is 0).
    """
    th = torch.as_tensor(_np(theta))
    d = dim_of(th)
    W_KQ, W_PV = unpack(th.clone())
    out_KQ = torch.zeros_like(W_KQ)
    out_PV = torch.zeros_like(W_PV)
    out_KQ[d:, d:] = -W_KQ[d:, d:]
    out_PV[:d, d:] = W_PV[:d, d:]
    v = torch.cat([out_KQ.reshape(-1), out_PV.reshape(-1)]).numpy()
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def offdiag_mask(d: int) -> np.ndarray:
    """Active entries of θ that are not on the diagonals of W^KQ_32 and W^PV_12."""
    return active_mask(d) & ~diagonal_mask(d)


def gradient_split(grad: np.ndarray | torch.Tensor) -> dict[str, float]:
    """Max-abs of ∇L: overall, on the diagonals of W^KQ_32/W^PV_12, off them (split into the
    off-diagonal entries of those two blocks and the rest of the active blocks), and on the
    inactive entries (always 0)."""
    g = np.abs(_np(grad))
    d = dim_of(g)
    diag = diagonal_mask(d)
    act = active_mask(d)
    from ..model import block_labels

    labels = block_labels(d)
    in_blocks = np.isin(labels, ("W_KQ_32", "W_PV_12"))

    def mx(m: np.ndarray) -> float:
        return float(g[m].max()) if m.any() else 0.0

    return {
        "grad_norm": mx(np.ones_like(diag)),
        "diag_grad_norm": mx(diag),
        "offdiag_grad_norm": mx(~diag),
        "offdiag_32_12_grad_norm": mx(in_blocks & ~diag),
        "rest_grad_norm": mx(act & ~in_blocks),
        "inactive_grad_norm": mx(~act),
    }


@dataclass
class FixedPoint:
    """A refined critical point of ``L`` (Newton on ``∇L = 0``)."""

    theta: np.ndarray
    loss: float
    grad: np.ndarray
    residual: float  # max|∇L| over the free coordinates
    iterations: int
    converged: bool
    history: list[float]

    @property
    def grad_norm(self) -> float:
        """Max-abs entry of the full ∇L (the JSON's ``grad_norm``)."""
        return float(np.abs(self.grad).max())

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: loss, Newton residual and iterations, whether ``tol`` was met."""
        return {"loss": self.loss, "residual": self.residual, "grad_norm": self.grad_norm,
                "iterations": self.iterations, "converged": self.converged}


def refine(field: Field, theta0: np.ndarray | torch.Tensor, *, mask: MaskLike = None,
           tol: float = 1e-13, max_iter: int = 30) -> FixedPoint:
    """Newton on ``∇L = 0`` over the free coordinates (active ∩ ``mask``), pseudo-inverse step.

    The step ``δ = −Σ_{|h_i| > PINV_RTOL·max|h|} (v_iᵀ g / h_i) v_i`` solves the Newton system in
    least squares with minimum norm, so it never moves along the symmetry orbit or an inactive
    entry.  A step that does not reduce ``max|∇L|`` is halved (up to 30 times).  Stops when the
    residual is ``<= tol`` or stagnates; ``converged`` says whether ``tol`` was met.  Newton
    finds any critical point: start it near the one you mean (a flow end point, a theory point).
    """
    check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, 0)
    theta = _np(field.check_theta(torch.as_tensor(_np(theta0)))).copy()
    free = free_mask(mask, field.d)

    def evaluate(th: np.ndarray) -> tuple[float, np.ndarray]:
        L, g = field.loss_and_grad(torch.as_tensor(th))
        return float(L), _np(g)

    L, g = evaluate(theta)
    r = float(np.abs(g[free]).max())
    history = [r]
    it = 0
    while r > tol and it < max_iter and math.isfinite(r):
        H = _np(field.hessian(torch.as_tensor(theta)))[np.ix_(free, free)]
        if not np.isfinite(H).all():
            break  # overflow far from any critical point: nothing to solve
        it += 1
        h, V = np.linalg.eigh(0.5 * (H + H.T))
        keep = np.abs(h) > PINV_RTOL * np.abs(h).max()
        step = -(V[:, keep] @ ((V[:, keep].T @ g[free]) / h[keep]))
        found = backtrack(evaluate, theta, free, step, r)
        if found is None:
            break  # stagnated at the rounding floor
        _, theta, L, g, r = found
        history.append(r)
    return FixedPoint(theta, L, g, r, it, r <= tol, history)


@dataclass
class FlowEnd:
    """Where the flow from ``theta0`` went, before refinement."""

    theta: np.ndarray
    t: float
    status: str
    backend: str
    wall_s: float
    t_series: np.ndarray
    theta_series: np.ndarray
    loss_series: np.ndarray

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: flow time reached, status, backend and wall time."""
        return {"t": self.t, "status": self.status, "backend": self.backend,
                "wall_s": self.wall_s}


def _flow(field: Field, theta0: np.ndarray, *, t_end: float, mask: MaskLike,
          steady_tol: float, n_save: int) -> FlowEnd:
    """Integrate ``dθ/dτ = −∇L`` (masked) from ``theta0`` with :func:`mesadyn.flow.integrate`.

    Stiff near the fixed point (stiffness ratios ~10²–10³): an implicit solver with the field's
    Jacobian ``−∇²L`` reaches the steady state (explicit dopri5 hovers at ~rtol·‖H‖ and needs
    thousands of steps); LSODA asks for few Jacobians.
    """
    from ..flow import integrate

    start = time.perf_counter()
    res = integrate(field, torch.as_tensor(theta0), t_end=t_end, solver=FLOW_SOLVER,
                    rtol=1e-9, atol=1e-12, n_save=n_save, mask=mask, steady_tol=steady_tol)
    th = np.asarray(res.theta, np.float64)
    return FlowEnd(th[-1], float(res.t[-1]), str(res.status), f"mesadyn.flow {FLOW_SOLVER}",
                   time.perf_counter() - start, np.asarray(res.t, np.float64), th,
                   np.asarray(res.loss, np.float64))


def flow_to_fixed_point(field: Field, theta0: np.ndarray | torch.Tensor, *,
                        t_end: float = 1e4, mask: MaskLike = None,
                        steady_tol: float = 1e-8, tol: float = 1e-13,
                        n_save: int = 200, max_iter: int = 30) -> tuple[FixedPoint, FlowEnd]:
    """Follow the (masked) flow from ``theta0`` until ``max|∇L| < steady_tol``, then refine.

    The flow decides *which* critical point (the basin); Newton then polishes it to the
    rounding floor (the flow alone would need ~log(1/tol)/μ_min time at the slowest rate).

    ## Returns
    ``(point, end)``.  The point is whatever Newton reached: check ``point.residual`` before
    calling it a fixed point.  A flow that failed or left the finite numbers is not refined;
    its point has ``residual = inf`` and ``converged = False``, and ``end.status`` says why.
    """
    check_positive("t_end", t_end)
    th0 = _np(field.check_theta(torch.as_tensor(_np(theta0))))
    end = _flow(field, th0, t_end=t_end, mask=mask, steady_tol=steady_tol, n_save=n_save)
    if end.status == "failed" or not np.isfinite(end.theta).all():
        nan = np.full_like(end.theta, np.nan)
        return FixedPoint(end.theta, math.nan, nan, math.inf, 0, False, [math.inf]), end
    fp = refine(field, end.theta, mask=mask, tol=tol, max_iter=max_iter)
    return fp, end

"""The central flow of gradient descent at the edge of stability (Cohen, Damian, Talwalkar,
Kolter & Lee 2025, "Understanding optimization in deep learning with central flows"), on
the exact field.

GD at the edge of stability oscillates along the top Hessian eigenvectors while its
time-average drifts; the central flow is the ODE of that time-average.  With time ``t``
counted in GD steps (``θ(t)`` is compared with ``θ_t``), the sharpness ``S = λ_max(∇²L)``
and the *critical* eigenvectors ``U = (u_1..u_k)`` (eigenvalues ``> 1.95/η``, as in the
authors' reference code):

    dθ/dt = −η [∇L(θ) + ½ ∇_θ ⟨Σ, ∇²L(θ)⟩],        Σ = U X Uᵀ,  X ⪰ 0 (k × k),

where ``X`` — the covariance of the oscillation in the critical subspace — keeps the
critical block ``M = Uᵀ∇²L U`` at or below ``2/η``.  Discretised with Euler substeps of
length ``dt`` (``substeps`` per GD step), ``X`` solves the semidefinite complementarity
problem

    X ⪰ 0,   R(X) = (2/η) I − M − dt·Ṁ(X) ⪰ 0,   ⟨X, R(X)⟩ = 0,

``Ṁ(X)_{ij} = ⟨∇(u_iᵀ∇²L u_j), −η∇L − (η/2) Σ_{lm} X_{lm} ∇(u_lᵀ∇²L u_m)⟩``: it is the
minimiser over the PSD cone of the convex quadratic whose gradient is ``R`` (solved by
projected gradient with restarts, :func:`solve_sdcp`; in closed form for ``k = 1``:
``X = max(0, −R(0)/B)``).  Without a critical eigenvalue the central flow is the gradient
flow.  The loss GD's time-average sees is ``L(θ) + ½⟨Σ, ∇²L⟩ = L(θ) + tr(X)/η``.

**Third derivatives, exactly.**  ``∇_θ(wᵀ∇²L(θ)w) = D³L(θ)[w, w, ·]``, and since ``∇L`` is
a cubic polynomial in θ (the loss is quartic), ``∇L(θ + hw) + ∇L(θ − hw) − 2∇L(θ) =
h² D³L[w, w, ·]`` with no remainder (:func:`sharpness_gradient`, ``method="polynomial"``);
the cross terms follow by polarisation.  ``method="autodiff"`` differentiates
``wᵀ∇²L w`` through the field's differentiable torch loss (three backward passes), the
independent check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_int, check_positive
from ..record import Record, hidden
from .gd_map import eigh as _eigh

if TYPE_CHECKING:
    import torch

    from ..field import Field
    from ..model import MaskLike
    from ..progress import ProgressCallback

__all__ = ["CRITICAL", "CentralFlow", "CentralComparison", "central_flow",
           "compare_central", "sharpness_gradient", "solve_sdcp"]

FloatArray = npt.NDArray[np.float64]
#: Eigenvalues above ``CRITICAL/η`` are critical (the authors' threshold).
CRITICAL = 1.95


def sharpness_gradient(field: Field, theta: npt.ArrayLike, w: npt.ArrayLike, *,
                       method: str = "polynomial") -> FloatArray:
    """``∇_θ(wᵀ∇²L(θ)w) = D³L(θ)[w, w, ·]`` (full length 18d²), exact (module docstring)."""
    import torch

    th = np.asarray(theta, dtype=np.float64)
    v = np.asarray(w, dtype=np.float64)
    if method == "polynomial":
        from .gd_map import _grad

        h = 1e-2 * max(1.0, float(np.linalg.norm(th))) / max(float(np.linalg.norm(v)), 1e-300)
        out: FloatArray = (_grad(field, th + h * v) + _grad(field, th - h * v)
                           - 2 * _grad(field, th)) / (h * h)
        return out
    if method == "autodiff":
        t = torch.from_numpy(th.copy()).requires_grad_(True)
        vt = torch.from_numpy(v.copy())
        with torch.enable_grad():
            (g,) = torch.autograd.grad(field.loss(t), t, create_graph=True)
            (hv,) = torch.autograd.grad(g @ vt, t, create_graph=True)
            (d3,) = torch.autograd.grad(hv @ vt, t)
        return np.asarray(d3.detach().numpy(), dtype=np.float64)
    raise MesadynError(f"unknown method {method!r}; choose polynomial or autodiff")


def solve_sdcp(A: FloatArray, B: FloatArray, *, tol: float = 1e-13,
               max_iter: int = 20_000) -> FloatArray:
    """``X ⪰ 0`` with ``R = A + B[X] ⪰ 0`` and ``⟨X, R⟩ = 0`` (``A`` symmetric k × k, ``B`` a
    PSD linear map on symmetric matrices given as a (k, k, k, k) array, ``B[X]_{ij} =
    Σ_{lm} B_{ijlm} X_{lm}``): the minimiser of ``½⟨X, B[X]⟩ + ⟨A, X⟩`` over the PSD cone, by
    accelerated projected gradient (closed form for k = 1)."""
    k = A.shape[0]
    if k == 1:
        b = float(B[0, 0, 0, 0])
        x = max(0.0, -float(A[0, 0]) / b) if b > 0 else 0.0
        return np.array([[x]])
    Bm = B.reshape(k * k, k * k)
    Bm = 0.5 * (Bm + Bm.T)
    step = 1.0 / max(float(np.linalg.eigvalsh(Bm)[-1]), 1e-300)

    def proj(Y: FloatArray) -> FloatArray:
        ev, V = _eigh(0.5 * (Y + Y.T))
        out: FloatArray = (V * np.maximum(ev, 0.0)) @ V.T
        return out

    def grad(Y: FloatArray) -> FloatArray:
        out: FloatArray = A + (Bm @ Y.reshape(-1)).reshape(k, k)
        return out

    X = np.zeros((k, k))
    Y, t = X.copy(), 1.0
    scale = max(float(np.abs(A).max()), 1e-300)
    for _ in range(max_iter):
        Xn = proj(Y - step * grad(Y))
        tn = 0.5 * (1 + math.sqrt(1 + 4 * t * t))
        Y = Xn + ((t - 1) / tn) * (Xn - X)
        if float(np.sum((Xn - X) * grad(Xn))) > 0:  # restart (O'Donoghue & Candès)
            Y, tn = Xn.copy(), 1.0
        if float(np.abs(Xn - X).max()) <= tol * max(1.0, float(np.abs(Xn).max())) * scale:
            X = Xn
            break
        X, t = Xn, tn
    return X


@dataclass(frozen=True)
class CentralFlow(Record):
    """The central flow from θ0 at the GD step η, sampled at every GD step ``t = 0..steps``:
    (hidden arrays) θ, the loss ``L(θ)``, the predicted time-averaged loss
    ``L + tr(X)/η``, ``tr X`` (the oscillation's variance), the sharpness and how many
    eigenvalues were critical; ``edge_steps`` counts the GD steps at the edge (``tr X > 0``)."""

    eta: float
    steps: int
    substeps: int
    edge_steps: int
    loss_end: float
    predicted_loss_end: float
    sharpness_end: float
    theta: FloatArray = hidden()
    loss: FloatArray = hidden()
    predicted_loss: FloatArray = hidden()
    variance: FloatArray = hidden()
    sharpness: FloatArray = hidden()
    critical: npt.NDArray[np.int64] = hidden()


def central_flow(field: Field, theta0: npt.ArrayLike, eta: float, steps: int, *,
                 mask: MaskLike = None, substeps: int = 4, critical: float = CRITICAL,
                 method: str = "polynomial",
                 progress: ProgressCallback | None = None) -> CentralFlow:
    """Integrate the central flow (module docstring) for ``steps`` GD steps of length ``η``
    from ``theta0`` with ``substeps`` Euler substeps per step (exact Hessian, dense)."""
    from .gd_map import _free, _grad, _hessian

    eta = check_positive("eta", eta)
    steps = check_int("steps", steps, 1)
    substeps = check_int("substeps", substeps, 1)
    free = _free(field, mask)
    th = np.array(theta0, dtype=np.float64)
    dt = 1.0 / substeps
    rows: dict[str, list[float]] = {k: [] for k in ("loss", "pred", "var", "sharp", "crit")}
    thetas = []
    for k in range(steps + 1):
        for j in range(substeps):
            g = _grad(field, th)[free]
            ev, V = _eigh(_hessian(field, th, free))
            crit = np.flatnonzero(ev > critical / eta)[::-1]  # largest first
            X = np.zeros((0, 0))
            dth = -eta * g
            if crit.size:
                U = V[:, crit]
                m = crit.size
                Hg = np.zeros((m, m, free.size))  # ∇(u_iᵀ H u_j) on the free coordinates
                for i in range(m):
                    for l in range(i, m):
                        wp, wm = np.zeros(field.n_params), np.zeros(field.n_params)
                        wp[free], wm[free] = U[:, i] + U[:, l], U[:, i] - U[:, l]
                        gi = 0.25 * (sharpness_gradient(field, th, wp, method=method)
                                     - (sharpness_gradient(field, th, wm, method=method)
                                        if i != l else 0.0))[free]
                        Hg[i, l] = Hg[l, i] = gi
                Mdot0 = np.einsum("ijn,n->ij", Hg, dth)
                Bop = 0.5 * eta * dt * np.einsum("ijn,lmn->ijlm", Hg, Hg)
                A = (2.0 / eta) * np.eye(m) - np.diag(ev[crit]) - dt * Mdot0
                X = solve_sdcp(A, Bop)
                dth = dth - 0.5 * eta * np.einsum("lm,lmn->n", X, Hg)
            if j == 0:
                thetas.append(th.copy())
                rows["loss"].append(float(field.loss(_tensor(th))))
                rows["var"].append(float(np.trace(X)) if X.size else 0.0)
                rows["pred"].append(rows["loss"][-1] + rows["var"][-1] / eta)
                rows["sharp"].append(float(ev[-1]))
                rows["crit"].append(float(crit.size))
            if k == steps:
                break
            th = th.copy()
            th[free] += dt * dth
            if not np.isfinite(th).all():
                raise MesadynError(f"the central flow left the finite numbers at step {k}")
        if progress is not None:
            progress(float(k))
    var = np.asarray(rows["var"])
    return CentralFlow(eta=eta, steps=steps, substeps=substeps,
                       edge_steps=int((var > 0).sum()), loss_end=rows["loss"][-1],
                       predicted_loss_end=rows["pred"][-1], sharpness_end=rows["sharp"][-1],
                       theta=np.stack(thetas), loss=np.asarray(rows["loss"]),
                       predicted_loss=np.asarray(rows["pred"]), variance=var,
                       sharpness=np.asarray(rows["sharp"]),
                       critical=np.asarray(rows["crit"], dtype=np.int64))


def _tensor(th: FloatArray) -> torch.Tensor:
    import torch

    return torch.from_numpy(np.ascontiguousarray(th))


def moving_average(x: npt.ArrayLike, window: int) -> FloatArray:
    """The centred moving average of ``x`` along axis 0 over ``window`` rows (shrinking at
    the ends): GD's time-average, which cancels its period-2 oscillation."""
    a = np.asarray(x, dtype=np.float64)
    window = check_int("window", window, 1)
    c = np.cumsum(np.concatenate([np.zeros((1,) + a.shape[1:]), a]), axis=0)
    n = a.shape[0]
    lo = np.clip(np.arange(n) - window // 2, 0, n)
    hi = np.clip(lo + window, 0, n)
    lo = np.clip(hi - window, 0, n)
    shape = (-1,) + (1,) * (a.ndim - 1)
    out: FloatArray = (c[hi] - c[lo]) / (hi - lo).reshape(shape)
    return out


@dataclass(frozen=True)
class CentralComparison(Record):
    """GD against its central flow and its modified flow over the same steps: the gap of
    each prediction of GD's time-averaged loss (``|pred − L̄_GD|/L̄_GD``, mean and max over
    the edge-of-stability steps, where the central flow's ``tr X > 0``; over all steps when
    there are none) and of its time-averaged θ (``‖θ − θ̄_GD‖``, at the end and the max)."""

    eta: float
    steps: int
    window: int
    edge_steps: int
    central_loss_gap_mean: float
    central_loss_gap_max: float
    modified_loss_gap_mean: float
    modified_loss_gap_max: float
    flow_loss_gap_mean: float
    central_theta_gap_end: float
    modified_theta_gap_end: float
    flow_theta_gap_end: float
    central_theta_gap_max: float
    modified_theta_gap_max: float
    gd_sharpness_end: float
    central_sharpness_end: float
    central: CentralFlow = hidden()
    gd_loss: FloatArray = hidden()
    gd_loss_avg: FloatArray = hidden()
    modified_loss: FloatArray = hidden()
    flow_loss: FloatArray = hidden()
    gd_sharpness: FloatArray = hidden()


def compare_central(field: Field, theta0: npt.ArrayLike, eta: float, steps: int, *,
                    mask: MaskLike = None, window: int = 8, substeps: int = 4,
                    progress: ProgressCallback | None = None) -> CentralComparison:
    """GD, its central flow and its (first-order modified and plain) gradient flow from
    ``theta0`` for ``steps`` steps at ``eta`` (module docstring); GD's time-average is the
    centred :func:`moving_average` over ``window`` steps."""
    from .gd_flow import flow_at_steps, losses
    from .gd_regime import descend

    eta = check_positive("eta", eta)
    trace = descend(field, theta0, eta, steps, mask=mask, sharpness_every=1)
    if trace.diverged_step is not None:
        raise MesadynError(f"GD at η={eta:g} diverged at step {trace.diverged_step}: no "
                           "time-average to compare with")
    cf = central_flow(field, theta0, eta, steps, mask=mask, substeps=substeps,
                      progress=progress)
    mod = flow_at_steps(field, theta0, eta, steps, modified=True, mask=mask)
    flow = flow_at_steps(field, theta0, eta, steps, mask=mask)
    L_avg = moving_average(trace.loss, window)
    th_avg = moving_average(trace.theta, window)
    L_mod, L_flow = losses(field, mod), losses(field, flow)
    edge = cf.variance > 0
    sel = edge if edge.any() else np.ones_like(edge)

    def rel(pred: FloatArray) -> FloatArray:
        out: FloatArray = np.abs(pred - L_avg)[sel] / np.abs(L_avg[sel])
        return out

    def dist(a: FloatArray) -> FloatArray:
        out: FloatArray = np.linalg.norm(a - th_avg, axis=1)
        return out

    gc, gm, gf = rel(cf.predicted_loss), rel(L_mod), rel(L_flow)
    dc, dm, df = dist(cf.theta), dist(mod), dist(flow)
    return CentralComparison(
        eta=eta, steps=steps, window=window, edge_steps=cf.edge_steps,
        central_loss_gap_mean=float(gc.mean()), central_loss_gap_max=float(gc.max()),
        modified_loss_gap_mean=float(gm.mean()), modified_loss_gap_max=float(gm.max()),
        flow_loss_gap_mean=float(gf.mean()), central_theta_gap_end=float(dc[-1]),
        modified_theta_gap_end=float(dm[-1]), flow_theta_gap_end=float(df[-1]),
        central_theta_gap_max=float(dc.max()), modified_theta_gap_max=float(dm.max()),
        gd_sharpness_end=float(trace.sharpness[-1]), central_sharpness_end=cf.sharpness_end,
        central=cf, gd_loss=trace.loss, gd_loss_avg=L_avg, modified_loss=L_mod,
        flow_loss=L_flow, gd_sharpness=trace.sharpness)

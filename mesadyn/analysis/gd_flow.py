"""Gradient descent against the gradient flow it discretises.

The paper trains by full-batch GD ``θ_k = θ_{k−1} − η ∇L(θ_{k−1})`` (Section 6, Table 1's η)
and analyses the gradient flow ``dθ/dτ = −∇L(θ)`` (Eq. 2).  GD is the explicit Euler method on
that flow, so ``θ_k − θ(kη) = O(η)`` on a fixed horizon.  Backward error analysis (Hairer,
Lubich & Wanner, *Geometric Numerical Integration*, §IX; Barrett & Dherin 2021, "Implicit
gradient regularization") gives the first-order *modified flow*

    dθ/dτ = −∇L − (η/2) ∇²L ∇L = −∇L̃,   L̃ = L + (η/4) ‖∇L‖²,

which GD follows to ``O(η²)``.  This module computes the three trajectories on any
:class:`~mesadyn.field.Field` (exact population loss or the finite-sample loss of one training
set), the gaps between them at ``τ = kη`` (:class:`GDFlowGap`), and the spread of GD end points over
training sets (:func:`endpoint_spread`, :func:`fit_power_law`).

Masks: with ``mask="diagonal"`` (Theorem 4.3's clipping) GD moves only the free entries
``P`` (the field's model's :meth:`~mesadyn.models.Model.free_mask`; any model),
``θ_k = θ_{k−1} − η P∇L``; its modified flow is
``−P∇L − (η/2) P∇²L P∇L``, the masked gradient flow of ``L + (η/4)‖P∇L‖²`` — what
:class:`ModifiedField` gives to :func:`mesadyn.flow.integrate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, final

import numpy as np
import numpy.typing as npt
import torch

from ..errors import MesadynError, check_int, check_positive
from ..field import Field
from ..model import MaskLike
from ..record import Record

__all__ = [
    "ATOL", "RTOL", "SHARPNESS_SEED", "SOLVER", "GDFlowComparison", "GDFlowGap", "ModifiedField",
    "PowerFit", "compare_gd_flow", "endpoint_spread", "fit_power_law", "flow_at_steps", "gap",
    "gd_iterates", "losses", "modified_rhs", "sharpness",
]

FloatArray = npt.NDArray[np.float64]

#: The default solver of the comparison: explicit (the modified field has no cheap exact
#: Hessian), 8th order, with dense output at ``τ = kη``.
SOLVER = "scipy:DOP853"
#: Default tolerances: far below the O(η²) modified-flow gap at Table 1's step sizes.
RTOL = 1e-11
ATOL = 1e-13
#: Seed of the Lanczos start vector (and restarts) of :func:`sharpness`.
SHARPNESS_SEED = 20_240_517


def _free(field: Field, mask: MaskLike) -> torch.Tensor:
    return torch.from_numpy(field.model.free_mask(mask, field.d))


def gd_iterates(field: Field, theta0: torch.Tensor | npt.ArrayLike, lr: float, steps: int, *,
                mask: MaskLike = None,
                progress: Callable[[int], None] | None = None) -> FloatArray:
    """GD ``θ_k = θ_{k−1} − η P∇L(θ_{k−1})``, ``k = 0..steps`` (Section 6), as a
    ``(steps + 1, n_params)`` array; ``P`` keeps the free entries of ``mask``.

    Raises:
        MesadynError: a bad ``lr``/``steps``/θ, or GD leaving the finite numbers (the message
            names the step and η).
    """
    lr = check_positive("lr", lr)
    steps = check_int("steps", steps, 0)
    theta = field.check_theta(torch.as_tensor(theta0, dtype=torch.float64)).detach().clone()
    free = _free(field, mask)
    out = np.empty((steps + 1, theta.numel()), dtype=np.float64)
    out[0] = theta.numpy()
    for k in range(1, steps + 1):
        _, g = field.loss_and_grad(theta)
        theta = theta.clone()
        theta[free] = theta[free] - lr * g[free]
        if not torch.isfinite(theta).all():
            raise MesadynError(f"GD diverged at step {k} (lr={lr:g}); try a smaller lr")
        out[k] = theta.numpy()
        if progress is not None:
            progress(k)
    return out


def modified_rhs(field: Field, theta: torch.Tensor, lr: float,
                 mask: MaskLike = None) -> torch.Tensor:
    """The first-order modified flow's right-hand side ``−P∇L − (η/2) P∇²L P∇L`` at θ."""
    return -ModifiedField(field, lr, mask).loss_and_grad(theta)[1] * _free(field, mask)


@final
class ModifiedField(Field):
    """The modified loss ``L̃ = L + (η/4)‖P∇L‖²`` of first-order backward error analysis.

    Its masked gradient flow is GD's modified flow ``dθ/dτ = −P∇L − (η/2) P∇²L P∇L`` (module
    docstring).  :meth:`loss_and_grad` uses the base field's gradient and Hessian-vector
    product (:meth:`Field.hvp`); :meth:`loss` is the autodiff form (for checks).  No cheap
    exact Hessian (it needs third derivatives): integrate it with an explicit solver.
    """

    name = "modified"
    has_exact_hessian = False

    def __init__(self, base: Field, lr: float, mask: MaskLike = None) -> None:
        self.base = base
        self.model = base.model
        self.lr = check_positive("lr", lr)
        self.family = base.family
        self.T = base.T
        self.device = base.device
        self._free = _free(base, mask).to(torch.float64)

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """``L̃(θ)`` by double backward through the base loss (differentiable)."""
        if not theta.requires_grad:
            theta = theta.detach().requires_grad_(True)
        with torch.enable_grad():
            value = self.base.loss(theta)
            (g,) = torch.autograd.grad(value, theta, create_graph=True)
            pg = g * self._free.to(g.device)
            return value + 0.25 * self.lr * (pg * pg).sum()

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L̃, ∇L + (η/2) ∇²L P∇L)`` from the base field's gradient and HVP."""
        value, g = self.base.loss_and_grad(theta)
        pg = g * self._free.to(g.device)
        hv = self.base.hvp(theta, pg)
        return value + 0.25 * self.lr * (pg * pg).sum(), g + 0.5 * self.lr * hv

    def describe(self) -> dict[str, object]:
        return {**self.base.describe(), "modified": "first-order backward error analysis",
                "lr": self.lr}


def flow_at_steps(field: Field, theta0: torch.Tensor | npt.ArrayLike, lr: float, steps: int,
                  *, modified: bool = False, mask: MaskLike = None, solver: str = SOLVER,
                  rtol: float = RTOL, atol: float = ATOL,
                  max_steps: int | None = None) -> FloatArray:
    """The gradient flow (or, with ``modified``, GD's modified flow) at ``τ = kη``,
    ``k = 0..steps``, by :func:`mesadyn.flow.integrate` with ``t_eval`` on that grid.

    Raises:
        MesadynError: bad options, or a solve that stopped before ``τ = steps·η`` (the
            message is the solver's).
    """
    from ..flow import integrate
    from ..outcome import Outcome

    lr = check_positive("lr", lr)
    steps = check_int("steps", steps, 1)
    target = ModifiedField(field, lr, mask) if modified else field
    t = lr * np.arange(steps + 1, dtype=np.float64)
    res = integrate(target, theta0, t_end=float(t[-1]), solver=solver, rtol=rtol, atol=atol,
                    t_eval=t, mask=mask, steady_tol=None, max_steps=max_steps,
                    compute_stiffness=False)
    what = "modified flow" if modified else "flow"
    if res.status not in (Outcome.T_END, Outcome.CONVERGED) or len(res.t) != steps + 1:
        raise MesadynError(f"the {what} stopped before τ={t[-1]:.6g}: {res.message}")
    return np.asarray(res.theta, dtype=np.float64)


def sharpness(field: Field, theta: torch.Tensor | npt.ArrayLike,
              mask: MaskLike = None) -> float:
    """``λ_max(P∇²L P)``, the largest Hessian eigenvalue on the free entries, by Lanczos
    (``scipy.sparse.linalg.eigsh``) on Hessian-vector products.  GD is the explicit Euler
    method: it is stable along a mode only while ``η λ < 2``, and backward error analysis is an
    expansion in ``η λ``.

    The Lanczos start is fixed and generic: a uniform draw from :data:`SHARPNESS_SEED` (a
    start with the symmetries of θ's layout, such as the all-ones vector, can be orthogonal to
    the top eigenvector), and the same generator gives the vectors of ARPACK's restarts (scipy
    >= 1.17 draws them from ``rng``, a fresh entropy-seeded generator without it), so the
    value is reproducible to the bit."""
    from scipy import __version__ as scipy_version
    from scipy.sparse.linalg import LinearOperator, eigsh

    th = field.check_theta(torch.as_tensor(theta, dtype=torch.float64))
    free = np.flatnonzero(_free(field, mask).numpy())
    free_t = torch.from_numpy(free)

    def matvec(v: FloatArray) -> FloatArray:
        full = torch.zeros_like(th)
        full[free_t] = torch.as_tensor(np.ravel(v), dtype=torch.float64)
        out: FloatArray = field.hvp(th, full)[free_t].numpy()
        return out

    op = LinearOperator((free.size, free.size), matvec=matvec, dtype=np.float64)
    rng = np.random.default_rng(SHARPNESS_SEED)
    v0 = rng.uniform(-1.0, 1.0, free.size)
    major, minor = (int(p) for p in scipy_version.split(".")[:2])
    restarts: dict[str, Any] = {"rng": rng} if (major, minor) >= (1, 17) else {}
    return float(eigsh(op, k=1, which="LA", v0=v0, tol=1e-8, return_eigenvectors=False,
                       **restarts)[0])


def losses(field: Field, thetas: FloatArray) -> FloatArray:
    """``L(θ)`` of each row of ``thetas``."""
    with torch.no_grad():
        return np.array([float(field.loss(torch.as_tensor(th))) for th in thetas])


@dataclass(frozen=True)
class GDFlowGap(Record):
    """How far GD is from a reference trajectory at ``τ = kη``, over ``k = 0..steps``.

    ``max_abs = max_k ‖θ_k − θ(kη)‖₂`` (at step ``at_step``); ``max_rel`` the largest
    ``‖θ_k − θ(kη)‖ / ‖θ(kη)‖``; ``final_abs`` the gap at the last step; ``max_loss`` the
    largest ``|L(θ_k) − L(θ(kη))|`` and ``max_loss_rel`` that relative to ``L(θ(kη))``.
    """

    max_abs: float
    at_step: int
    max_rel: float
    final_abs: float
    max_loss: float
    max_loss_rel: float



def gap(gd: FloatArray, ref: FloatArray, loss_gd: FloatArray | None = None,
        loss_ref: FloatArray | None = None) -> GDFlowGap:
    """The :class:`GDFlowGap` between GD rows ``gd`` and reference rows ``ref`` (same shape);
    the loss gaps are NaN when the losses are not given."""
    gd, ref = np.atleast_2d(np.asarray(gd, np.float64)), np.atleast_2d(np.asarray(ref, np.float64))
    if gd.shape != ref.shape:
        raise MesadynError(f"GD and reference shapes differ: {gd.shape} vs {ref.shape}")
    err = np.linalg.norm(gd - ref, axis=1)
    scale = np.linalg.norm(ref, axis=1)
    rel = np.divide(err, scale, out=np.full_like(err, np.nan), where=scale > 0)
    k = int(np.argmax(err))
    if loss_gd is None or loss_ref is None:
        lmax = lrel = math.nan
    else:
        dl = np.abs(np.asarray(loss_gd) - np.asarray(loss_ref))
        lref = np.abs(np.asarray(loss_ref))
        lmax = float(dl.max())
        lrel = float(np.max(np.divide(dl, lref, out=np.full_like(dl, np.nan),
                                      where=lref > 0)))
    return GDFlowGap(max_abs=float(err[k]), at_step=k, max_rel=float(np.nanmax(rel)) if np.isfinite(
        rel).any() else math.nan, final_abs=float(err[-1]), max_loss=lmax, max_loss_rel=lrel)


@dataclass(frozen=True)
class GDFlowComparison:
    """GD, the flow and the modified flow at ``τ = kη`` on one field, with their gaps.

    ``ratio = flow.max_abs / modified.max_abs``: how much the modified flow closes the gap.
    ``sharpness`` holds ``(k, η λ_max(∇²L(θ_k)))`` at every ``sharpness_every``-th GD iterate
    (:func:`sharpness`; empty when not asked): backward error analysis is an expansion in it.
    """

    lr: float
    steps: int
    t: FloatArray
    gd: FloatArray
    flow: FloatArray
    modified: FloatArray
    loss_gd: FloatArray
    loss_flow: FloatArray
    loss_modified: FloatArray
    gap_flow: GDFlowGap
    gap_modified: GDFlowGap
    field: dict[str, Any]
    sharpness: tuple[tuple[int, float], ...] = ()

    @property
    def eta_lambda_max(self) -> float:
        """The largest ``η λ_max`` over the sampled GD iterates (NaN when none)."""
        return max((v for _, v in self.sharpness), default=math.nan)

    @property
    def ratio(self) -> float:
        m = self.gap_modified.max_abs
        return self.gap_flow.max_abs / m if m > 0 else math.inf

    def gap_curves(self) -> tuple[FloatArray, FloatArray]:
        """``‖θ_k − θ(kη)‖`` and ``‖θ_k − θ̃(kη)‖`` per step."""
        return (np.linalg.norm(self.gd - self.flow, axis=1),
                np.linalg.norm(self.gd - self.modified, axis=1))

    def to_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "steps": self.steps, "tau_end": float(self.t[-1]),
                "gap_flow": self.gap_flow.to_dict(), "gap_modified": self.gap_modified.to_dict(),
                "ratio": self.ratio, "theta_norm_end": float(np.linalg.norm(self.flow[-1])),
                "eta_lambda_max": self.eta_lambda_max,
                "eta_lambda_start": self.sharpness[0][1] if self.sharpness else math.nan,
                "loss_end_gd": float(self.loss_gd[-1]),
                "loss_end_flow": float(self.loss_flow[-1]), "field": self.field}


def compare_gd_flow(field: Field, theta0: torch.Tensor | npt.ArrayLike, lr: float, steps: int, *,
            mask: MaskLike = None, solver: str = SOLVER, rtol: float = RTOL, atol: float = ATOL,
            sharpness_every: int = 10,
            progress: Callable[[float], None] | None = None) -> GDFlowComparison:
    """GD from ``theta0`` against the flow and the modified flow at ``τ = kη`` on ``field``,
    with ``η λ_max`` at every ``sharpness_every``-th GD iterate and the last (0: none).

    ``progress`` gets the fraction done (GD, then each flow).
    """

    def report(x: float) -> None:
        if progress is not None:
            progress(x)

    steps = check_int("steps", steps, 1)
    gd = gd_iterates(field, theta0, lr, steps, mask=mask,
                     progress=lambda k: report(0.4 * k / steps) if k % 10 == 0 else None)
    flow = flow_at_steps(field, theta0, lr, steps, mask=mask, solver=solver, rtol=rtol,
                         atol=atol)
    report(0.6)
    mod = flow_at_steps(field, theta0, lr, steps, modified=True, mask=mask, solver=solver,
                        rtol=rtol, atol=atol)
    report(0.9)
    l_gd, l_flow, l_mod = losses(field, gd), losses(field, flow), losses(field, mod)
    every = check_int("sharpness_every", sharpness_every, 0)
    ks = sorted({*range(0, steps + 1, every), steps}) if every else []
    sharp = tuple((k, float(lr) * sharpness(field, gd[k], mask)) for k in ks)
    report(1.0)
    return GDFlowComparison(
        lr=float(lr), steps=steps, t=lr * np.arange(steps + 1, dtype=np.float64), gd=gd,
        flow=flow, modified=mod, loss_gd=l_gd, loss_flow=l_flow, loss_modified=l_mod,
        gap_flow=gap(gd, flow, l_gd, l_flow), gap_modified=gap(gd, mod, l_gd, l_mod),
        field=field.describe(), sharpness=sharp)


# ---- spread of GD end points over training sets ---------------------------------------------
def endpoint_spread(endpoints: npt.ArrayLike) -> tuple[float, float]:
    """The spread of ``S >= 3`` end points (rows) and its jackknife standard error.

    Spread ``s = sqrt(Σ_s ‖θ_s − θ̄‖² / (S − 1))``, the root of the covariance's trace.
    """
    x = np.asarray(endpoints, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 3:
        raise MesadynError(f"the spread needs at least 3 end points as rows, got shape {x.shape}")
    S = x.shape[0]

    def spread(rows: FloatArray) -> float:
        return float(np.sqrt(((rows - rows.mean(0)) ** 2).sum() / (rows.shape[0] - 1)))

    s = spread(x)
    jack = np.array([spread(np.delete(x, i, axis=0)) for i in range(S)])
    se = float(np.sqrt((S - 1) / S * ((jack - jack.mean()) ** 2).sum()))
    return s, se


@dataclass(frozen=True)
class PowerFit:
    """``s = A m^slope`` fitted by weighted least squares on ``log s`` (weights ``(s/se)²``).

    ``slope_se`` is the fit's standard error from the given SEs, ``chi2``/``dof`` its
    goodness of fit; ``slope_se_scaled`` inflates ``slope_se`` by ``sqrt(chi2/dof)`` when that
    is above 1 (the SEs understated the scatter).
    """

    slope: float
    slope_se: float
    slope_se_scaled: float
    log_amplitude: float
    chi2: float
    dof: int

    def to_dict(self) -> dict[str, float | int]:
        return {"slope": self.slope, "slope_se": self.slope_se,
                "slope_se_scaled": self.slope_se_scaled, "log_amplitude": self.log_amplitude,
                "chi2": self.chi2, "dof": self.dof}


def fit_power_law(m: Sequence[float] | npt.ArrayLike, s: Sequence[float] | npt.ArrayLike,
                  se: Sequence[float] | npt.ArrayLike) -> PowerFit:
    """Fit ``log s = log A + slope · log m`` (at least 2 points, positive values)."""
    x = np.log(np.asarray(m, dtype=np.float64))
    s_ = np.asarray(s, dtype=np.float64)
    se_ = np.asarray(se, dtype=np.float64)
    if x.size < 2 or s_.shape != x.shape or se_.shape != x.shape:
        raise MesadynError(f"the power-law fit needs >= 2 matching points, got m={x.size}, "
                           f"s={s_.size}, se={se_.size}")
    if not (np.all(s_ > 0) and np.all(se_ > 0) and np.all(np.isfinite(x))):
        raise MesadynError("the power-law fit needs positive m, spreads and standard errors")
    y, sy = np.log(s_), se_ / s_
    w = 1.0 / sy**2
    xm = float((w * x).sum() / w.sum())
    sxx = float((w * (x - xm) ** 2).sum())
    if sxx <= 0:
        raise MesadynError("the power-law fit needs at least two distinct m")
    slope = float((w * (x - xm) * y).sum() / sxx)
    intercept = float((w * y).sum() / w.sum() - slope * xm)
    chi2 = float((w * (y - intercept - slope * x) ** 2).sum())
    dof = x.size - 2
    se_slope = math.sqrt(1.0 / sxx)
    scale = math.sqrt(chi2 / dof) if dof > 0 else 1.0
    return PowerFit(slope=slope, slope_se=se_slope, slope_se_scaled=se_slope * max(1.0, scale),
                    log_amplitude=intercept, chi2=chi2, dof=dof)

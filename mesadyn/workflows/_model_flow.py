"""The gradient flow and the fixed point of a model other than the paper's (``--model``).

The paper's model runs through :mod:`mesadyn.flow` and :mod:`mesadyn.analysis`, which read
θ in its 18d² layout.  Any other :class:`~mesadyn.models.Model` runs here, on its own layout:

* :func:`model_flow` — ``dθ/dτ = −∇L`` on the free entries (the model's active entries, or
  its layered diagonals with ``mask="diagonal"``) by a SciPy solver (:data:`MODEL_SOLVER`:
  BDF with ``−∇²L`` as the Jacobian, exact or by differences of the gradient,
  :class:`JacobianKind`; measured at d = 1, T = 4 for two layers: 15 Jacobians to
  ``max|∇L| < 1e-10``, where LSODA took 450); it stops at the first evaluated θ where
  ``max|∇L| < steady_tol`` (or where ``on_steady`` says so), or at ``t_end``, or after
  ``max_steps`` gradient evaluations.  Given an orthonormal ``basis`` of a subspace the
  flow keeps (the fixed subspace of the loss's coordinate symmetry,
  :meth:`~mesadyn.models.Model.fixed_subspace`), it integrates the coordinates
  ``y = basisᵀ θ`` instead: the same trajectory, with a Jacobian of ``m`` Hessian-vector
  products (or directional differences) instead of the full Hessian;
  every evaluation checks the claim (``leak``: the largest gradient entry off the subspace)
  and ``max|∇L|`` is always over every free entry;
* :func:`model_steady` — the flow to its fixed point: the flow decides the basin, Newton
  (:func:`mesadyn.analysis.model_fixedpoint.newton_polish`) polishes from where the flow
  first gets below :data:`NEWTON_HANDOFF`, unless the curvature there or on Newton's way
  says it could land elsewhere; the end's curvature across the model's symmetry orbits
  decides minimum or saddle (:class:`ModelSteady`);
* :func:`model_spectrum` (:mod:`mesadyn.analysis.model_spectrum`, re-exported) — the
  eigenvalues of ``J = −∇²L`` with the zero modes explained by
  the inactive entries of the model, the active entries the data never reach, and the
  model's declared continuous symmetries (:meth:`~mesadyn.models.Model.symmetries`); a zero
  mode outside their span is ``unexplained``;
* :class:`ModelFlowResult` and :class:`ModelStabilityResult`, what ``mesadyn integrate`` and
  ``mesadyn stability`` report for such a model (:mod:`._model_runs`).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# the spectrum lives with the analyses (the continuation of a model uses it too)
from ..analysis.model_spectrum import ModelSpectrum as ModelSpectrum
from ..analysis.model_spectrum import model_spectrum as model_spectrum
from ..errors import MesadynError
from ..outcome import Outcome
from ..progress import ProgressCallback

if TYPE_CHECKING:
    import numpy as np

    from ..analysis.model_fixedpoint import ModelCurvature, ModelNewton
    from ..field import Field
    from ..models import Model

__all__ = ["HANDOFF_SHRINK", "JACOBIAN_UPDATES", "MODEL_SOLVER", "MODEL_SOLVERS",
           "NEWTON_HANDOFF", "NEWTON_MAX_HESSIANS", "JacobianKind", "ModelPath", "ModelSpectrum",
           "ModelSteady", "model_flow", "model_spectrum", "model_steady"]

#: The solver of a model's flow (``solver="auto"``).
MODEL_SOLVER = "BDF"
#: The SciPy methods a model's flow takes (``solver=``; ``scipy:`` prefixes are accepted).
MODEL_SOLVERS = ("BDF", "Radau", "LSODA", "RK45", "DOP853")
#: The implicit ones, given the exact Hessian of the free entries as their Jacobian.
IMPLICIT = frozenset({"BDF", "Radau", "LSODA"})


class JacobianKind(enum.StrEnum):
    """Where an implicit model flow gets its Jacobian ``−∇²L`` over the free entries.

    ``exact``: :meth:`Field.hessian` (with a basis, ``m`` Hessian-vector products);
    ``differences``: central differences of the gradient, two gradients per free entry (per
    basis column), :func:`mesadyn.analysis.model_fixedpoint.difference_hessian`.  The Jacobian
    only drives the implicit solver's Newton iteration (the error control sets the accuracy of
    the path), and a direct-form field's gradient is far cheaper than its Hessian: at d = 3,
    T = 20 (two layers, 2000 sequences, one thread) a gradient costs 0.024 CPU-s through the
    fused kernel, an exact Hessian 88 CPU-s, a difference Jacobian about 10.  Forward
    differences (half the gradients) are not enough: their ``O(√ε)`` error, times third
    derivatives as stiff as the Hessian, kept BDF from converging to a saddle of the
    two-layer exact loss at d = 1, T = 4 (216 Jacobians to τ = 10⁴, where central differences
    and the exact Hessian both take 16).  ``updated``: central differences, and between two
    of them at most :data:`JACOBIAN_UPDATES` updates along the directions the path took
    last (:class:`_UpdatedJacobian`); measured at d = 2, T = 6 (Monte-Carlo, 300 sequences,
    rtol 1e-6): 11 800 gradients to ``max|∇L| < 1e-8`` in all, against 17 900 with
    ``differences`` (89 full Jacobians against 34 and 243 updates), to the same point.
    """

    EXACT = "exact"
    DIFFERENCES = "differences"
    UPDATED = "updated"


#: Updates of an ``updated`` Jacobian between two full ones (:class:`JacobianKind`).
JACOBIAN_UPDATES = 8
#: The recent evaluations whose differences (and the last gradient) span an update.
UPDATE_DIRECTIONS = 6


class _UpdatedJacobian:
    """The ``updated`` Jacobian of :class:`JacobianKind` in the flow's coordinates ``y``.

    BDF asks for a Jacobian when its Newton iteration fails to converge with the one it has.
    A full one is central differences of the gradient; otherwise the last one, ``A``, is
    corrected on the span ``U`` (orthonormal) of the steps between the last evaluations and of
    the last gradient, with ``HU`` by central differences (two gradients per direction):
    ``A + S Uᵀ + U Sᵀ − U (Uᵀ S) Uᵀ``, ``S = HU − AU`` — symmetric, exact on ``U``, ``A``
    elsewhere.  A full one follows a second request at the same τ (the update did not help)
    and every :data:`JACOBIAN_UPDATES` updates.
    """

    def __init__(self, embed: Any, project: Any, full: Any, gradient: Any) -> None:
        self.embed, self.project, self.full, self.gradient = embed, project, full, gradient
        self.H: np.ndarray | None = None
        self.t: float | None = None
        self.updates = 0
        self.recent: list[tuple[np.ndarray, np.ndarray]] = []

    def seen(self, y: np.ndarray, g: np.ndarray) -> None:
        """Record an evaluation of the flow (coordinates and gradient)."""
        self.recent = [*self.recent[-UPDATE_DIRECTIONS:], (y.copy(), g)]

    def __call__(self, t: float, y: np.ndarray) -> np.ndarray:
        import numpy as np

        from ..analysis.model_fixedpoint import difference_hvp

        th = self.full(y)
        if self.H is None or t == self.t or self.updates >= JACOBIAN_UPDATES:
            H = self.project(difference_hvp(self.gradient, th, self.embed(np.eye(y.size))))
            self.updates = 0
        else:
            ys = [y] + [p for p, _ in reversed(self.recent)]
            D = np.stack([a - b for a, b in zip(ys, ys[1:], strict=False)]
                         + [self.recent[-1][1]], axis=1)
            Q, R = np.linalg.qr(D)
            r = np.abs(np.diag(R))
            U = Q[:, r > 1e-8 * r.max()] if r.max() > 0 else Q[:, :0]
            S = self.project(difference_hvp(self.gradient, th, self.embed(U))) - self.H @ U
            C = U.T @ S
            H = self.H + S @ U.T + U @ S.T - U @ (0.5 * (C + C.T)) @ U.T
            self.updates += 1
        self.H, self.t = 0.5 * (H + H.T), t
        return self.H


class _Stop(Exception):
    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


def check_model_solver(solver: str) -> str:
    """The SciPy method a model's flow runs (``auto``: :data:`MODEL_SOLVER`).

    Raises:
        MesadynError: a solver the model flow does not take (named, with the choices).
    """
    name = str(solver).removeprefix("scipy:")
    if name == "auto":
        return MODEL_SOLVER
    if name not in MODEL_SOLVERS:
        raise MesadynError(f"solver {solver!r} does not run a model other than the paper's; "
                           f"choose auto, {', '.join(MODEL_SOLVERS)}")
    return name


@dataclass(frozen=True)
class ModelPath:
    """A model's flow: the evaluated points in increasing τ (at most ``n_save`` kept, the last
    always), their loss and ``max|∇L|`` over the free entries; the outcome, the gradient
    and Jacobian evaluations (``nfev``, ``njev``; ``jacobian_gradients`` the gradients the
    difference Jacobians took) and the wall time; with a basis, its dimension ``subspace``
    and the largest gradient entry off it at any evaluation (``leak``)."""

    t: np.ndarray
    theta: np.ndarray
    loss: np.ndarray
    grad_max: np.ndarray
    status: Outcome
    message: str
    nfev: int
    njev: int
    solver: str
    wall_s: float
    subspace: int | None = None
    leak: float | None = None
    jacobian: JacobianKind = JacobianKind.EXACT
    jacobian_gradients: int = 0

    @property
    def final(self) -> np.ndarray:
        import numpy as np

        return np.asarray(self.theta[-1])


def model_flow(fld: Field, theta0: Any, free: np.ndarray, *, t_end: float, solver: str,
               rtol: float, atol: float, steady_tol: float, max_steps: int, n_save: int,
               basis: np.ndarray | None = None,
               progress: ProgressCallback | None = None,
               jacobian: JacobianKind | str = JacobianKind.EXACT,
               t0: float = 0.0,
               on_steady: Callable[[float, np.ndarray, float, float], float] | None = None
               ) -> ModelPath:
    """``dθ/dτ = −∇L`` of ``fld`` from ``theta0`` at τ = ``t0`` over the entries ``free``
    (module docstring).

    ``max_steps`` bounds the gradient evaluations of the path (a difference Jacobian's are
    counted apart, in ``jacobian_gradients``); ``steady_tol = 0`` runs to ``t_end``.
    The implicit solvers get ``−∇²L`` over the free entries as their Jacobian
    (:class:`JacobianKind`: :meth:`Field.hessian`, or forward differences of the gradient);
    ``nfev`` counts gradients, ``njev`` Jacobians.  ``basis`` (n × m, orthonormal columns
    supported on ``free``, with ``theta0``'s free part in their span): the flow of
    ``y = basisᵀ θ``, the Jacobian ``−basisᵀ ∇²L basis`` by ``m`` Hessian-vector products
    (or ``m`` directional differences).  ``on_steady(τ, θ, L, max|∇L|)``, called at an
    evaluated θ below the steady-state level, decides: a value ``<= 0`` stops the flow there,
    a positive one is the level it goes on to (:func:`model_steady` hands θ to Newton so).

    Raises:
        MesadynError: a basis of the wrong shape, off the free entries, or not spanning
            ``theta0``'s free part.
    """
    import numpy as np
    import torch
    from scipy.integrate import solve_ivp

    from ..analysis.model_fixedpoint import difference_hessian

    method = check_model_solver(solver)
    kind = JacobianKind(jacobian)
    base = np.array(theta0, dtype=np.float64)
    idx = np.flatnonzero(free)
    P = None if basis is None else _check_basis(basis, base, free)
    rec_t: list[float] = []
    rec: list[tuple[np.ndarray, float, float]] = []
    count = [0, 0, 0]
    leak = [0.0]
    level = [float(steady_tol)]
    fixed = base.copy()
    fixed[idx] = 0.0

    def full(y: np.ndarray) -> np.ndarray:
        if P is not None:
            return fixed + P @ y
        th = base.copy()
        th[idx] = y
        return th

    def fun(t: float, y: np.ndarray) -> np.ndarray:
        count[0] += 1
        th = full(y)
        L, g = fld.loss_and_grad(torch.from_numpy(th))
        g_all = g.detach().cpu().numpy()
        gf = g_all[idx]
        gmax = float(np.abs(gf).max())
        if P is not None:
            g_sub = P.T @ g_all
            leak[0] = max(leak[0], float(np.abs(gf - (P @ g_sub)[idx]).max()))
        if not (np.isfinite(gf).all() and np.isfinite(float(L))):
            raise _Stop(Outcome.DIVERGED, f"the gradient is not finite at τ={t:.6g}")
        if not rec_t or t > rec_t[-1]:
            rec_t.append(float(t))
            rec.append((th, float(L), gmax))
        if level[0] > 0 and gmax < level[0]:
            new = 0.0 if on_steady is None else on_steady(float(t), th, float(L), gmax)
            if new <= 0:
                rec_t.append(float(t))
                rec.append((th, float(L), gmax))
                raise _Stop(Outcome.CONVERGED, f"max|∇L| = {gmax:.3g} < steady_tol "
                                               f"{level[0]:.3g} at τ={t:.6g}")
            level[0] = new
        if count[0] >= max_steps:
            raise _Stop(Outcome.MAX_STEPS, f"{max_steps} gradient evaluations (max_steps) "
                                           f"reached at τ={t:.6g}")
        if progress is not None:
            progress(float(t))
        if kind is JacobianKind.UPDATED:
            updated.seen(y, gf if P is None else g_sub)
        return -gf if P is None else -g_sub

    def gradient(th: np.ndarray) -> np.ndarray:
        count[2] += 1
        g = fld.loss_and_grad(torch.from_numpy(th))[1].detach().cpu().numpy()
        if not np.isfinite(g).all():
            raise _Stop(Outcome.DIVERGED, "the gradient is not finite in a difference Jacobian")
        return np.asarray(g)

    def embed(U: np.ndarray) -> np.ndarray:
        if P is not None:
            return P @ U
        V = np.zeros((base.size, U.shape[1]))
        V[idx] = U
        return V

    def project(G: np.ndarray) -> np.ndarray:
        return G[idx] if P is None else P.T @ G

    updated = _UpdatedJacobian(embed, project, full, gradient)

    def jac(t: float, y: np.ndarray) -> np.ndarray:
        count[1] += 1
        if kind is JacobianKind.UPDATED:
            return -updated(t, y)
        if kind is JacobianKind.DIFFERENCES:
            return -difference_hessian(gradient, full(y), free, basis=P)
        th = torch.from_numpy(full(y))
        if P is not None:
            HP = fld.batched_hvp(th, torch.from_numpy(np.ascontiguousarray(P.T)))
            J = P.T @ HP.detach().cpu().numpy().T
            return -0.5 * (J + J.T)
        H = fld.hessian(th).detach().cpu().numpy()
        return -H[np.ix_(idx, idx)]

    start = time.perf_counter()
    extra = {"jac": jac} if method in IMPLICIT else {}
    y0 = base[idx] if P is None else P.T @ base
    try:
        sol = solve_ivp(fun, (float(t0), float(t_end)), y0, method=method, rtol=rtol,
                        atol=atol, **extra)
    except _Stop as stop:
        status, message = stop.outcome, stop.message
    else:
        if sol.status == 0:
            th = full(sol.y[:, -1])
            L, g = fld.loss_and_grad(torch.from_numpy(th))
            gmax = float(np.abs(g.detach().cpu().numpy()[idx]).max())
            rec_t.append(float(sol.t[-1]))
            rec.append((th, float(L), gmax))
            status = Outcome.T_END
            message = f"reached t_end={t_end:.6g} with max|∇L| = {gmax:.3g}"
        else:
            status, message = Outcome.STEP_FAILED, f"{method}: {sol.message}"
    wall = time.perf_counter() - start
    if not rec:
        raise MesadynError(f"the {method} flow evaluated no point ({message})")
    keep = np.unique(np.linspace(0, len(rec) - 1, min(n_save, len(rec))).round().astype(int))
    return ModelPath(t=np.asarray(rec_t)[keep], theta=np.stack([rec[i][0] for i in keep]),
                     loss=np.asarray([rec[i][1] for i in keep]),
                     grad_max=np.asarray([rec[i][2] for i in keep]), status=status,
                     message=message, nfev=count[0], njev=count[1], solver=f"scipy:{method}",
                     wall_s=wall, subspace=None if P is None else int(P.shape[1]),
                     leak=None if P is None else leak[0], jacobian=kind,
                     jacobian_gradients=count[2])


#: Where a model's steady flow (:func:`model_steady`) first offers its point to Newton: the
#: first evaluated θ with ``max|∇L|`` below this (or ``steady_tol``, if larger).  Measured for
#: two layers on Monte-Carlo fields from ``(0.5, 1.5)`` (rtol 1e-6): at d = 2, T = 6 (300
#: sequences) the flow passes its last saddle by ``max|∇L| ≈ 1e-2`` and is a minimum across
#: the orbits from ``≈ 2e-4``, but Newton converges without damping only from ``≈ 1e-6`` (the
#: smallest curvature, 0.011, is 2e-6 of the largest); at d = 3, T = 20 (2000 sequences) Newton
#: took the handoff at τ = 76 (9.3e-5) to 1.8e-10 in 4 steps on one Hessian, where the flow
#: alone, continued, reaches 6.9e-10 at τ = 172 — the same loss (to 2e-15), θ off the
#: symmetry orbit by 5.5e-9.
NEWTON_HANDOFF = 1e-4
#: A declined handoff (negative curvature there, or a Newton iteration that needed damping)
#: lowers the handoff level by this factor for the next leg of the flow.
HANDOFF_SHRINK = 1e-2
#: Newton's Hessians per handoff: an accepted handoff took one or two (two layers, d = 1, 2);
#: a declined one costs at most this many.
NEWTON_MAX_HESSIANS = 4


@dataclass(frozen=True)
class ModelSteady:
    """A model's flow to its fixed point (:func:`model_steady`): the flow (``path``, its legs
    joined), where it stopped (``t_flow``, ``flow_grad_max``), Newton's polish from there
    (``newton``; ``None`` when the flow itself reached ``steady_tol``), the end point
    (``theta``, ``loss``, ``grad_max``), its curvature across the symmetry orbits
    (``curvature``, from the exact Hessian ``hessian`` (n × n) where the field has one), the
    handoffs declined and why; every gradient (flow, difference Jacobians, Newton), the exact
    Hessians and the flow's Jacobians; wall and CPU seconds."""

    path: ModelPath
    theta: np.ndarray
    loss: float
    grad_max: float
    status: Outcome
    message: str
    t_flow: float
    flow_grad_max: float
    newton: ModelNewton | None
    curvature: ModelCurvature | None
    declined: list[str]
    gradients: int
    hessians: int
    jacobians: int
    wall_s: float
    cpu_s: float
    hessian: np.ndarray | None = None


def model_steady(fld: Field, model: Model, theta0: Any, free: np.ndarray, *, t_end: float,
                 solver: str, rtol: float, atol: float, steady_tol: float, max_steps: int,
                 n_save: int, basis: np.ndarray | None = None,
                 progress: ProgressCallback | None = None,
                 jacobian: JacobianKind | str = JacobianKind.UPDATED,
                 handoff: float = NEWTON_HANDOFF) -> ModelSteady:
    """The flow from ``theta0`` to its fixed point: the flow decides the basin, Newton
    polishes.

    The flow (:func:`model_flow`, one integration) offers the first θ it evaluates with
    ``max|∇L| <`` ``handoff`` to Newton (:func:`~mesadyn.analysis.model_fixedpoint.
    newton_polish`: steps across the symmetry orbits, its matrix of the flow's
    :class:`JacobianKind`, exact or central differences, at most :data:`NEWTON_MAX_HESSIANS`),
    which takes it to ``max|∇L| <= steady_tol``.  The handoff is declined where Newton could
    land elsewhere than the flow: negative curvature across the orbits at the handoff or at any
    of Newton's Hessians (a saddle nearby), no convergence, a higher loss, or an end that is
    not a minimum; the flow then goes on, and offers its point again below a level lowered by
    :data:`HANDOFF_SHRINK`.  A flow that converges to a saddle gets there by itself.  The end
    point's curvature (:func:`~mesadyn.analysis.model_fixedpoint.curvature_verdict`, from the
    exact Hessian where the field has one) decides ``converged`` or ``saddle``.
    ``handoff <= steady_tol`` runs the flow alone; ``steady_tol = 0`` runs it to ``t_end``.
    """
    import numpy as np
    import torch

    from ..analysis.model_fixedpoint import (
        curvature_verdict,
        difference_hessian,
        free_hessian,
        newton_polish,
    )

    start, cpu0 = time.perf_counter(), time.process_time()
    kind = JacobianKind(jacobian)
    extra = {"gradients": 0, "hessians": 0}
    declined: list[str] = []
    found: list[tuple[ModelNewton, ModelCurvature]] = []
    exact: list[np.ndarray] = []

    def gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
        extra["gradients"] += 1
        L, g = fld.loss_and_grad(torch.from_numpy(x))
        return float(L), np.asarray(g.detach().cpu().numpy(), np.float64)

    def hessian(x: np.ndarray) -> np.ndarray:
        if kind is JacobianKind.EXACT:
            extra["hessians"] += 1
            return free_hessian(fld, x, free)
        return difference_hessian(lambda y: gradient(y)[1], x, free)

    def verdict(x: np.ndarray) -> ModelCurvature:
        if not fld.has_exact_hessian:
            return curvature_verdict(fld, model, x, free, hessian=hessian(x))
        extra["hessians"] += 1
        H = fld.hessian(torch.from_numpy(x)).detach().cpu().numpy()
        exact[:] = [H]
        Hf = H[np.ix_(free, free)]
        return curvature_verdict(fld, model, x, free, hessian=0.5 * (Hf + Hf.T))

    def on_steady(t: float, th: np.ndarray, L: float, gmax: float) -> float:
        if gmax < steady_tol:
            return 0.0
        where = f"at τ={t:.6g} (max|∇L| = {gmax:.3g})"
        H = hessian(th)
        first = curvature_verdict(fld, model, th, free, hessian=H)
        why: str | None = f"negative curvature {where}: {first.describe()}"
        if not first.saddle:
            newton = newton_polish(fld, model, th, free, tol=steady_tol, hessian=H,
                                   hessian_fn=hessian, max_hessians=NEWTON_MAX_HESSIANS,
                                   grad=gradient)
            why = _declined(newton, L, where)
            if why is None:
                assert newton.theta is not None
                end = verdict(newton.theta)
                if not end.saddle:
                    found.append((newton, end))
                    return 0.0
                why = f"Newton {where} ended at a saddle"
        declined.append(str(why))
        return max(steady_tol, gmax * HANDOFF_SHRINK)

    level = max(handoff, steady_tol) if steady_tol > 0 else 0.0
    path = model_flow(fld, theta0, free, t_end=t_end, solver=solver, rtol=rtol, atol=atol,
                      steady_tol=level, max_steps=max_steps, n_save=n_save, basis=basis,
                      progress=progress, jacobian=kind,
                      on_steady=on_steady if level > steady_tol else None)
    newton, curvature = found[0] if found else (None, None)
    status = path.status
    if status is Outcome.CONVERGED and curvature is None:
        curvature = verdict(path.final)
    if status is Outcome.CONVERGED and curvature is not None:
        status = curvature.outcome
    final = newton.theta if newton is not None and newton.theta is not None else path.final
    loss, grad_max = ((newton.loss, newton.residual) if newton is not None
                      else (float(path.loss[-1]), float(path.grad_max[-1])))
    parts = [path.message]
    if newton is not None:
        parts = [f"the flow handed θ to Newton at τ={float(path.t[-1]):.6g} (max|∇L| = "
                 f"{float(path.grad_max[-1]):.3g} < {handoff:.3g})",
                 f"Newton: {newton.iterations} steps, max|∇L| {newton.residuals[0]:.3g} -> "
                 f"{newton.residual:.3g} <= steady_tol {steady_tol:.3g}"]
    if curvature is not None:
        parts.append(curvature.describe())
    return ModelSteady(
        path=path, theta=np.asarray(final), loss=float(loss), grad_max=float(grad_max),
        status=status, message="; ".join(parts), t_flow=float(path.t[-1]),
        flow_grad_max=float(path.grad_max[-1]), newton=newton, curvature=curvature,
        declined=declined,
        gradients=path.nfev + path.jacobian_gradients + extra["gradients"],
        hessians=extra["hessians"] + (path.njev if path.jacobian is JacobianKind.EXACT
                                      else 0),
        jacobians=path.njev, wall_s=time.perf_counter() - start,
        cpu_s=time.process_time() - cpu0,
        hessian=exact[0] if exact and curvature is not None else None)


def _declined(newton: ModelNewton, loss: float, where: str) -> str | None:
    """Why Newton's end is not taken for the flow's (:func:`model_steady`), or ``None``."""
    if not newton.converged:
        return f"Newton {where} stopped: {newton.message}"
    if newton.saddles_seen:
        return f"Newton {where} met negative curvature on its way"
    if newton.loss > loss + 1e-12 * max(1.0, abs(loss)):
        return f"Newton {where} raised the loss to {newton.loss:.12g}"
    return None


def _check_basis(basis: Any, theta0: np.ndarray, free: np.ndarray) -> np.ndarray:
    """``basis`` as float64 (n × m), checked: supported on ``free``, orthonormal columns,
    ``theta0``'s free part in their span (to 1e-12 of its size)."""
    import numpy as np

    P = np.asarray(basis, dtype=np.float64)
    n = theta0.shape[0]
    if P.ndim != 2 or P.shape[0] != n or P.shape[1] == 0:
        raise MesadynError(f"basis must have shape ({n}, m) with m >= 1, got {P.shape}")
    if np.abs(P[~free]).max(initial=0.0) > 0:
        raise MesadynError("basis has entries off the free entries of θ")
    if np.abs(P.T @ P - np.eye(P.shape[1])).max() > 1e-12:
        raise MesadynError("basis columns are not orthonormal")
    part = np.where(free, theta0, 0.0)
    off = float(np.abs(part - P @ (P.T @ part)).max())
    if off > 1e-12 * max(1.0, float(np.abs(part).max())):
        raise MesadynError(f"θ0 is not in the span of the basis (largest entry off it {off:.3g})")
    return P

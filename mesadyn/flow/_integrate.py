"""The two entry points: :func:`integrate` (any field) and :func:`integrate_reduced`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_finite
from ..model import MaskLike
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..reduced import ReducedSystem
from ._driver import run, thin
from ._options import DEFAULT_MAX_STEPS, FlowOptions
from ._problem import FieldProblem, ReducedProblem
from ._results import FlowResult, ReducedFlowResult, SolverStats, stiffness
from ._solvers import AUTO, FULL_FLOW_SOLVER, Backend, Solver, default_solver, resolve_solver

if TYPE_CHECKING:
    import torch

    from ..field import Field


def _resolve(name: str, auto: str, *, reduced: bool) -> Solver:
    solver = resolve_solver(auto if name == AUTO else name)
    if solver.backend is Backend.closed_form and not reduced:
        raise MesadynError(f"solver {name!r} is the reduced system's closed form "
                           "(integrate_reduced); the full flow needs an ODE solver, e.g. "
                           f"{FULL_FLOW_SOLVER}")
    if solver.backend is Backend.diffrax:
        from ._diffrax import import_diffrax

        import_diffrax()  # the missing extra is bad input: fail before any work
    return solver


def _has_exact_hessian(field: Field) -> bool:
    """Whether the field's Hessian is exact and cheap (the stiffness ratio's default)."""
    return field.has_exact_hessian


def integrate(field: Field, theta0: torch.Tensor | npt.ArrayLike, *, t_end: float = 1.0,
              solver: str = FULL_FLOW_SOLVER, rtol: float = 1e-8, atol: float = 1e-10,
              t_eval: npt.ArrayLike | None = None, n_save: int = 200,
              max_steps: int | None = None, mask: MaskLike = None,
              steady_tol: float | None = 1e-10, progress: ProgressCallback | None = None,
              compute_stiffness: bool | None = None,
              device: torch.device | str | None = None) -> FlowResult:
    """Integrate the gradient flow ``dθ/dτ = −∇L(θ)`` (Eq. 2), masked, from ``theta0``.

    Only the entries that reach ŷ (Eq. 1) and lie in ``mask`` are integrated (the field's
    model's :meth:`~mesadyn.models.Model.free_mask`); every other entry has zero (or masked)
    gradient and keeps its initial value exactly.  Implicit solvers get the exact Jacobian
    ``−∇²L`` restricted to the integrated entries.

    # Arguments
    - `field`: any :class:`~mesadyn.field.Field` (exact, Monte-Carlo, finite-sample).
    - `theta0`: the start, a flat θ of the field's model (length 18d² for the paper's).
    - `t_end`: the horizon τ.
    - `solver`: a solver id (``scipy:LSODA``, ``torchdiffeq:dopri5``, ``diffrax:Dopri5``, …, or
      a bare alias such as ``dopri5``), or ``"auto"`` (:func:`default_solver`).
    - `rtol`, `atol`, `max_steps`, `steady_tol`, `t_eval`, `n_save`: see :class:`FlowOptions`
      (``steady_tol``: stop when max|∇L| over the free entries is below it; 0/None: never).
    - `mask`: ``None``/``"none"``, ``"diagonal"`` (Theorem 4.3) or a boolean array.
    - `progress`: called with τ after every accepted step (not for diffrax).
    - `compute_stiffness`: the Hessian's eigenvalues and stiffness ratio at the end point
      (default: when the field declares an exact, cheap Hessian, ``has_exact_hessian``).
    - `device`: where θ, the state and ``−∇L`` live during the solve (default: the field's own,
      ``field.device`` for the exact, sampled and sequence fields, else the CPU).  With a
      torchdiffeq solver the whole solve stays there and only the saved points come to the
      host; scipy and diffrax solvers are host solvers and copy the state to the device and
      back at each evaluation.  The result is on the host (numpy) whatever the device.

    # Returns
    A :class:`FlowResult`; how the run stopped is its `status` (a failed solve is a result with
    ``Outcome.FAILED`` and a message, not an exception).

    # Raises
    `MesadynError` for bad input (unknown solver or mask, bad options, a θ of the wrong size).
    """
    import torch

    sol = _resolve(solver, default_solver(reduced=False), reduced=False)
    options = _options(t_end, rtol, atol, max_steps, steady_tol, t_eval, n_save)
    theta = field.check_theta(torch.as_tensor(theta0, dtype=torch.float64))
    prob = FieldProblem(field, theta, field.model.free_mask(mask, field.d), device=device)
    start = time.perf_counter()
    raw = run(prob, sol, options, progress)
    wall = time.perf_counter() - start
    if options.t_eval is None:
        raw = thin(raw, options.n_save)
    nfev, njev = prob.nfev, prob.njev
    thetas = np.repeat(prob.theta0.cpu().numpy()[None, :], len(raw.t), axis=0)
    thetas[:, prob.free] = raw.y
    losses, gmax = np.empty(len(raw.t)), np.empty(len(raw.t))
    with np.errstate(all="ignore"):  # a failed flow's values may overflow: they are data
        for k, y in enumerate(raw.y):
            losses[k], gmax[k] = prob.monitor(y)
    inv = np.asarray(field.model.invariant(thetas), dtype=np.float64)
    status, message = raw.status, raw.message
    steady = options.steady_tol
    if status is Outcome.T_END and steady > 0 and gmax[-1] < steady:
        status, message = Outcome.CONVERGED, message + f"; max|∇L| < {steady:.3g} there"
    ratio: float | None = None
    eigs: npt.NDArray[np.float64] | None = None
    if compute_stiffness is None:
        compute_stiffness = field.has_exact_hessian
    if compute_stiffness and np.isfinite(raw.y[-1]).all():
        with np.errstate(all="ignore"):
            H = prob.hessian_free(raw.y[-1])
        if np.isfinite(H).all():  # an overflowing end point has no spectrum (data: None)
            eigs = np.linalg.eigvalsh(H).astype(np.float64)
            ratio = stiffness(eigs)
    stats = SolverStats(nfev=nfev, njev=njev, n_accepted=raw.n_accepted,
                        n_rejected=raw.n_rejected, n_monitor=prob.n_monitor, wall_s=wall)
    return FlowResult(
        t=raw.t, theta=thetas, loss=losses, grad_max=gmax, invariant=inv, solver_stats=stats,
        status=status, message=message, solver=sol.method, backend=sol.backend.value,
        mask=prob.mask, free=prob.free, rtol=options.rtol, atol=options.atol,
        stiffness_ratio=ratio, hessian_eigenvalues=eigs, field=field.describe())


def integrate_reduced(system: ReducedSystem, a0: float, b0: float, *, t_end: float = 1.0,
                      solver: str = AUTO, rtol: float = 1e-8, atol: float = 1e-10,
                      t_eval: npt.ArrayLike | None = None, n_save: int = 200,
                      max_steps: int | None = None, steady_tol: float | None = None,
                      progress: ProgressCallback | None = None) -> ReducedFlowResult:
    """Lemma 5.2's flow ``(ȧ, ḃ)`` from ``(a0, b0)``: by its closed form, or integrated
    numerically and compared with it.

    ``solver="auto"`` (:func:`default_solver`) and ``"closed_form"`` evaluate the exact
    solution (:meth:`ReducedSystem.solution`) at the saved times (``n_save`` evenly spaced
    times, or ``0``, ``t_eval`` and ``t_end``) — no ODE solve, no torch or scipy import; the
    outcome is ``converged`` when the end point passes the steady-state test, as for a full
    flow, else ``t_end``.  Any ODE solver of :func:`integrate` may be named instead (implicit
    ones get the exact Jacobian); those are the closed form's test.

    # Returns
    A :class:`ReducedFlowResult` with the closed form at the saved times (for the closed form
    itself ``a_exact`` is ``a`` and ``backend`` is ``"closed_form"``).

    # Raises
    `MesadynError` for bad input.
    """
    a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
    options = _options(t_end, rtol, atol, max_steps, steady_tol, t_eval, n_save)
    sol = _resolve(solver, default_solver(reduced=True), reduced=True)
    if sol.backend is Backend.closed_form:
        from ._closed_form import solve_closed_form

        return solve_closed_form(system, a0, b0, options, progress)
    prob = ReducedProblem(system, a0, b0)
    start = time.perf_counter()
    raw = run(prob, sol, options, progress)
    wall = time.perf_counter() - start
    if options.t_eval is None:
        raw = thin(raw, options.n_save)
    a_ex, b_ex = system.solution(a0, b0, raw.t)
    a, b = raw.y[:, 0], raw.y[:, 1]
    da, db = system.rhs(a, b)
    stats = SolverStats(nfev=prob.nfev, njev=prob.njev, n_accepted=raw.n_accepted,
                        n_rejected=raw.n_rejected, n_monitor=None, wall_s=wall)
    return ReducedFlowResult(
        t=raw.t, a=a.copy(), b=b.copy(), a_exact=np.asarray(a_ex), b_exact=np.asarray(b_ex),
        loss=np.asarray(system.surrogate(a, b)), grad_max=np.maximum(np.abs(da), np.abs(db)),
        solver_stats=stats, status=raw.status, message=raw.message, solver=sol.method,
        backend=sol.backend.value, c1=system.c1, c2=system.c2)


def _options(t_end: float, rtol: float, atol: float, max_steps: int | None,
             steady_tol: float | None, t_eval: npt.ArrayLike | None, n_save: int) -> FlowOptions:
    grid: tuple[float, ...] | None = None
    if t_eval is not None:
        try:
            grid = tuple(np.asarray(t_eval, dtype=np.float64).ravel().tolist())
        except (TypeError, ValueError):
            raise MesadynError(f"t_eval must be numbers, got {t_eval!r}") from None
    return FlowOptions(t_end=t_end, rtol=rtol, atol=atol,
                       max_steps=DEFAULT_MAX_STEPS if max_steps is None else max_steps,
                       steady_tol=0.0 if steady_tol is None else steady_tol, t_eval=grid,
                       n_save=n_save)

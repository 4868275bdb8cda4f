"""The driver: step a :class:`Stepper` to ``t_end``, the steady state, ``max_steps`` or a
failure; save points; thin them.  Dispatches to the backend of a resolved :class:`Solver`."""

from __future__ import annotations

import numpy as np

from ..outcome import Outcome
from ..progress import ProgressCallback
from ._options import FlowOptions
from ._problem import Problem
from ._solvers import Backend, Solver
from ._stepper import RawSolution, Stepper


def stepper_for(problem: Problem, solver: Solver, options: FlowOptions) -> Stepper:
    """The :class:`Stepper` of a step-by-step backend (scipy, torchdiffeq)."""
    if solver.backend is Backend.torchdiffeq:
        from ._torchdiffeq import TorchdiffeqStepper

        return TorchdiffeqStepper(problem, solver.method, options)
    from ._scipy import ScipyStepper

    return ScipyStepper(problem, solver.method, options)


def run(problem: Problem, solver: Solver, options: FlowOptions,
        progress: ProgressCallback | None = None) -> RawSolution:
    """Integrate ``problem`` with ``solver`` (diffrax: one solve; else :func:`drive`).

    A start whose loss or gradient is not finite fails at once (``failed``), before any
    stepper picks a first step from it (a NaN step size never underflows, and a start whose
    loss overflows takes steps below any spacing of τ).

    # Raises
    `MesadynError` for the closed form, which is no ODE solver (see ``integrate_reduced``).
    """
    if solver.backend is Backend.closed_form:
        from ..errors import MesadynError

        raise MesadynError("the closed form is evaluated by integrate_reduced, not stepped")
    with np.errstate(all="ignore"):
        loss0, g0 = problem.monitor(problem.y0)
    if not (np.isfinite(loss0) and np.isfinite(g0)):  # no stepper can choose a first step
        return RawSolution(np.array([0.0]), problem.y0[None, :].copy(), 0, 0, Outcome.FAILED,
                           f"the loss or its gradient at τ=0 is not finite (L = {loss0:.3g}, "
                           f"max|∇L| = {g0:.3g}): the start is so large that they overflow; "
                           "nothing was integrated")
    if solver.backend is Backend.diffrax:
        from ._diffrax import solve

        return solve(problem, solver.method, solver.implicit, options)
    return drive(stepper_for(problem, solver, options), problem, options, progress)


def drive(stepper: Stepper, problem: Problem, options: FlowOptions,
          progress: ProgressCallback | None = None) -> RawSolution:
    """Step until τ = t_end, the steady state (max|∇L| < steady_tol), max steps or a failure.

    Saved points: ``t_eval`` (within the run), else every accepted step; always the end point.
    ``progress`` is called with τ after every accepted step.  Only the saved points come to the
    host; the steady-state monitor reads :attr:`Stepper.state` where the solver keeps it (on the
    device for torchdiffeq) and gets two Python floats back.
    """
    t_end, steady_tol, max_steps = options.t_end, options.steady_tol, options.max_steps
    t_eval = options.t_eval_array
    ts: list[float] = [0.0]
    ys: list[np.ndarray] = [problem.y0.copy()]
    nxt = 1 if t_eval is not None and t_eval[0] == 0.0 else 0
    status, message = Outcome.FAILED, ""
    if steady_tol > 0 and problem.monitor(stepper.state)[1] < steady_tol:
        return RawSolution(np.array(ts), np.array(ys), 0, 0, Outcome.CONVERGED,
                           "steady state at τ=0")
    while True:
        if stepper.n_accepted >= max_steps:
            status = Outcome.MAX_STEPS
            message = f"hit max_steps={max_steps} at τ={stepper.t:.6g} < t_end={t_end:.6g}"
            break
        failure = stepper.step()
        if failure is not None:
            status, message = Outcome.FAILED, failure
            break
        t_new = stepper.t
        if t_eval is not None:
            j = int(np.searchsorted(t_eval, min(t_new, t_end), side="right"))
            if j > nxt:
                pts = t_eval[nxt:j]
                ts.extend(pts.tolist())
                ys.extend(list(stepper.interp(pts)))
                nxt = j
        if t_new >= t_end:
            status, message = Outcome.T_END, f"reached t_end={t_end:.6g}"
            break
        if t_eval is None:
            ts.append(t_new)
            ys.append(stepper.y.copy())
        if progress is not None:
            progress(t_new)
        if steady_tol > 0 and problem.monitor(stepper.state)[1] < steady_tol:
            status = Outcome.CONVERGED
            message = f"max|∇L| < steady_tol={steady_tol:.3g} at τ={t_new:.6g}"
            break
    t_last = min(stepper.t, t_end)
    if ts[-1] != t_last:  # the end point (event, max steps, failure, or t_end off the grid)
        ts.append(t_last)
        ys.append(stepper.interp(np.array([t_end]))[0] if stepper.t > t_end
                  else stepper.y.copy())
    return RawSolution(np.array(ts), np.array(ys), stepper.n_accepted, stepper.n_rejected,
                       status, message)


def thin(raw: RawSolution, n_save: int) -> RawSolution:
    """Keep at most ``n_save`` saved points (evenly by index, first and last kept)."""
    n = len(raw.t)
    if n_save >= n:
        return raw
    idx = np.unique(np.round(np.linspace(0, n - 1, n_save)).astype(int))
    return RawSolution(raw.t[idx], raw.y[idx], raw.n_accepted, raw.n_rejected, raw.status,
                       raw.message)

"""The reduced system solved by its closed form: Lemma 5.2's exact ``(a(τ), b(τ))``
(:meth:`mesadyn.reduced.ReducedSystem.solution`) evaluated at the saved times, no ODE solve.

It returns the :class:`~mesadyn.flow.ReducedFlowResult` of an ODE solve, so a caller cannot
tell the two apart but by its ``backend`` (``"closed_form"``): ``a_exact`` is ``a`` itself
(``closed_form_max_error`` is 0), ``nfev`` counts the closed form's evaluations (one per saved
time), no steps are taken (``n_accepted = n_rejected = 0``).  The outcome follows the full
flow's rule: ``converged`` when the end point passes the steady-state test
``max|∇ℓ̃| < steady_tol`` (a flow that reached its fixed point), else ``t_end``.  The ODE
solvers stay selectable and are the closed form's test (``tests/flow/test_flow_closed_form.py``).
"""

from __future__ import annotations

import time

import numpy as np

from ..outcome import Outcome
from ..progress import ProgressCallback
from ..reduced import ReducedSystem
from ._options import FlowOptions
from ._results import ReducedFlowResult, SolverStats
from ._solvers import CLOSED_FORM, Backend

FloatArray = np.ndarray


def saved_times(options: FlowOptions) -> FloatArray:
    """The times the closed form is evaluated at: ``0``, the ``t_eval`` grid and ``t_end``
    when ``t_eval`` is given (the points an ODE solve saves), else ``n_save`` evenly spaced
    times from 0 to ``t_end``."""
    grid = options.t_eval_array
    if grid is None:
        return np.linspace(0.0, options.t_end, options.n_save)
    return np.unique(np.concatenate([[0.0], grid, [options.t_end]]))


def solve_closed_form(system: ReducedSystem, a0: float, b0: float, options: FlowOptions,
                      progress: ProgressCallback | None = None) -> ReducedFlowResult:
    """Lemma 5.2's flow from ``(a0, b0)`` by its closed form at :func:`saved_times`.

    # Arguments
    - `system`: the reduced system (its ``c1``, ``c2``).
    - `a0`, `b0`: the start (finite; checked by the caller).
    - `options`: the run's options; ``t_end``, ``t_eval``, ``n_save`` and ``steady_tol`` apply
      (the tolerances and the step limit of an ODE solve have nothing to bound here).
    - `progress`: called once, with ``t_end``, when the trajectory is evaluated.

    # Returns
    A :class:`ReducedFlowResult` with ``backend == "closed_form"``.
    """
    start = time.perf_counter()
    t = saved_times(options)
    a, b = (np.asarray(v, dtype=np.float64) for v in system.solution(a0, b0, t))
    da, db = system.rhs(a, b)
    grad_max = np.maximum(np.abs(da), np.abs(db))
    wall = time.perf_counter() - start
    if progress is not None:
        progress(float(t[-1]))
    steady = options.steady_tol
    if steady > 0 and grad_max[-1] < steady:
        status = Outcome.CONVERGED
        message = (f"closed form at τ={t[-1]:.6g}: max|∇ℓ̃| < steady_tol={steady:.3g} there")
    else:
        status, message = Outcome.T_END, f"reached t_end={options.t_end:.6g} (closed form)"
    stats = SolverStats(nfev=len(t), njev=0, n_accepted=0, n_rejected=0, n_monitor=None,
                        wall_s=wall)
    return ReducedFlowResult(
        t=t, a=a, b=b, a_exact=a.copy(), b_exact=b.copy(), loss=system.surrogate(a, b),
        grad_max=grad_max, solver_stats=stats, status=status, message=message,
        solver=CLOSED_FORM, backend=Backend.closed_form.value, c1=system.c1, c2=system.c2)

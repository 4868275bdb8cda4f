"""Gradient-flow integration ``dθ/dτ = −∇L(θ)`` (Eq. 2) with adaptive solvers from three libraries.

One integrator for any :class:`~mesadyn.field.Field` (:func:`integrate`) and for the reduced
2-D system of Lemma 5.2 (:func:`integrate_reduced`), whose default is its closed form
(:data:`CLOSED_FORM`: the exact solution at the saved times, no ODE solve).  ODE solvers, by
canonical id (the bare method names are aliases):

* ``torchdiffeq:dopri5``, ``dopri8``, ``bosh3``, ``adaptive_heun``;
* ``diffrax:Tsit5``, ``Dopri5``, ``Dopri8``, ``Kvaerno5`` (implicit; the ``jax`` extra);
* ``scipy:RK45``, ``DOP853``, ``Radau`` and ``LSODA`` (implicit).

``"auto"`` asks :func:`default_solver`: LSODA for the (stiff) full flow, the closed form for the
reduced system (the ODE solvers remain selectable there, and are its test).  A run ends with an
:class:`~mesadyn.outcome.Outcome` (``converged``, ``t_end``, ``max_steps``, ``failed``) —
solver failures are results, not exceptions — and one :class:`SolverStats` schema for every
backend.

Layout: :mod:`._stepper` (the :class:`Stepper` contract), one file per backend (``_scipy``,
``_torchdiffeq`` — the only user of torchdiffeq's private API —, ``_diffrax``), ``_driver`` (the
loop, the steady-state test, thinning), ``_results``, ``_options``, ``_solvers``, ``_problem``,
``_closed_form`` (the reduced system's exact solution as a result), and ``_batched``
(:func:`integrate_batch`: N starts in one solve, for ensembles; batched Dormand–Prince or the
batched Rosenbrock RODAS4, :class:`BatchMethod`).  Importing the package loads neither torch
nor scipy: each backend imports its library when it runs.
"""

from ._batched import DEFAULT_BATCH_METHOD as DEFAULT_BATCH_METHOD
from ._batched import BatchEvent as BatchEvent
from ._batched import BatchFlowResult as BatchFlowResult
from ._batched import BatchMethod as BatchMethod
from ._batched import integrate_batch as integrate_batch
from ._driver import drive as drive
from ._integrate import integrate as integrate
from ._integrate import integrate_reduced as integrate_reduced
from ._options import DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS
from ._options import FlowOptions as FlowOptions
from ._problem import FieldProblem as FieldProblem
from ._problem import Problem as Problem
from ._problem import ReducedProblem as ReducedProblem
from ._results import FlowResult as FlowResult
from ._results import ReducedFlowResult as ReducedFlowResult
from ._results import SolverStats as SolverStats
from ._results import stiffness as stiffness
from ._solvers import ALIASES as ALIASES
from ._solvers import AUTO as AUTO
from ._solvers import CLOSED_FORM as CLOSED_FORM
from ._solvers import IMPLICIT as IMPLICIT
from ._solvers import SOLVERS as SOLVERS
from ._solvers import Backend as Backend
from ._solvers import Solver as Solver
from ._solvers import default_solver as default_solver
from ._solvers import resolve_solver as resolve_solver
from ._solvers import solver_names as solver_names
from ._stepper import RawSolution as RawSolution
from ._stepper import Stepper as Stepper

__all__ = [
    "ALIASES", "AUTO", "CLOSED_FORM", "DEFAULT_BATCH_METHOD", "DEFAULT_MAX_STEPS", "IMPLICIT",
    "SOLVERS",
    "Backend", "BatchEvent", "BatchFlowResult", "BatchMethod", "FieldProblem",
    "FlowOptions", "FlowResult", "Problem", "RawSolution", "ReducedFlowResult",
    "ReducedProblem", "Solver", "SolverStats", "Stepper", "default_solver", "drive",
    "integrate", "integrate_batch", "integrate_reduced", "resolve_solver", "solver_names",
    "stiffness",
]

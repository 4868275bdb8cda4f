"""scipy backend: one accepted step of a ``scipy.integrate.OdeSolver`` at a time (public API)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._options import FlowOptions
from ._problem import Problem
from ._solvers import IMPLICIT
from ._stepper import FloatArray, Stepper

if TYPE_CHECKING:
    from scipy.integrate import OdeSolver

#: Right-hand-side calls per step attempt of scipy's explicit RK methods (stages + f(y_new)).
EVALS_PER_ATTEMPT = {"RK45": 6, "DOP853": 12}
#: Right-hand-side calls one step may take before it fails (scipy retries a rejected step
#: inside ``step()`` until its size falls below the spacing of τ, ~1e-323 at τ = 0): about a
#: hundred attempts of DOP853, far beyond the few a healthy step needs.
MAX_CALLS_PER_STEP = 1200


class _StepBudget(Exception):
    """Raised from the right-hand side when one step has used :data:`MAX_CALLS_PER_STEP`."""


class ScipyStepper(Stepper):
    """``RK45``, ``DOP853``, ``Radau``, ``LSODA``; implicit ones get ``problem.jac_np``.

    Rejected attempts are exact for RK45/DOP853 (a fixed number of calls per attempt) and
    ``None`` for Radau/LSODA, which do not expose them.  A step is bounded by its attempts: one
    that has not been accepted after :data:`MAX_CALLS_PER_STEP` right-hand-side calls fails.

    A host solver: its state is a numpy array, so with a field on a device every right-hand
    side (``problem.rhs_np``) and Jacobian (``problem.jac_np``) call copies ``y`` to
    ``problem.device`` and the result back (use a torchdiffeq solver to stay on the device).
    """

    def __init__(self, problem: Problem, method: str, options: FlowOptions) -> None:
        import scipy.integrate as si

        self.problem = problem
        self.method = method
        jac = (lambda _t, y: problem.jac_np(y)) if method in IMPLICIT else None
        cls: type[OdeSolver] = getattr(si, method)
        kw: dict[str, object] = {"rtol": options.rtol, "atol": options.atol}
        if jac is not None:
            kw["jac"] = jac
        self._calls = 0

        def rhs(_t: float, y: FloatArray) -> FloatArray:
            self._calls += 1
            if self._calls > MAX_CALLS_PER_STEP:
                raise _StepBudget
            return problem.rhs_np(y)

        self.s = cls(rhs, 0.0, problem.y0.copy(), options.t_end, **kw)
        self.n_accepted = 0
        self.n_rejected = 0 if method in EVALS_PER_ATTEMPT else None

    @property
    def t(self) -> float:
        return float(self.s.t)

    @property
    def y(self) -> FloatArray:
        y: FloatArray = self.s.y
        return y

    def step(self) -> str | None:
        before = self.problem.nfev
        self._calls = 0
        try:
            message = self.s.step()
        except _StepBudget:
            return (f"{self.method}: no step accepted within {MAX_CALLS_PER_STEP} evaluations "
                    f"at τ={self.s.t:.6g} (every attempt rejected)")
        except (ArithmeticError, np.linalg.LinAlgError, ValueError) as exc:
            # ValueError: scipy's LU refuses a Jacobian with inf/NaN (Radau at an overflow)
            return f"{self.method}: {type(exc).__name__}: {exc}"
        if self.s.status == "failed":
            return f"{self.method}: {message}"
        self.n_accepted += 1
        if self.n_rejected is not None:
            attempts = (self.problem.nfev - before) // EVALS_PER_ATTEMPT[self.method]
            self.n_rejected += max(attempts - 1, 0)
        if not np.isfinite(self.s.y).all():
            return f"non-finite state at τ={self.s.t:.6g}"
        return None

    def interp(self, ts: FloatArray) -> FloatArray:
        out: FloatArray = self.s.dense_output()(ts).T
        return out

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


class ScipyStepper(Stepper):
    """``RK45``, ``DOP853``, ``Radau``, ``LSODA``; implicit ones get ``problem.jac_np``.

    Rejected attempts are exact for RK45/DOP853 (a fixed number of calls per attempt) and
    ``None`` for Radau/LSODA, which do not expose them.

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
        self.s = cls(lambda _t, y: problem.rhs_np(y), 0.0, problem.y0.copy(), options.t_end,
                     **kw)
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
        try:
            message = self.s.step()
        except (ArithmeticError, np.linalg.LinAlgError) as exc:
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

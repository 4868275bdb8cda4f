"""torchdiffeq backend: its adaptive Runge–Kutta state machine, stepped by hand.

torchdiffeq's public ``odeint`` cannot stop at a steady state or report its step counts, so
this file drives its private API — ``_impl.misc._check_inputs``, the solver classes in
``_impl.odeint.SOLVERS``, ``_before_integrate``, ``_adaptive_step``, the ``rk_state``
namedtuple and ``_impl.interp._interp_evaluate``.  Those names carry no promise, so this is the
only file that touches them, and it refuses (at import) a torchdiffeq outside the versions it
was written and tested against (pyproject bounds the dependency the same way).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torchdiffeq

from ..errors import MesadynError
from ._options import FlowOptions
from ._problem import Problem
from ._stepper import FloatArray, Stepper

#: The torchdiffeq versions whose private API this file drives: ``>= 0.2.3, < 0.3``.
SUPPORTED_MIN = (0, 2, 3)
SUPPORTED_BELOW = (0, 3)
SUPPORTED = ">=0.2.3,<0.3"
#: A step below this fraction of max(|τ|, t_end) counts as step-size underflow.
_UNDERFLOW = 10 * float(np.finfo(np.float64).eps)


def check_version(version: str) -> None:
    """Raise unless ``version`` is one whose private API this module knows.

    # Raises
    `MesadynError` naming the installed version and the supported range.
    """
    try:
        parts = tuple(int(p) for p in version.split("+")[0].split(".")[:3])
    except ValueError:
        parts = ()
    if not parts or parts < SUPPORTED_MIN or parts[:2] >= SUPPORTED_BELOW:
        raise MesadynError(
            f"torchdiffeq {version} is not supported by mesadyn's torchdiffeq solvers (they "
            f"drive its private stepping API); install torchdiffeq{SUPPORTED} or use a scipy "
            "or diffrax solver")


check_version(torchdiffeq.__version__)

from torchdiffeq._impl.interp import _interp_evaluate  # noqa: E402
from torchdiffeq._impl.misc import _check_inputs  # noqa: E402
from torchdiffeq._impl.odeint import SOLVERS as TD_SOLVERS  # noqa: E402


class TorchdiffeqStepper(Stepper):
    """``dopri5``, ``dopri8``, ``bosh3``, ``adaptive_heun``: one accepted RK step per call.

    Rejected attempts are counted exactly (the state's time does not advance).  torchdiffeq's
    own assertions (``underflow in dt``, non-finite state) and a step below
    ``10 ε · max(|τ|, t_end)`` become a failure message, not an exception.

    The device path: the solver's time, state, stages and error estimates are tensors on
    ``problem.device``, starting from :meth:`Problem.y0_torch` and evaluated only through
    :meth:`Problem.rhs_torch`, so no evaluation copies anything to the host.  Only what the
    driver records crosses: :attr:`y` and :meth:`interp` (float64 host arrays);
    :attr:`state` is the device tensor (for the steady-state monitor).  Step control reads a
    few scalars (τ, dt, finiteness) as Python values, as torchdiffeq itself does.
    """

    def __init__(self, problem: Problem, method: str, options: FlowOptions) -> None:
        y0 = problem.y0_torch()
        t = torch.tensor([0.0, options.t_end], dtype=torch.float64, device=y0.device)
        _, func, y0, t, rtol, atol, method, opts, _, _ = _check_inputs(
            lambda _t, y: problem.rhs_torch(y), y0, t, options.rtol, options.atol, method, {},
            None, TD_SOLVERS)
        self.solver = TD_SOLVERS[method](func=func, y0=y0, rtol=rtol, atol=atol, **opts)
        self.solver._before_integrate(t)
        self.t_end = options.t_end
        self.n_accepted = 0
        self.n_rejected: int = 0

    @property
    def t(self) -> float:
        return float(self.solver.rk_state.t1)

    @property
    def y(self) -> FloatArray:
        y: FloatArray = self.solver.rk_state.y1.detach().cpu().numpy()
        return y

    @property
    def state(self) -> torch.Tensor:
        """The state at :attr:`t` on ``problem.device`` (not to be mutated)."""
        return self.solver.rk_state.y1

    def step(self) -> str | None:
        while True:
            old = self.solver.rk_state
            try:
                new = self.solver._adaptive_step(old)
            except AssertionError as exc:  # torchdiffeq's underflow / non-finite checks
                return f"step size underflow at τ={float(old.t1):.6g} ({exc})"
            self.solver.rk_state = new
            if float(new.t1) > float(old.t1):
                self.n_accepted += 1
                if not torch.isfinite(new.y1).all():
                    return f"non-finite state at τ={float(new.t1):.6g}"
                return None
            self.n_rejected += 1
            dt = float(new.dt)
            if not math.isfinite(dt) or dt <= _UNDERFLOW * max(abs(float(old.t1)), self.t_end):
                return f"step size underflow at τ={float(old.t1):.6g} (dt={dt:.3g})"

    def interp(self, ts: FloatArray) -> FloatArray:
        st = self.solver.rk_state
        dev = st.y1.device
        return np.stack([
            _interp_evaluate(st.interp_coeff, st.t0, st.t1,
                             torch.tensor(t, dtype=torch.float64, device=dev)).cpu().numpy()
            for t in ts])

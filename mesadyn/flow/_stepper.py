"""The contract between the driver (:mod:`._driver`) and a step-by-step solver backend."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._options import FlowOptions
from ._problem import Problem
from ._results import Status

FloatArray = npt.NDArray[np.float64]


class Stepper(ABC):
    """One adaptive ODE solver, advanced one accepted step at a time by the driver.

    Modelled on scipy's ``OdeSolver``.  An implementation must:

    - in ``__init__(problem, method, options)``: set up the solver on ``[0, options.t_end]`` from
      ``problem.y0`` with ``options.rtol`` / ``options.atol``, and set ``n_accepted = 0`` and
      ``n_rejected`` to ``0`` (or ``None`` if the solver cannot tell its rejected attempts);
    - evaluate the right-hand side only through ``problem.rhs_np`` / ``problem.rhs_torch`` and the
      Jacobian only through ``problem.jac_np``, so that ``problem.nfev`` / ``problem.njev``
      count every call the solver makes (the stepper keeps no counts of its own);
    - in :meth:`step`: make exactly one *accepted* step (retrying rejected attempts inside,
      counting them in ``n_rejected``), add 1 to ``n_accepted``, and return ``None``; if the
      solver cannot go on (step-size underflow, a non-finite state, an internal solver error)
      return a one-line message instead — **never raise**: failure is data, the driver turns it
      into :attr:`Status.failed` and returns the partial run;
    - expose the current state as :attr:`t` (a float) and :attr:`y` (a float64 array, not to be
      mutated by the caller), and a dense output :meth:`interp` valid on the last step
      ``[t_prev, t]``.

    Stopping (``t_end``, the steady state, ``max_steps``) is the driver's job, not the
    stepper's.  Bad options are rejected before a stepper is built (:class:`FlowOptions`).
    """

    n_accepted: int
    n_rejected: int | None

    @abstractmethod
    def __init__(self, problem: Problem, method: str, options: FlowOptions) -> None:
        """Set up ``method`` on ``problem`` (see the class docstring)."""

    @property
    @abstractmethod
    def t(self) -> float:
        """The time of the last accepted step."""

    @property
    @abstractmethod
    def y(self) -> FloatArray:
        """The state at :attr:`t`."""

    @abstractmethod
    def step(self) -> str | None:
        """One accepted step: ``None``, or a message if the solver cannot go on."""

    @abstractmethod
    def interp(self, ts: FloatArray) -> FloatArray:
        """The dense output at times ``ts`` within the last step: shape ``(len(ts), n)``."""


@dataclass
class RawSolution:
    """What a backend returns: saved times and states, step counts and why it stopped."""

    t: FloatArray
    y: FloatArray
    n_accepted: int
    n_rejected: int | None
    status: Status
    message: str

"""The contract between the driver (:mod:`._driver`) and a step-by-step solver backend."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..outcome import Outcome
from ._options import FlowOptions
from ._problem import Problem

if TYPE_CHECKING:
    import torch

FloatArray = npt.NDArray[np.float64]


class Stepper(ABC):
    """One adaptive ODE solver, advanced one accepted step at a time by the driver.

    Modelled on scipy's ``OdeSolver``.  An implementation must:

    - in ``__init__(problem, method, options)``: set up the solver on ``[0, options.t_end]`` from
      ``problem.y0`` (a host solver) or ``problem.y0_torch()`` (a torch solver, on
      ``problem.device``) with ``options.rtol`` / ``options.atol``, and set ``n_accepted = 0``
      and ``n_rejected`` to ``0`` (or ``None`` if the solver cannot tell its rejected attempts);
    - evaluate the right-hand side only through ``problem.rhs_np`` (host) /
      ``problem.rhs_torch`` (on ``problem.device``, no host copy) and the Jacobian only through
      ``problem.jac_np``, so that ``problem.nfev`` / ``problem.njev`` count every call the
      solver makes (the stepper keeps no counts of its own);
    - in :meth:`step`: make exactly one *accepted* step (retrying rejected attempts inside,
      counting them in ``n_rejected``), add 1 to ``n_accepted``, and return ``None``; if the
      solver cannot go on (step-size underflow, a non-finite state, an internal solver error)
      return a one-line message instead — **never raise**: failure is data, the driver turns it
      into :attr:`Outcome.FAILED` and returns the partial run;
    - expose the current state as :attr:`t` (a float) and :attr:`y` (a float64 host array, not
      to be mutated by the caller), and a dense output :meth:`interp` valid on the last step
      ``[t_prev, t]`` (host arrays too: these are what the driver records);
    - a solver whose state lives on ``problem.device`` (torch) may also override :attr:`state`
      to give it there, so that the driver's steady-state monitor reads it without a host copy.

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

    @property
    def state(self) -> FloatArray | torch.Tensor:
        """The state at :attr:`t` as the solver holds it (default :attr:`y`), for the monitor."""
        return self.y

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
    status: Outcome
    message: str

"""What is integrated: a right-hand side on the integrated coordinates, with counted calls."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
import numpy.typing as npt
import torch

from ..field import Field
from ..reduced import ReducedSystem

FloatArray = npt.NDArray[np.float64]


class Problem(ABC):
    """``dy/dτ = f(y)`` on the integrated coordinates ``y``, with the calls counted.

    Subclasses give :meth:`rhs_np`, :meth:`jac_np` and :meth:`monitor`, and count their calls
    in ``nfev`` / ``njev`` / ``n_monitor`` (the monitor is what the driver uses for the
    steady-state test and the saved points, counted apart from the solver's own calls).
    """

    y0: FloatArray

    def __init__(self) -> None:
        self.nfev = 0
        self.njev = 0
        self.n_monitor = 0

    @abstractmethod
    def rhs_np(self, y: FloatArray) -> FloatArray:
        """``f(y)`` (counted in ``nfev``)."""

    @abstractmethod
    def jac_np(self, y: FloatArray) -> FloatArray:
        """The Jacobian ``∂f/∂y`` (counted in ``njev``)."""

    @abstractmethod
    def monitor(self, y: FloatArray) -> tuple[float, float]:
        """``(loss, max|∇loss|)`` at ``y`` (counted in ``n_monitor``)."""

    def rhs_torch(self, y: torch.Tensor) -> torch.Tensor:
        """``f(y)`` for torch solvers."""
        return torch.from_numpy(self.rhs_np(y.detach().cpu().numpy()))


class FieldProblem(Problem):
    """The full flow ``dθ/dτ = −∇L(θ)`` (Eq. 2) on the free coordinates (a boolean mask)."""

    def __init__(self, field: Field, theta0: torch.Tensor, free: npt.NDArray[np.bool_]):
        super().__init__()
        self.field = field
        self.theta0 = field.check_theta(theta0).detach().clone()
        self.mask = free
        self.free = np.flatnonzero(free)
        self._free_t = torch.from_numpy(self.free)
        self.y0 = self.theta0.numpy()[self.free].copy()

    def full(self, y: FloatArray | torch.Tensor) -> torch.Tensor:
        """θ with the free entries set to ``y`` and the others at their initial values."""
        th = self.theta0.clone()
        th[self._free_t] = torch.as_tensor(np.array(y, dtype=np.float64) if isinstance(
            y, np.ndarray) else y, dtype=torch.float64)
        return th

    def rhs_torch(self, y: torch.Tensor) -> torch.Tensor:
        self.nfev += 1
        if not torch.isfinite(y).all():  # a blown-up trial stage: let the solver reject it
            return torch.full_like(y, math.nan)
        with np.errstate(over="ignore", invalid="ignore"):  # trial stages may overflow
            _, g = self.field.loss_and_grad(self.full(y))
        return -g[self._free_t]

    def rhs_np(self, y: FloatArray) -> FloatArray:
        out: FloatArray = self.rhs_torch(torch.from_numpy(np.array(y, dtype=np.float64))).numpy()
        return out

    def hessian_free(self, y: FloatArray) -> FloatArray:
        """``∇²L`` restricted to the free coordinates (not counted)."""
        H = self.field.hessian(self.full(y)).numpy()
        out: FloatArray = H[np.ix_(self.free, self.free)]
        return out

    def jac_np(self, y: FloatArray) -> FloatArray:
        self.njev += 1
        return -self.hessian_free(y)

    def monitor(self, y: FloatArray) -> tuple[float, float]:
        self.n_monitor += 1
        loss, g = self.field.loss_and_grad(self.full(y))
        return float(loss), float(g[self._free_t].abs().max())


class ReducedProblem(Problem):
    """The 2-D system of Lemma 5.2 on ``y = (a, b)``."""

    def __init__(self, system: ReducedSystem, a0: float, b0: float):
        super().__init__()
        self.system = system
        self.y0 = np.array([a0, b0], dtype=np.float64)

    def rhs_np(self, y: FloatArray) -> FloatArray:
        self.nfev += 1
        da, db = self.system.rhs(y[0], y[1])
        return np.array([da, db], dtype=np.float64)

    def jac_np(self, y: FloatArray) -> FloatArray:
        self.njev += 1
        return self.system.jacobian(float(y[0]), float(y[1]))

    def monitor(self, y: FloatArray) -> tuple[float, float]:
        self.n_monitor += 1
        da, db = self.system.rhs(y[0], y[1])
        return float(self.system.surrogate(y[0], y[1])), float(max(abs(da), abs(db)))

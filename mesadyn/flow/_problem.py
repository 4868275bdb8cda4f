"""What is integrated: a right-hand side on the integrated coordinates, with counted calls.

The device contract.  A :class:`Problem` has a :attr:`Problem.device`: the
torch side (:meth:`Problem.y0_torch`, :meth:`Problem.rhs_torch`, :meth:`Problem.monitor` given a
tensor) takes and returns tensors on that device and never copies the state to the host, so a
torch solver (the torchdiffeq backend) integrates entirely on the device.  The numpy side
(:attr:`Problem.y0`, :meth:`Problem.rhs_np`, :meth:`Problem.jac_np`) is for host solvers (scipy,
diffrax's callback bridge): each call copies ``y`` to the device and the result back.
torch is imported by the torch side only: a reduced problem on a host solver loads none.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..reduced import ReducedSystem

if TYPE_CHECKING:
    import torch

    from ..field import Field

FloatArray = npt.NDArray[np.float64]


class Problem(ABC):
    """``dy/dτ = f(y)`` on the integrated coordinates ``y``, with the calls counted.

    Subclasses give :meth:`rhs_np`, :meth:`jac_np` and :meth:`monitor`, and count their calls
    in ``nfev`` / ``njev`` / ``n_monitor`` (the monitor is what the driver uses for the
    steady-state test and the saved points, counted apart from the solver's own calls).

    Attributes:
        y0: the start on the host (a float64 array; what the driver records first).
        device: where the torch side works (the CPU unless a subclass says otherwise).
    """

    y0: FloatArray

    @property
    def device(self) -> torch.device:
        """Where the torch side works: the CPU unless the subclass set another."""
        import torch

        return self.__dict__.get("_device") or torch.device("cpu")

    @device.setter
    def device(self, value: torch.device) -> None:
        self.__dict__["_device"] = value

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
    def monitor(self, y: FloatArray | torch.Tensor) -> tuple[float, float]:
        """``(loss, max|∇loss|)`` at ``y`` (counted in ``n_monitor``), as Python floats."""

    def y0_torch(self) -> torch.Tensor:
        """The start as a float64 tensor on :attr:`device` (a fresh copy)."""
        import torch

        return torch.from_numpy(self.y0.copy()).to(self.device)

    def rhs_torch(self, y: torch.Tensor) -> torch.Tensor:
        """``f(y)`` for torch solvers (here through :meth:`rhs_np`, on the host)."""
        import torch

        return torch.from_numpy(self.rhs_np(y.detach().cpu().numpy()))


def field_device(field: Field) -> torch.device:
    """The device ``field`` evaluates on (:attr:`Field.device`)."""
    return field.device


class FieldProblem(Problem):
    """The full flow ``dθ/dτ = −∇L(θ)`` (Eq. 2) on the free coordinates (a boolean mask).

    Attributes:
        device: where θ, the state and ``−∇L`` live for the torch side (``device`` argument,
            default :func:`field_device`), checked by :func:`mesadyn.field.check_device`
            (a device this machine lacks is a one-line ``MesadynError``).
        theta0: the full start θ₀, on :attr:`device`.
        free: the integrated entries' indices (host ``int64`` array; ``mask`` is the boolean).
        y0: ``theta0[free]`` copied to the host (the first saved point).
    """

    def __init__(self, field: Field, theta0: torch.Tensor, free: npt.NDArray[np.bool_],
                 device: torch.device | str | None = None):
        super().__init__()
        import torch

        from ..field import check_device

        self.field = field
        self.device = field_device(field) if device is None else check_device(device)
        self.theta0 = field.check_theta(theta0).detach().to(self.device).clone()
        self.mask = free
        self.free = np.flatnonzero(free)
        self._free_t = torch.from_numpy(self.free).to(self.device)
        self.y0 = self.theta0[self._free_t].cpu().numpy().copy()

    def y0_torch(self) -> torch.Tensor:
        return self.theta0[self._free_t].clone()

    def full(self, y: FloatArray | torch.Tensor) -> torch.Tensor:
        """θ on :attr:`device` with the free entries set to ``y`` and the others at their
        initial values (a tensor ``y`` already on :attr:`device` is not copied to the host)."""
        import torch

        th = self.theta0.clone()
        th[self._free_t] = torch.as_tensor(np.array(y, dtype=np.float64) if isinstance(
            y, np.ndarray) else y, dtype=torch.float64, device=self.device)
        return th

    def rhs_torch(self, y: torch.Tensor) -> torch.Tensor:
        """``−∇L`` on the free entries, on :attr:`device`: no host copy (one scalar read,
        whether ``y`` is finite)."""
        import torch

        self.nfev += 1
        if not torch.isfinite(y).all():  # a blown-up trial stage: let the solver reject it
            return torch.full_like(y, math.nan)
        with np.errstate(over="ignore", invalid="ignore"):  # trial stages may overflow
            _, g = self.field.loss_and_grad(self.full(y))
        return -g[self._free_t]

    def rhs_np(self, y: FloatArray) -> FloatArray:
        """:meth:`rhs_torch` for host solvers: ``y`` to :attr:`device` and ``f(y)`` back."""
        import torch

        out: FloatArray = self.rhs_torch(
            torch.from_numpy(np.array(y, dtype=np.float64)).to(self.device)).cpu().numpy()
        return out

    def hessian_free(self, y: FloatArray | torch.Tensor) -> FloatArray:
        """``∇²L`` restricted to the free coordinates, on the host (not counted)."""
        H = self.field.hessian(self.full(y)).cpu().numpy()
        out: FloatArray = H[np.ix_(self.free, self.free)]
        return out

    def jac_np(self, y: FloatArray) -> FloatArray:
        self.njev += 1
        return -self.hessian_free(y)

    def monitor(self, y: FloatArray | torch.Tensor) -> tuple[float, float]:
        """Evaluated on :attr:`device`; only the two floats come back."""
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

    def monitor(self, y: FloatArray | torch.Tensor) -> tuple[float, float]:
        self.n_monitor += 1
        y = np.asarray(y, dtype=np.float64)
        da, db = self.system.rhs(y[0], y[1])
        return float(self.system.surrogate(y[0], y[1])), float(max(abs(da), abs(db)))

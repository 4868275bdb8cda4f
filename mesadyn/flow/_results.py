"""Typed outcomes of a run: :class:`Status`, one :class:`SolverStats`, the two results."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch

from ..model import block_labels, dim_of, unpack

if TYPE_CHECKING:
    import xarray as xr

FloatArray = npt.NDArray[np.float64]


class Status(StrEnum):
    """Why a run stopped (string-valued: JSON keeps today's words).

    - ``converged``: the steady-state test ``max|∇L| < steady_tol`` held;
    - ``t_end``: reached the horizon;
    - ``max_steps``: hit the accepted-step limit first (the partial run is returned);
    - ``failed``: the solver could not go on (step-size underflow, a non-finite state, …);
      ``message`` says why.  Never an exception: failure is data.
    """

    converged = "converged"
    t_end = "t_end"
    max_steps = "max_steps"
    failed = "failed"


@dataclass(frozen=True)
class SolverStats:
    """Counts of one run, the same schema for every backend.

    - `nfev`, `njev`: right-hand-side / Jacobian calls the solver made (counted in our wrappers,
      exact for every backend);
    - `n_accepted`: accepted steps (exact everywhere); `n_rejected`: rejected attempts (exact
      for torchdiffeq, diffrax and scipy's RK45/DOP853; ``None`` for Radau and LSODA, which do
      not expose it);
    - `n_monitor`: extra gradient evaluations for monitoring (the steady-state test and the
      saved points' loss and ‖∇L‖), counted apart; ``None`` where not tracked;
    - `wall_s`: wall-clock seconds of the solve.
    """

    nfev: int
    njev: int
    n_accepted: int
    n_rejected: int | None
    n_monitor: int | None
    wall_s: float


def stiffness(eigenvalues: npt.ArrayLike) -> float:
    """``max|λ| / min|λ|`` over the Hessian eigenvalues that are not numerically zero.

    Eigenvalues below ``1e-9 · max|λ|`` (the flat directions of the loss's symmetries) are
    left out; ``inf`` if none is left besides zero.
    """
    mags = np.abs(np.asarray(eigenvalues, dtype=np.float64))
    top = float(mags.max()) if mags.size else 0.0
    nz = mags[mags > 1e-9 * top]
    return float(top / nz.min()) if top > 0 and nz.size else math.inf


class _StatsView:
    """Shortcuts ``result.nfev`` … to ``result.solver_stats``."""

    solver_stats: SolverStats

    @property
    def nfev(self) -> int:
        return self.solver_stats.nfev

    @property
    def njev(self) -> int:
        return self.solver_stats.njev

    @property
    def n_accepted(self) -> int:
        return self.solver_stats.n_accepted

    @property
    def n_rejected(self) -> int | None:
        return self.solver_stats.n_rejected

    @property
    def n_monitor(self) -> int | None:
        return self.solver_stats.n_monitor

    @property
    def wall_s(self) -> float:
        return self.solver_stats.wall_s


@dataclass(frozen=True)
class FlowResult(_StatsView):
    """A full gradient-flow run (see :func:`~mesadyn.flow.integrate`); float64 numpy arrays.

    `theta` is (n_saved, 18d²); `loss`, `grad_max` (max|∇L| over the free entries) and
    `invariant` (‖A‖_F² − ‖P‖_F²) are per saved point; `mask` is True on the entries that
    evolved (active ∧ mask), `free` their indices.
    """

    t: FloatArray
    theta: FloatArray
    loss: FloatArray
    grad_max: FloatArray
    invariant: FloatArray
    solver_stats: SolverStats
    status: Status
    message: str
    solver: str
    backend: str
    mask: npt.NDArray[np.bool_]
    free: npt.NDArray[np.intp]
    rtol: float
    atol: float
    stiffness_ratio: float | None = None
    hessian_eigenvalues: FloatArray | None = None
    field: dict[str, object] = field(default_factory=dict)

    @property
    def final(self) -> FloatArray:
        """θ at the last saved point."""
        return self.theta[-1]

    @property
    def converged(self) -> bool:
        return self.status is Status.converged

    @property
    def d(self) -> int:
        return dim_of(self.theta[-1])

    @property
    def solver_id(self) -> str:
        """The canonical ``backend:method`` id."""
        return f"{self.backend}:{self.solver}"

    def invariant_drift(self) -> float:
        """``max_τ |I(τ) − I(0)|`` for ``I = ‖A‖_F² − ‖P‖_F²``."""
        return float(np.max(np.abs(self.invariant - self.invariant[0])))

    def to_dict(self) -> dict[str, object]:
        """The solver's statistics and outcome, JSON-ready (the keys of ``integrate --json``)."""
        s = self.solver_stats
        return {"nfev": s.nfev, "njev": s.njev, "n_accepted": s.n_accepted,
                "n_rejected": s.n_rejected, "n_monitor": s.n_monitor,
                "status": self.status.value, "message": self.message, "solver": self.solver,
                "backend": self.backend, "wall_s": s.wall_s, "rtol": self.rtol,
                "atol": self.atol, "stiffness_ratio": self.stiffness_ratio}

    def to_dataset(self) -> xr.Dataset:
        """xarray Dataset: θ(τ), L, max|∇L|, invariant (dims ``tau``, ``param``); final blocks."""
        import xarray as xr

        d = self.d
        W_KQ, W_PV = unpack(torch.from_numpy(self.final.copy()))
        attrs = {k: ("" if v is None else v) for k, v in self.to_dict().items()}
        return xr.Dataset(
            {
                "theta": (("tau", "param"), self.theta),
                "loss": ("tau", self.loss),
                "grad_max": ("tau", self.grad_max),
                "invariant": ("tau", self.invariant),
                "W_KQ": (("row", "col"), W_KQ.numpy()),
                "W_PV": (("row", "col"), W_PV.numpy()),
            },
            coords={
                "tau": self.t,
                "param": np.arange(self.theta.shape[1]),
                "block": ("param", block_labels(d).astype(str)),
                "trainable": ("param", np.isin(np.arange(self.theta.shape[1]), self.free)),
            },
            attrs=attrs,
        )


@dataclass(frozen=True)
class ReducedFlowResult(_StatsView):
    """A reduced-system run (see :func:`~mesadyn.flow.integrate_reduced`), with the closed form
    (Lemma 5.2 solved exactly) at the same times."""

    t: FloatArray
    a: FloatArray
    b: FloatArray
    a_exact: FloatArray
    b_exact: FloatArray
    loss: FloatArray
    grad_max: FloatArray
    solver_stats: SolverStats
    status: Status
    message: str
    solver: str
    backend: str
    c1: float
    c2: float

    @property
    def solver_id(self) -> str:
        """The canonical ``backend:method`` id."""
        return f"{self.backend}:{self.solver}"

    @property
    def converged(self) -> bool:
        return self.status is Status.converged

    @property
    def ab(self) -> FloatArray:
        return self.a * self.b

    @property
    def invariant(self) -> FloatArray:
        return self.a * self.a - self.b * self.b

    def invariant_drift(self) -> float:
        """``max |a² − b² − Δ|`` over the saved points."""
        delta = (self.a[0] - self.b[0]) * (self.a[0] + self.b[0])
        return float(np.max(np.abs(self.invariant - delta)))

    def closed_form_max_error(self) -> float:
        """``max_τ ‖(a, b)(τ) − closed form‖`` over the saved points."""
        return float(np.max(np.hypot(self.a - self.a_exact, self.b - self.b_exact)))

    def to_dict(self) -> dict[str, object]:
        """The solver's statistics and outcome (the keys of ``integrate --reduced --json``)."""
        s = self.solver_stats
        return {"nfev": s.nfev, "njev": s.njev, "n_accepted": s.n_accepted,
                "n_rejected": s.n_rejected, "status": self.status.value,
                "message": self.message, "solver": self.solver, "backend": self.backend,
                "wall_s": s.wall_s}

    def to_dataset(self) -> xr.Dataset:
        """xarray Dataset over ``tau``: a, b, the closed form, ℓ̃, max|∇ℓ̃|, invariant."""
        import xarray as xr

        attrs: dict[str, object] = {k: ("" if v is None else v)
                                    for k, v in self.to_dict().items()}
        attrs.update(c1=self.c1, c2=self.c2)
        return xr.Dataset(
            {
                "a": ("tau", self.a), "b": ("tau", self.b),
                "a_closed_form": ("tau", self.a_exact), "b_closed_form": ("tau", self.b_exact),
                "loss": ("tau", self.loss), "grad_max": ("tau", self.grad_max),
                "invariant": ("tau", self.invariant),
            },
            coords={"tau": self.t},
            attrs=attrs,
        )

"""What a flow returns: one :class:`SolverStats` schema and the two results, each ending with an
:class:`~mesadyn.outcome.Outcome` (``converged``, ``t_end``, ``max_steps`` or ``failed``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..model import block_labels, dim_of
from ..outcome import Outcome
from ..record import Record
from ..tolerances import ZERO_RTOL

if TYPE_CHECKING:
    import xarray as xr

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SolverStats(Record):
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

    def plus(self, other: SolverStats) -> SolverStats:
        """The counts of two runs one after the other (a count unknown in either is unknown)."""

        def add(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a + b

        return SolverStats(nfev=self.nfev + other.nfev, njev=self.njev + other.njev,
                           n_accepted=self.n_accepted + other.n_accepted,
                           n_rejected=add(self.n_rejected, other.n_rejected),
                           n_monitor=add(self.n_monitor, other.n_monitor),
                           wall_s=self.wall_s + other.wall_s)


def stiffness(eigenvalues: npt.ArrayLike) -> float:
    """``max|λ| / min|λ|`` over the Hessian eigenvalues that are not numerically zero.

    Eigenvalues below ``ZERO_RTOL · max|λ|`` (:data:`mesadyn.tolerances.ZERO_RTOL`: the flat
    directions of the loss's symmetries) are left out; ``inf`` if none is left besides zero.
    """
    mags = np.abs(np.asarray(eigenvalues, dtype=np.float64))
    top = float(mags.max()) if mags.size else 0.0
    nz = mags[mags > ZERO_RTOL * top]
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
    status: Outcome
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
        return self.status is Outcome.CONVERGED

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

    def join(self, more: FlowResult, n_save: int) -> FlowResult:
        """This flow continued by ``more`` (a flow started from :attr:`final`): one
        trajectory with ``more``'s times shifted by this flow's last time, the counts added
        (:meth:`SolverStats.plus`), ``more``'s outcome and end-point spectrum, at most ``n_save``
        points (evenly by index, the first and the last kept)."""
        import dataclasses

        t = np.concatenate([self.t, more.t[1:] + self.t[-1]])
        arrays: dict[str, Any] = {k: np.concatenate([getattr(self, k), getattr(more, k)[1:]])
                                  for k in ("theta", "loss", "grad_max", "invariant")}
        if len(t) > n_save:
            idx = np.unique(np.round(np.linspace(0, len(t) - 1, n_save)).astype(int))
            t = t[idx]
            arrays = {k: v[idx] for k, v in arrays.items()}
        stats = self.solver_stats.plus(more.solver_stats)
        return dataclasses.replace(more, t=t, solver_stats=stats, **arrays)

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
        import torch
        import xarray as xr

        from ..model import unpack

        W_KQ, W_PV = unpack(torch.from_numpy(self.final.copy()))
        d = self.d
        attrs = _attrs(self.to_dict())
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
    (Lemma 5.2 solved exactly) at the same times; ``backend`` is ``"closed_form"`` when the run
    is the closed form itself."""

    t: FloatArray
    a: FloatArray
    b: FloatArray
    a_exact: FloatArray
    b_exact: FloatArray
    loss: FloatArray
    grad_max: FloatArray
    solver_stats: SolverStats
    status: Outcome
    message: str
    solver: str
    backend: str
    c1: float
    c2: float

    @property
    def solver_id(self) -> str:
        """The canonical ``backend:method`` id (``"closed_form"`` for the closed form)."""
        if self.backend == self.solver:
            return self.solver
        return f"{self.backend}:{self.solver}"

    @property
    def converged(self) -> bool:
        return self.status is Outcome.CONVERGED

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

        attrs = _attrs(self.to_dict()) | {"c1": self.c1, "c2": self.c2}
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


def _attrs(values: dict[str, object]) -> dict[str, object]:
    """netCDF attributes of a result's summary: a value that is unknown (``None``) is left
    out, never written as an empty string (a reader takes a missing attribute as unknown)."""
    return {k: v for k, v in values.items() if v is not None}

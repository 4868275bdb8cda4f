"""The gradient flow and the fixed point of a model other than the paper's (``--model``).

The paper's model runs through :mod:`mesadyn.flow` and :mod:`mesadyn.analysis`, which read
θ in its 18d² layout.  Any other :class:`~mesadyn.models.Model` runs here, on its own layout:

* :func:`model_flow` — ``dθ/dτ = −∇L`` on the free entries (the model's active entries, or
  its layered diagonals with ``mask="diagonal"``) by a SciPy solver (:data:`MODEL_SOLVER`:
  BDF with the field's exact Hessian as the Jacobian; measured at d = 1, T = 4 for two
  layers: 15 Jacobians to ``max|∇L| < 1e-10``, where LSODA took 450); it stops at the first
  evaluated θ where ``max|∇L| < steady_tol``, or at ``t_end``, or after ``max_steps``
  gradient evaluations.  Given an orthonormal ``basis`` of a subspace the flow keeps (the
  fixed subspace of the loss's coordinate symmetry, :meth:`~mesadyn.models.Model.
  fixed_subspace`), it integrates the coordinates ``y = basisᵀ θ`` instead: the same
  trajectory, with a Jacobian of ``m`` Hessian-vector products instead of the full Hessian;
  every evaluation checks the claim (``leak``: the largest gradient entry off the subspace)
  and ``max|∇L|`` is always over every free entry;
* :func:`model_spectrum` — the eigenvalues of ``J = −∇²L`` with the zero modes explained by
  the inactive entries of the model, the active entries the data never reach, and the
  model's declared continuous symmetries (:meth:`~mesadyn.models.Model.symmetries`); a zero
  mode outside their span is ``unexplained``;
* :class:`ModelFlowResult` and :class:`ModelStabilityResult`, what ``mesadyn integrate`` and
  ``mesadyn stability`` report for such a model (:mod:`._model_runs`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import Record
from ..tolerances import ZERO_RTOL

if TYPE_CHECKING:
    import numpy as np

    from ..field import Field
    from ..models import Model

__all__ = ["MODEL_SOLVER", "MODEL_SOLVERS", "ModelPath", "ModelSpectrum", "model_flow",
           "model_spectrum"]

#: The solver of a model's flow (``solver="auto"``).
MODEL_SOLVER = "BDF"
#: The SciPy methods a model's flow takes (``solver=``; ``scipy:`` prefixes are accepted).
MODEL_SOLVERS = ("BDF", "Radau", "LSODA", "RK45", "DOP853")
#: The implicit ones, given the exact Hessian of the free entries as their Jacobian.
IMPLICIT = frozenset({"BDF", "Radau", "LSODA"})


class _Stop(Exception):
    def __init__(self, outcome: Outcome, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


def check_model_solver(solver: str) -> str:
    """The SciPy method a model's flow runs (``auto``: :data:`MODEL_SOLVER`).

    Raises:
        MesadynError: a solver the model flow does not take (named, with the choices).
    """
    name = str(solver).removeprefix("scipy:")
    if name == "auto":
        return MODEL_SOLVER
    if name not in MODEL_SOLVERS:
        raise MesadynError(f"solver {solver!r} does not run a model other than the paper's; "
                           f"choose auto, {', '.join(MODEL_SOLVERS)}")
    return name


@dataclass(frozen=True)
class ModelPath:
    """A model's flow: the evaluated points in increasing τ (at most ``n_save`` kept, the last
    always), their loss and ``max|∇L|`` over the free entries; the outcome, the gradient
    and Hessian evaluations and the wall time; with a basis, its dimension ``subspace`` and
    the largest gradient entry off it at any evaluation (``leak``)."""

    t: np.ndarray
    theta: np.ndarray
    loss: np.ndarray
    grad_max: np.ndarray
    status: Outcome
    message: str
    nfev: int
    njev: int
    solver: str
    wall_s: float
    subspace: int | None = None
    leak: float | None = None

    @property
    def final(self) -> np.ndarray:
        import numpy as np

        return np.asarray(self.theta[-1])


def model_flow(fld: Field, theta0: Any, free: np.ndarray, *, t_end: float, solver: str,
               rtol: float, atol: float, steady_tol: float, max_steps: int, n_save: int,
               basis: np.ndarray | None = None,
               progress: ProgressCallback | None = None) -> ModelPath:
    """``dθ/dτ = −∇L`` of ``fld`` from ``theta0`` over the entries ``free`` (module docstring).

    ``max_steps`` bounds the gradient evaluations; ``steady_tol = 0`` runs to ``t_end``.
    The implicit solvers get ``−∇²L`` over the free entries (:meth:`Field.hessian`) as their
    Jacobian; ``nfev`` counts gradients, ``njev`` Hessians.  ``basis`` (n × m, orthonormal
    columns supported on ``free``, with ``theta0``'s free part in their span): the flow of
    ``y = basisᵀ θ``, the Jacobian ``−basisᵀ ∇²L basis`` by ``m`` Hessian-vector products.

    Raises:
        MesadynError: a basis of the wrong shape, off the free entries, or not spanning
            ``theta0``'s free part.
    """
    import numpy as np
    import torch
    from scipy.integrate import solve_ivp

    method = check_model_solver(solver)
    base = np.array(theta0, dtype=np.float64)
    idx = np.flatnonzero(free)
    P = None if basis is None else _check_basis(basis, base, free)
    rec_t: list[float] = []
    rec: list[tuple[np.ndarray, float, float]] = []
    count = [0, 0]
    leak = [0.0]
    fixed = base.copy()
    fixed[idx] = 0.0

    def full(y: np.ndarray) -> np.ndarray:
        if P is not None:
            return fixed + P @ y
        th = base.copy()
        th[idx] = y
        return th

    def fun(t: float, y: np.ndarray) -> np.ndarray:
        count[0] += 1
        th = full(y)
        L, g = fld.loss_and_grad(torch.from_numpy(th))
        g_all = g.detach().cpu().numpy()
        gf = g_all[idx]
        gmax = float(np.abs(gf).max())
        if P is not None:
            g_sub = P.T @ g_all
            leak[0] = max(leak[0], float(np.abs(gf - (P @ g_sub)[idx]).max()))
        if not (np.isfinite(gf).all() and np.isfinite(float(L))):
            raise _Stop(Outcome.DIVERGED, f"the gradient is not finite at τ={t:.6g}")
        if not rec_t or t > rec_t[-1]:
            rec_t.append(float(t))
            rec.append((th, float(L), gmax))
        if steady_tol > 0 and gmax < steady_tol:
            rec_t.append(float(t))
            rec.append((th, float(L), gmax))
            raise _Stop(Outcome.CONVERGED, f"max|∇L| = {gmax:.3g} < steady_tol "
                                           f"{steady_tol:.3g} at τ={t:.6g}")
        if count[0] >= max_steps:
            raise _Stop(Outcome.MAX_STEPS, f"{max_steps} gradient evaluations (max_steps) "
                                           f"reached at τ={t:.6g}")
        if progress is not None:
            progress(float(t))
        return -gf if P is None else -g_sub

    def jac(t: float, y: np.ndarray) -> np.ndarray:
        count[1] += 1
        th = torch.from_numpy(full(y))
        if P is not None:
            HP = fld.batched_hvp(th, torch.from_numpy(np.ascontiguousarray(P.T)))
            J = P.T @ HP.detach().cpu().numpy().T
            return -0.5 * (J + J.T)
        H = fld.hessian(th).detach().cpu().numpy()
        return -H[np.ix_(idx, idx)]

    start = time.perf_counter()
    extra = {"jac": jac} if method in IMPLICIT else {}
    y0 = base[idx] if P is None else P.T @ base
    try:
        sol = solve_ivp(fun, (0.0, float(t_end)), y0, method=method, rtol=rtol,
                        atol=atol, **extra)
    except _Stop as stop:
        status, message = stop.outcome, stop.message
    else:
        if sol.status == 0:
            th = full(sol.y[:, -1])
            L, g = fld.loss_and_grad(torch.from_numpy(th))
            gmax = float(np.abs(g.detach().cpu().numpy()[idx]).max())
            rec_t.append(float(sol.t[-1]))
            rec.append((th, float(L), gmax))
            status = Outcome.T_END
            message = f"reached t_end={t_end:.6g} with max|∇L| = {gmax:.3g}"
        else:
            status, message = Outcome.STEP_FAILED, f"{method}: {sol.message}"
    wall = time.perf_counter() - start
    if not rec:
        raise MesadynError(f"the {method} flow evaluated no point ({message})")
    keep = np.unique(np.linspace(0, len(rec) - 1, min(n_save, len(rec))).round().astype(int))
    return ModelPath(t=np.asarray(rec_t)[keep], theta=np.stack([rec[i][0] for i in keep]),
                     loss=np.asarray([rec[i][1] for i in keep]),
                     grad_max=np.asarray([rec[i][2] for i in keep]), status=status,
                     message=message, nfev=count[0], njev=count[1], solver=f"scipy:{method}",
                     wall_s=wall, subspace=None if P is None else int(P.shape[1]),
                     leak=None if P is None else leak[0])


def _check_basis(basis: Any, theta0: np.ndarray, free: np.ndarray) -> np.ndarray:
    """``basis`` as float64 (n × m), checked: supported on ``free``, orthonormal columns,
    ``theta0``'s free part in their span (to 1e-12 of its size)."""
    import numpy as np

    P = np.asarray(basis, dtype=np.float64)
    n = theta0.shape[0]
    if P.ndim != 2 or P.shape[0] != n or P.shape[1] == 0:
        raise MesadynError(f"basis must have shape ({n}, m) with m >= 1, got {P.shape}")
    if np.abs(P[~free]).max(initial=0.0) > 0:
        raise MesadynError("basis has entries off the free entries of θ")
    if np.abs(P.T @ P - np.eye(P.shape[1])).max() > 1e-12:
        raise MesadynError("basis columns are not orthonormal")
    part = np.where(free, theta0, 0.0)
    off = float(np.abs(part - P @ (P.T @ part)).max())
    if off > 1e-12 * max(1.0, float(np.abs(part).max())):
        raise MesadynError(f"θ0 is not in the span of the basis (largest entry off it {off:.3g})")
    return P


@dataclass(frozen=True)
class ModelSpectrum(Record):
    """The spectrum of ``J = −∇²L`` at a point of a model (:func:`model_spectrum`).

    ``n_zero`` modes have ``|μ| <= zero_rtol · max|μ|``; they are explained by ``inactive``
    entries (no path to ŷ), ``unused`` active entries (a zero Hessian row here) and
    ``symmetry`` (the declared tangents with ``‖H v‖ <= tol ‖v‖``, beyond the former);
    ``unexplained = n_zero − inactive − unused − symmetry``.  ``symmetry_residual`` is the
    largest component of a kept unit tangent outside the zero space.
    """

    n: int
    n_zero: int
    n_stable: int
    n_unstable: int
    inactive: int
    unused: int
    symmetry: int
    declared: int
    unexplained: int
    symmetry_residual: float
    zero_gap: tuple[float, float]
    zero_rtol: float
    leading: list[float] = field(default_factory=list)
    smallest_nonzero: list[float] = field(default_factory=list)
    symmetry_names: list[str] = field(default_factory=list)


def _rank(M: np.ndarray) -> int:
    import numpy as np

    return int(np.linalg.matrix_rank(M, tol=1e-8)) if M.size else 0


def model_spectrum(H: Any, theta: Any, model: Model, *,
                   rtol: float = ZERO_RTOL) -> ModelSpectrum:
    """The spectrum of ``−H`` at ``theta`` of ``model``, zero modes explained
    (:class:`ModelSpectrum`)."""
    import numpy as np

    H = np.asarray(H, np.float64)
    H = 0.5 * (H + H.T)
    th = np.asarray(theta, np.float64)
    n = H.shape[0]
    d = model.dim_of(th)
    mu, V = np.linalg.eigh(-H)
    scale = float(np.abs(mu).max()) if n else 0.0
    tol = rtol * scale
    zero = np.abs(mu) <= tol
    absmu = np.abs(mu)
    gap = (float(absmu[zero].max() / scale) if zero.any() and scale else 0.0,
           float(absmu[~zero].min() / scale) if (~zero).any() and scale else float("inf"))
    act = model.active_mask(d)
    unused = act & (np.abs(H).max(axis=1) <= tol)
    E = np.eye(n)[:, ~act | unused]
    S = model.symmetries(th).copy()
    S[~act | unused] = 0.0
    norms = np.linalg.norm(S, axis=0)
    kept = [j for j in range(S.shape[1])
            if norms[j] > 0 and np.linalg.norm(H @ S[:, j]) <= tol * norms[j]]
    U = S[:, kept] / norms[kept] if kept else np.zeros((n, 0))
    n_sym = _rank(np.concatenate([E, U], axis=1)) - _rank(E)
    Nz = V[:, zero]
    resid = (float(np.abs(U - Nz @ (Nz.T @ U)).max()) if U.shape[1] and Nz.shape[1]
             else float("nan"))
    names = model.symmetry_names(d)
    nz = int(zero.sum())
    order = np.argsort(-absmu)
    nonzero = np.sort(absmu[~zero])
    return ModelSpectrum(
        n=n, n_zero=nz, n_stable=int((mu < -tol).sum()), n_unstable=int((mu > tol).sum()),
        inactive=int((~act).sum()), unused=int(unused.sum()), symmetry=n_sym,
        declared=len(names), unexplained=nz - int((~act).sum()) - int(unused.sum()) - n_sym,
        symmetry_residual=resid, zero_gap=gap, zero_rtol=rtol,
        leading=[float(mu[i]) for i in order[:5]],
        smallest_nonzero=[float(v) for v in nonzero[:5]],
        symmetry_names=[names[j] for j in kept] if len(names) == S.shape[1] else [])

"""Real rotations in the workflows: the 3-D reduced system of their invariant manifold.

For ``rotation="real"`` the paper's diagonal manifold is not invariant, and the flow keeps the
3-D manifold ``(W^KQ_32, W^KQ_23, W^PV_12) = (a, c, b)·I``
(:mod:`mesadyn.analysis.rotation_manifold`), per coordinate the gradient flow of
``ℓ = ½ b² uᵀΓu − b hᵀu``, ``u = (a, c)``, with minima ``b·u = k* = Γ⁻¹h`` and the conserved
``Δ = a² + c² − b²``.  This module gives the workflows what they need of it:

- :func:`manifold_system` — its five constants for a process: in closed form at r = 1
  without noise (:func:`mesadyn.theory.rotation_constants`), read off the exact field
  otherwise (:meth:`~mesadyn.analysis.rotation_manifold.ManifoldSystem.from_field`);
- :func:`theory_result` — ``mesadyn theory``'s :class:`~mesadyn.workflows.theory.Result` for
  it: the paper's keys where they mean the same (``c1 = g11``, ``c2 = h1``: the coefficients
  of the ``c = 0`` plane; ``ab_star = k*_1``, the product ab at every minimum) and new keys for
  the third coordinate (``g12, g22, h2``, ``cb_star = k*_2``);
- :func:`run_reduced` — ``integrate --reduced``: the 3-D flow from the diagonal start
  ``(a0, 0, b0)`` against its closed-form limit (:class:`ManifoldResult`);
- :func:`relabel_ends` — ``ensemble``: the end points classified against the manifold's fixed
  points (:func:`~mesadyn.analysis.rotation_manifold.classify_ends`).

``stability`` is :mod:`mesadyn.workflows._manifold_stability`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import MesadynError
from ..outcome import Outcome
from ..process import NoReducedSystem
from ..progress import ProgressCallback
from ..record import hidden
from .integrate import ReducedResult

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

    from ..analysis.rotation_manifold import ManifoldSystem
    from . import integrate, theory
    from ._common import ProcessOptions

__all__ = ["CLOSED_FORM", "FROM_FIELD", "SCIPY_METHODS", "ManifoldResult", "manifold_system",
           "relabel_ends", "run_reduced", "theory_result"]

#: Where :func:`manifold_system`'s constants come from.
CLOSED_FORM, FROM_FIELD = "closed form", "exact field"
#: The solvers of the 3-D flow (:func:`scipy.integrate.solve_ivp`; ``auto`` is LSODA with the
#: exact Jacobian, as for the stiff full flow).
SCIPY_METHODS = ("LSODA", "Radau", "BDF", "RK45", "DOP853")
#: The automatic horizon is three times the time the flow takes to come within this (times
#: ``max(1, ‖start‖)``) of its closed-form limit, and at least ``50/‖h‖`` (the saddle's rate).
SETTLE_TOL = 1e-9


def manifold_system(options: ProcessOptions) -> tuple[ManifoldSystem, str]:
    """The 3-D system of real rotations for the process of ``options`` and where its constants
    come from (:data:`CLOSED_FORM` or :data:`FROM_FIELD`).

    ## Raises
    - `NoReducedSystem`: a family outside Assumption 4.1 or without exact moments (the
      manifold is invariant for sign-symmetric exchangeable tokens).
    """
    from ..analysis.rotation_manifold import ManifoldSystem
    from ..field import make_field
    from ..theory import rotation_constants

    fam = options.family()
    if not (fam.exact_moments and fam.assumption_41):
        raise NoReducedSystem(
            f"family {fam.name!r} with rotation=real has no 3-D reduced system: the manifold "
            "(W^KQ_32, W^KQ_23, W^PV_12) = (a, c, b)·I is invariant for sign-symmetric "
            "exchangeable tokens with exact moments (Assumption 4.1)")
    if options.radius == 1 and options.noise == 0:
        return ManifoldSystem.from_constants(rotation_constants(fam, options.T)), CLOSED_FORM
    return ManifoldSystem.from_field(make_field(options.field_spec("exact"))), FROM_FIELD


def _ab_limit(options: ProcessOptions) -> float:
    """The T → ∞ limit of ``k*_1`` (:func:`~mesadyn.analysis.rotation_manifold.k_limit`) at
    r = 1 without noise; NaN otherwise (not derived)."""
    from ..analysis.rotation_manifold import k_limit

    if options.radius != 1 or options.noise != 0:
        return math.nan
    return float(k_limit(options.family())[0])


def theory_result(config: theory.Config) -> theory.Result:
    """``mesadyn theory`` for real rotations (module docstring)."""
    from .theory import Result

    fam = config.family()
    ms, how = manifold_system(config)
    k1, k2 = (float(v) for v in ms.k_star)
    kappa1, kappa2, kappa3 = fam.kappas()
    return Result(
        family=fam.name, d=fam.d, T=config.T, kappa1=kappa1, kappa2=kappa2, kappa3=kappa3,
        c1=ms.g11, c2=ms.h1, ab_star=k1, ab_limit=_ab_limit(config), ratio=None,
        assumption_4_1=fam.assumption_41, radius=config.radius, rotation=str(config.rotation),
        noise=config.noise, g12=ms.g12, g22=ms.g22, h2=ms.h2, cb_star=k2, status=Outcome.OK,
        message=(f"the 3-D manifold (W^KQ_32, W^KQ_23, W^PV_12) = (a, c, b)·I, constants from "
                 f"the {how}: every minimum has b·(a, c) = k* = Γ⁻¹h = ({k1:.12g}, {k2:.12g}); "
                 f"c2/c1 = {ms.one_step_k:.12g} is the best predictor with c = 0"))


@dataclass(frozen=True, kw_only=True)
class ManifoldResult(ReducedResult):
    """The 3-D flow of real rotations from ``(a0, c0, b0)`` (``c0 = 0``: the diagonal start)
    against its closed-form limit; the keys of :class:`~mesadyn.workflows.integrate.
    ReducedResult` where they mean the same (``c1 = g11``, ``c2 = h1``, ``ab_theory = k*_1``,
    ``a_limit``, ``b_limit``; ``invariant_drift`` of ``Δ = a² + c² − b²``), and for the third
    coordinate ``c0, c, cb`` (``= c·b``), ``cb_theory = k*_2``, ``c_limit`` and the constants
    ``g12, g22, h2``.  ``limit_error`` is ``max |(a, c, b) − limit|`` at the end; there is no
    closed-form trajectory, so ``closed_form_max_error`` is NaN."""

    c0: float
    c: float
    cb: float
    cb_theory: float
    c_limit: float
    g12: float
    g22: float
    h2: float
    limit_error: float
    tau: np.ndarray = hidden()
    states: np.ndarray = hidden()
    system: ManifoldSystem | None = hidden()

    def to_dataset(self) -> xr.Dataset:
        """The trajectory over ``tau``: a, c, b, ℓ (per coordinate), max|∇ℓ| and Δ."""
        import numpy as np
        import xarray as xr

        assert self.system is not None
        ms, y = self.system, self.states
        loss = np.array([ms.loss(*s) for s in y])
        grad = np.array([float(np.abs(ms.rhs(*s)).max()) for s in y])
        inv = np.array([ms.invariant(*s) for s in y])
        attrs = {k: v for k, v in self.to_dict().items()
                 if isinstance(v, int | float | str) and not isinstance(v, bool)}
        return xr.Dataset({"a": ("tau", y[:, 0]), "c": ("tau", y[:, 1]), "b": ("tau", y[:, 2]),
                           "loss": ("tau", loss), "grad_max": ("tau", grad),
                           "invariant": ("tau", inv)}, coords={"tau": self.tau}, attrs=attrs)


def _method(solver: str) -> str:
    """The scipy method of ``solver`` (``auto``: LSODA), or a one-line refusal naming it."""
    name = solver.split(":", 1)[1] if solver.startswith("scipy:") else solver
    if name == "auto":
        return "LSODA"
    if name not in SCIPY_METHODS:
        why = ("it has no closed-form trajectory, only its limit" if name == "closed_form"
               else "it is integrated by scipy's solve_ivp")
        raise MesadynError(f"solver={solver!r} does not integrate the 3-D rotation system ({why}); "
                           f"use auto or one of {', '.join(SCIPY_METHODS)}")
    return name


def _horizon(ms: ManifoldSystem, y0: tuple[float, float, float], method: str, rtol: float,
             atol: float) -> float:
    """The automatic horizon (:data:`SETTLE_TOL`): ``max(3 τ_s, 50/‖h‖)`` with ``τ_s`` the
    first time within ``SETTLE_TOL·max(1, ‖y0‖)`` of a closed-form fixed point of the start's
    level set, or ``10⁶/‖h‖`` if the flow never comes that close (a start on the saddle's
    stable manifold)."""
    import numpy as np

    cands = ms.limit_candidates(*y0)
    tol = SETTLE_TOL * max(1.0, float(np.abs(y0).max()))

    def near(_t: float, y: np.ndarray) -> float:
        return min(float(np.abs(y - p).max()) for p in cands) - tol

    near.terminal = True  # type: ignore[attr-defined]
    rate = ms.saddle_rate
    cap = 1e6 / rate
    if near(0.0, np.asarray(y0)) <= 0:
        return 50.0 / rate
    sol = ms.solve(y0, cap, method=method, rtol=rtol, atol=atol, events=near)
    hit = sol.t_events[0] if sol.t_events else []
    settle = float(hit[0]) if len(hit) else cap
    return max(3.0 * settle, 50.0 / rate)


def full_flow_horizon(config: integrate.Config, ms: ManifoldSystem) -> float:
    """The horizon of ``integrate``'s full flow from the diagonal start ``(a0, b0)``: that
    start lies on the manifold, which the full flow keeps, so it is the 3-D flow's automatic
    horizon (:func:`_horizon`) from ``(a0, 0, b0)``."""
    return _horizon(ms, (config.a0, 0.0, config.b0), _method("auto"), config.rtol, config.atol)


def limit_of(config: ProcessOptions) -> float:
    """The T → ∞ limit of ``k*_1`` the commands report as ``ab_limit`` (NaN where not
    derived)."""
    return _ab_limit(config)


def run_reduced(config: integrate.Config,
                progress: ProgressCallback | None = None) -> ManifoldResult:
    """``integrate --reduced`` for real rotations: the 3-D flow of the manifold from the
    diagonal start ``(a0, 0, b0)`` to ``t_end`` (or the automatic :func:`_horizon`), by
    scipy's ``solve_ivp`` (``solver``: auto is LSODA with the exact Jacobian; ``rtol``,
    ``atol``; ``n_save`` points saved), against the closed-form fixed point of its level set.

    ``status`` as for the 2-D flow: ``converged`` when max|∇ℓ| < ``steady_tol`` at the end
    away from the origin, ``saddle`` at the origin, ``t_end`` otherwise, ``step_failed`` when
    the solver fails.
    """
    import numpy as np

    from ..flow import SolverStats
    from ._run import write_run
    from .integrate import _check_out

    _check_out(config)
    fam = config.family()
    ms, how = manifold_system(config)
    method = _method(config.solver)
    y0 = (config.a0, 0.0, config.b0)
    t0 = time.perf_counter()
    horizon = (_horizon(ms, y0, method, config.rtol, config.atol) if config.t_end is None
               else config.t_end)
    sol = ms.solve(y0, horizon, method=method, rtol=config.rtol, atol=config.atol,
                   dense_output=True)
    wall = time.perf_counter() - t0
    # n_save points of the solver's own interpolant (its accuracy between the steps)
    tau = np.linspace(0.0, float(sol.t[-1]), config.n_save)
    states = (sol.sol(tau).T if sol.sol is not None and sol.t[-1] > 0
              else np.repeat(sol.y[:, -1:].T, tau.size, axis=0))
    states[-1] = sol.y[:, -1]
    end = sol.y[:, -1]
    grad = float(np.abs(ms.rhs(*end)).max())
    k, ks = end[2] * end[:2], ms.k_star
    if not sol.success:
        status, message = Outcome.STEP_FAILED, f"the 3-D flow failed: {sol.message}"
    elif grad < config.steady_tol and np.linalg.norm(k) < 0.5 * np.linalg.norm(ks):
        status = Outcome.SADDLE
        message = (f"reached t_end={horizon:.6g} at the saddle at the origin (max|∇ℓ| = "
                   f"{grad:.3g}: on its stable manifold)")
    elif grad < config.steady_tol:
        status = Outcome.CONVERGED
        message = f"reached t_end={horizon:.6g} ({method}); max|∇ℓ| < {config.steady_tol:.3g} there"
    else:
        status = Outcome.T_END
        message = f"reached t_end={horizon:.6g} ({method}) with max|∇ℓ| = {grad:.3g}"
    cands = ms.limit_candidates(*y0)
    lim = min(cands, key=lambda p: float(np.abs(end - p).max()))
    inv = np.array([ms.invariant(*s) for s in sol.y.T])
    if progress is not None:
        progress(float(sol.t[-1]))
    n_acc = max(len(sol.t) - 1, 0)
    stats = SolverStats(nfev=int(sol.nfev), njev=int(sol.njev), n_accepted=n_acc,
                        n_rejected=None, n_monitor=None, wall_s=wall)
    result = ManifoldResult(
        family=fam.name, d=fam.d, T=config.T, c1=ms.g11, c2=ms.h1, a0=config.a0, b0=config.b0,
        a=float(end[0]), b=float(end[2]), ab=float(end[0] * end[2]), ab_theory=float(ks[0]),
        ab_limit=_ab_limit(config), a_limit=float(lim[0]), b_limit=float(lim[2]),
        invariant_drift=float(np.abs(inv - inv[0]).max()), closed_form_max_error=math.nan,
        t_end=horizon, t_final=float(sol.t[-1]),
        constants=f"3-D rotation manifold ({how})", stats=stats, solver=method,
        backend="scipy", out=config.out, status=status, message=message,
        c0=0.0, c=float(end[1]), cb=float(end[1] * end[2]), cb_theory=float(ks[1]),
        c_limit=float(lim[1]), g12=ms.g12, g22=ms.g22, h2=ms.h2,
        limit_error=float(np.abs(end - lim).max()), tau=tau, states=states, system=ms)
    return write_run(config, result)


def relabel_ends(rows: xr.Dataset, k_star: np.ndarray, inert: np.ndarray) -> xr.Dataset:
    """An ensemble chunk's rows (:func:`~mesadyn.workflows._ensemble_rows.chunk_rows`) with the
    end points classified against the 3-D manifold's fixed points
    (:func:`~mesadyn.analysis.rotation_manifold.classify_ends`: the branches ``±(k*/b, b)``,
    ``dense`` off the manifold) and ``off_structure`` the distance from the manifold
    (:func:`~mesadyn.analysis.rotation_manifold.off_manifold`, inert entries left out)."""
    import numpy as np

    from ..analysis.rotation_manifold import classify_ends, off_manifold

    theta = rows["theta"].values
    status = rows["status"].values.astype(str)
    stationary = np.isin(status, [Outcome.CONVERGED.value, Outcome.SADDLE.value])
    out = rows.copy()
    out["outcome"] = ("traj", classify_ends(theta, stationary, k_star, inert=inert))
    out["off_structure"] = ("traj", off_manifold(theta, inert))
    return out

"""The gradient flow, reduced (Lemma 5.2, against its closed form) or full (Eq. 2).

``Config(reduced=True)`` integrates the 2-D system numerically and compares it with the
closed form; otherwise the whole θ follows ``dθ/dτ = −∇L`` for the exact, Monte-Carlo or
finite-sample field, and a diagonal start is compared with the closed-form reduced trajectory.
The horizon, when not given, is :meth:`ReducedSystem.horizon
<mesadyn.reduced.ReducedSystem.horizon>` (well past settling); the automatic solver is
:func:`mesadyn.flow.default_solver`.

Statuses are honest: a full flow that stops at once because its gradient is below
``steady_tol`` is reported ``converged`` only if its start is a fixed point by a scale-free
gradient test (a Newton step that is negligible against θ); otherwise ``failed``, with the
``steady_tol`` that would let it move.  A Monte-Carlo or finite-sample flow expected to take
longer than a minute (by the field's own cost model) is refused before anything is built,
unless ``force=True``.

Example:
    >>> from mesadyn.workflows import integrate
    >>> res = integrate.run(integrate.Config(reduced=True, a0=0.5, b0=1.5))
    >>> res.status, round(res.ab, 6)
    ('t_end', 0.191905)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import MesadynError, check_finite, check_int, check_positive
from ..progress import ProgressCallback
from ..tolerances import ZERO_RTOL
from ._common import Init, check_init, choice, optional_path, set_fields
from ._device import DeviceOptions

if TYPE_CHECKING:
    import torch

    from ..field import Field
    from ..flow import FlowResult, ReducedFlowResult, SolverStats
    from ..process import Family
    from ..reduced import ReducedSystem

__all__ = ["Config", "FullResult", "Interval", "ReducedResult", "RepeatedResult", "Result",
           "check_cost", "end_point", "estimate_seconds", "relaxation_time", "run",
           "run_full", "run_reduced", "run_repeated", "sampled_flow_seconds"]

#: A Monte-Carlo / finite-sample full flow expected to run longer than this is refused
#: unless ``force`` is set.
COST_LIMIT_S = 60.0
#: Lower bound on the gradient evaluations of a full flow to its steady state (the exact
#: d = 3, T = 20 flows of the golden tests take 347 and 881 with LSODA at rtol 1e-10).
MIN_FULL_FLOW_EVALS = 200
#: A start is a fixed point when the Newton step ``‖H⁺∇L‖`` is below this times ``max(1, ‖θ‖)``.
FIXED_POINT_RTOL = 1e-6
#: A sampled flow that has not settled at the exact horizon continues for this many times the
#: linearised relaxation time of its slowest mode (:func:`relaxation_time`): the estimate
#: assumes the gradient left lies along that mode and decays at the curvature measured where
#: the first leg ended; 3 covers curvature that changes by a factor of 3 on the way.
RELAXATION_SAFETY = 3.0
#: At most this many continuations (each re-measures the slowest mode where the last ended).
MAX_CONTINUATIONS = 4
#: Keys of the run-file config, in the order they are recorded.
_CONFIG_KEYS = ("x1", "sigma", "scale", "d", "T", "seed", "a0", "b0", "solver", "rtol", "atol",
                "t_end", "max_steps", "n_save", "field", "samples", "m", "mask", "init",
                "sigma_w", "steady_tol")


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of one flow; see :func:`mesadyn.flow.integrate` for the solver options.

    ``solver="auto"`` is :func:`mesadyn.flow.default_solver`; ``t_end=None`` takes the
    closed-form horizon; ``field`` (exact, mc, finite), ``samples``, ``m``, ``mask`` (none or
    diagonal), ``init`` (diagonal or gaussian), ``sigma_w`` and ``steady_tol`` apply to the
    full flow; ``out`` is a ``.nc`` run file; ``force`` runs a sampled full flow even when it
    is expected to take longer than a minute; ``repeats = K >= 2`` runs a sampled flow on K
    independent sample sets (seeds ``seed .. seed+K−1``) and reports its end point with error
    bars (:class:`RepeatedResult`); ``device`` (cpu, cuda, auto: :class:`DeviceOptions`) is
    where the full flow's field is evaluated.
    """

    reduced: bool = False
    a0: float = 0.5
    b0: float = 1.5
    solver: str = "auto"
    rtol: float = 1e-10
    atol: float = 1e-12
    t_end: float | None = None
    field: str = "exact"
    samples: int = 100_000
    m: int = 10_000
    mask: str = "none"
    init: str = "diagonal"
    sigma_w: float = 0.01
    steady_tol: float = 1e-9
    max_steps: int = 100_000
    n_save: int = 200
    out: str | None = None
    force: bool = False
    repeats: int = 1

    def __post_init__(self) -> None:
        from ..field import FieldKind
        from ..flow import AUTO, resolve_solver
        from ..io import NETCDF_SUFFIXES
        from ..model import Mask

        super().__post_init__()
        init, a0, b0, sigma_w = check_init(self.init, self.a0, self.b0, self.sigma_w)
        steady = check_finite("steady_tol", self.steady_tol)
        if steady < 0:
            raise MesadynError(f"steady_tol must be >= 0, got steady_tol={self.steady_tol!r}")
        set_fields(
            self, init=init, a0=a0, b0=b0, sigma_w=sigma_w, steady_tol=steady,
            reduced=bool(self.reduced), force=bool(self.force),
            rtol=check_positive("rtol", self.rtol), atol=check_positive("atol", self.atol),
            t_end=None if self.t_end is None else check_positive("t_end", self.t_end),
            field=choice("field", self.field, FieldKind),
            samples=check_int("samples", self.samples, 2), m=check_int("m", self.m, 1),
            mask=choice("mask", self.mask, Mask),
            max_steps=check_int("max_steps", self.max_steps, 1),
            n_save=check_int("n_save", self.n_save, 2), out=optional_path("out", self.out),
        )
        set_fields(self, repeats=check_int("repeats", self.repeats, 1))
        if self.repeats > 1:
            if self.reduced or self.field == FieldKind.EXACT:
                raise MesadynError(
                    f"repeats={self.repeats} draws independent sample sets: it needs "
                    "field='mc' or 'finite' (the exact and reduced flows have no sampling error)")
            if self.out is not None:
                raise MesadynError(f"a run file holds one flow; give no out with "
                                   f"repeats={self.repeats}")
        if self.solver != AUTO:
            resolve_solver(self.solver)  # a bad name fails before any field is built
        if self.out is not None and not self.out.lower().endswith(NETCDF_SUFFIXES):
            raise MesadynError(f"run files are netCDF: give a path ending in .nc, got {self.out!r}")

    def run_config(self, solver: str) -> dict[str, object]:
        """What a run file records about this flow (plain strings and numbers)."""
        values = {k: getattr(self, k) for k in _CONFIG_KEYS}
        values["solver"] = solver
        if self.reduced:
            values = {k: v for k, v in values.items() if k in _CONFIG_KEYS[:14]}
        plain = {k: (str(v) if isinstance(v, str) else v) for k, v in values.items()}
        return {"command": "integrate", **({"reduced": True} if self.reduced else {}), **plain}


@dataclass(frozen=True)
class SolverReport:
    """How the solver went: the outcome and the counts of :class:`mesadyn.flow.SolverStats`."""

    status: str
    message: str
    solver: str
    backend: str
    stats: SolverStats

    @classmethod
    def of(cls, res: FlowResult | ReducedFlowResult, status: str | None = None,
           message: str | None = None) -> SolverReport:
        """The report of a flow result (with the workflow's own verdict, when given)."""
        return cls(status=str(res.status) if status is None else status,
                   message=res.message if message is None else message,
                   solver=res.solver, backend=res.backend, stats=res.solver_stats)

    def to_dict(self, *, monitor: bool) -> dict[str, Any]:
        """The solver keys of the ``--json`` object (``n_monitor`` for the full flow)."""
        s = self.stats
        out: dict[str, Any] = {"nfev": s.nfev, "njev": s.njev, "n_accepted": s.n_accepted,
                               "n_rejected": s.n_rejected}
        if monitor:
            out["n_monitor"] = s.n_monitor
        return {**out, "status": self.status, "message": self.message, "solver": self.solver,
                "backend": self.backend, "wall_s": s.wall_s}


@dataclass(frozen=True)
class ReducedResult:
    """The reduced flow from ``(a0, b0)`` against its closed form and limit (Lemma 5.2)."""

    family: str
    d: int
    T: int
    c1: float
    c2: float
    a0: float
    b0: float
    a: float
    b: float
    ab: float
    ab_theory: float
    ab_limit: float
    a_limit: float
    b_limit: float
    invariant_drift: float
    closed_form_max_error: float
    t_end: float
    t_final: float
    constants: str
    solver: SolverReport
    out: str | None = None
    flow: ReducedFlowResult | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def status(self) -> str:
        """The flow's status (``converged``, ``t_end``, ``max_steps`` or ``failed``)."""
        return self.solver.status

    def to_dict(self) -> dict[str, Any]:
        """The ``mesadyn integrate --reduced --json`` object."""
        out: dict[str, Any] = {
            "family": self.family, "d": self.d, "T": self.T, "c1": self.c1, "c2": self.c2,
            "a0": self.a0, "b0": self.b0, "a": self.a, "b": self.b, "ab": self.ab,
            "ab_theory": self.ab_theory, "ab_limit": self.ab_limit, "a_limit": self.a_limit,
            "b_limit": self.b_limit, "invariant_drift": self.invariant_drift,
            "closed_form_max_error": self.closed_form_max_error, "t_end": self.t_end,
            "t_final": self.t_final, "constants": self.constants,
            **self.solver.to_dict(monitor=False),
        }
        if self.out is not None:
            out["out"] = self.out
        return out


@dataclass(frozen=True)
class FullResult:
    """The full flow's end point against the theory; ``flow`` holds the trajectory.

    ``status`` is the honest one (see :func:`honest_status`); it can be ``failed`` where the
    solver's own ``flow.status`` says ``converged`` at τ = 0.
    """

    family: str
    d: int
    T: int
    field: str
    mask: str
    init: str
    W_KQ: np.ndarray = dataclasses.field(compare=False)
    W_PV: np.ndarray = dataclasses.field(compare=False)
    ab: np.ndarray = dataclasses.field(compare=False)
    ab_mean: float
    ab_theory: float | None
    ab_limit: float | None
    loss: float
    grad_norm: float
    invariant_drift: float
    reduced_max_deviation: float | None
    off_structure_max: float | None
    reduced_constants: str | None
    t_end: float
    t_final: float
    steady_tol: float
    solver: SolverReport
    rtol: float
    atol: float
    stiffness_ratio: float | None
    out: str | None = None
    flow: FlowResult | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def status(self) -> str:
        """The flow's status (``converged``, ``t_end``, ``max_steps`` or ``failed``)."""
        return self.solver.status

    @property
    def converged(self) -> bool:
        return self.solver.status == "converged"

    def to_dict(self) -> dict[str, Any]:
        """The ``mesadyn integrate --json`` object."""
        out: dict[str, Any] = {
            "family": self.family, "d": self.d, "T": self.T, "field": self.field,
            "mask": self.mask, "init": self.init, "W_KQ": self.W_KQ.tolist(),
            "W_PV": self.W_PV.tolist(), "ab": self.ab.tolist(), "ab_mean": self.ab_mean,
            "ab_theory": self.ab_theory, "ab_limit": self.ab_limit, "loss": self.loss,
            "grad_norm": self.grad_norm, "converged": self.converged,
            "invariant_drift": self.invariant_drift,
            "reduced_max_deviation": self.reduced_max_deviation,
            "off_structure_max": self.off_structure_max,
            "reduced_constants": self.reduced_constants, "t_end": self.t_end,
            "t_final": self.t_final, "steady_tol": self.steady_tol,
            **self.solver.to_dict(monitor=True), "rtol": self.rtol, "atol": self.atol,
            "stiffness_ratio": self.stiffness_ratio,
        }
        if self.out is not None:
            out["out"] = self.out
        return out


@dataclass(frozen=True)
class Interval:
    """An end-point quantity over K sample sets: the mean, its standard error ``SD/√K`` and the
    95% interval ``mean ± t_{0.975, K−1} SE`` (Student's t), with the exact flow's value."""

    name: str
    values: tuple[float, ...]
    mean: float
    se: float
    lo: float
    hi: float
    exact: float | None

    @classmethod
    def of(cls, name: str, values: list[float], exact: float | None) -> Interval:
        """The interval of ``values`` (K >= 2 finite numbers, else the statistics are nan)."""
        from scipy.stats import t as student

        x = np.asarray(values, dtype=np.float64)
        k = len(x)
        if k < 2 or not np.isfinite(x).all():
            nan = math.nan
            return cls(name, tuple(values), float(np.mean(x)) if k else nan, nan, nan, nan,
                       exact)
        mean = float(x.mean())
        se = float(x.std(ddof=1) / math.sqrt(k))
        half = float(student.ppf(0.975, k - 1)) * se
        return cls(name, tuple(float(v) for v in x), mean, se, mean - half, mean + half, exact)

    @property
    def covers_exact(self) -> bool | None:
        """Whether the 95% interval contains the exact value (None without one)."""
        if self.exact is None or not math.isfinite(self.se):
            return None
        return self.lo <= self.exact <= self.hi

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "se": self.se, "ci95": [self.lo, self.hi],
                "exact": self.exact, "exact_in_ci95": self.covers_exact,
                "bias_over_se": (None if self.exact is None or not self.se > 0
                                 else (self.mean - self.exact) / self.se),
                "values": list(self.values)}


#: The end-point quantities of :class:`RepeatedResult`, in their order.
QUANTITIES = ("ab", "loss", "grad_norm", "off_diagonal_norm", "hessian_min", "hessian_max")


def end_point(res: FullResult) -> dict[str, float]:
    """The end-point quantities of one full flow (:data:`QUANTITIES`): mean ab over the
    coordinates, the loss and max|∇L| there, the distance ``‖θ − θ_diag‖₂`` from the diagonal
    structure (Assumption 3.1's entries), and the extreme eigenvalues of ``∇²L`` over the free
    coordinates (nan where the flow's end point has no spectrum)."""
    from ..model import Mask, free_mask

    theta = res.flow.final if res.flow is not None else np.full(18 * res.d * res.d, np.nan)
    off = ~free_mask(Mask.diagonal, res.d)
    eig = None if res.flow is None else res.flow.hessian_eigenvalues
    return {"ab": res.ab_mean, "loss": res.loss, "grad_norm": res.grad_norm,
            "off_diagonal_norm": float(np.linalg.norm(theta[off])),
            "hessian_min": math.nan if eig is None or not len(eig) else float(eig.min()),
            "hessian_max": math.nan if eig is None or not len(eig) else float(eig.max())}


@dataclass(frozen=True)
class RepeatedResult:
    """A sampled flow on K independent sample sets (seeds ``seed .. seed+K−1``, the same start):
    each end-point quantity with a standard error and a 95% interval, against the exact flow
    from the same start (``exact``; None when the family has no exact field).

    The sampled end point is the fixed point of ``L̂``, a smooth function of the empirical
    moments, so it is biased by O(1/N) and spread by O(1/√N) (``docs/sampled-fields.md``): the
    interval is for the mean of the sampled end point, and covers the exact value only while the
    bias is small against ``SE ≈ SD/√K``.
    """

    family: str
    d: int
    T: int
    field: str
    draws: int
    seeds: tuple[int, ...]
    quantities: dict[str, Interval]
    runs: tuple[FullResult, ...] = dataclasses.field(repr=False, compare=False)
    exact: FullResult | None = dataclasses.field(default=None, repr=False, compare=False)
    wall_s: float = 0.0

    @property
    def repeats(self) -> int:
        return len(self.seeds)

    @property
    def statuses(self) -> tuple[str, ...]:
        return tuple(r.status for r in self.runs)

    @property
    def status(self) -> str:
        """``converged`` when every flow converged, else the first other status (``failed``
        before ``max_steps`` before ``t_end``)."""
        for worst in ("failed", "max_steps", "t_end"):
            if worst in self.statuses:
                return worst
        return "converged"

    @property
    def message(self) -> str:
        bad = [f"seed {s}: {r.status} ({r.solver.message})"
               for s, r in zip(self.seeds, self.runs, strict=True) if r.status != "converged"]
        n_ok = self.repeats - len(bad)
        return f"{n_ok} of {self.repeats} flows converged" + ("; " + "; ".join(bad) if bad else "")

    def to_dict(self) -> dict[str, Any]:
        """The ``mesadyn integrate --repeats K --json`` object."""
        return {
            "family": self.family, "d": self.d, "T": self.T, "field": self.field,
            "draws": self.draws, "repeats": self.repeats, "seeds": list(self.seeds),
            "status": self.status, "message": self.message, "statuses": list(self.statuses),
            "quantities": {k: v.to_dict() for k, v in self.quantities.items()},
            "exact": None if self.exact is None else {
                "status": self.exact.status, **end_point(self.exact)},
            "t_final": [r.t_final for r in self.runs],
            "nfev": [r.solver.stats.nfev for r in self.runs],
            "wall_s": self.wall_s,
        }


#: What :func:`run` returns.
Result = ReducedResult | FullResult | RepeatedResult


def run(config: Config, progress: ProgressCallback | None = None, *,
        build_progress: ProgressCallback | None = None) -> Result:
    """The reduced (``config.reduced``) or the full gradient flow; see the module docstring.

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the flow time τ after each accepted step.
    - `build_progress`: called with the fraction done while a sampled field is built.

    ## Returns
    A :class:`ReducedResult`, a :class:`FullResult`, or with ``repeats >= 2`` a
    :class:`RepeatedResult`; ``result.status`` is the flow's.

    ## Raises
    - `MesadynError`: an unwritable ``out``; no horizon for a family without a reduced system;
      a sampled flow expected to exceed a minute without ``force``.
    """
    if config.reduced:
        return run_reduced(config, progress)
    if config.repeats > 1:
        return run_repeated(config, progress, build_progress=build_progress)
    return run_full(config, progress, build_progress=build_progress)


def run_repeated(config: Config, progress: ProgressCallback | None = None, *,
                 build_progress: ProgressCallback | None = None) -> RepeatedResult:
    """The sampled flow of ``config`` on ``config.repeats`` sample sets, one after the other
    (seeds ``seed + k``; the start θ0 stays the one ``seed`` gives), and the exact flow from the
    same start; see :class:`RepeatedResult`.

    ## Raises
    `MesadynError`: as :func:`run_full`; the cost guard counts all K flows.
    """
    import time

    from ..field import FieldKind

    start = time.perf_counter()
    K = config.repeats
    draws = config.samples if FieldKind(config.field) is FieldKind.MC else config.m
    per = sampled_flow_seconds(config.d, config.T, draws,
                               single_coordinate=config.family().single_coordinate)
    check_cost(K * per, f"{K} {config.field} full flows", config.force)
    one = dataclasses.replace(config, repeats=1, force=True)
    runs = []
    for k in range(K):
        cfg = dataclasses.replace(one, seed=config.seed + k)
        theta0 = _theta0(config)  # the start of seed `config.seed`, whatever the draws' seed
        runs.append(run_full(cfg, progress, build_progress=build_progress, theta0=theta0))
    exact: FullResult | None
    try:
        exact = run_full(dataclasses.replace(one, field="exact"), theta0=_theta0(config))
    except MesadynError:  # no exact moments for this process
        exact = None
    ends = [end_point(r) for r in runs]
    ref = None if exact is None else end_point(exact)
    quantities = {q: Interval.of(q, [e[q] for e in ends], None if ref is None else ref[q])
                  for q in QUANTITIES}
    return RepeatedResult(
        family=runs[0].family, d=runs[0].d, T=config.T, field=str(config.field), draws=draws,
        seeds=tuple(config.seed + k for k in range(K)), quantities=quantities,
        runs=tuple(runs), exact=exact, wall_s=time.perf_counter() - start)


def _theta0(config: Config) -> torch.Tensor:
    from ._common import initial_theta

    return initial_theta(Init(config.init), config.d, config.a0, config.b0, config.sigma_w,
                         config.seed)


def _check_out(config: Config) -> None:
    from ..io import NETCDF_SUFFIXES, check_writable

    if config.out is not None:
        check_writable(config.out, suffixes=NETCDF_SUFFIXES)


def run_reduced(config: Config, progress: ProgressCallback | None = None) -> ReducedResult:
    """Lemma 5.2's 2-D flow from ``(a0, b0)``, solved numerically and in closed form."""
    from ..flow import AUTO, default_solver, integrate_reduced
    from ..reduced import ReducedSystem

    _check_out(config)
    fam = config.family()
    c = config.constants()
    system = ReducedSystem(c.c1, c.c2)
    horizon = system.horizon(config.a0, config.b0) if config.t_end is None else config.t_end
    solver = config.solver
    if solver == AUTO:  # stiffness-aware: the closed form sizes the explicit solver's steps
        solver = default_solver(True, system=system, a0=config.a0, b0=config.b0, t_end=horizon)
    res = integrate_reduced(system, config.a0, config.b0, t_end=horizon, solver=solver,
                            rtol=config.rtol, atol=config.atol,
                            max_steps=config.max_steps, n_save=config.n_save, progress=progress)
    if config.out is not None:
        from ..io import save_run

        save_run(res.to_dataset(), config.out, kind="integrate-reduced",
                 config=config.run_config(solver), seed=config.seed)
    a_lim, b_lim = system.limit(config.a0, config.b0)
    return ReducedResult(
        family=fam.name, d=fam.d, T=c.T, c1=c.c1, c2=c.c2, a0=config.a0, b0=config.b0,
        a=float(res.a[-1]), b=float(res.b[-1]), ab=float(res.ab[-1]), ab_theory=c.ab_star,
        ab_limit=c.ab_limit, a_limit=a_lim, b_limit=b_lim,
        invariant_drift=res.invariant_drift(),
        closed_form_max_error=res.closed_form_max_error(), t_end=horizon,
        t_final=float(res.t[-1]),
        constants="Lemma 5.3" if fam.assumption_41 else "Lemma A.5 (masked)",
        solver=SolverReport.of(res), out=config.out, flow=res,
    )


def full_horizon(config: Config, fam: Family, system: ReducedSystem | None,
                 why: str | None = None) -> float:
    """τ horizon of a full flow: the given ``t_end``, else the reduced system's horizon.

    From a gaussian start near the saddle at the origin, escape takes ``~ log(1/σ_w)/c2``
    longer; a family outside Assumption 4.1 without the diagonal mask leaves the diagonal
    structure along slower directions (Proposition 4.2), so its horizon is 20× longer.
    """
    from ..model import Mask

    if config.t_end is not None:
        return config.t_end
    if system is None:
        reason = why or f"family {fam.name!r} has no reduced system"
        raise MesadynError(f"{reason}: nothing sizes the horizon; give t_end (--t-end)")
    if config.init is Init.DIAGONAL:
        horizon = system.horizon(config.a0, config.b0)
    else:
        sw = config.sigma_w
        horizon = system.horizon(sw, sw) * max(1.0, math.log(1 / sw))
    if not (fam.assumption_41 or config.mask == Mask.diagonal):
        horizon *= 20.0
    return horizon


def sampled_flow_seconds(d: int, T: int, m: int, flows: int = 1, *,
                         single_coordinate: bool = False) -> float:
    """A lower bound on the wall time of ``flows`` full flows of one sampled field with ``m``
    draws at ``(d, T)``, before anything is built: :data:`MIN_FULL_FLOW_EVALS` gradient
    evaluations each at the cost the field's own model (:func:`mesadyn.field.choose_form`)
    gives, plus the one-time build of the polynomial form when that is the form it picks.
    ``single_coordinate``: every draw has one nonzero entry of ``x_1``
    (:attr:`mesadyn.process.Family.single_coordinate`)."""
    from ..field import Form, choose_form

    c = choose_form(d, T, m, single=m if single_coordinate else 0)
    if c.form is Form.POLYNOMIAL:
        return c.build_s + flows * MIN_FULL_FLOW_EVALS * c.poly_eval_s
    return flows * MIN_FULL_FLOW_EVALS * c.direct_eval_s


def estimate_seconds(config: Config, d: int, single_coordinate: bool = False) -> float:
    """:func:`sampled_flow_seconds` for the sampled field ``config`` names (``samples`` draws
    for ``mc``, ``m`` for ``finite``)."""
    from ..field import FieldKind

    m = config.samples if FieldKind(config.field) is FieldKind.MC else config.m
    return sampled_flow_seconds(d, config.T, m, single_coordinate=single_coordinate)


def check_cost(seconds: float, what: str, force: bool) -> None:
    """Refuse a run estimated above :data:`COST_LIMIT_S` unless ``force``."""
    if seconds > COST_LIMIT_S and not force:
        raise MesadynError(
            f"{what} needs at least {MIN_FULL_FLOW_EVALS} gradient evaluations per flow, about "
            f"{seconds / 60:.1f} min or more here; pass --yes (force=True) to run it, or use "
            "fewer samples / --field exact"
        )


def _field_options(config: Config) -> dict[str, Any]:
    """The chosen field kind's options (samples or m, and the seed of the sampled kinds) and
    the device."""
    from ..field import FieldKind

    kind = FieldKind(config.field)
    options: dict[str, Any] = {"device": config.torch_device}
    if kind is FieldKind.MC:
        return options | {"samples": config.samples, "seed": config.seed}
    if kind is FieldKind.FINITE:
        return options | {"m": config.m, "seed": config.seed}
    return options


def _field(config: Config, fam: Family) -> Field:
    from ..field import make_field

    # reused within the process (sweeps over inits share it)
    return make_field(config.field_spec(config.field, **_field_options(config)))


def _fixed_point_gap(f: Field, theta: np.ndarray, free: np.ndarray) -> tuple[float, float]:
    """``(‖H⁺∇L‖, max(1, ‖θ‖))`` over the free coordinates: the Newton step to the nearest
    stationary point, scale-free where a raw gradient threshold is not."""
    import torch

    th = torch.from_numpy(np.ascontiguousarray(theta))
    g = f.grad(th).detach().cpu().numpy()[free]
    H = f.hessian(th).detach().cpu().numpy()[np.ix_(free, free)]
    step = np.linalg.lstsq(H, g, rcond=1e-12)[0]
    return float(np.linalg.norm(step)), max(1.0, float(np.linalg.norm(theta)))


def honest_status(flow: FlowResult, f: Field) -> tuple[str, str]:
    """``(status, message)`` of a full flow, where one that "converged" without moving must
    start at a fixed point by the Newton-step test; otherwise it is ``failed``."""
    if flow.status != "converged" or flow.t[-1] > 0.0:
        return str(flow.status), flow.message
    gap, scale = _fixed_point_gap(f, flow.theta[0], flow.free)
    if gap <= FIXED_POINT_RTOL * scale:
        return str(flow.status), flow.message
    g0 = float(flow.grad_max[0])
    return "failed", (
        f"max|∇L| = {g0:.3g} < steady_tol at τ=0, but θ0 is not a fixed point (a Newton step "
        f"of {gap:.3g} from it): the loss is that flat at this scale; give a smaller "
        f"steady_tol (e.g. {g0 * 1e-3:.1g}) or 0 to integrate to t_end"
    )


def relaxation_time(f: Field, theta: np.ndarray, free: np.ndarray, grad_max: float,
                    steady_tol: float) -> tuple[float, float]:
    """``(μ_min, τ)``: the smallest non-zero curvature ``|μ|`` of ``L`` at ``theta`` over the free
    coordinates and the time ``τ = log(max|∇L| / steady_tol) / μ_min`` on which the linearised
    flow ``δθ̇ = −∇²L δθ`` changes the gradient along that mode by the factor
    ``max|∇L| / steady_tol`` (decay along a positive curvature; escape along a negative one, a
    saddle the flow has to leave).

    The scaling orbit ``(αP, A/α)`` (:func:`~mesadyn.analysis.fixedpoint.symmetry_direction`)
    is projected out first: ``L`` is constant along it, so the gradient has no component there,
    but away from a fixed point its curvature is small and not zero.  Eigenvalues within
    ``ZERO_RTOL`` of the largest are zero modes and carry no gradient either.  ``μ_min`` is
    ``nan`` (and ``τ`` 0) when no positive curvature is left (a saddle or a flat end).
    """
    import torch

    from ..analysis.fixedpoint import symmetry_direction

    H = f.hessian(torch.from_numpy(np.ascontiguousarray(theta))).detach().cpu().numpy()
    H = H[np.ix_(free, free)]
    v = symmetry_direction(theta)[free]
    n = float(np.linalg.norm(v))
    if n > 0:
        v = v / n
        Q = np.eye(len(v)) - np.outer(v, v)
        H = Q @ H @ Q
    ev = np.abs(np.linalg.eigvalsh(0.5 * (H + H.T)))
    top = float(np.max(ev)) if ev.size else 0.0
    nonzero = ev[ev > ZERO_RTOL * top]
    if nonzero.size == 0 or grad_max <= steady_tol:
        return (float(nonzero.min()) if nonzero.size else math.nan), 0.0
    mu = float(nonzero.min())
    return mu, math.log(grad_max / steady_tol) / mu


def _join(first: FlowResult, second: FlowResult, n_save: int) -> FlowResult:
    """One trajectory from a flow and its continuation from ``first.final`` (times shifted,
    counts added, the outcome and end-point spectrum of ``second``), at most ``n_save``
    points (evenly by index, first and last kept)."""
    from ..flow import SolverStats

    t = np.concatenate([first.t, second.t[1:] + first.t[-1]])
    arrays = {k: np.concatenate([getattr(first, k), getattr(second, k)[1:]])
              for k in ("theta", "loss", "grad_max", "invariant")}
    if len(t) > n_save:
        idx = np.unique(np.round(np.linspace(0, len(t) - 1, n_save)).astype(int))
        t = t[idx]
        arrays = {k: v[idx] for k, v in arrays.items()}
    a, b = first.solver_stats, second.solver_stats
    stats = SolverStats(
        nfev=a.nfev + b.nfev, njev=a.njev + b.njev, n_accepted=a.n_accepted + b.n_accepted,
        n_rejected=None if a.n_rejected is None or b.n_rejected is None
        else a.n_rejected + b.n_rejected,
        n_monitor=None if a.n_monitor is None or b.n_monitor is None
        else a.n_monitor + b.n_monitor,
        wall_s=a.wall_s + b.wall_s)
    return dataclasses.replace(second, t=t, solver_stats=stats, theta=arrays["theta"],
                               loss=arrays["loss"], grad_max=arrays["grad_max"],
                               invariant=arrays["invariant"])


def _sampled_flow(config: Config, f: Field, theta0: torch.Tensor, horizon: float, solver: str,
                  mask: np.ndarray, progress: ProgressCallback | None
                  ) -> tuple[FlowResult, float]:
    """The flow of a sampled field to its own fixed point: first to ``horizon`` (the exact
    flow's), then, while the steady-state test has not stopped it (at most
    :data:`MAX_CONTINUATIONS` times), on from the end point for ``RELAXATION_SAFETY ×``
    :func:`relaxation_time` there.  Returns the joined flow and the total horizon (a given
    ``t_end`` or ``steady_tol = 0`` is a plain run to ``t_end``).

    Why: the draws break the symmetries of the exact loss, so the sampled fixed point lies off
    the diagonal structure and the flow approaches it along modes the exact diagonal flow never
    excites; the slowest has the smallest non-zero curvature ``μ_min`` of ``L̂`` (measured:
    0.118 at d = 2, T = 10, N = 2·10⁴, against c2 = 8 for the reduced flow), and the gradient
    left at the exact horizon decays as ``e^{−μ_min τ}``.
    """
    from ..flow import integrate
    from ..outcome import Outcome

    def run(th: np.ndarray | torch.Tensor, t_end: float, steps: int,
            on_step: ProgressCallback | None) -> FlowResult:
        return integrate(f, th, t_end=t_end, solver=solver, rtol=config.rtol, atol=config.atol,
                         n_save=config.n_save, max_steps=steps, mask=mask,
                         steady_tol=config.steady_tol, progress=on_step)

    res = run(theta0, horizon, config.max_steps, progress)
    if config.t_end is not None or config.steady_tol <= 0:
        return res, horizon
    for _ in range(MAX_CONTINUATIONS):
        if res.status is not Outcome.T_END or not np.isfinite(res.final).all():
            break
        _, tau = relaxation_time(f, res.final, res.mask, float(res.grad_max[-1]),
                                 config.steady_tol)
        steps = config.max_steps - res.solver_stats.n_accepted
        if not tau > 0 or steps < 1:
            break
        t1 = float(res.t[-1])
        shifted = None if progress is None else (lambda x, t1=t1: progress(t1 + x))
        extra = RELAXATION_SAFETY * tau
        more = run(res.final, extra, steps, shifted)
        more = dataclasses.replace(more, message=(
            f"{more.message} (τ counted from τ={t1:.6g}, where the flow was continued for up "
            f"to {extra:.4g} = {RELAXATION_SAFETY:g}× the slowest mode's relaxation time)"))
        res = _join(res, more, config.n_save)
        horizon += extra
    return res, horizon


def run_full(config: Config, progress: ProgressCallback | None = None, *,
             build_progress: ProgressCallback | None = None,
             theta0: torch.Tensor | None = None) -> FullResult:
    """The full flow ``dθ/dτ = −∇L`` (Eq. 2) for the chosen field, compared with the reduced
    closed form along a diagonal start (mean diagonals of ``W^KQ_32``, ``W^PV_12``).

    A sampled field is built first (:meth:`~mesadyn.field.Field.prepare`, reporting the
    fraction done to ``build_progress``) and its flow runs to its own fixed point
    (:func:`_sampled_flow`).  ``theta0`` overrides the start the init options give."""
    import torch

    from ..field import FieldKind
    from ..flow import AUTO, default_solver, integrate
    from ..model import Mask, ab, diagonal_entries, free_mask, unpack
    from ..process import NoReducedSystem
    from ..reduced import ReducedSystem
    from ._common import initial_theta

    _check_out(config)
    fam = config.family()
    d = fam.d
    if theta0 is None:
        theta0 = initial_theta(Init(config.init), d, config.a0, config.b0, config.sigma_w,
                               config.seed)
    config.field_spec(config.field, **_field_options(config))  # names a bad process first
    why = None
    try:
        c = config.constants()
    except NoReducedSystem as exc:
        c, why = None, str(exc)
    system = None if c is None else ReducedSystem(c.c1, c.c2)
    horizon = full_horizon(config, fam, system, why)
    if FieldKind(config.field) is not FieldKind.EXACT:
        check_cost(estimate_seconds(config, d, fam.single_coordinate),
                   f"this {config.field} full flow", config.force)
    f = _field(config, fam)
    mask = Mask(config.mask)
    solver = default_solver(False) if config.solver == AUTO else config.solver
    if FieldKind(config.field) is FieldKind.EXACT:
        res = integrate(f, theta0, t_end=horizon, solver=solver,
                        rtol=config.rtol, atol=config.atol, n_save=config.n_save,
                        max_steps=config.max_steps, mask=free_mask(mask, d),
                        steady_tol=config.steady_tol, progress=progress)
    else:
        f.prepare(build_progress)
        res, horizon = _sampled_flow(config, f, theta0, horizon, solver, free_mask(mask, d),
                                     progress)
    status, message = honest_status(res, f)
    final = torch.from_numpy(res.final.copy())
    W_KQ, W_PV = unpack(final)
    ab_vals = ab(final).numpy()
    deviation = off_structure = None
    if config.init is Init.DIAGONAL:
        diag = free_mask(Mask.diagonal, d)
        off_structure = float(np.max(np.abs(res.theta[:, ~diag])))
        if system is not None:  # (mean diag W^KQ_32, mean diag W^PV_12) vs the closed form
            a_full, b_full = (np.asarray(v).mean(axis=-1) for v in diagonal_entries(res.theta))
            a_red, b_red = system.solution(config.a0, config.b0, res.t)
            deviation = float(np.max(np.hypot(a_full - a_red, b_full - b_red)))
    if config.out is not None:
        from ..io import save_run

        ds = res.to_dataset()
        ds.attrs.update(field_config=str(f.describe()), status=status, message=message)
        save_run(ds, config.out, kind="integrate", config=config.run_config(solver),
                 seed=config.seed)
    return FullResult(
        family=fam.name, d=d, T=config.T, field=str(config.field), mask=str(config.mask),
        init=str(config.init), W_KQ=W_KQ.numpy(), W_PV=W_PV.numpy(), ab=ab_vals,
        ab_mean=float(ab_vals.mean()), ab_theory=None if c is None else c.ab_star,
        ab_limit=None if c is None else c.ab_limit, loss=float(res.loss[-1]),
        grad_norm=float(res.grad_max[-1]), invariant_drift=res.invariant_drift(),
        reduced_max_deviation=deviation, off_structure_max=off_structure,
        reduced_constants=None if c is None else (
            "Lemma 5.3" if fam.assumption_41 else "Lemma A.5"),
        t_end=horizon, t_final=float(res.t[-1]), steady_tol=config.steady_tol,
        solver=SolverReport.of(res, status, message), rtol=res.rtol, atol=res.atol,
        stiffness_ratio=res.stiffness_ratio, out=config.out, flow=res,
    )

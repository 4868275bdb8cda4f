"""The gradient flow, reduced (Lemma 5.2, in closed form) or full (Eq. 2).

``Config(reduced=True)`` follows the 2-D system of Lemma 5.2 — by default through its exact
closed form, or with an ODE solver (``solver=...``) compared against it; otherwise the whole θ
follows ``dθ/dτ = −∇L`` for the exact, Monte-Carlo or finite-sample field, and a diagonal
start is compared with the closed-form reduced trajectory.  The horizon, when not given, is
:func:`mesadyn.analysis.horizon.full_flow_horizon`; the automatic solver is
:func:`mesadyn.flow.default_solver`.

Outcomes are honest (:func:`mesadyn.analysis.steady.stop_verdict`): a flow the steady-state
test stopped is ``converged`` only at a minimum; one that stopped at a saddle integrates on to
its horizon (and is ``saddle`` if it is still there); one that "converged" at τ = 0 away from
any fixed point is ``failed``, with the ``steady_tol`` that would let it move.  A Monte-Carlo
or finite-sample flow expected to take longer than a minute (:mod:`mesadyn.workflows._cost`)
is refused before anything is built, unless ``force=True``.

Example:
    ```python
    from mesadyn.workflows import integrate

    res = integrate.run(integrate.Config(reduced=True, a0=0.5, b0=1.5))
    res.status, round(res.ab, 6)  # (<Outcome.CONVERGED: 'converged'>, 0.191905)
    ```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_bool, check_choice, check_finite, check_int, check_positive
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import flattened, hidden, omitted_if
from ._common import Init, check_init, set_fields
from ._cost import check_cost, sampled_flow_seconds
from ._model_runs import ModelFlowResult, check_model_flow
from ._repeated import QUANTITIES, Interval, RepeatedResult, end_point, run_repeated
from ._run import NOT_RECORDED, DeviceOptions, RunResult, write_run

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import torch
    import xarray as xr

    from ..analysis.rotation_manifold import ManifoldSystem
    from ..field import Field, FieldSpec
    from ..flow import FlowResult, ReducedFlowResult, SolverStats

__all__ = ["QUANTITIES", "Config", "FullResult", "Interval", "ModelFlowResult", "ReducedResult",
           "RepeatedResult", "Result", "end_point", "run", "run_full", "run_reduced",
           "run_repeated"]

#: A sampled flow that has not settled at the exact horizon continues for this many times the
#: linearised relaxation time of its slowest mode (:func:`~mesadyn.analysis.steady.
#: relaxation_time`): the estimate assumes the gradient left lies along that mode and decays at
#: the curvature measured where the first leg ended; 3 covers curvature that changes by a
#: factor of 3 on the way.
RELAXATION_SAFETY = 3.0
#: At most this many continuations (each re-measures the slowest mode where the last ended).
MAX_CONTINUATIONS = 4


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of one flow; see :func:`mesadyn.flow.integrate` for the solver options.

    ``solver="auto"`` is :func:`mesadyn.flow.default_solver` (the closed form for the reduced
    system); ``t_end=None`` takes the horizon of :func:`~mesadyn.analysis.horizon.
    full_flow_horizon`; ``field`` (exact, mc, finite), ``samples``, ``m``, ``mask`` (none or
    diagonal), ``init`` (diagonal or gaussian), ``sigma_w`` and ``steady_tol`` apply to the
    full flow; ``out`` is the ``.nc`` run file; ``force`` runs a sampled full flow even when it
    is expected to take longer than a minute; ``repeats = K >= 2`` runs a sampled flow on K
    independent sample sets (seeds ``seed .. seed+K−1``) and reports its end point with error
    bars (:class:`RepeatedResult`); ``device`` (cpu, cuda, auto) is where the full flow's field
    is evaluated.
    """

    COMMAND = "integrate"

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
    force: bool = dataclasses.field(default=False, metadata=NOT_RECORDED)
    repeats: int = 1

    def __post_init__(self) -> None:
        from ..field import FieldKind, check_samples
        from ..flow import AUTO, resolve_solver
        from ..model import Mask

        super().__post_init__()
        init, a0, b0, sigma_w = check_init(self.init, self.a0, self.b0, self.sigma_w)
        steady = check_finite("steady_tol", self.steady_tol)
        if steady < 0:
            raise MesadynError(f"steady_tol must be >= 0, got steady_tol={self.steady_tol!r}")
        field = check_choice("field", self.field, FieldKind)
        samples = (check_samples(self.samples) if field is FieldKind.MC  # >= the batches
                   else check_int("samples", self.samples, 2))
        set_fields(
            self, init=init, a0=a0, b0=b0, sigma_w=sigma_w, steady_tol=steady,
            reduced=check_bool("reduced", self.reduced), force=check_bool("force", self.force),
            rtol=check_positive("rtol", self.rtol), atol=check_positive("atol", self.atol),
            t_end=None if self.t_end is None else check_positive("t_end", self.t_end),
            field=field, samples=samples, m=check_int("m", self.m, 1),
            mask=check_choice("mask", self.mask, Mask),
            max_steps=check_int("max_steps", self.max_steps, 1),
            n_save=check_int("n_save", self.n_save, 2),
            repeats=check_int("repeats", self.repeats, 1),
        )
        if self.repeats > 1:
            if self.reduced or self.field == FieldKind.EXACT:
                raise MesadynError(
                    f"repeats={self.repeats} draws independent sample sets: it needs "
                    "field='mc' or 'finite' (the exact and reduced flows have no sampling error)")
            if self.out is not None:
                raise MesadynError(f"a run file holds one flow; give no out with "
                                   f"repeats={self.repeats}")
        if not self.paper_model:
            check_model_flow(self)  # the full flow only, its own solvers
        elif not (isinstance(self.solver, str) and self.solver == AUTO):
            resolve_solver(self.solver)  # a bad name fails before any field is built

    @property
    def draws(self) -> int:
        """The sampled field's draws: ``samples`` for ``mc``, ``m`` for ``finite``."""
        from ..field import FieldKind

        return self.samples if FieldKind(self.field) is FieldKind.MC else self.m


@dataclass(frozen=True)
class ReducedResult(RunResult):
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
    stats: SolverStats = flattened()
    solver: str = ""
    backend: str = ""
    out: str | None = omitted_if(None)
    flow: ReducedFlowResult | None = hidden()

    def to_dataset(self) -> xr.Dataset:
        """The trajectory ``a, b`` (τ) with the closed form, ℓ̃, max|∇ℓ̃| and the invariant."""
        assert self.flow is not None
        return self.flow.to_dataset()


@dataclass(frozen=True)
class FullResult(RunResult):
    """The full flow's end point against the theory; ``flow`` holds the trajectory.

    ``status`` is the honest verdict (:func:`~mesadyn.analysis.steady.stop_verdict`); it can
    be ``failed`` or ``saddle`` where the solver's own ``flow.status`` says ``converged``.
    """

    DERIVED = ("converged",)

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
    stats: SolverStats = flattened()
    solver: str = ""
    backend: str = ""
    rtol: float = 0.0
    atol: float = 0.0
    stiffness_ratio: float | None = None
    out: str | None = omitted_if(None)
    flow: FlowResult | None = hidden()
    field_config: dict[str, Any] = hidden(None)

    @property
    def converged(self) -> bool:
        """Whether the flow reached a minimum (``status`` is ``converged``)."""
        return self.status is Outcome.CONVERGED

    def to_dataset(self) -> xr.Dataset:
        """θ(τ), L, max|∇L| and the invariant, the final blocks, and the field's description
        (``field_config``, JSON)."""
        from ..io import to_json

        assert self.flow is not None
        ds = self.flow.to_dataset()
        ds.attrs["field_config"] = to_json(self.field_config or {})
        return ds


#: What :func:`run` returns (a model other than the paper's: :class:`ModelFlowResult`).
Result = ReducedResult | FullResult | RepeatedResult | ModelFlowResult


def run(config: Config, progress: ProgressCallback | None = None, *,
        build_progress: ProgressCallback | None = None) -> Result:
    """The reduced (``config.reduced``) or the full gradient flow; see the module docstring.

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the flow time τ after each accepted step.
    - `build_progress`: called with the fraction done while a sampled field is built.

    ## Returns
    A :class:`ReducedResult`, a :class:`FullResult`, or with ``repeats >= 2`` a
    :class:`RepeatedResult`; ``result.status`` is an :class:`~mesadyn.outcome.Outcome`.

    ## Raises
    - `MesadynError`: an unwritable ``out``; no horizon for a family without a reduced system;
      a sampled flow expected to exceed a minute without ``force``.
    """
    if not config.paper_model:
        from ._model_runs import flow_of_model

        return flow_of_model(config, progress, build_progress=build_progress)
    if config.reduced:
        return run_reduced(config, progress)
    if config.repeats > 1:
        return run_repeated(config, run_full, progress, build_progress=build_progress)
    return run_full(config, progress, build_progress=build_progress)


def _check_out(config: Config) -> None:
    from ..io import check_writable

    if config.out is not None:
        check_writable(config.out, suffixes=config.OUT_SUFFIXES)


def run_reduced(config: Config, progress: ProgressCallback | None = None) -> ReducedResult:
    """Lemma 5.2's 2-D flow from ``(a0, b0)``: its closed form, or an ODE solver against it;
    for real rotations the 3-D flow of their manifold from ``(a0, 0, b0)``
    (:func:`mesadyn.workflows._manifold.run_reduced`, a :class:`ReducedResult` with ``c``)."""
    from ..analysis.horizon import reduced_horizon
    from ..flow import AUTO, default_solver, integrate_reduced
    from ..reduced import ReducedSystem

    if config.rotation == "real":
        from ._manifold import run_reduced as run_manifold

        return run_manifold(config, progress)
    _check_out(config)
    fam = config.family()
    c = config.constants()
    system = ReducedSystem(c.c1, c.c2)
    horizon = (reduced_horizon(system, config.a0, config.b0) if config.t_end is None
               else config.t_end)
    solver = config.solver
    if solver == AUTO:
        solver = default_solver(True, system=system, a0=config.a0, b0=config.b0, t_end=horizon)
    res = integrate_reduced(system, config.a0, config.b0, t_end=horizon, solver=solver,
                            rtol=config.rtol, atol=config.atol,
                            max_steps=config.max_steps, n_save=config.n_save, progress=progress)
    # the reduced flow's fixed points are minima on the hyperbola or the saddle at the origin,
    # whose stable manifold a = −b never reaches the hyperbola: at its horizon with a gradient
    # below steady_tol, a flow off that manifold has converged, as a full flow would report it
    status, message = res.status, res.message
    on_saddle = abs(float(res.ab[-1])) < 0.5 * c.ab_star
    if status is Outcome.T_END and float(res.grad_max[-1]) < config.steady_tol:
        if on_saddle:
            status = Outcome.SADDLE
            message += "; it ends at the saddle at the origin (on its stable manifold a = −b)"
        else:
            status = Outcome.CONVERGED
            message += f"; max|∇ℓ̃| < {config.steady_tol:.3g} there"
    a_lim, b_lim = system.limit(config.a0, config.b0)
    result = ReducedResult(
        family=fam.name, d=fam.d, T=c.T, c1=c.c1, c2=c.c2, a0=config.a0, b0=config.b0,
        a=float(res.a[-1]), b=float(res.b[-1]), ab=float(res.ab[-1]), ab_theory=c.ab_star,
        ab_limit=c.ab_limit, a_limit=a_lim, b_limit=b_lim,
        invariant_drift=res.invariant_drift(),
        closed_form_max_error=res.closed_form_max_error(), t_end=horizon,
        t_final=float(res.t[-1]),
        constants="Lemma 5.3" if fam.assumption_41 else "Lemma A.5 (masked)",
        status=status, message=message, stats=res.solver_stats, solver=res.solver,
        backend=res.backend, out=config.out, flow=res,
    )
    return write_run(config, result)


def _spec(config: Config) -> FieldSpec:
    """The chosen field's spec (:meth:`~mesadyn.workflows.DeviceOptions.sampled_spec`)."""
    spec: FieldSpec = config.sampled_spec(config.field, samples=config.samples, m=config.m)
    return spec


def _manifold_of(config: Config) -> ManifoldSystem | None:
    """The 3-D manifold system of real rotations (:func:`mesadyn.workflows._manifold.
    manifold_system`); ``None`` for other processes or a family without one."""
    from ..process import NoReducedSystem

    if config.rotation != "real":
        return None
    from ._manifold import manifold_system

    try:
        return manifold_system(config)[0]
    except NoReducedSystem:
        return None


def _horizon(config: Config, system: object | None, why: str | None) -> float:
    """The given ``t_end``, else :func:`~mesadyn.analysis.horizon.full_flow_horizon`."""
    from ..analysis.horizon import full_flow_horizon
    from ..model import Mask
    from ..reduced import ReducedSystem

    if config.t_end is not None:
        return config.t_end
    if not isinstance(system, ReducedSystem):
        reason = why or f"family {config.family().name!r} has no reduced system"
        raise MesadynError(f"{reason}: nothing sizes the horizon; give t_end (--t-end)")
    return full_flow_horizon(system, config.family(), gaussian=config.init is Init.GAUSSIAN,
                             a0=config.a0, b0=config.b0, sigma_w=config.sigma_w,
                             masked=config.mask == Mask.diagonal)


def _integrate(config: Config, f: Field, theta: np.ndarray | torch.Tensor, t_end: float,
               solver: str, mask: np.ndarray, steady_tol: float, steps: int,
               progress: ProgressCallback | None) -> FlowResult:
    from ..flow import integrate

    return integrate(f, theta, t_end=t_end, solver=solver, rtol=config.rtol, atol=config.atol,
                     n_save=config.n_save, max_steps=steps, mask=mask, steady_tol=steady_tol,
                     progress=progress)


def _shifted(progress: ProgressCallback | None, t0: float) -> ProgressCallback | None:
    return None if progress is None else (lambda x: progress(t0 + x))


def _saddle_leg(config: Config, f: Field, res: FlowResult, solver: str,
                progress: ProgressCallback | None) -> Callable[[np.ndarray, float],
                                                             FlowResult | None]:
    """The leg :func:`~mesadyn.analysis.steady.leave_saddle` integrates from a saddle: without
    the steady-state test, within the step budget ``max_steps`` left."""
    t1 = float(res.t[-1])

    def leg(theta: np.ndarray, span: float) -> FlowResult | None:
        steps = config.max_steps - res.solver_stats.n_accepted
        if steps < 1:
            return None
        return _integrate(config, f, theta, span, solver, res.mask, 0.0, steps,
                          _shifted(progress, t1))

    return leg


def _sampled_flow(config: Config, f: Field, theta0: torch.Tensor, horizon: float, solver: str,
                  mask: np.ndarray, progress: ProgressCallback | None
                  ) -> tuple[FlowResult, float]:
    """The flow of a sampled field to its own fixed point: first to ``horizon`` (the exact
    flow's), then, while the steady-state test has not stopped it (at most
    :data:`MAX_CONTINUATIONS` times), on from the end point for ``RELAXATION_SAFETY ×``
    :func:`~mesadyn.analysis.steady.relaxation_time` there.  Returns the joined flow and the
    total horizon (a given ``t_end`` or ``steady_tol = 0`` is a plain run to ``t_end``).

    Why: the draws break the symmetries of the exact loss, so the sampled fixed point lies off
    the diagonal structure and the flow approaches it along modes the exact diagonal flow never
    excites; the slowest has the smallest non-zero curvature ``μ_min`` of ``L̂`` (measured:
    0.118 at d = 2, T = 10, N = 2·10⁴, against c2 = 8 for the reduced flow), and the gradient
    left at the exact horizon decays as ``e^{−μ_min τ}``.
    """
    import numpy as np

    from ..analysis.steady import relaxation_time

    res = _integrate(config, f, theta0, horizon, solver, mask, config.steady_tol,
                     config.max_steps, progress)
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
        extra = RELAXATION_SAFETY * tau
        more = _integrate(config, f, res.final, extra, solver, mask, config.steady_tol, steps,
                          _shifted(progress, t1))
        more = dataclasses.replace(more, message=(
            f"{more.message} (τ counted from τ={t1:.6g}, where the flow was continued for up "
            f"to {extra:.4g} = {RELAXATION_SAFETY:g}× the slowest mode's relaxation time)"))
        res = res.join(more, config.n_save)
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
    import numpy as np
    import torch

    from ..analysis.steady import leave_saddle
    from ..field import FieldKind, make_field
    from ..flow import AUTO, default_solver
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
    spec = _spec(config)  # names a bad process first
    why = None
    try:
        c = config.constants()
    except NoReducedSystem as exc:
        c, why = None, str(exc)
    system = None if c is None else ReducedSystem(c.c1, c.c2)
    manifold = _manifold_of(config)  # real rotations: the 3-D manifold the flow keeps
    if manifold is not None and config.t_end is None and config.init is Init.DIAGONAL:
        from ._manifold import full_flow_horizon

        horizon = full_flow_horizon(config, manifold)
    else:
        horizon = _horizon(config, system, why)
    exact = FieldKind(config.field) is FieldKind.EXACT
    if not exact:
        check_cost(sampled_flow_seconds(d, config.T, config.draws,
                                        single_coordinate=fam.single_coordinate),
                   f"this {config.field} full flow", config.force)
    f = make_field(spec)  # reused within the process: sweeps over inits share it
    mask = free_mask(Mask(config.mask), d)
    solver = default_solver(False) if config.solver == AUTO else config.solver
    if exact:
        res = _integrate(config, f, theta0, horizon, solver, mask, config.steady_tol,
                         config.max_steps, progress)
    else:
        f.prepare(build_progress)
        res, horizon = _sampled_flow(config, f, theta0, horizon, solver, mask, progress)
    res, status, message = leave_saddle(res, f, horizon, config.steady_tol,
                                        _saddle_leg(config, f, res, solver, progress),
                                        config.n_save)
    final = torch.from_numpy(res.final.copy())
    W_KQ, W_PV = unpack(final)
    ab_vals = ab(final).numpy()
    deviation = off_structure = None
    ab_theory = None if c is None else c.ab_star
    ab_limit = None if c is None else c.ab_limit
    constants = None if c is None else ("Lemma 5.3" if fam.assumption_41 else "Lemma A.5")
    if manifold is not None:  # measured against the 3-D manifold and its minima k*
        from ..analysis.rotation_manifold import distance
        from ._manifold import limit_of

        ab_theory, ab_limit = float(manifold.k_star[0]), limit_of(config)
        constants = "3-D rotation manifold"
        if config.init is Init.DIAGONAL:
            off_structure = max(distance(th) for th in res.theta)
    elif config.init is Init.DIAGONAL:
        diag = free_mask(Mask.diagonal, d)
        off_structure = float(np.max(np.abs(res.theta[:, ~diag])))
        if system is not None:  # (mean diag W^KQ_32, mean diag W^PV_12) vs the closed form
            a_full, b_full = (np.asarray(v).mean(axis=-1) for v in diagonal_entries(res.theta))
            a_red, b_red = system.solution(config.a0, config.b0, res.t)
            deviation = float(np.max(np.hypot(a_full - a_red, b_full - b_red)))
    result = FullResult(
        family=fam.name, d=d, T=config.T, field=str(config.field), mask=str(config.mask),
        init=str(config.init), W_KQ=W_KQ.numpy(), W_PV=W_PV.numpy(), ab=ab_vals,
        ab_mean=float(ab_vals.mean()), ab_theory=ab_theory, ab_limit=ab_limit,
        loss=float(res.loss[-1]),
        grad_norm=float(res.grad_max[-1]), invariant_drift=res.invariant_drift(),
        reduced_max_deviation=deviation, off_structure_max=off_structure,
        reduced_constants=constants,
        t_end=horizon, t_final=float(res.t[-1]), steady_tol=config.steady_tol,
        status=status, message=message, stats=res.solver_stats, solver=res.solver,
        backend=res.backend, rtol=res.rtol, atol=res.atol,
        stiffness_ratio=res.stiffness_ratio, out=config.out, flow=res,
        field_config=dict(f.describe()),
    )
    return write_run(config, result)

"""Gradient descent at a finite step size as a map (``mesadyn gd``; docs/design.md §8).

GD ``θ ↦ θ − η P∇L(θ)`` on the exact, Monte-Carlo or finite-sample field (or, with
``reduced=True``, the reduced 2-D map of Lemma 5.3 in closed form).  One ``mode`` per question:

- ``run`` (default): one GD run recorded step by step
  (:func:`mesadyn.analysis.gd_regime.descend`) — the loss, ab, ``a² − b²`` and the full
  invariant ``‖A‖² − ‖P‖²`` against its exact second-order prediction, the mass off the
  diagonal structure, the sharpness ``λ_max(∇²L)`` with ``η·λ_max`` — and classified
  (:class:`~mesadyn.analysis.gd_regime.Regime`); where it settled, the critical step
  ``2/λ_max`` at the end point beside the reduced model's ``2/(c1(a² + b²))``.
- ``limits``: the stability limits along the scaling orbit of the minimiser GD is heading for
  (:func:`mesadyn.analysis.gd_limits.stability_limits`): the balanced point of Theorems 4.1
  and 4.3 when it is a fixed point of the field, otherwise the flow's limit from the init
  (Proposition 4.2's dense point for ``x_1 = 1_d``, or the limit from a Gaussian init); with
  ``eta`` the stable part of the orbit.
- ``orbit``: a period-``period`` orbit by Newton on ``G^k(θ) − θ`` from the end of a GD run
  (:func:`mesadyn.analysis.gd_orbits.periodic_orbit`); with ``eta_range`` instead, the flip
  at the flattest point of the orbit located in that range and the period-2 branch followed
  from it to the range's end (:func:`~mesadyn.analysis.gd_orbits.follow_period2`).
- ``central``: GD against its central flow and its modified flow
  (:func:`mesadyn.analysis.central_flow.compare_central`).
- ``landing``: GD's limit point for ``n_eta`` step sizes log-spaced over ``eta_range``
  (:mod:`mesadyn.analysis.gd_landing`).

A divergent run is a result (its regime and the step at which it left every bound); with
``converge=True`` a run that did not settle at a minimum is a failure (exit 1).

Example:
    ```python
    from mesadyn.workflows import gd

    res = gd.run(gd.Config(d=3, T=20, eta=5e-3, a0=0.5, b0=1.5, steps=300))
    res.run.regime, res.run.critical_step  # 'catapult', 0.00829: the loss rose, then settled
    gd.run(gd.Config(d=3, T=20, mode="limits", eta=1e-2)).limits.flattest.eta_max  # 0.0112
    ```
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_bool, check_choice, check_int, check_positive
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import Record, flattened, hidden, omitted_if
from ._common import Init, check_init, set_fields
from ._run import DeviceOptions, RunResult, write_run

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

    from ..analysis.central_flow import CentralComparison
    from ..analysis.gd_landing import FieldLanding, ReducedLanding
    from ..analysis.gd_limits import StabilityLimits
    from ..analysis.gd_orbits import FlipPoint, Period2Branch, PeriodicOrbit
    from ..analysis.gd_regime import GDTrace
    from ..field import Field

__all__ = ["MODES", "Config", "Result", "RunSummary", "run"]

#: The questions ``mesadyn gd`` answers (module docstring).
MODES = ("run", "limits", "orbit", "central", "landing")


@dataclass(frozen=True)
class Config(DeviceOptions):
    """One ``mesadyn gd`` run (validated on construction; a bad value names itself).

    - `mode`: one of :data:`MODES`;
    - `eta`: the step size η (``None``: Table 1's, an error where the table has none);
    - `steps`: GD steps; `blowup`: the divergence threshold, a multiple of
      ``max(L(θ_0), L(0))``;
    - `init`, `a0`, `b0`, `sigma_w`: the start; `mask`: ``none`` or ``diagonal``;
    - `field` (exact, mc, finite), `samples`, `m`: the loss GD descends; `reduced`: the reduced
      2-D map instead (closed form; diagonal starts only);
    - `sharpness_every`: evaluate ``λ_max(∇²L)`` every this many steps (0: never);
    - `converge`: a run that does not settle at a minimum is a failure;
    - `period`: the period of ``mode="orbit"`` (>= 1); `eta_range`: ``(η_min, η_max)`` of the
      flip search and the period-2 branch (``orbit``) or of the step sizes (``landing``);
      `n_eta`: how many step sizes ``landing`` takes;
    - `out`: the ``.nc`` run file; `device`: where the field is evaluated.
    """

    COMMAND = "gd"

    d: int = 3
    T: int = 20
    mode: str = "run"
    eta: float | None = None
    steps: int = 200
    init: str = "diagonal"
    a0: float = 0.1
    b0: float = 0.1
    sigma_w: float = 0.01
    mask: str = "none"
    field: str = "exact"
    samples: int = 100_000
    m: int = 1000
    reduced: bool = False
    sharpness_every: int = 10
    blowup: float = 1e6
    converge: bool = False
    period: int = 2
    eta_range: tuple[float, float] | None = None
    n_eta: int = 8

    def __post_init__(self) -> None:
        from ..field import FieldKind, check_samples
        from ..model import Mask

        super().__post_init__()
        init, a0, b0, sigma_w = check_init(self.init, self.a0, self.b0, self.sigma_w)
        if self.mode not in MODES:
            raise MesadynError(f"unknown mode {self.mode!r}; choose {', '.join(MODES)}")
        rng = None
        if self.eta_range is not None:
            if len(self.eta_range) != 2:
                raise MesadynError(f"eta_range must be (η_min, η_max), got {self.eta_range!r}")
            rng = (check_positive("eta_min", self.eta_range[0]),
                   check_positive("eta_max", self.eta_range[1]))
            if not rng[0] < rng[1]:
                raise MesadynError(f"the η range is empty: η_min={rng[0]:g} >= η_max={rng[1]:g}")
        set_fields(
            self, init=init, a0=a0, b0=b0, sigma_w=sigma_w, eta_range=rng,
            eta=None if self.eta is None else check_positive("eta", self.eta),
            steps=check_int("steps", self.steps, 1), mask=check_choice("mask", self.mask, Mask),
            field=check_choice("field", self.field, FieldKind),
            samples=(check_samples(self.samples) if self.field == FieldKind.MC
                     else check_int("samples", self.samples, 2)),
            m=check_int("m", self.m, 1),
            reduced=check_bool("reduced", self.reduced),
            sharpness_every=check_int("sharpness_every", self.sharpness_every, 0),
            blowup=check_positive("blowup", self.blowup),
            converge=check_bool("converge", self.converge),
            period=check_int("period", self.period, 1), n_eta=check_int("n_eta", self.n_eta, 1),
        )
        if self.reduced and self.init is Init.GAUSSIAN:
            raise MesadynError("the reduced map starts from Assumption 3.1's (a0, b0): give "
                               "init='diagonal' with reduced")
        if self.mode == "landing" and rng is None:
            raise MesadynError("mode 'landing' needs eta_range (η_min, η_max)")
        if self.mode == "orbit" and rng is not None and self.period != 2:
            raise MesadynError(f"the branch from a flip is the period-2 branch: give period=2 "
                               f"with eta_range, got period={self.period}")
        if self.mode == "central" and self.reduced:
            raise MesadynError("the central flow runs on a field, not on the reduced map")
        if self.eta is None and self.mode in ("run", "central") or (
                self.mode == "orbit" and rng is None and self.eta is None):
            from ..train import table1_lr

            table1_lr(self.family())  # names the missing Table 1 entry before any work

    def step_size(self) -> float:
        """``eta``, or Table 1's step size for this family."""
        from ..train import table1_lr

        return self.eta if self.eta is not None else table1_lr(self.family())


@dataclass(frozen=True)
class RunSummary(Record):
    """A GD run's regime and end point against the theory (``mode="run"``; its keys are at
    the top level of the ``--json`` object)."""

    regime: str
    diverged_step: int | None
    loss: float
    ab: float
    ab_star: float | None
    delta_ab_start: float
    delta_ab_end: float
    invariant_drift: float
    invariant_drift_error: float
    offdiag_end: float
    eta_lambda_max_start: float | None
    eta_lambda_max_end: float | None
    critical_step: float | None
    reduced_critical_step: float | None
    top_mode_diagonal: float | None
    top_mode_blocks: dict[str, float] | None


@dataclass(frozen=True)
class Result(RunResult):
    """What ``mesadyn gd`` found: the process, the step size and the ``mode``'s part."""

    family: str
    d: int
    T: int
    field: str
    eta: float | None
    steps: int
    mode: str
    run: RunSummary | None = flattened(default=None)
    limits: StabilityLimits | None = omitted_if(None)
    orbit: PeriodicOrbit | None = omitted_if(None)
    flip: FlipPoint | None = omitted_if(None)
    branch: Period2Branch | None = omitted_if(None)
    central: CentralComparison | None = omitted_if(None)
    landing: ReducedLanding | FieldLanding | None = omitted_if(None)
    trace: GDTrace | None = hidden()

    def to_dataset(self) -> xr.Dataset:
        """The mode's arrays: every GD step (run), the orbit's points (limits), the branch's
        points (orbit), the three trajectories' losses (central)."""
        import numpy as np
        import xarray as xr

        ds: Any = xr.Dataset()
        if self.trace is not None:
            ds = self.trace.to_dataset()
        elif self.limits is not None:
            ds = self.limits.to_dataset()
        elif self.branch is not None:
            b = self.branch
            ds = xr.Dataset({"amplitude": ("eta", b.amplitude), "residual": ("eta", b.residual),
                             "stable": ("eta", b.stable.astype(np.int8)),
                             "top_multiplier": ("eta", b.top_multiplier)},
                            coords={"eta": b.eta})
        elif self.central is not None:
            c = self.central
            ds = xr.Dataset({k: ("step", v) for k, v in (
                ("gd_loss", c.gd_loss), ("gd_loss_avg", c.gd_loss_avg),
                ("central_predicted_loss", c.central.predicted_loss),
                ("central_variance", c.central.variance), ("modified_loss", c.modified_loss),
                ("flow_loss", c.flow_loss), ("gd_sharpness", c.gd_sharpness),
                ("central_sharpness", c.central.sharpness))})
        out: xr.Dataset = ds
        return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _field(config: Config) -> Field:
    from ..field import FieldKind, make_field

    kind = FieldKind(config.field)
    options: dict[str, Any] = {"device": config.torch_device}
    if kind is FieldKind.MC:
        options |= {"samples": config.samples, "seed": config.seed}
    elif kind is FieldKind.FINITE:
        options |= {"m": config.m, "seed": config.seed}
    return make_field(config.field_spec(kind, **options))


def _theta0(config: Config) -> np.ndarray:
    from ._common import initial_theta

    out: np.ndarray = initial_theta(Init(config.init), config.d, config.a0, config.b0,
                                    config.sigma_w, config.seed).numpy()
    return out


def _minimiser(config: Config, field: Field) -> tuple[np.ndarray, bool]:
    """The minimiser GD heads for: the balanced point if it is a fixed point of ``field``
    (with ``True``), else the flow's limit from the init (``False``)."""
    import numpy as np
    import torch

    from ..analysis.fixedpoint import balanced_point, flow_to_fixed_point
    from ..model import free_mask

    if Init(config.init) is Init.DIAGONAL:
        try:
            bal = balanced_point(config.family(), config.T)
        except MesadynError:
            bal = None
        if bal is not None:
            free = free_mask(config.mask, field.d)
            g, g_half = (field.grad(torch.from_numpy(x)).cpu().numpy()[free]
                         for x in (bal, 0.5 * bal))
            if float(np.abs(g).max()) <= 1e-8 * max(1.0, float(np.abs(g_half).max())):
                return bal, True
    fp, end = flow_to_fixed_point(field, _theta0(config), mask=config.mask)
    if not fp.converged:
        raise MesadynError(f"the flow from the init reached no fixed point ({end.status}, "
                           f"residual {fp.residual:.2e}): no minimiser to analyse")
    return fp.theta, False


def _run_mode(config: Config, eta: float, c: Any, progress: ProgressCallback | None
              ) -> tuple[RunSummary, GDTrace, Outcome, str]:
    import numpy as np

    from ..analysis.gd_map import reduced_critical_step, sharpness
    from ..analysis.gd_orbits import ReducedMap
    from ..analysis.gd_regime import Regime, classify, descend, reduced_descend, settled
    from ..model import diagonal_entries

    field = None
    if config.reduced:
        trace = reduced_descend(config.a0, config.b0, eta, c.c1, c.c2, config.steps,
                                blowup=config.blowup)
        regime, why = classify(trace, gd=ReducedMap(c.c1, c.c2))
        a_end, b_end = (abs(float(v)) for v in trace.theta[-1])
    else:
        field = _field(config)
        trace = descend(field, _theta0(config), eta, config.steps, mask=config.mask,
                        sharpness_every=config.sharpness_every, blowup=config.blowup,
                        progress=progress)
        regime, why = classify(trace, field, config.mask)
        a_end, b_end = (math.sqrt(float(np.mean(v * v)))
                        for v in diagonal_entries(trace.theta[-1]))
    end = trace.theta[-1]
    critical = red_critical = top_diag = None
    top_blocks: dict[str, float] | None = None
    es = trace.eta_sharpness[np.isfinite(trace.eta_sharpness)]
    if settled(trace) and np.isfinite(end).all():
        if field is not None:
            sh = sharpness(field, end, eta, config.mask)
            critical = 2.0 / sh.lambda_max if sh.lambda_max > 0 else None
            top_diag, top_blocks = sh.diagonal, sh.blocks
        elif trace.sharpness[-1] > 0:
            critical = 2.0 / float(trace.sharpness[-1])
        if c is not None:
            red_critical = reduced_critical_step(a_end, b_end, c.c1)
    drift = trace.invariant - trace.invariant[0]
    ok_drift = drift[np.isfinite(drift)]
    status, message = Outcome.OK, f"{regime}: {why}"
    if config.converge and regime not in (Regime.MONOTONE, Regime.CATAPULT):
        status = Outcome.DIVERGED if regime is Regime.DIVERGENT else Outcome.FAILED
        message = f"GD at η={eta:g} did not settle at a minimum ({message})"
    summary = RunSummary(
        regime=str(regime), diverged_step=trace.diverged_step, loss=float(trace.loss[-1]),
        ab=float(trace.ab[-1]), ab_star=None if c is None else c.ab_star,
        delta_ab_start=float(trace.delta_ab[0]), delta_ab_end=float(trace.delta_ab[-1]),
        invariant_drift=float(np.abs(ok_drift).max()) if ok_drift.size else math.nan,
        invariant_drift_error=trace.invariant_drift_error,
        offdiag_end=float(trace.offdiag[-1]),
        eta_lambda_max_start=_finite(float(es[0])) if es.size else None,
        eta_lambda_max_end=_finite(float(es[-1])) if es.size else None,
        critical_step=critical, reduced_critical_step=red_critical, top_mode_diagonal=top_diag,
        top_mode_blocks=top_blocks)
    return summary, trace, status, message


def _orbit_mode(config: Config, c: Any, progress: ProgressCallback | None) -> dict[str, Any]:
    import numpy as np

    from ..analysis import gd_orbits as O
    from ..analysis.gd_limits import flattest_point, orbit_theta

    gd: O.GDMap
    if config.eta_range is None:  # the cycle GD runs into, refined by Newton
        eta = config.step_size()
        if config.reduced:
            gd = O.ReducedMap(c.c1, c.c2)
            x = np.array([config.a0, config.b0], dtype=np.float64)
            for _ in range(config.steps):
                x = gd.step(x, eta)
        else:
            from ..analysis.gd_regime import descend

            field = _field(config)
            tr = descend(field, _theta0(config), eta, config.steps, mask=config.mask,
                         sharpness_every=0, blowup=config.blowup, progress=progress)
            gd = O.FieldMap(field, tr.theta[-1], config.mask)
            x = gd.coords(tr.theta[-1])
        if not np.isfinite(x).all():
            return {"status": Outcome.DIVERGED, "eta": eta,
                    "message": f"GD at η={eta:g} diverged before the orbit search"}
        orbit = O.periodic_orbit(gd, x, eta, config.period)
        msg = (f"{orbit.message}; minimal period {orbit.minimal_period}, "
               f"{'stable' if orbit.stable else 'unstable'}")
        return {"orbit": orbit, "eta": eta, "status": orbit.status, "message": msg}
    lo, hi = config.eta_range
    if config.reduced:
        gd = O.ReducedMap(c.c1, c.c2)
        x_star = gd.balanced()
    else:
        field = _field(config)
        base, _ = _minimiser(config, field)
        flat = flattest_point(field, base, config.mask)
        theta = orbit_theta(base, flat.alpha)
        gd = O.FieldMap(field, theta, config.mask)
        x_star = gd.coords(theta)
    flip = O.flip_point(gd, x_star, (lo, hi))
    branch = O.follow_period2(gd, flip, hi)
    ok = branch.status.ok and branch.max_residual <= 1e-10 * max(1.0, float(np.abs(x_star).max()))
    msg = (f"flip at η={flip.eta:.12g} (multiplier {flip.multiplier:.12g}); period-2 branch "
           f"{branch.message}, {branch.points} points, max|G²(θ) − θ| = "
           f"{branch.max_residual:.2e}")
    return {"flip": flip, "branch": branch, "eta": None,
            "status": Outcome.REACHED_END if ok else Outcome.FAILED, "message": msg}


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Run ``mesadyn gd`` in its ``mode`` (module docstring).

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the step number after each GD step (``run``, ``orbit``).

    ## Returns
    A :class:`Result`; ``status`` is ``ok`` unless ``converge`` asked for a minimum GD did not
    reach (``diverged``/``failed``), a Newton search or a branch failed, or GD diverged where
    the mode needs its trajectory (``central``).

    ## Raises
    `MesadynError`: a process without the field asked for; an unwritable ``out``.
    """
    import numpy as np

    from ..budget import check
    from ..budget import gd as gd_estimate
    from ..io import check_writable

    if config.out is not None:
        check_writable(config.out, suffixes=config.OUT_SUFFIXES)
    check(gd_estimate(config.d, config.steps, reduced=config.reduced, device=config.torch_device))
    fam = config.family()
    c = None
    try:
        c = config.constants()
    except MesadynError:
        if config.reduced:
            raise
    parts: dict[str, Any] = {}
    eta: float | None = None
    status, message = Outcome.OK, ""
    steps = config.steps
    if config.mode == "run":
        eta = config.step_size()
        summary, trace, status, message = _run_mode(config, eta, c, progress)
        parts = {"run": summary, "trace": trace}
        steps = len(trace.step) - 1
    elif config.mode == "limits":
        from ..analysis.gd_limits import stability_limits

        if config.reduced:
            raise MesadynError("mode 'limits' is the full space's; the reduced map's limit is "
                               "2/(c1(a² + b²)) in closed form")
        field = _field(config)
        base, balanced = _minimiser(config, field)
        eta = config.eta
        lim = stability_limits(field, base, eta=eta, mask=config.mask,
                               constants=c if balanced else None)
        parts = {"limits": lim}
        message = lim.note
    elif config.mode == "orbit":
        found = _orbit_mode(config, c, progress)
        eta, status, message = found.pop("eta"), found.pop("status"), found.pop("message")
        parts = found
    elif config.mode == "central":
        from ..analysis.central_flow import compare_central

        eta = config.step_size()
        try:
            cmp = compare_central(_field(config), _theta0(config), eta, config.steps,
                                  mask=config.mask, progress=progress)
        except MesadynError as exc:
            status, message = Outcome.DIVERGED, str(exc)
        else:
            parts = {"central": cmp}
            message = (f"time-averaged loss: central flow within {cmp.central_loss_gap_mean:.3g}"
                       f" (mean rel.), modified flow {cmp.modified_loss_gap_mean:.3g}, over "
                       f"{cmp.edge_steps} steps at the edge")
    else:
        assert config.eta_range is not None
        etas = np.geomspace(*config.eta_range, config.n_eta)
        if config.reduced:
            from ..analysis.gd_landing import reduced_landing

            assert c is not None
            land: Any = reduced_landing(config.a0, config.b0, etas, c.c1, c.c2,
                                        max_steps=max(config.steps, 1000))
            n_ok = sum(land.converged)
        else:
            from ..analysis.gd_landing import field_landing

            land = field_landing(_field(config), _theta0(config), etas,
                                 max_steps=config.steps, mask=config.mask)
            n_ok = sum(land.landed)
        parts = {"landing": land}
        message = f"GD landed for {n_ok} of {len(etas)} step sizes"
    result = Result(
        family=fam.name, d=fam.d, T=config.T,
        field="reduced" if config.reduced else str(config.field), eta=eta, steps=steps,
        mode=config.mode, status=status, message=message, **parts)
    return write_run(config, result)

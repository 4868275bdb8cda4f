"""Gradient descent at a finite step size as a map (``mesadyn gd``; DESIGN.md §8).

GD ``θ ↦ θ − η P∇L(θ)`` on the exact, Monte-Carlo or finite-sample field (or, with
``reduced=True``, the reduced 2-D map of Lemma 5.3 in closed form), recorded step by step
(:func:`mesadyn.analysis.gd_regime.descend`): the loss, ab, ``a² − b²`` and the full invariant
``‖A‖² − ‖P‖²`` against its exact second-order prediction (GD conserves neither), the mass off
the diagonal structure, and the sharpness ``λ_max(∇²L)`` with ``η·λ_max``.  The run is
classified (:class:`~mesadyn.analysis.gd_regime.Regime`: monotone, catapult, edge of
stability, periodic, chaotic, divergent, unsettled), and where it settled its stability limit
is reported: the critical step ``2/λ_max`` of the full space at the end point, beside the
reduced model's ``2/(c1(a² + b²))``, with the top mode's blocks.

A divergent run is a result (its regime and the step at which it left every bound); with
``converge=True`` a run that did not settle at a minimum is a failure (exit 1).

Example:
    ```python
    from mesadyn.workflows import gd

    res = gd.run(gd.Config(d=3, T=20, eta=5e-3, a0=0.5, b0=1.5, steps=300))
    res.regime, res.critical_step  # ('catapult', 0.0098...): the loss rose, then settled
    ```
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_bool, check_int, check_positive
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import hidden
from ._common import Init, check_init, choice, set_fields
from ._run import DeviceOptions, RunResult, write_run

if TYPE_CHECKING:
    import xarray as xr

    from ..analysis.gd_regime import GDTrace

__all__ = ["Config", "Result", "run"]


@dataclass(frozen=True)
class Config(DeviceOptions):
    """One GD run as a map (validated on construction; a bad value names itself).

    - `eta`: the step size η (``None``: Table 1's, an error where the table has none);
    - `steps`: GD steps; `blowup`: the divergence threshold, a multiple of
      ``max(L(θ_0), L(0))``;
    - `init`, `a0`, `b0`, `sigma_w`: the start; `mask`: ``none`` or ``diagonal``;
    - `field` (exact, mc, finite), `samples`, `m`: the loss GD descends; `reduced`: the reduced
      2-D map instead (closed form; diagonal starts only);
    - `sharpness_every`: evaluate ``λ_max(∇²L)`` every this many steps (0: never; the end
      point's is always evaluated when the run settles);
    - `converge`: a run that does not settle at a minimum is a failure;
    - `out`: the ``.nc`` run file; `device`: where the field is evaluated.
    """

    COMMAND = "gd"

    d: int = 3
    T: int = 20
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

    def __post_init__(self) -> None:
        from ..field import FieldKind
        from ..model import Mask

        super().__post_init__()
        init, a0, b0, sigma_w = check_init(self.init, self.a0, self.b0, self.sigma_w)
        set_fields(
            self, init=init, a0=a0, b0=b0, sigma_w=sigma_w,
            eta=None if self.eta is None else check_positive("eta", self.eta),
            steps=check_int("steps", self.steps, 1), mask=choice("mask", self.mask, Mask),
            field=choice("field", self.field, FieldKind),
            samples=check_int("samples", self.samples, 2), m=check_int("m", self.m, 1),
            reduced=check_bool("reduced", self.reduced),
            sharpness_every=check_int("sharpness_every", self.sharpness_every, 0),
            blowup=check_positive("blowup", self.blowup),
            converge=check_bool("converge", self.converge),
        )
        if self.reduced and self.init is Init.GAUSSIAN:
            raise MesadynError("the reduced map starts from Assumption 3.1's (a0, b0): give "
                               "init='diagonal' with reduced")
        if self.eta is None:
            from ..train import table1_lr

            table1_lr(self.family())  # names the missing Table 1 entry before any work

    def step_size(self) -> float:
        """``eta``, or Table 1's step size for this family."""
        from ..train import table1_lr

        return self.eta if self.eta is not None else table1_lr(self.family())


@dataclass(frozen=True)
class Result(RunResult):
    """A GD run's regime and end point against the theory (``trace`` holds every step)."""

    family: str
    d: int
    T: int
    field: str
    eta: float
    steps: int
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
    trace: GDTrace | None = hidden()

    def to_dataset(self) -> xr.Dataset:
        """Every step's loss, ab, invariants, off-diagonal mass and sharpness, with θ."""
        assert self.trace is not None
        ds: xr.Dataset = self.trace.to_dataset()  # type: ignore[assignment]
        return ds


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Run GD as a map (module docstring).

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the step number after each GD step.

    ## Returns
    A :class:`Result`; ``status`` is ``ok`` (``diverged``/``failed`` only with ``converge``).

    ## Raises
    `MesadynError`: a process without the field asked for; an unwritable ``out``.
    """
    import numpy as np

    from ..analysis.gd_map import reduced_critical_step, sharpness
    from ..analysis.gd_regime import Regime, classify, descend, reduced_descend, settled
    from ..field import FieldKind, make_field
    from ..io import check_writable
    from ..model import diagonal_entries
    from ._common import initial_theta

    if config.out is not None:
        check_writable(config.out, suffixes=config.OUT_SUFFIXES)
    fam = config.family()
    eta = config.step_size()
    c = None
    try:
        c = config.constants()
    except MesadynError:
        if config.reduced:
            raise
    field = None
    if config.reduced:
        assert c is not None
        trace = reduced_descend(config.a0, config.b0, eta, c.c1, c.c2, config.steps,
                                blowup=config.blowup)
        regime, why = classify(trace)
    else:
        kind = FieldKind(config.field)
        options: dict[str, Any] = {"device": config.torch_device}
        if kind is FieldKind.MC:
            options |= {"samples": config.samples, "seed": config.seed}
        elif kind is FieldKind.FINITE:
            options |= {"m": config.m, "seed": config.seed}
        field = make_field(config.field_spec(kind, **options))
        theta0 = initial_theta(Init(config.init), fam.d, config.a0, config.b0,
                               config.sigma_w, config.seed).numpy()
        trace = descend(field, theta0, eta, config.steps, mask=config.mask,
                        sharpness_every=config.sharpness_every, blowup=config.blowup,
                        progress=progress)
        regime, why = classify(trace, field, config.mask)
    end = trace.theta[-1]
    if config.reduced:
        a_end, b_end = float(end[0]), float(end[1])
    else:
        a_end, b_end = (float(np.mean(v)) for v in diagonal_entries(end))
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
    result = Result(
        family=fam.name, d=fam.d, T=config.T, field="reduced" if config.reduced else
        str(config.field), eta=eta, steps=len(trace.step) - 1, regime=str(regime),
        diverged_step=trace.diverged_step, loss=float(trace.loss[-1]), ab=a_end * b_end,
        ab_star=None if c is None else c.ab_star, delta_ab_start=float(trace.delta_ab[0]),
        delta_ab_end=float(trace.delta_ab[-1]),
        invariant_drift=float(np.abs(ok_drift).max()) if ok_drift.size else math.nan,
        invariant_drift_error=trace.invariant_drift_error,
        offdiag_end=float(trace.offdiag[-1]),
        eta_lambda_max_start=_finite(float(es[0])) if es.size else None,
        eta_lambda_max_end=_finite(float(es[-1])) if es.size else None,
        critical_step=critical, reduced_critical_step=red_critical,
        top_mode_diagonal=top_diag, top_mode_blocks=top_blocks, trace=trace,
        status=status, message=message,
    )
    return write_run(config, result)

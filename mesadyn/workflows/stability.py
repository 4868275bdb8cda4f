"""Fixed points, spectra of ``−∇²L``, the PL rate and Proposition 4.2 (``mesadyn stability``).

For a family satisfying Assumption 4.1 the point is the balanced diagonal fixed point
``a = b = √ab*`` (Theorem 4.1), or the end of the flow from ``(a0, b0)``, or a θ read from
``point``; it is refined by Newton, shown to be a fixed point of the *full* flow (off-diagonal
gradient ~0) and the spectrum of ``−∇²L`` is classified (:mod:`mesadyn.analysis.stability`).
For ``x1="ones"`` (Section 4.3) the masked fixed point of Theorem 4.3 has a non-zero
off-diagonal gradient (Proposition 4.2), and the unmasked flow from it reaches a dense fixed
point (Appendix B.5).

With ``field="finite"`` (and ``m``) the analysis is of the finite-sample loss the paper's GD
descends (Section 6): its own fixed point, found by its flow from the exact balanced point and
polished by Newton with its exact Hessian.

Outcomes are honest (:class:`~mesadyn.outcome.Outcome`): ``fixed_point`` when every analysed
point passes the fixed-point test, i.e. Newton's residual meets the flow's steady-state
tolerance (for a Monte-Carlo field evaluated as given: its gradient is zero within the
Monte-Carlo error); ``failed`` otherwise, saying where.  A point that is meant to be a flow's
end and has negative curvature (:func:`~mesadyn.analysis.steady.curvature`) is a saddle the
steady-state test stopped at (a start near θ = 0, whose gradient is below that test): the flow
continues from there without the test to ``t_end``; if it still ends at a saddle, the outcome
is ``saddle``.  ``out`` writes the run file (``.nc``): the ``--json`` object, the
configuration and θ of the analysed points.

Example:
    ```python
    from mesadyn.workflows import stability

    res = stability.run(stability.Config(x1="ones", d=3, T=20))
    res.status, res.released.report.spectrum.n_unstable  # (<Outcome.FIXED_POINT: ...>, 0)
    ```
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_bool, check_choice, check_int, check_positive
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import Record, flattened, hidden, omitted_if
from ..tolerances import ZERO_RTOL
from ._common import optional_path, set_fields
from ._run import NOT_RECORDED, DeviceOptions, RunResult, write_run

if TYPE_CHECKING:
    import xarray as xr

    from ..analysis.fixedpoint import FixedPoint, FlowEnd
    from ..analysis.stability import (
        FixedPointTest,
        MonteCarloCheck,
        PLReport,
        PointReport,
        ReleasedPoint,
    )
    from ..field import Field, FieldSpec

__all__ = ["Config", "Failure", "Result", "hessian_field", "run"]

#: Figure formats of ``plot``.
PLOT_SUFFIXES = (".pdf", ".png", ".svg")
#: Newton iterations with an exact Hessian (Monte-Carlo points are evaluated as given).
NEWTON_ITERATIONS = 30
#: The flow's steady-state tolerance max|∇L|, which is also the fixed-point test: exact field,
#: and Monte-Carlo field (whose explicit-solver noise floor lies well above 1e-8).
STEADY_TOL_EXACT, STEADY_TOL_MC = 1e-8, 1e-6


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of ``mesadyn stability`` (process options first, see ``ProcessOptions``).

    ``a0, b0``: find the point by the flow from Assumption 3.1's diagonal init (both or
    neither); ``point``: a ``.npy``/``.nc`` file holding θ (not with ``a0, b0``); ``field``:
    ``exact``, ``mc`` or ``finite`` (the finite-sample loss of ``m`` training sequences drawn
    with ``seed``, Section 6: the loss the paper's GD descends); ``samples``: Monte-Carlo draws;
    ``t_end``: longest flow time; ``zero_rtol``: zero-mode threshold relative to ``max|μ|``;
    ``pl``: PL diagnostics along a trajectory (exact field); ``plot``: write the spectra to a
    ``.pdf``, ``.png`` or ``.svg`` file (checked before any work; not recorded: it changes no
    number); ``out``: the ``.nc`` run file.  ``point`` and ``plot`` take a string or a path
    object.  ``device`` (cpu, cuda, auto: :class:`DeviceOptions`) is where the field is
    evaluated.
    """

    COMMAND = "stability"

    a0: float | None = None
    b0: float | None = None
    field: str = "exact"
    samples: int = 4000
    m: int = 10_000
    point: str | None = None
    t_end: float = 1e4
    zero_rtol: float = ZERO_RTOL
    pl: bool = True
    plot: str | None = dataclasses.field(default=None, metadata=NOT_RECORDED)

    def __post_init__(self) -> None:
        from ..field import FieldKind

        super().__post_init__()
        kind = check_choice("field", self.field, FieldKind)
        set_fields(self, field=kind, t_end=check_positive("t_end", self.t_end),
                   zero_rtol=check_positive("zero_rtol", self.zero_rtol),
                   pl=check_bool("pl", self.pl),
                   point=optional_path("point", _fspath(self.point)),
                   plot=optional_path("plot", _fspath(self.plot)))
        # both are validated whichever field runs (a value is refused or used, never kept
        # unchecked in the run file)
        set_fields(self, samples=check_int("samples", self.samples, 64),
                   m=check_int("m", self.m, 1))
        if (self.a0 is None) != (self.b0 is None):
            raise MesadynError("give both --a0 and --b0, or neither")
        if self.point is not None and self.a0 is not None:
            raise MesadynError("give either --point or --a0/--b0, not both")
        if self.plot is not None:
            if Path(self.plot).suffix.lower() not in PLOT_SUFFIXES:
                raise MesadynError(f"--plot must end in .pdf, .png or .svg, got {self.plot!r}")

    @property
    def exact(self) -> bool:
        return str(self.field) == "exact"

    @property
    def deterministic(self) -> bool:
        """Whether the loss is known exactly (exact or finite-sample field): its fixed points
        are refined by Newton and tested at the exact tolerance; a Monte-Carlo point is
        evaluated as given, its gradient against the Monte-Carlo error."""
        return str(self.field) != "mc"

    @property
    def steady_tol(self) -> float:
        """The flow's steady-state test and the fixed-point tolerance of this field."""
        return STEADY_TOL_EXACT if self.deterministic else STEADY_TOL_MC


def _fspath(value: object) -> object:
    """A path object as its string (``Config`` stores paths as strings)."""
    return os.fspath(value) if isinstance(value, os.PathLike) else value


@dataclass(frozen=True)
class Failure(Record):
    """Where the analysis stopped: the point that is not a fixed point and why (``stage``:
    ``fixed point`` or ``released dense point``); ``test``, ``point`` and ``flow_end`` are the
    typed test, point and flow behind the ``--json`` fields."""

    stage: str
    message: str
    #: The test's ``residual``, ``tolerance``, ``passed`` (and ``max_z``, ``z_critical``).
    test_result: dict[str, Any] = flattened(default_factory=dict)
    newton_iterations: int = 0
    grad_norm: float = math.nan
    flow: dict[str, Any] | None = None
    test: FixedPointTest | None = hidden()
    point: FixedPoint | None = hidden()
    flow_end: FlowEnd | None = hidden()

    @classmethod
    def of(cls, stage: str, test: FixedPointTest, point: FixedPoint,
           flow: FlowEnd | None) -> Failure:
        """The failure of ``point`` at ``stage`` under ``test``, after ``flow`` (if any)."""
        after = "" if flow is None else (
            f" after the flow stopped ({flow.status} at τ = {flow.t:.4g})")
        return cls(stage=stage, message=(f"no {stage}: max|∇L| = {test.residual:.3g} > "
                                         f"tolerance {test.tolerance:.3g}{after}"),
                   test_result=test.to_dict(), newton_iterations=point.iterations,
                   grad_norm=point.grad_norm, flow=None if flow is None else flow.to_dict(),
                   test=test, point=point, flow_end=flow)


@dataclass(frozen=True)
class Result(RunResult):
    """What ``mesadyn stability`` found.  ``to_dict()`` is its ``--json`` object.

    ``fixed_point`` is the report at the point (None when it failed the fixed-point test);
    ``released`` the dense point of Proposition 4.2 (families failing Assumption 4.1);
    ``pl`` Lemma 5.4's diagnostics (exact field, ``pl=True``); ``monte_carlo`` the sampled
    gradient with its errors (``field="mc"``); ``failure`` says what was not a fixed point;
    ``plot`` the spectra figure.  Their ``--json`` objects are ``reports`` (keys
    ``fixed_point``, ``monte_carlo``, ``released``, ``pl``, ``plot``, those present).
    """

    family: str
    d: int
    T: int
    field: dict[str, Any]
    source: str
    n_params: int
    n_active: int
    reports: dict[str, Any] = flattened(default_factory=dict)
    failure: Failure | None = omitted_if(None)
    fixed_point: PointReport | None = hidden()
    released: ReleasedPoint | None = hidden()
    pl: PLReport | None = hidden()
    monte_carlo: MonteCarloCheck | None = hidden()
    plot: str | None = hidden()
    config: Config | None = hidden()

    def to_dataset(self) -> xr.Dataset:
        """θ of the analysed points, ``theta`` over (``point``, ``param``) in the order they
        were analysed (the fixed point, the released dense point, a failed point last;
        ``point`` names each), so ``--point run.nc`` reads the last of them."""
        import numpy as np
        import xarray as xr

        rows: list[tuple[str, Any]] = []
        if self.fixed_point is not None:
            rows.append(("fixed_point", self.fixed_point.point.theta))
        if self.released is not None:
            rows.append(("released", self.released.report.point.theta))
        if self.failure is not None and self.failure.point is not None:
            rows.append((f"failed {self.failure.stage}", self.failure.point.theta))
        if not rows:
            return xr.Dataset()
        theta = np.stack([np.asarray(th, dtype=np.float64) for _, th in rows])
        return xr.Dataset({"theta": (("point", "param"), theta)},
                          coords={"point": [name for name, _ in rows]})


def hessian_field(spec: FieldSpec) -> Field:
    """The field of ``spec`` with a Hessian: the exact field (analytic) or a sampled one, exact
    for its draws (``has_exact_hessian``; else wrapped in
    :class:`~mesadyn.field.FiniteDifferenceHessian`).

    ## Raises
    `MesadynError`: the exact field cannot be built for the family (no exact moments).
    """
    from ..field import FieldKind, FiniteDifferenceHessian, make_field

    try:
        base = make_field(spec)
    except MesadynError as exc:
        if spec.kind is not FieldKind.EXACT:
            raise
        raise MesadynError(f"field 'exact' cannot give a Hessian for family "
                           f"{spec.family.name!r} ({exc}); use --field mc") from None
    return base if base.has_exact_hessian else FiniteDifferenceHessian(base)


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Find the point, test that it is a fixed point, and analyse it (module docstring).

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the number of analysis stages done (of 3) as they finish.

    ## Returns
    The :class:`Result`; ``status`` is ``fixed_point``, ``saddle`` (a flow that ends at a
    saddle) or ``failed`` (a point that is not a fixed point).

    ## Raises
    `MesadynError`: an unwritable ``out``, an unreadable point file, or a family without
    exact moments with ``field="exact"``.
    """
    from ..io import check_writable

    if config.out is not None:  # at the start of the run (a sweep resolves it under --out)
        check_writable(config.out, suffixes=config.OUT_SUFFIXES)
    if config.plot is not None:
        check_writable(config.plot, suffixes=PLOT_SUFFIXES)
    from ._stability_run import analyse

    return write_run(config, analyse(config, progress))


def result_of(config: Config, field: Field, source: str, status: Outcome, message: str, *,
              fixed_point: PointReport | None, monte_carlo: MonteCarloCheck | None,
              released: ReleasedPoint | None = None, pl: PLReport | None = None,
              plot: str | None = None, failure: Failure | None = None) -> Result:
    """The :class:`Result` of the analysis of ``config`` on ``field`` (its ``reports`` from
    the typed parts)."""
    from ..model import active_mask

    parts: dict[str, Any] = {"fixed_point": fixed_point, "monte_carlo": monte_carlo,
                             "released": released, "pl": pl}
    reports: dict[str, Any] = {k: v.to_dict() for k, v in parts.items() if v is not None}
    if plot is not None:
        reports["plot"] = plot
    d = config.d
    return Result(
        family=config.family().name, d=d, T=config.T, field=dict(field.describe()),
        source=source, n_params=18 * d * d, n_active=int(active_mask(d).sum()),
        reports=reports, failure=failure, fixed_point=fixed_point, released=released, pl=pl,
        monte_carlo=monte_carlo, plot=plot, config=config, status=status, message=message)

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

Statuses are honest: a point is reported as a fixed point only when Newton's residual meets the
flow's steady-state tolerance (for a Monte-Carlo field evaluated as given: when its gradient is
zero within the Monte-Carlo error); otherwise the result is ``failed`` and says where.

Example:
    >>> from mesadyn.workflows import stability
    >>> res = stability.run(stability.Config(x1="ones", d=3, T=20))
    >>> res.status, res.released.report.spectrum.n_unstable
    (<StabilityStatus.FIXED_POINT: 'fixed_point'>, 0)
"""

from __future__ import annotations

import enum
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import MesadynError, check_int, check_positive
from ..progress import ProgressCallback
from ..tolerances import ZERO_RTOL
from ._common import choice, optional_path, set_fields
from ._device import DeviceOptions

if TYPE_CHECKING:

    from ..analysis.fixedpoint import FixedPoint, FlowEnd
    from ..analysis.spectrum import Spectrum
    from ..analysis.stability import (
        FixedPointTest,
        MonteCarloCheck,
        PLReport,
        PointReport,
        ReleasedPoint,
    )
    from ..field import Field, FieldKind
    from ..process import Family

__all__ = ["Config", "Failure", "Result", "StabilityStatus", "build_field", "run"]

#: Figure formats of ``plot``.
PLOT_SUFFIXES = (".pdf", ".png", ".svg")
#: Newton iterations with an exact Hessian (Monte-Carlo points are evaluated as given).
NEWTON_ITERATIONS = 30
#: The flow's steady-state tolerance max|∇L|, which is also the fixed-point test: exact field,
#: and Monte-Carlo field (whose explicit-solver noise floor lies well above 1e-8).
STEADY_TOL_EXACT, STEADY_TOL_MC = 1e-8, 1e-6


class StabilityStatus(enum.StrEnum):
    """Outcome of :func:`run`: every analysed point is a fixed point, or one is not."""

    FIXED_POINT = "fixed_point"
    FAILED = "failed"


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of ``mesadyn stability`` (process options first, see ``ProcessOptions``).

    ``a0, b0``: find the point by the flow from Assumption 3.1's diagonal init (both or
    neither); ``point``: a ``.npy``/``.nc`` file holding θ (not with ``a0, b0``); ``field``:
    ``exact``, ``mc`` or ``finite`` (the finite-sample loss of ``m`` training sequences drawn
    with ``seed``, Section 6: the loss the paper's GD descends); ``samples``: Monte-Carlo draws;
    ``t_end``: longest flow time; ``zero_rtol``: zero-mode threshold relative to ``max|μ|``;
    ``pl``: PL diagnostics along a trajectory (exact field); ``plot``: write the spectra to a
    ``.pdf``, ``.png`` or ``.svg`` file (checked before any work).  ``point`` and ``plot`` take
    a string or a path object.  ``device`` (cpu, cuda, auto: :class:`DeviceOptions`) is where
    the field is evaluated.
    """

    a0: float | None = None
    b0: float | None = None
    field: str = "exact"
    samples: int = 4000
    m: int = 10_000
    point: str | None = None
    t_end: float = 1e4
    zero_rtol: float = ZERO_RTOL
    pl: bool = True
    plot: str | None = None

    def __post_init__(self) -> None:
        from ..field import FieldKind
        from ..io import check_writable

        super().__post_init__()
        kind = choice("field", self.field, FieldKind)
        set_fields(self, field=kind, t_end=check_positive("t_end", self.t_end),
                   zero_rtol=check_positive("zero_rtol", self.zero_rtol), pl=bool(self.pl),
                   point=optional_path("point", _fspath(self.point)),
                   plot=optional_path("plot", _fspath(self.plot)))
        if kind is FieldKind.MC:
            set_fields(self, samples=check_int("samples", self.samples, 64))
        if kind is FieldKind.FINITE:
            set_fields(self, m=check_int("m", self.m, 1))
        if (self.a0 is None) != (self.b0 is None):
            raise MesadynError("give both --a0 and --b0, or neither")
        if self.point is not None and self.a0 is not None:
            raise MesadynError("give either --point or --a0/--b0, not both")
        if self.plot is not None:
            if Path(self.plot).suffix.lower() not in PLOT_SUFFIXES:
                raise MesadynError(f"--plot must end in .pdf, .png or .svg, got {self.plot!r}")
            check_writable(self.plot, suffixes=PLOT_SUFFIXES)

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
class Failure:
    """Where the analysis stopped: the point that is not a fixed point and why."""

    stage: str  # "fixed point" or "released dense point"
    test: FixedPointTest
    point: FixedPoint
    flow: FlowEnd | None

    @property
    def message(self) -> str:
        flow = "" if self.flow is None else (
            f" after the flow stopped ({self.flow.status} at τ = {self.flow.t:.4g})")
        return (f"no {self.stage}: max|∇L| = {self.test.residual:.3g} > tolerance "
                f"{self.test.tolerance:.3g}{flow}")

    def to_dict(self) -> dict[str, object]:
        return {"stage": self.stage, "message": self.message, **self.test.to_dict(),
                "newton_iterations": self.point.iterations, "grad_norm": self.point.grad_norm,
                "flow": None if self.flow is None else self.flow.to_dict()}


@dataclass(frozen=True)
class Result:
    """What ``mesadyn stability`` found.  ``to_dict()`` is its ``--json`` object.

    ``fixed_point`` is the report at the point (None when it failed the fixed-point test);
    ``released`` the dense point of Proposition 4.2 (families failing Assumption 4.1);
    ``pl`` Lemma 5.4's diagnostics (exact field, ``pl=True``); ``monte_carlo`` the sampled
    gradient with its errors (``field="mc"``); ``failure`` says what was not a fixed point.
    """

    config: Config
    status: StabilityStatus
    family: str
    field: dict[str, object]
    source: str
    n_params: int
    n_active: int
    fixed_point: PointReport | None
    released: ReleasedPoint | None = None
    pl: PLReport | None = None
    monte_carlo: MonteCarloCheck | None = None
    plot: Path | None = None
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        """Every analysed point passed the fixed-point test (exit status 0)."""
        return self.status is StabilityStatus.FIXED_POINT

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object (a failed run adds ``status`` and ``failure``)."""
        c = self.config
        out: dict[str, object] = {
            "family": self.family, "d": c.d, "T": c.T, "field": self.field,
            "source": self.source, "n_params": self.n_params, "n_active": self.n_active,
        }
        if self.fixed_point is not None:
            out["fixed_point"] = self.fixed_point.to_dict()
        if self.monte_carlo is not None:
            out["monte_carlo"] = self.monte_carlo.to_dict()
        if self.released is not None:
            out["released"] = self.released.to_dict()
        if self.pl is not None:
            out["pl"] = self.pl.to_dict()
        if self.plot is not None:
            out["plot"] = str(self.plot)
        if self.failure is not None:
            out["status"] = str(self.status)
            out["failure"] = self.failure.to_dict()
        return out


def build_field(kind: FieldKind | str, fam: Family, T: int, samples: int, seed: int,
                radius: float = 1.0, m: int | None = None, device: str | None = None) -> Field:
    """A field that gives a Hessian: ``exact`` (analytic), ``mc`` (``samples`` draws) or
    ``finite`` (``m`` sequences), the sampled ones exact for their draws
    (``has_exact_hessian``; else wrapped in :class:`~mesadyn.field.FiniteDifferenceHessian`);
    ``radius``: r of ``W = r·diag(λ)``; ``device``: where it lives (a torch device name,
    ``None`` the field's default).

    ## Raises
    `MesadynError`: the exact field cannot be built for ``fam`` (no exact moments).
    """
    from ..field import FieldKind, FieldSpec, FiniteDifferenceHessian, make_field

    k = FieldKind(kind)
    if k is FieldKind.EXACT:
        try:
            return make_field(FieldSpec(k, fam, T, radius=radius, device=device))
        except MesadynError as exc:
            raise MesadynError(
                f"field 'exact' cannot give a Hessian for family {fam.name!r} ({exc}); "
                "use --field mc") from None
    if k is FieldKind.FINITE:
        base = make_field(FieldSpec(k, fam, T, m=m, seed=seed, radius=radius, device=device))
    else:
        base = make_field(FieldSpec(k, fam, T, samples=samples, seed=seed, radius=radius,
                                    device=device))
    return base if base.has_exact_hessian else FiniteDifferenceHessian(base)


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Find the point, test that it is a fixed point, and analyse it (module docstring).

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the number of analysis stages done (of 3) as they finish.

    ## Returns
    The :class:`Result`; ``status`` is ``failed`` when a point is not a fixed point.

    ## Raises
    `MesadynError`: an unreadable point file, or a family without exact moments with
    ``field="exact"``.
    """
    import numpy as np
    import torch

    from ..analysis.fixedpoint import flow_to_fixed_point, refine
    from ..analysis.spectrum import classify
    from ..analysis.stability import (
        FixedPointTest,
        analyse_point,
        load_point,
        monte_carlo_check,
        pl_report,
        released_point,
    )
    from ..field import FiniteDifferenceHessian, MonteCarloField
    from ..model import active_mask, diagonal_init, diagonal_mask

    def tick(stage: int) -> None:
        if progress is not None:
            progress(float(stage))

    c = config
    d = c.d
    fam = c.family()
    consts = c.constants()  # refuses a rotation or noise: no reduced system to compare with
    th_file = load_point(c.point, d) if c.point is not None else None
    fld = build_field(c.field, fam, c.T, c.samples, c.seed, c.radius, m=c.m,
                      device=c.torch_device)
    fld.prepare()
    # Proposition 4.2: without Assumption 4.1 the diagonal is invariant only under the mask
    ones = not fam.assumption_41
    mask = diagonal_mask(d) if ones else None
    mask_note = "diagonal mask (Theorem 4.3)" if ones else "all active entries"
    newton = NEWTON_ITERATIONS if c.deterministic else 0  # Monte-Carlo: the point as given
    end: FlowEnd | None = None
    if th_file is not None:
        source = f"file {c.point}"
        mask, mask_note = None, "all active entries"  # a given θ may be dense
        if str(c.field) == "finite":
            # e.g. the end of GD on the same draws: flow on to the finite loss's own fixed
            # point (Newton alone is not safe that far out along its slow modes)
            source = f"flow of the finite-sample loss from file {c.point}"
            fp, end = flow_to_fixed_point(fld, th_file, t_end=c.t_end,
                                          steady_tol=c.steady_tol, max_iter=newton)
        else:
            fp = refine(fld, th_file, max_iter=newton)
    elif c.a0 is not None and c.b0 is not None:
        source = f"flow from diagonal init a0={c.a0}, b0={c.b0}"
        fp, end = flow_to_fixed_point(fld, diagonal_init(d, c.a0, c.b0).numpy(),
                                      t_end=c.t_end, mask=mask, steady_tol=c.steady_tol,
                                      max_iter=newton)
    else:
        theorem = "4.3" if ones else "4.1"
        source = f"balanced point a = b = sqrt(ab*) (Theorem {theorem})"
        s = math.sqrt(consts.ab_star)  # the balanced point at this radius
        balanced = diagonal_init(d, s, s).numpy()
        if str(c.field) == "finite":
            # the draws break the diagonal symmetry: the finite loss's own fixed point lies off
            # the diagonal structure, O(1/√m) away, where Newton alone is not safe; flow there
            source = (f"flow of the finite-sample loss from the balanced point a = b = "
                      f"sqrt(ab*) of the exact loss (Theorem {theorem})")
            fp, end = flow_to_fixed_point(fld, balanced, t_end=c.t_end, mask=mask,
                                          steady_tol=c.steady_tol, max_iter=newton)
        else:
            fp = refine(fld, balanced, mask=mask, max_iter=newton)
    base = fld.base if isinstance(fld, FiniteDifferenceHessian) else fld
    mc = (monte_carlo_check(base, fp.theta)
          if isinstance(base, MonteCarloField) and np.isfinite(fp.theta).all() else None)

    def result(status: StabilityStatus, report: PointReport | None, **parts: object) -> Result:
        return Result(c, status, fam.name, fld.describe(), source, 18 * d * d,
                      int(active_mask(d).sum()), report, monte_carlo=mc,
                      **parts)  # type: ignore[arg-type]

    test = FixedPointTest(fp.residual, c.steady_tol, mc)
    if not test.passed:
        return result(StabilityStatus.FAILED, None,
                      failure=Failure("fixed point", test, fp, end))
    report = analyse_point(fld, consts, fp, zero_rtol=c.zero_rtol, newton_over=mask_note)
    tick(1)
    spectra: dict[str, Spectrum] = {
        ("masked fixed point" if ones else "fixed point"): report.spectrum}
    released = None
    pl_flow, pl_fp, pl_sp = end, fp, report.spectrum
    if ones:
        rel_fp, rel_end = flow_to_fixed_point(fld, fp.theta, t_end=c.t_end,
                                              steady_tol=c.steady_tol, max_iter=newton)
        rel_test = FixedPointTest(rel_fp.residual, c.steady_tol)
        if not rel_test.passed:
            return result(StabilityStatus.FAILED, report,
                          failure=Failure("released dense point", rel_test, rel_fp, rel_end))
        rel_report = analyse_point(fld, consts, rel_fp, zero_rtol=c.zero_rtol,
                                   newton_over="all active entries")
        released = released_point(rel_report, rel_end, fp)
        spectra["dense fixed point (released)"] = rel_report.spectrum
        pl_flow, pl_fp, pl_sp = rel_end, rel_fp, rel_report.spectrum
    tick(2)
    pl = None
    if c.pl and c.exact:
        if pl_flow is None:
            start = diagonal_init(d, 0.1, 0.1).numpy()
            pl_fp, pl_flow = flow_to_fixed_point(fld, start, t_end=c.t_end)
            H = fld.hessian(torch.as_tensor(pl_fp.theta)).cpu().numpy()
            pl_sp = classify(H, pl_fp.theta, rtol=c.zero_rtol, field=fld)
        trajectory = "release flow (unmasked)" if ones else (
            source if end is not None else "flow from diagonal init a0 = b0 = 0.1")
        pl = pl_report(fld, consts, pl_flow, pl_fp, pl_sp, trajectory)
    plot = None
    if c.plot is not None:
        from ..plots import save, spectra_panels

        fig, _ = spectra_panels(spectra, title=f"{fam.name}, d={d}, T={c.T}")
        plot = save(fig, Path(c.plot))
    tick(3)
    return result(StabilityStatus.FIXED_POINT, report, released=released, pl=pl, plot=plot)

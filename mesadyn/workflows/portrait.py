"""The phase portrait of the reduced flow (Lemma 5.2), drawn and written to a figure.

Streamlines, nullclines, the fixed hyperbola ``ab = c2/c1``, the saddle and its manifolds,
basins, level sets of ``a² − b²`` and the closed-form trajectories from the inits
(:func:`mesadyn.plots.portrait`); optionally the full gradient flow from each init projected
on the mean diagonals, finite-sample GD iterates (fresh or from saved ``train`` runs), and the
ab(τ) / PL-ratio panels.

The figure is the run file: ``out`` (PDF, SVG or PNG) carries the configuration and the result
in its own metadata (:func:`mesadyn.plots.read_provenance`), so ``Config.from_run("p.pdf")``
and ``mesadyn rerun p.pdf`` rebuild and redraw it; ``out=None`` draws without writing.  The
full flows run to :func:`~mesadyn.analysis.horizon.full_flow_horizon` unless ``flow_t_end``
is given, each ends with the honest verdict of :func:`~mesadyn.analysis.steady.stop_verdict`
(one the steady-state test stopped at a saddle integrates on to its horizon:
:func:`~mesadyn.analysis.steady.leave_saddle`), and the portrait's ``status`` combines them
(:meth:`~mesadyn.outcome.Outcome.combine`).

Example:
    ```python
    from mesadyn.workflows import portrait

    res = portrait.run(portrait.Config(density=0.3))  # drawn, not written (out=None)
    res.status, res.window  # (<Outcome.OK: 'ok'>, (-2.5, 2.5, -2.5, 2.5))
    ```
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_bool, check_choice, check_finite, check_int, check_positive
from ..outcome import Outcome
from ..process import NoReducedSystem
from ..progress import ProgressCallback
from ..record import Record, hidden, omitted_if
from ._common import set_fields
from ._figure import FigureResult
from ._run import NOT_RECORDED, DeviceOptions, write_run

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes

    from ..field import Field
    from ..flow import FlowResult
    from ..process import Family
    from ..train import TrainResult

__all__ = ["Config", "FlowEnd", "GdEnd", "Result", "full_flows", "gd_runs", "parse_init", "run"]

#: The steady-state test of the full-flow overlays (max|∇L| below it stops a flow at a
#: minimum; one stopped at a saddle integrates on: :func:`~mesadyn.analysis.steady.leave_saddle`).
FLOW_STEADY_TOL = 1e-10
#: Draws of the Monte-Carlo field of a ``field="mc"`` overlay (the field's default).
DEFAULT_MC_SAMPLES = 100_000


def parse_init(text: str) -> tuple[float, float]:
    """``"a0,b0"`` → ``(a0, b0)``; anything else is a MesadynError echoing the text."""
    parts = text.replace(" ", "").split(",")
    if len(parts) != 2:
        raise MesadynError(f"--init must be a0,b0 (two numbers), got {text!r}")
    try:
        a0, b0 = float(parts[0]), float(parts[1])
    except ValueError:
        raise MesadynError(f"--init must be a0,b0 (two numbers), got {text!r}") from None
    return check_finite("a0", a0), check_finite("b0", b0)


def _pair(p: str | Sequence[float]) -> tuple[float, float]:
    if isinstance(p, str):
        return parse_init(p)
    if not isinstance(p, (tuple, list)) or len(p) != 2:
        raise MesadynError(f"init must be a pair a0,b0, got {p!r}")
    return check_finite("a0", p[0]), check_finite("b0", p[1])


def _inits(value: object) -> tuple[tuple[float, float], ...] | None:
    """``None``/empty (the paper's three) or a sequence of ``(a0, b0)`` pairs / ``"a0,b0"``."""
    if value is None or (isinstance(value, (tuple, list)) and not value):
        return None
    if isinstance(value, str):
        return (parse_init(value),)
    if not isinstance(value, (tuple, list)):
        raise MesadynError(f"init must be a list of (a0, b0) pairs, got {value!r}")
    return tuple(_pair(p) for p in value)


def _runs(value: object) -> tuple[str, ...] | None:
    """``None``/empty or a sequence of run-file paths (``gd_run``)."""
    if value is None or (isinstance(value, (tuple, list)) and not value):
        return None
    items = [value] if isinstance(value, (str, os.PathLike)) else value
    if not isinstance(items, (tuple, list)) or not all(
            isinstance(v, (str, os.PathLike)) and str(v).strip() for v in items):
        raise MesadynError(f"gd_run must be a list of run files, got {value!r}")
    return tuple(os.fspath(v) for v in items)


def _width(text: object) -> str | float | None:
    """``auto`` (None: the figure picks), ``one``, ``two`` (column widths) or inches."""
    if isinstance(text, str) and text == "auto":
        return None
    if isinstance(text, str) and text in ("one", "two"):
        return str(text)
    if isinstance(text, str):
        try:
            text = float(text)
        except ValueError:
            raise MesadynError(f"--width must be one, two or inches, got {text!r}") from None
    try:
        return check_positive("width", text)
    except MesadynError:
        raise MesadynError(f"--width must be one, two or inches, got {text!r}") from None


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of one portrait; see :func:`mesadyn.plots.portrait` for the drawing.

    ``out`` is the figure (its suffix picks PDF, SVG or PNG; ``None``: draw without writing);
    ``init`` lists diagonal inits as ``(a0, b0)`` pairs or ``"a0,b0"`` strings (default the
    paper's three); ``window`` is the half-width of the box (default: fit the inits);
    ``full_flow`` overlays the full flow of ``field`` to ``flow_t_end`` (default
    :func:`~mesadyn.analysis.horizon.full_flow_horizon`); ``gd`` overlays fresh GD runs
    (``gd_m``, ``gd_steps``, ``gd_lr``) and ``gd_run`` the iterates of saved train runs;
    ``width`` is auto, one, two or inches; ``dpi`` (PNG) is capped by
    :data:`mesadyn.plots.MAX_DPI` and the pixel budget; ``force`` runs Monte-Carlo /
    finite-sample full-flow overlays expected to exceed a minute; ``device`` (cpu, cuda, auto:
    :class:`DeviceOptions`) is where the full flow's field and the GD overlays run.
    """

    COMMAND = "portrait"
    OUT_SUFFIXES = (".pdf", ".svg", ".png")

    init: tuple[tuple[float, float], ...] | None = None
    window: float | None = None
    density: float = 1.2
    full_flow: bool = False
    field: str = "exact"
    flow_t_end: float | None = None
    gd: bool = False
    gd_run: tuple[str, ...] | None = None
    gd_m: int = 1000
    gd_steps: int = 200
    gd_lr: float | None = None
    inset_ab: bool = False
    inset_pl: bool = False
    width: str = "auto"
    dpi: int = 200
    force: bool = dataclasses.field(default=False, metadata=NOT_RECORDED)

    def __post_init__(self) -> None:
        from ..field import FieldKind
        from ..plots import check_raster_size, output_format

        if self.out is not None and isinstance(self.out, (str, os.PathLike)):
            output_format(self.out)  # the suffix picks the format: checked first
        super().__post_init__()
        if self.rotation == "real":
            raise NoReducedSystem(
                "rotation=real is not supported by portrait: its reduced flow is 3-D, on "
                "(W^KQ_32, W^KQ_23, W^PV_12) = (a, c, b)·I, and no (a, b) plane is invariant "
                "(ċ ≠ 0 at c = 0), so a 2-D (a, b) portrait would not be its phase portrait; "
                "use integrate --reduced --rotation real")
        self.constants()  # the portrait needs the 2-D reduced system (noise, Haar: their own)
        inits = _inits(self.init)
        width = _width(self.width)
        # no file: a vector stand-in checks the dpi's range alone
        dpi = check_raster_size(self.out or "portrait.pdf", width, self.dpi)
        set_fields(
            self, init=inits, dpi=dpi,
            window=None if self.window is None else check_positive("window", self.window),
            density=check_positive("density", self.density),
            field=check_choice("field", self.field, FieldKind),
            flow_t_end=(None if self.flow_t_end is None
                        else check_positive("flow_t_end", self.flow_t_end)),
            gd_run=_runs(self.gd_run),
            gd_m=check_int("gd_m", self.gd_m, 1), gd_steps=check_int("gd_steps", self.gd_steps, 1),
            gd_lr=None if self.gd_lr is None else check_positive("gd_lr", self.gd_lr),
            full_flow=check_bool("full_flow", self.full_flow), gd=check_bool("gd", self.gd),
            inset_ab=check_bool("inset_ab", self.inset_ab),
            inset_pl=check_bool("inset_pl", self.inset_pl), force=check_bool("force", self.force),
        )

    @property
    def inits(self) -> tuple[tuple[float, float], ...]:
        """The inits drawn: the given ones or the paper's three
        (:data:`mesadyn.plots.DEFAULT_INITS`)."""
        from ..plots import DEFAULT_INITS

        return self.init if self.init else DEFAULT_INITS


@dataclass(frozen=True)
class FlowEnd(Record):
    """Where the full flow from ``(a0, b0)`` ended, projected on the mean diagonals, and how
    (:func:`~mesadyn.analysis.steady.stop_verdict`)."""

    a0: float
    b0: float
    a_end: float
    b_end: float
    ab_end: float
    status: Outcome


@dataclass(frozen=True)
class GdEnd(Record):
    """The last GD iterate, projected on the mean diagonals."""

    a_end: float
    b_end: float


@dataclass(frozen=True)
class Result(FigureResult):
    """The portrait: constants, the drawn window, and the overlays' end points; ``out`` and
    ``format`` name the written figure (absent when it was only drawn), ``figure`` /
    ``axes`` are the figure and its (a, b) plane.  ``status`` combines the full-flow
    overlays' outcomes (``ok`` without them)."""

    family: str
    d: int
    T: int
    c1: float
    c2: float
    ab_star: float
    ab_limit: float
    window: tuple[float, float, float, float]
    inits: tuple[tuple[float, float], ...]
    notes: tuple[str, ...]
    out: str | None = omitted_if(None)
    format: str | None = omitted_if(None)
    full_flow: tuple[FlowEnd, ...] = omitted_if(())
    gd: tuple[GdEnd, ...] = omitted_if(())
    wall_s: float = 0.0
    axes: Axes | None = hidden()


def _field(config: Config, fam: Family) -> Field:
    """The full flow's field: ``field`` with :data:`DEFAULT_MC_SAMPLES` draws (mc) or ``gd_m``
    sequences (finite), on the config's device."""
    from ..field import make_field

    return make_field(config.sampled_spec(config.field, samples=DEFAULT_MC_SAMPLES,
                                    m=config.gd_m))


def full_flows(config: Config, fam: Family,
               progress: ProgressCallback | None = None) -> list[tuple[FlowResult, Outcome]]:
    """The full gradient flow (:func:`mesadyn.flow.integrate`) from each diagonal init, to
    ``flow_t_end`` or :func:`~mesadyn.analysis.horizon.full_flow_horizon`, with its verdict
    (:func:`~mesadyn.analysis.steady.stop_verdict`).

    ## Raises
    `MesadynError`: a sampled overlay expected to exceed a minute without ``force``
    (:func:`~mesadyn.workflows._cost.check_cost`).
    """
    from ..analysis.horizon import full_flow_horizon
    from ..analysis.steady import leave_saddle
    from ..field import FieldKind
    from ..flow import integrate
    from ..model import diagonal_init
    from ..reduced import ReducedSystem
    from ._cost import check_cost, sampled_flow_seconds

    c = config.constants()
    system = ReducedSystem(c.c1, c.c2)
    kind = FieldKind(config.field)
    if kind is not FieldKind.EXACT:
        m = DEFAULT_MC_SAMPLES if kind is FieldKind.MC else config.gd_m
        check_cost(sampled_flow_seconds(fam.d, config.T, m, len(config.inits),
                                        single_coordinate=fam.single_coordinate),
                   f"the {config.field} full-flow overlay", config.force)
    f = _field(config, fam)
    out = []
    for a0, b0 in config.inits:
        horizon = config.flow_t_end if config.flow_t_end is not None else full_flow_horizon(
            system, fam, gaussian=False, a0=a0, b0=b0, sigma_w=0.0, masked=False)
        flow = integrate(f, diagonal_init(fam.d, a0, b0), t_end=horizon,
                         steady_tol=FLOW_STEADY_TOL, progress=progress)
        t1 = float(flow.t[-1])

        def leg(theta: np.ndarray, span: float, t1: float = t1) -> FlowResult:
            return integrate(f, theta, t_end=span, steady_tol=0.0, progress=None if progress
                             is None else (lambda x: progress(t1 + x)))

        flow, verdict, _ = leave_saddle(flow, f, horizon, FLOW_STEADY_TOL, leg, len(flow.t) + 1000)
        out.append((flow, verdict))
    return out


def gd_runs(config: Config, fam: Family) -> list[TrainResult]:
    """Finite-sample GD (:func:`mesadyn.train.train`) from each diagonal init."""
    from ..train import train

    return [train(fam, config.T, m=config.gd_m, steps=config.gd_steps, lr=config.gd_lr, a0=a0,
                  b0=b0, seed=config.seed, eval_every=config.gd_steps,
                  device=config.torch_device, radius=config.radius)
            for a0, b0 in config.inits]


def _saved_runs(config: Config, d: int) -> list[Any]:
    """The saved train runs of ``gd_run``, checked to be train runs of this d."""
    from ._run import read_record

    runs = []
    for path in config.gd_run or ():
        record = read_record(path)  # the one validated reader: a malformed file is one line
        if record.kind != "train" or record.dataset is None:
            raise MesadynError(f"--gd-run {path!r} holds a {record.kind!r} run, expected a "
                               "'train' run")
        if record.config.get("d") not in (None, d):
            raise MesadynError(f"--gd-run {path!r} is for d={record.config.get('d')!r}, not "
                               f"d={d}")
        runs.append(record.dataset)
    return runs


def _verdict(ends: Sequence[FlowEnd]) -> tuple[Outcome, str]:
    status = Outcome.combine(e.status for e in ends)
    if not ends:
        return status, "the portrait of the reduced flow is drawn"
    bad = [e for e in ends if not e.status.ok]
    if bad:
        return status, "a full-flow overlay stopped early: " + ", ".join(
            f"init ({e.a0:g}, {e.b0:g}) {e.status}" for e in bad)
    return status, f"{len(ends)} full-flow overlay(s): " + ", ".join(
        f"init ({e.a0:g}, {e.b0:g}) {e.status}" for e in ends)


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Draw the portrait and write ``config.out`` with its provenance (PDF, SVG or PNG,
    deterministic bytes; :func:`~mesadyn.workflows.write_run`), or only draw it
    (``out=None``).

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with the flow time τ while full-flow overlays integrate.

    ## Returns
    A :class:`Result`; ``result.figure`` / ``result.axes`` are the drawn figure and its (a, b)
    plane.

    ## Raises
    - `MesadynError`: an unwritable ``out``; a ``gd_run`` that is not a train run of this d.
    """
    from ..io import check_writable
    from ..plots import PortraitWarning, ab_path, output_format, portrait

    t0 = time.perf_counter()
    if config.out is not None:
        check_writable(config.out, suffixes=config.OUT_SUFFIXES)
    fam = config.family()
    c = config.constants()
    runs = _saved_runs(config, fam.d)
    flows = full_flows(config, fam, progress) if config.full_flow else []
    if config.gd:
        runs += gd_runs(config, fam)
    inits = config.inits
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PortraitWarning)
        fig, ax = portrait(fam, config.T, inits=inits, window=config.window,
                           density=config.density, full_flow=[f for f, _ in flows] or None,
                           gd=runs or None,
                           inset_ab=config.inset_ab or config.full_flow,  # Prop. 4.2 shows there
                           inset_pl=config.inset_pl, width=_width(config.width))
    notes = tuple(str(w.message) for w in caught if issubclass(w.category, PortraitWarning))
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    ends = []
    for (a0, b0), (fl, verdict) in zip(inits if flows else (), flows, strict=True):
        a, b, _ = ab_path(fl)
        ends.append(FlowEnd(a0=a0, b0=b0, a_end=float(a[-1]), b_end=float(b[-1]),
                            ab_end=float(a[-1] * b[-1]), status=verdict))
    gd = []
    for r in runs:
        a, b, _ = ab_path(r)
        gd.append(GdEnd(a_end=float(a[-1]), b_end=float(b[-1])))
    status, message = _verdict(ends)
    result = Result(
        family=fam.name, d=fam.d, T=config.T, c1=c.c1, c2=c.c2, ab_star=c.ab_star,
        ab_limit=c.ab_limit, window=(float(xlim[0]), float(xlim[1]), float(ylim[0]),
                                     float(ylim[1])),
        inits=tuple(inits), notes=notes, out=config.out,
        format=None if config.out is None else output_format(config.out),
        full_flow=tuple(ends), gd=tuple(gd), wall_s=time.perf_counter() - t0, figure=fig,
        axes=ax, dpi=config.dpi, status=status, message=message,
    )
    return write_run(config, result)

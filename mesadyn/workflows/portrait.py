"""The phase portrait of the reduced flow (Lemma 5.2), drawn and written to a file.

Streamlines, nullclines, the fixed hyperbola ``ab = c2/c1``, the saddle and its manifolds,
basins, level sets of ``a² − b²`` and the closed-form trajectories from the inits
(:func:`mesadyn.plots.portrait`); optionally the full gradient flow from each init projected
on the mean diagonals, finite-sample GD iterates (fresh or from saved ``train`` runs), and the
ab(τ) / PL-ratio panels.

Example:
    >>> from mesadyn.workflows import portrait
    >>> res = portrait.run(portrait.Config(out="portrait.svg", density=0.3))  # doctest: +SKIP
    >>> res.window
    (-2.5, 2.5, -2.5, 2.5)
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_finite, check_int, check_positive
from ..progress import ProgressCallback
from ._common import choice, set_fields
from ._device import DeviceOptions

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..field import Field
    from ..flow import FlowResult
    from ..process import Family
    from ..train import TrainResult

__all__ = ["Config", "FlowEnd", "GdEnd", "Result", "parse_init", "run"]

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
    if len(p) != 2:
        raise MesadynError(f"init must be a pair a0,b0, got {p!r}")
    return check_finite("a0", p[0]), check_finite("b0", p[1])


def _width(text: str | float) -> str | float | None:
    """``auto`` (None: the figure picks), ``one``, ``two`` (column widths) or inches."""
    if text == "auto":
        return None
    if text in ("one", "two"):
        return str(text)
    try:
        return float(text)
    except ValueError:
        raise MesadynError(f"--width must be one, two or inches, got {text!r}") from None


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of one portrait; see :func:`mesadyn.plots.portrait` for the drawing.

    ``init`` lists diagonal inits as ``(a0, b0)`` pairs or ``"a0,b0"`` strings (default the
    paper's three); ``window`` is the half-width of the box (default: fit the inits);
    ``full_flow`` overlays the full flow of ``field`` to ``flow_t_end`` (default the reduced
    system's horizon); ``gd`` overlays fresh GD runs (``gd_m``, ``gd_steps``, ``gd_lr``) and
    ``gd_run`` the iterates of saved train runs; ``width`` is auto, one, two or inches;
    ``dpi`` (PNG) is capped by :data:`mesadyn.plots.MAX_DPI` and the pixel budget; ``force``
    runs Monte-Carlo / finite-sample full-flow overlays expected to exceed a minute; ``device``
    (cpu, cuda, auto: :class:`DeviceOptions`) is where the full flow's field and the GD
    overlays run.
    """

    out: str = "portrait.pdf"
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
    force: bool = False

    def __post_init__(self) -> None:
        from ..field import FieldKind
        from ..plots import check_raster_size, output_format

        output_format(self.out)  # the suffix picks the format: checked first
        super().__post_init__()
        self.constants()  # the portrait needs the reduced system (refuses rotations, noise)
        inits = None if not self.init else tuple(_pair(p) for p in self.init)
        width = _width(self.width)
        dpi = check_int("dpi", self.dpi, 20)
        check_raster_size(self.out, width, dpi)
        set_fields(
            self, init=inits, dpi=dpi,
            window=None if self.window is None else check_positive("window", self.window),
            density=check_positive("density", self.density),
            field=choice("field", self.field, FieldKind),
            flow_t_end=(None if self.flow_t_end is None
                        else check_positive("flow_t_end", self.flow_t_end)),
            gd_run=None if not self.gd_run else tuple(str(p) for p in self.gd_run),
            gd_m=check_int("gd_m", self.gd_m, 1), gd_steps=check_int("gd_steps", self.gd_steps, 1),
            gd_lr=None if self.gd_lr is None else check_positive("gd_lr", self.gd_lr),
            full_flow=bool(self.full_flow), gd=bool(self.gd), inset_ab=bool(self.inset_ab),
            inset_pl=bool(self.inset_pl), force=bool(self.force),
        )

    @property
    def inits(self) -> tuple[tuple[float, float], ...]:
        """The inits drawn: the given ones or the paper's three
        (:data:`mesadyn.plots.DEFAULT_INITS`)."""
        from ..plots import DEFAULT_INITS

        return self.init if self.init else DEFAULT_INITS


@dataclass(frozen=True)
class FlowEnd:
    """Where the full flow from ``(a0, b0)`` ended, projected on the mean diagonals."""

    a0: float
    b0: float
    a_end: float
    b_end: float
    ab_end: float
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {"a0": self.a0, "b0": self.b0, "a_end": self.a_end, "b_end": self.b_end,
                "ab_end": self.ab_end, "status": self.status}


@dataclass(frozen=True)
class GdEnd:
    """The last GD iterate, projected on the mean diagonals."""

    a_end: float
    b_end: float

    def to_dict(self) -> dict[str, Any]:
        return {"a_end": self.a_end, "b_end": self.b_end}


@dataclass(frozen=True)
class Result:
    """The written portrait: file, constants, drawn window, and the overlays' end points."""

    out: str
    format: str
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
    full_flow: tuple[FlowEnd, ...] = ()
    gd: tuple[GdEnd, ...] = ()
    wall_s: float = 0.0
    figure: Figure | None = field(default=None, repr=False, compare=False)
    axes: Axes | None = field(default=None, repr=False, compare=False)

    @property
    def status(self) -> str:
        """``ok``, or ``failed`` when a full-flow overlay failed or hit its step limit."""
        bad = [e for e in self.full_flow if e.status in ("failed", "max_steps")]
        return "failed" if bad else "ok"

    def to_dict(self) -> dict[str, Any]:
        """The ``mesadyn portrait --json`` object."""
        out: dict[str, Any] = {
            "out": self.out, "format": self.format, "family": self.family, "d": self.d,
            "T": self.T, "c1": self.c1, "c2": self.c2, "ab_star": self.ab_star,
            "ab_limit": self.ab_limit, "window": list(self.window),
            "inits": [list(p) for p in self.inits], "notes": list(self.notes),
        }
        if self.full_flow:
            out["full_flow"] = [e.to_dict() for e in self.full_flow]
        if self.gd:
            out["gd"] = [e.to_dict() for e in self.gd]
        out["wall_s"] = self.wall_s
        return out


def _field(config: Config, fam: Family) -> Field:
    from ..field import FieldKind, make_field

    kind = FieldKind(config.field)
    device = config.torch_device
    if kind is FieldKind.MC:
        return make_field(config.field_spec(kind, samples=DEFAULT_MC_SAMPLES, seed=config.seed,
                                            device=device))
    if kind is FieldKind.FINITE:
        return make_field(config.field_spec(kind, m=config.gd_m, seed=config.seed,
                                            device=device))
    return make_field(config.field_spec(kind, device=device))


def full_flows(config: Config, fam: Family,
               progress: ProgressCallback | None = None) -> list[FlowResult]:
    """The full gradient flow (:func:`mesadyn.flow.integrate`) from each diagonal init, to
    ``flow_t_end`` or the reduced system's horizon."""
    from ..field import FieldKind
    from ..flow import integrate
    from ..model import diagonal_init
    from ..reduced import ReducedSystem
    from .integrate import check_cost, sampled_flow_seconds

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
        horizon = config.flow_t_end if config.flow_t_end is not None else system.horizon(a0, b0)
        out.append(integrate(f, diagonal_init(fam.d, a0, b0), t_end=horizon, progress=progress))
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
    from ..io import load_run, run_config

    runs = []
    for path in config.gd_run or ():
        ds = load_run(path)
        if ds.attrs.get("kind") != "train":
            raise MesadynError(f"--gd-run {path!r} holds a {ds.attrs.get('kind')!r} run, "
                               "expected a 'train' run")
        cfg = run_config(ds)
        if cfg.get("d") not in (None, d):
            raise MesadynError(f"--gd-run {path!r} is for d={cfg.get('d')}, not d={d}")
        runs.append(ds)
    return runs


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Draw the portrait and write ``config.out`` (PDF, SVG or PNG, deterministic bytes).

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
    from ..plots import FORMATS, PortraitWarning, ab_path, output_format, portrait, save

    t0 = time.perf_counter()
    check_writable(config.out, suffixes=tuple(f".{s}" for s in FORMATS))
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
                           density=config.density, full_flow=flows or None, gd=runs or None,
                           inset_ab=config.inset_ab or config.full_flow,  # Prop. 4.2 shows there
                           inset_pl=config.inset_pl, width=_width(config.width))
    notes = tuple(str(w.message) for w in caught if issubclass(w.category, PortraitWarning))
    path = save(fig, config.out, dpi=config.dpi)
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    ends = []
    for (a0, b0), fl in zip(inits if flows else (), flows, strict=True):
        a, b, _ = ab_path(fl)
        ends.append(FlowEnd(a0=a0, b0=b0, a_end=float(a[-1]), b_end=float(b[-1]),
                            ab_end=float(a[-1] * b[-1]), status=str(fl.status)))
    gd = []
    for r in runs:
        a, b, _ = ab_path(r)
        gd.append(GdEnd(a_end=float(a[-1]), b_end=float(b[-1])))
    return Result(
        out=str(path), format=output_format(config.out), family=fam.name, d=fam.d, T=config.T,
        c1=c.c1, c2=c.c2, ab_star=c.ab_star, ab_limit=c.ab_limit,
        window=(xlim[0], xlim[1], ylim[0], ylim[1]), inits=tuple(inits), notes=notes,
        full_flow=tuple(ends), gd=tuple(gd), wall_s=time.perf_counter() - t0, figure=fig,
        axes=ax,
    )

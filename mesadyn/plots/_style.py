"""Publication style: sizes, a colour-blind-safe palette, deterministic vector and raster output.

Everything here is scoped: :func:`style` is a context manager around ``matplotlib.rc_context``,
so importing or using mesadyn never changes the caller's global rcParams.  :func:`save` writes
PDF, SVG or PNG (chosen by the suffix) with every timestamp and random id pinned, so the same
figure gives byte-identical files; SVG and PDF keep text as text (editable labels).

The keys every figure shares live here too: one colour per initialisation
(:func:`init_colours`, the paper's three diagonal inits and σ_w of the Gaussian inits) and one
way to name a family with its parameter (:func:`family_label`, :func:`family_title`).  Readable
log ticks and texts fitted to their axes are in :mod:`mesadyn.plots._axes`.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, final

import matplotlib
from cycler import cycler
from matplotlib.figure import Figure

from ..errors import MesadynError

if TYPE_CHECKING:
    from ..process import Family

#: Okabe & Ito (2008) colour-blind-safe palette.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "skyblue": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
#: The cycle used for series (black first is reserved for theory lines).
CYCLE: tuple[str, ...] = (
    OKABE_ITO["blue"], OKABE_ITO["vermillion"], OKABE_ITO["green"], OKABE_ITO["purple"],
    OKABE_ITO["orange"], OKABE_ITO["skyblue"], OKABE_ITO["yellow"],
)

# --------------------------------------------------------------------------- initialisations


@final
@dataclass(frozen=True)
class DiagonalInit:
    """Assumption 3.1's start: ``W^KQ_32 = a0 I``, ``W^PV_12 = b0 I``, every other entry 0."""

    a0: float
    b0: float

    @property
    def label(self) -> str:
        """Mathtext, e.g. ``$(a_0,b_0)=(0.5,1.5)$``."""
        return rf"$(a_0,b_0)=({self.a0:g},{self.b0:g})$"


@final
@dataclass(frozen=True)
class GaussianInit:
    """Every entry of θ drawn from ``N(0, σ_w²)``."""

    sigma_w: float

    @property
    def label(self) -> str:
        """Mathtext, e.g. ``$\\sigma_w=0.01$``."""
        return rf"$\sigma_w={self.sigma_w:g}$"


#: An initialisation, as the figures key it.
Init = DiagonalInit | GaussianInit

#: The paper's initialisations (Section 6) and their colour in every figure: the portraits,
#: ``ab_convergence``, ``loss_curves`` and the overlays all take it from here.
INIT_COLOURS: dict[Init, str] = {
    DiagonalInit(0.1, 0.1): OKABE_ITO["blue"],
    DiagonalInit(0.5, 1.5): OKABE_ITO["black"],
    DiagonalInit(2.0, 2.0): OKABE_ITO["orange"],
    GaussianInit(0.001): OKABE_ITO["skyblue"],
    GaussianInit(0.01): OKABE_ITO["purple"],
    GaussianInit(0.1): OKABE_ITO["green"],
}
#: Colours of any other init, in order of first appearance, skipping those the figure already
#: uses.  Vermillion (the fixed set ``ab = c2/c1``) and yellow (the full flow) come last: the
#: phase portrait draws those layers in them.
EXTRA_INIT_COLOURS: tuple[str, ...] = (
    OKABE_ITO["skyblue"], OKABE_ITO["purple"], OKABE_ITO["green"], "0.45",
    OKABE_ITO["vermillion"], OKABE_ITO["yellow"],
)
#: Two init parameters closer than this (relative) are the same init.
_INIT_RTOL = 1e-9


def _same(x: Init, y: Init) -> bool:
    if isinstance(x, DiagonalInit) and isinstance(y, DiagonalInit):
        return (math.isclose(x.a0, y.a0, rel_tol=_INIT_RTOL, abs_tol=1e-300)
                and math.isclose(x.b0, y.b0, rel_tol=_INIT_RTOL, abs_tol=1e-300))
    if isinstance(x, GaussianInit) and isinstance(y, GaussianInit):
        return math.isclose(x.sigma_w, y.sigma_w, rel_tol=_INIT_RTOL)
    return False


def paper_colour(init: Init) -> str | None:
    """The fixed colour of one of the paper's inits (:data:`INIT_COLOURS`), else None."""
    return next((c for key, c in INIT_COLOURS.items() if _same(key, init)), None)


def init_colours(inits: Sequence[Init | None]) -> list[str]:
    """One colour per entry of ``inits``: a paper init keeps its colour of
    :data:`INIT_COLOURS` in every figure; another init (or ``None``, an unknown one) takes the
    next colour of :data:`EXTRA_INIT_COLOURS` unused in this list (cycling when all are used),
    and the same init listed twice gets the same colour."""
    out: list[str | None] = [None if k is None else paper_colour(k) for k in inits]
    used = {c for c in out if c is not None}
    spare = [c for c in EXTRA_INIT_COLOURS if c not in used] or list(EXTRA_INIT_COLOURS)
    given: list[tuple[Init, str]] = []
    n = 0
    for i, key in enumerate(inits):
        if out[i] is not None:
            continue
        same = next((c for k, c in given if key is not None and _same(k, key)), None)
        if same is None:
            same = spare[n % len(spare)]
            n += 1
            if key is not None:
                given.append((key, same))
        out[i] = same
    return [c for c in out if c is not None]


def init_of(config: Mapping[str, Any]) -> Init | None:
    """The init a run's configuration records: ``a0``/``b0`` (diagonal) or ``sigma_w`` with
    ``init="gaussian"``; None when it records neither (e.g. a given θ0)."""
    kind = config.get("init")
    sigma_w = config.get("sigma_w")
    if kind == "gaussian" and sigma_w is not None:
        return GaussianInit(float(sigma_w))
    a0, b0 = config.get("a0"), config.get("b0")
    if kind in (None, "diagonal") and a0 is not None and b0 is not None:
        return DiagonalInit(float(a0), float(b0))
    return None


# --------------------------------------------------------------------------- families

#: Mathtext symbols of the families' parameters (the paper's: σ for gaussian, c for sparse).
_PARAM_TEX: dict[str, str] = {"sigma": r"\sigma", "scale": "c", "c": "c", "mu": r"\mu",
                              "m2": "m_2", "m4": "m_4", "m6": "m_6"}
#: The parameters that define each named family (the keys of its ``describe()``).
_FAMILY_PARAMS: dict[str, tuple[str, ...]] = {
    "gaussian": ("sigma",), "sparse": ("scale", "c"), "shifted": ("mu", "sigma"),
    "iid": ("m2", "m4", "m6"), "ones": (), "rademacher": (), "uniform": (),
}


def _family_parts(family: Family | Mapping[str, Any]) -> tuple[str, int | None, dict[str, Any]]:
    """(name, d, parameters) of a Family or of its ``describe()`` (a run's ``family``)."""
    if isinstance(family, Mapping):
        name = str(family.get("family", family.get("name", "?")))
        keys = _FAMILY_PARAMS.get(name, tuple(k for k in ("sigma", "scale", "mu")
                                              if k in family))
        params = {k: family[k] for k in keys if family.get(k) is not None}
        d = family.get("d")
        return name, None if d is None else int(d), params
    return family.name, family.d, dict(family.params)


def family_of(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The family a run's configuration records, as a ``describe()``-like mapping: its
    ``family`` entry, or the process options ``x1`` (with ``d``, ``sigma``, ``scale``, ``mu``)
    of a workflow's configuration; None when it records neither."""
    fam = config.get("family")
    if isinstance(fam, Mapping):
        return fam
    name = config.get("x1")
    if name is None:
        return None
    return {"family": str(name), **{k: config[k] for k in ("d", "sigma", "scale", "mu")
                                    if config.get(k) is not None}}


def family_label(family: Family | Mapping[str, Any]) -> str:
    """The family named with its parameter, as mathtext: ``gaussian ($\\sigma=0.5$)``,
    ``sparse ($c=0.5$)``, ``ones`` (a family without parameters is its name)."""
    name, _d, params = _family_parts(family)
    if not params:
        return name
    inner = ", ".join(f"{_PARAM_TEX.get(k, k)}={float(v):g}" for k, v in params.items())
    return f"{name} (${inner}$)"


def family_title(family: Family | Mapping[str, Any], **more: Any) -> str:
    """A figure title: the family with its parameter, ``d`` and each of ``more`` in order
    (``family_title(gaussian(5, 0.5), T=100, m=500)`` is
    ``gaussian ($\\sigma=0.5$), $d=5$, $T=100$, $m=500$``); ``None`` values are left out."""
    _name, d, _params = _family_parts(family)
    parts = [family_label(family)]
    items = ({"d": d} if d is not None else {}) | more
    parts += [f"${k}={v:g}$" if isinstance(v, (int, float)) else f"${k}={v}$"
              for k, v in items.items() if v is not None]
    return ", ".join(parts)


#: Figure widths in inches for one- and two-column papers (NeurIPS/ICML-like templates).
WIDTHS: dict[str, float] = {"one": 3.4, "two": 7.0}

#: Output formats chosen by the suffix of ``--out``.
FORMATS: tuple[str, ...] = ("pdf", "svg", "png")

#: Default raster resolution (modest: figures are meant to be vector).
DPI = 200
#: Largest accepted resolution (dots per inch); a bigger request is refused before drawing.
MAX_DPI = 1200
#: Largest raster (PNG) in pixels: a bigger request is refused before drawing instead of
#: allocating gigabytes.
MAX_PIXELS = 50_000_000
#: Largest figure width in inches, and the tallest aspect (height / width) any mesadyn figure
#: uses, so a raster's size is bounded before the figure is drawn.
MAX_WIDTH_IN = 20.0
MAX_ASPECT = 1.25

_RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 8.0,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 7.0,
    "ytick.labelsize": 7.0,
    "legend.fontsize": 7.0,
    "legend.frameon": False,
    "mathtext.fontset": "dejavusans",
    "axes.prop_cycle": cycler(color=list(CYCLE)),
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "lines.markersize": 4.0,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.direction": "out",
    "ytick.direction": "out",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
    "savefig.dpi": DPI,
    "figure.constrained_layout.use": True,
    "image.cmap": "viridis",
    # determinism: fixed ids and salts; text stays text (SVG <text>, PDF Type 42 fonts)
    "svg.hashsalt": "mesadyn",
    "svg.id": "mesadyn",
    "svg.fonttype": "none",
    "pdf.fonttype": 42,
    "path.simplify": True,
}

#: Metadata that pins every timestamp so the files are reproducible byte for byte.
_METADATA: dict[str, dict[str, Any]] = {
    "svg": {"Date": None, "Creator": "mesadyn"},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": "mesadyn", "Producer": "mesadyn"},
    "png": {"Software": "mesadyn"},
}


@contextmanager
def style(**overrides: Any) -> Iterator[None]:
    """Scope the publication rcParams (plus ``overrides``) to a ``with`` block."""
    rc = dict(_RC)
    rc.update(overrides)
    with matplotlib.rc_context(cast(Any, rc)):
        yield


def figsize(width: str | float = "one", aspect: float = 0.75) -> tuple[float, float]:
    """``(w, h)`` in inches: ``width`` is "one", "two" or inches; ``h = aspect · w``."""
    if isinstance(width, str):
        if width not in WIDTHS:
            raise MesadynError(f"figure width must be 'one', 'two' or inches, got {width!r}")
        w = WIDTHS[width]
    else:
        w = float(width)
        if not 1.0 <= w <= MAX_WIDTH_IN:
            raise MesadynError(f"figure width must be 1..{MAX_WIDTH_IN:g} inches, got {width!r}")
    if not 0.0 < aspect <= MAX_ASPECT:
        raise MesadynError(f"figure aspect must be in (0, {MAX_ASPECT:g}], got {aspect!r}")
    return (w, aspect * w)


def new_figure(width: str | float = "one", aspect: float = 0.75, **kw: Any) -> Figure:
    """A new Figure (not registered with pyplot) with constrained layout; call inside style()."""
    return Figure(figsize=figsize(width, aspect), layout="constrained", **kw)


def finish(fig: Figure) -> Figure:
    """Run constrained layout to its fixed point, then freeze it (call inside :func:`style`).

    Constrained layout is iterative and re-runs on every draw, so two saves of one figure could
    differ in the last digits; freezing makes every render byte-identical.  After editing the
    returned figure, call ``fig.set_layout_engine("constrained")`` to lay it out again.

    Both passes draw on one Agg canvas, so they share its renderer and with it matplotlib's
    per-renderer caches of text metrics and parsed mathtext (a fresh canvas per pass parsed
    every label again: half of the layout time of a portrait).  The layout is the same.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)  # one canvas: both passes share its renderer and text caches
    for _ in range(2):
        fig.draw_without_rendering()
    # Freeze: no layout engine at all.  (``"none"`` would leave a placeholder engine, and
    # savefig runs a whole extra draw before printing any figure that has an engine.)
    with matplotlib.rc_context({"figure.autolayout": False,
                                "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)
    return fig


def output_format(path: str | os.PathLike[str]) -> str:
    """The format from the suffix of ``path`` (.pdf, .svg, .png); anything else is an error."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise MesadynError(
            f"--out must end in .pdf, .svg or .png, got {str(path)!r}"
        )
    return suffix


def check_dpi(dpi: object) -> int:
    """``dpi`` as an int in ``20 .. MAX_DPI``, or a MesadynError naming it."""
    from ..errors import check_int

    value = check_int("dpi", dpi, 20)
    if value > MAX_DPI:
        raise MesadynError(f"dpi must be <= {MAX_DPI}, got dpi={value}")
    return value


def _check_pixels(w_in: float, h_in: float, dpi: int) -> None:
    pixels = (w_in * dpi) * (h_in * dpi)
    if pixels > MAX_PIXELS:
        raise MesadynError(
            f"a {w_in:g}x{h_in:g} in figure at dpi={dpi} is {pixels / 1e6:.0f} Mpixel, over the "
            f"{MAX_PIXELS / 1e6:.0f} Mpixel limit; lower --dpi or the width"
        )


def check_raster_size(path: str | os.PathLike[str], width: str | float | None,
                      dpi: object) -> int:
    """Check, before drawing, that a figure of ``width`` ("one", "two", inches; ``None`` = the
    widest of the two columns) saved to ``path`` at ``dpi`` stays within the caps.

    Only raster output (PNG) is bounded by pixels; ``dpi`` is bounded for every format.

    Returns:
        The checked dpi.

    Raises:
        MesadynError: a dpi outside ``20 .. MAX_DPI`` or a raster over ``MAX_PIXELS``.
    """
    value = check_dpi(dpi)
    if output_format(path) == "png":
        w_in = figsize(WIDTHS["two"] if width is None else width)[0]
        _check_pixels(w_in, MAX_ASPECT * w_in, value)
    return value


def render(fig: Figure, fmt: str, dpi: int = DPI) -> bytes:
    """The figure as bytes in ``fmt`` with pinned metadata (deterministic).

    Raises:
        MesadynError: an unknown format, a dpi outside ``20 .. MAX_DPI``, or a PNG over
            ``MAX_PIXELS``.
    """
    if fmt not in FORMATS:
        raise MesadynError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    dpi = check_dpi(dpi)
    if fmt == "png":
        w_in, h_in = fig.get_size_inches()
        _check_pixels(float(w_in), float(h_in), dpi)
    buf = io.BytesIO()
    # constrained_layout.use off: savefig restores the figure's engine afterwards, and for a
    # figure frozen by finish() (no engine) that restore must not switch layout back on.
    with style(**{"figure.constrained_layout.use": False}):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
    return buf.getvalue()


def save(fig: Figure, path: str | os.PathLike[str], dpi: int = DPI, *,
         provenance: Mapping[str, Any] | None = None) -> Path:
    """Write ``fig`` to ``path`` atomically; the suffix picks PDF, SVG or PNG.  A
    ``provenance`` (kind, config, result, mesadyn_version, seed) is embedded in the file's
    metadata (:mod:`mesadyn.plots._provenance`; :func:`mesadyn.plots.read_provenance`)."""
    from ..io import atomic_write_bytes

    fmt = output_format(path)
    data = render(fig, fmt, dpi=dpi)
    if provenance is not None:
        from ._provenance import embed

        data = embed(data, fmt, provenance)
    return atomic_write_bytes(path, data)

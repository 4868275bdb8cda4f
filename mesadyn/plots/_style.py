"""Publication style: sizes, a colour-blind-safe palette, deterministic vector and raster output.

Everything here is scoped: :func:`style` is a context manager around ``matplotlib.rc_context``,
so importing or using mesadyn never changes the caller's global rcParams.  :func:`save` writes
PDF, SVG or PNG (chosen by the suffix) with every timestamp and random id pinned, so the same
figure gives byte-identical files.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from ..errors import MesadynError

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
    "axes.prop_cycle": matplotlib.cycler(color=list(CYCLE)),
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
    # determinism: fixed ids and salts, text as paths in SVG, fonts subset in PDF
    "svg.hashsalt": "mesadyn",
    "svg.id": "mesadyn",
    "svg.fonttype": "path",
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
    with matplotlib.rc_context(rc):
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


def save(fig: Figure, path: str | os.PathLike[str], dpi: int = DPI) -> Path:
    """Write ``fig`` to ``path`` atomically; the suffix picks PDF, SVG or PNG."""
    from ..io import atomic_write_bytes

    fmt = output_format(path)
    return atomic_write_bytes(path, render(fig, fmt, dpi=dpi))

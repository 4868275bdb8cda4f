"""Readable axes and texts that fit: plain-number ticks on a logarithmic axis
(:func:`log_ticks`) and a text shrunk until it lies inside its axes (:func:`fit_inside`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, final

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, Locator, LogLocator, MaxNLocator, NullLocator

from ..errors import MesadynError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

__all__ = ["ReadableLogLocator", "fit_inside", "log_ticks", "text_extent"]


def _plain(value: float, _pos: object = None) -> str:
    """A tick label as a plain number (``0.5``, ``3.7``, ``200``); ``10^k`` or ``m×10^k``
    only far from 1, where plain digits would run long."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    e = math.floor(math.log10(abs(value)) + 1e-12)
    if -3 <= e <= 4:
        return f"{value:.6g}"
    m = value / 10.0**e
    if math.isclose(m, 1.0, rel_tol=1e-9):
        return rf"$10^{{{e}}}$"
    return rf"${m:.3g}\times10^{{{e}}}$"


@final
class ReadableLogLocator(Locator):
    """Major ticks of a logarithmic axis that always label it: over less than a decade, three
    to five evenly spaced round values (3.6, 3.7, 3.8); up to three decades, ``1, 2, 5 × 10^k``;
    beyond, the decades."""

    def __call__(self) -> Sequence[float]:
        assert self.axis is not None
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(float(vmin), float(vmax))

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        lo, hi = sorted((vmin, vmax))
        if not hi > 0:
            return []
        lo = max(lo, hi * 1e-300)
        decades = math.log10(hi / lo)
        if decades < 1.0:
            ticks = np.asarray(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi))
            return [float(t) for t in ticks if t > 0]
        subs = (1.0, 2.0, 5.0) if decades <= 3.0 else (1.0,)
        return [float(t) for t in LogLocator(base=10.0, subs=subs, numticks=12)
                .tick_values(lo, hi)]


def log_ticks(ax: Axes, which: str = "y") -> None:
    """Readable ticks on a logarithmic ``which`` axis (``"x"``, ``"y"`` or ``"both"``):
    :class:`ReadableLogLocator` labelled as plain numbers, minor ticks unlabelled (never
    ``3.8×10⁰``).  Call after ``set_yscale("log")``, which resets the ticks."""
    if which not in ("x", "y", "both"):
        raise MesadynError(f"which must be 'x', 'y' or 'both', got {which!r}")
    for axis in ([ax.xaxis] if which == "x" else [ax.yaxis] if which == "y"
                 else [ax.xaxis, ax.yaxis]):
        axis.set_major_locator(ReadableLogLocator())
        axis.set_major_formatter(FuncFormatter(_plain))
        axis.set_minor_locator(NullLocator())


def text_extent(text: Text) -> Bbox:
    """The display-space box a text covers, its background box included (draw first)."""
    from matplotlib.transforms import Bbox

    fig = text.get_figure(root=True)
    assert isinstance(fig, Figure)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [text.get_window_extent(renderer)]
    patch = text.get_bbox_patch()
    if patch is not None:
        boxes.append(patch.get_window_extent(renderer))
    return Bbox.union(boxes)


def fit_inside(text: Text, ax: Axes | None, min_size: float = 4.0) -> None:
    """Shrink ``text`` (down to ``min_size`` points) until its extent lies inside ``ax``,
    for a figure laid out by :func:`finish` (whose layout no longer moves)."""
    if ax is None:
        return
    fig = text.get_figure(root=True)
    assert isinstance(fig, Figure)
    for _ in range(8):
        fig.draw_without_rendering()
        box, frame = text_extent(text), ax.get_window_extent()
        ratio = min(frame.width / max(box.width, 1e-9), frame.height / max(box.height, 1e-9))
        inside = (box.x0 >= frame.x0 - 0.5 and box.x1 <= frame.x1 + 0.5
                  and box.y0 >= frame.y0 - 0.5 and box.y1 <= frame.y1 + 0.5)
        size = float(text.get_fontsize())
        if inside or size <= min_size:
            return
        text.set_fontsize(max(min_size, size * min(0.95, 0.97 * ratio)))

"""Readers of a drawn figure shared by the figure tests: where its texts lie, what its legends
key, what colour each drawn series has."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

#: Slack in display pixels for the extent checks (antialiasing, rounding).
SLACK = 1.0


def _inside(box: Any, frame: Any) -> bool:
    return (box.x0 >= frame.x0 - SLACK and box.x1 <= frame.x1 + SLACK
            and box.y0 >= frame.y0 - SLACK and box.y1 <= frame.y1 + SLACK)


def _text_box(text: Any, renderer: Any) -> Any:
    from matplotlib.transforms import Bbox

    boxes = [text.get_window_extent(renderer)]
    if text.get_bbox_patch() is not None:
        boxes.append(text.get_bbox_patch().get_window_extent(renderer))
    return Bbox.union(boxes)


def outside_texts(fig: Figure) -> list[str]:
    """What is drawn outside its frame: each axes (ticks, labels, title) and legend outside the
    figure; each text written in an axes (annotations, an inset's claim) outside that axes."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    bad = []
    for ax in fig.axes + [c for a in fig.axes for c in a.child_axes]:
        if not _inside(ax.get_tightbbox(renderer), frame):
            bad.append(f"axes {ax.get_label() or ax.get_gid()!r} {ax.get_title()!r}")
        for t in ax.texts:
            if t.get_visible() and t.get_text() and not _inside(_text_box(t, renderer),
                                                              ax.get_window_extent(renderer)):
                bad.append(f"text {t.get_text()!r} outside its axes")
    for leg in legends(fig):
        if not _inside(leg.get_window_extent(renderer), frame):
            bad.append(f"legend {[t.get_text() for t in leg.get_texts()]!r}")
    for t in fig.texts:
        if t.get_visible() and t.get_text() and not _inside(_text_box(t, renderer), frame):
            bad.append(f"figure text {t.get_text()!r}")
    return bad


def legends(fig: Figure) -> list[Legend]:
    """Every legend of the figure: the figure's and each axes' (insets included)."""
    out = list(fig.legends)
    for ax in fig.axes + [c for a in fig.axes for c in a.child_axes]:
        if ax.get_legend() is not None:
            out.append(ax.get_legend())
    return out


def colour(artist: Any) -> str:
    """The colour of a line, a patch or a legend handle, as ``#rrggbb``."""
    if isinstance(artist, Line2D):
        return to_hex(artist.get_color())
    if isinstance(artist, Patch):
        return to_hex(artist.get_facecolor())
    face = artist.get_facecolor()
    return to_hex(face[0] if len(face) else artist.get_edgecolor()[0])


def legend_entries(fig: Figure) -> list[tuple[str, str]]:
    """``(label, colour)`` of every entry of every legend."""
    out = []
    for leg in legends(fig):
        for h, t in zip(leg.legend_handles, leg.get_texts(), strict=True):
            out.append((t.get_text(), colour(h)))
    return out


def lines_by_gid(fig: Figure, prefix: str) -> dict[str, Line2D]:
    """The drawn lines whose gid starts with ``prefix``, by gid (insets included)."""
    out = {}
    for ax in fig.axes + [c for a in fig.axes for c in a.child_axes]:
        for ln in ax.get_lines():
            gid = ln.get_gid()
            if gid is not None and gid.startswith(prefix):
                out[gid] = ln
    return out


@pytest.fixture
def figure_reader() -> Callable[..., Any]:
    """The readers above, as one namespace."""
    import types

    return types.SimpleNamespace(outside_texts=outside_texts, legends=legends, colour=colour,
                                 legend_entries=legend_entries, lines_by_gid=lines_by_gid)

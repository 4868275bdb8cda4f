"""Figures of gradient descent as a map: phase diagrams coloured by the regime of each run
(:mod:`mesadyn.analysis.gd_batch`), the stability limits along the minimiser set, the
period-2 branch, where GD lands, and GD against its central flow.  Every function returns
``(Figure, Axes)``; save with :func:`mesadyn.plots.save`.

One colour per regime in every figure (:data:`REGIME_COLOURS`, Okabe & Ito); the paper's own
runs are marked by white-edged symbols (:class:`Mark`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..analysis.gd_batch import REGIMES
from ..analysis.gd_regime import Regime
from ._style import OKABE_ITO, finish, new_figure, style

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..analysis.central_flow import CentralComparison
    from ..analysis.gd_landing import ReducedLanding
    from ..analysis.gd_limits import StabilityLimits
    from ..analysis.gd_orbits import Period2Branch

__all__ = ["REGIME_COLOURS", "Mark", "central_flow_figure", "landing_figure",
           "period2_figure", "phase_diagram", "regime_legend", "stability_figure"]

#: The colour of each regime, in every figure.
REGIME_COLOURS: dict[Regime, str] = {
    Regime.MONOTONE: OKABE_ITO["blue"],
    Regime.CATAPULT: OKABE_ITO["green"],
    Regime.EDGE_OF_STABILITY: OKABE_ITO["orange"],
    Regime.PERIODIC: OKABE_ITO["purple"],
    Regime.CHAOTIC: OKABE_ITO["vermillion"],
    Regime.DIVERGENT: "0.15",
    Regime.CONVERGING: OKABE_ITO["skyblue"],
    Regime.UNSETTLED: "0.82",
}
_LABELS = {Regime.EDGE_OF_STABILITY: "edge of stability"}


@dataclass(frozen=True)
class Mark:
    """A run to mark on a phase diagram: its position, the legend entry of its group (marks
    sharing a label and a marker are one entry) and a marker symbol."""

    x: float
    y: float
    label: str
    marker: str = "o"


def _log_ticks(ax: Axes, which: str) -> None:
    from . import log_ticks  # the package's readable log ticks (wherever they live)

    log_ticks(ax, which)


def _cmap() -> Any:
    from matplotlib.colors import BoundaryNorm, ListedColormap

    cmap = ListedColormap([REGIME_COLOURS[r] for r in REGIMES])
    return cmap, BoundaryNorm(np.arange(len(REGIMES) + 1) - 0.5, len(REGIMES))


def regime_legend(ax: Axes, present: Sequence[Regime] | None = None,
                  marks: Sequence[Mark] = (), **kw: Any) -> None:
    """A legend of the regime colours (only ``present`` ones, when given) and of the groups
    of ``marks``."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    keep = [r for r in REGIMES if present is None or r in present]
    handles: list[Any] = [Patch(color=REGIME_COLOURS[r], label=_LABELS.get(r, r.value))
                          for r in keep]
    for label, marker in dict.fromkeys((m.label, m.marker) for m in marks):
        handles.append(Line2D([], [], ls="", marker=marker, ms=4.0, mfc="white", mec="black",
                              label=label))
    ax.legend(handles=handles, **kw)


def _panel(ax: Axes, x: npt.ArrayLike, y: npt.ArrayLike, codes: npt.ArrayLike,
           marks: Sequence[Mark], logx: bool, logy: bool) -> None:
    cmap, norm = _cmap()
    ax.pcolormesh(np.asarray(x), np.asarray(y), np.asarray(codes).T, cmap=cmap, norm=norm,
                  shading="nearest", rasterized=True)
    for m in marks:
        ax.plot(m.x, m.y, m.marker, ms=4.0, mfc="white", mec="black", mew=0.8,
                clip_on=False, zorder=5)
    if logx:
        ax.set_xscale("log")
        _log_ticks(ax, "x")
        lo, hi = (float(v) for v in np.asarray(x)[[0, -1]])
        if hi / lo > 300:  # over more than two decades label the decades only
            from matplotlib.ticker import LogLocator

            ax.xaxis.set_major_locator(LogLocator(base=10.0, numticks=8))
    if logy:
        ax.set_yscale("log")
        _log_ticks(ax, "y")


def phase_diagram(panels: Sequence[Mapping[str, Any]], *, title: str | None = None,
                  width: str | float = "two", aspect: float | None = None
                  ) -> tuple[Figure, list[Axes]]:
    """One or more regime maps side by side.  Each panel is a mapping with ``x``, ``y`` (the
    grid's axes), ``codes`` (``len(x) × len(y)`` codes of :data:`mesadyn.analysis.gd_batch.
    REGIMES`), ``xlabel``, ``ylabel``, optional ``title``, ``marks`` (:class:`Mark`),
    ``logx``/``logy`` and ``lines`` (``(xs, ys, style, label)`` curves drawn over it)."""
    n = len(panels)
    with style():
        fig = new_figure(width, aspect=aspect or (0.42 if n > 1 else 0.8))
        axes = list(np.atleast_1d(fig.subplots(1, n)))
        present: set[Regime] = set()
        for ax, p in zip(axes, panels, strict=True):
            codes = np.asarray(p["codes"])
            present |= {REGIMES[int(c)] for c in np.unique(codes)}
            _panel(ax, p["x"], p["y"], codes, p.get("marks", ()), p.get("logx", False),
                   p.get("logy", False))
            for xs, ys, ls, label in p.get("lines", ()):
                ax.plot(xs, ys, ls, color="white", lw=1.0, label=label)
                ax.plot(xs, ys, ls, color="black", lw=0.5)
            ax.set_xlabel(p["xlabel"])
            ax.set_ylabel(p["ylabel"])
            if p.get("title"):
                ax.set_title(p["title"], fontsize="small")
        marks = [m for p in panels for m in p.get("marks", ())]
        regime_legend(axes[-1], sorted(present, key=REGIMES.index), marks, fontsize=5.5,
                      loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        if title:
            fig.suptitle(title, fontsize="small")
        return finish(fig), axes


def stability_figure(limits: StabilityLimits, *, eta: float | None = None,
                     title: str | None = None, width: str | float = "one"
                     ) -> tuple[Figure, Axes]:
    """The critical step ``2/λ_max`` along the scaling orbit of a minimiser (full space,
    solid, coloured by the deciding mode) against the reduced model's ``2/(c1(a²+b²))``
    (dashed), with the balanced and the flattest point marked and, for ``eta``, the stable
    part of the orbit shaded."""
    pts = limits.points
    al = np.array([p.alpha for p in pts])
    full = np.array([p.critical_step for p in pts])
    red = np.array([np.nan if p.reduced_critical_step is None else p.reduced_critical_step
                    for p in pts])
    off = np.array([p.top_mode == "off_diagonal" for p in pts])
    with style():
        fig = new_figure(width, aspect=0.8)
        ax = fig.subplots()
        ax.plot(al, full, "-", color="0.6", lw=0.8)
        ax.plot(al[off], full[off], "o", ms=2.5, color=OKABE_ITO["vermillion"],
                label="full space (off-diagonal mode)")
        ax.plot(al[~off], full[~off], "o", ms=2.5, color=OKABE_ITO["blue"],
                label="full space (diagonal mode)")
        if np.isfinite(red).any():
            ax.plot(al, red, "--", color=OKABE_ITO["blue"], lw=1.0,
                    label=r"reduced $2/(c_1(a^2+b^2))$")
        fl = limits.flattest
        ax.plot(fl.alpha, fl.eta_max, "*", ms=8, mfc="white", mec="black",
                label=rf"flattest: $\eta_{{\max}}={fl.eta_max:.4g}$")
        ax.plot(limits.base.alpha, limits.base.critical_step, "s", ms=4, mfc="white",
                mec="black", label="start point")
        e = eta if eta is not None else limits.eta
        if e is not None:
            ax.axhline(e, color="black", lw=0.6, ls=":")
            if limits.stable_alpha is not None:
                ax.axvspan(*limits.stable_alpha, color=OKABE_ITO["green"], alpha=0.15, lw=0,
                           label=rf"stable at $\eta={e:g}$")
        ax.set_xscale("log")
        _log_ticks(ax, "x")
        ax.set_xlabel(r"position on the orbit $\alpha$  ($P\mapsto\alpha P$, $A\mapsto A/\alpha$)")
        ax.set_ylabel(r"critical step $2/\lambda_{\max}$")
        ax.legend(fontsize=5.5, loc="upper right")
        if title:
            ax.set_title(title, fontsize="small")
        return finish(fig), ax


def period2_figure(branches: Mapping[str, Period2Branch], *, title: str | None = None,
                   width: str | float = "one") -> tuple[Figure, Axes]:
    """The amplitude ``max|θ_1 − θ_0|`` of each period-2 branch against ``η/η_flip``; solid
    where the cycle is stable, dotted where not."""
    colours = [OKABE_ITO["purple"], OKABE_ITO["blue"], OKABE_ITO["green"]]
    with style():
        fig = new_figure(width, aspect=0.75)
        ax = fig.subplots()
        for i, (name, br) in enumerate(branches.items()):
            x = br.eta / br.flip_eta
            c = colours[i % len(colours)]
            amp = np.where(br.stable, br.amplitude, np.nan)
            ax.plot(x, amp, "-", color=c, lw=1.2, label=f"{name} (stable)")
            ax.plot(x, br.amplitude, ":", color=c, lw=1.0)
        ax.axvline(1.0, color="black", lw=0.5)
        ax.set_xlabel(r"$\eta/\eta_{\rm flip}$")
        ax.set_ylabel(r"2-cycle amplitude $\max|\theta_1-\theta_0|$")
        ax.legend(fontsize=6, loc="upper left")
        if title:
            ax.set_title(title, fontsize="small")
        return finish(fig), ax


def landing_figure(landings: Mapping[str, ReducedLanding], *, title: str | None = None,
                   width: str | float = "one") -> tuple[Figure, Axes]:
    """``|Δ∞| = |a∞² − b∞²|`` at GD's limit against η for each start (dots), beside the
    modified flow's (dashed), the flow's ``|Δ0|`` (dotted) and the stability bound (black)."""
    from ._style import INIT_COLOURS, DiagonalInit

    with style():
        fig = new_figure(width, aspect=0.8)
        ax = fig.subplots()
        spare = iter([OKABE_ITO["green"], OKABE_ITO["purple"], OKABE_ITO["vermillion"],
                      OKABE_ITO["skyblue"]])
        eta = np.array(next(iter(landings.values())).eta)
        for name, land in landings.items():
            if land.delta0 == 0:
                continue  # a balanced start stays balanced: Δ_k = 0 for every η
            c = INIT_COLOURS.get(DiagonalInit(land.a0, land.b0)) or next(spare)
            e = np.array(land.eta)
            ax.plot(e, np.abs(np.array(land.delta, dtype=np.float64)), "o", ms=3, color=c,
                    label=f"GD from {name}")
            ax.plot(e, np.abs(np.array(land.modified_delta, dtype=np.float64)), "--",
                    color=c, lw=0.9)
            ax.axhline(abs(land.delta0), color=c, ls=":", lw=0.8)
        first = next(iter(landings.values()))
        ax.plot(eta, np.array(first.bound, dtype=np.float64), "-", color="black", lw=0.9,
                label="stability bound")
        ax.plot([], [], "--", color="0.4", lw=0.9, label="modified flow")
        ax.plot([], [], ":", color="0.4", lw=0.8, label=r"flow ($|\Delta_0|$)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_ticks(ax, "both")
        ax.set_xlabel(r"step size $\eta$")
        ax.set_ylabel(r"$|a_\infty^2-b_\infty^2|$")
        ax.legend(fontsize=5.5, loc="lower left")
        if title:
            ax.set_title(title, fontsize="small")
        return finish(fig), ax


def central_flow_figure(cmp: CentralComparison, *, title: str | None = None,
                        width: str | float = "two") -> tuple[Figure, list[Axes]]:
    """(a) GD's loss (thin), its time-average, the central flow's predicted loss and the
    modified flow's loss against the step; (b) ``η·λ_max`` of GD and of the central flow
    with the stability limit 2."""
    t = np.arange(cmp.gd_loss.size)
    with style():
        fig = new_figure(width, aspect=0.34)
        axes = list(fig.subplots(1, 2))
        ax = axes[0]
        ax.plot(t, cmp.gd_loss, "-", color="0.7", lw=0.5, label="GD")
        ax.plot(t, cmp.gd_loss_avg, "-", color="black", lw=1.2, label="GD, time-averaged")
        ax.plot(t, cmp.central.predicted_loss, "--", color=OKABE_ITO["orange"], lw=1.2,
                label=r"central flow $L+\mathrm{tr}\,X/\eta$")
        ax.plot(t, cmp.modified_loss, ":", color=OKABE_ITO["blue"], lw=1.2,
                label="modified flow")
        lo = float(np.nanmin(cmp.gd_loss_avg))
        hi = float(np.nanmax(cmp.gd_loss_avg))
        ax.set_ylim(lo - 0.02 * (hi - lo), hi + 0.05 * (hi - lo))
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend(fontsize=5.5, loc="upper right")
        ax.set_title("(a) loss", fontsize="small")
        ax = axes[1]
        ax.plot(t, cmp.eta * cmp.gd_sharpness, "-", color="0.6", lw=0.6, label="GD")
        ax.plot(t, cmp.eta * cmp.central.sharpness, "--", color=OKABE_ITO["orange"], lw=1.2,
                label="central flow")
        ax.axhline(2.0, color="black", lw=0.6, ls=":")
        ax.set_xlabel("step")
        ax.set_ylabel(r"$\eta\,\lambda_{\max}$")
        ax.legend(fontsize=5.5, loc="lower right")
        ax.set_title("(b) sharpness", fontsize="small")
        if title:
            fig.suptitle(title, fontsize="small")
        return finish(fig), axes

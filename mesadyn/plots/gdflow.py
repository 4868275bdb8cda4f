"""Figures of GD against the gradient flow (:mod:`mesadyn.workflows.gdflow`): the gap per step
to the flow and to the modified flow, the gap ratio per Table 1 step size, and the spread of GD
end points against the training-set size.  Returns ``(Figure, Axes)``; save with
:func:`mesadyn.plots.save`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._style import CYCLE, finish, new_figure, style

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..analysis.gd_flow import GDFlowComparison

#: Line styles: solid for the flow, dashed for the modified flow.
_STYLES = {"flow": "-", "modified": "--"}


def gd_vs_flow(comparisons: Mapping[str, GDFlowComparison],
               ratios: Sequence[tuple[str, float]] = (),
               spreads: Mapping[str, Mapping[str, Any]] | None = None,
               width: str | float = "two") -> tuple[Figure, list[Axes]]:
    """Up to three panels: (a) ``‖θ_k − θ(kη)‖`` (solid) and ``‖θ_k − θ̃(kη)‖`` (dashed)
    against τ = kη for each comparison; (b) the ratio ``max gap(flow) / max gap(modified)``
    per labelled case, with the issue's 5× line; (c) for each labelled spread study (the
    workflow's ``spread`` dict), the spread of GD end points against m (log-log) with its
    fitted power law and an ``m^{−1/2}`` guide."""
    panels = 1 + bool(ratios) + bool(spreads)
    with style():
        fig = new_figure(width, aspect=0.34 if panels > 1 else 0.75)
        axes = list(np.atleast_1d(fig.subplots(1, panels)))
        ax = axes[0]
        for i, (name, comp) in enumerate(comparisons.items()):
            g_flow, g_mod = comp.gap_curves()
            colour = CYCLE[i % len(CYCLE)]
            t = comp.t[1:]
            ax.plot(t, g_flow[1:], _STYLES["flow"], color=colour, lw=1.0,
                    label=f"{name}: GD − flow")
            ax.plot(t, g_mod[1:], _STYLES["modified"], color=colour, lw=1.0,
                    label=f"{name}: GD − modified")
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo / 1e3, hi)  # room below the curves for the legend
        ax.set_xlabel(r"$\tau = k\eta$")
        ax.set_ylabel(r"$\|\theta_k - \theta(k\eta)\|$")
        ax.legend(fontsize="xx-small", loc="lower right")
        ax.set_title("(a) gap per step", fontsize="small")
        k = 1
        if ratios:
            ax = axes[k]
            k += 1
            labels = [name for name, _ in ratios]
            values = [v for _, v in ratios]
            y = np.arange(len(values))
            ax.barh(y, values, color=CYCLE[0], height=0.6)
            ax.axvline(5.0, color="k", ls=":", lw=0.8)
            ax.set_yticks(y, labels, fontsize="x-small")
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.annotate("5×", (5.0, 0.0), xycoords=("data", "axes fraction"),
                        xytext=(2, 2), textcoords="offset points", fontsize="x-small")
            ax.set_xlabel("max gap(flow) / max gap(modified)")
            ax.set_title("(b) gap closed by the modified flow", fontsize="small")
        if spreads:
            ax = axes[k]
            for i, (name, spread) in enumerate(spreads.items()):
                colour = CYCLE[(i + 1) % len(CYCLE)]
                m = np.asarray(spread["m"], dtype=np.float64)
                s = np.asarray(spread["spread"], dtype=np.float64)
                se = np.asarray(spread["spread_se"], dtype=np.float64)
                fit = spread["fit"]
                ax.errorbar(m, s, yerr=se, fmt="o", color=colour, ms=3, lw=0.8, capsize=2)
                grid = np.geomspace(m.min(), m.max(), 50)
                ax.plot(grid, np.exp(fit["log_amplitude"]) * grid ** fit["slope"], "-",
                        color=colour, lw=0.8,
                        label=f"{name}: slope {fit['slope']:.2f} ± {fit['slope_se_scaled']:.2f}")
                ax.plot(grid, s[0] * (grid / m[0]) ** -0.5, ":", color="k", lw=0.7,
                        label=r"$\propto m^{-1/2}$" if i == 0 else None)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(r"training sequences $m$")
            ax.set_ylabel("spread of GD end points")
            ax.legend(fontsize="xx-small", loc="lower left")
            ax.set_title("(c) end-point spread (±1 SE)", fontsize="small")
        return finish(fig), axes

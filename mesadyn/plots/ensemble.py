"""Figures of an ensemble run (:mod:`mesadyn.workflows.ensemble`): basins projected onto
``(a, b)`` coloured by outcome, histograms of escape times and of the end point's
off-diagonal mass, and the outcome fractions against σ_w (95% Wilson intervals).  Each returns
``(Figure, Axes)``; draw inside nothing, save with :func:`mesadyn.plots.save`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ._style import CYCLE, finish, new_figure, style

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: One colour per outcome (Okabe–Ito, colour-blind safe).
OUTCOME_COLOURS = {
    "branch_plus": CYCLE[0], "branch_minus": CYCLE[1], "branch_mixed": CYCLE[2],
    "dense": CYCLE[3], "other": CYCLE[4], "not_converged": "0.5",
}
#: One marker per outcome (the colours are not the only cue).
OUTCOME_MARKERS = {
    "branch_plus": "o", "branch_minus": "s", "branch_mixed": "D", "dense": "^", "other": "v",
    "not_converged": "x",
}
#: Legend labels (mathtext).
OUTCOME_LABELS = {
    "branch_plus": r"branch, all $a_k > 0$", "branch_minus": r"branch, all $a_k < 0$",
    "branch_mixed": "branch, mixed signs", "dense": "dense (off-diagonal)",
    "other": r"other critical point", "not_converged": "not converged",
}


def basins(rows: xr.Dataset, ab_star: float | None = None,
           width: str | float = "one") -> tuple[Figure, Axes]:
    """Starts projected onto ``(mean diag W^KQ_32, mean diag W^PV_12)``, coloured by where
    they ended; the hyperbola ``ab = ab*`` (Theorem 4.1) dashed."""
    from ..model import diagonal_entries

    a0, b0 = diagonal_entries(rows["theta0"].values)
    a0, b0 = a0.mean(1), b0.mean(1)
    outcome = rows["outcome"].values.astype(str)
    with style():
        fig = new_figure(width, aspect=0.9)
        ax = fig.add_subplot()
        for name, colour in OUTCOME_COLOURS.items():
            sel = outcome == name
            if sel.any():
                ax.scatter(a0[sel], b0[sel], s=6, color=colour, label=f"{name} ({sel.sum()})",
                           linewidths=0)
        if ab_star is not None:
            lim = max(float(np.abs(np.concatenate([a0, b0])).max()) * 1.05, 1e-12)
            x = np.linspace(-lim, lim, 801)
            x = x[np.abs(x) > 1e-12]
            y = ab_star / x
            keep = np.abs(y) <= lim
            if keep.any():  # from small starts the hyperbola lies far outside the view
                ax.plot(np.where(keep, x, np.nan), np.where(keep, y, np.nan), "k--", lw=0.6,
                        label="ab = ab*")
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.ticklabel_format(style="sci", axis="both", scilimits=(-2, 3))
        ax.set_xlabel("start: mean diag $W^{KQ}_{32}$")
        ax.set_ylabel("start: mean diag $W^{PV}_{12}$")
        ax.legend(fontsize="x-small", loc="best")
        return finish(fig), ax


def escape_histogram(rows: xr.Dataset, width: str | float = "two") -> tuple[Figure, Axes]:
    """Histograms of the measured escape times (with the predictions) and of the end point's
    reachable off-structure mass (log scale; the inert entries, which the flow never moves, are
    not in it)."""
    esc = rows["escape_time"].values
    pred = rows["escape_predicted"].values
    off = rows["off_structure"].values
    with style():
        fig = new_figure(width, aspect=0.35)
        ax = fig.subplots(1, 2)
        ok = np.isfinite(esc)
        if ok.any():
            ax[0].hist(esc[ok], bins=30, color=CYCLE[0], alpha=0.8, label="measured")
        if np.isfinite(pred).any():
            ax[0].hist(pred[np.isfinite(pred)], bins=30, histtype="step", color="k",
                       label="predicted")
        ax[0].set_xlabel("escape time τ (mean ab = ab*/2)")
        ax[0].set_ylabel("trajectories")
        ax[0].legend(fontsize="x-small")
        pos = off[off > 0]
        if pos.size:
            ax[1].hist(np.log10(pos), bins=30, color=CYCLE[1])
        ax[1].set_xlabel(r"$\log_{10}$ max reachable off-structure $|\theta_i|$ at the end")
        from matplotlib.ticker import MaxNLocator

        ax[1].xaxis.set_major_locator(MaxNLocator(5))
        for a in ax:
            a.yaxis.set_major_locator(MaxNLocator(integer=True))
        return finish(fig), ax[0]


def fractions_vs_sigma(sigma_w: Sequence[float],
                       fractions: Mapping[str, Sequence[Mapping[str, float | int]]],
                       title: str | None = None,
                       width: str | float = "one") -> tuple[Figure, Axes]:
    """Outcome fractions against σ_w (log axis) with 95% Wilson intervals as error bars.

    # Arguments
    - `sigma_w`: the σ_w of each ensemble.
    - `fractions`: outcome → one ``{"fraction", "low", "high", ...}`` per σ_w (what
      :meth:`mesadyn.sweep.SigmaSweep.fractions` returns, or each run's
      ``Result.fractions[outcome]``).  Outcomes that never occur are left out.
    - `title`: e.g. the family.

    Series are shifted sideways by a few hundredths of a decade so that their bars do not hide
    each other; the tick labels stay at the σ_w values.
    """
    from ..errors import MesadynError

    sw = np.asarray(sigma_w, dtype=np.float64)
    if sw.ndim != 1 or sw.size == 0 or not np.all(sw > 0):
        raise MesadynError(f"sigma_w must be positive values, got {list(sigma_w)!r}")
    for name, rows in fractions.items():
        if len(rows) != sw.size:
            raise MesadynError(f"fractions[{name!r}] has {len(rows)} values for "
                               f"{sw.size} sigma_w")
    shown = [k for k in OUTCOME_COLOURS if k in fractions
             and any(float(r["fraction"]) > 0 for r in fractions[k])]
    shown += [k for k in fractions if k not in OUTCOME_COLOURS
              and any(float(r["fraction"]) > 0 for r in fractions[k])]
    order = np.argsort(sw)
    with style():
        fig = new_figure(width, aspect=0.75)
        ax = fig.add_subplot()
        for i, name in enumerate(shown):
            f = np.array([float(fractions[name][j]["fraction"]) for j in order])
            lo = np.array([float(fractions[name][j]["low"]) for j in order])
            hi = np.array([float(fractions[name][j]["high"]) for j in order])
            shift = 10 ** (0.04 * (i - (len(shown) - 1) / 2))
            ax.errorbar(sw[order] * shift, f, yerr=np.vstack([f - lo, hi - f]),
                        fmt=OUTCOME_MARKERS.get(name, "o") + "-",
                        color=OUTCOME_COLOURS.get(name, CYCLE[i % len(CYCLE)]), ms=3.5,
                        lw=0.9, capsize=2, label=OUTCOME_LABELS.get(name, name))
        ax.set_xscale("log")
        ax.set_xlim(sw.min() / 10**0.4, sw.max() * 10**0.4)  # the shifts stay small
        ax.set_xticks(sw[order])
        ax.minorticks_off()
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel(r"initial scale $\sigma_w$ (Gaussian init)")
        ax.set_ylabel("fraction of runs (95% Wilson)")
        if title:
            ax.set_title(title)
        ax.legend(fontsize="x-small", loc="best")
        return finish(fig), ax

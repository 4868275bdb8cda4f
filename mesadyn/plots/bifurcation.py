"""Bifurcation diagrams of a continuation run (``mesadyn continue``); each returns
``(Figure, Axes)``.

The source is a continuation run: its file (``.nc``), the ``xarray.Dataset`` loaded from it,
or :meth:`mesadyn.workflows.continuation.Result.to_dataset` of a live result.

* :func:`bifurcation_diagram` — the parameter against ab, the off-diagonal mass or the loss;
  stable parts solid, unstable parts dashed, one colour per branch, located folds and branch
  points marked.
* :func:`eigenvalue_diagram` — the non-symmetry eigenvalues of ``−∇²L`` against the parameter
  (symmetric-log scale), zero crossings marked.  The run stores each point's eigenvalues sorted;
  :func:`track_eigenvalues` follows each one along the continuation by continuity (so two
  crossing eigenvalues are drawn as two crossing curves, not as two kinks), and where the
  matching is ambiguous the points are drawn without a joining line.
* :func:`bifurcation_panels` — both side by side (two-column width).
"""

from __future__ import annotations

import enum
import os
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..errors import MesadynError
from ._style import CYCLE, OKABE_ITO, finish, new_figure, style

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["Quantity", "bifurcation_diagram", "bifurcation_panels", "eigenvalue_diagram",
           "track_eigenvalues"]


class Quantity(enum.StrEnum):
    """What the bifurcation diagram draws against the parameter."""

    AB = "ab"
    OFFDIAG = "offdiag"
    LOSS = "loss"


_YLABEL = {Quantity.AB: r"$ab$ (mean over coordinates)",
           Quantity.OFFDIAG: "off-diagonal mass",
           Quantity.LOSS: r"loss $L$"}
_MARKER = {"fold": ("o", OKABE_ITO["black"]), "pitchfork": ("s", OKABE_ITO["vermillion"]),
           "transcritical": ("^", OKABE_ITO["purple"]), "unlocated": ("x", OKABE_ITO["orange"])}


def _load(source: xr.Dataset | str | os.PathLike[str]) -> xr.Dataset:
    if isinstance(source, (str, os.PathLike)):
        from ..io import load_run

        return load_run(source, "continuation")
    import xarray as xr

    if not isinstance(source, xr.Dataset) or "point_branch" not in source:
        raise MesadynError("give a continuation run: its .nc file or its Dataset")
    return source


def _y(ds: xr.Dataset, what: Quantity) -> np.ndarray:
    if what is Quantity.AB:
        return np.asarray(ds["ab_mean"].values, float)
    if what is Quantity.OFFDIAG:
        return np.asarray(ds["offdiag_mass"].values, float)
    return np.asarray(ds["loss"].values, float)


def _segments(stable: np.ndarray) -> list[tuple[int, int, bool]]:
    """Runs ``[i, j)`` of equal stability; consecutive runs share their boundary point."""
    out = []
    i = 0
    n = stable.size
    while i < n:
        j = i + 1
        while j < n and stable[j] == stable[i]:
            j += 1
        out.append((i, min(j + 1, n), bool(stable[i])))
        i = j
    return out


def _symbol(ds: xr.Dataset) -> str:
    return str(ds.attrs.get("symbol", ds.attrs.get("parameter", "p")))


def _draw_branches(ax: Axes, ds: xr.Dataset, what: Quantity) -> None:
    p = np.asarray(ds["p"].values, float)
    y = _y(ds, what)
    stable = np.asarray(ds["stable"].values, bool)
    which = np.asarray(ds["point_branch"].values, int)
    nb = int(ds.sizes.get("branch", 0)) or (int(which.max()) + 1 if which.size else 0)
    for b in range(nb):
        idx = np.flatnonzero(which == b)
        if idx.size == 0:
            continue
        colour = CYCLE[b % len(CYCLE)]
        for i, j, st in _segments(stable[idx]):
            sel = idx[i:j]
            ax.plot(p[sel], y[sel], color=colour, linestyle="-" if st else "--",
                    linewidth=1.3 if st else 1.0)
    # legend entries for line styles and branches
    ax.plot([], [], color="0.3", linestyle="-", label="stable")
    ax.plot([], [], color="0.3", linestyle="--", label="unstable")


def _draw_specials(ax: Axes, ds: xr.Dataset, what: Quantity | None) -> None:
    if int(ds.sizes.get("special", 0)) == 0:
        return
    kinds = [str(k) for k in ds["special_kind"].values]
    ps = np.asarray(ds["special_p"].values, float)
    seen: set[str] = set()
    if what is None:
        for k, p in zip(kinds, ps, strict=True):
            ax.axvline(p, color=_MARKER.get(k, ("o", "0.5"))[1], linewidth=0.6, linestyle=":")
        return
    thetas = np.asarray(ds["special_theta"].values, float)
    from ..models import model_from

    model = model_from(ds.attrs)  # the paper's unless the run names another
    d = model.dim_of(thetas[0]) if len(thetas) else 1
    for k, p, th in zip(kinds, ps, thetas, strict=True):
        if what is Quantity.AB:
            y = float(np.mean(model.ab(th)))
        elif what is Quantity.OFFDIAG:
            act = model.active_mask(d)
            off = act & ~model.diagonal_mask(d)
            y = float(th[off] @ th[off]) / max(float(th[act] @ th[act]), 1e-300)
        else:
            y = float("nan")
            near = np.argmin(np.abs(np.asarray(ds["p"].values) - p))
            y = float(ds["loss"].values[near])
        marker, colour = _MARKER.get(k, ("o", "0.5"))
        ax.plot([p], [y], marker=marker, color=colour, markersize=5, linestyle="none",
                label=k if k not in seen else None, zorder=5)
        seen.add(k)


def bifurcation_diagram(source: xr.Dataset | str | os.PathLike[str], what: str = "ab", *,
                        ax: Axes | None = None, width: str | float = "one"
                        ) -> tuple[Figure, Axes]:
    """The parameter against ``what`` (``ab``, ``offdiag`` or ``loss``) along every branch.

    Stable parts (no positive eigenvalue of ``−∇²L`` beyond the zero-mode threshold) are
    solid, unstable parts dashed; located folds (circles), pitchforks (squares) and
    transcritical points (triangles) are marked.  For ``ab`` on a gaussian σ-branch this is
    Theorem 4.1's ``ab*(σ)``.
    """
    try:
        q = Quantity(what)
    except ValueError:
        raise MesadynError(f"unknown quantity {what!r}; choose ab, offdiag, loss") from None
    ds = _load(source)
    with style():
        fig = new_figure(width) if ax is None else ax.figure
        assert isinstance(fig, Figure)
        ax = fig.add_subplot() if ax is None else ax
        _draw_branches(ax, ds, q)
        _draw_specials(ax, ds, q)
        ax.set_xlabel(_symbol(ds))
        ax.set_ylabel(_YLABEL[q])
        if q is Quantity.LOSS or (q is Quantity.AB and np.all(_y(ds, q) > 0)):
            ratio = np.nanmax(_y(ds, q)) / max(np.nanmin(_y(ds, q)), 1e-300)
            if ratio > 30:
                ax.set_yscale("log")
        ax.legend(loc="best")
        finish(fig)
    return fig, ax


def _symlog(x: np.ndarray, linthresh: float) -> np.ndarray:
    """The symmetric-log coordinate the diagram draws ``x`` at (up to scale)."""
    return np.sign(x) * np.log10(1.0 + np.abs(x) / linthresh)


#: A match is ambiguous when another eigenvalue lies within this factor of the matched one's
#: distance to the prediction (and they would be drawn visibly apart).
AMBIGUITY = 2.0


def _coordinate(x: np.ndarray | None, idx: list[int]) -> np.ndarray:
    """The coordinate to extrapolate along over the points ``idx``: the parameter where it is
    strictly monotone there (steps of a continuation vary in size), else the point index
    (at a fold the parameter turns back)."""
    steps = np.asarray(idx, dtype=np.float64)
    if x is None:
        return steps
    px = np.asarray(x, dtype=np.float64)[idx]
    d = np.diff(px)
    if np.all(np.isfinite(px)) and (np.all(d > 0) or np.all(d < 0)):
        return px
    return steps


def _extrapolate(s: np.ndarray, values: np.ndarray, target: float) -> np.ndarray:
    """The polynomial through the points ``(s_j, values_j)`` evaluated at ``target``."""
    out = np.zeros(values.shape[1])
    for j in range(len(s)):
        w = np.prod([(target - s[m]) / (s[j] - s[m]) for m in range(len(s)) if m != j])
        out = out + w * values[j]
    return out


def track_eigenvalues(mu: np.ndarray, linthresh: float, x: np.ndarray | None = None,
                      ambiguity: float = AMBIGUITY) -> tuple[np.ndarray, np.ndarray]:
    """Follow each eigenvalue along the points of a continuation (rows of ``mu``, each sorted).

    The eigenvalues of the next point are matched to the linear extrapolation of the tracked
    ones through the last two points (along the parameter ``x`` where it is monotone, else
    along the point index) by a minimum-cost assignment in the diagram's symlog coordinate
    (``linthresh`` as there), so a curve keeps its course through a crossing; a tie (a
    degenerate group) keeps the order of the last point.  Far from zero the extrapolation is
    in the symlog coordinate (about ``log|μ|``, where a power of the parameter is nearly
    straight), near zero in the value itself (where it may cross zero).  The first point is
    matched backwards from the next two.  A match is *ambiguous* when another eigenvalue
    lies within ``ambiguity`` times the matched distance from the prediction and the two would
    be drawn visibly apart (more than 1/1000 of the y-span).

    ## Returns
    ``(tracked, joined)``: ``tracked[:, j]`` is the j-th eigenvalue followed along the points,
    ``joined[i, j]`` whether the step from point i to i+1 of it is unambiguous (shape
    ``(n − 1, k)``; a NaN value is never joined).
    """
    from scipy.optimize import linear_sum_assignment

    mu = np.asarray(mu, dtype=np.float64)
    n, k = mu.shape
    y = _symlog(mu, linthresh)
    finite = y[np.isfinite(y)]
    eps = 1e-3 * max(float(np.ptp(finite)) if finite.size else 1.0, 1e-300)
    big = 1e6 * (float(np.abs(finite).max()) if finite.size else 1.0) + 1.0

    def match(known: list[int], new: int, values: np.ndarray,
              rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Columns of ``mu[new]`` for the tracked columns (``values`` and their symlog
        ``rows`` at the ``known`` points), and which matches are ambiguous."""
        s = _coordinate(x, [*known, new])
        pred = rows[-1]
        if len(known) > 1:
            # far from zero (in units of its own step) an eigenvalue is extrapolated in the
            # symlog coordinate (a power of the parameter is nearly straight there); near
            # zero, where it may cross, linearly in its value
            step = values[-1] - values[-2]
            near = (np.abs(values[-1]) < 3.0 * np.abs(step)) | (np.abs(values[-1]) < linthresh)
            linear = _symlog(_extrapolate(s[:-1], values, float(s[-1])), linthresh)
            pred = np.where(near, linear, _extrapolate(s[:-1], rows, float(s[-1])))
        pred = np.where(np.isfinite(pred), pred, rows[-1])
        cost = np.abs(pred[:, None] - y[new][None, :])
        cost = np.where(np.isfinite(cost), cost, big)
        # ties (a degenerate group) keep the order of the last point: no zig-zag within it
        rank = np.argsort(np.argsort(np.where(np.isfinite(rows[-1]), rows[-1], np.inf)))
        tie = 1e-6 * eps * np.abs(rank[:, None] - np.arange(k)[None, :])
        cols = linear_sum_assignment(cost + tie)[1]
        unsure = np.zeros(k, dtype=bool)
        for j in range(k):
            alt = np.delete(np.arange(k), cols[j])
            unsure[j] = bool(np.any((cost[j, alt] < ambiguity * cost[j, cols[j]])
                                    & (np.abs(y[new][alt] - y[new][cols[j]]) > eps)))
        return cols, unsure

    tracked, ty = mu.copy(), y.copy()
    joined = np.ones((max(n - 1, 0), k), dtype=bool)
    for i in range(n - 1):
        known = list(range(max(0, i - 1), i + 1))
        cols, unsure = match(known, i + 1, tracked[known], ty[known])
        tracked[i + 1], ty[i + 1] = mu[i + 1][cols], y[i + 1][cols]
        joined[i] = ~unsure
    if n >= 3:  # the first point again, from the tracked curves after it
        known = [2, 1]
        cols, unsure = match(known, 0, tracked[known], ty[known])
        tracked[0], ty[0] = mu[0][cols], y[0][cols]
        joined[0] = ~unsure
    joined &= np.isfinite(tracked[:-1] + tracked[1:])
    return tracked, joined


def _linthresh(mu: np.ndarray) -> float:
    """The symlog axis' linear range: below every eigenvalue when none changes sign along the
    branch (so no curve bends where the scale turns from linear to logarithmic), else the 5%
    quantile of the magnitudes (the curves that cross zero need a linear part)."""
    ok = np.isfinite(mu)
    nz = np.abs(mu[ok & (mu != 0)])
    if not nz.size:
        return 1.0
    positive = np.sum(np.where(ok, mu > 0, False), axis=1)
    if np.all(positive == positive[0]) and not np.any(mu[ok] == 0):
        return 0.5 * float(nz.min())
    return float(np.quantile(nz, 0.05))


def _broken(x: np.ndarray, y: np.ndarray, joined: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` with a NaN between points i and i+1 wherever ``joined[i]`` is False."""
    xs, ys = [x[:1]], [y[:1]]
    for i in range(1, x.size):
        if not joined[i - 1]:
            xs.append(np.array([np.nan]))
            ys.append(np.array([np.nan]))
        xs.append(x[i:i + 1])
        ys.append(y[i:i + 1])
    return np.concatenate(xs), np.concatenate(ys)


def eigenvalue_diagram(source: xr.Dataset | str | os.PathLike[str], *, branch: int = 0,
                       ax: Axes | None = None, width: str | float = "one",
                       linthresh: float | None = None) -> tuple[Figure, Axes]:
    """The non-symmetry eigenvalues of ``−∇²L`` (the Jacobian of the flow, restricted
    transverse to the symmetry orbits) against the parameter on one branch, symmetric-log y.

    Each eigenvalue is followed along the continuation (:func:`track_eigenvalues`) and drawn
    as one curve (``gid`` ``eigenvalue-j``), red where it is positive somewhere; where its
    matching is ambiguous its points are drawn without a joining line (``eigenvalue-points-j``).
    Positive values are unstable directions; a curve crossing zero is a fold or branch point
    (dotted vertical lines at the located ones).
    """
    ds = _load(source)
    which = np.asarray(ds["point_branch"].values, int)
    idx = np.flatnonzero(which == branch)
    if idx.size == 0:
        raise MesadynError(f"the run has no branch {branch}")
    x = np.asarray(ds["p"].values, float)[idx]
    mu = np.asarray(ds["reduced_eigenvalues"].values, float)[idx]
    thr = linthresh if linthresh is not None else _linthresh(mu)
    m, joined = track_eigenvalues(mu, thr, x)
    with style():
        fig = new_figure(width) if ax is None else ax.figure
        assert isinstance(fig, Figure)
        ax = fig.add_subplot() if ax is None else ax
        any_points = False
        for k in range(m.shape[1]):
            colour = OKABE_ITO["vermillion"] if np.any(m[:, k] > 0) else OKABE_ITO["blue"]
            xs, ys = _broken(x, m[:, k], joined[:, k])
            ax.plot(xs, ys, color=colour, linewidth=0.7, alpha=0.8, gid=f"eigenvalue-{k}")
            alone = np.zeros(x.size, dtype=bool)
            alone[:-1] |= ~joined[:, k]
            alone[1:] |= ~joined[:, k]
            if alone.any():
                any_points = True
                ax.plot(x[alone], m[alone, k], ls="none", marker="o", ms=1.6, color=colour,
                        gid=f"eigenvalue-points-{k}")
        ax.axhline(0.0, color="0.2", linewidth=0.6)
        _draw_specials(ax, ds, None)
        ax.set_yscale("symlog", linthresh=thr)
        ax.set_xlabel(_symbol(ds))
        ax.set_ylabel("eigenvalues of $-\\nabla^2 L$\n(transverse to the symmetries)")
        ax.plot([], [], color=OKABE_ITO["blue"], label="stable direction")
        ax.plot([], [], color=OKABE_ITO["vermillion"], label="unstable somewhere")
        if any_points:
            ax.plot([], [], ls="none", marker="o", ms=2.5, color="0.4",
                    label="ambiguous match: points only")
        ax.legend(loc="best")
        finish(fig)
    return fig, ax


def bifurcation_panels(source: xr.Dataset | str | os.PathLike[str], what: str = "ab"
                       ) -> tuple[Figure, np.ndarray]:
    """:func:`bifurcation_diagram` and :func:`eigenvalue_diagram` side by side (two columns)."""
    ds = _load(source)
    with style():
        fig = new_figure("two", aspect=0.38)
        axes = np.array(fig.subplots(1, 2))
        bifurcation_diagram(ds, what, ax=axes[0])
        fig.set_layout_engine("constrained")
        eigenvalue_diagram(ds, ax=axes[1])
        fig.set_layout_engine("constrained")
        finish(fig)
    return fig, axes

"""Phase portrait of the reduced gradient flow (Lemma 5.2; Lemma A.5 for ``x_1 = 1_d``).

    ȧ = b (c2 − c1 ab),   ḃ = a (c2 − c1 ab).

Drawn layers (each artist carries a ``gid`` so tests and users can find it):

* ``basin+`` / ``basin-``: the half-planes ``a + b > 0`` / ``< 0``.  Since ``a² − b² =
  (a − b)(a + b)`` is conserved and ``ab`` → ``c2/c1``, the sign of ``a + b`` picks the branch
  of the hyperbola a trajectory reaches (the line ``a = −b`` is the saddle's stable manifold);
* ``levels``: level sets of the conserved ``a² − b²``;
* ``streamlines``: the field, coloured by ``log10 ‖(ȧ, ḃ)‖``;
* ``nullcline-adot`` (``b = 0``) and ``nullcline-bdot`` (``a = 0``); the hyperbola is the
  other branch of both nullclines;
* ``hyperbola+`` / ``hyperbola-``: the fixed set ``ab = c2/c1`` (Theorems 4.1, 4.3);
* ``saddle`` at the origin (eigenvalues ±c2), ``stable-manifold`` ``a = −b``,
  ``unstable-manifold`` ``a = b``;
* ``trajectory-k``: the closed-form solution from the k-th init, with direction arrows.

Optional: ``fullflow-k`` (full flow projected on (mean diag W^KQ_32, mean diag W^PV_12)) with a
``zoom`` on the first one's end point, whose ``zoom-claim`` text says whether it ends on the fixed
set (within :data:`ON_FIXED_SET_RTOL`) or how far off; ``gd-k`` (finite-sample GD iterates), an
ab(τ) panel and a PL-ratio panel (Lemma 5.4).

Each init has one colour, the same in every figure (:func:`mesadyn.plots.init_colours`), and one
legend entry; the overlays are keyed by style (full flow dashed yellow, GD iterates ×).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from matplotlib import patheffects
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..errors import MesadynError, check_finite, check_int, check_positive
from ..reduced import ReducedSystem
from ._axes import fit_inside
from ._data import ab_path
from ._portrait_parts import (
    ON_FIXED_SET_RTOL,
    Trajectory,
    add_arrows,
    clip_halfplane,
    draw_overlays,
    fixed_set_claim,
    hyperbola_branch,
    panel_ab,
    panel_pl,
    zoom_fullflow,
)
from ._style import (
    OKABE_ITO,
    DiagonalInit,
    family_title,
    finish,
    init_colours,
    new_figure,
    style,
)

__all__ = ["DEFAULT_INITS", "ON_FIXED_SET_RTOL", "PortraitWarning", "Trajectory",
           "clip_halfplane", "drawn_time", "fixed_set_claim", "hyperbola_branch", "portrait",
           "reduced_trajectory", "tau_grid", "window_contains"]

#: The paper's diagonal initialisations (Section 6).
DEFAULT_INITS: tuple[tuple[float, float], ...] = ((0.1, 0.1), (0.5, 1.5), (2.0, 2.0))


class PortraitWarning(UserWarning):
    """The drawn window was widened to include an init or an overlay."""


# --------------------------------------------------------------------------- trajectories


def reduced_trajectory(system: ReducedSystem, a0: float, b0: float,
                       tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a(τ), b(τ))`` of the reduced flow from ``(a0, b0)``: the closed form
    :meth:`ReducedSystem.solution <mesadyn.reduced.ReducedSystem.solution>` (Lemma 5.2)."""
    a, b = system.solution(a0, b0, np.asarray(tau, dtype=np.float64))
    return np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)


#: A drawn trajectory ends once ``|ab − ab*| <= SETTLE_RTOL · ab*`` (or, on the stable manifold,
#: once it has shrunk to that fraction), times :data:`SETTLE_MARGIN` so the approach shows.
SETTLE_RTOL = 1e-4
SETTLE_MARGIN = 2.0


def drawn_time(system: ReducedSystem, a0: float, b0: float) -> float:
    """The τ a trajectory from ``(a0, b0)`` is drawn to: ``SETTLE_MARGIN`` × its settle time
    (:meth:`ReducedSystem.settle_time <mesadyn.reduced.ReducedSystem.settle_time>`, measured in
    ab), and at least ``1/c2`` (one e-fold of the saddle) for a start already settled.

    Raises:
        MesadynError: a start whose settle time is not finite (overflow or underflow).
    """
    try:
        with np.errstate(all="ignore"):
            tau = float(system.settle_time(a0, b0, SETTLE_RTOL, measure="ab"))
    except (ArithmeticError, ValueError):
        tau = math.nan
    if not (math.isfinite(tau) and tau >= 0):
        raise MesadynError(f"the trajectory from (a0, b0) = ({a0:g}, {b0:g}) cannot be drawn: "
                           "its settling time overflows or underflows at so extreme a start; "
                           "draw inits of moderate size")
    return max(SETTLE_MARGIN * tau, 1.0 / system.c2)


def tau_grid(tau_end: float, n: int = 1200) -> np.ndarray:
    """Times 0..τ_end, dense at both ends (uniform plus geometric), sorted and unique."""
    geo = np.geomspace(tau_end * 1e-6, tau_end, n // 2)
    lin = np.linspace(0.0, tau_end, n // 2)
    return np.unique(np.concatenate([[0.0], geo, lin]))


# --------------------------------------------------------------------------- geometry


def _window(spec: float | Sequence[float] | None, points: np.ndarray,
            ab_star: float) -> tuple[tuple[float, float, float, float], bool]:
    """The drawn box (a_lo, a_hi, b_lo, b_hi) and whether a given one had to be widened."""
    if spec is None:
        reach = float(np.max(np.abs(points))) if points.size else 0.0
        L = max(2.5, 1.1 * reach, 2.0 * math.sqrt(ab_star))
        L = math.ceil(L * 2.0) / 2.0
        return (-L, L, -L, L), False
    if np.ndim(spec) == 0:
        L = check_positive("window", spec)
        reach = float(np.max(np.abs(points))) if points.size else 0.0
        if reach > L:  # keep the box square and centred on the saddle
            L = reach * 1.08
            return (-L, L, -L, L), True
        return (-L, L, -L, L), False
    else:
        box = [check_finite("window", v) for v in cast(Sequence[float], spec)]
        if len(box) != 4 or box[0] >= box[1] or box[2] >= box[3]:
            raise MesadynError(f"window must be L or (a_lo, a_hi, b_lo, b_hi), got {spec!r}")
    widened = False
    if points.size:
        lo = points.min(axis=0)
        hi = points.max(axis=0)
        pad = 0.08 * max(box[1] - box[0], box[3] - box[2])
        if lo[0] < box[0]:
            box[0], widened = lo[0] - pad, True
        if hi[0] > box[1]:
            box[1], widened = hi[0] + pad, True
        if lo[1] < box[2]:
            box[2], widened = lo[1] - pad, True
        if hi[1] > box[3]:
            box[3], widened = hi[1] + pad, True
    return (box[0], box[1], box[2], box[3]), widened


# --------------------------------------------------------------------------- the portrait


def _system_of(source: Any, T: int | None) -> tuple[ReducedSystem, Any, str]:
    """(system, constants or None, a title) from a Family (with T) or a ReducedSystem."""
    if isinstance(source, ReducedSystem):
        return source, None, rf"$c_1={source.c1:.4g}$, $c_2={source.c2:.4g}$"
    from ..process import Family
    from ..theory import constants

    if not isinstance(source, Family):
        raise MesadynError(
            f"portrait needs a Family (with T) or a ReducedSystem, got {type(source).__name__}"
        )
    if T is None:
        raise MesadynError("portrait of a family needs the training length T")
    c = constants(source, T)
    system = ReducedSystem(c.c1, c.c2)
    title = f"{family_title(source, T=c.T)}:  " + rf"$ab^*={c.ab_star:.4g}$"
    return system, c, title


def _check_inits(inits: Sequence[Sequence[float]]) -> list[tuple[float, float]]:
    out = []
    for k, p in enumerate(inits):
        if len(p) != 2:
            raise MesadynError(f"init must be a pair a0,b0, got {p!r}")
        out.append((check_finite(f"init[{k}].a0", p[0]), check_finite(f"init[{k}].b0", p[1])))
    return out


def portrait(
    source: Any,
    T: int | None = None,
    *,
    inits: Sequence[Sequence[float]] = DEFAULT_INITS,
    window: float | Sequence[float] | None = None,
    density: float = 1.2,
    grid: int = 121,
    n_levels: int = 7,
    full_flow: Sequence[Any] | Any = None,
    gd: Sequence[Any] | Any = None,
    inset_ab: bool = False,
    inset_pl: bool = False,
    width: str | float | None = None,
    title: str | None = None,
) -> tuple[Figure, Axes]:
    """Phase portrait of Lemma 5.2's flow; returns ``(fig, ax)`` with ``ax`` the (a, b) plane.

    ``source`` is a :class:`~mesadyn.process.Family` (with ``T``) or a ``ReducedSystem``.
    ``full_flow`` / ``gd``: one or a list of trajectories (FlowResult, TrainResult, Dataset,
    run path, θ array or an ``(a, b[, t])`` tuple), drawn projected on
    (mean diag W^KQ_32, mean diag W^PV_12).  ``inset_ab`` adds an ab(τ) panel with Theorem 4.1's
    value at this T and the T → ∞ limit κ1/κ2; ``inset_pl`` adds the PL ratio
    ``‖∇ℓ̃‖²/ℓ̃ = 2 c1 (a² + b²)`` along the trajectories with its floor ``2 c1 |a0² − b0²|``
    (Lemma 5.4).  A given ``window`` that misses an init is widened, with a PortraitWarning.
    """
    system, consts, auto_title = _system_of(source, T)
    inits = _check_inits(inits)
    density = check_positive("density", density)
    grid = check_int("grid", grid, 16)
    n_levels = check_int("n_levels", n_levels, 0)
    ab_star = system.ab_star

    # trajectories first: the window must contain them
    colours = init_colours([DiagonalInit(a0, b0) for a0, b0 in inits])
    trajs = []
    for (a0, b0), colour in zip(inits, colours, strict=True):
        tau = tau_grid(drawn_time(system, a0, b0))
        a, b = reduced_trajectory(system, a0, b0, tau)
        trajs.append(Trajectory(a0, b0, tau, a, b, colour))
    overlays = {"fullflow": _as_list(full_flow), "gd": _as_list(gd)}
    paths = {k: [ab_path(s) for s in v] for k, v in overlays.items()}
    pts = [np.column_stack([t.a, t.b]) for t in trajs]
    pts += [np.column_stack([p[0], p[1]]) for v in paths.values() for p in v]
    points = np.concatenate(pts) if pts else np.empty((0, 2))
    finite = np.all(np.isfinite(points), axis=1)
    box, widened = _window(window, points[finite], ab_star)
    if widened:
        outside = [p for p in inits if not (window_contains(window, p))]
        what = f"init {outside[0]}" if outside else "an overlay trajectory"
        warnings.warn(
            f"{what} lies outside the requested window; widened it to "
            f"a∈[{box[0]:.3g}, {box[1]:.3g}], b∈[{box[2]:.3g}, {box[3]:.3g}]",
            PortraitWarning, stacklevel=2,
        )

    side = int(inset_ab) + int(inset_pl)
    with style():
        if width is None:
            width = "two" if side else 4.8
        fig = new_figure(width, aspect=0.62 if side else 1.12)
        if side:
            gs = fig.add_gridspec(side, 2, width_ratios=(1.55, 1.0))
            ax = fig.add_subplot(gs[:, 0])
            side_axes = [fig.add_subplot(gs[k, 1]) for k in range(side)]
        else:
            ax = fig.add_subplot()
            side_axes = []
        handles = _draw_plane(fig, ax, system, box, density, grid, n_levels)
        handles += _draw_trajectories(ax, trajs, box)
        handles += draw_overlays(ax, paths, box, trajs)
        ax.set_xlim(box[0], box[1])
        ax.set_ylim(box[2], box[3])
        zoom = zoom_fullflow(ax, system, trajs, paths["fullflow"]) if paths["fullflow"] else None
        ax.set_aspect("equal", adjustable="box")
        ax.set_xlabel(r"$a$  (diag $W^{KQ}_{32}$)")
        ax.set_ylabel(r"$b$  (diag $W^{PV}_{12}$)")
        ax.set_title(auto_title if title is None else title)
        k = 0
        if inset_ab:
            panel_ab(side_axes[k], system, consts, trajs, paths["fullflow"])
            k += 1
        if inset_pl:
            panel_pl(side_axes[k], system, trajs)
        fig.legend(handles=handles, loc="outside lower center", ncols=3 if side else 2)
        finish(fig)
        if zoom is not None:
            for text in zoom[:2]:
                fit_inside(text, zoom[2])
    return fig, ax


def window_contains(window: float | Sequence[float] | None, p: Sequence[float]) -> bool:
    """Whether point ``p`` lies in a window spec (None: any point)."""
    if window is None:
        return True
    if np.ndim(window) == 0:
        L = float(window)  # type: ignore[arg-type]
        return abs(p[0]) <= L and abs(p[1]) <= L
    w = [float(v) for v in window]  # type: ignore[union-attr]
    return w[0] <= p[0] <= w[1] and w[2] <= p[1] <= w[3]


def _as_list(obj: Any) -> list[Any]:
    if obj is None:
        return []
    if isinstance(obj, list):
        return obj
    return [obj]


def _draw_plane(fig: Figure, ax: Axes, system: ReducedSystem,
                box: tuple[float, float, float, float], density: float, grid: int,
                n_levels: int) -> list[Any]:
    ab_star = system.ab_star
    a_lo, a_hi, b_lo, b_hi = box
    handles: list[Any] = []
    # basins
    pos = ax.fill(*clip_halfplane(box, +1).T, color=OKABE_ITO["skyblue"], alpha=0.13, lw=0,
                  zorder=0, gid="basin+")[0]
    neg = ax.fill(*clip_halfplane(box, -1).T, color=OKABE_ITO["orange"], alpha=0.13, lw=0,
                  zorder=0, gid="basin-")[0]
    handles += [Patch(facecolor=pos.get_facecolor(), label=r"$a+b>0$: to the branch $a,b>0$"),
                Patch(facecolor=neg.get_facecolor(), label=r"$a+b<0$: to the branch $a,b<0$")]
    # field on a grid
    A, B = np.meshgrid(np.linspace(a_lo, a_hi, grid), np.linspace(b_lo, b_hi, grid))
    U, V = system.rhs(A, B)
    # stop streamlines on the fixed hyperbola: its speed is 0, and there the interpolated
    # direction is noise (streamlines would crawl along it).  Mask a band of ~one grid cell.
    h = max((a_hi - a_lo), (b_hi - b_lo)) / (grid - 1)
    near = np.abs(A * B - ab_star) < 1.0 * h * np.hypot(A, B)
    U, V = np.ma.masked_where(near, U), np.ma.masked_where(near, V)
    speed = np.hypot(U.filled(0.0), V.filled(0.0))
    logspeed = np.log10(np.maximum(speed, 1e-300))
    vmax = float(np.max(logspeed))
    vmin = max(float(np.quantile(logspeed[~near], 0.02)), vmax - 6.0)
    # level sets of the invariant a² − b²
    if n_levels:
        r = np.linspace(0.0, max(abs(a_lo), abs(a_hi), abs(b_lo), abs(b_hi)), n_levels + 2)[1:-1]
        levels = np.concatenate([-(r[::-1] ** 2), r**2])
        cs = ax.contour(A, B, A * A - B * B, levels=levels, colors="0.55", linewidths=0.45,
                        linestyles="solid", zorder=1)
        cs.set_gid("levels")
        handles.append(Line2D([], [], color="0.55", lw=0.6, label=r"$a^2-b^2=$ const"))
    sp = ax.streamplot(A, B, U, V, color=logspeed, cmap="cividis",
                       norm=Normalize(vmin=vmin, vmax=vmax), density=density, linewidth=0.55,
                       arrowsize=0.6, zorder=2)
    sp.lines.set_gid("streamlines")
    cb = fig.colorbar(sp.lines, ax=ax, shrink=0.85, pad=0.02, aspect=30)
    cb.set_label(r"$\log_{10}\,\|(\dot a,\dot b)\|$")
    cb.outline.set_linewidth(0.5)
    # nullclines b = 0 (ȧ = 0) and a = 0 (ḃ = 0)
    ax.plot([a_lo, a_hi], [0.0, 0.0], color=OKABE_ITO["green"], lw=1.1, ls=(0, (4, 2)),
            zorder=3, gid="nullcline-adot", label=r"nullcline $\dot a=0$: $b=0$")
    ax.plot([0.0, 0.0], [b_lo, b_hi], color=OKABE_ITO["purple"], lw=1.1, ls=(0, (4, 2)),
            zorder=3, gid="nullcline-bdot", label=r"nullcline $\dot b=0$: $a=0$")
    # separatrix and unstable manifold through the saddle
    t_lo = max(a_lo, -b_hi)
    t_hi = min(a_hi, -b_lo)
    ax.plot([t_lo, t_hi], [-t_lo, -t_hi], color="k", lw=1.0, ls=(0, (1.5, 1.5)), zorder=3,
            gid="stable-manifold", label=r"stable manifold $a=-b$")
    u_lo, u_hi = max(a_lo, b_lo), min(a_hi, b_hi)
    ax.plot([u_lo, u_hi], [u_lo, u_hi], color="0.3", lw=0.8, ls=(0, (6, 2, 1, 2)), zorder=3,
            gid="unstable-manifold", label=r"unstable manifold $a=b$")
    # the fixed hyperbola ab = c2/c1 (both branches)
    for sign, gid in ((1.0, "hyperbola+"), (-1.0, "hyperbola-")):
        ha, hb = hyperbola_branch(ab_star, box, sign)
        ax.plot(ha, hb, color=OKABE_ITO["vermillion"], lw=2.0, zorder=4, gid=gid,
                solid_capstyle="butt",
                label=rf"fixed set $ab=c_2/c_1={ab_star:.3g}$" if sign > 0 else None)
    ax.plot([0.0], [0.0], marker="o", ms=5, mfc="white", mec="k", mew=1.0, ls="none",
            zorder=7, gid="saddle", label=r"saddle $(0,0)$, eigenvalues $\pm c_2$")
    handles += [h for h in ax.get_lines() if not str(h.get_label()).startswith("_")]
    return handles


def _draw_trajectories(ax: Axes, trajs: list[Trajectory],
                       box: tuple[float, float, float, float]) -> list[Any]:
    """Each closed-form trajectory in its init's colour; one legend entry per init."""
    outline = [patheffects.Stroke(linewidth=2.8, foreground="white"), patheffects.Normal()]
    handles: list[Any] = []
    for k, tr in enumerate(trajs):
        line = ax.plot(tr.a, tr.b, color=tr.colour, lw=1.5, zorder=5, gid=f"trajectory-{k}",
                       path_effects=outline)[0]
        line.set_label("_traj")
        ax.plot([tr.a0], [tr.b0], marker="o", ms=4.5, color=tr.colour, mec="white", mew=0.7,
                zorder=6, gid=f"init-{k}", label="_init")
        add_arrows(ax, tr.a, tr.b, tr.colour, box, zorder=6)
        handles.append(Line2D([], [], color=tr.colour, lw=1.5, marker="o", ms=3.5,
                              label=rf"reduced flow from $({tr.a0:g},{tr.b0:g})$"))
    return handles

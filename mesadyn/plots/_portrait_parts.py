"""The portrait's overlays and side panels: full flows and GD iterates, the zoom on the full
flow's end point with its claim about the fixed set, the ab(τ) panel and the PL-ratio panel;
and the plane geometry they share with :mod:`mesadyn.plots.portrait` (half-planes, branches of
the hyperbola, direction arrows)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from matplotlib import patheffects
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.text import Text

from ..reduced import ReducedSystem
from ._style import OKABE_ITO

# --------------------------------------------------------------------------- geometry


def clip_halfplane(box: tuple[float, float, float, float], sign: float) -> np.ndarray:
    """The polygon ``{sign·(a + b) ≥ 0}`` ∩ box (Sutherland–Hodgman against one half-plane)."""
    a0, a1, b0, b1 = box
    poly = [(a0, b0), (a1, b0), (a1, b1), (a0, b1)]
    out: list[tuple[float, float]] = []
    for k in range(4):
        p, q = poly[k], poly[(k + 1) % 4]
        fp, fq = sign * (p[0] + p[1]), sign * (q[0] + q[1])
        if fp >= 0:
            out.append(p)
        if (fp >= 0) != (fq >= 0):
            s = fp / (fp - fq)
            out.append((p[0] + s * (q[0] - p[0]), p[1] + s * (q[1] - p[1])))
    return np.array(out, dtype=np.float64).reshape(-1, 2)


def hyperbola_branch(ab_star: float, box: tuple[float, float, float, float], sign: float,
                     n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Points of ``ab = ab*`` on the branch with ``sign(a) = sign`` inside the box."""
    a_lo, a_hi, b_lo, b_hi = box
    # |a| ranges over the part of the branch inside the box: |a| <= reach in a, |b| <= reach in b
    a_reach = a_hi if sign > 0 else -a_lo
    b_reach = b_hi if sign > 0 else -b_lo
    a_near = a_lo if sign > 0 else -a_hi
    if a_reach <= 0 or b_reach <= 0:
        return np.empty(0), np.empty(0)
    lo = max(ab_star / b_reach, a_near, 1e-300)
    hi = a_reach
    if not hi > lo:
        return np.empty(0), np.empty(0)
    mag = np.geomspace(lo, hi, n)
    a = sign * mag
    return a, ab_star / a


def add_arrows(ax: Axes, a: np.ndarray, b: np.ndarray, color: str,
                box: tuple[float, float, float, float], zorder: float,
                fractions: Sequence[float] = (0.3, 0.7)) -> None:
    """Direction arrows along a path at the given fractions of its (window-scaled) length."""
    sx, sy = box[1] - box[0], box[3] - box[2]
    seg = np.hypot(np.diff(a) / sx, np.diff(b) / sy)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] < 0.03:
        return
    for f in fractions:
        i = int(np.searchsorted(s, f * s[-1]))
        i = min(max(i, 1), len(a) - 1)
        j = int(np.searchsorted(s, s[i] + 0.01 * s[-1] + 1e-3))
        j = min(max(j, i + 1), len(a) - 1)
        if j <= i or (a[j] == a[i] and b[j] == b[i]):
            continue
        ax.annotate(
            "", xy=(a[j], b[j]), xytext=(a[i], b[i]),
            arrowprops={"arrowstyle": "-|>,head_length=0.5,head_width=0.25", "color": color,
                        "lw": 1.0, "shrinkA": 0, "shrinkB": 0},
            zorder=zorder, annotation_clip=False,
        )


# ------------------------------------------------------------------ trajectories and claims


class Trajectory(NamedTuple):
    """One closed-form trajectory as drawn: its init, times, path and colour."""

    a0: float
    b0: float
    tau: np.ndarray
    a: np.ndarray
    b: np.ndarray
    colour: str


#: The colour of GD iterates that start from none of the drawn inits.
GD_OTHER_COLOUR = "0.45"

#: The full flow "ends on the fixed set" when ``|ab/(c2/c1) − 1|`` is at most this; the zoom
#: states the tolerance with the claim, and the measured distance otherwise.
ON_FIXED_SET_RTOL = 1e-6


def _pow10(x: float) -> str:
    """``x`` in mathtext: ``10^{-6}`` for a power of ten, else ``2.5\\times10^{-3}``."""
    e = math.floor(math.log10(x) + 1e-12)
    m = x / 10.0**e
    return f"10^{{{e}}}" if math.isclose(m, 1.0, rel_tol=1e-9) else rf"{m:.2g}\times10^{{{e}}}"


def _digits(x: float, y: float, least: int = 4) -> int:
    """The fewest significant digits (at least ``least``) at which ``x`` and ``y`` print apart."""
    for n in range(least, 17):
        if f"{x:.{n}g}" != f"{y:.{n}g}":
            return n
    return 17


def fixed_set_claim(ab_end: float, ab_star: float, rtol: float = ON_FIXED_SET_RTOL) -> str:
    """What the zoom says about where a flow ends (mathtext, short lines): on the fixed set
    ``ab = c2/c1`` within ``rtol`` (relative), or off it, with ``ab ≠ c2/c1`` printed to the
    digits that tell them apart and the measured ``|ab − c2/c1|``."""
    rel = abs(ab_end / ab_star - 1.0) if ab_star != 0 else abs(ab_end)
    if rel <= rtol:
        return (rf"ends on $ab=c_2/c_1={ab_star:.4g}$" "\n"
                rf"within ${_pow10(rtol)}$ (relative)")
    n = _digits(ab_end, ab_star)
    return (rf"ends at $ab={ab_end:.{n}g}$" "\n"
            rf"$\neq c_2/c_1={ab_star:.{n}g}$:" "\n"
            rf"$|ab-c_2/c_1|={_pow10(abs(ab_end - ab_star))}$")


# ---------------------------------------------------------------------- overlays and panels


def _init_colour(trajs: list[Trajectory], a: np.ndarray, b: np.ndarray) -> str | None:
    """The colour of the init an overlay starts from (within 1e-9), else None."""
    for tr in trajs:
        if (math.isclose(a[0], tr.a0, rel_tol=1e-9, abs_tol=1e-12)
                and math.isclose(b[0], tr.b0, rel_tol=1e-9, abs_tol=1e-12)):
            return tr.colour
    return None


def draw_overlays(ax: Axes, paths: dict[str, list[Any]],
                   box: tuple[float, float, float, float],
                   trajs: list[Trajectory]) -> list[Any]:
    """Full flows in one style (dashed yellow, black edge); GD iterates as × in the colour of
    the init they start from (grey when they start elsewhere)."""
    handles: list[Any] = []
    for k, (a, b, _t) in enumerate(paths["fullflow"]):
        ax.plot(a, b, color=OKABE_ITO["yellow"], lw=1.3, ls=(0, (3, 1.2)), zorder=6.5,
                gid=f"fullflow-{k}",
                path_effects=[patheffects.Stroke(linewidth=2.6, foreground="k"),
                              patheffects.Normal()])
        ax.plot([a[-1]], [b[-1]], marker="s", ms=4, mfc=OKABE_ITO["yellow"], mec="k",
                zorder=6.6, gid=f"fullflow-end-{k}")
        add_arrows(ax, a, b, "k", box, zorder=6.6, fractions=(0.5,))
    if paths["fullflow"]:
        handles.append(Line2D([], [], color=OKABE_ITO["yellow"], lw=1.3, ls=(0, (3, 1.2)),
                              marker="s", ms=3.5, mec="k",
                              label=r"full flow, projected (mean diag)"))
    for k, (a, b, _t) in enumerate(paths["gd"]):
        step = max(1, len(a) // 40)
        idx = np.unique(np.concatenate([np.arange(0, len(a), step), [len(a) - 1]]))
        ax.plot(a[idx], b[idx], ls="none", marker="x", ms=3.5, mew=0.9,
                color=_init_colour(trajs, a, b) or GD_OTHER_COLOUR, zorder=6.4, gid=f"gd-{k}")
    if paths["gd"]:
        handles.append(Line2D([], [], ls="none", marker="x", ms=3.5, color=GD_OTHER_COLOUR,
                              label="finite-sample GD iterates (colour: init)"))
    return handles


def zoom_fullflow(ax: Axes, system: ReducedSystem, trajs: list[Trajectory],
                   full: list[Any]) -> tuple[Text, Text, Axes]:
    """A zoom on the first full-flow end point and its reduced counterpart (Proposition 4.2:
    where the full flow ends off the hyperbola the reduced picture no longer holds), with the
    claim of :func:`fixed_set_claim` about that end point; returns the claim, the zoom factor's
    label and the zoom."""
    a_f, b_f, _ = full[0]
    end_f = np.array([a_f[-1], b_f[-1]])
    tr = min(trajs, key=lambda t: abs(t.a0 - a_f[0]) + abs(t.b0 - b_f[0]))
    end_r = np.array([tr.a[-1], tr.b[-1]])
    gap = float(np.hypot(*(end_f - end_r)))
    half = max(3.0 * gap, 1e-3 * max(1.0, float(np.abs(end_r).max())))
    centre = 0.5 * (end_f + end_r)
    # the end points sit at 35% of the height: the claim takes the top of the zoom
    zbox = (centre[0] - half, centre[0] + half, centre[1] - 0.7 * half, centre[1] + 1.3 * half)
    z = ax.inset_axes((0.56, 0.03, 0.41, 0.41))
    z.set_gid("zoom")
    z.set_facecolor("white")
    for sign in (1.0, -1.0):
        ha, hb = hyperbola_branch(system.ab_star, zbox, sign)
        z.plot(ha, hb, color=OKABE_ITO["vermillion"], lw=1.6)
    z.plot(tr.a, tr.b, color=tr.colour, lw=1.2)
    z.plot(a_f, b_f, color=OKABE_ITO["yellow"], lw=1.2, ls=(0, (3, 1.2)),
           path_effects=[patheffects.Stroke(linewidth=2.4, foreground="k"), patheffects.Normal()])
    z.plot(*end_r, marker="o", ms=4, color=tr.colour, mec="white", ls="none")
    z.plot(*end_f, marker="s", ms=4, mfc=OKABE_ITO["yellow"], mec="k", ls="none",
           gid="zoom-fullflow-end")
    z.set_xlim(zbox[0], zbox[1])
    z.set_ylim(zbox[2], zbox[3])
    z.set_aspect("equal", adjustable="box")
    z.set_xticks([])
    z.set_yticks([])
    for spine in z.spines.values():
        spine.set_visible(True)
    zoom = box_width(ax) / (2 * half)
    text = (rf"full flow from $({tr.a0:g},{tr.b0:g})$" "\n"
            + fixed_set_claim(float(end_f[0] * end_f[1]), system.ab_star))
    claim = z.text(0.03, 0.97, text, transform=z.transAxes, va="top", ha="left", fontsize=5.5,
                   linespacing=1.1, gid="zoom-claim",
                   bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6, "alpha": 0.85})
    factor = z.text(0.97, 0.03, rf"zoom $\times{zoom:.0f}$", transform=z.transAxes,
                    va="bottom", ha="right", fontsize=5.0, color="0.3", gid="zoom-factor",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.4, "alpha": 0.85})
    for t in (claim, factor):
        t.set_in_layout(False)  # fitted inside the zoom afterwards (fit_inside)
    ax.indicate_inset_zoom(z, edgecolor="0.3", lw=0.6)
    return claim, factor, z


def box_width(ax: Axes) -> float:
    """Width of the main axes' a-range."""
    lo, hi = ax.get_xlim()
    return hi - lo


def panel_ab(ax: Axes, system: ReducedSystem, consts: Any, trajs: list[Trajectory],
              full: list[Any]) -> None:
    """ab(τ) along each trajectory against Theorem 4.1 at this T and its T → ∞ limit."""
    for k, tr in enumerate(trajs):
        m = tr.tau > 0
        ax.plot(tr.tau[m], (tr.a * tr.b)[m], color=tr.colour, lw=1.2,
                label=rf"$({tr.a0:g},{tr.b0:g})$", gid=f"ab-{k}")
    for k, (_a, _b, t) in enumerate(full):
        if t is None:
            continue
        ab_full = _a * _b
        m = t > 0
        ax.plot(t[m], ab_full[m], color=OKABE_ITO["yellow"], lw=1.0, ls=(0, (3, 1.2)),
                path_effects=[patheffects.Stroke(linewidth=2.2, foreground="k"),
                              patheffects.Normal()], gid=f"ab-fullflow-{k}")
    ax.axhline(system.ab_star, color=OKABE_ITO["vermillion"], lw=1.0, gid="ab-star",
               label=rf"$c_2/c_1={system.ab_star:.4g}$ (Thm 4.1, this $T$)")
    if consts is not None:
        ax.axhline(consts.ab_limit, color="k", lw=0.9, ls=(0, (4, 2)), gid="ab-limit",
                   label=rf"$\kappa_1/\kappa_2={consts.ab_limit:.4g}$ ($T\to\infty$)")
    ax.set_xscale("log")
    ax.set_xlim(left=1e-4 * max(t.tau[-1] for t in trajs) if trajs else None)
    ax.set_xlabel(r"$\tau$")
    ax.set_ylabel(r"$ab$")
    ax.legend(loc="upper right", fontsize=6, handlelength=1.6)


def panel_pl(ax: Axes, system: ReducedSystem, trajs: list[Trajectory]) -> None:
    """Lemma 5.4's PL ratio ‖∇ℓ̃‖²/ℓ̃ along each trajectory, with its floor 2c1|a0² − b0²|."""
    for k, (a0, b0, tau, a, b, color) in enumerate(trajs):
        da, db = system.rhs(a, b)
        ell = system.surrogate(a, b)
        ok = (tau > 0) & (ell > 1e-10 * max(float(ell[0]), 1e-300))
        ax.plot(tau[ok], (da * da + db * db)[ok] / ell[ok], color=color, lw=1.2,
                gid=f"pl-{k}")
        floor = 2 * system.c1 * abs(a0 * a0 - b0 * b0)
        if floor > 0:
            ax.axhline(floor, color=color, lw=0.8, ls=(0, (2, 2)), gid=f"pl-floor-{k}")
    ax.set_xscale("log")
    ax.set_xlim(left=1e-4 * max(t.tau[-1] for t in trajs) if trajs else None)
    ax.set_yscale("log")
    ax.set_xlabel(r"$\tau$")
    ax.set_ylabel(r"$\|\nabla\tilde\ell\|^2/\tilde\ell$")
    ax.set_title(r"PL ratio $=2c_1(a^2+b^2)$; dashed: $2c_1|a_0^2-b_0^2|$", fontsize=6.5)

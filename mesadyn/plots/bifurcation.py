"""Bifurcation diagrams of a continuation run (``mesadyn continue``); each returns
``(Figure, Axes)``.

The source is a continuation run: its file (``.nc``), the ``xarray.Dataset`` loaded from it,
or :meth:`mesadyn.workflows.continuation.Result.to_dataset` of a live result.

* :func:`bifurcation_diagram` — the parameter against ab, the off-diagonal mass or the loss;
  stable parts solid, unstable parts dashed, one colour per branch, located folds and branch
  points marked.
* :func:`eigenvalue_diagram` — the non-symmetry eigenvalues of ``−∇²L`` against the parameter
  (symmetric-log scale), zero crossings marked.
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

__all__ = ["Quantity", "bifurcation_diagram", "bifurcation_panels", "eigenvalue_diagram"]


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
    from ..model import ab, active_mask, diagonal_mask

    d = int(round((thetas.shape[1] / 18) ** 0.5))
    for k, p, th in zip(kinds, ps, thetas, strict=True):
        if what is Quantity.AB:
            import torch

            y = float(ab(torch.as_tensor(th)).mean())
        elif what is Quantity.OFFDIAG:
            act = active_mask(d)
            off = act & ~diagonal_mask(d)
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


def eigenvalue_diagram(source: xr.Dataset | str | os.PathLike[str], *, branch: int = 0,
                       ax: Axes | None = None, width: str | float = "one",
                       linthresh: float | None = None) -> tuple[Figure, Axes]:
    """The non-symmetry eigenvalues of ``−∇²L`` (the Jacobian of the flow, restricted
    transverse to the symmetry orbits) against the parameter on one branch, symmetric-log y.

    Positive values are unstable directions; a curve crossing zero is a fold or branch point
    (dotted vertical lines at the located ones).
    """
    ds = _load(source)
    which = np.asarray(ds["point_branch"].values, int)
    idx = np.flatnonzero(which == branch)
    if idx.size == 0:
        raise MesadynError(f"the run has no branch {branch}")
    p = np.asarray(ds["p"].values, float)[idx]
    mu = np.asarray(ds["reduced_eigenvalues"].values, float)[idx]
    order = np.argsort(p) if np.all(np.diff(p) >= 0) or np.all(np.diff(p) <= 0) else None
    with style():
        fig = new_figure(width) if ax is None else ax.figure
        assert isinstance(fig, Figure)
        ax = fig.add_subplot() if ax is None else ax
        nz = np.abs(mu[mu != 0])
        thr = linthresh if linthresh is not None else (
            float(np.quantile(nz, 0.05)) if nz.size else 1.0)
        x = p if order is None else p[order]
        m = mu if order is None else mu[order]
        for k in range(m.shape[1]):
            colour = OKABE_ITO["vermillion"] if np.any(m[:, k] > 0) else OKABE_ITO["blue"]
            ax.plot(x, m[:, k], color=colour, linewidth=0.7, alpha=0.8)
        ax.axhline(0.0, color="0.2", linewidth=0.6)
        _draw_specials(ax, ds, None)
        ax.set_yscale("symlog", linthresh=thr)
        ax.set_xlabel(_symbol(ds))
        ax.set_ylabel(r"eigenvalues of $-\nabla^2 L$ (non-symmetry)")
        ax.plot([], [], color=OKABE_ITO["blue"], label="stable direction")
        ax.plot([], [], color=OKABE_ITO["vermillion"], label="unstable somewhere")
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

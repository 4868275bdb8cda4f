"""The paper's figures, one function each; every one returns ``(Figure, Axes)``.

Inputs are live objects (``TrainResult``, ``FlowResult``, ``ContextCurve``, ``Spectrum``, arrays)
or a saved run path (``.nc``, read by :func:`mesadyn.io.load_run`).

* :func:`ab_convergence` — mean ab against Theorem 4.1 at this T and its T → ∞ limit (Fig. 1a).
* :func:`loss_curves` — train/test loss (or population loss) against step or τ.
* :func:`weight_heatmaps` — W^KQ and W^PV with block labels, diverging colormap centred at 0
  (Fig. 7).
* :func:`jacobian_spectrum` — eigenvalues of −∇²L coloured by the block holding most of each
  eigenvector's mass.
* :func:`incontext_curves` — Proposition 4.1's ratio and the MSE against the test context length
  (Theorem 4.2), with standard-error bars.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from ..errors import MesadynError
from ..tolerances import ZERO_RTOL
from ._axes import fit_inside, log_ticks
from ._data import Source, Table, as_numpy, is_tensor, project_theta, table
from ._style import (
    OKABE_ITO,
    family_of,
    family_title,
    finish,
    init_colours,
    init_of,
    new_figure,
    style,
)

if TYPE_CHECKING:
    from ..process import Family

#: The colour of Theorem 4.1's ``c2/c1`` in every figure (the portrait's fixed set).
AB_STAR_COLOUR = OKABE_ITO["vermillion"]


def _runs(runs: Source | Sequence[Source]) -> list[Table]:
    """One run, or a list or tuple of runs, as tables."""
    items = list(runs) if isinstance(runs, (list, tuple)) else [cast(Source, runs)]
    if not items:
        raise MesadynError("give at least one run")
    return [table(r) for r in items]


def _x_of(run: Table) -> tuple[np.ndarray, str]:
    step = run.find("step")
    if step is not None:
        return np.asarray(step, float), "GD step"
    t = run.find("t", "tau")
    if t is not None:
        return np.asarray(t, float), r"$\tau$"
    raise MesadynError(f"{run.what} has neither steps nor times to plot against")


def _ab_mean(run: Table) -> np.ndarray:
    ab = run.find("ab_mean")
    if ab is not None:
        return np.asarray(ab, float)
    return project_theta(run.get("theta"))[2]


def _keys(items: list[Table], labels: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(label, colour) of each run: the colour of its init (:func:`init_colours`), the
    label the given one or the init's (``run k`` when the run records none)."""
    inits = [init_of(run.config) for run in items]
    if labels is not None and len(labels) != len(items):
        raise MesadynError(f"{len(labels)} labels for {len(items)} runs")
    names = [labels[k] if labels is not None else
             (init.label if init is not None else f"run {k + 1}")
             for k, init in enumerate(inits)]
    return names, init_colours(inits)


def _title(items: list[Table], family: Family | None, T: int | None) -> str | None:
    """The family with its parameter, d, T (and m) from ``family`` or the first run's config."""
    cfg = items[0].config
    fam = family if family is not None else family_of(cfg)
    if fam is None:
        return None
    return family_title(fam, T=T if T is not None else cfg.get("T"), m=cfg.get("m"))


def _theory(run: Table, family: Family | None, T: int | None
            ) -> tuple[float | None, float | None]:
    if family is not None:
        from ..theory import constants

        if T is None:
            raise MesadynError("theory lines for a family need the training length T")
        c = constants(family, T)
        return c.ab_star, c.ab_limit
    star = run.find("ab_theory")
    limit = run.find("ab_limit")
    return (None if star is None else float(star), None if limit is None else float(limit))


def ab_convergence(runs: Source | Sequence[Source], labels: Sequence[str] | None = None, *,
                   family: Family | None = None, T: int | None = None,
                   width: str | float = "one", title: str | None = None
                   ) -> tuple[Figure, Axes]:
    """Mean ``ab`` per step (or τ) for several runs, against Theorem 4.1's ``c2/c1`` at this T
    and the paper's T → ∞ line ``κ1/κ2`` (taken from ``family``/``T`` or from the runs).

    Each run is drawn in the colour of its initialisation (:func:`mesadyn.plots.init_colours`,
    the same in every figure) and keyed in the legend; the title (unless given) names the
    family with its parameter, from ``family`` or the runs' configuration.
    """
    items = _runs(runs)
    names, colours = _keys(items, labels)
    with style():
        fig = new_figure(width, aspect=0.72)
        ax = fig.add_subplot()
        xlabel = ""
        for k, run in enumerate(items):
            x, xlabel = _x_of(run)
            ax.plot(x, _ab_mean(run), color=colours[k], label=names[k], gid=f"ab-{k}")
        star, limit = _theory(items[0], family, T)
        if star is not None:
            ax.axhline(star, color=AB_STAR_COLOUR, lw=1.0, gid="ab-star",
                       label=rf"Thm 4.1 at this $T$: $c_2/c_1={star:.4g}$")
        if limit is not None:
            ax.axhline(limit, color="k", lw=0.9, ls=(0, (4, 2)), gid="ab-limit",
                       label=rf"$T\to\infty$: $\kappa_1/\kappa_2={limit:.4g}$")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(r"mean $ab$")
        title = _title(items, family, T) if title is None else title
        if title:
            ax.set_title(title)
        fig.legend(loc="outside lower center", ncols=2)
        finish(fig)
    return fig, ax


def loss_curves(runs: Source | Sequence[Source], labels: Sequence[str] | None = None, *,
                test: bool = True, width: str | float = "one",
                title: str | None = None) -> tuple[Figure, Axes]:
    """Training loss (solid) and test loss (dashed, if recorded) per step, or the flow's
    population loss per τ; logarithmic loss axis with plain-number ticks.

    Each run is drawn in the colour of its initialisation, as in :func:`ab_convergence`; the
    title (unless given) names the family with its parameter from the runs' configuration.
    """
    items = _runs(runs)
    names, colours = _keys(items, labels)
    with style():
        fig = new_figure(width, aspect=0.72)
        ax = fig.add_subplot()
        xlabel = ""
        any_test = False
        for k, run in enumerate(items):
            x, xlabel = _x_of(run)
            ax.plot(x, run.get("train_loss", "loss"), color=colours[k], label=names[k],
                    gid=f"loss-{k}")
            te = run.find("test_loss") if test else None
            if te is not None and np.any(np.isfinite(te)):
                any_test = True
                ok = np.isfinite(te)
                ax.plot(x[ok], te[ok], color=colours[k], ls=(0, (4, 2)), lw=1.0,
                        gid=f"test-loss-{k}", marker="." if ok.sum() < 30 else None)
        if any_test:
            ax.plot([], [], color="0.4", label="train")
            ax.plot([], [], color="0.4", ls=(0, (4, 2)), label="test")
        ax.set_yscale("log")
        log_ticks(ax)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(r"loss $L$")
        title = _title(items, None, None) if title is None else title
        if title:
            ax.set_title(title)
        fig.legend(loc="outside lower center", ncols=2)
        finish(fig)
    return fig, ax


def _final_theta(source: Any) -> np.ndarray:
    """θ of a θ array or tensor (the last row of a trajectory), or a source's final θ."""
    if isinstance(source, np.ndarray) or is_tensor(source):
        theta = as_numpy(source)
    else:
        theta = table(source).get("final_theta", "theta")
    theta = np.asarray(theta, dtype=np.float64)
    if theta.ndim == 2:
        theta = theta[-1]
    return theta


def weight_heatmaps(source: Any, *, width: str | float = "two",
                    title: str | None = None) -> tuple[Figure, np.ndarray]:
    """``W^KQ`` and ``W^PV`` (3d×3d each) of θ (or a run's final θ), Fig. 7 style: one diverging
    colour scale centred at 0 per matrix, block grid, block indices on the axes and the blocks
    that reach ŷ (Eq. 1) outlined."""
    from matplotlib.patches import Rectangle

    from ..model import dim_of

    theta = _final_theta(source)
    d = dim_of(theta)
    n = 9 * d * d
    mats = {"KQ": theta[:n].reshape(3 * d, 3 * d), "PV": theta[n:].reshape(3 * d, 3 * d)}
    active = {"KQ": [(2, 2), (2, 3), (3, 2), (3, 3)], "PV": [(1, 2), (1, 3)]}
    with style():
        fig = new_figure(width, aspect=0.45)
        axes = fig.subplots(1, 2)
        for ax, (name, W) in zip(axes, mats.items(), strict=True):
            vmax = float(np.max(np.abs(W)))
            vmax = vmax if vmax > 0 else 1.0
            im = ax.imshow(W, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -vmax, vmax),
                           interpolation="nearest", gid=f"W_{name}")
            for k in range(1, 3):
                ax.axhline(k * d - 0.5, color="0.2", lw=0.6)
                ax.axvline(k * d - 0.5, color="0.2", lw=0.6)
            for i, j in active[name]:
                ax.add_patch(Rectangle(((j - 1) * d - 0.5, (i - 1) * d - 0.5), d, d, fill=False,
                                       ec=OKABE_ITO["black"], lw=1.6, gid=f"active-{name}-{i}{j}"))
            centres = [d * k + (d - 1) / 2 for k in range(3)]
            ax.set_xticks(centres, ["1", "2", "3"])
            ax.set_yticks(centres, ["1", "2", "3"])
            ax.tick_params(length=0)
            ax.set_xlabel("column block $j$")
            ax.set_ylabel("row block $i$")
            ax.set_title(rf"$W^{{{name}}}$  (blocks $W^{{{name}}}_{{ij}}$; bold: reach $\hat y$)")
            for spine in ax.spines.values():
                spine.set_visible(True)
            cb = fig.colorbar(im, ax=ax, shrink=0.9)
            cb.outline.set_linewidth(0.5)
        if title:
            fig.suptitle(title)
        finish(fig)
    return fig, axes


_ACTIVE_COLOURS = {
    "W_KQ_32": OKABE_ITO["vermillion"], "W_PV_12": OKABE_ITO["blue"],
    "W_KQ_22": OKABE_ITO["orange"], "W_KQ_23": OKABE_ITO["purple"],
    "W_KQ_33": OKABE_ITO["green"], "W_PV_13": OKABE_ITO["skyblue"],
}


def _block_tex(name: str) -> str:
    _, m, ij = name.split("_")
    return rf"$W^{{{m}}}_{{{ij}}}$"


def _spectrum_weights(spectrum: Any, weights: Mapping[str, Any] | None
                      ) -> tuple[np.ndarray, Mapping[str, Any], np.ndarray | None]:
    """Eigenvalues, block weights and the zero-mode mask (None: not classified) from a
    ``Spectrum`` or from eigenvalues with explicit weights."""
    from ..analysis.spectrum import Spectrum, block_weights

    if isinstance(spectrum, Spectrum):
        return (spectrum.eigenvalues, block_weights(spectrum.eigenvectors, spectrum.d),
                spectrum.kinds == "zero")
    if weights is None:
        raise MesadynError("jacobian_spectrum needs block weights (or a Spectrum)")
    return np.asarray(spectrum, dtype=np.float64), weights, None


def _draw_spectrum(ax: Axes, eigenvalues: Any, weights: Mapping[str, Any], *,
                   zero: Any = None) -> None:
    """One panel: eigenvalues ascending on a symlog axis, coloured by dominant block."""
    mu = np.asarray(eigenvalues, dtype=np.float64).ravel()
    names = list(weights)
    W = np.stack([np.asarray(weights[n], float).ravel() for n in names])
    if W.shape[1] != mu.size:
        raise MesadynError(f"weights have {W.shape[1]} columns for {mu.size} eigenvalues")
    order = np.argsort(mu)
    mu, W = mu[order], W[:, order]
    dom = np.array([names[i] for i in np.argmax(W, axis=0)])
    is_zero = (np.zeros(mu.size, bool) if zero is None
               else np.asarray(zero, bool).ravel()[order])
    idx = np.arange(mu.size)
    groups = [n for n in _ACTIVE_COLOURS if n in set(dom[~is_zero])]
    for name in groups:
        m = (dom == name) & ~is_zero
        ax.plot(idx[m], mu[m], ls="none", marker="o", ms=3.2, color=_ACTIVE_COLOURS[name],
                label=_block_tex(name), gid=f"spectrum-{name}")
    other = ~np.isin(dom, list(_ACTIVE_COLOURS)) & ~is_zero
    if other.any():
        ax.plot(idx[other], mu[other], ls="none", marker="o", ms=2.5, color="0.65",
                label="inactive blocks", gid="spectrum-inactive")
    if is_zero.any():
        ax.plot(idx[is_zero], np.zeros(int(is_zero.sum())), ls="none", marker="o", ms=2.0,
                color="0.8", label="zero modes", gid="spectrum-zero")
    ax.axhline(0.0, color="k", lw=0.5)
    scale = np.max(np.abs(mu)) if mu.size else 1.0
    nz = np.abs(mu[(np.abs(mu) > ZERO_RTOL * scale) & ~is_zero])
    ax.set_yscale("symlog", linthresh=float(nz.min()) if nz.size else 1.0)
    ax.set_xlabel("eigenvalue index (ascending)")


def jacobian_spectrum(eigenvalues: Any, weights: Mapping[str, Any] | None = None, *,
                      d: int | None = None, width: str | float = "one",
                      title: str | None = None, loss: str = "L",
                      note: str | None = None) -> tuple[Figure, Axes]:
    """Eigenvalues of the Jacobian ``−∇²L`` in ascending order (symlog axis), each coloured by
    the parameter block that holds most of its eigenvector's ``‖v‖²``.

    ``eigenvalues`` may be a ``Spectrum`` (``mesadyn.analysis.spectrum``), whose eigenvectors
    give the weights and whose zero modes are drawn apart in light grey; otherwise pass
    ``weights`` = {block name: fraction per eigenvalue}, e.g. from
    ``mesadyn.analysis.spectrum.block_weights``.  Blocks outside P and A are grey.  ``loss``
    names the loss in the axis label (``"L_m"`` for the finite-sample loss); ``note`` is written
    in the upper left of the axes (e.g. how far the point is from a fixed point).
    """
    mu, weights, zero = _spectrum_weights(eigenvalues, weights)
    with style():
        fig = new_figure(width, aspect=0.8)
        ax = fig.add_subplot()
        _draw_spectrum(ax, mu, weights, zero=zero)
        ax.set_ylabel(rf"eigenvalue of $-\nabla^2 {loss}$")
        if title:
            ax.set_title(title)
        text = None
        if note:
            text = ax.text(0.02, 0.97, note, transform=ax.transAxes, va="top", ha="left",
                           fontsize=6.5, gid="spectrum-note",
                           bbox={"facecolor": "white", "edgecolor": "0.7", "lw": 0.5,
                                 "pad": 2.0})
        fig.legend(loc="outside lower center", ncols=4)
        finish(fig)
        if text is not None:
            fit_inside(text, ax)
    return fig, ax


def spectra_panels(spectra: Mapping[str, Any], *, width: str | float = "two",
                   title: str | None = None) -> tuple[Figure, list[Axes]]:
    """Several spectra of ``−∇²L`` side by side (one panel per named ``Spectrum``, e.g. the
    masked and the released fixed point of Proposition 4.2), zero modes in light grey."""
    if not spectra:
        raise MesadynError("spectra_panels needs at least one spectrum")
    with style():
        fig = new_figure(width, aspect=0.4)
        axes = list(fig.subplots(1, len(spectra), squeeze=False)[0])
        for ax, (name, sp) in zip(axes, spectra.items(), strict=True):
            mu, weights, zero = _spectrum_weights(sp, None)
            _draw_spectrum(ax, mu, weights, zero=zero)
            ax.set_title(f"{name}\n{sp.n_unstable} unstable, {sp.n_zero} zero modes")
        axes[0].set_ylabel(r"eigenvalue of $-\nabla^2 L$")
        handles: dict[str, Any] = {}
        for ax in axes:
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                handles.setdefault(lab, h)
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=5)
        if title:
            fig.suptitle(title)
        finish(fig)
    return fig, axes


def incontext_curves(source: Any, ratio: Any = None, ratio_se: Any = None, mse: Any = None,
                     mse_se: Any = None, *, baseline: Any = None, theory: float | None = None,
                     limit: float | None = None, at_point: float | None = None,
                     width: str | float = "two",
                     title: str | None = None) -> tuple[Figure, np.ndarray]:
    """Proposition 4.1's ratio ``E[(ŷ)_j/(Wx)_j]`` and the MSE against the test context length
    ``T_te`` with standard-error bars (Theorem 4.2 for the MSE's decay).

    ``source`` is a ``ContextCurve``/Dataset/run path with ``T_te, ratio, ratio_se, mse,
    mse_se`` (and optional ``baseline``), or the array ``T_te`` with the others as arguments.
    ``theory`` (ratio at the training T) and ``limit`` (T → ∞) are drawn as lines;
    ``at_point`` (dotted) is Proposition 4.1's ratio ``ab·E[x_j²]`` at the θ the curve was
    measured at, which differs from ``theory`` where θ is not at Theorem 4.1's ``ab*``.
    """
    if isinstance(source, (np.ndarray, list, tuple)):
        T_te = np.asarray(source, float)
        ratio = np.asarray(ratio, float)
        ratio_se = np.zeros_like(ratio) if ratio_se is None else np.asarray(ratio_se, float)
    else:
        tab = table(source)
        T_te = np.asarray(tab.get("T_te"), float)
        ratio, ratio_se = tab.get("ratio"), tab.get("ratio_se")
        mse = tab.find("mse")
        mse_se = tab.find("mse_se")
        baseline = tab.find("baseline") if baseline is None else baseline
    if ratio.shape != T_te.shape or ratio_se.shape != T_te.shape:
        raise MesadynError(f"ratio and its SE must match T_te's {T_te.size} entries")
    panels = 2 if mse is not None else 1
    with style():
        fig = new_figure(width if panels == 2 else "one", aspect=0.38 if panels == 2 else 0.75)
        axes = np.atleast_1d(fig.subplots(1, panels))
        ax = axes[0]
        ax.errorbar(T_te, ratio, yerr=ratio_se, fmt="o-", ms=3, lw=1.0, capsize=2,
                    color=OKABE_ITO["blue"], label="measured ± SE", gid="ratio")
        if theory is not None:
            ax.axhline(theory, color="k", lw=1.0, gid="ratio-theory",
                       label=rf"theory at train $T$: {theory:.4g}")
        if limit is not None:
            ax.axhline(limit, color="k", lw=0.9, ls=(0, (4, 2)), gid="ratio-limit",
                       label=rf"$T\to\infty$: {limit:.4g}")
        if at_point is not None:
            ax.axhline(at_point, color=OKABE_ITO["blue"], lw=0.9, ls=(0, (1, 1.5)),
                       gid="ratio-at-point", label=rf"Prop. 4.1 at this $\theta$: {at_point:.4g}")
        ax.set_xlabel(r"test context length $T_{te}$")
        ax.set_ylabel(r"ratio $E[(\hat y)_j/(Wx)_j]$")
        if panels == 2:
            ax2 = axes[1]
            mse = np.asarray(mse, float)
            mse_se = np.zeros_like(mse) if mse_se is None else np.asarray(mse_se, float)
            ax2.errorbar(T_te, mse, yerr=mse_se, fmt="o-", ms=3, lw=1.0, capsize=2,
                         color=OKABE_ITO["vermillion"], label="MSE ± SE", gid="mse")
            if baseline is not None:
                ax2.plot(T_te, np.asarray(baseline, float), color="0.5", ls=(0, (4, 2)), lw=1.0,
                         label=r"predict 0: $E\|Wx\|^2$", gid="mse-baseline")
            ax2.set_yscale("log")
            log_ticks(ax2)
            ax2.set_xlabel(r"test context length $T_{te}$")
            ax2.set_ylabel(r"MSE $E\|\hat y - Wx\|^2$")
        handles = [h for a in axes for h in a.get_legend_handles_labels()[0]]
        fig.legend(handles=handles, loc="outside lower center",
                   ncols=3 if panels == 2 else 2)
        if title:
            fig.suptitle(title)
        finish(fig)
    return fig, axes if panels == 2 else axes[0]

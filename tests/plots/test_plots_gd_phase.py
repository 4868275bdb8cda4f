"""The figures of GD as a map draw what they are given: one colour per regime (the map's cells
carry the regime codes), the paper's runs as marks with one legend entry per group, the
stability curves, the branch, the landing points and the central flow's curves."""

from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from mesadyn.analysis.gd_batch import REGIMES, reduced_regimes
from mesadyn.analysis.gd_landing import reduced_landing
from mesadyn.analysis.gd_orbits import ReducedMap, flip_point, follow_period2
from mesadyn.analysis.gd_regime import Regime
from mesadyn.plots import render
from mesadyn.plots.gd_phase import (
    REGIME_COLOURS,
    Mark,
    central_flow_figure,
    landing_figure,
    period2_figure,
    phase_diagram,
    stability_figure,
)

C1, C2 = 290.9706484691779, 54.0


def test_one_distinct_colour_per_regime():
    assert set(REGIME_COLOURS) == set(Regime)
    assert len({to_rgba(c) for c in REGIME_COLOURS.values()}) == len(Regime)


def test_phase_diagram_cells_are_the_regimes():
    k = np.geomspace(0.05, 2.5, 12)
    x = np.geomspace(0.1, 5.0, 9)
    u = math.sqrt(C2 / C1)
    codes = reduced_regimes(k[:, None] / C2, x[None, :] * u, x[None, :] * u, C1, C2,
                            300).code.reshape(12, 9)
    marks = [Mark(0.03, 0.5, "run A", "o"), Mark(0.04, 0.6, "run A", "o"),
             Mark(0.1, 2.0, "run B", "s")]
    fig, axes = phase_diagram([{"x": k, "y": x, "codes": codes, "xlabel": "k", "ylabel": "x",
                                "logx": True, "logy": True, "marks": marks}])
    mesh = axes[0].collections[0]
    np.testing.assert_array_equal(np.asarray(mesh.get_array()).reshape(9, 12), codes.T)
    cmap = mesh.get_cmap()
    for i, r in enumerate(REGIMES):
        assert to_rgba(cmap(mesh.norm(i))) == to_rgba(REGIME_COLOURS[r])
    texts = [t.get_text() for t in axes[0].get_legend().get_texts()]
    present = {REGIMES[int(c)].value for c in np.unique(codes)}
    assert texts.count("run A") == 1 and texts.count("run B") == 1
    assert len(texts) == len(present) + 2
    assert len([ln for ln in axes[0].get_lines() if ln.get_marker() in "os"]) == 3
    assert render(fig, "png", dpi=50)[:4] == b"\x89PNG"


def test_period2_and_landing_figures_hold_the_data():
    gd = ReducedMap(C1, C2)
    flip = flip_point(gd, gd.balanced(), (0.5 / C2, 2 / C2))
    br = follow_period2(gd, flip, 1.3 / C2)
    fig, ax = period2_figure({"reduced": br})
    solid, dotted = ax.get_lines()[:2]
    np.testing.assert_allclose(dotted.get_xdata(), br.eta / flip.eta)
    np.testing.assert_allclose(dotted.get_ydata(), br.amplitude)
    assert np.isnan(solid.get_ydata()[~br.stable]).all()
    lands = {"(0.5, 1.5)": reduced_landing(0.5, 1.5, [1e-4, 1e-3, 3e-3], C1, C2),
             "(2, 2)": reduced_landing(2.0, 2.0, [1e-4, 1e-3, 3e-3], C1, C2)}
    fig, ax = landing_figure(lands)
    dots = ax.get_lines()[0]
    np.testing.assert_allclose(dots.get_ydata(), np.abs(lands["(0.5, 1.5)"].delta))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "GD from (0.5, 1.5)" in labels and "GD from (2, 2)" not in labels  # Δ0 = 0 stays 0


@pytest.fixture(scope="module")
def field2():
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.process import gaussian

    return make_field(FieldSpec("exact", gaussian(2, 1.0), 6))


def test_stability_figure(field2):
    from mesadyn.analysis.fixedpoint import balanced_point
    from mesadyn.analysis.gd_limits import stability_limits
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    fam = gaussian(2, 1.0)
    lim = stability_limits(field2, balanced_point(fam, 6), eta=0.04, constants=constants(fam, 6),
                           alphas=np.geomspace(0.3, 3, 9))
    fig, ax = stability_figure(lim)
    ys = np.concatenate([ln.get_ydata() for ln in ax.get_lines()[1:3]])
    np.testing.assert_allclose(np.sort(ys), np.sort([p.critical_step for p in lim.points]))
    assert len(ax.patches) == 1  # the stable part, shaded


def test_central_flow_figure(field2):
    from mesadyn.analysis.central_flow import compare_central
    from mesadyn.model import gaussian_init

    cmp = compare_central(field2, gaussian_init(2, 0.01, seed=1).numpy(), 0.05, 40)
    fig, axes = central_flow_figure(cmp)
    np.testing.assert_allclose(axes[0].get_lines()[2].get_ydata(), cmp.central.predicted_loss)
    np.testing.assert_allclose(axes[1].get_lines()[1].get_ydata(),
                               cmp.eta * cmp.central.sharpness)

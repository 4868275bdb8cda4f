"""The GD-against-flow figure draws what it is given: one solid and one dashed gap curve per
comparison, one bar per ratio, the spread points and their fit."""

from __future__ import annotations

import numpy as np

from mesadyn.analysis.gd_flow import compare_gd_flow
from mesadyn.field import FieldSpec, make_field
from mesadyn.model import diagonal_init
from mesadyn.plots.gdflow import gd_vs_flow
from mesadyn.process import gaussian


def test_gd_vs_flow_panels_hold_the_data():
    field = make_field(FieldSpec("exact", gaussian(2), 6))
    comp = compare_gd_flow(field, diagonal_init(2, 0.1, 0.1), 2e-3, 10, sharpness_every=0)
    spread = {"m": [100, 300, 1000], "spread": [0.3, 0.17, 0.1],
              "spread_se": [0.03, 0.02, 0.01],
              "fit": {"slope": -0.48, "slope_se_scaled": 0.05,
                      "log_amplitude": float(np.log(0.3) + 0.48 * np.log(100))}}
    fig, axes = gd_vs_flow({"exact": comp}, ratios=[("a", 80.0), ("b", 3.0)],
                           spreads={"d=2": spread})
    assert len(axes) == 3
    lines = axes[0].get_lines()
    g_flow, g_mod = comp.gap_curves()
    np.testing.assert_array_equal(lines[0].get_ydata(), g_flow[1:])
    np.testing.assert_array_equal(lines[1].get_ydata(), g_mod[1:])
    assert [p.get_width() for p in axes[1].patches] == [80.0, 3.0]
    fit_line = axes[2].get_lines()[-2]
    x, y = fit_line.get_xdata(), fit_line.get_ydata()
    assert np.isclose(np.log(y[-1] / y[0]) / np.log(x[-1] / x[0]), -0.48)

"""Ensemble figures: they draw what the rows hold (points per outcome, histogram counts)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from mesadyn.model import diagonal_init
from mesadyn.plots import save
from mesadyn.plots.ensemble import basins, escape_histogram


def _rows() -> xr.Dataset:
    th0 = np.stack([diagonal_init(2, a, b).numpy() for a, b in
                    [(0.1, 0.2), (-0.1, -0.3), (0.2, -0.1), (0.05, 0.05)]])
    return xr.Dataset({
        "theta0": (("traj", "param"), th0),
        "outcome": ("traj", np.array(["branch_plus", "branch_minus", "branch_mixed",
                                      "not_converged"])),
        "escape_time": ("traj", np.array([0.3, 0.35, np.nan, 0.4])),
        "escape_predicted": ("traj", np.array([0.31, 0.34, np.nan, 0.41])),
        "off_structure": ("traj", np.array([1e-9, 1e-8, 1e-7, 0.0])),
    })


def test_basins_one_point_per_start_coloured_by_outcome(tmp_path) -> None:
    fig, ax = basins(_rows(), ab_star=0.2)
    offsets = [c.get_offsets() for c in ax.collections]
    assert sum(len(o) for o in offsets) == 4 and len(offsets) == 4
    np.testing.assert_allclose(offsets[0][0], [0.1, 0.2])
    assert any(line.get_linestyle() == "--" for line in ax.get_lines())  # ab = ab*
    assert save(fig, tmp_path / "b.png").stat().st_size > 1000


def test_escape_histogram_counts(tmp_path) -> None:
    fig, ax = escape_histogram(_rows())
    heights = sum(p.get_height() for p in ax.patches if p.get_fill())
    assert heights == 3  # the finite measured escape times
    assert save(fig, tmp_path / "e.pdf").stat().st_size > 1000

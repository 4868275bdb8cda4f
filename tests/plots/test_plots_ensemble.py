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
    # the hyperbola ab = ab* is drawn only where it enters the view (|a|, |b| <= 0.315 here)
    assert not basins(_rows(), ab_star=0.2)[1].get_lines()
    fig, ax = basins(_rows(), ab_star=0.02)
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


def _sweep() -> tuple[list[float], dict[str, list[dict[str, float]]]]:
    from mesadyn.analysis.ensemble import wilson

    counts = {"branch_plus": [5, 9, 10], "dense": [5, 1, 0], "other": [0, 0, 0]}
    return [1e-2, 1e-4, 1e-6], {k: [wilson(c, 10).to_dict() for c in v]
                                for k, v in counts.items()}


def test_fractions_vs_sigma_draws_each_outcome_with_its_wilson_bars(tmp_path) -> None:
    from mesadyn.analysis.ensemble import wilson
    from mesadyn.plots.ensemble import fractions_vs_sigma

    sw, fr = _sweep()
    fig, ax = fractions_vs_sigma(sw, fr, title="gaussian")
    assert ax.get_xscale() == "log"
    labels = ax.get_legend_handles_labels()[1]
    assert len(labels) == 2  # "other" never occurs: left out
    lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    y = sorted(tuple(float(v) for v in ln.get_ydata()) for ln in lines)
    assert y == [(0.0, 0.1, 0.5), (1.0, 0.9, 0.5)]  # increasing σ_w: 1e-6, 1e-4, 1e-2
    # the error bars span exactly the Wilson interval of 9/10 at σ_w = 1e-4
    iv = wilson(9, 10)
    segs = [seg for c in ax.collections for seg in c.get_segments()]
    assert any(np.allclose(sorted(seg[:, 1]), [iv.low, iv.high]) for seg in segs)
    pdf = save(fig, tmp_path / "f.pdf")
    assert pdf.read_bytes()[:4] == b"%PDF"
    assert save(fig, tmp_path / "f.png").stat().st_size > 1000


def test_fractions_vs_sigma_bad_input() -> None:
    import pytest

    from mesadyn.errors import MesadynError
    from mesadyn.plots.ensemble import fractions_vs_sigma

    sw, fr = _sweep()
    with pytest.raises(MesadynError, match="sigma_w"):
        fractions_vs_sigma([0.0, 1e-4, 1e-6], fr)
    with pytest.raises(MesadynError, match="branch_plus"):
        fractions_vs_sigma(sw[:2], fr)

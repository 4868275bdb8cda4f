"""Eigenvalue branches drawn as branches: crossing eigenvalues stay two straight curves (the
run stores them sorted, which joined by index makes two kinks), ambiguous matches are points."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from mesadyn.plots.bifurcation import eigenvalue_diagram, track_eigenvalues

P = np.linspace(0.0, 1.0, 21)
#: Four eigenvalue curves: two crossing lines, a constant, a curve crossing zero.
CURVES = np.stack([P - 0.5, 0.5 - 1.5 * P, -2.0 + 0 * P, -3.0 + 2.0 * P**2], axis=1)


def _run(mu: np.ndarray) -> xr.Dataset:
    """A continuation run as the diagram reads it: the eigenvalues sorted at each point."""
    n = mu.shape[0]
    return xr.Dataset({"p": ("point", P[:n]), "point_branch": ("point", np.zeros(n, int)),
                       "reduced_eigenvalues": (("point", "rmode"), np.sort(mu, axis=1))},
                      attrs={"symbol": "sigma"})


def _matches(tracked: np.ndarray, curves: np.ndarray) -> list[int]:
    """Which curve each tracked column is (the one it equals at every point), -1 for none."""
    return [next((c for c in range(curves.shape[1])
                  if np.allclose(tracked[:, j], curves[:, c], atol=1e-12)), -1)
            for j in range(tracked.shape[1])]


def test_tracking_follows_crossing_eigenvalues():
    tracked, joined = track_eigenvalues(np.sort(CURVES, axis=1), linthresh=0.01)
    assert sorted(_matches(tracked, CURVES)) == [0, 1, 2, 3]
    assert joined.all()
    # the stored (sorted) columns are not the curves: joined by index they would kink
    assert -1 in _matches(np.sort(CURVES, axis=1), CURVES)


def test_diagram_draws_each_curve_unbroken():
    fig, ax = eigenvalue_diagram(_run(CURVES), linthresh=0.01)
    drawn = [ln for ln in ax.get_lines() if str(ln.get_gid()).startswith("eigenvalue-")]
    assert len(drawn) == 4
    ys = np.stack([np.asarray(ln.get_ydata(), float) for ln in drawn], axis=1)
    assert sorted(_matches(ys, CURVES)) == [0, 1, 2, 3]
    for ln in drawn:  # straight lines stay straight: no kink at the crossing
        x, y = np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)
        if np.allclose(np.diff(y, 2), 0.0, atol=1e-12):
            np.testing.assert_allclose(np.polyfit(x, y, 1)[0] * x + np.polyfit(x, y, 1)[1], y,
                                       atol=1e-12)
    colours = {ln.get_gid(): ln.get_color() for ln in drawn}
    assert len(set(colours.values())) == 2  # stable (blue) and positive somewhere (red)


def test_ambiguous_matches_are_points_without_lines():
    """Two eigenvalues that touch and part (a near-collision) cannot be told apart by
    continuity: there the diagram draws points, not a line through the guess."""
    touch = np.stack([0.3 + 0 * P, 0.3 - 2.0 * (P - 0.5) ** 2, -1.0 + 0 * P], axis=1)
    tracked, joined = track_eigenvalues(np.sort(touch, axis=1), linthresh=0.01)
    assert not joined.all()
    bad = np.flatnonzero(~joined.all(axis=1))
    assert np.all(np.abs(P[bad] - 0.5) <= 0.3)  # only around the touching point
    fig, ax = eigenvalue_diagram(_run(touch), linthresh=0.01)
    pts = [ln for ln in ax.get_lines() if str(ln.get_gid()).startswith("eigenvalue-points-")]
    assert pts and all(ln.get_linestyle() == "None" for ln in pts)
    broken = {}
    for ln in ax.get_lines():
        if str(ln.get_gid()).startswith("eigenvalue-") and ln not in pts:
            y = np.asarray(ln.get_ydata(), float)
            broken[float(np.nanmean(y)) > 0] = broken.get(float(np.nanmean(y)) > 0, False) \
                or bool(np.isnan(y).any())
    assert broken == {True: True, False: False}  # the touching pair is broken, the far one not
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "ambiguous match: points only" in labels


def test_nan_eigenvalues_are_never_joined():
    mu = np.sort(CURVES, axis=1)
    mu[7, 0] = np.nan
    _tracked, joined = track_eigenvalues(mu, linthresh=0.01)
    assert (~joined).sum() >= 1


@pytest.mark.parametrize("n", [1, 2])
def test_short_runs(n):
    tracked, joined = track_eigenvalues(np.sort(CURVES[:n], axis=1), linthresh=0.01)
    assert tracked.shape == (n, 4) and joined.shape == (n - 1, 4)


def test_diagram_text_inside_the_figure(figure_reader):
    fig, _ax = eigenvalue_diagram(_run(CURVES))
    assert figure_reader.outside_texts(fig) == []

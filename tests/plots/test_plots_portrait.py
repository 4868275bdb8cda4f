"""Geometry of the phase portrait: every drawn layer lies where Lemma 5.2's formulas say.

The drawn artists are read back by ``gid`` and checked against independent computations
(the field's Jacobian, an RK solve, the conserved quantity), and the rendered PNG's pixels are
sampled on the hyperbola and the saddle.  Low streamline density keeps these tests fast.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from mesadyn.errors import MesadynError
from mesadyn.plots import portrait, render, save
from mesadyn.plots._data import ab_path, project_theta
from mesadyn.plots.portrait import (
    PortraitWarning,
    clip_halfplane,
    hyperbola_branch,
    reduced_trajectory,
)
from mesadyn.process import gaussian, ones, sparse
from mesadyn.reduced import ReducedSystem
from mesadyn.theory import constants

FAST = {"density": 0.3, "grid": 32, "n_levels": 3}


@pytest.fixture(scope="module")
def drawn():
    fam = gaussian(5, 0.5)
    fig, ax = portrait(fam, 100, **FAST)
    return fam, ReducedSystem.from_family(fam, 100), fig, ax


def line(ax, gid):
    found = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    assert len(found) == 1, gid
    return np.asarray(found[0].get_xdata(), float), np.asarray(found[0].get_ydata(), float)


def test_fixed_hyperbola_both_branches(drawn):
    _, system, _, ax = drawn
    box = (*ax.get_xlim(), *ax.get_ylim())
    for gid, sign in (("hyperbola+", 1), ("hyperbola-", -1)):
        a, b = line(ax, gid)
        assert a.size > 100 and np.all(np.sign(a) == sign)
        np.testing.assert_allclose(a * b, system.c2 / system.c1, rtol=1e-12)
        # Theorem 4.1: every point of it is a fixed point of the field
        da, db = system.rhs(a, b)
        assert np.max(np.abs(da)) + np.max(np.abs(db)) < 1e-10 * system.c2 * box[1]
        # it spans the window: it reaches both the a- and the b-edge
        assert np.isclose(np.max(np.abs(a)), box[1]) and np.isclose(np.max(np.abs(b)), box[3])


def test_nullclines_are_zero_sets(drawn):
    _, system, _, ax = drawn
    a, b = line(ax, "nullcline-adot")
    np.testing.assert_array_equal(b, 0.0)
    grid = np.linspace(a.min(), a.max(), 51)
    assert np.all(system.rhs(grid, 0 * grid)[0] == 0.0)
    # ȧ changes sign across b = 0 away from the hyperbola (a genuine nullcline, not a tangency)
    eps = 1e-3
    assert np.all(np.sign(system.rhs(grid, eps)[0]) != np.sign(system.rhs(grid, -eps)[0]))
    a, b = line(ax, "nullcline-bdot")
    np.testing.assert_array_equal(a, 0.0)
    grid = np.linspace(b.min(), b.max(), 51)
    assert np.all(system.rhs(0 * grid, grid)[1] == 0.0)


def test_saddle_and_its_manifolds_match_the_jacobian(drawn):
    _, system, _, ax = drawn
    a, b = line(ax, "saddle")
    assert (a[0], b[0]) == (0.0, 0.0)
    mu, vec = np.linalg.eig(system.jacobian(0.0, 0.0))
    np.testing.assert_allclose(np.sort(mu.real), [-system.c2, system.c2], rtol=1e-12)
    for gid, target in (("stable-manifold", -system.c2), ("unstable-manifold", system.c2)):
        xa, xb = line(ax, gid)
        direction = np.array([xa[-1] - xa[0], xb[-1] - xb[0]])
        v = vec[:, np.argmin(np.abs(mu - target))].real
        cos = abs(direction @ v) / np.linalg.norm(direction) / np.linalg.norm(v)
        assert cos == pytest.approx(1.0, abs=1e-12)
        assert np.allclose(xb / np.where(xa == 0, 1, xa), np.sign(target), atol=1e-12)


def test_streamlines_follow_the_field(drawn):
    _, system, _, ax = drawn
    lc = [c for c in ax.collections if c.get_gid() == "streamlines"][0]
    segs = np.array(lc.get_segments())
    mid = segs.mean(axis=1)
    d = segs[:, 1] - segs[:, 0]
    u, v = system.rhs(mid[:, 0], mid[:, 1])
    norm = np.hypot(*d.T) * np.hypot(u, v)
    # away from the saddle, where the field vanishes and the direction is ill-defined
    ok = (norm > 0) & (np.hypot(*mid.T) > 0.05)
    cos = np.abs(d[ok, 0] * u[ok] + d[ok, 1] * v[ok]) / norm[ok]
    assert ok.sum() > 100 and np.min(cos) > 0.99
    # no streamline crawls along the fixed hyperbola (masked: its speed is zero)
    assert np.min(np.abs(mid[:, 0] * mid[:, 1] - system.ab_star)) > 1e-3
    # streamlines lie on level sets of the conserved a² − b² (it never changes along one)
    inv = segs[:, 1, 0] ** 2 - segs[:, 1, 1] ** 2 - (segs[:, 0, 0] ** 2 - segs[:, 0, 1] ** 2)
    assert np.quantile(np.abs(inv), 0.95) < 0.05


def test_level_sets_are_invariant_contours(drawn):
    _, _, _, ax = drawn
    cs = [c for c in ax.collections if c.get_gid() == "levels"][0]
    levels = cs.levels
    assert np.all(levels != 0) and np.allclose(levels, -levels[::-1])
    for level, path in zip(levels, cs.get_paths(), strict=True):
        v = path.vertices
        if len(v):
            np.testing.assert_allclose(v[:, 0] ** 2 - v[:, 1] ** 2, level, atol=2e-2)


def test_basins_split_on_the_stable_manifold(drawn):
    _, system, _, ax = drawn
    polys = {p.get_gid(): p.get_xy() for p in ax.patches if p.get_gid() in ("basin+", "basin-")}
    box = (*ax.get_xlim(), *ax.get_ylim())
    area = (box[1] - box[0]) * (box[3] - box[2])
    for gid, sign in (("basin+", 1), ("basin-", -1)):
        xy = polys[gid]
        assert np.all(sign * xy.sum(axis=1) >= -1e-12)
        x, y = xy[:, 0], xy[:, 1]
        shoelace = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
        assert shoelace == pytest.approx(area / 2, rel=1e-12)
    # measured: starts in each basin end on that basin's branch of the hyperbola
    rng = np.random.default_rng(0)
    for a0, b0 in rng.uniform(-2, 2, size=(12, 2)):
        sol = solve_ivp(lambda t, y: system.rhs(*y), (0, 5.0), [a0, b0], rtol=1e-9, atol=1e-12)
        a, b = sol.y[:, -1]
        assert np.sign(a) == np.sign(b) == np.sign(a0 + b0)
        assert a * b == pytest.approx(system.ab_star, rel=1e-4)


def test_trajectories_closed_form_against_rk(drawn):
    _, system, _, ax = drawn
    for k, (a0, b0) in enumerate(((0.1, 0.1), (0.5, 1.5), (2.0, 2.0))):
        a, b = line(ax, f"trajectory-{k}")
        assert (a[0], b[0]) == pytest.approx((a0, b0), abs=1e-12)
        np.testing.assert_allclose(a * a - b * b, a0 * a0 - b0 * b0, atol=1e-9)
        assert a[-1] * b[-1] == pytest.approx(system.ab_star, rel=2e-4)
    # the drawn closed form against an adaptive RK solve of Lemma 5.2's ODE

    def f(_t, y):
        return list(system.rhs(y[0], y[1]))

    tau = np.linspace(0, 0.3, 31)
    for a0, b0 in ((0.1, 0.1), (0.5, 1.5), (-1.2, 0.4), (0.7, -0.7)):
        ea, eb = reduced_trajectory(system, a0, b0, tau)
        sol = solve_ivp(f, (0.0, 0.3), [a0, b0], t_eval=tau, rtol=1e-11, atol=1e-13,
                        method="DOP853")
        np.testing.assert_allclose(ea, sol.y[0], atol=1e-8)
        np.testing.assert_allclose(eb, sol.y[1], atol=1e-8)


def test_helpers_geometry():
    box = (-1.0, 3.0, -2.0, 2.0)
    a, b = hyperbola_branch(0.5, box, 1)
    assert np.all((a >= box[0]) & (a <= box[1]) & (b >= box[2]) & (b <= box[3] + 1e-12))
    a, b = hyperbola_branch(0.5, box, -1)
    assert np.all(a >= -1.0 - 1e-12) and np.all(b >= -2.0 - 1e-12)
    assert hyperbola_branch(0.5, (0.5, 1, 0.5, 1), -1)[0].size == 0
    poly = clip_halfplane(box, 1)
    assert np.all(poly.sum(axis=1) >= -1e-12)


def test_insets_match_theory():
    fam = gaussian(5, 0.5)
    system = ReducedSystem.from_family(fam, 100)
    fig, ax = portrait(fam, 100, inset_ab=True, inset_pl=True, **FAST)
    side = [a for a in fig.axes if a is not ax and a.get_label() != "<colorbar>"]
    lines = {ln.get_gid(): ln for a in side for ln in a.get_lines()}
    assert lines["ab-star"].get_ydata()[0] == pytest.approx(system.ab_star, rel=1e-14)
    assert lines["ab-limit"].get_ydata()[0] == pytest.approx(
        fam.kappa1 / fam.kappa2, rel=1e-14)
    assert constants(fam, 100).ab_limit == pytest.approx(0.2 / 0.25)  # 1/(5σ²)
    # Lemma 5.4 holds with equality: the drawn ratio equals 2 c1 (a² + b²) along the path
    a, b = line(ax, "trajectory-0")
    tau_ab = lines["ab-0"].get_xdata()
    pl = lines["pl-0"]
    keep = np.isin(tau_ab, pl.get_xdata())
    aa, bb = a[1:][keep], b[1:][keep]
    np.testing.assert_allclose(pl.get_ydata(), 2 * system.c1 * (aa**2 + bb**2), rtol=1e-6)
    # and never below the floor 2 c1 |a0² − b0²| (here for (0.5, 1.5))
    floor = lines["pl-floor-1"].get_ydata()[0]
    assert floor == pytest.approx(2 * system.c1 * 2.0)
    assert np.all(lines["pl-1"].get_ydata() >= floor * (1 - 1e-9))


def test_full_flow_overlay_projection():
    d = 3
    rng = np.random.default_rng(1)
    theta = rng.normal(size=(7, 18 * d * d))
    a, b, s = project_theta(theta)
    import torch

    from mesadyn.model import ab as ab_of
    from mesadyn.model import block, unpack

    for k in range(7):
        W_KQ, W_PV = unpack(torch.as_tensor(theta[k]))
        assert a[k] == pytest.approx(torch.diagonal(block(W_KQ, 3, 2)).mean().item())
        assert b[k] == pytest.approx(torch.diagonal(block(W_PV, 1, 2)).mean().item())
        assert s[k] == pytest.approx(ab_of(torch.as_tensor(theta[k])).mean().item())
    fam = gaussian(d, 1.0)
    fig, ax = portrait(fam, 10, inits=[(0.3, 0.2)], full_flow={"theta": theta, "t": np.arange(7)},
                       gd=(np.array([0.1, 0.2]), np.array([0.3, 0.4])), **FAST)
    fa, fb = line(ax, "fullflow-0")
    np.testing.assert_allclose(fa, a)
    np.testing.assert_allclose(fb, b)
    ga, gb = line(ax, "gd-0")
    np.testing.assert_allclose(ga, [0.1, 0.2])
    # the zoom on the full flow's end point (Proposition 4.2 made visible)
    zoom = [c for c in ax.child_axes if c.get_gid() == "zoom"][0]
    za, zb = line(zoom, "zoom-fullflow-end")
    assert (za[0], zb[0]) == (a[-1], b[-1])
    lo, hi = zoom.get_xlim()
    assert lo < a[-1] < hi


def test_window_widens_for_outside_init():
    fam = gaussian(2, 1.0)
    with pytest.warns(PortraitWarning, match=r"init \(3.0, -4.0\) lies outside"):
        fig, ax = portrait(fam, 20, inits=[(3.0, -4.0)], window=2.0, **FAST)
    lo, hi = ax.get_xlim()
    assert lo == -hi and hi >= 4.0 and ax.get_ylim() == (lo, hi)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PortraitWarning)
        portrait(fam, 20, inits=[(1.0, 1.0)], window=2.0, **FAST)


def test_auto_window_contains_everything():
    fam = sparse(4, 2.0)
    fig, ax = portrait(fam, 30, inits=[(-3.3, 0.2), (0.1, 0.1)], **FAST)
    lo, hi = ax.get_xlim()
    assert hi >= 3.3 * 1.1 and lo == -hi


@pytest.mark.parametrize("bad", [
    {"inits": [(1.0,)]}, {"inits": [(float("nan"), 1.0)]}, {"density": 0}, {"grid": 3},
    {"window": -1.0}, {"window": (1, 0, 0, 1)}, {"width": "three"},
])
def test_bad_input(bad):
    with pytest.raises(MesadynError):
        portrait(gaussian(2, 1.0), 10, **{**FAST, **bad})


def test_bad_sources():
    with pytest.raises(MesadynError, match="needs the training length"):
        portrait(gaussian(2, 1.0))
    with pytest.raises(MesadynError, match="Family"):
        portrait("gaussian", 10)
    with pytest.raises(MesadynError, match="not found"):
        portrait(gaussian(2, 1.0), 10, full_flow="/nonexistent/run.nc", **FAST)
    with pytest.raises(MesadynError, match="mismatched"):
        ab_path((np.zeros(3), np.zeros(4)))


def test_reduced_system_source_and_ones():
    fig, ax = portrait(ReducedSystem(2.0, 1.0), inits=[(1.0, 0.2)], **FAST)
    a, b = line(ax, "hyperbola+")
    np.testing.assert_allclose(a * b, 0.5)
    fam = ones(5)
    fig, ax = portrait(fam, 100, **FAST)
    a, b = line(ax, "hyperbola+")  # Theorem 4.3: 1 / (1 + (d−1) H_{T−2} / (T−2))
    H = sum(1 / k for k in range(1, 99))
    np.testing.assert_allclose(a * b, 1 / (1 + 4 * H / 98), rtol=1e-12)


def test_rendered_pixels_show_the_hyperbola_and_saddle(drawn):
    """Image check: the PNG pixel at a hyperbola point is vermillion, the saddle's centre white."""
    import matplotlib.image as mpimg

    _, system, fig, ax = drawn
    png = render(fig, "png", dpi=100)
    img = mpimg.imread(io.BytesIO(png))[:, :, :3]
    h = img.shape[0]
    x0 = 1.6
    px, py = ax.transData.transform((x0, system.ab_star / x0))
    rgb = img[int(round(h - py)), int(round(px))]
    np.testing.assert_allclose(rgb, [0xD5 / 255, 0x5E / 255, 0x00], atol=0.08)
    px, py = ax.transData.transform((0.0, 0.0))
    np.testing.assert_allclose(img[int(round(h - py)), int(round(px))], [1, 1, 1], atol=0.08)


def test_deterministic_bytes(drawn, tmp_path):
    """Same inputs, same bytes: the same figure rendered twice and a fresh figure re-drawn."""
    _, _, fig, _ = drawn
    for fmt in ("svg", "png", "pdf"):
        assert render(fig, fmt, dpi=40) == render(fig, fmt, dpi=40), fmt
    again, _ = portrait(gaussian(5, 0.5), 100, **FAST)
    svg = render(fig, "svg")
    assert render(again, "svg") == svg
    out = save(again, tmp_path / "p.svg")
    assert out.read_bytes() == svg
    assert b"<dc:date>" not in svg


@pytest.mark.slow
def test_deterministic_across_processes(tmp_path):
    """Two interpreters with different hash seeds write byte-identical SVG, PNG and PDF."""
    import os
    import subprocess
    import sys

    code = ("import sys; from mesadyn.plots import portrait, save; from mesadyn.process import "
            "gaussian; fig, _ = portrait(gaussian(5, 0.5), 100); "
            "[save(fig, sys.argv[1] + '.' + f) for f in ('svg', 'png', 'pdf')]")
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", code, str(tmp_path / seed)], check=True, env=env)
    for f in ("svg", "png", "pdf"):
        assert (tmp_path / f"1.{f}").read_bytes() == (tmp_path / f"2.{f}").read_bytes(), f

"""The figure library: each figure draws what its inputs say, live or from a saved run."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from mesadyn.errors import MesadynError
from mesadyn.io import save_run
from mesadyn.model import diagonal_init
from mesadyn.plots import (
    ab_convergence,
    incontext_curves,
    jacobian_spectrum,
    loss_curves,
    render,
    spectra_panels,
    weight_heatmaps,
)
from mesadyn.process import gaussian
from mesadyn.reduced import ReducedSystem
from mesadyn.theory import constants


def _gid(ax, gid):
    found = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    assert len(found) == 1, gid
    return np.asarray(found[0].get_xdata()), np.asarray(found[0].get_ydata())


def _reduced_run(a0: float, b0: float, d: int = 2, T: int = 20, n: int = 30) -> xr.Dataset:
    """A run Dataset along the exact reduced flow embedded in θ (Assumption 3.1 coordinates)."""
    fam = gaussian(d, 1.0)
    system = ReducedSystem.from_family(fam, T)
    t = np.linspace(0.0, 0.05, n)
    a, b = system.solution(a0, b0, t)
    theta = np.stack([diagonal_init(d, float(x), float(y)).numpy()
                      for x, y in zip(a, b, strict=True)])
    loss = system.surrogate(a, b)
    return xr.Dataset({"theta": (("t", "param"), theta), "loss": ("t", loss)}, coords={"t": t})


def test_ab_convergence_live_and_saved(tmp_path):
    fam = gaussian(2, 1.0)
    runs = [_reduced_run(0.1, 0.1), _reduced_run(2.0, 2.0)]
    fig, ax = ab_convergence(runs, ["low", "high"], family=fam, T=20)
    c = constants(fam, 20)
    assert _gid(ax, "ab-star")[1][0] == pytest.approx(c.c2 / c.c1, rel=1e-14)
    assert _gid(ax, "ab-limit")[1][0] == pytest.approx(3 / 15)  # κ1/κ2 = 1/(5σ²)
    x, y = _gid(ax, "ab-1")
    a, b = ReducedSystem.from_family(fam, 20).solution(2.0, 2.0, x)
    np.testing.assert_allclose(y, a * b, rtol=1e-12)
    path = save_run(runs[1], tmp_path / "r.nc", kind="integrate", config={"a0": 2.0, "b0": 2.0})
    fig2, ax2 = ab_convergence([path], family=fam, T=20)
    np.testing.assert_allclose(_gid(ax2, "ab-0")[1], y)
    assert ax2.get_xlabel() == r"$\tau$"
    labels = [t.get_text() for t in fig2.legends[0].get_texts()]
    assert labels[0] == r"$(a_0,b_0)=(2,2)$"


def test_loss_curves_log_axis_and_values():
    run = _reduced_run(0.5, 1.5)
    fig, ax = loss_curves([run])
    assert ax.get_yscale() == "log"
    np.testing.assert_allclose(_gid(ax, "loss-0")[1], run["loss"].values)
    with pytest.raises(MesadynError, match="none of the fields"):
        loss_curves([xr.Dataset({"t": ("t", [0.0, 1.0])})])


def test_loss_curves_train_result_like():
    rec = {"step": np.arange(5), "train_loss": np.linspace(2, 1, 5),
           "test_loss": np.array([2.1, np.nan, np.nan, np.nan, 1.1])}
    fig, ax = loss_curves(rec)
    x, y = _gid(ax, "test-loss-0")
    np.testing.assert_array_equal(x, [0, 4])
    assert ax.get_xlabel() == "GD step"


def test_weight_heatmaps_blocks_and_centred_colormap(tmp_path):
    d = 3
    theta = diagonal_init(d, 0.7, -1.3).numpy()
    theta[5] = 0.2  # an inactive entry of W^KQ_11
    fig, axes = weight_heatmaps(theta)
    kq = axes[0].get_images()[0]
    pv = axes[1].get_images()[0]
    W_KQ = kq.get_array()
    np.testing.assert_allclose(W_KQ[2 * d : 3 * d, d : 2 * d], 0.7 * np.eye(d))
    np.testing.assert_allclose(pv.get_array()[0:d, d : 2 * d], -1.3 * np.eye(d))
    for im in (kq, pv):
        norm = im.norm
        assert norm.vcenter == 0.0 and norm.vmin == -norm.vmax
        assert norm(0.0) == pytest.approx(0.5)
        assert im.get_cmap().name == "RdBu_r"
    gids = {p.get_gid() for ax in axes for p in ax.patches}
    assert gids == {"active-KQ-22", "active-KQ-23", "active-KQ-32", "active-KQ-33",
                    "active-PV-12", "active-PV-13"}
    # from a saved run: the final θ of the stored trajectory
    ds = xr.Dataset({"theta": (("step", "param"), np.stack([0 * theta, theta]))})
    path = save_run(ds, tmp_path / "w.nc", kind="train", config={})
    fig2, axes2 = weight_heatmaps(str(path))
    np.testing.assert_array_equal(axes2[0].get_images()[0].get_array(), W_KQ)
    with pytest.raises(MesadynError, match="18"):
        weight_heatmaps(np.zeros(17))


def test_jacobian_spectrum_colours_by_dominant_block():
    mu = np.array([-3.0, 0.0, 2.0, -1e-3])
    weights = {"W_KQ_32": np.array([0.9, 0.0, 0.2, 0.1]),
               "W_PV_12": np.array([0.1, 0.0, 0.8, 0.0]),
               "W_KQ_11": np.array([0.0, 1.0, 0.0, 0.9])}
    fig, ax = jacobian_spectrum(mu, weights)
    assert _gid(ax, "spectrum-W_KQ_32")[1].tolist() == [-3.0]
    assert _gid(ax, "spectrum-W_PV_12")[1].tolist() == [2.0]
    assert sorted(_gid(ax, "spectrum-inactive")[1].tolist()) == [-1e-3, 0.0]
    assert ax.get_yscale() == "symlog"
    with pytest.raises(MesadynError, match="columns"):
        jacobian_spectrum(mu[:3], weights)


def test_spectra_panels_one_panel_per_point_with_zero_modes_apart():
    """Prop. 4.2's two spectra side by side: the zero modes are drawn as their own group."""
    from mesadyn.analysis.spectrum import classify
    from mesadyn.field import FieldSpec, make_field

    field = make_field(FieldSpec("exact", gaussian(1, 1.0), 5))
    theta = diagonal_init(1, 0.6, 0.7)
    sp = classify(field.hessian(theta).numpy(), theta.numpy(), field=field)
    fig, axes = spectra_panels({"first": sp, "second": sp})
    assert len(axes) == 2
    for ax in axes:
        xs, ys = _gid(ax, "spectrum-zero")
        assert len(xs) == sp.n_zero and np.all(ys == 0.0)
    with pytest.raises(MesadynError, match="at least one"):
        spectra_panels({})


def test_jacobian_spectrum_from_exact_hessian():
    """A real spectrum: the reduced flow's Jacobian embedded in θ, weights from eigenvectors."""
    from mesadyn.analysis.spectrum import block_weights

    d = 1
    H = np.zeros((18, 18))
    system = ReducedSystem(2.0, 1.0)
    a = 2 * np.sqrt(system.ab_star)
    b = system.ab_star / a
    J = system.jacobian(a, b)
    i_kq = 2 * 3 + 1  # d = 1: W^KQ_32 is row 2, column 1 of the 3×3 W^KQ
    i_pv = 9 + 0 * 3 + 1  # W^PV_12 is row 0, column 1 of W^PV (offset 9)
    idx = [i_kq, i_pv]
    H[np.ix_(idx, idx)] = -J
    mu, vec = np.linalg.eigh(-H)
    fig, ax = jacobian_spectrum(mu, block_weights(vec, d))
    drawn = [ln.get_ydata() for ln in ax.get_lines()
             if ln.get_gid() in ("spectrum-W_KQ_32", "spectrum-W_PV_12")]
    active = np.sort(np.concatenate(drawn))
    nonzero = active[np.abs(active) > 1e-12]
    np.testing.assert_allclose(nonzero, [np.linalg.eigvalsh(J).min()], rtol=1e-12)
    # on the hyperbola J = −c1 (b, a)(b, a)ᵀ: the fast mode is ∝ (b, a), mostly W^PV_12 (a > b)
    assert np.any(np.abs(_gid(ax, "spectrum-W_PV_12")[1]) > 1e-12)


def test_incontext_curves_errorbars():
    T = np.array([5, 10, 20, 40])
    r = np.array([0.25, 0.22, 0.21, 0.2])
    se = np.array([0.01, 0.005, 0.004, 0.002])
    mse = np.array([3.0, 2.0, 1.5, 1.2])
    fig, axes = incontext_curves(T, r, se, mse, mse / 10, theory=0.1919, limit=0.2,
                                 baseline=np.full(4, 5.0))
    cont = [c for c in axes[0].containers][0]
    line, caps, bars = cont
    np.testing.assert_array_equal(line.get_ydata(), r)
    seg = bars[0].get_segments()
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in seg], 2 * se)
    assert _gid(axes[0], "ratio-limit")[1][0] == 0.2
    assert axes[1].get_yscale() == "log"
    ds = xr.Dataset({"T_te": ("k", T), "ratio": ("k", r), "ratio_se": ("k", se)})
    fig1, ax1 = incontext_curves(ds)
    assert len(fig1.axes) == 1
    with pytest.raises(MesadynError, match="match"):
        incontext_curves(T, r[:3], se[:3])


def test_figures_are_deterministic():
    fig, _ = ab_convergence([_reduced_run(0.1, 0.1)])
    assert render(fig, "svg") == render(fig, "svg")
    fig2, _ = ab_convergence([_reduced_run(0.1, 0.1)])
    assert render(fig2, "png", dpi=50) == render(fig, "png", dpi=50)


def test_unreadable_run(tmp_path):
    bad = tmp_path / "bad.nc"
    bad.write_bytes(b"not netcdf")
    with pytest.raises(MesadynError, match="cannot read"):
        ab_convergence([str(bad)])
    with pytest.raises(MesadynError, match="not found"):
        loss_curves(str(tmp_path / "missing.nc"))


def test_render_caps_dpi_and_raster_size():
    """Issue 12: ``--dpi`` had no cap; a huge raster is refused before it is allocated."""
    from mesadyn.plots import MAX_DPI, MAX_PIXELS, check_raster_size
    from mesadyn.plots._style import new_figure, style

    with style():
        fig = new_figure(7.0, aspect=1.0)
    with pytest.raises(MesadynError, match="dpi"):
        render(fig, "png", dpi=MAX_DPI + 1)
    with pytest.raises(MesadynError, match="Mpixel"):
        render(fig, "png", dpi=1100)  # 7700 x 7700 px > 50 Mpixel
    assert (7.0 * 1000) ** 2 <= MAX_PIXELS  # the largest PNG that passes is still bounded
    assert render(fig, "png", dpi=40).startswith(b"\x89PNG")
    assert check_raster_size("p.pdf", 20.0, MAX_DPI) == MAX_DPI  # vector: no pixel budget
    with pytest.raises(MesadynError, match="Mpixel"):
        check_raster_size("p.png", 20.0, 600)
    with pytest.raises(MesadynError, match="aspect"):
        new_figure(3.0, aspect=5.0)


# ---- claims and keys: what a figure says is what it drew ---------------------------------
def _run_with_init(a0: float, b0: float) -> xr.Dataset:
    """A run as loaded from a file: the reduced flow, its config recording the init."""
    import json

    ds = _reduced_run(a0, b0)
    fam = gaussian(2, 1.0)
    ds.attrs["config"] = json.dumps({"init": "diagonal", "a0": a0, "b0": b0, "T": 20, "m": 300,
                                     "sigma_w": None, "family": fam.describe()})
    ds["train_loss"] = ds["loss"]
    return ds


PAPER_INITS = ((0.1, 0.1), (0.5, 1.5), (2.0, 2.0))


def test_one_colour_per_init_across_figures(figure_reader):
    """An init has the same colour in the portrait, ab_convergence and loss_curves."""
    from mesadyn.plots import INIT_COLOURS, DiagonalInit, portrait

    runs = [_run_with_init(a, b) for a, b in PAPER_INITS]
    fig_p, _ = portrait(gaussian(2, 1.0), 20, inits=PAPER_INITS, density=0.3, grid=32)
    fig_a, _ = ab_convergence(runs)
    fig_l, _ = loss_curves(runs)
    for k, init in enumerate(PAPER_INITS):
        want = INIT_COLOURS[DiagonalInit(*init)].lower()
        got = [figure_reader.colour(figure_reader.lines_by_gid(fig, gid)[gid])
               for fig, gid in ((fig_p, f"trajectory-{k}"), (fig_a, f"ab-{k}"),
                                (fig_l, f"loss-{k}"))]
        assert got == [want] * 3, (init, got)
    # and the order of the runs does not change them
    fig_r, _ = ab_convergence(runs[::-1])
    assert figure_reader.colour(figure_reader.lines_by_gid(fig_r, "ab-0")["ab-0"]) == \
        INIT_COLOURS[DiagonalInit(2.0, 2.0)].lower()


@pytest.mark.parametrize("draw", [ab_convergence, loss_curves])
def test_legend_keys_every_run_and_title_names_the_family(draw, figure_reader):
    runs = [_run_with_init(a, b) for a, b in PAPER_INITS]
    fig, ax = draw(runs)
    entries = figure_reader.legend_entries(fig)
    prefix = "ab-" if draw is ab_convergence else "loss-"
    lines = figure_reader.lines_by_gid(fig, prefix)
    for k, (a0, b0) in enumerate(PAPER_INITS):
        c = figure_reader.colour(lines[f"{prefix}{k}"])
        assert (rf"$(a_0,b_0)=({a0:g},{b0:g})$", c) in entries
    assert ax.get_title() == r"gaussian ($\sigma=1$), $d=2$, $T=20$, $m=300$"
    assert figure_reader.outside_texts(fig) == []


def test_theory_lines_keep_their_colours(figure_reader):
    from mesadyn.plots import OKABE_ITO

    fig, ax = ab_convergence([_run_with_init(0.5, 1.5)], family=gaussian(2, 1.0), T=20)
    lines = figure_reader.lines_by_gid(fig, "ab-")
    assert figure_reader.colour(lines["ab-star"]) == OKABE_ITO["vermillion"].lower()
    assert figure_reader.colour(lines["ab-0"]) != figure_reader.colour(lines["ab-star"])


def test_sources_are_typed(tmp_path):
    """A figure reads the known result types; any other object is refused by name (no
    attribute probing)."""
    import torch

    from mesadyn.plots import ab_path
    from mesadyn.train import train

    rec = train(gaussian(2, 1.0), 6, m=20, steps=3, lr=1e-3, a0=0.4, b0=0.6, eval_every=3)
    fig, ax = ab_convergence(rec)
    np.testing.assert_allclose(_gid(ax, "ab-0")[1], rec.ab_mean)
    assert [t.get_text() for t in fig.legends[0].get_texts()][0] == r"$(a_0,b_0)=(0.4,0.6)$"
    a, b, t = ab_path(rec)
    np.testing.assert_allclose(a, rec.kq_mean)
    th = weight_heatmaps(torch.as_tensor(rec.final_theta))[1][0].get_images()[0].get_array()
    assert th.shape == (6, 6)

    class Lookalike:
        theta = np.zeros((2, 18 * 4))
        ab_mean = np.zeros(2)
        step = np.arange(2)

    with pytest.raises(MesadynError, match="cannot draw from a Lookalike"):
        ab_convergence(Lookalike())
    with pytest.raises(MesadynError, match="cannot draw from a Lookalike"):
        ab_path(Lookalike())


def test_spectrum_note_and_zero_modes_are_drawn_inside(figure_reader):
    from mesadyn.analysis.spectrum import classify
    from mesadyn.field import FieldSpec, make_field

    field = make_field(FieldSpec("exact", gaussian(1, 1.0), 5))
    theta = diagonal_init(1, 0.6, 0.7)
    sp = classify(field.hessian(theta).numpy(), theta.numpy(), field=field)
    note = f"{sp.n_unstable} unstable, {sp.n_stable} stable, {sp.n_zero} zero modes"
    fig, ax = jacobian_spectrum(sp, title=r"gaussian ($\sigma=1$), $d=1$, $T=5$", loss="L_m",
                                note=note)
    xs, ys = _gid(ax, "spectrum-zero")
    assert len(xs) == sp.n_zero and np.all(ys == 0.0)
    assert "L_m" in ax.get_ylabel()
    assert [t.get_text() for t in ax.texts if t.get_gid() == "spectrum-note"] == [note]
    assert figure_reader.outside_texts(fig) == []


def test_incontext_line_at_the_point(figure_reader):
    T = np.array([5, 10, 20])
    r = np.array([0.18, 0.181, 0.182])
    fig, axes = incontext_curves(T, r, r / 50, r * 10, r / 10, theory=0.1919, limit=0.2,
                                 at_point=0.1823, title=r"gaussian ($\sigma=0.5$)")
    assert _gid(axes[0], "ratio-at-point")[1][0] == 0.1823
    labels = [lab for lab, _c in figure_reader.legend_entries(fig)]
    assert any("this $\\theta$" in lab for lab in labels)
    assert figure_reader.outside_texts(fig) == []


def test_every_text_inside_its_frame(figure_reader):
    """Long titles and labels: nothing is clipped at the figure's edge."""
    from mesadyn.analysis.spectrum import classify
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.plots import family_title

    fam = gaussian(1, 1.0)
    field = make_field(FieldSpec("exact", fam, 5))
    theta = diagonal_init(1, 0.6, 0.7)
    sp = classify(field.hessian(theta).numpy(), theta.numpy(), field=field)
    title = family_title(fam, T=5, m=500) + r", $(a_0,b_0)=(0.5,1.5)$, after 200 GD steps"
    for fig in (weight_heatmaps(diagonal_init(3, 0.7, -1.3).numpy(), title=title)[0],
                spectra_panels({"masked fixed point": sp, "released": sp}, title=title)[0],
                jacobian_spectrum(sp, title=family_title(fam, T=5))[0]):
        assert figure_reader.outside_texts(fig) == []

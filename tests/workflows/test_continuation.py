"""``workflows.continuation`` (``mesadyn continue``): run file, JSON, resume, bad input, CLI
skin and the bifurcation figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mesadyn.errors import MesadynError
from mesadyn.io import load_run, to_json
from mesadyn.workflows import continuation as wf

SMALL = {"d": 2, "T": 6, "parameter": "sigma", "start": 0.8, "stop": 1.2, "points": 8}


def theorem_41(d: int, T: int, s: float) -> float:
    k1, k2, k3 = 3 * s**4, 15 * s**6, 3 * (d - 1) * s**6
    return k1 / (k2 + k3 * math.fsum(1 / k for k in range(1, T - 1)) / (T - 2))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[wf.Result, Path]:
    out = tmp_path_factory.mktemp("cont") / "run.nc"
    return wf.run(wf.Config(**SMALL, out=str(out))), out


def test_run_file_and_json(small_run: tuple[wf.Result, Path]) -> None:
    res, out = small_run
    obj = json.loads(to_json(res.to_dict()))
    assert obj["status"] == "reached_end" and obj["n_branches"] == 1
    assert obj["n_points"] >= SMALL["points"] and obj["max_residual"] <= 1e-10
    assert obj["specials"] == [] and obj["n_symmetries"] == 1
    ds = load_run(out, wf.KIND)
    n = 18 * SMALL["d"] ** 2
    assert ds["theta"].shape == (obj["n_points"], n)
    assert ds["eigenvalues"].shape == (obj["n_points"], n)
    p = ds["p"].values
    assert p[0] == 0.8 and p[-1] == 1.2 and np.all(np.diff(p) > 0)
    star = np.array([theorem_41(SMALL["d"], SMALL["T"], s) for s in p])
    np.testing.assert_allclose(ds["ab_mean"].values, star, rtol=1e-10)
    assert ds["stable"].values.all()
    assert np.ptp(ds["invariant"].values) <= 1e-12  # the invariant gauge holds ‖A‖² − ‖P‖²
    assert not wf.checkpoint_path(out).exists()  # removed once the run file is written
    # the spectrum in the file is that of −∇²L: 12d² inactive zero modes + 1 symmetry mode
    assert (ds["n_zero"].values == 12 * SMALL["d"] ** 2 + 1).all()


def test_resume_after_interruption(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   small_run: tuple[wf.Result, Path], interrupt_after) -> None:
    monkeypatch.setattr(wf, "CHECKPOINT_SECONDS", 0.0)
    out = tmp_path / "run.nc"
    cfg = wf.Config(**SMALL, out=str(out))
    with pytest.raises(KeyboardInterrupt):
        wf.run(cfg, progress=interrupt_after(5))
    ck = wf.checkpoint_path(out)
    assert ck.is_file() and not out.exists()
    partial = load_run(ck, wf.KIND)
    assert 2 <= partial.sizes["point"] < small_run[0].to_dict()["n_points"]
    with pytest.raises(MesadynError, match="other options"):
        wf.run(wf.Config(**{**SMALL, "points": 9}, out=str(out), resume=True))
    res = wf.run(wf.Config(**SMALL, out=str(out), resume=True))
    assert res.resumed and res.status == "reached_end"
    # the same branch as the uninterrupted run, point for point
    full = small_run[0].branches[0]
    np.testing.assert_allclose(res.branches[0].p, full.p, rtol=0, atol=1e-13)
    np.testing.assert_allclose(res.branches[0].ab, full.ab, rtol=1e-12)


def test_discrete_T() -> None:
    res = wf.run(wf.Config(d=2, T=4, parameter="T", stop=7, points=4))
    b = res.branches[0]
    assert list(b.p) == [4, 5, 6, 7]
    for T, ab in zip(b.p, b.ab, strict=True):
        assert np.abs(ab - theorem_41(2, int(T), 1.0)).max() <= 1e-10


@pytest.mark.parametrize(("kw", "match"), [
    ({"parameter": "kurtosis"}, "unknown parameter 'kurtosis'"),
    ({"stop": -1.0}, "stop=-1.0 is outside the domain of sigma"),
    ({"stop": None}, "give the end of the range"),
    ({"parameter": "m4", "start": 3.0, "stop": 9.0}, "outside the domain of m4"),
    ({"parameter": "scale"}, "scale applies to the sparse family"),
    ({"resume": True}, "resume needs the run file"),
    ({"out": "run.txt"}, "must end in"),
    ({"points": 1}, "points must be >= 2"),
    ({"gauge": "none"}, "unknown gauge"),
    ({"start": 1.2}, "start and stop are both"),
])
def test_bad_config(kw: dict[str, object], match: str) -> None:
    with pytest.raises(MesadynError, match=match) as info:
        wf.Config(**{**SMALL, **kw})  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_start_not_near_a_fixed_point(tmp_path: Path) -> None:
    from mesadyn.model import diagonal_init

    pt = tmp_path / "far.npy"
    np.save(pt, diagonal_init(2, 2.0, 0.3).numpy())
    with pytest.raises(MesadynError, match="not near a fixed point"):
        wf.run(wf.Config(**SMALL, point=str(pt)))


def test_cli_skin(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from mesadyn.cli.continue_ import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps "continue" a sub-command
    r = CliRunner().invoke(app, ["continue", "--d", "2", "--T", "6", "--start", "0.9",
                                 "--stop", "1.0", "--points", "3", "--json"])
    assert r.exit_code == 0, r.output
    obj = json.loads(r.stdout)
    assert obj["status"] == "reached_end" and obj["parameter"] == "sigma"
    bad = CliRunner().invoke(app, ["continue", "--d", "2", "--stop", "-1", "--json"])
    assert isinstance(bad.exception, MesadynError)
    assert "outside the domain" in str(bad.exception)


def test_bifurcation_figures(small_run: tuple[wf.Result, Path], tmp_path: Path) -> None:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from mesadyn.plots import save
    from mesadyn.plots.bifurcation import (
        bifurcation_diagram,
        bifurcation_panels,
        eigenvalue_diagram,
    )

    res, out = small_run
    for what in ("ab", "offdiag", "loss"):
        fig, ax = bifurcation_diagram(out, what)
        assert isinstance(fig, Figure) and isinstance(ax, Axes)
        line = ax.get_lines()[0]
        np.testing.assert_allclose(line.get_xdata(), res.branches[0].p)
    fig, ax = eigenvalue_diagram(res.to_dataset())
    assert len(ax.get_lines()) >= res.branches[0].reduced_eigenvalues.shape[1]
    fig, axes = bifurcation_panels(out)
    a = save(fig, tmp_path / "a.png")
    b = save(bifurcation_panels(out)[0], tmp_path / "b.png")
    assert a.read_bytes() == b.read_bytes()  # deterministic
    with pytest.raises(MesadynError, match="unknown quantity"):
        bifurcation_diagram(out, "energy")
    # a located point is marked where it lies: a fold placed on the third point of the run
    ds = res.to_dataset().copy()
    j = 2
    ds = ds.drop_dims("special").assign(
        special_kind=("special", ["fold"]), special_p=("special", [float(ds["p"][j])]),
        special_theta=(("special", "param"), ds["theta"].values[j:j + 1]))
    fig, ax = bifurcation_diagram(ds, "ab")
    marks = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert len(marks) == 1
    assert marks[0].get_xdata()[0] == ds["p"].values[j]
    assert marks[0].get_ydata()[0] == pytest.approx(float(ds["ab_mean"][j]), rel=1e-12)


def test_a_sweep_runs_many_continuations(tmp_path: Path) -> None:
    """``mesadyn sweep`` can name the workflow: one continuation per grid point."""
    import xarray as xr

    from mesadyn.sweep.runner import run_sweep
    from mesadyn.sweep.spec import parse_spec

    spec = parse_spec({"name": "continuations", "workflow": "continuation", "mode": "product",
                       "options": {"x1": "gaussian", "parameter": "sigma", "start": 0.9,
                                   "stop": 1.1, "points": 3, "d": 2},
                       "axes": {"T": [5, 6]}})
    res = run_sweep(spec, tmp_path / "sweep", workers=0)
    assert res.failed == [] and res.n_points == 2
    with xr.open_dataset(res.dataset) as ds:
        assert list(ds["status"].values) == ["reached_end", "reached_end"]
        assert float(ds["max_residual"].max()) <= 1e-10

"""``workflows.continuation`` (``mesadyn continue``): run file, JSON, resume, bad input, CLI
skin and the bifurcation figures."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mesadyn.errors import MesadynError
from mesadyn.io import load_run, to_json
from mesadyn.workflows import continuation as wf

#: The conftest's ``interrupt_after(n)``: a progress callback raising KeyboardInterrupt at call n.
Interrupt = Callable[[int], Callable[[float], None]]
SMALL: dict[str, Any] = {"d": 2, "T": 6, "parameter": "sigma", "start": 0.8, "stop": 1.2,
                         "points": 8}


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
    ds = load_run(out, wf.Config.COMMAND)
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
                                   small_run: tuple[wf.Result, Path],
                                   interrupt_after: Interrupt) -> None:
    monkeypatch.setattr(wf, "CHECKPOINT_SECONDS", 0.0)
    out = tmp_path / "run.nc"
    cfg = wf.Config(**SMALL, out=str(out))
    with pytest.raises(KeyboardInterrupt):
        wf.run(cfg, progress=interrupt_after(5))
    ck = wf.checkpoint_path(out)
    assert ck.is_file() and not out.exists()
    partial = load_run(ck, wf.Config.COMMAND)
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



def test_run_file_carries_config_result_seed_and_version(
        small_run: tuple[wf.Result, Path]) -> None:
    from mesadyn.io import run_config, version

    res, out = small_run
    ds = load_run(out, wf.Config.COMMAND)
    assert run_config(ds) == wf.Config(**SMALL).run_config()
    assert "resume" not in run_config(ds) and "out" not in run_config(ds)
    assert json.loads(ds.attrs["result"]) == json.loads(to_json(res.to_dict()))
    assert ds.attrs["status"] == "reached_end" and ds.attrs["seed"] == 1
    assert ds.attrs["mesadyn_version"] == version()


@pytest.mark.parametrize("options", [
    {"x1": "shifted", "mu": 0.1, "parameter": "mu", "stop": 0.25},
    {"radius": 0.9, "parameter": "radius", "stop": 0.84},
])
def test_rerun_from_the_run_file_reproduces_the_numbers(tmp_path: Path,
                                                        options: dict[str, object]) -> None:
    """A data-model option other than the default is recorded, and ``Config.from_run``
    rebuilds the run from the file alone, to the same numbers."""
    from mesadyn.io import run_config
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    out = tmp_path / "run.nc"
    cfg = wf.Config(d=2, T=5, points=4, out=str(out), **options)  # type: ignore[arg-type]
    first = wf.run(cfg)
    assert first.ok and first.branches[0].p.size >= 4
    key = "mu" if "mu" in options else "radius"
    assert run_config(load_run(out, "continuation"))[key] == options[key]
    again = wf.Config.from_run(out)
    assert again == dataclasses.replace(cfg, out=None)
    second = wf.run(again)
    for a, b in zip(first.branches, second.branches, strict=True):
        for name in ("p", "ab", "loss", "eigenvalues", "offdiag_mass"):
            np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-10,
                                       atol=1e-300, err_msg=name)
    if key == "radius":  # the branch starts at the process's radius, on its own ab*
        assert first.start == 0.9
        star = constants(gaussian(2, 1.0), 5, radius=0.9).ab_star
        assert np.abs(first.branches[0].ab[0] - star).max() <= 1e-10 * star


def test_discrete_T_checkpoints_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            interrupt_after: Interrupt) -> None:
    monkeypatch.setattr(wf, "CHECKPOINT_SECONDS", 0.0)
    out = tmp_path / "t.nc"
    cfg = wf.Config(d=2, T=4, parameter="T", stop=8, points=5, out=str(out))
    full = wf.run(dataclasses.replace(cfg, out=None))
    with pytest.raises(KeyboardInterrupt):
        wf.run(cfg, progress=interrupt_after(3))
    partial = load_run(wf.checkpoint_path(out), wf.Config.COMMAND)
    assert list(partial["p"].values) == [4, 5, 6]  # saved before progress was told
    res = wf.run(dataclasses.replace(cfg, resume=True))
    assert res.resumed and res.status == "reached_end"
    assert list(res.branches[0].p) == list(full.branches[0].p) == [4, 5, 6, 7, 8]
    np.testing.assert_allclose(res.branches[0].ab, full.branches[0].ab, rtol=1e-12)
    assert not wf.checkpoint_path(out).exists()


def test_a_malformed_checkpoint_is_refused_in_one_line(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       interrupt_after: Interrupt) -> None:
    from mesadyn.io import run_config, save_run

    monkeypatch.setattr(wf, "CHECKPOINT_SECONDS", 0.0)
    out = tmp_path / "run.nc"
    cfg = wf.Config(**SMALL, out=str(out))
    with pytest.raises(KeyboardInterrupt):
        wf.run(cfg, progress=interrupt_after(3))
    ck = wf.checkpoint_path(out)
    ds = load_run(ck, wf.Config.COMMAND)
    save_run(ds.drop_vars("tangent"), ck, kind=wf.Config.COMMAND, config=run_config(ds),
             seed=cfg.seed)
    with pytest.raises(MesadynError, match="cannot resume: .*lacks tangent") as info:
        wf.run(dataclasses.replace(cfg, resume=True))
    assert "\n" not in str(info.value)


def test_the_outcome_decides_ok_and_the_exit_code(small_run: tuple[wf.Result, Path]) -> None:
    from mesadyn.outcome import Outcome

    assert small_run[0].ok and small_run[0].exit_code == 0
    res = wf.run(wf.Config(**SMALL, max_steps=2))
    assert res.status is Outcome.MAX_STEPS and not res.ok and res.exit_code == 1
    assert res.message == res.branches[0].message and "2 steps" in res.message
    assert res.to_dict()["status"] == "max_steps"

@pytest.mark.parametrize(("kw", "match"), [
    ({"parameter": "kurtosis"}, "unknown parameter 'kurtosis'"),
    ({"stop": -1.0}, "stop=-1.0 is outside the domain of sigma"),
    ({"stop": None}, "give the end of the range"),
    ({"parameter": "m4", "start": 3.0, "stop": 9.0}, "outside the domain of m4"),
    ({"parameter": "scale"}, "scale applies to the sparse family"),
    ({"resume": True}, "resume needs the run file"),
    ({"out": "run.txt"}, "ending in .nc"),
    ({"points": 1}, "points must be >= 2"),
    ({"gauge": "none"}, "unknown gauge"),
    ({"start": 1.2}, "start and stop are both"),
])
def test_bad_config(kw: dict[str, object], match: str) -> None:
    with pytest.raises(MesadynError, match=match) as info:
        wf.Config(**{**SMALL, **kw})
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


def test_cli_exit_code_follows_the_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose primary branch fails (here: its step budget) prints its JSON, then ends
    with RunFailed (exit 1) naming the outcome and the branch's message."""
    import typer
    from typer.testing import CliRunner

    from mesadyn.cli.continue_ import register
    from mesadyn.errors import RunFailed

    run = wf.run
    monkeypatch.setattr(wf, "run", lambda config, progress=None: run(
        dataclasses.replace(config, max_steps=1), progress))
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    r = CliRunner().invoke(app, ["continue", "--d", "2", "--T", "6", "--start", "0.9",
                                 "--stop", "1.0", "--points", "3", "--json"])
    assert isinstance(r.exception, RunFailed), r.output
    assert json.loads(r.stdout)["status"] == "max_steps"
    assert str(r.exception).startswith("max_steps: 1 steps without reaching")


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


def test_a_wide_range_reaches_its_end() -> None:
    """σ 0.5 → 100 failed at its start ('the corrector did not converge at p=0.5', once
    'singular'): the combined field was off by rounding amplified across the range, and the
    far end cannot be solved to an absolute 1e-11.  Now it reaches σ = 100 on Theorem 4.1's
    fixed point (ab* ∝ 1/σ²)."""
    res = wf.run(wf.Config(d=2, T=6, parameter="sigma", start=0.5, stop=100.0, points=40))
    assert res.status == "reached_end", res.message
    b = res.branches[0]
    np.testing.assert_allclose(b.ab_last, theorem_41(2, 6, 100.0), rtol=1e-8)
    assert b.p_last == 100.0 and b.unstable_points == 0


@pytest.mark.parametrize("parameter", ["m4", "m2"])
def test_a_pinned_moment_says_it_is_pinned(parameter: str) -> None:
    """Rademacher's m4 is pinned at m2² = 1 by its other moments (x² is constant): the refusal
    said 'outside the domain of m4: [1, 1)'; it now says why it cannot move."""
    with pytest.raises(MesadynError, match=rf"{parameter} of rademacher is pinned at 1 by its "
                                           "other moments"):
        wf.Config(x1="rademacher", d=2, T=6, parameter=parameter, start=1.0, stop=2.0)


def test_the_run_file_is_checked_when_the_run_starts(tmp_path: Path) -> None:
    """A sweep resolves ``out`` under its folder when the point runs, so a Config with an
    ``out`` in a folder that does not exist yet is valid; the run refuses it if it still does
    not exist then (it was refused at construction, against the working directory)."""
    cfg = wf.Config(**SMALL, out=str(tmp_path / "sub" / "c.nc"))
    with pytest.raises(MesadynError, match="does not exist"):
        wf.run(cfg)
    (tmp_path / "sub").mkdir()
    assert wf.run(cfg).ok


@pytest.mark.parametrize("field", ["switch", "detect", "resume"])
def test_flags_are_booleans(field: str) -> None:
    with pytest.raises(MesadynError, match=f"{field} must be true or false"):
        wf.Config(**SMALL, **{field: "no"})

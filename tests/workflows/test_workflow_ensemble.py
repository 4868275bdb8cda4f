"""``mesadyn.workflows.ensemble`` and ``mesadyn ensemble``: the summary against the rows,
Theorem 4.1's fixed point for gaussian, the run contract (the outcome combined from the rows,
the exit code, the run file rebuilt from itself, the one reuse rule), resumption from the run
file, the three kinds of start, and bad input as one line with exit code 2."""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pytest

from mesadyn import cli
from mesadyn.errors import MesadynError
from mesadyn.workflows import ensemble as wf

#: Loose tolerances for the tests of the run machinery (resume, sweep): ~10x fewer steps.
FAST = dict(rtol=1e-6, atol=1e-9, steady_tol=1e-6)
#: From diagonal (grid) starts dopri5 at rtol 1e-6 never gets max|∇L| below 1e-6 (it plateaus
#: near 1e-5 at its stability limit); rodas4 converges there in ~40 steps.
FAST_GRID = dict(FAST, method="rodas4")


def test_gaussian_ensemble_summary_and_resume(tmp_path) -> None:
    out = str(tmp_path / "ens.nc")
    cfg = wf.Config(d=2, T=6, n=6, sigma_w=1e-3, out=out)
    res = wf.run(cfg)
    ds = res.rows
    assert res.n == 6 and ds["theta"].shape == (6, 72) and not res.reused
    assert sum(v["count"] for v in res.fractions.values()) == 6
    conv = ds["status"].values == "converged"
    assert conv.all()
    # gaussian: every converged end point on ab = ab* and (nearly) diagonal
    assert np.max(np.abs(ds["ab"].values - res.ab_star)) < 1e-8
    assert set(ds["outcome"].values) <= {"branch_plus", "branch_minus", "branch_mixed"}
    # the conserved quantity held along each flow
    np.testing.assert_allclose(ds["invariant"].values, ds["invariant0"].values, atol=1e-9)
    assert res.escape["median_relative_error"] < 0.03
    again = wf.run(cfg)
    assert again.reused and again.to_dict()["fractions"] == res.to_dict()["fractions"]
    assert json.loads(json.dumps(res.to_dict()))["n"] == 6


def test_grid_and_file_starts(tmp_path) -> None:
    perturbed = wf.initial_points(wf.Config(d=2, T=6, init="grid", grid_a="0.5,2",
                                            grid_b="1.5", perturb=1e-3))
    grid = wf.Config(d=2, T=6, init="grid", grid_a="0.5,2", grid_b="1.5")
    pts = wf.initial_points(grid)
    assert pts.shape == perturbed.shape == (2, 72)
    assert 1e-5 < np.std(perturbed - pts) < 1e-2
    res = wf.run(grid)
    assert res.n == 2 and res.statuses == {"converged": 2}
    path = tmp_path / "starts.npy"
    np.save(path, pts)
    from_file = wf.run(wf.Config(d=2, T=6, init="file", init_file=str(path)))
    np.testing.assert_array_equal(from_file.rows["theta"].values, res.rows["theta"].values)


@pytest.mark.parametrize("kw,match", [
    (dict(n=0), "n must be >= 1"), (dict(sigma_w=0.0), "sigma_w"),
    (dict(sigma_w=-1.0), "sigma_w"), (dict(init="grid"), "the grid has no points"),
    (dict(init="file"), "init_file"), (dict(init="cube"), "unknown init"),
    (dict(grid_a="1,x", grid_b="1", init="grid"), "grid_a"), (dict(out="x.txt"), "netCDF"),
    (dict(perturb="x"), "perturb must be a number, got 'x'"), (dict(perturb=-1.0), "perturb"),
    (dict(steady_tol="x"), "steady_tol must be a number"), (dict(method="euler"), "method"),
])
def test_bad_config(kw, match) -> None:
    with pytest.raises(MesadynError, match=match):
        wf.Config(d=2, T=6, **kw)


def _cli(monkeypatch, capsys, args: list[str]) -> tuple[int, str, str]:
    try:
        cli.main(["ensemble", *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("args,match", [
    (["--n", "0"], "n must be >= 1"), (["--sigma-w", "0"], "sigma_w"),
    (["--init", "grid"], "no points"), (["--init", "file", "--init-file", "/nonexistent.npy"],
                                        "nonexistent"),
])
def test_cli_bad_input_exit_2(monkeypatch, capsys, tmp_path, args, match) -> None:
    code, out, err = _cli(monkeypatch, capsys, ["--d", "2", "--T", "6", *args, "--json"])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and match in err and "Traceback" not in err


def test_cli_unreadable_file_exit_2(monkeypatch, capsys, tmp_path) -> None:
    bad = tmp_path / "bad.npy"
    bad.write_text("not an array")
    code, _, err = _cli(monkeypatch, capsys, ["--d", "2", "--T", "6", "--init", "file",
                                              "--init-file", str(bad)])
    assert code == 2 and err.count("\n") == 1


def test_cli_json(monkeypatch, capsys) -> None:
    code, out, _ = _cli(monkeypatch, capsys, ["--d", "2", "--T", "6", "--n", "3", "--rtol",
                                              "1e-6", "--atol", "1e-9", "--json"])
    assert code == 0
    obj = json.loads(out)
    assert obj["n"] == 3 and obj["statuses"] == {"converged": 3}


def test_interrupted_run_keeps_its_chunks_and_continues_bit_identically(tmp_path) -> None:
    """A run stopped (Ctrl-C) in its second chunk keeps the first in the run file; run again it
    continues from the first missing row, and every stored variable equals a fresh run's."""
    from mesadyn.io import load_run

    out = str(tmp_path / "ens.nc")
    cfg = wf.Config(d=2, T=6, n=3, sigma_w=1e-3, chunk=2, out=out, **FAST)

    def stop_in_second_chunk(rows_done: float) -> None:
        if rows_done > 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wf.run(cfg, progress=stop_in_second_chunk)
    kept = load_run(out, kind="ensemble")
    assert kept.sizes["traj"] == 2 and kept.attrs["n_rows"] == 3
    seen: list[float] = []
    resumed = wf.run(cfg, progress=seen.append)
    assert resumed.rows_reused == 2 and not resumed.reused and resumed.n == 3
    assert seen[0] == 2 and seen[-1] == 3 and np.all(np.diff(seen) >= 0)
    fresh = wf.run(wf.Config(d=2, T=6, n=3, sigma_w=1e-3, chunk=2, **FAST))
    for name, var in fresh.rows.data_vars.items():
        np.testing.assert_array_equal(resumed.rows[name].values, var.values, err_msg=name)
    on_disk = load_run(out, kind="ensemble")
    np.testing.assert_array_equal(on_disk["theta"].values, fresh.rows["theta"].values)
    again = wf.run(cfg)
    assert again.reused and again.rows_reused == 3


def test_failing_chunk_says_where_and_keeps_the_rows_done(tmp_path, monkeypatch) -> None:
    import mesadyn.flow
    from mesadyn.io import load_run

    real = mesadyn.flow.integrate_batch
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real(*args, **kwargs)

    monkeypatch.setattr(mesadyn.flow, "integrate_batch", flaky)
    out = str(tmp_path / "ens.nc")
    cfg = wf.Config(d=2, T=6, n=3, sigma_w=1e-3, chunk=1, out=out, **FAST)
    with pytest.raises(MesadynError, match=r"stopped at row 1 of 3 \(RuntimeError: disk on fire\)"
                                            r".*keeps rows 0..0"):
        wf.run(cfg)
    assert load_run(out, kind="ensemble").sizes["traj"] == 1
    monkeypatch.setattr(mesadyn.flow, "integrate_batch", real)
    assert wf.run(cfg).rows_reused == 1


def test_changed_starts_or_chunk_recompute(tmp_path) -> None:
    """A stored run is kept only with the same configuration and the same starts."""
    pts = wf.initial_points(wf.Config(d=2, T=6, init="grid", grid_a="0.5,2", grid_b="1.5"))
    path, out = tmp_path / "starts.npy", str(tmp_path / "ens.nc")
    np.save(path, pts)
    cfg = wf.Config(d=2, T=6, init="file", init_file=str(path), out=out, **FAST_GRID)
    assert wf.run(cfg).rows_reused == 0
    np.save(path, pts[::-1])  # the file rewritten: same configuration, other starts
    assert wf.run(cfg).rows_reused == 0
    assert wf.run(cfg).rows_reused == 2
    assert wf.run(wf.Config(d=2, T=6, init="file", init_file=str(path), out=out,
                            chunk=1, **FAST_GRID)).rows_reused == 0


@pytest.mark.parametrize("device", ["gpu0", "", "cuda:x"])
def test_bad_device(device) -> None:
    with pytest.raises(MesadynError, match=f"unknown device {device!r}"):
        wf.Config(d=2, T=6, device=device)


def test_auto_device_is_resolved_by_the_one_policy() -> None:
    """``auto`` is resolved by :func:`mesadyn.device.resolve_device` (the run file records the
    device the run uses); the summary names the device the field ran on."""
    from mesadyn.device import resolve_device

    cfg = wf.Config(d=2, T=6, n=1, device="auto", **FAST)
    assert cfg.device == "auto" and cfg.run_config()["device"] == resolve_device("auto")
    assert cfg.torch_device == resolve_device("auto")
    assert wf.Config(d=2, T=6).torch_device == "cpu"  # the default everywhere


@pytest.mark.parametrize("device,match", [("gpu0", "unknown device"), ("cuda:7", "cuda")])
def test_cli_device_refused_in_one_line(monkeypatch, capsys, device, match) -> None:
    """A device string torch does not know, or one this machine lacks (the test machines have
    no 8th GPU), is one line and exit code 2, before any work."""
    code, out, err = _cli(monkeypatch, capsys, ["--d", "2", "--T", "6", "--n", "2",
                                                "--device", device, "--json"])
    assert code == 2 and out == "" and err.count("\n") == 1 and match in err


def test_cli_sigma_list_runs_one_ensemble_per_value(monkeypatch, capsys, tmp_path) -> None:
    out = tmp_path / "ens.nc"
    code, text, _ = _cli(monkeypatch, capsys, [
        "--d", "2", "--T", "6", "--n", "2", "--sigma-w", "1e-2,1e-3", "--rtol", "1e-6",
        "--atol", "1e-9", "--steady-tol", "1e-6", "--chunk", "1", "--out", str(out), "--json"])
    assert code == 0
    obj = json.loads(text)
    assert obj["sigma_w"] == [0.01, 0.001] and [r["n"] for r in obj["runs"]] == [2, 2]
    assert [r["solver"]["chunk"] for r in obj["runs"]] == [1, 1]
    assert obj["runs"][0]["solver"]["device"] == "cpu"
    assert (tmp_path / "ens-sigma_w0.001.nc").is_file()


def test_method_default_is_the_batched_flows_and_is_recorded(monkeypatch, capsys) -> None:
    from mesadyn.flow import DEFAULT_BATCH_METHOD

    cfg = wf.Config(d=2, T=6)
    assert cfg.method == DEFAULT_BATCH_METHOD and cfg.run_config()["method"] == "dopri5"
    with pytest.raises(MesadynError, match="unknown method 'euler'"):
        wf.Config(d=2, T=6, method="euler")
    code, text, _ = _cli(monkeypatch, capsys, [
        "--d", "2", "--T", "6", "--n", "2", "--method", "rodas4", "--rtol", "1e-6", "--atol",
        "1e-10", "--json"])
    assert code == 0
    obj = json.loads(text)
    assert obj["solver"]["solver"] == "batched:rodas4" and obj["solver"]["method"] == "rodas4"
    assert obj["statuses"] == {"converged": 2}


@pytest.mark.parametrize("method", ["dopri5", "rodas4"])
def test_thinned_trajectories_are_the_flow(method) -> None:
    """``n_save``: each row's saves at the common grid equal a one-row batched solve's (same
    method and tolerances) to 1e-12, its end point follows its last grid point before it, NaN
    pads the rest; and the saves follow the flow itself (scipy's LSODA at tight tolerances)."""
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.flow import integrate, integrate_batch

    cfg = wf.Config(d=2, T=6, n=3, sigma_w=1e-3, n_save=9, method=method, **FAST)
    res = wf.run(cfg)
    ds = res.rows
    tt, tth, t_row = ds["traj_t"].values, ds["traj_theta"].values, ds["t"].values
    assert tt.shape == (3, 9) and tth.shape == (3, 9, 72)
    grid = wf.save_grid(res.t_end, 9)
    assert grid[0] == 0.0 and grid[-1] == res.t_end and np.all(np.diff(grid) > 0)
    np.testing.assert_allclose(np.diff(np.log(grid[1:])), np.log(1e6) / 7, rtol=1e-12)
    field_ = make_field(FieldSpec("exact", cfg.family(), cfg.T))
    assert (ds["status"].values == "converged").all() and (t_row < res.t_end).all()
    for k in range(3):
        m = int(np.sum(grid < t_row[k]))
        # the grid points before the end, then the end point, then NaN
        np.testing.assert_array_equal(tt[k, :m], grid[:m])
        assert tt[k, m] == t_row[k] and np.isnan(tt[k, m + 1:]).all()
        np.testing.assert_array_equal(tth[k, m], ds["theta"].values[k])
        assert np.isfinite(tth[k, : m + 1]).all() and np.isnan(tth[k, m + 1:]).all()
        np.testing.assert_array_equal(tth[k, 0], ds["theta0"].values[k])
        one = integrate_batch(field_, ds["theta0"].values[k:k + 1], t_end=res.t_end,
                              rtol=cfg.rtol, atol=cfg.atol * cfg.sigma_w,
                              steady_tol=cfg.steady_tol, t_save=grid, method=method)
        # the same steps; the stopping time's last bits drift with the batch's rounding (the
        # accumulated step sizes), harmless at a steady state (|dθ/dτ| < steady_tol)
        assert one.n_accepted[0] == ds["n_accepted"].values[k]
        assert one.t[0] == pytest.approx(t_row[k], rel=1e-7)
        assert one.theta_saved is not None
        np.testing.assert_allclose(tth[k, :m], one.theta_saved[0, :m], rtol=0, atol=1e-12)
        np.testing.assert_allclose(tth[k, m], one.theta[0], rtol=0, atol=1e-12)
    # an independent solver at the grid points inside row 0's run (measured: 4e-8 at FAST's
    # rtol 1e-6, 1e-11 at the defaults)
    m = int(np.sum(grid < t_row[0]))
    ref = integrate(field_, ds["theta0"].values[0], t_end=float(grid[m - 1]),
                    solver="scipy:LSODA", rtol=1e-11, atol=1e-14, t_eval=grid[:m],
                    steady_tol=0)
    np.testing.assert_allclose(tth[0, :m], np.asarray(ref.theta), rtol=0, atol=1e-6)


def test_n_save_is_part_of_the_run_and_survives_the_resume(tmp_path) -> None:
    """A stored run without trajectories is not reused when they are asked for (and back);
    interrupted in its second chunk, the continued run's trajectories equal a fresh run's."""
    out = str(tmp_path / "ens.nc")
    plain = wf.Config(d=2, T=6, n=3, sigma_w=1e-3, chunk=2, out=out, **FAST)
    assert plain.run_config()["n_save"] == 0
    cfg = wf.Config(d=2, T=6, n=3, sigma_w=1e-3, chunk=2, out=out, n_save=5, **FAST)
    assert cfg.run_config()["n_save"] == 5 and plain.run_config() != cfg.run_config()
    without = wf.run(plain)
    assert "traj_t" not in without.rows

    def stop_in_second_chunk(rows_done: float) -> None:
        if rows_done > 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # recomputed from row 0, stopped in chunk 2
        wf.run(cfg, progress=stop_in_second_chunk)
    from mesadyn.io import load_run

    assert load_run(out, kind="ensemble")["traj_t"].shape == (2, 5)
    resumed = wf.run(cfg)
    assert resumed.rows_reused == 2 and resumed.to_dict()["solver"]["n_save"] == 5
    fresh = wf.run(wf.Config(d=2, T=6, n=3, sigma_w=1e-3, chunk=2, n_save=5, **FAST))
    for name, var in fresh.rows.data_vars.items():
        np.testing.assert_array_equal(resumed.rows[name].values, var.values, err_msg=name)
    assert fresh.rows["traj_theta"].shape == (3, 5, 72)
    # the summaries do not depend on the saves (the interpolant does not steer the steps)
    for name, var in without.rows.data_vars.items():
        np.testing.assert_array_equal(fresh.rows[name].values, var.values, err_msg=name)
    assert wf.run(cfg).reused


@pytest.mark.parametrize("value", [-1, 1, 2.5])
def test_bad_n_save(value) -> None:
    with pytest.raises(MesadynError, match="n_save"):
        wf.Config(d=2, T=6, n_save=value)


def test_cli_n_save(monkeypatch, capsys, tmp_path) -> None:
    code, out, err = _cli(monkeypatch, capsys, ["--d", "2", "--T", "6", "--n-save", "-1",
                                                "--json"])
    assert code == 2 and out == "" and err.count("\n") == 1 and "n_save" in err
    path = tmp_path / "ens.nc"
    code, text, _ = _cli(monkeypatch, capsys, [
        "--d", "2", "--T", "6", "--n", "2", "--rtol", "1e-6", "--atol", "1e-9",
        "--steady-tol", "1e-6", "--n-save", "4", "--out", str(path), "--json"])
    assert code == 0 and json.loads(text)["solver"]["n_save"] == 4
    from mesadyn.io import load_run

    assert load_run(path, kind="ensemble")["traj_theta"].shape == (2, 4, 72)


def test_a_contracting_rotation_ends_on_its_own_hyperbola() -> None:
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    res = wf.run(wf.Config(d=2, T=6, n=4, sigma_w=1e-2, radius=0.8, method="rodas4",
                           rtol=1e-7))
    c = constants(gaussian(2, 1.0), 6, radius=0.8)
    assert res.statuses == {"converged": 4}
    assert res.ab_star == pytest.approx(c.c2 / c.c1, rel=1e-14)
    assert res.ab_max_error_converged is not None and res.ab_max_error_converged < 1e-9
    assert res.ab_star != pytest.approx(wf.run(wf.Config(d=2, T=6, n=1, method="rodas4",
                                                         rtol=1e-7)).ab_star)


def test_every_process_option_is_in_the_run_configuration() -> None:
    # a run file at another token mean, moment sequence, mixture or radius is not reused
    base = wf.Config(x1="shifted", mu=0.5, d=2, T=6, n=2).run_config()
    assert base != wf.Config(x1="shifted", mu=1.0, d=2, T=6, n=2).run_config()
    assert base["radius"] == 1.0 and {"mu", "moments", "mixture"} <= set(base)


# ---- the run contract ---------------------------------------------------------------------------
#: Today's ``--json`` keys of one ensemble, with the contract's status, message and solver stats.
JSON_KEYS = {"family", "d", "T", "n", "init", "sigma_w", "ab_star", "t_end", "fractions",
             "statuses", "lambda_top", "top_mode", "escape", "off_structure_max_converged",
             "ab_max_error_converged", "n_inert", "off_inert_max", "n_flat", "solver", "reused",
             "rows_reused", "out", "status", "message", "solver_stats"}


def test_status_combines_the_rows_and_the_stats_count_them(tmp_path) -> None:
    """A converged ensemble is ``converged``; one whose rows all ran out of steps is
    ``max_steps`` (not ok), with ``statuses`` counting the rows; ``solver_stats`` adds the
    rows' step counts and the chunks' evaluations, and a resumed run reports a fresh run's."""
    from mesadyn.outcome import Outcome

    good = wf.run(wf.Config(d=2, T=6, n=3, sigma_w=1e-3, chunk=2, **FAST))
    assert set(good.to_dict()) == JSON_KEYS
    assert good.status is Outcome.CONVERGED and good.ok and good.exit_code == 0
    assert good.statuses == {"converged": 3} and good.message == "3 trajectories: 3 converged"
    stats, rows = good.solver_stats, good.rows
    assert stats.n_accepted == int(rows["n_accepted"].sum()) > 0
    assert stats.n_rejected == int(rows["n_rejected"].sum())
    assert stats.nfev == good.solver["nfev"] and stats.wall_s == good.solver["wall_s"]
    # dopri5 needs 6 evaluations per attempted step (FSAL: the 7th is the next step's 1st),
    # plus one at each start and the initial-step estimate's
    assert stats.nfev >= 6 * (stats.n_accepted + stats.n_rejected)
    bad = wf.run(wf.Config(d=2, T=6, n=3, sigma_w=1e-3, max_steps=3, **FAST))
    assert bad.status is Outcome.MAX_STEPS and not bad.ok and bad.exit_code == 1
    assert bad.statuses == {"max_steps": 3} and bad.to_dict()["status"] == "max_steps"
    assert bad.message == "3 of 3 trajectories failed (3 max_steps)"
    out = str(tmp_path / "ens.nc")
    cfg = wf.Config(d=2, T=6, n=3, sigma_w=1e-3, chunk=2, out=out, **FAST)

    def stop_in_second_chunk(rows_done: float) -> None:
        if rows_done > 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wf.run(cfg, progress=stop_in_second_chunk)
    resumed = wf.run(cfg)
    assert resumed.rows_reused == 2
    assert (resumed.solver_stats.nfev, resumed.solver_stats.n_accepted) == (stats.nfev,
                                                                           stats.n_accepted)


def test_cli_exit_code_is_the_results(monkeypatch, capsys) -> None:
    """Every trajectory out of steps: the JSON is printed, then exit 1 with the message."""
    code, out, err = _cli(monkeypatch, capsys, ["--d", "2", "--T", "6", "--n", "2",
                                                "--max-steps", "3", "--json"])
    obj = json.loads(out)
    assert code == 1 and obj["status"] == "max_steps" and obj["statuses"] == {"max_steps": 2}
    assert err.strip() == "mesadyn: max_steps: 2 of 2 trajectories failed (2 max_steps)"


def test_the_run_file_rebuilds_its_configuration(tmp_path) -> None:
    """A run file with non-default data-model options rebuilds its ``Config`` alone, and the
    rebuilt configuration gives the same numbers."""
    out = tmp_path / "ens.nc"
    cfg = wf.Config(x1="shifted", mu=0.3, radius=0.9, d=2, T=6, n=2, sigma_w=1e-2, seed=4,
                    method="rodas4", out=str(out), **FAST)
    first = wf.run(cfg)
    again = wf.Config.from_run(out)
    assert again == dataclasses.replace(cfg, out=None)
    second = wf.run(again)
    for name, var in first.rows.data_vars.items():
        np.testing.assert_array_equal(second.rows[name].values, var.values, err_msg=name)
    from mesadyn.io import load_run

    stored = load_run(out, kind="ensemble")
    assert json.loads(stored.attrs["result"])["fractions"] == first.to_dict()["fractions"]
    assert stored.attrs["status"] == "converged"


def test_a_stored_run_of_another_configuration_is_recomputed(tmp_path) -> None:
    out = str(tmp_path / "ens.nc")
    wf.run(wf.Config(d=2, T=6, n=2, sigma_w=1e-3, out=out, **FAST))
    other = wf.run(wf.Config(d=2, T=6, n=2, sigma_w=2e-3, out=out, **FAST))
    assert other.rows_reused == 0 and not other.reused
    assert wf.run(wf.Config(d=2, T=6, n=2, sigma_w=2e-3, out=out, **FAST)).reused
    forced = wf.run(wf.Config(d=2, T=6, n=2, sigma_w=2e-3, out=out, recompute=True, **FAST))
    assert forced.rows_reused == 0
    assert "recompute" not in forced.to_dict() and "recompute" not in wf.Config().run_config()


@pytest.mark.parametrize("damage", ["drop_outcome", "bad_status", "bad_total", "rows_format",
                                    "not_json"])
def test_a_malformed_stored_file_is_recomputed(tmp_path, damage) -> None:
    """A run file of this configuration whose rows are not whole is recomputed and
    overwritten, never an internal error."""
    from mesadyn.io import ENGINE, load_run

    out = tmp_path / "ens.nc"
    cfg = wf.Config(d=2, T=6, n=2, sigma_w=1e-3, out=str(out), **FAST)
    fresh = wf.run(cfg)
    ds = load_run(out, kind="ensemble")
    if damage == "drop_outcome":
        ds = ds.drop_vars("outcome")
    elif damage == "bad_status":
        ds["status"] = ("traj", np.array(["converged", "sideways"]))
    elif damage == "bad_total":
        ds.attrs["nfev"] = "many"
    elif damage == "rows_format":
        ds.attrs["rows_format"] = 2
    else:
        ds.attrs["config"] = "{not json"
    with warnings.catch_warnings():  # h5netcdf on invalid_netcdf (as io.save_run writes)
        warnings.simplefilter("ignore", UserWarning)
        ds.to_netcdf(out, engine=ENGINE, invalid_netcdf=True)  # provenance kept, rows damaged
    res = wf.run(cfg)
    assert res.rows_reused == 0
    np.testing.assert_array_equal(res.rows["theta"].values, fresh.rows["theta"].values)
    assert wf.run(cfg).reused  # the file was overwritten whole


def test_the_temporary_files_of_a_killed_run_are_removed(tmp_path) -> None:
    import os
    import socket

    out = tmp_path / "ens.nc"
    dead = tmp_path / f".ens.nc.{socket.gethostname()}-999999999.abc.tmp"
    old = tmp_path / ".ens.nc.otherhost-1.abc.tmp"
    for p in (dead, old):
        p.write_text("half a netCDF file")
    os.utime(old, (1_000_000_000, 1_000_000_000))
    keep = tmp_path / "notes.txt"
    keep.write_text("mine")
    wf.run(wf.Config(d=2, T=6, n=1, sigma_w=1e-3, out=str(out), **FAST))
    assert not dead.exists() and not old.exists() and keep.exists() and out.is_file()


@pytest.mark.parametrize("array,match", [
    (np.ones((2, 72)) * (1 + 1j), "complex"), (np.ones((2, 72), dtype=bool), "bool"),
    (np.full((2, 72), "0.5"), "<U3"),
])
def test_an_init_file_of_other_numbers_is_refused_not_cast(tmp_path, array, match) -> None:
    path = tmp_path / "starts.npy"
    np.save(path, array)
    with pytest.raises(MesadynError, match=f"must hold real numbers.*{match}"):
        wf.initial_points(wf.Config(d=2, T=6, init="file", init_file=str(path)))
    np.save(path, np.zeros((2, 72), dtype=np.int32))  # integers are real numbers: used as given
    assert wf.initial_points(wf.Config(d=2, T=6, init="file",
                                       init_file=str(path))).dtype == np.float64


def test_recompute_must_be_a_bool() -> None:
    with pytest.raises(MesadynError, match="recompute must be true or false, got recompute='no'"):
        wf.Config(d=2, T=6, recompute="no")

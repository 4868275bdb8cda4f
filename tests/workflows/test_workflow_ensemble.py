"""``mesadyn.workflows.ensemble`` and ``mesadyn ensemble`` (issue 15): the summary against the
rows, Theorem 4.1's fixed point for gaussian, resumption from the run file, the three kinds of
start, and bad input as one line with exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mesadyn import cli
from mesadyn.errors import MesadynError
from mesadyn.workflows import ensemble as wf


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
])
def test_bad_config(kw, match) -> None:
    with pytest.raises(MesadynError, match=match):
        wf.Config(d=2, T=6, **kw)


def _cli(monkeypatch, capsys, args: list[str]) -> tuple[int, str, str]:
    monkeypatch.setitem(cli.COMMANDS, "ensemble", ("ensemble", "Ensembles of full flows."))
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
    code, out, _ = _cli(monkeypatch, capsys, ["--d", "2", "--T", "6", "--n", "3", "--json"])
    assert code == 0
    obj = json.loads(out)
    assert obj["n"] == 3 and obj["statuses"] == {"converged": 3}

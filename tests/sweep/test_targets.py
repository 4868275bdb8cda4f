"""What a sweep runs: its targets are the registry's workflows (``ensemble`` among them), a
workflow point's identity is its validated ``Config``'s hash, and a point's record carries
its outcome (``ok``, a workflow's failing outcome with its result, ``failed`` when it raised)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mesadyn.errors import MesadynError
from mesadyn.outcome import Outcome
from mesadyn.sweep import load_sweep, parse_spec, read_records, run_sweep
from mesadyn.sweep._targets import point_hash, workflow_names
from mesadyn.workflows import REGISTRY, RunOptions
from mesadyn.workflows import ensemble as ensemble_wf
from mesadyn.workflows import theory as theory_wf

#: A small ensemble: n = 2 trajectories at d = 2, T = 6, at loose tolerances.
ENSEMBLE = {"d": 2, "T": 6, "n": 2, "rtol": 1e-6, "atol": 1e-9, "steady_tol": 1e-6}


def test_the_targets_are_the_registry() -> None:
    assert workflow_names() == tuple(REGISTRY) and "ensemble" in workflow_names()
    for name, w in REGISTRY.items():  # a workflow is named by its name or its command
        assert parse_spec({"workflow": name, "axes": {"T": [6]}}
                          | ({"options": {"parameter": "sigma", "stop": 1.1}}
                             if name == "continuation" else {})).target == f"workflow:{name}"
        if w.command != name:
            assert parse_spec({"workflow": w.command, "options": {"parameter": "sigma",
                                                                  "stop": 1.1},
                               "axes": {"T": [6]}}).target == f"workflow:{name}"
    with pytest.raises(MesadynError, match="unknown workflow 'ensembles'; choose one of "
                                           + ", ".join(REGISTRY)):
        parse_spec({"workflow": "ensembles", "axes": {"T": [6]}})


def test_a_sweep_over_ensembles_runs(tmp_path: Path) -> None:
    """Two σ_w, one ensemble each: the merged Dataset holds each ensemble's summary, equal to
    the workflow run alone; a failing ensemble is recorded with its outcome and its numbers."""
    spec = parse_spec({"workflow": "ensemble", "options": ENSEMBLE | {"out": "ens{sigma_w}.nc"},
                       "axes": {"sigma_w": [1e-2, 1e-3]}})
    res = run_sweep(spec, tmp_path / "out", workers=0)
    assert res.failed == [] and res.computed == 2 and res.status is Outcome.OK
    ds = load_sweep(tmp_path / "out")
    assert list(ds["point_status"].values) == ["ok", "ok"]
    for sw in (1e-2, 1e-3):
        one = ensemble_wf.run(ensemble_wf.Config(**ENSEMBLE, sigma_w=sw)).to_dict()
        at = ds.sel(sigma_w=sw)
        assert at["status"].item() == one["status"] == "converged"
        for basin, iv in one["fractions"].items():
            assert at[f"fractions.{basin}.count"].item() == iv["count"]
        assert at["escape.measured_median"].item() == one["escape"]["measured_median"]
        assert (tmp_path / "out" / f"ens{sw}.nc").is_file()
    failing = parse_spec({"workflow": "ensemble", "options": ENSEMBLE | {"sigma_w": 1e-3},
                          "axes": {"max_steps": [3, 100_000]}})
    res = run_sweep(failing, tmp_path / "failing", workers=0)
    assert res.status is Outcome.MAX_STEPS and res.exit_code == 1
    assert [f["point"] for f in res.failed] == ["max_steps=3"]
    assert res.failed[0]["error"] == "2 of 2 trajectories failed (2 max_steps)"
    ds = load_sweep(tmp_path / "failing")
    assert list(ds["point_status"].values) == ["max_steps", "ok"]
    assert list(ds["statuses.max_steps"].values[:1]) == [2]  # the failing run's numbers kept
    assert ds.attrs["n_failed"] == 1
    again = run_sweep(failing, tmp_path / "failing", workers=0, retry_failed=False)
    assert again.computed == 0 and again.status is Outcome.MAX_STEPS


def test_a_point_is_its_configs_hash(tmp_path: Path, monkeypatch) -> None:
    """A workflow point's hash is ``Config.config_hash`` with its unrecorded options: the same
    configuration spelled two ways is one point, another output path or another mesadyn
    version another one; old records stay readable and are reported as stale."""
    spec = parse_spec({"workflow": "ensemble", "options": ENSEMBLE,
                       "axes": {"device": ["cpu", " CPU"]}})
    a, b = spec.points()
    config = ensemble_wf.Config(**a.options)
    assert isinstance(config, RunOptions) and a.options != b.options
    assert a.hash == b.hash == config.config_hash(
        "workflow:ensemble", {"out": None, "recompute": False, "force": False})
    assert a.hash == point_hash("workflow:ensemble", a.options, config)
    theory = parse_spec({"workflow": "theory", "axes": {"T": [6]}}).points()[0]
    assert theory.hash == theory_wf.Config(T=6).config_hash("workflow:theory", {"out": None})
    written = parse_spec({"workflow": "theory", "options": {"out": "c{T}.nc"},
                          "axes": {"T": [6]}}).points()[0]
    assert written.hash != theory.hash
    one = parse_spec({"workflow": "theory", "axes": {"T": [6, 7]}})
    run_sweep(one, tmp_path / "o", workers=0)
    import mesadyn.io
    from mesadyn.sweep import runner

    real = mesadyn.io.version()
    monkeypatch.setattr(mesadyn.io, "version", lambda: "99.0")
    monkeypatch.setattr(runner, "version", lambda: "99.0")
    later = parse_spec({"workflow": "theory", "axes": {"T": [6, 7]}})
    res = run_sweep(later, tmp_path / "o", workers=0)
    assert res.computed == 2 and res.skipped == 0
    assert [s["reason"] for s in res.stale] == [f"written by mesadyn {real}, this is 99.0"] * 2


def test_old_records_with_ok_and_failed_stay_readable(tmp_path: Path) -> None:
    """Records hold Outcome values; the words written before (``ok``/``failed``) are members."""
    spec = parse_spec({"workflow": "theory", "axes": {"T": [6, 7]}})
    out = tmp_path / "o"
    run_sweep(spec, out, workers=0)
    files = sorted((out / "points").glob("*.json"))
    recs = [json.loads(f.read_text()) for f in files]
    assert {r["status"] for r in recs} == {Outcome.OK.value}
    old = dict(recs[1], status="failed", error="ValueError: from an older sweep")
    old.pop("result")
    files[1].write_text(json.dumps(old))
    assert {r["status"] for r in read_records(out).values()} == {"ok", "failed"}
    res = run_sweep(spec, out, workers=0)  # the failed one is retried
    assert res.corrupt == [] and res.computed == 1 and res.status is Outcome.OK
    files[0].write_text(json.dumps(dict(recs[0], status="sideways")))
    res = run_sweep(spec, out, workers=0)
    assert [c["reason"] for c in res.corrupt] == ["unknown status 'sideways'"]
    files[0].write_text(json.dumps(dict(recs[0], status="converged", result=[1])))
    assert "without a result object" in run_sweep(spec, out, workers=0).corrupt[0]["reason"]
    assert np.all(load_sweep(out)["point_status"].values == "ok")

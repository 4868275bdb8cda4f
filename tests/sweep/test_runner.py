"""Running sweeps: a 2-worker local cluster, resuming, failures, stale points, bad schedulers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mesadyn.errors import MesadynError
from mesadyn.sweep import load_sweep, read_records, run_sweep
from mesadyn.sweep import parse_spec as _parse_spec
from mesadyn.workflows import integrate as integrate_wf
from mesadyn.workflows import theory as theory_wf

HERE = Path(__file__).resolve().parent
CMD = "sweep_fixture_cmds:counted"


def parse_spec(raw: dict, **kw):
    """The test specs name test functions (``sweep_fixture_cmds``): opt in to running code."""
    return _parse_spec(raw, allow_code=True, **kw)


def _theory(**options) -> dict:
    return theory_wf.run(theory_wf.Config(**options)).to_dict()


def _log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_own_local_cluster_of_two(tmp_path: Path) -> None:
    """``workers=2`` starts (and closes) a LocalCluster of 2 worker processes."""
    spec = parse_spec({"command": CMD, "axes": {"x": [1, 2, 3, 4], "y": [1, 2]}})
    res = run_sweep(spec, tmp_path / "out", workers=2)
    assert (res.n_points, res.computed, res.failed, res.workers) == (8, 8, [], 2)
    assert res.scheduler == "local"
    pids = {rec["pid"] for rec in res.records.values()}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    ds = load_sweep(tmp_path / "out")
    for x in (1, 2, 3, 4):
        for y in (1.0, 2.0):
            assert ds["prod"].sel(x=x, y=y).item() == x * y


def test_local_cluster_of_two_matches_points_one_by_one(tmp_path: Path, client) -> None:
    """Merged Dataset (dims, coords, values) == the theory workflow run point by point."""
    spec = parse_spec({"command": "theory",
                       "options": {"x1": "gaussian"},
                       "axes": {"T": [3, 10, 1000], "d": [1, 5], "sigma": [0.5, 2]}})
    res = run_sweep(spec, tmp_path / "out", client=client)
    assert (res.n_points, res.computed, res.skipped, res.failed) == (12, 12, 0, [])
    assert res.workers == 2
    pids = {rec["pid"] for rec in res.records.values()}
    assert os.getpid() not in pids  # ran on the worker processes
    ds = load_sweep(tmp_path / "out")
    assert ds.attrs["kind"] == "sweep"
    assert tuple(ds["ab_star"].dims) == ("T", "d", "sigma")
    assert ds.sizes == {"T": 3, "d": 2, "sigma": 2}
    assert list(ds["T"].values) == [3, 10, 1000] and list(ds["sigma"].values) == [0.5, 2.0]
    assert "d_result" not in ds and "T_result" not in ds  # echoes of the axes dropped
    for T in (3, 10, 1000):
        for d in (1, 5):
            for sigma in (0.5, 2.0):
                one = _theory(x1="gaussian", sigma=sigma, d=d, T=T)
                at = ds.sel(T=T, d=d, sigma=sigma)
                for key in ("kappa1", "kappa2", "kappa3", "c1", "c2", "ab_star", "ratio"):
                    assert at[key].item() == one[key], (key, T, d, sigma)
                assert at["family"].item() == one["family"]
                assert bool(at["assumption_4_1"]) is one["assumption_4_1"]
                assert at["point_status"].item() == "ok"


@pytest.mark.slow
def test_integrate_reduced_sweep_matches_one_by_one_and_theorem(tmp_path: Path) -> None:
    """`integrate --reduced` points: merged == the workflow one by one; ab -> Theorem 4.1."""
    spec = parse_spec({"command": "integrate --reduced",
                       "options": {"x1": "gaussian", "d": 2, "n_save": 20},
                       "mode": "zip", "axes": {"a0": [0.3, 1.0], "b0": [0.6, 1.0],
                                               "T": [10, 100]}})
    res = run_sweep(spec, tmp_path / "out", workers=0)
    assert res.computed == 2 and not res.failed
    ds = load_sweep(tmp_path / "out")
    for i, (a0, b0, T) in enumerate([(0.3, 0.6, 10), (1.0, 1.0, 100)]):
        one = integrate_wf.run(integrate_wf.Config(reduced=True, x1="gaussian", d=2, T=T, a0=a0,
                                                   b0=b0, n_save=20)).to_dict()
        at = ds.isel(point=i)
        for key in ("a", "b", "ab", "ab_theory", "nfev"):
            assert at[key].item() == one[key], key
        star = _theory(x1="gaussian", d=2, T=T)["ab_star"]
        assert abs(at["ab"].item() - star) < 1e-7 * star


def test_values_types_and_zip(tmp_path: Path, client) -> None:
    spec = parse_spec({"command": CMD, "mode": "zip",
                       "axes": {"x": [1, 2, 3], "y": [0.5, 1.5, 2.5]}})
    res = run_sweep(spec, tmp_path / "out", client=client)
    assert res.computed == 3 and not res.failed
    ds = load_sweep(tmp_path / "out")
    assert ds["prod"].dims == ("point",)
    np.testing.assert_array_equal(ds["x"].values, [1, 2, 3])  # coordinate along point
    np.testing.assert_array_equal(ds["prod"].values, [0.5, 3.0, 7.5])
    assert ds["nested.sq"].dtype == np.int64
    np.testing.assert_array_equal(ds["nested.sq"].values, [1, 4, 9])
    assert ds["even"].dtype == bool and list(ds["even"].values) == [False, True, False]
    assert list(ds["label"].values) == ["a1", "a2", "a3"]
    assert ds["vec"].dims == ("point", "vec_dim0")
    np.testing.assert_array_equal(ds["vec"].values[2], [3, 2.5, 7.5])
    # lists of different lengths are padded with NaN
    np.testing.assert_array_equal(ds["ragged"].values,
                                  [[0, np.nan, np.nan], [0, 1, np.nan], [0, 1, 2]])


def test_failures_recorded_and_sweep_goes_on(tmp_path: Path, client) -> None:
    log = tmp_path / "log.jsonl"
    raw = {"command": CMD, "options": {"log": str(log), "fail_on": 2},
           "axes": {"x": [1, 2, 3, 4]}}
    res = run_sweep(parse_spec(raw), tmp_path / "out", client=client)
    assert res.computed == 4
    assert [f["point"] for f in res.failed] == ["x=2"]
    assert res.failed[0]["error"] == "ValueError: injected failure at x=2"
    ds = load_sweep(tmp_path / "out")
    assert list(ds["point_status"].values) == ["ok", "failed", "ok", "ok"]
    assert np.isnan(ds["prod"].values[1]) and ds["prod"].values[2] == 3.0
    assert ds["label"].values[1] == "" and ds.attrs["n_failed"] == 1
    # --keep-failed: nothing recomputed; default: only the failed point is retried
    again = run_sweep(parse_spec(raw), tmp_path / "out", workers=0, retry_failed=False)
    assert again.computed == 0 and len(again.failed) == 1
    raw["options"]["fail_on"] = -1  # the spec changed: every point is now a new point
    res3 = run_sweep(parse_spec(raw), tmp_path / "out", workers=0)
    assert res3.spec_changed and res3.computed == 4 and res3.skipped == 0
    assert sorted(s["point"] for s in res3.stale) == ["x=1", "x=2", "x=3", "x=4"]
    assert "fail_on 2 -> -1" in res3.stale[0]["reason"]


def test_string_axis_and_independent_values(tmp_path: Path) -> None:
    """A string axis becomes a string coordinate; κ's match the moment table of docs/design.md."""
    spec = parse_spec({"command": "theory", "axes": {"x1": ["gaussian", "rademacher",
                                                            "uniform"], "d": [1, 4]}})
    run_sweep(spec, tmp_path / "out", workers=0)
    ds = load_sweep(tmp_path / "out")
    assert list(ds["x1"].values) == ["gaussian", "rademacher", "uniform"]
    # κ3 = (d−1) m2 m4 for iid families: gaussian σ=1 (1, 3), rademacher (1, 1), uniform (1/3, 1/5)
    m2m4 = {"gaussian": 3.0, "rademacher": 1.0, "uniform": 1 / 15}
    for name, v in m2m4.items():
        assert ds["kappa3"].sel(x1=name, d=4).item() == pytest.approx(3 * v, rel=1e-14)
        assert ds["kappa3"].sel(x1=name, d=1).item() == 0.0


def test_non_dict_result_is_a_failure(tmp_path: Path) -> None:
    spec = parse_spec({"command": "sweep_fixture_cmds:not_a_dict", "axes": {"x": [1]}})
    res = run_sweep(spec, tmp_path / "out", workers=0)
    assert res.failed[0]["error"].startswith("TypeError: sweep_fixture_cmds:not_a_dict returned")


def test_resume_skips_done_points_and_names_stale(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    raw = {"command": CMD, "options": {"log": str(log)}, "axes": {"x": [1, 2, 3], "y": [1, 2]}}
    first = run_sweep(parse_spec(raw), tmp_path / "out", workers=0)
    assert first.computed == 6 and len(_log(log)) == 6
    same = run_sweep(parse_spec(raw), tmp_path / "out", workers=0)
    assert (same.computed, same.skipped, same.stale, same.spec_changed) == (0, 6, [], False)
    assert len(_log(log)) == 6  # nothing computed twice
    raw["axes"] = {"x": [2, 3, 4], "y": [1, 2]}  # drop x=1, add x=4
    changed = run_sweep(parse_spec(raw), tmp_path / "out", workers=0)
    assert changed.spec_changed and (changed.computed, changed.skipped) == (2, 4)
    assert sorted(s["point"] for s in changed.stale) == ["x=1, y=1", "x=1, y=2"]
    assert all(s["reason"] == "no longer in the spec" for s in changed.stale)
    assert sorted(e["x"] for e in _log(log)[6:]) == [4, 4]
    ds = load_sweep(tmp_path / "out")
    assert list(ds["x"].values) == [2, 3, 4] and ds["prod"].sel(x=4, y=2.0).item() == 8.0
    pruned = run_sweep(parse_spec(raw), tmp_path / "out", workers=0, prune_stale=True)
    assert len(pruned.stale) == 2 and pruned.computed == 0
    assert len(read_records(tmp_path / "out")) == 6


def test_interrupt_in_process_then_resume_identical(tmp_path: Path, client) -> None:
    """An interrupt after 3 stored points; the re-run computes only the other points."""
    log = tmp_path / "log.jsonl"
    raw = {"command": CMD, "options": {"log": str(log)}, "axes": {"x": list(range(8))}}
    seen: list[str] = []

    def stop_after_three(rec: dict) -> None:
        seen.append(rec["hash"])
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(parse_spec(raw), tmp_path / "out", client=client, on_record=stop_after_three)
    stored = read_records(tmp_path / "out")
    assert sorted(stored) == sorted(seen)
    n_before = len(_log(log))
    time.sleep(0.5)  # cancelled tasks may still finish on the workers and log
    n_before = len(_log(log))
    res = run_sweep(parse_spec(raw), tmp_path / "out", client=client)
    assert res.skipped == 3 and res.computed == 5
    done_before = {stored[h]["options"]["x"] for h in stored}
    rerun_x = [e["x"] for e in _log(log)[n_before:]]
    assert sorted(rerun_x) == sorted(set(range(8)) - done_before)
    clean = run_sweep(parse_spec(raw), tmp_path / "clean", workers=0)
    assert clean.computed == 8
    a, b = load_sweep(tmp_path / "out"), load_sweep(tmp_path / "clean")
    drop = ["point_wall_s"]
    assert a.drop_vars(drop).drop_attrs().identical(b.drop_vars(drop).drop_attrs())


@pytest.mark.slow
def test_killed_sweep_resumes_identically(tmp_path: Path) -> None:
    """SIGKILL the whole `mesadyn sweep` process group after >= 3 stored points, re-run it."""
    log = tmp_path / "log.jsonl"
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f'command = "{CMD}"\n[options]\nlog = "{log}"\ndelay = 0.4\n[axes]\nx = {list(range(10))}\n'
    )
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "mesadyn", "sweep", str(spec), "--out", str(out),
           "--workers", "1", "--json", "--allow-code"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while len(list((out / "points").glob("*.json"))) < 3:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "sweep too slow to start"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(0.2)
    stored = read_records(out)
    assert 3 <= len(stored) < 10
    done_before = {rec["options"]["x"] for rec in stored.values()}
    n_before = len(_log(log))
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    summary = json.loads(again.stdout)
    assert summary["skipped"] == len(done_before)
    assert summary["computed"] == 10 - len(done_before)
    rerun_x = [e["x"] for e in _log(log)[n_before:]]
    assert sorted(rerun_x) == sorted(set(range(10)) - done_before)  # each once, none redone
    clean_spec = parse_spec({"command": CMD, "options": {"log": str(tmp_path / "l2")},
                             "axes": {"x": list(range(10))}})
    run_sweep(clean_spec, tmp_path / "clean", workers=0)
    a, b = load_sweep(out), load_sweep(tmp_path / "clean")
    for var in ("prod", "sum", "label", "even", "vec", "nested.sq"):
        assert a[var].identical(b[var]), var


@pytest.mark.slow
def test_dead_worker_is_a_failed_point(tmp_path: Path) -> None:
    """A point whose worker process dies is recorded as failed; the others complete."""
    import logging

    import dask
    from distributed import Client

    from mesadyn.sweep import local_cluster

    spec = parse_spec({"command": "sweep_fixture_cmds:die", "axes": {"x": [0, 1, 2]}})
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        cluster = local_cluster(1, silence_logs=logging.CRITICAL)
        try:
            with Client(cluster) as cl:
                res = run_sweep(spec, tmp_path / "out", client=cl)
        finally:
            cluster.close()
    failed = {f["point"]: f["error"] for f in res.failed}
    assert "x=1" in failed and all("KilledWorker" in e for e in failed.values())
    assert res.computed == 3  # every point got a record
    ds = load_sweep(tmp_path / "out")
    assert ds["point_status"].sel(x=1).item() == "failed"
    for x in (0, 2):  # a point that shared the dying worker may be collateral damage
        if ds["point_status"].sel(x=x).item() == "ok":
            assert ds["x2"].sel(x=x).item() == 2 * x
        else:
            assert f"x={x}" in failed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_is_a_clear_error(tmp_path: Path) -> None:
    address = f"tcp://127.0.0.1:{_free_port()}"
    spec = parse_spec({"command": "theory", "axes": {"T": [3]}})
    t0 = time.monotonic()
    with pytest.raises(MesadynError) as info:
        run_sweep(spec, tmp_path / "out", scheduler=address, connect_timeout=1.0)
    assert time.monotonic() - t0 < 30
    assert f"cannot reach the Dask scheduler at '{address}' within 1 s" in str(info.value)
    assert not (tmp_path / "out").exists()  # nothing written


def test_existing_scheduler_address(tmp_path: Path, client) -> None:
    spec = parse_spec({"command": CMD, "axes": {"x": [3, 4]}})
    res = run_sweep(spec, tmp_path / "out", scheduler=client.scheduler.address)
    assert res.computed == 2 and res.scheduler == client.scheduler.address and res.workers == 2


def test_bad_run_arguments(tmp_path: Path) -> None:
    spec = parse_spec({"command": "theory", "axes": {"T": [3]}})
    with pytest.raises(MesadynError, match="--workers must be >= 0, got -1"):
        run_sweep(spec, tmp_path / "a", workers=-1)
    with pytest.raises(MesadynError, match="not several"):
        run_sweep(spec, tmp_path / "a", workers=1, scheduler="tcp://127.0.0.1:1")
    with pytest.raises(MesadynError, match="--format zarr needs the zarr package|"):
        run_sweep(spec, tmp_path / "z", workers=0, fmt="zarr")
    with pytest.raises(MesadynError, match="--format must be netcdf or zarr, got 'csv'"):
        run_sweep(spec, tmp_path / "a", workers=0, fmt="csv")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "other.txt").write_text("x")
    with pytest.raises(MesadynError, match="non-empty folder that holds no sweep"):
        run_sweep(spec, tmp_path / "busy", workers=0)

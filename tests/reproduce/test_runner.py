"""Runner mechanics: atomic files, resume after an interruption, identical numbers on re-run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from mesadyn.errors import MesadynError
from mesadyn.reproduce import context
from mesadyn.reproduce.context import config_hash
from mesadyn.reproduce.runner import run, select


def _fake_flow_factory(calls: list[str], interrupt_at: int | None = None):
    """A stand-in for the exact flow: θ(τ) on the diagonal, moving to Theorem 4.3's ab."""
    from mesadyn.model import diagonal_init
    from mesadyn.process import ones
    from mesadyn.theory import constants

    def fake(run_, seed, out=None):
        calls.append(run_.name)
        if interrupt_at is not None and len(calls) == interrupt_at:
            raise KeyboardInterrupt
        s = constants(ones(5), run_.T).ab_star
        th = np.stack([diagonal_init(5, a, s / a).numpy() for a in (1.0, 0.9, 0.8)])
        return xr.Dataset({"theta": (("tau", "param"), th)},
                          coords={"tau": [0.0, 1.0, 2.0]})

    return fake


def test_interrupt_then_resume(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(context, "compute_flow", _fake_flow_factory(calls, interrupt_at=2))
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, only="thm4.3", show_progress=False)
    done = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(done) == 1 and done[0].endswith(".nc")  # the finished run, nothing half-written
    assert not (tmp_path / "report.md").exists()
    calls2: list[str] = []
    monkeypatch.setattr(context, "compute_flow", _fake_flow_factory(calls2))
    out = run(tmp_path, only="thm4.3", show_progress=False)
    assert len(calls2) == 2 and calls[0] not in calls2  # resumed: the first run was reused
    assert out.claims[0]["status"] == "PASS"
    assert (tmp_path / "report.md").is_file() and (tmp_path / "report.html").is_file()
    assert not list(tmp_path.rglob("*.tmp"))


def test_rerun_identical_numbers(tmp_path):
    a = run(tmp_path / "a", only="asm4.2", show_progress=False, seed=3)
    b = run(tmp_path / "b", only="asm4.2", show_progress=False, seed=3)
    assert [r["measured"] for r in a.claims] == [r["measured"] for r in b.claims]
    again = run(tmp_path / "a", only="asm4.2", show_progress=False, seed=3)
    assert again.computed == []  # loaded from claims/*.json
    ra = json.loads((tmp_path / "a" / "results.json").read_text())
    assert ra["all_pass"] and ra["seed"] == 3


def test_hash_depends_on_config_and_seed():
    assert config_hash({"a": 1}, 1) != config_hash({"a": 1}, 2)
    assert config_hash({"a": 1}, 1) != config_hash({"a": 2}, 1)
    assert config_hash({"a": 1}, 1) == config_hash({"a": 1}, 1)


def test_select_rejects_unknown():
    with pytest.raises(MesadynError, match="nope"):
        select("nope", quick=False)
    with pytest.raises(MesadynError, match="fig2"):
        select("fig2", quick=True)
    studies, claims = select("cor4.1", quick=True)
    assert studies == [] and claims == ["cor4.1"]


@pytest.fixture
def cheap_claim(monkeypatch):
    """asm4.2 with a one-row check that costs nothing (the runner's mechanics are under test)."""
    import dataclasses

    from mesadyn.reproduce import claims

    def check(ctx):
        return [claims._row("asm4.2", "cheap", "test", 1.0, 1.0 + ctx.seed * 1e-9, 1e-9, 1e-6,
                            "test", True, {"family": "test", "satisfies_41": True,
                                           "satisfied": True, "limit_mse": 0.0,
                                           "reason": "test"})]

    spec = dataclasses.replace(claims.CLAIMS["asm4.2"], check=check)
    monkeypatch.setitem(claims.CLAIMS, "asm4.2", spec)


@pytest.mark.parametrize("damage", ["{not json", '{"rows": "x"}', '{"rows": [{"id": 1}]}', ""])
def test_corrupt_claim_record_is_reported_and_recomputed(tmp_path, damage, cheap_claim):
    """Issue 12: a corrupt claims/*.json made every later reproduce crash until deleted."""
    first = run(tmp_path, only="asm4.2", show_progress=False)
    (record,) = (tmp_path / "claims").glob("asm4.2-*.json")
    record.write_text(damage)
    again = run(tmp_path, only="asm4.2", show_progress=False)
    assert again.computed == ["asm4.2"]
    assert list(again.repaired) == [f"claims/{record.name}"]
    assert [r["measured"] for r in again.claims] == [r["measured"] for r in first.claims]
    assert json.loads(record.read_text())["rows"]  # rewritten whole
    assert "Repaired files" in (tmp_path / "report.md").read_text()
    assert run(tmp_path, only="asm4.2", show_progress=False).repaired == {}


def test_corrupt_run_file_is_reported_and_recomputed(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(context, "compute_flow", _fake_flow_factory(calls))
    run(tmp_path, only="thm4.3", show_progress=False)
    victim = sorted((tmp_path / "runs").glob("*.nc"))[0]
    victim.write_bytes(b"\x89HDF garbage")
    for rec in (tmp_path / "claims").glob("*.json"):
        rec.unlink()  # so that the claim reloads its runs
    out = run(tmp_path, only="thm4.3", show_progress=False)
    assert f"runs/{victim.name}" in out.repaired and len(calls) == 4
    assert out.claims[0]["status"] == "PASS"


def test_stale_tmp_files_of_dead_writers_are_removed(tmp_path, cheap_claim):
    """Issue 12: SIGKILL left hidden .tmp files that nothing cleaned."""
    import os
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname())
    (tmp_path / "runs").mkdir(parents=True)
    stale = tmp_path / "runs" / f".flow-x.nc.{host}-{pid}.abc123.tmp"
    alive = tmp_path / "runs" / f".flow-y.nc.{host}-{os.getpid()}.def456.tmp"
    stale.write_bytes(b"half a file")
    alive.write_bytes(b"being written")
    out = run(tmp_path, only="asm4.2", show_progress=False)
    assert not stale.exists() and alive.exists()
    assert out.cleaned == [f"runs/{stale.name}"]


def test_unusable_out_is_refused_before_work(tmp_path, cheap_claim):
    (tmp_path / "file").write_text("x")
    with pytest.raises(MesadynError, match="not a folder"):
        run(tmp_path / "file" / "sub", only="asm4.2", show_progress=False)
    with pytest.raises(MesadynError, match="not a folder"):
        run(tmp_path / "file", only="asm4.2", show_progress=False)


def test_an_error_row_is_computed_again_not_reused(tmp_path, monkeypatch, cheap_claim):
    import dataclasses

    from mesadyn.reproduce import claims

    good = claims.CLAIMS["asm4.2"]

    def boom(ctx):
        raise RuntimeError("transient")

    monkeypatch.setitem(claims.CLAIMS, "asm4.2", dataclasses.replace(good, check=boom))
    first = run(tmp_path, only="asm4.2", show_progress=False)
    assert [r["status"] for r in first.claims] == ["ERROR"] and not first.all_pass
    monkeypatch.setitem(claims.CLAIMS, "asm4.2", good)
    again = run(tmp_path, only="asm4.2", show_progress=False)
    assert again.computed == ["asm4.2"] and again.all_pass


def test_batched_gd_runs_equal_separate_runs():
    """Runs sharing a training set, computed as one batch, give each run's numbers bit for bit
    (only the timing attribute differs)."""
    from mesadyn.reproduce.studies import GDRun

    runs = [GDRun("gaussian", 0.5, 10, init, 40, steps=4, eval_every=3)
            for init in (("diagonal", 0.5, 1.5), ("diagonal", 2.0, 2.0), ("gaussian", 0.1))]
    batch = context.compute_gd_batch(runs, seed=2)
    for r, got in zip(runs, batch, strict=True):
        want = context.compute_gd(r, seed=2)
        assert set(got.data_vars) == set(want.data_vars)
        for k in want.data_vars:
            np.testing.assert_array_equal(got[k].values, want[k].values, err_msg=k)
        if r is not runs[0]:  # the runs really differ
            assert not np.allclose(got["theta"].values[-1], batch[0]["theta"].values[-1])
    with pytest.raises(MesadynError, match="share one training set"):
        context.compute_gd_batch([runs[0], GDRun("sparse", 0.5, 10, runs[0].init, 40)], seed=2)


def test_runner_computes_a_training_set_once_and_resumes_only_missing_runs(tmp_path,
                                                                          monkeypatch):
    import dataclasses

    """fig1's six GD runs are two batches (one per training set); a lost run file is
    recomputed alone on the next run, the others are reused."""
    batches: list[list[str]] = []
    real = context.compute_gd_batch

    def fake_batch(runs, seed, device="cpu"):
        batches.append([r.name for r in runs])
        return real([dataclasses.replace(r, steps=2) for r in runs], seed, device)

    monkeypatch.setattr(context, "compute_gd_batch", fake_batch)
    monkeypatch.setattr(context, "compute_flow", _fake_flow_factory([]))
    first = run(tmp_path, only="fig1", m=30, show_progress=False)
    assert sorted(len(b) for b in batches) == [3, 3]
    assert {n for b in batches for n in b} <= set(first.computed)  # every GD run listed
    assert {n.split("-T")[0] for n in batches[0]} != {n.split("-T")[0] for n in batches[1]}
    gd_files = sorted((tmp_path / "runs").glob("gd-*.nc"))
    assert len(gd_files) == 6
    gd_files[0].unlink()
    batches.clear()
    out = run(tmp_path, only="fig1", m=30, show_progress=False)
    assert len(batches) == 1 and len(batches[0]) == 1
    assert gd_files[0].name.startswith(batches[0][0])
    assert out.computed == batches[0]


def _tiny_gd_runs():
    from mesadyn.reproduce.studies import GDRun

    a = GDRun("gaussian", 1.0, 6, ("diagonal", 0.3, 0.3), m=40, steps=3, eval_every=1, d=2)
    b = GDRun("gaussian", 0.5, 6, ("diagonal", 0.3, 0.3), m=40, steps=3, eval_every=1, d=2)
    c = GDRun("gaussian", 0.5, 6, ("gaussian", 0.1), m=40, steps=3, eval_every=1, d=2)
    return a, b, c


@pytest.mark.slow  # two spawned workers import torch and mesadyn (~50 s on the shared machine)
def test_runs_in_worker_processes_give_the_same_numbers(tmp_path):
    """Context.compute_parallel with two worker processes (one run per task, a flow among
    them) stores the numbers of the one-process path, which steps a training set's GD runs
    together (both with one torch thread here)."""
    from mesadyn.reproduce.context import Context
    from mesadyn.reproduce.studies import FlowRun

    a, b, c = _tiny_gd_runs()
    flow = FlowRun("gaussian", 1.0, 6, ("diagonal", 0.3, 0.3), d=2)
    one = Context(tmp_path / "one", quick=True, seed=5)
    two = Context(tmp_path / "two", quick=True, seed=5)
    for ctx in (one, two):
        (ctx.out / "runs").mkdir(parents=True)
    for batch in ([a], [b, c]):
        one.compute_batch(batch)
    one.load(flow)
    two.compute_parallel([flow, a, b, c], 2)
    assert not one.failed and not two.failed
    assert all(two.has(r) for r in (a, b, c, flow))
    for r in (a, b, c):
        x, y = one.load(r), two.load(r)
        for k in ("theta", "train_loss", "test_loss", "ctx_mse"):
            np.testing.assert_array_equal(x[k].values, y[k].values)
    np.testing.assert_array_equal(one.load(flow)["theta"].values, two.load(flow)["theta"].values)


def test_run_cost_orders_the_costliest_runs_first():
    """The schedule's cost model: GD by steps·m·T, sparse draws cheaper (their closed sum
    over t), a flow as a few GD steps at the paper's size."""
    from mesadyn.reproduce.context import FLOW_COST, SPARSE_SEQUENCE_COST, run_cost
    from mesadyn.reproduce.studies import FlowRun, GDRun

    dense = GDRun("gaussian", 1.0, 100, ("diagonal", 0.1, 0.1), m=10_000, steps=200)
    sparse = GDRun("sparse", 1.0, 100, ("diagonal", 0.1, 0.1), m=10_000, steps=200)
    flow = FlowRun("gaussian", 1.0, 100, ("diagonal", 0.1, 0.1))
    assert run_cost(dense) == 201 * 10_000 * 100
    assert run_cost(sparse) == 201 * 10_000 * SPARSE_SEQUENCE_COST
    assert run_cost(flow) == FLOW_COST < run_cost(sparse) < run_cost(dense)


def test_default_jobs_parallelises_only_large_training_sets_on_the_cpu():
    import os

    from mesadyn.reproduce.runner import PARALLEL_MIN_ROWS, default_jobs
    from mesadyn.reproduce.studies import GDRun

    a, b, c = _tiny_gd_runs()
    big = GDRun("gaussian", 1.0, 100, ("diagonal", 0.3, 0.3), m=PARALLEL_MIN_ROWS // 100)
    assert default_jobs([[a], [b, c]], "cpu") == 1  # seconds of work: not worth a process
    assert default_jobs([[big], [a]], "cuda") == 1  # one device
    assert default_jobs([[big]], "cpu") == 1  # one GD run
    assert default_jobs([[big, a]], "cpu") == min(2, os.cpu_count() or 1)  # one set, two runs
    assert default_jobs([[big], [a]], "cpu") == min(2, os.cpu_count() or 1)

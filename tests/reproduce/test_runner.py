"""Runner mechanics: atomic files, resume after an interruption, identical numbers on re-run,
and every run computed by its workflow."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from mesadyn.errors import MesadynError
from mesadyn.outcome import Outcome
from mesadyn.reproduce import context, plan, runner
from mesadyn.reproduce.context import Context
from mesadyn.reproduce.runner import run, select
from mesadyn.reproduce.studies import T_TE, FlowRun, GDRun, Study
from mesadyn.workflows import integrate, stored_run, train


@pytest.fixture
def counted(monkeypatch):
    """The runs computed one at a time (``context.compute``, through their workflows), by
    name; ``counted.interrupt_at = n`` raises KeyboardInterrupt on the n-th."""

    class Calls(list):
        interrupt_at: int | None = None

    calls = Calls()
    real = context.compute

    def compute(config):
        calls.append(config.out)
        if calls.interrupt_at is not None and len(calls) == calls.interrupt_at:
            raise KeyboardInterrupt
        real(config)

    monkeypatch.setattr(context, "compute", compute)
    return calls


def test_interrupt_then_resume(tmp_path, counted):
    counted.interrupt_at = 2
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, only="thm4.3")
    done = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(done) == 1 and done[0].endswith(".nc")  # the finished run, nothing half-written
    assert not (tmp_path / "report.md").exists()
    first = counted[0]
    counted.clear()
    counted.interrupt_at = None
    out = run(tmp_path, only="thm4.3")
    assert len(counted) == 2 and first not in counted  # resumed: the first run was reused
    assert out.claims[0]["status"] == "PASS" and out.status is Outcome.OK
    assert (tmp_path / "report.md").is_file() and (tmp_path / "report.html").is_file()
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_flow_is_the_integrate_workflows_run_file(tmp_path):
    """The exact flow's configuration is the integrate workflow's (the exact full flow to the
    workflow's horizon, no steady-state stop), and its run file rebuilds it alone."""
    from mesadyn.analysis.horizon import full_flow_horizon
    from mesadyn.reduced import ReducedSystem

    ctx = Context(tmp_path, quick=True, seed=1)
    (tmp_path / "runs").mkdir()
    r = FlowRun("ones", None, 100, ("diagonal", 0.5, 1.5), mask="diagonal")
    config = ctx.config(r)
    assert isinstance(config, integrate.Config)
    assert (config.field, config.reduced, config.steady_tol, config.n_save) == ("exact", False,
                                                                              0.0, 400)
    assert ctx.run_path(r).name == f"{r.name}-{config.config_hash()}.nc"
    ds = ctx.load(r)
    assert ds.attrs["kind"] == "integrate" and ds.attrs["status"] == Outcome.T_END
    fam = config.family()
    system = ReducedSystem.from_family(fam, 100)
    want = full_flow_horizon(system, fam, gaussian=False, a0=0.5, b0=1.5, sigma_w=0.01,
                             masked=True)
    assert float(ds["tau"].values[-1]) == pytest.approx(want, rel=1e-12)
    assert integrate.Config.from_run(ctx.run_path(r), out=config.out) == config
    assert stored_run(ctx.run_path(r), config) is not None


def test_a_run_file_of_another_run_is_repaired(tmp_path, counted):
    """A file under a run's name that holds another configuration (or cannot be read) is
    reported and recomputed."""
    ctx = Context(tmp_path, quick=True, seed=1)
    (tmp_path / "runs").mkdir()
    r = FlowRun("ones", None, 100, ("diagonal", 0.5, 1.5), mask="diagonal")
    other = dataclasses.replace(ctx.config(r), a0=0.4)
    integrate.run(other)  # written at r's path with other options
    theta = ctx.load(r)["theta"].values
    assert list(ctx.repaired) == [f"runs/{ctx.run_path(r).name}"]
    assert "a0" in ctx.repaired[f"runs/{ctx.run_path(r).name}"] and len(counted) == 1
    np.testing.assert_allclose(theta[0][theta[0] != 0], [0.5] * 5 + [1.5] * 5)


def test_rerun_identical_numbers(tmp_path):
    a = run(tmp_path / "a", only="asm4.2", seed=3)
    b = run(tmp_path / "b", only="asm4.2", seed=3)
    assert [r["measured"] for r in a.claims] == [r["measured"] for r in b.claims]
    again = run(tmp_path / "a", only="asm4.2", seed=3)
    assert again.computed == []  # loaded from claims/*.json
    ra = json.loads((tmp_path / "a" / "results.json").read_text())
    assert ra["all_pass"] and ra["seed"] == 3


def test_run_files_and_claim_records_are_named_by_their_inputs(tmp_path):
    from mesadyn.reproduce.claims import CLAIMS, claim_hash, claim_hash_config

    gd = GDRun("gaussian", 0.5, 100, ("diagonal", 0.5, 1.5), m=500)
    one, same, seed2 = (Context(tmp_path, True, s) for s in (1, 1, 2))
    assert one.run_path(gd) == same.run_path(gd) != seed2.run_path(gd)
    assert one.run_path(gd) != one.run_path(dataclasses.replace(gd, m=600))
    spec = CLAIMS["thm4.3"]
    cfg = claim_hash_config(spec, one)
    assert claim_hash(cfg) == claim_hash(claim_hash_config(spec, same))
    assert claim_hash(cfg) != claim_hash(claim_hash_config(spec, seed2))
    assert claim_hash(cfg) != claim_hash({**cfg, "quick": False})


def test_select_rejects_unknown():
    with pytest.raises(MesadynError, match="nope"):
        select("nope", quick=False)
    with pytest.raises(MesadynError, match="fig2"):
        select("fig2", quick=True)
    studies, claims = select("cor4.1", quick=True)
    assert studies == [] and claims == ["cor4.1"]


def test_progress_counts_the_planned_tasks(tmp_path, cheap_claim):
    calls: list[float] = []
    tasks = plan(only="asm4.2").tasks
    assert tasks == ["asm4.2", "report"]
    run(tmp_path, only="asm4.2", progress=calls.append)
    assert calls == [0.0, 1.0, 2.0]
    quick = plan(quick=True)
    assert len(quick.tasks) == len(quick.runs) + len(quick.claim_ids) + 1 + 1
    assert [isinstance(r, GDRun) for r in quick.runs] == sorted(
        isinstance(r, GDRun) for r in quick.runs)  # the flows first


@pytest.fixture
def cheap_claim(monkeypatch):
    """asm4.2 with a one-row check that costs nothing (the runner's mechanics are under test)."""
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
    first = run(tmp_path, only="asm4.2")
    (record,) = (tmp_path / "claims").glob("asm4.2-*.json")
    record.write_text(damage)
    again = run(tmp_path, only="asm4.2")
    assert again.computed == ["asm4.2"]
    assert list(again.repaired) == [f"claims/{record.name}"]
    assert [r["measured"] for r in again.claims] == [r["measured"] for r in first.claims]
    assert json.loads(record.read_text())["rows"]  # rewritten whole
    assert "Repaired files" in (tmp_path / "report.md").read_text()
    assert run(tmp_path, only="asm4.2").repaired == {}


def test_corrupt_run_file_is_reported_and_recomputed(tmp_path, counted):
    run(tmp_path, only="thm4.3")
    victim = sorted((tmp_path / "runs").glob("*.nc"))[0]
    victim.write_bytes(b"\x89HDF garbage")
    for rec in (tmp_path / "claims").glob("*.json"):
        rec.unlink()  # so that the claim reloads its runs
    out = run(tmp_path, only="thm4.3")
    assert f"runs/{victim.name}" in out.repaired and len(counted) == 4
    assert counted[-1] == str(victim)
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
    out = run(tmp_path, only="asm4.2")
    assert not stale.exists() and alive.exists()
    assert out.cleaned == [f"runs/{stale.name}"]


def test_unusable_out_is_refused_before_work(tmp_path, cheap_claim):
    (tmp_path / "file").write_text("x")
    with pytest.raises(MesadynError, match="not a folder"):
        run(tmp_path / "file" / "sub", only="asm4.2")
    with pytest.raises(MesadynError, match="not a folder"):
        run(tmp_path / "file", only="asm4.2")


def test_an_error_row_is_computed_again_not_reused(tmp_path, monkeypatch, cheap_claim):
    from mesadyn.reproduce import claims

    good = claims.CLAIMS["asm4.2"]

    def boom(ctx):
        raise RuntimeError("transient")

    monkeypatch.setitem(claims.CLAIMS, "asm4.2", dataclasses.replace(good, check=boom))
    first = run(tmp_path, only="asm4.2")
    assert [r["status"] for r in first.claims] == ["ERROR"] and not first.all_pass
    assert first.status is Outcome.ERROR and not first.ok
    monkeypatch.setitem(claims.CLAIMS, "asm4.2", good)
    again = run(tmp_path, only="asm4.2")
    assert again.computed == ["asm4.2"] and again.all_pass


def _tiny_gd_runs():
    a = GDRun("gaussian", 1.0, 6, ("diagonal", 0.3, 0.3), m=40, steps=3, eval_every=1, d=2)
    b = GDRun("gaussian", 0.5, 6, ("diagonal", 0.3, 0.3), m=40, steps=3, eval_every=1, d=2)
    c = GDRun("gaussian", 0.5, 6, ("gaussian", 0.1), m=40, steps=3, eval_every=1, d=2)
    return a, b, c


def test_a_gd_run_is_the_train_workflows_run(tmp_path):
    """A GD run's configuration: Table 1's step size, the test set and the in-context curve
    of the protocol; its file holds what the figures and the report read."""
    _, b, _ = _tiny_gd_runs()
    ctx = Context(tmp_path, quick=True, seed=2)
    (tmp_path / "runs").mkdir()
    config = ctx.config(b)
    assert isinstance(config, train.Config)
    assert (config.lr, config.m_test, config.incontext) == (None, 2000, T_TE)
    ds = ctx.load(b)
    assert ds.attrs["kind"] == "train" and ds.attrs["status"] == Outcome.OK
    for k in ("ab_mean", "ab_theory", "ratio", "ratio_theory", "step", "W_KQ", "W_PV",
              "ctx_mse", "ctx_mse_se", "ctx_baseline", "ctx_ratio", "ctx_ratio_se", "T_te"):
        assert k in ds.variables, k
    assert {"lr", "wall_s", "diverged"} <= set(ds.attrs)
    assert list(ds["T_te"].values) == list(T_TE)


def test_batched_gd_runs_equal_separate_runs(tmp_path):
    """Runs sharing a training set, computed as one batch, give each run's numbers bit for bit
    (only the timing differs)."""
    runs = [GDRun("gaussian", 0.5, 10, init, 40, steps=4, eval_every=3)
            for init in (("diagonal", 0.5, 1.5), ("diagonal", 2.0, 2.0), ("gaussian", 0.1))]
    batch, alone = Context(tmp_path / "b", True, 2), Context(tmp_path / "a", True, 2)
    for ctx in (batch, alone):
        (ctx.out / "runs").mkdir(parents=True)
    batch.compute_batch(runs)
    assert not batch.failed
    for r in runs:
        got, want = batch.load(r), alone.load(r)  # alone: computed by train.run
        assert set(got.data_vars) == set(want.data_vars)
        for k in want.data_vars:
            np.testing.assert_array_equal(got[k].values, want[k].values, err_msg=k)
    assert not np.allclose(batch.load(runs[1])["theta"].values[-1],
                           batch.load(runs[0])["theta"].values[-1])  # the runs really differ
    mixed = [GDRun("gaussian", 0.5, 10, runs[0].init, 41),
             GDRun("sparse", 0.5, 10, runs[0].init, 40)]
    batch.compute_batch(mixed)
    assert all("share one training set" in batch.failed[r.name] for r in mixed)


def test_runner_computes_a_training_set_once_and_resumes_only_missing_runs(tmp_path,
                                                                          monkeypatch):
    """A study's GD runs are one batch per training set; a lost run file is recomputed alone
    on the next run, the others are reused."""
    a, b, c = _tiny_gd_runs()
    st = Study("tiny", "tiny", "-", "diag", (), 6, gd=(a, b, c))
    monkeypatch.setattr(runner, "select", lambda only, quick, m=None: ([st], []))
    monkeypatch.setattr(runner, "draw_study", lambda st, ctx: [])
    batches: list[list[str]] = []
    real = context.compute_gd_batch

    def spy(configs):
        batches.append([cf.out for cf in configs])
        real(configs)

    monkeypatch.setattr(context, "compute_gd_batch", spy)
    first = run(tmp_path, only="tiny")
    assert sorted(len(x) for x in batches) == [1, 2]
    assert set(first.computed) == {a.name, b.name, c.name}
    files = sorted((tmp_path / "runs").glob("gd-*.nc"))
    assert len(files) == 3
    files[0].unlink()
    batches.clear()
    out = run(tmp_path, only="tiny")
    assert batches == [[str(files[0])]]
    assert len(out.computed) == 1 and files[0].name.startswith(out.computed[0])


@pytest.mark.slow  # two spawned workers import torch and mesadyn (~50 s on the shared machine)
def test_runs_in_worker_processes_give_the_same_numbers(tmp_path):
    """Context.compute_parallel with two worker processes (one run per task, a flow among
    them) stores the numbers of the one-process path, which steps a training set's GD runs
    together (both with one torch thread here)."""
    a, b, c = _tiny_gd_runs()
    flow = FlowRun("gaussian", 1.0, 6, ("diagonal", 0.3, 0.3), d=2)
    one = Context(tmp_path / "one", quick=True, seed=5)
    two = Context(tmp_path / "two", quick=True, seed=5)
    for ctx in (one, two):
        (ctx.out / "runs").mkdir(parents=True)
    for batch in ([a], [b, c]):
        one.compute_batch(batch)
    one.load(flow)
    done: list[str] = []
    two.compute_parallel([flow, a, b, c], 2, done=lambda r: done.append(r.name))
    assert not one.failed and not two.failed
    assert sorted(done) == sorted(r.name for r in (a, b, c, flow))
    assert all(two.has(r) for r in (a, b, c, flow))
    for r in (a, b, c):
        x, y = one.load(r), two.load(r)
        for k in ("theta", "train_loss", "test_loss", "ctx_mse"):
            np.testing.assert_array_equal(x[k].values, y[k].values)
    np.testing.assert_array_equal(one.load(flow)["theta"].values, two.load(flow)["theta"].values)


def test_the_schedule_orders_the_costliest_runs_first(tmp_path):
    """The schedule's cost (mesadyn.workflows._cost): GD by steps·m·T, sparse draws cheaper
    (their closed sum over t), a flow as a few GD steps at the paper's size."""
    from mesadyn.workflows._cost import FLOW_COST, SPARSE_SEQUENCE_COST

    ctx = Context(tmp_path, quick=False, seed=1)
    dense = GDRun("gaussian", 1.0, 100, ("diagonal", 0.1, 0.1), m=10_000, steps=200)
    sparse = GDRun("sparse", 1.0, 100, ("diagonal", 0.1, 0.1), m=10_000, steps=200)
    flow = FlowRun("gaussian", 1.0, 100, ("diagonal", 0.1, 0.1))
    cost = {r: context.cost(ctx.config(r)) for r in (dense, sparse, flow)}
    assert cost[dense] == 201 * 10_000 * 100
    assert cost[sparse] == 201 * 10_000 * SPARSE_SEQUENCE_COST
    assert cost[flow] == FLOW_COST < cost[sparse] < cost[dense]


def test_default_jobs_parallelises_only_large_training_sets_on_the_cpu():
    import os

    from mesadyn.reproduce.runner import PARALLEL_MIN_ROWS, default_jobs

    a, b, c = _tiny_gd_runs()
    big = GDRun("gaussian", 1.0, 100, ("diagonal", 0.3, 0.3), m=PARALLEL_MIN_ROWS // 100)
    assert default_jobs([[a], [b, c]], "cpu") == 1  # seconds of work: not worth a process
    assert default_jobs([[big], [a]], "cuda") == 1  # one device
    assert default_jobs([[big]], "cpu") == 1  # one GD run
    assert default_jobs([[big, a]], "cpu") == min(2, os.cpu_count() or 1)  # one set, two runs
    assert default_jobs([[big], [a]], "cpu") == min(2, os.cpu_count() or 1)


def test_the_moment_cache_is_the_output_folders_while_running(tmp_path, monkeypatch):
    monkeypatch.setenv(context.MOMENT_CACHE_ENV, "/elsewhere")
    with context.moment_cache(tmp_path) as where:
        import os

        assert where == tmp_path / "cache" and os.environ[context.MOMENT_CACHE_ENV] == str(where)
    assert os.environ[context.MOMENT_CACHE_ENV] == "/elsewhere"
    monkeypatch.delenv(context.MOMENT_CACHE_ENV)
    with context.moment_cache(tmp_path):
        pass
    assert context.MOMENT_CACHE_ENV not in os.environ

"""The one size guard (:mod:`mesadyn.budget`): every consumer prices its run and is refused,
on one line naming the size and the estimate, before it allocates anything large."""

from __future__ import annotations

import resource
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from mesadyn import budget
from mesadyn.cli import main
from mesadyn.errors import MesadynError


@pytest.fixture
def small_budget(monkeypatch):
    """A memory budget of 64 MiB, whatever the machine has."""
    monkeypatch.setattr(budget, "memory_budget",
                        lambda: budget.MemoryBudget(64 * 2**20, "test budget"))


def _cli(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_check_refuses_memory_device_and_time(monkeypatch, small_budget) -> None:
    est = budget.Estimate("a run at d=9", 2**30, advice="use a smaller d")
    with pytest.raises(MesadynError, match=r"a run at d=9 needs about 1\.0 GiB \(estimate\), "
                                           r"more than the 64\.0 MiB available \(test budget\); "
                                           r"use a smaller d"):
        budget.check(est)
    assert budget.check(budget.Estimate("small", 2**20)).host_bytes == 2**20
    # on the CPU the device's bytes are the host's
    with pytest.raises(MesadynError, match="needs about"):
        budget.check(budget.Estimate("on the cpu", 0, 2**30, "cpu"))
    # time: refused above the limit unless forced, never without a limit
    slow = budget.Estimate("a slow flow", 0, seconds=600.0)
    with pytest.raises(MesadynError, match=r"about 10\.0 min .* pass --yes"):
        budget.check(slow, time_limit=60.0)
    assert budget.check(slow, time_limit=60.0, force=True) is slow
    assert budget.check(slow) is slow
    # a CUDA device: its own free memory
    monkeypatch.setattr(budget, "device_free",
                        lambda dev: budget.MemoryBudget(2**20, f"free on {dev}"))
    with pytest.raises(MesadynError, match=r"on cuda:0 \(estimate\), more than the 1\.0 MiB "
                                           r"free on cuda:0"):
        budget.check(budget.Estimate("a field", 0, 2**21, "cuda:0"))


def test_estimates_against_their_formulas() -> None:
    """Each consumer's estimate is the documented formula (module docstring)."""
    d, T, n = 3, 20, 1000
    s = 16 * (T * d * d + 3 * T * d)
    assert budget.sequence_bytes(d, T) == s
    c = budget.chunk_size(d, T, n)
    assert c == min(n, budget.CHUNK_BYTES // s) and budget.chunk_size(5, 10**9, 7) == 1
    assert budget.sampled_field_bytes(d, T, n, cached=False) == 24 * n * d + 2 * s * c
    assert budget.sampled_field_bytes(d, T, n, cached=True) == 24 * n * d + 2 * s * c + n * s
    P = 18 * d * d
    tr = budget.train(d, T, n, 10, 5)
    assert tr.host_bytes == 6 * ((P + 3 * d + 8) * 8 + budget.STEP_OVERHEAD)
    assert tr.device_bytes == (8 * P * 8 + budget.sampled_field_bytes(d, T, n, cached=False)
                               + budget.sampled_field_bytes(d, T, 10, cached=False))
    ens = budget.ensemble(d, 50, chunk=20, n_save=4)
    assert ens.host_bytes == 50 * (3 * P + 24) * 8 + 50 * 4 * P * 8 + 20 * (12 * P + 3 * P * P) * 8
    assert budget.gd(d, 9).host_bytes == 10 * (P + 16) * 8
    assert budget.gd(d, 9, reduced=True).host_bytes == 10 * 18 * 8
    gf = budget.gdflow(d, T, 9, m=0)
    assert gf.host_bytes == 5 * 10 * P * 8 and gf.device_bytes == 0
    assert budget.sweep(10).host_bytes == 10 * budget.POINT_BYTES
    assert budget.theta(d).host_bytes == 8 * P * 8


@pytest.mark.parametrize(("argv", "size"), [
    (["train", "--T", "1000000000"], "T=1000000000"),
    (["train", "--d", "100000"], "d=100000"),
    (["train", "--d", "2", "--T", "6", "--m", "10", "--steps", "1000000000"],
     "steps=1000000000"),
    (["integrate", "--field", "mc", "--T", "1000000000", "--yes"], "T=1000000000"),
    (["integrate", "--field", "finite", "--T", "1000000000", "--yes"], "T=1000000000"),
    (["integrate", "--d", "100000"], "d=100000"),
    (["stability", "--field", "mc", "--T", "1000000000"], "T=1000000000"),
    (["ensemble", "--d", "2", "--T", "6", "--n", "1000000000000"], "n=1000000000000"),
    (["gdflow", "--d", "2", "--T", "6", "--steps", "1000000000"], "steps=1000000000"),
])
def test_huge_sizes_are_refused_before_allocating(capsys, argv, size) -> None:
    """Sizes that used to grow until the kernel killed the process (or ran for ever) are one
    line naming the size and the estimate, exit 2, with nothing large allocated (measured by
    tracemalloc: numpy's and Python's allocations; a 1e9-long trace would be gigabytes)."""
    tracemalloc.start()
    try:
        code, out, err = _cli(capsys, [*argv, "--json"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "needs about" in err and "(estimate)" in err, err
    assert size in err
    assert peak < 256 * 2**20, peak


def test_every_consumer_consults_the_guard(monkeypatch, tmp_path) -> None:
    """With a 1 kB budget every consumer is refused by the guard, before its work: the
    sampled fields, train, ensemble, gdflow, the sweep's points, θ and an array file."""
    monkeypatch.setattr(budget, "memory_budget", lambda: budget.MemoryBudget(1000, "tiny"))
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.io import load_npy
    from mesadyn.model import diagonal_init
    from mesadyn.process import gaussian
    from mesadyn.sweep.spec import load_spec
    from mesadyn.workflows import ensemble, gdflow, train

    with pytest.raises(MesadynError, match="samples at d=2 T=5 needs about"):
        make_field(FieldSpec("mc", gaussian(2), 5, samples=100))
    with pytest.raises(MesadynError, match="sequences at d=2 T=5 needs about"):
        make_field(FieldSpec("finite", gaussian(2), 5, m=100))
    with pytest.raises(MesadynError, match=r"train at d=2, T=5, m=10.* needs about"):
        train.run(train.Config(d=2, T=5, m=10, steps=1))
    with pytest.raises(MesadynError, match="an ensemble of n=4 starts at d=2 needs about"):
        ensemble.initial_points(ensemble.Config(d=2, T=5, n=4))
    with pytest.raises(MesadynError, match=r"gdflow at d=2, T=5, steps=3, m=0 needs about"):
        gdflow.run(gdflow.Config(d=2, T=5, steps=3, m=0))
    spec = tmp_path / "s.toml"
    spec.write_text('workflow = "theory"\n[axes]\nT = [5, 6]\n')
    with pytest.raises(MesadynError, match="a sweep of 2 points needs about"):
        load_spec(spec).points()
    np.save(tmp_path / "a.npy", np.zeros(1000))
    with pytest.raises(MesadynError, match="the array file .* needs about"):
        load_npy(tmp_path / "a.npy")
    monkeypatch.setattr(budget, "memory_budget", lambda: budget.MemoryBudget(2**25, "32 MiB"))
    with pytest.raises(MesadynError, match=r"θ at d=300 \(1620000 entries\) needs about"):
        diagonal_init(300, 0.1, 0.1)


def test_ulimit_refuses_train_with_the_estimate() -> None:
    """Under ``ulimit -v`` (1 GiB above what the interpreter maps) ``train --T 1e7`` is one line
    naming the ulimit headroom and the estimate, exit 2: not a RuntimeError from torch's
    allocator (exit 1) or a killed process."""
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("already under an address-space limit")
    code = (
        "import resource, sys\n"
        "from mesadyn.cli import main\n"
        "vm = int(open('/proc/self/status').read().split('VmSize:')[1].split()[0]) * 1024\n"
        "lim = vm + 2**30\n"
        "resource.setrlimit(resource.RLIMIT_AS, (lim, lim))\n"
        "main(['train', '--d', '3', '--T', '10000000', '--m', '200', '--json'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == ""
    err = out.stderr.strip()
    assert "\n" not in err and "T=10000000" in err and "ulimit -v headroom" in err, err

"""The memory budget (:mod:`mesadyn.budget`: the machine, ``ulimit -v``, cgroups) and the exact
field's refusal, before allocating, of what would not fit under it, with the estimate in the
message."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from mesadyn import budget as _memory
from mesadyn.field._moments import plan
from mesadyn.process import ones


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_limit_less_usage_less_reclaimable_cache(tmp_path) -> None:
    proc = tmp_path / "proc_cgroup"
    _write(proc, "0::/job/a\n")
    _write(tmp_path / "cg/job/a/memory.max", "1000000\n")
    _write(tmp_path / "cg/job/a/memory.current", "400000\n")
    _write(tmp_path / "cg/job/a/memory.stat", "anon 300000\ninactive_file 100000\n")
    _write(tmp_path / "cg/memory.max", "max\n")
    assert _memory.cgroup_headroom(tmp_path / "cg", proc) == 1000000 - 300000


def test_cgroup_v1_limit_and_no_limit(tmp_path) -> None:
    proc = tmp_path / "proc_cgroup"
    _write(proc, "4:memory:/job\n1:cpu:/\n0::/\n")
    _write(tmp_path / "cg/memory/job/memory.limit_in_bytes", "5000\n")
    _write(tmp_path / "cg/memory/job/memory.usage_in_bytes", "2000\n")
    _write(tmp_path / "cg/memory/job/memory.stat", "total_inactive_file 500\n")
    _write(tmp_path / "cg/memory/memory.limit_in_bytes", "9223372036854771712\n")
    assert _memory.cgroup_headroom(tmp_path / "cg", proc) == 5000 - 1500
    _write(tmp_path / "cg/memory/job/memory.limit_in_bytes", "9223372036854771712\n")
    assert _memory.cgroup_headroom(tmp_path / "cg", proc) is None
    assert _memory.cgroup_headroom(tmp_path / "nothing", tmp_path / "none") is None


def test_budget_is_the_tightest_limit(monkeypatch) -> None:
    monkeypatch.setattr(_memory, "machine_available", lambda: 10_000)
    monkeypatch.setattr(_memory, "address_space_headroom", lambda: 7_000)
    monkeypatch.setattr(_memory, "cgroup_headroom", lambda: None)
    assert _memory.memory_budget() == _memory.MemoryBudget(7_000, "ulimit -v headroom")
    monkeypatch.setattr(_memory, "cgroup_headroom", lambda: 3_000)
    assert _memory.memory_budget().source == "cgroup memory limit headroom"


def test_ulimit_refuses_ones_d16_with_a_message() -> None:
    """Under ``ulimit -v`` (4 GiB above what the interpreter maps) the ~10 GiB build of
    ones d=16 is refused with the estimate named, not killed by MemoryError."""
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("already under an address-space limit")
    est = plan(ones(16), 100).bytes
    code = (
        "import resource, sys\n"
        "from mesadyn.field import FieldSpec, make_field\n"
        "from mesadyn.errors import MesadynError\n"
        "from mesadyn.process import ones\n"
        "vm = int(open('/proc/self/status').read().split('VmSize:')[1].split()[0]) * 1024\n"
        "lim = vm + 4 * 2**30\n"
        "resource.setrlimit(resource.RLIMIT_AS, (lim, lim))\n"
        "try:\n"
        "    make_field(FieldSpec('exact', ones(16), 100), disk_cache=False)\n"
        "except MesadynError as exc:\n"
        "    print(exc); sys.exit(2)\n"
        "print('built'); sys.exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    msg = out.stdout.strip()
    assert "ulimit -v" in msg and "ones d=16 T=100" in msg and "--field mc" in msg
    assert f"{est / 2**30:.1f} GiB" in msg and "\n" not in msg

"""benchmarks/device_check.py: its CPU dry run prints the whole table (the script is tested
without a GPU), and without CUDA the plain run is one line and exit 0."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "device_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["device_check"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_cpu_dry_run_prints_every_row(capsys):
    code = _module().main(["--cpu-dry-run", "--reproduce-limit", "3"])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = [line for line in out.splitlines() if line.startswith("| parity")
            or line.startswith("| seconds")]
    assert len(rows) == 4 + 2 + 2 + 1 + 1  # parity: exact, full flow, draws, direct path
    assert all("| ok |" in r for r in rows if r.startswith("| parity"))
    assert "stopped at the 3 s limit" in out or "exit 0" in out
    assert "FAIL" not in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_without_cuda_one_line(capsys):
    assert _module().main([]) == 0
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1 and "CUDA is not available" in out

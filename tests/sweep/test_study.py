"""The studies/sweep_abstar study end to end on a small subset (slow: full exact flows)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sweep_abstar_subset(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("sweep_abstar", ROOT / "studies" /
                                                  "sweep_abstar.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    out = tmp_path / "abstar"
    code = study.main(["--out", str(out), "--T", "3,10", "--d", "1,2", "--workers", "0"])
    summary = json.loads((out / "sweep_abstar.json").read_text())
    assert code == 0, summary
    assert summary["n_ok"] == 4 and summary["max_rel_error"] < 1e-6
    assert (out / "sweep_abstar.png").stat().st_size > 10_000
    assert "| 10 | 2 |" in (out / "sweep_abstar.md").read_text()
    # resumable: a second run computes nothing
    assert study.main(["--out", str(out), "--T", "3,10", "--d", "1,2", "--workers", "0"]) == 0
    assert json.loads((out / "sweep_abstar.json").read_text())["sweep"]["computed"] == 0

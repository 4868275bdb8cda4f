"""Runner mechanics: atomic files, resume after an interruption, identical numbers on re-run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from mesadyn.errors import MesadynError
from mesadyn.reproduce import runner
from mesadyn.reproduce.runner import config_hash, run, select


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
    monkeypatch.setattr(runner, "compute_flow", _fake_flow_factory(calls, interrupt_at=2))
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, only="thm4.3", show_progress=False)
    done = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(done) == 1 and done[0].endswith(".nc")  # the finished run, nothing half-written
    assert not (tmp_path / "report.md").exists()
    calls2: list[str] = []
    monkeypatch.setattr(runner, "compute_flow", _fake_flow_factory(calls2))
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

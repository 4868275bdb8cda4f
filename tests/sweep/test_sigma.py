"""``mesadyn.sweep.sweep_sigma``: one ensemble per σ_w, each in its own run file, the outcome
combined from the ensembles', and bad lists refused naming the value."""

from __future__ import annotations

import json

import pytest

from mesadyn.errors import MesadynError
from mesadyn.outcome import Outcome
from mesadyn.sweep import SigmaSweep, sigma_out, sigma_values, sweep_sigma
from mesadyn.workflows import ensemble as wf

#: Loose tolerances for the run machinery (~10x fewer steps than the defaults).
FAST = dict(rtol=1e-6, atol=1e-9, steady_tol=1e-6)


def test_sweep_over_sigma_w(tmp_path) -> None:
    out = tmp_path / "ens.nc"
    cfg = wf.Config(d=2, T=6, n=3, out=str(out), **FAST)
    seen: list[float] = []
    sw = sweep_sigma(cfg, "1e-2,1e-3", progress=seen.append)
    assert isinstance(sw, SigmaSweep) and sw.status is Outcome.CONVERGED and sw.exit_code == 0
    assert sw.sigma_w == (1e-2, 1e-3) and [r.sigma_w for r in sw.runs] == [1e-2, 1e-3]
    assert (tmp_path / "ens-sigma_w0.01.nc").is_file()
    assert (tmp_path / "ens-sigma_w0.001.nc").is_file()
    assert seen[-1] == 6 and max(seen) == 6
    fr = sw.fractions()
    assert [v["n"] for v in fr["branch_plus"]] == [3, 3]
    assert sum(v[0]["count"] for v in fr.values()) == 3
    # the smaller start escapes later (Lemma 5.2's logistic from a smaller s0)
    assert sw.runs[1].escape["measured_median"] > sw.runs[0].escape["measured_median"]
    # each run is the ensemble of its σ_w, run alone
    alone = wf.run(wf.Config(d=2, T=6, n=3, sigma_w=1e-3, **FAST))
    assert sw.runs[1].to_dict()["fractions"] == alone.to_dict()["fractions"]
    assert all(r.reused for r in sweep_sigma(cfg, [1e-2, 1e-3]).runs)
    obj = json.loads(json.dumps(sw.to_dict()))
    assert obj["sigma_w"] == [0.01, 0.001] and obj["status"] == "converged"
    assert [r["n"] for r in obj["runs"]] == [3, 3]


def test_a_failed_ensemble_fails_the_sweep() -> None:
    sw = sweep_sigma(wf.Config(d=2, T=6, n=2, max_steps=3, **FAST), "1e-2,1e-3")
    assert sw.status is Outcome.MAX_STEPS and sw.exit_code == 1
    assert sw.message.startswith("σ_w=0.01: 2 of 2 trajectories failed")


def test_sigma_out() -> None:
    assert sigma_out("runs/ens.nc", 1e-4) == "runs/ens-sigma_w0.0001.nc"
    assert sigma_out(None, 1e-4) is None


@pytest.mark.parametrize("values,match", [
    ("", "at least one"), ("1e-2,0", "sigma_w"), ("1e-2,1e-2", "differ"),
    ("x", "numbers, got 'x'"), ("1e-2,,1e-4", "an empty entry"), ("1e-2,", "an empty entry"),
    ("1e-2,nan", "'nan'"), ([], "at least one"), (3, "a list of numbers"),
])
def test_sweep_bad_values(values, match) -> None:
    with pytest.raises(MesadynError, match=match):
        sigma_values(values)
    with pytest.raises(MesadynError, match=match):
        sweep_sigma(wf.Config(d=2, T=6, n=2), values)


def test_sweep_needs_the_gaussian_init() -> None:
    with pytest.raises(MesadynError, match="init='gaussian'"):
        sweep_sigma(wf.Config(d=2, T=6, init="grid", grid_a="1", grid_b="1"), "1e-2,1e-3")

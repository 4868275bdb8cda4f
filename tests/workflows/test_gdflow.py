"""``mesadyn.workflows.gdflow``: the summary against the trajectories it returns, Table 1's step
size, the spread study, progress, bad input naming its value, numbers reproducible to the bit,
and the run file that rebuilds and reruns its configuration alone."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from mesadyn.analysis.gd_flow import gd_iterates
from mesadyn.errors import MesadynError
from mesadyn.field import make_field
from mesadyn.workflows import gdflow as wf

SMALL = dict(d=2, T=6, lr=2e-3, steps=30, m=40)


def test_summary_matches_the_trajectories_and_is_json():
    seen: list[float] = []
    cfg = wf.Config(**SMALL, spread_m="20,80", spread_seeds=3)
    res = wf.run(cfg, progress=seen.append)
    obj = json.loads(json.dumps(res.to_dict()))
    assert obj["lr"] == 2e-3 and obj["steps"] == 30 and obj["tau_end"] == pytest.approx(0.06)
    assert set(res.comparisons) == {"exact", "finite"}
    for name in ("exact", "finite"):
        comp = res.comparisons[name]
        block = obj[name]
        g_flow, g_mod = comp.gap_curves()
        assert block["gap_flow"]["max_abs"] == pytest.approx(g_flow.max())
        assert block["gap_modified"]["max_abs"] == pytest.approx(g_mod.max())
        assert block["ratio"] == pytest.approx(g_flow.max() / g_mod.max())
        assert block["ratio"] > 5
    assert obj["finite"]["m"] == 40 and obj["finite"]["field"]["field"] == "finite"
    # the finite comparison's GD is GD on the training set of (m, seed)
    fld = make_field(cfg.field_spec("finite", m=40, seed=cfg.seed))
    np.testing.assert_array_equal(res.comparisons["finite"].gd,
                                  gd_iterates(fld, res.comparisons["finite"].gd[0], 2e-3, 30))
    spread = obj["spread"]
    assert spread["m"] == [20, 80] and spread["seeds"] == 3
    assert len(spread["spread"]) == 2 and all(s > 0 for s in spread["spread"])
    assert np.isfinite(spread["fit"]["slope"]) and spread["fit"]["dof"] == 0
    assert seen and seen == sorted(seen) and seen[-1] == 1.0 and min(seen) >= 0


def test_table1_step_size_and_skipping_the_finite_field():
    cfg = wf.Config(x1="sparse", scale=1.0, d=2, T=6, steps=5, m=0)
    assert cfg.step_size() == 1e-3
    res = wf.run(cfg)
    assert res.lr == 1e-3 and res.finite is None and res.spread is None
    assert set(res.comparisons) == {"exact"}


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(sigma=0.7), "Table 1 has no step size"),
    (dict(lr=0.0), "lr"),
    (dict(lr=1e-3, steps=0), "steps"),
    (dict(lr=1e-3, m=-1), "m"),
    (dict(lr=1e-3, spread_m="100"), "at least two sizes"),
    (dict(lr=1e-3, spread_m="100,abc"), "spread_m must be integers"),
    (dict(lr=1e-3, spread_m="100,100"), "repeated"),
    (dict(lr=1e-3, spread_m="10,20", spread_seeds=2), "spread_seeds"),
    (dict(lr=1e-3, solver="LSODA"), "implicit"),
    (dict(lr=1e-3, solver="euler"), "euler"),
    (dict(lr=1e-3, mask="upper"), "mask"),
    # the exact Haar field exists up to d = 5 (noiseless): beyond its reach it is refused
    (dict(lr=1e-3, rotation="haar", noise=0.1), "noise=0.1"),
])
def test_bad_input_names_the_value(kwargs, match):
    with pytest.raises(MesadynError, match=match):
        wf.Config(d=2, T=6, **kwargs)


def _numbers(res: wf.Result) -> dict:
    return {k: v for k, v in res.to_dict().items() if k != "cpu_s"}


def test_every_number_is_reproducible_to_the_bit():
    """η λ_max comes from Lanczos (ARPACK) with a fixed start and fixed restarts: two runs (and
    a third after other eigensolves) give the same bits; and it is the largest eigenvalue of
    the free Hessian at the GD iterate, computed densely."""
    from mesadyn.analysis.gd_flow import sharpness
    from mesadyn.model import free_mask

    cfg = wf.Config(**SMALL)
    first, second = wf.run(cfg), wf.run(cfg)
    assert _numbers(first) == _numbers(second)
    comp = first.comparisons["exact"]
    fld = make_field(cfg.field_spec("exact"))
    sharpness(fld, comp.gd[0])  # another solve in between changes nothing
    assert _numbers(wf.run(cfg)) == _numbers(first)
    free = free_mask(None, 2)
    for k, value in comp.sharpness:
        H = fld.hessian(comp.gd[k]).numpy()[np.ix_(free, free)]
        assert value == pytest.approx(2e-3 * np.linalg.eigvalsh(H)[-1], rel=1e-7)


@pytest.mark.parametrize("options", [
    {"radius": 0.9},
    {"x1": "shifted", "mu": 0.2},
])
def test_rerun_from_the_run_file_reproduces_the_numbers(tmp_path, options):
    """A non-default data model is recorded; ``Config.from_run`` rebuilds the run from the
    file alone, ``rerun`` reproduces every number, and the file holds the trajectories."""
    from mesadyn.io import load_run, run_config
    from mesadyn.workflows import rerun

    out = tmp_path / "g.nc"
    cfg = wf.Config(**SMALL, out=str(out), **options)
    first = wf.run(cfg)
    assert first.ok
    stored = run_config(load_run(out, "gdflow"))
    assert all(stored[k] == v for k, v in options.items())
    again = wf.Config.from_run(out)
    assert again == dataclasses.replace(cfg, out=None)
    check = rerun(out)
    assert check.ok and check.differences == (), check.message
    ds = load_run(out)
    for name in ("exact", "finite"):
        comp = first.comparisons[name]
        np.testing.assert_array_equal(ds[f"theta_gd_{name}"].values, comp.gd)
        np.testing.assert_array_equal(ds[f"gap_flow_{name}"].values, comp.gap_curves()[0])
    np.testing.assert_array_equal(ds["tau"].values, 2e-3 * np.arange(31))

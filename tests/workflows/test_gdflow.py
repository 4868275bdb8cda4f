"""``mesadyn.workflows.gdflow`` (issue 15 item 5): the summary against the trajectories it
returns, Table 1's step size, the spread study, progress, and bad input naming its value."""

from __future__ import annotations

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
    (dict(lr=1e-3, rotation="haar"), "rotation"),
])
def test_bad_input_names_the_value(kwargs, match):
    with pytest.raises(MesadynError, match=match):
        wf.Config(d=2, T=6, **kwargs)

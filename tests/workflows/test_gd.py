"""``mesadyn.workflows.gd``: each mode's numbers against the analysis it wraps or a closed
form (the reduced map's flip at 1/c2 and its 2-cycle; the batched classifier for the
regime), divergence as a typed outcome, bad input naming its value, strict JSON and the run
file that rebuilds its configuration."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mesadyn.analysis.gd_batch import reduced_regimes
from mesadyn.analysis.gd_orbits import reduced_period2
from mesadyn.errors import MesadynError
from mesadyn.io import to_json
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian
from mesadyn.theory import constants
from mesadyn.workflows import gd as wf

C = constants(gaussian(3, 1.0), 20)


def strict(obj: dict) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"non-finite number {name} in the JSON")

    return json.loads(to_json(obj), parse_constant=refuse)


def test_run_mode_catapult_and_its_keys():
    res = wf.run(wf.Config(eta=5e-3, a0=0.5, b0=1.5, steps=300))
    obj = strict(res.to_dict())
    assert obj["mode"] == "run" and obj["regime"] == "catapult" and obj["status"] == "ok"
    for key in ("diverged_step", "loss", "ab", "ab_star", "delta_ab_start", "delta_ab_end",
                "invariant_drift", "invariant_drift_error", "offdiag_end",
                "eta_lambda_max_start", "eta_lambda_max_end", "critical_step",
                "reduced_critical_step", "top_mode_diagonal", "top_mode_blocks"):
        assert key in obj
    assert "limits" not in obj and "branch" not in obj
    assert res.run is not None and res.trace is not None
    assert res.run.ab == pytest.approx(C.ab_star, rel=1e-9)
    assert res.run.critical_step == pytest.approx(2 / float(res.trace.sharpness[-1]), rel=1e-9)
    assert res.run.invariant_drift_error < 1e-10
    assert res.to_dataset().sizes["step"] == 301


@pytest.mark.parametrize(("eta", "a0", "b0"), [(0.5, 0.3, 0.9), (1.2, 0.9, 0.9),
                                                (1.9, 0.9, 0.9), (0.9, 2.0, 0.1)])
def test_reduced_run_regime_is_the_batch_s(eta, a0, b0):
    s = math.sqrt(C.ab_star)
    cfg = wf.Config(reduced=True, eta=eta / C.c2, a0=a0 * s, b0=b0 * s, steps=400)
    res = wf.run(cfg)
    batch = reduced_regimes(cfg.eta, cfg.a0, cfg.b0, C.c1, C.c2, 400)
    assert res.run is not None and res.run.regime == batch.regimes()[0].value


def test_limits_mode():
    res = wf.run(wf.Config(mode="limits", eta=1.05e-2))
    lim = res.limits
    assert lim is not None and res.status is Outcome.OK
    assert lim.base.critical_step == pytest.approx(2 / lim.base.lambda_max)
    assert lim.base.reduced_critical_step == pytest.approx(1 / C.c2, rel=1e-12)
    assert lim.flattest.eta_max == pytest.approx(0.011200925588, rel=1e-9)
    assert lim.stable_alpha is not None and "off-diagonal" in res.message
    assert strict(res.to_dict())["limits"]["flattest"]["kind"] == "balanced"


def test_orbit_mode_flip_and_branch_on_the_reduced_map():
    res = wf.run(wf.Config(mode="orbit", reduced=True, eta_range=(0.5 / C.c2, 1.2 / C.c2)))
    assert res.status is Outcome.REACHED_END, res.message
    assert res.flip is not None and res.branch is not None
    assert abs(res.flip.eta - 1 / C.c2) <= 1e-8 * (1 / C.c2)
    assert res.branch.max_residual <= 1e-10
    for eta, x in zip(res.branch.eta, res.branch.x, strict=True):
        cyc = reduced_period2(eta, C.c1, C.c2)
        assert min(np.abs(x - cyc[0]).max(), np.abs(x - cyc[1]).max()) <= 1e-10
    assert res.to_dataset().sizes["eta"] == res.branch.points


def test_orbit_mode_newton_from_gd_s_end():
    s = math.sqrt(C.ab_star)
    eta = 1.1 / C.c2
    res = wf.run(wf.Config(mode="orbit", reduced=True, eta=eta, a0=0.95 * s, b0=0.97 * s,
                           steps=3000, period=2))
    assert res.orbit is not None and res.status is Outcome.CONVERGED
    assert res.orbit.minimal_period == 2 and res.orbit.residual <= 1e-12
    cyc = reduced_period2(eta, C.c1, C.c2)
    x = res.orbit.points[0]
    assert min(np.abs(x - cyc[0]).max(), np.abs(x - cyc[1]).max()) <= 1e-10


def test_central_mode():
    res = wf.run(wf.Config(mode="central", d=2, T=6, init="gaussian", sigma_w=0.01, eta=0.05,
                           steps=60))
    assert res.central is not None and res.status is Outcome.OK
    assert res.central.central_theta_gap_end < res.central.modified_theta_gap_end
    assert "gd_loss" in res.to_dataset()
    strict(res.to_dict())


def test_landing_mode_reduced():
    from mesadyn.analysis.gd_landing import reduced_landing

    res = wf.run(wf.Config(mode="landing", reduced=True, a0=0.5, b0=1.5,
                           eta_range=(1e-4, 3e-3), n_eta=4, steps=2000))
    want = reduced_landing(0.5, 1.5, np.geomspace(1e-4, 3e-3, 4), C.c1, C.c2)
    assert res.landing is not None
    assert res.landing.delta == pytest.approx(want.delta, rel=1e-12)
    strict(res.to_dict())


def test_divergence_is_a_typed_outcome():
    res = wf.run(wf.Config(eta=0.05, a0=2.0, b0=2.0))
    obj = strict(res.to_dict())
    assert res.status is Outcome.OK and obj["regime"] == "divergent"
    assert obj["diverged_step"] == 1 and obj["critical_step"] is None
    res = wf.run(wf.Config(eta=0.05, a0=2.0, b0=2.0, converge=True))
    assert res.status is Outcome.DIVERGED and res.exit_code == 1
    assert "did not settle" in res.message
    # a reduced run that blows up to inf: the JSON holds null with a reason, never NaN
    res = wf.run(wf.Config(reduced=True, eta=1.0, a0=2.0, b0=2.0, blowup=1e300))
    obj = strict(res.to_dict())
    assert obj["regime"] == "divergent"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"eta": 0.0}, "eta"), ({"eta": -1e-3}, "eta"), ({"eta": math.inf}, "eta"),
    ({"eta": math.nan}, "eta"), ({"mode": "orbit", "period": 0}, "period"),
    ({"mode": "landing", "eta_range": (0.2, 0.1)}, "empty"),
    ({"mode": "landing", "eta_range": (0.1, 0.1)}, "empty"),
    ({"mode": "landing"}, "eta_range"), ({"mode": "chaos"}, "mode"),
    ({"mode": "central", "reduced": True, "eta": 0.01}, "central"),
    ({"mode": "orbit", "period": 3, "eta_range": (0.001, 0.01)}, "period=2"),
    ({"sigma": 0.7}, "Table 1"), ({"steps": 0}, "steps"),
])
def test_bad_input_names_its_value(kwargs, match):
    with pytest.raises(MesadynError, match=match):
        wf.Config(**kwargs)


def test_run_file_rebuilds_its_configuration(tmp_path):
    path = tmp_path / "gd.nc"
    cfg = wf.Config(mode="limits", eta=1e-2, out=str(path))
    res = wf.run(cfg)
    assert path.exists()
    again = wf.Config.from_run(path)
    assert again.run_config() == cfg.run_config()
    assert again.eta_range is None and again.mode == "limits"
    assert res.limits is not None

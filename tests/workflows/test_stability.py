"""``mesadyn.workflows.stability``: validated Config, typed results, honest statuses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.stability import FixedPointTest, MonteCarloCheck
from mesadyn.errors import MesadynError
from mesadyn.field import FieldKind, FieldSpec, make_field
from mesadyn.process import ones
from mesadyn.theory import constants
from mesadyn.workflows import stability as wf


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MESADYN_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("options, match", [
    ({"field": "finite", "m": 0}, "m"),
    ({"field": "nope"}, "nope"),
    ({"a0": 0.5}, "both --a0 and --b0"),
    ({"a0": 0.5, "b0": 0.5, "point": "p.npy"}, "not both"),
    ({"plot": "x.jpg"}, ".pdf, .png or .svg"),
    ({"field": "mc", "samples": 10}, "samples"),
    ({"t_end": 0.0}, "t_end"),
    ({"zero_rtol": -1.0}, "zero_rtol"),
    ({"T": 2}, "T"),
    ({"x1": "cauchy"}, "cauchy"),
])
def test_config_refuses_bad_values(options, match):
    with pytest.raises(MesadynError, match=match):
        wf.Config(**{"d": 2, "T": 5, **options})


def test_config_is_frozen_and_normalised(tmp_path):
    assert wf.Config(d=2, T=5, plot=tmp_path / "s.png").plot == str(tmp_path / "s.png")
    c = wf.Config(d=2, T=5, field="mc")
    assert c.field is FieldKind.MC and c.steady_tol == wf.STEADY_TOL_MC
    with pytest.raises(AttributeError):
        c.d = 3  # type: ignore[misc]


def test_ones_typed_results_match_the_json_and_an_independent_gradient():
    seen: list[float] = []
    res = wf.run(wf.Config(x1="ones", d=2, T=5, pl=False), progress=seen.append)
    assert res.ok and res.status == "fixed_point" and seen == [1.0, 2.0, 3.0]
    fp, rel = res.fixed_point, res.released
    assert fp is not None and rel is not None
    # Proposition 4.2: the masked point is unstable in the full flow, the dense one is not
    assert fp.spectrum.n_unstable >= 1 and rel.report.spectrum.stable
    # the dense point's gradient, recomputed from a field built independently of the workflow
    field = make_field(FieldSpec("exact", ones(2), 5))
    g = field.grad(torch.as_tensor(rel.report.point.theta)).numpy()
    assert float(np.abs(g).max()) == pytest.approx(rel.report.point.grad_norm, abs=1e-15)
    assert float(np.abs(g).max()) < 1e-9
    # Theorem 4.3's ab* at the masked point
    assert fp.ab == pytest.approx(constants(ones(2), 5).ab_star, rel=1e-12)
    out = res.to_dict()
    assert out["released"]["loss_drop"] == rel.loss_drop > 0
    assert out["fixed_point"]["n_unstable"] == fp.spectrum.n_unstable
    assert "status" not in out and "failure" not in out  # the 0.1 JSON, unchanged


def test_not_a_fixed_point_is_failed_data_not_an_exception():
    res = wf.run(wf.Config(x1="gaussian", d=1, T=5, a0=1e6, b0=1e6, t_end=1e-15, pl=False))
    assert not res.ok and res.status is wf.StabilityStatus.FAILED
    assert res.fixed_point is None and res.failure is not None
    assert res.failure.test.residual > res.failure.test.tolerance
    assert res.to_dict()["status"] == "failed"


def test_z_critical_is_the_bonferroni_t_quantile():
    from scipy.stats import norm

    def check(n: int, batches: int, max_z: float) -> MonteCarloCheck:
        return MonteCarloCheck(100, batches, 0.0, 0.0, 0.0, 0.0, max_z, n)

    # many batches: Student t -> normal quantile
    assert check(24, 10**6, 0.0).z_critical == pytest.approx(norm.isf(1e-3 / 48), rel=1e-4)
    # more entries tested -> a wider band; fewer batches -> heavier tails
    assert check(150, 32, 0).z_critical > check(24, 32, 0).z_critical
    assert check(24, 8, 0).z_critical > check(24, 32, 0).z_critical
    mc_ok, mc_bad = check(24, 32, 1.0), check(24, 32, 50.0)
    assert FixedPointTest(0.3, 1e-6, mc_ok).passed
    assert not FixedPointTest(0.3, 1e-6, mc_bad).passed
    assert not FixedPointTest(math.inf, 1e-6).passed and FixedPointTest(1e-9, 1e-8).passed


def test_monte_carlo_balanced_point_passes_the_z_test():
    res = wf.run(wf.Config(x1="gaussian", d=2, T=4, field="mc", samples=512, pl=False))
    assert res.ok and res.monte_carlo is not None
    assert res.monte_carlo.max_z <= res.monte_carlo.z_critical
    assert res.fixed_point is not None and res.fixed_point.point.iterations == 0


def test_finite_field_fixed_point_is_the_minimiser_of_the_finite_loss():
    """Issue 18 item 5: the finite-sample loss's own fixed point, found by its flow from the
    exact balanced point and polished by Newton, checked against an independent evaluation of
    the same finite loss (its gradient by autodiff through the direct path)."""
    cfg = wf.Config(x1="gaussian", d=2, T=6, field="finite", m=200, seed=3)
    res = wf.run(cfg)
    assert res.ok and res.fixed_point is not None
    assert res.field["field"] == "finite" and res.field["m"] == 200
    theta = torch.as_tensor(res.fixed_point.point.theta)
    fin = make_field(FieldSpec("finite", cfg.family(), 6, m=200, seed=3))
    g = fin.direct_loss_and_grad(theta)[1]
    assert float(g.abs().max()) < 1e-8
    # not the exact loss's point: the draws move it by O(1/sqrt m)
    exact = make_field(FieldSpec("exact", cfg.family(), 6))
    assert float(exact.grad(theta).abs().max()) > 1e-4
    sp = res.fixed_point.spectrum
    assert sp.n_unstable == 0
    assert "finite" in res.to_dict()["field"]["field"]


def test_finite_field_from_a_point_file_flows_to_the_same_minimiser(tmp_path):
    """``point`` with the finite field (e.g. GD's end): the flow of the same finite loss from it
    reaches the minimiser that the default (flow from the balanced point) finds."""
    from mesadyn.model import diagonal_init

    base = wf.run(wf.Config(x1="gaussian", d=2, T=6, field="finite", m=200, seed=3))
    path = tmp_path / "p.npy"
    np.save(path, diagonal_init(2, 0.5, 0.3).numpy())
    res = wf.run(wf.Config(x1="gaussian", d=2, T=6, field="finite", m=200, seed=3,
                           point=str(path)))
    assert res.ok and "flow of the finite-sample loss from file" in res.source
    assert res.fixed_point.point.loss == pytest.approx(base.fixed_point.point.loss, rel=1e-12)
    assert res.fixed_point.ab == pytest.approx(base.fixed_point.ab, rel=1e-8)

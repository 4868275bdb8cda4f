"""``mesadyn.workflows.stability``: validated Config, typed results, honest outcomes (a saddle
the steady-state test stopped at is left, or reported), and the run file that rebuilds and
reruns its configuration alone."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.stability import FixedPointTest, MonteCarloCheck
from mesadyn.errors import MesadynError
from mesadyn.field import FieldKind, FieldSpec, make_field
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian, ones
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
    assert res.ok and res.status is Outcome.FIXED_POINT and seen == [1.0, 2.0, 3.0]
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
    assert out["status"] == "fixed_point" and "failure" not in out  # the 0.1 JSON + status


def test_not_a_fixed_point_is_failed_data_not_an_exception():
    res = wf.run(wf.Config(x1="gaussian", d=1, T=5, a0=1e6, b0=1e6, t_end=1e-15, pl=False))
    assert not res.ok and res.status is Outcome.FAILED and res.exit_code == 1
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


def test_a_start_at_the_saddle_leaves_it_for_the_minimum():
    """``a0 = b0 = 1e-12``: the gradient there (~c2·1e-12) is below the steady-state test, so
    the flow stops at τ = 0 by the saddle at θ = 0 (Lemma 5.2: eigenvalues ±c2); the workflow
    continues it without the test and analyses the minimum it reaches (Theorem 4.1's ab*)."""
    res = wf.run(wf.Config(x1="gaussian", d=2, T=5, a0=1e-12, b0=1e-12, pl=False))
    assert res.status is Outcome.FIXED_POINT and res.ok
    assert "saddle" in res.message and "continued" in res.message
    fp = res.fixed_point
    assert fp is not None and fp.spectrum.n_unstable == 0
    assert fp.ab == pytest.approx(constants(gaussian(2, 1.0), 5).ab_star, rel=1e-9)


def test_a_flow_that_ends_at_the_saddle_says_so():
    """From the saddle's stable manifold a = −b the flow goes to θ = 0 and stays there, with or
    without the steady-state test: the outcome is ``saddle`` (exit 1), not ``fixed_point``."""
    res = wf.run(wf.Config(x1="gaussian", d=2, T=5, a0=1e-6, b0=-1e-6, pl=False,
                           t_end=50.0))
    assert res.status is Outcome.SADDLE and not res.ok and res.exit_code == 1
    assert "saddle" in res.message
    fp = res.fixed_point
    assert fp is not None and abs(fp.ab) < 1e-12 and fp.spectrum.n_unstable >= 1
    # the Hessian at θ = 0, computed independently: eigenvalues ±c2 on the diagonal pair
    field = make_field(FieldSpec("exact", gaussian(2, 1.0), 5))
    ev = np.linalg.eigvalsh(field.hessian(torch.zeros(72, dtype=torch.float64)).numpy())
    assert ev.min() < 0 < ev.max()
    assert res.to_dict()["status"] == "saddle"


@pytest.mark.parametrize("options", [
    {"radius": 0.9},
    {"x1": "shifted", "mu": 0.2, "a0": 0.3, "b0": 0.4},
    {"x1": "mixture", "mixture": "0.5:gaussian,0.5:rademacher"},
    {"field": "mc", "samples": 512, "radius": 0.9, "T": 4},
])
def test_rerun_from_the_run_file_reproduces_the_numbers(tmp_path, options):
    """A non-default data model is recorded in the run file; ``Config.from_run`` rebuilds the
    run from the file alone and ``rerun`` reproduces every number (1e-10 relative)."""
    from mesadyn.io import load_run, run_config
    from mesadyn.workflows import load_point, rerun

    out = tmp_path / "s.nc"
    cfg = wf.Config(**{"d": 2, "T": 5, "pl": False, "out": str(out), **options})
    first = wf.run(cfg)
    assert first.ok, first.message
    stored = run_config(load_run(out, "stability"))
    assert all(stored[k] == v for k, v in options.items())
    again = wf.Config.from_run(out)
    assert again == dataclasses.replace(cfg, out=None)
    check = rerun(out)
    assert check.ok and check.differences == (), check.message
    # the run file holds θ of the analysed points, the last one last; --point reads it back
    points = [first.fixed_point.point] + (
        [first.released.report.point] if first.released is not None else [])
    ds = load_run(out)
    assert list(ds["point"].values) == ["fixed_point", "released"][:len(points)]
    np.testing.assert_array_equal(ds["theta"].values, np.stack([p.theta for p in points]))
    np.testing.assert_array_equal(load_point(out, 2), points[-1].theta)

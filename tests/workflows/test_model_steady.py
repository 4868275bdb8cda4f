"""A model's flow to its fixed point: the flow decides the basin, Newton polishes
(:func:`mesadyn.workflows._model_flow.model_steady`).

- on a Monte-Carlo field of the two-layer model the flow hands its point to Newton, and the
  end is the fixed point a plain long flow goes to: the same loss to 1e-10 and the same θ up to
  the orbit of the model's symmetries (the difference lies in the span of the declared
  tangents to 1e-6), with ``max|∇L|`` below ``steady_tol`` by a fresh gradient;
- the flow's ``on_steady`` hook goes on at the level it returns and stops at 0;
- exact, difference and updated-difference Jacobians give one path (the Jacobian drives
  BDF's Newton iteration, not the accuracy), the updates at a lower cost;
- ``integrate`` and ``stability`` take a model's sampled fields through it and report
  where the flow stopped, what Newton did and the curvature across the orbits; a run file
  reruns to the same numbers;
- near a saddle the handoff is declined (negative curvature there) and the flow goes on; the
  exact field keeps its own path (exact Hessian, the flow alone).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from mesadyn.analysis.model_fixedpoint import symmetry_basis
from mesadyn.field import Field, FieldSpec, make_field
from mesadyn.models import DeepLinearAttention
from mesadyn.process import gaussian
from mesadyn.workflows import integrate, rerun, stability
from mesadyn.workflows._model_flow import model_flow, model_steady
from mesadyn.workflows._model_runs import ModelStabilityResult

MODEL = DeepLinearAttention(2)


def _mc(d: int = 1, T: int = 5, samples: int = 64) -> Field:
    return make_field(FieldSpec("mc", gaussian(d, 1.0), T, model=MODEL, samples=samples))


def test_newton_ends_where_the_flow_goes() -> None:
    fld = _mc()
    free = MODEL.free_mask("none", 1)
    theta0 = MODEL.diagonal_init(1, 0.3, 0.4).numpy()
    kw = dict(t_end=1e5, solver="auto", rtol=1e-6, atol=1e-9, max_steps=10**5, n_save=20)
    run = model_steady(fld, MODEL, theta0, free, steady_tol=1e-9, **kw)  # type: ignore[arg-type]
    plain = model_flow(fld, theta0, free, steady_tol=1e-9, jacobian="updated",
                       **kw)  # type: ignore[arg-type]
    assert run.status.value == "converged" and plain.status.value == "converged"
    assert run.newton is not None and run.newton.converged and run.newton.iterations >= 1
    assert run.t_flow < float(plain.t[-1]) and run.flow_grad_max >= 1e-9
    g = fld.loss_and_grad(torch.from_numpy(run.theta))[1].numpy()
    assert np.abs(g[free]).max() == pytest.approx(run.grad_max) and run.grad_max < 1e-9
    assert abs(run.loss - float(plain.loss[-1])) <= 1e-10
    diff = (run.theta - plain.final)[free]
    U = symmetry_basis(MODEL, plain.final, free)
    assert np.abs(diff - U @ (U.T @ diff)).max() <= 1e-6
    assert run.curvature is not None and run.curvature.kind.value == "minimum"
    assert run.hessians == 1 and run.hessian is not None  # the verdict's, exact
    assert run.gradients >= plain.nfev // 4 and run.jacobians >= 1


def test_the_steady_hook_sets_the_level() -> None:
    fld = _mc()
    free = MODEL.free_mask("none", 1)
    seen: list[float] = []

    def hook(t: float, th: np.ndarray, L: float, gmax: float) -> float:
        seen.append(gmax)
        return 1e-4 if len(seen) == 1 else 0.0

    p = model_flow(fld, MODEL.diagonal_init(1, 0.3, 0.4).numpy(), free, t_end=1e5,
                   solver="auto", rtol=1e-6, atol=1e-9, steady_tol=1e-2, max_steps=10**5,
                   n_save=5, jacobian="differences", on_steady=hook)
    assert len(seen) == 2 and seen[0] < 1e-2 and seen[1] < 1e-4
    assert p.status.value == "converged" and float(p.grad_max[-1]) == seen[1]
    assert p.jacobian.value == "differences" and p.jacobian_gradients == 2 * 22 * p.njev


def test_the_jacobian_changes_the_cost_not_the_path() -> None:
    """The Jacobian drives BDF's Newton iteration only: exact, differences and updated
    differences end at one point (to the path's tolerance), the updates with fewer
    gradients for Jacobians than full differences."""
    fld = _mc()
    free = MODEL.free_mask("none", 1)
    theta0 = MODEL.diagonal_init(1, 0.3, 0.4).numpy()
    ends = {kind: model_flow(fld, theta0, free, t_end=1.0, solver="auto", rtol=1e-7,
                             atol=1e-10, steady_tol=0.0, max_steps=10**5, n_save=2,
                             jacobian=kind)
            for kind in ("exact", "differences", "updated")}
    ref = ends["exact"].final
    for kind, p in ends.items():
        assert p.status.value == "t_end" and p.jacobian.value == kind
        assert np.abs(p.final - ref).max() <= 1e-5 * max(1.0, float(np.abs(ref).max()))
    assert ends["exact"].jacobian_gradients == 0
    assert 0 < ends["updated"].jacobian_gradients < ends["differences"].jacobian_gradients


def test_integrate_takes_a_sampled_model_field_to_its_fixed_point(tmp_path: Path) -> None:
    cfg = integrate.Config(model="deep", layers=2, d=1, T=5, field="mc", samples=64,
                           a0=0.3, b0=0.4, rtol=1e-6, atol=1e-9, steady_tol=1e-9,
                           out=str(tmp_path / "i.nc"))
    res = integrate.run(cfg)
    assert isinstance(res, integrate.ModelFlowResult)
    out = res.to_dict()
    assert res.status.value == "converged" and res.grad_norm < 1e-9
    assert out["newton"]["converged"] and out["newton"]["residuals"][-1] == res.grad_norm
    assert out["flow_grad_norm"] > res.grad_norm and out["curvature"]["kind"] == "minimum"
    assert out["gradients"] > out["nfev"] and out["hessians"] == 1
    assert out["jacobian"] == "updated"
    fld = _mc()
    assert res.final_theta is not None
    L, g = fld.loss_and_grad(torch.from_numpy(res.final_theta))
    assert math.isclose(float(L), res.loss, rel_tol=1e-12)
    assert float(g.abs().max()) == pytest.approx(res.grad_norm)
    again = rerun(tmp_path / "i.nc")
    assert again.ok, again.message


def test_stability_takes_a_sampled_model_field() -> None:
    res = stability.run(stability.Config(model="deep", layers=2, d=1, T=5, field="mc",
                                         samples=64, a0=0.3, b0=0.4))
    assert isinstance(res, ModelStabilityResult)
    assert res.status.value == "fixed_point" and res.grad_norm < 1e-10
    spec = res.spectrum
    assert spec is not None and spec.n_unstable == 0
    assert spec.symmetry == spec.declared == 4 and spec.unexplained == 0
    fld = make_field(FieldSpec("mc", gaussian(1, 1.0), 5, model=MODEL, samples=64))
    assert res.theta is not None
    g = fld.loss_and_grad(torch.from_numpy(res.theta))[1]
    assert float(g.abs().max()) == pytest.approx(res.grad_norm)
    assert res.to_dict()["newton"]["converged"] and res.hessians == 1


def test_a_handoff_near_a_saddle_is_declined() -> None:
    fld = make_field(FieldSpec("exact", gaussian(1, 1.0), 4, model=MODEL))
    free = MODEL.free_mask("none", 1)
    run = model_steady(fld, MODEL, MODEL.diagonal_init(1, 0.5, 1.5).numpy(), free,
                       t_end=1e3, solver="auto", rtol=1e-6, atol=1e-9, steady_tol=1e-10,
                       max_steps=10**5, n_save=5, jacobian="differences")
    # the exact two-layer flow from (0.5, 1.5) converges to a saddle (−0.0375 across the
    # orbits): every handoff on the way is declined, and the flow gets there by itself
    assert run.status.value == "saddle" and run.newton is None and run.grad_max < 1e-10
    assert run.declined and all("negative curvature" in why for why in run.declined)
    assert run.curvature is not None
    assert run.curvature.lambda_min == pytest.approx(-0.0375, abs=1e-3)
    # integrate keeps the exact field's own path: the exact Hessian, the flow alone
    res = integrate.run(integrate.Config(model="deep", layers=2, d=1, T=4, rtol=1e-6,
                                         atol=1e-9, steady_tol=1e-10))
    assert isinstance(res, integrate.ModelFlowResult)
    assert res.jacobian == "exact" and res.newton is None and not res.handoffs_declined
    assert res.status.value == "saddle" and res.curvature is not None
    assert res.loss == pytest.approx(run.loss, rel=1e-10)

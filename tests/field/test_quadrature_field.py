"""The exact field by quadrature (:mod:`mesadyn.field._quadrature_field`) against independent
computations.

- for the paper's model it is :class:`~mesadyn.field.ExactField` (the moment-tensor counting)
  to 1e-12: loss, gradient, HVP and Hessian, every family with a rule, d <= 3, small T, and
  with the radius r != 1;
- doubling every grid (token nodes and angles, the folds off) changes no number beyond 1e-13
  relative, for the two-layer model;
- the rule: weights sum to 1, the stated points are the sequences built, the token rules match
  the families' moments;
- ``FieldSpec('exact', ..., model=...)`` builds it; softmax, a rule below the integrand's
  degree and a family without a rule are one-line errors naming the value.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from field_cases import FAMILIES, rel

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField, FieldSpec, make_field
from mesadyn.field._quadrature_field import QuadratureField, quadrature_plan, token_rule
from mesadyn.model import gaussian_init
from mesadyn.models import PAPER, DeepLinearAttention, SoftmaxAttention
from mesadyn.process import (
    gaussian,
    sampled,
    uniform,
)


@pytest.mark.parametrize(("d", "T"), [(1, 6), (2, 5), (3, 4)])
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_paper_model_is_the_exact_field(name: str, d: int, T: int) -> None:
    fam = FAMILIES[name](d)
    quad, exact = QuadratureField(PAPER, fam, T), ExactField(fam, T)
    th, v = gaussian_init(d, 0.5, 3), gaussian_init(d, 0.5, 4)
    L, g = quad.loss_and_grad(th)
    L0, g0 = exact.loss_and_grad(th)
    assert math.isclose(float(L), float(L0), rel_tol=1e-12)
    assert rel(g, g0) <= 1e-12
    assert rel(quad.hvp(th, v), exact.hvp(th, v)) <= 1e-12
    if d <= 2:
        assert rel(quad.hessian(th), exact.hessian(th)) <= 1e-12


def test_paper_model_with_a_radius() -> None:
    d, T, r = 2, 5, 0.8
    fam = gaussian(d, 0.9)
    quad, exact = QuadratureField(PAPER, fam, T, radius=r), ExactField(fam, T, radius=r)
    th = gaussian_init(d, 0.5, 6)
    L, g = quad.loss_and_grad(th)
    L0, g0 = exact.loss_and_grad(th)
    assert math.isclose(float(L), float(L0), rel_tol=1e-12) and rel(g, g0) <= 1e-12
    assert quad.describe()["radius"] == r


@pytest.mark.parametrize("name", ["gaussian", "uniform", "sparse", "rademacher"])
def test_doubling_every_grid_changes_nothing(name: str) -> None:
    """Twice the token nodes (Gauss rules), twice the angles, no folding: the same numbers."""
    d, T = 2, 4
    model = DeepLinearAttention(2)
    fam = FAMILIES[name](d)
    th = model.gaussian_init(d, 0.3, 8)
    base = QuadratureField(model, fam, T)
    nodes = None if base.plan.token.degree is None else 2 * math.ceil(
        (base.plan.token.degree + 1) / 2)
    fine = QuadratureField(model, fam, T, nodes=nodes, n_angles=2 * base.plan.n_angles,
                           fold=False)
    assert fine.plan.points > base.plan.points
    L, g = base.loss_and_grad(th)
    L2, g2 = fine.loss_and_grad(th)
    assert math.isclose(float(L), float(L2), rel_tol=1e-13)
    assert rel(g, g2) <= 1e-13


def test_the_rule_is_what_the_plan_states() -> None:
    model, fam, T = DeepLinearAttention(2), gaussian(2, 0.9), 4
    plan = quadrature_plan(model, fam, T)
    assert plan.n_angles == model.phase_degree(T) + 1 == 19
    assert plan.token.degree is not None and plan.token.degree >= 18
    quad = QuadratureField(model, fam, T)
    pieces = list(quad._weighted())
    assert sum(len(w) for _, w in pieces) == plan.points
    assert math.isclose(float(sum(w.sum() for _, w in pieces)), 1.0, rel_tol=1e-13)
    assert quad.describe()["points"] == plan.points and "points" in plan.summary()
    assert quad.describe()["model"] == "deep" and quad.describe()["layers"] == 2


@pytest.mark.parametrize("name", ["gaussian", "uniform", "rademacher", "sparse"])
def test_token_rules_have_the_family_moments(name: str) -> None:
    """Per coordinate, E[x^j] of the rule is the family's for j <= 6 (the exact moments of
    :meth:`~mesadyn.process.Family` where it has them)."""
    fam = FAMILIES[name](2)
    rule = token_rule(fam, 12)
    assert math.isclose(rule.weights.sum(), 1.0, rel_tol=1e-14)
    ref = {"gaussian": [1, 0, 0.81, 0, 3 * 0.81**2, 0, 15 * 0.81**3],
           "uniform": [1, 0, 1 / 3, 0, 1 / 5, 0, 1 / 7],
           "rademacher": [1, 0, 1, 0, 1, 0, 1],
           "sparse": [1, 0, 1.44 / 2, 0, 1.2**4 / 2, 0, 1.2**6 / 2]}[name]
    for j, want in enumerate(ref):
        got = float((rule.weights * rule.nodes[:, 0] ** j).sum())
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-14)


def test_field_spec_builds_the_quadrature_field() -> None:
    model = DeepLinearAttention(2)
    spec = FieldSpec("exact", gaussian(2, 0.9), 4, model=model)
    field = make_field(spec, reuse=False)
    assert isinstance(field, QuadratureField) and field.model == model
    assert spec.describe()["model"] == "deep" and spec.describe()["layers"] == 2
    assert spec != FieldSpec("exact", gaussian(2, 0.9), 4)
    assert field.n_params == 36 * 4
    paper = FieldSpec("exact", gaussian(2, 0.9), 4, model=PAPER)
    assert paper == FieldSpec("exact", gaussian(2, 0.9), 4)
    assert paper.describe() == FieldSpec("exact", gaussian(2, 0.9), 4).describe()
    assert isinstance(make_field(paper, reuse=False), ExactField)


def test_bad_input_names_the_value() -> None:
    with pytest.raises(MesadynError, match="softmax"):
        FieldSpec("exact", gaussian(2, 1.0), 4, model=SoftmaxAttention())
    with pytest.raises(MesadynError, match="softmax"):
        QuadratureField(SoftmaxAttention(), gaussian(2, 1.0), 4)
    with pytest.raises(MesadynError, match="nodes=3"):
        QuadratureField(DeepLinearAttention(2), gaussian(2, 1.0), 4, nodes=3)
    with pytest.raises(MesadynError, match="rotation=real"):
        FieldSpec("exact", gaussian(2, 1.0), 4, model=DeepLinearAttention(2),
                  rotation="real")
    with pytest.raises(MesadynError, match="model must be"):
        FieldSpec("mc", gaussian(2, 1.0), 4, model="deep")  # type: ignore[arg-type]
    fam = sampled(2, lambda n, g, dev: torch.randn(n, 2, generator=g, dtype=torch.float64))
    with pytest.raises(MesadynError, match="no quadrature rule"):
        QuadratureField(DeepLinearAttention(2), fam, 4)
    with pytest.raises(MesadynError, match="points"):
        QuadratureField(DeepLinearAttention(3), gaussian(3, 1.0), 8)


def test_hessian_is_symmetric_and_matches_hvps() -> None:
    model, d = DeepLinearAttention(2), 1
    quad = QuadratureField(model, uniform(d), 4)
    th, v = model.gaussian_init(d, 0.4, 2), model.gaussian_init(d, 0.4, 3)
    H = quad.hessian(th)
    assert torch.allclose(H, H.T, rtol=0, atol=1e-14 * float(H.abs().max()))
    assert rel(H @ v, quad.hvp(th, v)) <= 1e-12
    act = torch.from_numpy(model.active_mask(d))
    assert float(H[~act].abs().max()) == 0.0
    assert np.isfinite(H.numpy()).all()


def test_a_priced_plan_is_the_plan_the_field_builds() -> None:
    """A workflow prices a run by its plan, then builds the field: the rule is formed once
    (the same frozen plan), and other arguments form another."""
    from mesadyn.process import rademacher

    model = DeepLinearAttention(2)
    plan = quadrature_plan(model, rademacher(1), 4)
    assert QuadratureField(model, rademacher(1), 4).plan is plan
    assert quadrature_plan(model, rademacher(1), 5) is not plan
    assert quadrature_plan(model, rademacher(1), 4, fold=False).points > plan.points


def test_a_rule_beyond_its_reach_is_refused_before_it_is_formed() -> None:
    """Eight layers (a loss of degree 2·3⁸ in x_1) would need 6562 Gauss nodes per coordinate:
    one line, at once, instead of an eigenvalue problem of that size."""
    from mesadyn.field._quadrature_field import MAX_RULE_NODES

    with pytest.raises(MesadynError, match=f"6562 nodes per coordinate.*{MAX_RULE_NODES}"):
        quadrature_plan(DeepLinearAttention(8), gaussian(1), 4)
    with pytest.raises(MesadynError, match="nodes per coordinate"):
        token_rule(uniform(3), 2 * 3**5 + 2 * 200)

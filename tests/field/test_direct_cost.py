"""The one cost rule of a model's direct-form fields (``mesadyn.field.direct_cost``) and the
workflows' use of it (``workflows._cost.model_cost``): which constant prices which path, and
over which rows.  (What the constants are is measured in ``benchmarks/bench_models.py``.)"""

from __future__ import annotations

import pytest

from mesadyn.field import FieldSpec, direct_cost, quadrature_plan
from mesadyn.field._direct_cost import AUTOGRAD_UNIT, FUSED_UNIT, HVP_UNIT
from mesadyn.models import DeepLinearAttention, SoftmaxAttention
from mesadyn.process import gaussian, rademacher
from mesadyn.workflows._cost import model_cost


def test_the_fused_gradient_prices_deep_linear_attention_and_autograd_the_rest() -> None:
    deep, soft = direct_cost(DeepLinearAttention(2), 4, 11, 100), direct_cost(
        SoftmaxAttention(), 4, 11, 100)
    units = 100 * 10 * 4  # rows · (T − 1) · max(1, d²/4), times the layers below
    assert deep.gradient == pytest.approx(FUSED_UNIT * units * 2)
    assert soft.gradient == pytest.approx(AUTOGRAD_UNIT * units)
    assert deep.hvp == pytest.approx(HVP_UNIT * units * 2)
    assert deep.hessian(7) == pytest.approx(7 * deep.hvp)
    assert direct_cost(DeepLinearAttention(1), 1, 4, 10).gradient == pytest.approx(
        FUSED_UNIT * 10 * 3)  # d²/4 < 1 counts as 1


def test_a_field_is_priced_over_its_own_rows() -> None:
    model = DeepLinearAttention(2)
    exact = FieldSpec("exact", rademacher(2), 5, model=model)
    plan = quadrature_plan(model, rademacher(2), 5)
    assert model_cost(exact) == plan.cost() == direct_cost(model, 2, 5, plan.points)
    assert plan.seconds() == plan.cost().gradient
    mc = FieldSpec("mc", gaussian(2), 5, samples=640, model=model)
    finite = FieldSpec("finite", gaussian(2), 5, m=640, model=model)
    assert model_cost(mc) == model_cost(finite) == direct_cost(model, 2, 5, 640)

"""The sampled fields of any model (:mod:`mesadyn.field._model_fields`) against independent
computations.

- for the paper's model the direct-form finite field is :class:`~mesadyn.field.FiniteField`
  (same seed, same draws) to 1e-14;
- the two-layer model's Monte-Carlo estimate is within 4 standard errors of its exact field by
  quadrature (loss and every active gradient entry, random dense θ), for every family with a
  rule;
- softmax attention (no exact field): Monte-Carlo and finite fields with the same draws agree,
  both are the mean of the model's loss over :func:`~mesadyn.process.sample_sequences`;
- autodiff gradients against central differences, HVPs against differences of gradients, the
  batch methods against one θ at a time; ``make_field`` builds these fields for a model other
  than the paper's and the paper's fields otherwise.
"""

from __future__ import annotations

import math

import pytest
import torch
from field_cases import FAMILIES as FAMILIES_ALL
from field_cases import rel

from mesadyn.field import FieldSpec, FiniteField, MonteCarloField, make_field
from mesadyn.field._model_fields import FiniteModelField, MonteCarloModelField
from mesadyn.field._quadrature_field import QuadratureField
from mesadyn.field._sequences import FiniteSequenceField
from mesadyn.model import gaussian_init
from mesadyn.models import PAPER, DeepLinearAttention, SoftmaxAttention
from mesadyn.process import (
    gaussian,
    make_generator,
    sample_sequences,
    uniform,
)

FAMILIES = {name: FAMILIES_ALL[name]
            for name in ("gaussian", "rademacher", "uniform", "sparse", "ones")}



def test_paper_model_direct_is_the_finite_field() -> None:
    d, T, m = 2, 6, 500
    fam = gaussian(d, 0.9)
    ours = FiniteModelField(PAPER, fam, T, m, 5)
    ref, seq = FiniteField(fam, T, m, seed=5), FiniteSequenceField(fam, T, m, 5)
    th = gaussian_init(d, 0.5, 2)
    L, g = ours.loss_and_grad(th)
    for other in (ref, seq):
        L0, g0 = other.loss_and_grad(th)
        assert math.isclose(float(L), float(L0), rel_tol=1e-14) and rel(g, g0) <= 1e-14


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_deep_monte_carlo_against_quadrature(name: str) -> None:
    """θ entries of scale 0.2 (0.1 for gaussian tokens: the summand has degree 18 in x_1, and
    at 0.2 its heavy tail makes the batch-means standard errors too small, measured z ≈ 5–9
    at 4·10⁴ and 4·10⁵ samples, while the bounded families stay below 3)."""
    d, T = 2, 4
    model = DeepLinearAttention(2)
    fam = FAMILIES[name](d)
    th = model.gaussian_init(d, 0.1 if name == "gaussian" else 0.2, 5)
    L, g = QuadratureField(model, fam, T).loss_and_grad(th)
    est = MonteCarloModelField(model, fam, T, samples=40_000, seed=11, batches=40).estimate(th)
    assert abs(float(L - est.loss)) <= 4 * float(est.loss_se)
    act = torch.from_numpy(model.active_mask(d))
    sampled = act & (est.grad_se > 0)
    z = (g - est.grad)[sampled] / est.grad_se[sampled]
    assert float(z.abs().max()) <= 4.0
    # entries the same in every draw (sparse tokens: a zero-variance gradient) are exact
    fixed = act & (est.grad_se == 0)
    gap = (g - est.grad)[fixed].abs()
    assert float(gap.sum()) <= 1e-12 * float(g.abs().max()) * max(1, gap.numel())
    assert float(est.loss_se) < 0.05 * float(L)  # the check has power


def test_softmax_monte_carlo_and_finite_agree() -> None:
    d, T, m = 2, 6, 600
    model, fam = SoftmaxAttention(), gaussian(d, 0.9)
    th = gaussian_init(d, 0.5, 3)
    mc = MonteCarloModelField(model, fam, T, samples=m, seed=7, batches=10)
    fin = FiniteModelField(model, fam, T, m, 7, chunk=64)
    L, g = fin.loss_and_grad(th)
    est = mc.estimate(th)
    assert math.isclose(float(est.loss), float(L), rel_tol=1e-13)
    assert rel(est.grad, g) <= 1e-12
    x = sample_sequences(fam, m, T, make_generator(7), "cpu")
    assert math.isclose(float(model.sequence_loss(th, x).mean()), float(L), rel_tol=1e-13)
    # a larger independent sample is within 4 standard errors of this one's estimate
    big = MonteCarloModelField(model, fam, T, samples=8000, seed=99, batches=20).estimate(th)
    se = math.hypot(float(est.loss_se), float(big.loss_se))
    assert abs(float(est.loss - big.loss)) <= 4 * se


@pytest.mark.parametrize("model", [DeepLinearAttention(2), SoftmaxAttention()], ids=str)
def test_gradient_and_hvp_against_differences(model) -> None:  # type: ignore[no-untyped-def]
    d, T = 2, 5
    fld = FiniteModelField(model, uniform(d), T, 40, 3)
    th = model.gaussian_init(d, 0.4, 1)
    _, g = fld.loss_and_grad(th)
    gen = torch.Generator().manual_seed(4)
    v = torch.randn(th.numel(), generator=gen, dtype=torch.float64)
    h = 1e-5
    fd = (fld.loss(th + h * v) - fld.loss(th - h * v)) / (2 * h)
    assert abs(float(fd - g @ v)) <= 1e-6 * float(g.norm() * v.norm())
    hv = fld.hvp(th, v)
    fd_h = (fld.loss_and_grad(th + h * v)[1] - fld.loss_and_grad(th - h * v)[1]) / (2 * h)
    assert rel(hv, fd_h) <= 1e-6
    H = fld.hessian(th)
    assert rel(H @ v, hv) <= 1e-12


def test_batch_methods_are_one_theta_at_a_time() -> None:
    model = DeepLinearAttention(2)
    fld = FiniteModelField(model, gaussian(2, 0.9), 5, 50, 2)
    ths = torch.stack([model.gaussian_init(2, 0.3, s) for s in (1, 2)])
    Ls, Gs = fld.batch_loss_and_grad(ths)
    for i in range(2):
        L, g = fld.loss_and_grad(ths[i])
        assert math.isclose(float(Ls[i]), float(L), rel_tol=1e-13) and rel(Gs[i], g) <= 1e-13


def test_make_field_routes_by_model() -> None:
    fam, deep = gaussian(2, 0.9), DeepLinearAttention(2)
    mc = make_field(FieldSpec("mc", fam, 5, samples=100, model=deep), reuse=False)
    fin = make_field(FieldSpec("finite", fam, 5, m=100, model=deep), reuse=False)
    assert isinstance(mc, MonteCarloModelField) and mc.model == deep and mc.n_params == 144
    assert isinstance(fin, FiniteModelField) and fin.describe()["layers"] == 2
    soft = make_field(FieldSpec("finite", fam, 5, m=10, model=SoftmaxAttention(),
                                rotation="real"), reuse=False)
    assert isinstance(soft, FiniteModelField) and soft.describe()["rotation"] == "real"
    paper = make_field(FieldSpec("mc", fam, 5, samples=100, model=PAPER), reuse=False)
    assert isinstance(paper, MonteCarloField) and "model" not in paper.describe()
    with pytest.raises(Exception, match="polynomial form"):
        fin.build()

"""k-step (preconditioned) GD fits to a model's prediction and Proposition 4.1's ratio for
every model, each against an independent computation (an independent least squares, the
paper's diagonal point, Appendix B.5's two-sided step, the paper's path of
:mod:`mesadyn.analysis.incontext`).  The iterates and the fit itself: test_gd_iterates.py,
test_gd_fit.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.gd_iterates import Preconditioner, Side, gd_prediction
from mesadyn.analysis.incontext import ContextBatch, draw_test_set
from mesadyn.analysis.model_mesa import fit_gd_steps, model_incontext, model_mse, model_ratio
from mesadyn.errors import MesadynError
from mesadyn.models import PAPER, DeepLinearAttention, SoftmaxAttention
from mesadyn.process import (
    CoordinateGroup,
    gaussian,
    make_generator,
    sample,
    sequences,
    sparse,
)


def _x(fam, n=24, T=10, seed=3):
    x1, lam = sample(fam, n, T, make_generator(seed))
    return sequences(x1, lam, T)


# ---- fit_gd_steps ------------------------------------------------------------------------------


def test_paper_diagonal_fits_one_step_of_size_ab():
    d, a0, b0 = 4, 0.6, 1.5
    theta = PAPER.diagonal_init(d, a0, b0)
    fit = fit_gd_steps(PAPER, theta, _x(gaussian(d, 0.9)), 1)
    assert fit.k == 1 and fit.sequences == 24 and fit.t_checked == tuple(range(2, 11))
    assert abs(fit.etas[0] - a0 * b0) < 1e-10
    assert fit.rel_residual <= 1e-12
    assert fit.structure == 0.0
    assert fit.to_dict()["etas"] == fit.etas


def test_deep_with_an_empty_second_layer_is_one_step():
    d, a, b = 3, 0.9, 0.8
    model = DeepLinearAttention(2)
    theta = model.diagonal_init(d, a, b)
    theta[9 * d * d * 2:] = 0.0  # layer 2 all zero; layer 1 diagonal (a, b)
    x = _x(gaussian(d, 0.7), n=16, T=8)
    fit = fit_gd_steps(model, theta, x, 1)
    assert abs(fit.etas[0] - a * b) < 1e-10
    assert fit.rel_residual <= 1e-12
    two = fit_gd_steps(model, theta, x, 2)
    assert two.rel_residual <= 1e-10


def test_a_generic_deep_theta_is_not_gd():
    model = DeepLinearAttention(2)
    d = 3
    theta = model.gaussian_init(d, 0.4, seed=7)
    x = _x(gaussian(d, 0.8), n=16, T=8)
    one = fit_gd_steps(model, theta, x, 1)
    two = fit_gd_steps(model, theta, x, 2)
    assert one.rel_residual > 1e-3 and two.rel_residual > 1e-3
    assert two.rel_residual <= one.rel_residual * (1 + 1e-9)  # [η_1, 0] is a start
    assert one.structure > 0.1


# ---- preconditioned steps ---------------------------------------------------------------------


def _reference_scalar_fit(x, y, k, ab):
    """An independent scalar fit: the residual by autodiff GD, a finite-difference Jacobian,
    the starts of :func:`fit_gd_steps`."""
    from scipy.optimize import least_squares

    T = x.shape[1]

    def residual(etas):
        r = torch.stack([gd_prediction(x, t, list(etas)) for t in range(2, T + 1)], 1).numpy()
        r = r - y
        return np.concatenate([r.real.ravel(), r.imag.ravel()])

    g = -residual(np.array([1.0])) - np.concatenate([y.real.ravel(), y.imag.ravel()])
    rhs = np.concatenate([y.real.ravel(), y.imag.ravel()])
    eta1 = float(g @ rhs / (g @ g))
    rng = np.random.default_rng(0)
    scale = max(abs(eta1), abs(ab), 1e-3)
    starts = [np.array([ab] + [0.0] * (k - 1)), np.array([eta1] + [0.0] * (k - 1)),
              np.full(k, eta1 / k)] + [scale * rng.standard_normal(k) for _ in range(3)]
    sols = [least_squares(residual, s, jac="3-point", xtol=1e-14, ftol=1e-14, gtol=1e-14)
            for s in starts]
    best = min(sols, key=lambda s: s.cost)
    return best.x, float(np.linalg.norm(best.fun) / np.linalg.norm(rhs))


def test_scalar_structure_is_the_plain_step_fit():
    model = DeepLinearAttention(2)
    d = 2
    theta = model.gaussian_init(d, 0.4, seed=7)
    x = _x(gaussian(d, 0.8), n=6, T=5)
    fit = fit_gd_steps(model, theta, x, 2, preconditioner="scalar")
    y = model.predict(theta, x).numpy()
    ab = float(torch.as_tensor(model.ab(theta)).mean())
    etas, res = _reference_scalar_fit(x, y, 2, ab)
    # scalar steps commute (every factor I − s_j C_t has the same C_t): the steps are known up
    # to their order
    assert np.abs(np.sort(fit.etas) - np.sort(etas)).max() < 1e-6
    assert abs(fit.rel_residual - res) < 1e-9 and fit.rel_residual == fit.scalar_residual
    assert np.allclose(fit.gammas, [e * np.eye(d) for e in fit.etas], rtol=0, atol=0)
    assert fit.preconditioner == "scalar" and fit.improvement == 0.0
    assert [f.rel_distance for f in fit.gamma_forms] == [0.0, 0.0]


def test_the_paper_point_is_one_step_of_ab_times_identity():
    d, a0, b0 = 3, 0.6, 1.5
    theta = PAPER.diagonal_init(d, a0, b0)
    x = _x(gaussian(d, 0.9), n=16, T=7)
    for side in Side:
        fit = fit_gd_steps(PAPER, theta, x, 1, preconditioner="full", side=side)
        step = np.asarray(fit.lambdas[0]) @ np.asarray(fit.gammas[0])  # Λ B Γ = ab B: Λ Γ = ab I
        assert np.abs(step - a0 * b0 * np.eye(d)).max() < 1e-10, side
        assert fit.rel_residual < 1e-13 and fit.scalar_residual < 1e-13


def test_appendix_b5_dense_blocks_are_one_two_sided_step():
    """W^KQ_32 = W_1, W^PV_12 = W_2 and no other block: ŷ_t = W_2 B_t W_1 x_t/(t−1), one step
    with Λ = W_2 and Γ = W_1 (their product fixed up to a scale); with W_2 = I, one right
    step Γ = W_1."""
    d = 2
    rng = np.random.default_rng(8)
    W1, W2 = 0.3 * rng.standard_normal((d, d)), np.eye(d) + 0.3 * rng.standard_normal((d, d))
    x = _x(gaussian(d, 0.8), n=16, T=6)
    for left in (np.eye(d), W2):
        th = np.zeros(18 * d * d)
        WKQ, WPV = th[:9 * d * d].reshape(3 * d, 3 * d), th[9 * d * d:].reshape(3 * d, 3 * d)
        WKQ[2 * d:, d:2 * d], WPV[:d, d:2 * d] = W1, left
        side = Side.RIGHT if left is not W2 else Side.BOTH
        fit = fit_gd_steps(PAPER, th, x, 1, preconditioner="full", side=side)
        assert fit.rel_residual < 1e-10
        lam, gam = np.asarray(fit.lambdas[0]), np.asarray(fit.gammas[0])
        alpha = np.trace(lam) / np.trace(left)
        assert np.abs(lam - alpha * left).max() < 1e-8 and np.abs(alpha * gam - W1).max() < 1e-8


def _trained_two_layer(d=2, T=5, steps=40, lr=0.05):
    """Full-batch GD on 64 sequences from the layered diagonal init (the loss falls from 0.66
    to 0.50)."""
    from mesadyn.field import FiniteModelField

    model = DeepLinearAttention(2)
    field = FiniteModelField(model, gaussian(d, 0.6), T, 64, seed=1)
    th = model.diagonal_init(d, 0.4, 0.4)
    free = torch.from_numpy(model.free_mask("none", d))
    for _ in range(steps):
        _, g = field.loss_and_grad(th)
        th = th - lr * g * free
    return model, th


def test_preconditioning_never_raises_the_residual_on_a_trained_two_layer_theta():
    model, th = _trained_two_layer()
    x = _x(gaussian(2, 0.6), n=24, T=5, seed=9)
    scalar = fit_gd_steps(model, th, x, 2)
    assert scalar.structure is not None and scalar.structure > 1e-3  # off the diagonals
    fits = {(s, p): fit_gd_steps(model, th, x, 2, preconditioner=p, side=s)
            for s in Side for p in (Preconditioner.DIAGONAL, Preconditioner.FULL)}
    for fit in fits.values():
        assert fit.scalar_residual == pytest.approx(scalar.rel_residual, rel=1e-12)
        assert fit.rel_residual <= scalar.rel_residual * (1 + 1e-12)
    for s in Side:
        full, diag = (fits[s, p].rel_residual for p in (Preconditioner.FULL,
                                                        Preconditioner.DIAGONAL))
        assert full <= diag * (1 + 1e-6)
    both = fits[Side.BOTH, Preconditioner.FULL].rel_residual
    assert both <= min(fits[s, Preconditioner.FULL].rel_residual
                       for s in (Side.LEFT, Side.RIGHT)) * (1 + 1e-12)
    assert fits[Side.RIGHT, Preconditioner.FULL].rel_residual < scalar.rel_residual * (1 - 1e-4)


@pytest.mark.parametrize("group", [CoordinateGroup.PERMUTATIONS,
                                   CoordinateGroup.SIGNED_PERMUTATIONS])


def test_symmetric_data_give_symmetric_preconditioners(group):
    """A θ fixed by the group on data closed under it: the loss of the one-step fit is invariant
    under Γ → D Γ Dᵀ and has one minimum, so Γ = c I + c'(J − I) (c' = 0 for signed
    permutations)."""
    model, d = DeepLinearAttention(2), 2
    P = model.fixed_subspace(d, group, model.free_mask("none", d))
    th = torch.from_numpy(P @ (0.3 * np.random.default_rng(2).standard_normal(P.shape[1])))
    x = _x(gaussian(d, 0.8), n=8, T=6)
    maps = [torch.eye(d), torch.eye(d).flip(0)]
    if group is CoordinateGroup.SIGNED_PERMUTATIONS:
        maps += [D @ torch.diag(torch.tensor(s)) for D in maps[:2]
                 for s in ((-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0))]
    xs = torch.cat([x @ D.to(x.dtype).T for D in maps])
    fit = fit_gd_steps(model, th, xs, 1, preconditioner="full")
    form = fit.gamma_forms[0]
    assert form.rel_distance < 1e-10 and abs(form.c) > 1e-3
    if group is CoordinateGroup.SIGNED_PERMUTATIONS:
        assert abs(form.c_off) < 1e-10 * abs(form.c)
    else:
        assert abs(form.c_off) > 1e-4 * abs(form.c)


# ---- Proposition 4.1's ratio -----------------------------------------------------------------


def _perturbed_paper_theta(d):
    return PAPER.diagonal_init(d, 0.8, 1.1) + PAPER.gaussian_init(d, 0.05, seed=4)


@pytest.mark.parametrize("fam", [gaussian(3, 0.9), sparse(3, 1.5)])
def test_model_ratio_equals_the_paper_path(fam):
    d, n, T_te, seed = 3, 40, 7, 11
    theta = _perturbed_paper_theta(d)
    x1, lam = sample(fam, n, T_te + 1, make_generator(seed))
    batch = ContextBatch(x1, lam, T_te)
    ref_r, ref_m = batch.ratio(theta), batch.mse(theta)
    x = sequences(x1, lam, T_te + 1)
    got_r, got_m = model_ratio(PAPER, theta, x), model_mse(PAPER, theta, x)
    for key in ("value", "se", "imag", "imag_se"):
        assert abs(getattr(got_r, key) - getattr(ref_r, key)) < 1e-12, key
    assert (got_r.used, got_r.excluded) == (ref_r.used, ref_r.excluded)
    assert abs(got_m.value - ref_m.value) < 1e-12 and abs(got_m.se - ref_m.se) < 1e-12
    assert abs(got_m.baseline - ref_m.baseline) < 1e-12
    if fam.name == "sparse":  # x_1 = ±c e_i: d − 1 zero denominators per sequence
        assert got_r.excluded == n * (d - 1) and got_r.used == n
    else:
        assert got_r.excluded == 0
    # model_incontext draws the same test set from the same seed
    rep = model_incontext(PAPER, theta, fam, T_te, n, seed)
    x1b, lamb = draw_test_set(fam, n, seed)
    assert torch.equal(x1b, x1) and torch.equal(lamb, lam)
    assert abs(rep.ratio.value - ref_r.value) < 1e-12
    assert rep.ratio.excluded == ref_r.excluded
    assert rep.gd_fit_1 is None and rep.ab is not None and len(rep.ab) == d


def test_model_incontext_softmax_and_deep():
    fam = gaussian(2, 0.8)
    soft = SoftmaxAttention()
    rep = model_incontext(soft, soft.gaussian_init(2, 0.3, seed=2), fam, 6, 12, 5)
    assert rep.ab is None and rep.gd_fit_1 is None and rep.gd_fit.k == 1
    vals = [rep.ratio.value, rep.ratio.se, rep.mse.value, rep.mse.baseline,
            rep.gd_fit.rel_residual, rep.gd_fit.etas[0]]
    assert all(math.isfinite(v) for v in vals)
    out = rep.to_dict()
    assert out["model"] == {"model": "softmax"} and out["ab"] is None
    deep = DeepLinearAttention(2)
    rep2 = model_incontext(deep, deep.diagonal_init(2, 0.5, 0.6), fam, 5, 8, 1)
    assert rep2.gd_fit.k == 2 and rep2.gd_fit_1 is not None and rep2.gd_fit_1.k == 1
    assert rep2.ab == pytest.approx([0.6, 0.6])
    # both layers diagonal: the second reads the untouched x-blocks, so ŷ is one step of Σ ab
    assert abs(rep2.gd_fit_1.etas[0] - 0.6) < 1e-10 and rep2.gd_fit_1.rel_residual <= 1e-12
    assert rep2.gd_fit.rel_residual <= rep2.gd_fit_1.rel_residual * (1 + 1e-9)
    # the preconditioned fits, full on each side, at most the scalar residual on their prompts
    pre = rep2.gd_fit_preconditioned
    assert set(pre) == {"right", "left", "both"}
    for side, fit in pre.items():
        assert fit.side == side and fit.preconditioner == "full" and fit.k == 2
        assert fit.rel_residual <= fit.scalar_residual * (1 + 1e-12)
        assert fit.sequences == 8 and fit.converged
    assert len(pre["right"].gamma_forms) == 2 and pre["right"].lambda_forms == []
    assert len(pre["both"].gamma_forms) == 2 == len(pre["both"].lambda_forms)
    out2 = rep2.to_dict()["gd_fit_preconditioned"]
    assert isinstance(out2, dict) and out2["left"]["side"] == "left"
    assert json.loads(json.dumps(out2)) == out2
    # softmax is one layer: one step, and its d = 2 preconditioners are fitted too
    assert rep.gd_fit_preconditioned["both"].k == 1


def test_bad_input_names_the_value():
    fam = gaussian(2, 1.0)
    theta = PAPER.diagonal_init(2, 1.0, 1.0)
    x = _x(fam, n=4, T=5)
    with pytest.raises(MesadynError, match="k"):
        fit_gd_steps(PAPER, theta, x, 0)
    with pytest.raises(MesadynError, match="k"):
        model_incontext(PAPER, theta, fam, 5, 4, 0, k=0)
    with pytest.raises(MesadynError, match="T_te"):
        model_incontext(PAPER, theta, fam, 1, 4, 0)
    with pytest.raises(MesadynError, match="length 72"):
        model_incontext(PAPER, torch.zeros(50, dtype=torch.float64), fam, 5, 4, 0)
    with pytest.raises(MesadynError, match="50"):
        model_ratio(PAPER, torch.zeros(50, dtype=torch.float64), x)
    with pytest.raises(MesadynError, match="t=9"):
        fit_gd_steps(PAPER, theta, x, 1, ts=[2, 9])
    # the preconditioned fits
    with pytest.raises(MesadynError, match="unknown preconditioner 'dense'; choose scalar, "
                                           "diagonal, full") as bad:
        fit_gd_steps(PAPER, theta, x, 1, preconditioner="dense")
    assert "\n" not in str(bad.value)
    with pytest.raises(MesadynError, match="unknown side 'middle'"):
        fit_gd_steps(PAPER, theta, x, 1, preconditioner="full", side="middle")

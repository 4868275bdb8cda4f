"""GD against the gradient flow (:mod:`mesadyn.analysis.gd_flow`).

Independent checks: closed forms of GD, the flow and the modified flow on a quadratic loss;
the modified right-hand side against finite differences of the gradient and against autodiff
of the modified loss; GD iterates against :func:`mesadyn.train.train` (the paper's GD); the
orders of the gaps in η; the spread's jackknife SE and the power-law fit's SE by coverage.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.gd_flow import (
    ModifiedField,
    compare_gd_flow,
    endpoint_spread,
    fit_power_law,
    flow_at_steps,
    gap,
    gd_iterates,
    modified_rhs,
    sharpness,
)
from mesadyn.errors import MesadynError
from mesadyn.field import Field, FieldSpec, make_field
from mesadyn.model import active_mask, diagonal_init, diagonal_mask, free_mask, gaussian_init
from mesadyn.process import gaussian, sparse


class Quadratic(Field):
    """``L = ½ Σ λ_i θ_i²`` on θ of d = 1 (18 entries); λ is 0 off the active entries."""

    name = "quadratic"

    def __init__(self, lam: np.ndarray) -> None:
        self.family = gaussian(1)
        self.T = 3
        self.lam = torch.as_tensor(lam, dtype=torch.float64)

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        return 0.5 * (self.lam * theta * theta).sum()


def _quadratic() -> tuple[Quadratic, np.ndarray, np.ndarray]:
    act = np.flatnonzero(active_mask(1))
    lam = np.zeros(18)
    lam[act[:3]] = [1.0, 4.0, 20.0]
    x0 = np.zeros(18)
    x0[act[:3]] = [1.0, -0.5, 0.3]
    x0[act[3]] = 0.7  # a flat direction: never moves
    return Quadratic(lam), lam, x0


def test_quadratic_closed_forms_of_gd_flow_and_modified_flow():
    field, lam, x0 = _quadratic()
    lr, steps = 0.01, 40
    k = np.arange(steps + 1)[:, None]
    gd_exact = (1 - lr * lam) ** k * x0
    flow_exact = np.exp(-lam * k * lr) * x0
    mod_exact = np.exp(-lam * (1 + lr * lam / 2) * k * lr) * x0
    gd = gd_iterates(field, x0, lr, steps)
    np.testing.assert_allclose(gd, gd_exact, rtol=1e-13, atol=1e-15)
    flow = flow_at_steps(field, x0, lr, steps)
    np.testing.assert_allclose(flow, flow_exact, rtol=1e-9, atol=1e-12)
    mod = flow_at_steps(field, x0, lr, steps, modified=True)
    np.testing.assert_allclose(mod, mod_exact, rtol=1e-9, atol=1e-12)
    # the gap statistics against the closed forms
    g_flow, g_mod = gap(gd, flow), gap(gd, mod)
    e_flow = np.linalg.norm(gd_exact - flow_exact, axis=1)
    e_mod = np.linalg.norm(gd_exact - mod_exact, axis=1)
    assert g_flow.max_abs == pytest.approx(e_flow.max(), rel=1e-6)
    assert g_flow.at_step == int(np.argmax(e_flow))
    assert g_mod.max_abs == pytest.approx(e_mod.max(), rel=1e-4)
    assert g_flow.final_abs == pytest.approx(e_flow[-1], rel=1e-6)
    rel = e_flow / np.linalg.norm(flow_exact, axis=1)
    assert g_flow.max_rel == pytest.approx(rel.max(), rel=1e-6)
    # first-order BEA on 1-D: (1 − h)^k vs e^{−(1 + h/2) h k}: the gap is O(h³ k) per mode
    assert e_flow.max() / e_mod.max() > 5
    assert math.isnan(g_flow.max_loss)


def test_gap_orders_in_eta_on_the_quadratic():
    """The flow gap is O(η), the modified-flow gap O(η²): halving η halves / quarters them."""
    field, _, x0 = _quadratic()
    tau = 0.2
    out = []
    for lr in (0.01, 0.005):
        steps = round(tau / lr)
        gd = gd_iterates(field, x0, lr, steps)
        tol = {"rtol": 1e-9, "atol": 1e-12}  # far below the O(η²) gap (≈ 1e-4 here)
        out.append((gap(gd, flow_at_steps(field, x0, lr, steps, **tol)).max_abs,
                    gap(gd, flow_at_steps(field, x0, lr, steps, modified=True, **tol)).max_abs))
    assert out[0][0] / out[1][0] == pytest.approx(2.0, rel=0.1)
    assert out[0][1] / out[1][1] == pytest.approx(4.0, rel=0.15)


def test_gd_keeps_masked_entries_and_matches_a_hand_step():
    fam = gaussian(2)
    field = make_field(FieldSpec("exact", fam, 6))
    th0 = gaussian_init(2, 0.3, 5)
    gd = gd_iterates(field, th0, 1e-3, 2, mask="diagonal")
    free = diagonal_mask(2) & active_mask(2)
    assert np.array_equal(gd[:, ~free], np.repeat(th0.numpy()[None, ~free], 3, axis=0))
    step = th0.clone()
    step[torch.from_numpy(free)] -= 1e-3 * field.grad(th0)[torch.from_numpy(free)]
    np.testing.assert_allclose(gd[1], step.numpy(), rtol=0, atol=1e-15)


def test_modified_rhs_against_finite_differences_and_autodiff():
    field = make_field(FieldSpec("exact", sparse(2, 1.0), 6))
    theta = gaussian_init(2, 0.4, 3)
    lr = 0.02
    g = field.grad(theta)
    eps = 1e-6
    hg_fd = (field.grad(theta + eps * g) - field.grad(theta - eps * g)) / (2 * eps)
    want = -(g + 0.5 * lr * hg_fd)
    got = modified_rhs(field, theta, lr)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-7,
                               atol=1e-8 * float(want.abs().max()))
    # ModifiedField's fast gradient (grad + HVP) = autodiff of L + (η/4)‖∇L‖²
    mf = ModifiedField(field, lr)
    th = theta.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(mf.loss(th), th)
    value, fast = mf.loss_and_grad(theta)
    np.testing.assert_allclose(fast.numpy(), auto.numpy(), rtol=1e-10,
                               atol=1e-12 * float(auto.abs().max()))
    assert float(value) == pytest.approx(float(field.loss(theta)) + 0.25 * lr * float(g @ g))


def test_gd_iterates_are_the_papers_gd():
    """On the finite field of one training set, gd_iterates = mesadyn.train.train (1e-12)."""
    from mesadyn.train import train

    fam, T, m, seed, lr, steps = gaussian(2, 0.8), 6, 40, 3, 0.01, 4
    th0 = diagonal_init(2, 0.3, 0.2)
    paper = train(fam, T, m=m, steps=steps, lr=lr, theta0=th0, seed=seed, device="cpu")
    ours = gd_iterates(make_field(FieldSpec("finite", fam, T, m=m, seed=seed, device="cpu")),
                       th0, lr, steps)
    scale = np.abs(paper.theta).max()
    np.testing.assert_allclose(ours, paper.theta, rtol=0, atol=1e-12 * scale)


def test_compare_on_the_exact_field_closes_the_gap():
    field = make_field(FieldSpec("exact", gaussian(2), 6))
    comp = compare_gd_flow(field, diagonal_init(2, 0.1, 0.1), 2e-3, 60)
    assert comp.gd.shape == comp.flow.shape == comp.modified.shape == (61, 72)
    assert comp.gap_flow.max_abs > 0 and comp.ratio > 5
    assert comp.gap_flow.max_loss > comp.gap_modified.max_loss > 0
    d = comp.to_dict()
    assert d["ratio"] == comp.ratio and d["tau_end"] == pytest.approx(0.12)
    g_flow, g_mod = comp.gap_curves()
    assert g_flow[0] == 0 and g_flow.max() == comp.gap_flow.max_abs


def test_gd_divergence_is_a_one_line_error():
    field, _, x0 = _quadratic()
    with pytest.raises(MesadynError, match="GD diverged at step"):
        gd_iterates(field, x0 * 1e300, 10.0, 50)
    with pytest.raises(MesadynError, match="lr"):
        gd_iterates(field, x0, -1.0, 5)


def test_endpoint_spread_and_jackknife():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4))
    s, se = endpoint_spread(x)
    assert s == pytest.approx(math.sqrt(np.var(x, axis=0, ddof=1).sum()))
    assert 0 < se < s
    with pytest.raises(MesadynError, match="at least 3"):
        endpoint_spread(x[:2])


def test_power_law_fit_recovers_the_slope_with_honest_errors():
    """Monte Carlo: end points with spread ∝ m^{-1/2}; the fitted slope lies within 2 SE of
    −1/2 in about 95% of repetitions (the jackknife SEs are roughly right)."""
    rng = np.random.default_rng(1)
    ms = np.array([100, 300, 1000, 3000])
    hits, slopes, reps = 0, [], 300
    for _ in range(reps):
        vals = [endpoint_spread(rng.standard_normal((10, 20)) / np.sqrt(m)) for m in ms]
        fit = fit_power_law(ms, [v[0] for v in vals], [v[1] for v in vals])
        slopes.append(fit.slope)
        hits += abs(fit.slope + 0.5) < 2 * fit.slope_se
    assert abs(np.mean(slopes) + 0.5) < 0.01
    assert 0.85 < hits / reps <= 1.0
    with pytest.raises(MesadynError, match="two distinct"):
        fit_power_law([10, 10], [1.0, 1.0], [0.1, 0.1])
    with pytest.raises(MesadynError, match="positive"):
        fit_power_law([10, 20], [1.0, -1.0], [0.1, 0.1])


def test_sharpness_against_the_full_hessian():
    field, _, x0 = _quadratic()
    assert sharpness(field, x0) == pytest.approx(20.0, rel=1e-10)
    exact = make_field(FieldSpec("exact", gaussian(2), 6))
    theta = gaussian_init(2, 0.5, 9)
    for mask in (None, "diagonal"):
        free = np.flatnonzero(free_mask(mask, 2))
        H = exact.hessian(theta).numpy()[np.ix_(free, free)]
        assert sharpness(exact, theta, mask) == pytest.approx(np.linalg.eigvalsh(H)[-1],
                                                              rel=1e-8)
    comp = compare_gd_flow(exact, theta, 1e-3, 20, sharpness_every=5)
    assert [k for k, _ in comp.sharpness] == [0, 5, 10, 15, 20]
    assert comp.eta_lambda_max == max(v for _, v in comp.sharpness) > 0
    assert comp.to_dict()["eta_lambda_start"] == comp.sharpness[0][1]

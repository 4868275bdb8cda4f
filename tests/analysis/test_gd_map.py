"""GD as a map (:mod:`mesadyn.analysis.gd_map`): the reduced map against the full space, the
exact invariant drift, the critical step against GD itself, Lanczos against the dense
spectrum, the Lyapunov exponent against the multipliers, finite-field GD against train."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis import gd_map as G
from mesadyn.field import FieldSpec, make_field
from mesadyn.model import diagonal_entries, diagonal_init, invariant
from mesadyn.process import gaussian, sparse
from mesadyn.theory import constants


@pytest.fixture(scope="module")
def exact3():
    return make_field(FieldSpec("exact", gaussian(3, 1.0), 20))


@pytest.mark.parametrize("fam", [gaussian(3, 1.0), gaussian(2, 0.5), sparse(3, 0.5)])
def test_reduced_map_is_the_full_space_step_from_a_diagonal_start(fam):
    """From Assumption 3.1's diagonal init the full GD step stays diagonal and equals the
    reduced map's closed form on (a, b) (Lemma 5.2's invariance, now for the map)."""
    T = 20
    f = make_field(FieldSpec("exact", fam, T))
    c = constants(fam, T)
    th = diagonal_init(fam.d, 0.5, 1.5).numpy()
    for eta in (1e-3, 1e-2):
        a, b = (np.asarray(v) for v in diagonal_entries(G.gd_step(f, th, eta)))
        ar, br = G.reduced_step(0.5, 1.5, eta, c.c1, c.c2)
        assert np.abs(a - ar).max() <= 1e-12 * abs(ar) and np.abs(b - br).max() <= 1e-12 * abs(br)


def test_invariant_drift_is_exactly_second_order(exact3):
    """I(θ − ηg) − I(θ) = η²(‖g_A‖² − ‖g_P‖²): the first-order term vanishes by the flow's
    conservation law, at any θ (a dense random one here)."""
    th = np.random.default_rng(0).normal(0, 0.3, exact3.n_params)
    for eta in (1e-3, 1e-2, 5e-2):
        measured = float(invariant(G.gd_step(exact3, th, eta))) - float(invariant(th))
        assert measured == pytest.approx(G.invariant_step(exact3, th, eta), rel=1e-10)


def test_reduced_invariant_step_is_exact():
    c1, c2 = 37.0, 8.0
    a, b = np.array([0.1, 0.5, 2.0]), np.array([0.1, 1.5, 2.0])
    eta = 1e-2
    a2, b2 = G.reduced_step(a, b, eta, c1, c2)
    np.testing.assert_allclose((a2 * a2 - b2 * b2) - (a * a - b * b),
                               G.reduced_invariant_step(a, b, eta, c1, c2), rtol=1e-12,
                               atol=1e-15)


def test_reduced_hessian_on_the_hyperbola():
    c1, c2 = 37.0, 8.0
    a = 0.7
    b = c2 / (c1 * a)
    ev = np.linalg.eigvalsh(G.reduced_hessian(a, b, c1, c2))
    assert ev[0] == pytest.approx(0.0, abs=1e-12)
    assert ev[1] == pytest.approx(c1 * (a * a + b * b), rel=1e-12)
    assert G.reduced_critical_step(a, b, c1) == pytest.approx(2 / ev[1], rel=1e-12)


def test_critical_step_matches_the_onset_of_instability(exact3):
    """2/λ_max at the balanced fixed point predicts where GD from it + 1e-8 along the top
    mode stops coming back, to 1e-6 relative (bisection with GD itself)."""
    c = constants(gaussian(3, 1.0), 20)
    s = math.sqrt(c.ab_star)
    fp = diagonal_init(3, s, s).numpy()
    observed, predicted = G.onset_of_instability(exact3, fp, rtol=1e-7)
    assert observed == pytest.approx(predicted, rel=1e-6)
    assert predicted == pytest.approx(G.critical_step(exact3, fp), rel=1e-12)


def test_lanczos_agrees_with_the_dense_spectrum(exact3):
    th = diagonal_init(3, 0.5, 1.5).numpy()
    dense = G.sharpness(exact3, th, 1e-3)
    lanczos = G.sharpness(exact3, th, 1e-3, method="lanczos")
    assert lanczos.lambda_max == pytest.approx(dense.lambda_max, rel=1e-8)
    assert lanczos.lambda_min == pytest.approx(dense.lambda_min, rel=1e-6, abs=1e-8)
    assert lanczos.eta_lambda_max == pytest.approx(1e-3 * dense.lambda_max, rel=1e-8)
    assert sum(dense.blocks.values()) == pytest.approx(1.0, rel=1e-12)


def test_lyapunov_exponent_at_a_fixed_point_is_the_top_multiplier(exact3):
    """Along the constant orbit of a fixed point the exponent is log max_i |1 − η μ_i|."""
    c = constants(gaussian(3, 1.0), 20)
    s = math.sqrt(c.ab_star)
    fp = diagonal_init(3, s, s).numpy()
    mu = np.linalg.eigvalsh(G.map_jacobian(exact3, fp, 1.0))  # 1 − μ_i at η = 1
    mu = 1.0 - mu
    eta = 1.05 * G.critical_step(exact3, fp)
    want = math.log(np.abs(1 - eta * mu).max())
    got = G.lyapunov_exponent(exact3, np.repeat(fp[None], 700, axis=0), eta, burn_in=300)
    assert want > 0 and got == pytest.approx(want, rel=1e-6)


def test_finite_field_gd_is_train():
    """The map on the finite-sample field is the paper's GD (:func:`mesadyn.train`)."""
    from mesadyn.train import train

    fam, T, m, lr, steps = gaussian(2, 1.0), 8, 64, 1e-3, 5
    rec = train(fam, T, m=m, steps=steps, lr=lr, a0=0.5, b0=1.5, seed=3, device="cpu")
    f = make_field(FieldSpec("finite", fam, T, m=m, seed=3))
    th = diagonal_init(2, 0.5, 1.5).numpy()
    for _ in range(steps):
        th = G.gd_step(f, th, lr)
    np.testing.assert_allclose(th, rec.theta[-1], rtol=1e-12, atol=1e-14)
    assert torch.is_tensor(torch.as_tensor(th))

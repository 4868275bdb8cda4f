"""The reduced systems of the processes beyond the paper, against the exact field and flows.

- real rotations: the 3-D manifold ``(W^KQ_32, W^KQ_23, W^PV_12) = (a, c, b)·I`` is invariant
  (the exact gradient at its points stays on it; with noise and at r ≠ 1 too), the paper's
  diagonal is not; its constants in closed form (:func:`mesadyn.theory.rotation_constants`)
  equal those read off the exact loss; the 3-D flow's right-hand side and Jacobian against
  finite differences; its closed-form limit against the full exact flow (1e-9);
- noisy diagonal W and Haar W keep the paper's 2-D manifold; ``c1(s), c2(s)`` and Haar's
  c1, c2 in closed form equal those of the exact tensors; ab*(s) equals the full exact flow's
  end point (1e-9) for three noise levels;
- the spectrum at the real-rotation end point: every zero mode explained;
- the workflows' hooks: constants per process, refusals naming the value.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.analysis.fixedpoint import flow_to_fixed_point
from mesadyn.analysis.rotation_manifold import (
    ManifoldSystem,
    coordinates,
    distance,
    embed,
    manifold_gradient_residual,
    rotation_tangents,
    unexplained_zero_modes,
)
from mesadyn.analysis.spectrum import classify
from mesadyn.errors import MesadynError
from mesadyn.field import ExactField
from mesadyn.model import (
    active_mask,
    diagonal_entries,
    diagonal_init,
    diagonal_mask,
    gaussian_init,
)
from mesadyn.process import NoReducedSystem, gaussian, ones, rademacher, sparse, uniform
from mesadyn.theory import constants, haar_constants, rotation_constants
from mesadyn.tolerances import ZERO_RTOL
from mesadyn.workflows.theory import Config as TheoryConfig


def _diag_constants(field: ExactField) -> tuple[float, float]:
    """``(c1, c2)`` read off the exact loss on the diagonal: ``L/d = ½c1 s² − c2 s + const``."""
    d = field.d

    def ell(s: float) -> float:
        return float(field.loss(diagonal_init(d, 1.0, s))) / d

    return ell(1) + ell(-1) - 2 * ell(0), -(ell(1) - ell(-1)) / 2


# ---- real rotations: the 3-D manifold ------------------------------------------------------
@pytest.mark.parametrize(("fam", "T", "kw"), [
    (gaussian(2), 7, {}), (rademacher(4), 6, {"radius": 0.8}), (sparse(4, 1.2), 6, {}),
    (gaussian(2), 6, {"noise": 0.4}), (uniform(2), 6, {"noise": 0.3, "radius": 1.1}),
])
def test_the_3d_manifold_is_invariant_and_the_diagonal_is_not(fam, T, kw):
    f = ExactField(fam, T, rotation="real", cache=False, **kw)
    for a, c, b in [(0.4, -0.2, 0.7), (-0.3, 0.5, 0.2), (1.1, 0.0, -0.6)]:
        assert manifold_gradient_residual(f, embed(fam.d, a, c, b)) < 1e-12
    # at the paper's diagonal (c = 0) the flow moves c: ċ = b h2 − a b² g12 ≠ 0
    _, gc, _ = coordinates(f.grad(embed(fam.d, 0.3, 0.0, 0.5)).numpy())
    assert abs(gc) > 1e-3


@pytest.mark.parametrize(("fam", "T"), [(gaussian(2), 6), (gaussian(4), 10), (rademacher(6), 7),
                                        (sparse(4, 1.3), 9), (uniform(2), 8)])
def test_rotation_closed_forms_equal_the_exact_loss(fam, T):
    closed = ManifoldSystem.from_constants(rotation_constants(fam, T))
    exact = ManifoldSystem.from_field(ExactField(fam, T, rotation="real", cache=False))
    for name in ("g11", "g12", "g22", "h1", "h2"):
        assert getattr(closed, name) == pytest.approx(getattr(exact, name), rel=1e-12), name


def test_the_3d_system_is_the_gradient_flow_of_its_loss():
    s = ManifoldSystem.from_constants(rotation_constants(gaussian(2), 9))
    p, e = np.array([0.4, -0.2, 0.7]), 1e-6
    grad = np.array([(s.loss(*(p + e * u)) - s.loss(*(p - e * u))) / (2 * e) for u in np.eye(3)])
    np.testing.assert_allclose(s.rhs(*p), -grad, rtol=1e-8)
    jac = np.stack([(s.rhs(*(p + e * u)) - s.rhs(*(p - e * u))) / (2 * e) for u in np.eye(3)], 1)
    np.testing.assert_allclose(s.jacobian(*p), jac, rtol=1e-7, atol=1e-8)
    _, ys = s.integrate(0.5, 0.0, 0.3, 5.0)
    inv = [s.invariant(*y) for y in ys]
    assert max(abs(v - inv[0]) for v in inv) < 1e-9  # Δ = a² + c² − b² is conserved
    for cand in s.limit_candidates(0.5, 0.0, 0.3):
        assert np.abs(s.rhs(*cand)).max() < 1e-12
        assert s.invariant(*cand) == pytest.approx(inv[0], abs=1e-12)


@pytest.mark.parametrize(("d", "T"), [(2, 10), (4, 20)])
def test_the_full_flow_ends_on_the_manifold_at_the_reduced_limit(d, T):
    f = ExactField(gaussian(d), T, rotation="real", cache=False)
    fp, end = flow_to_fixed_point(f, diagonal_init(d, 0.5, 0.5), steady_tol=1e-10)
    assert fp.residual < 1e-10
    assert distance(fp.theta) < 1e-12
    reduced = ManifoldSystem.from_field(f).limit(0.5, 0.0, 0.5)
    assert np.abs(np.array(coordinates(fp.theta)) - reduced).max() < 1e-9
    closed = ManifoldSystem.from_constants(rotation_constants(gaussian(d), T)).limit(0.5, 0.0, 0.5)
    assert np.abs(closed - reduced).max() < 1e-12
    sp = classify(f.hessian(torch.from_numpy(fp.theta)).numpy(), fp.theta, field=f)
    zm = sp.to_dict()["zero_modes"]
    assert sp.n_unstable == 0 and zm["unexplained"] == 0 and zm["higher_order"] == 0
    assert sp.n_zero == zm["inactive"] + zm["symmetry"] == 12 * d * d + 1


# ---- noisy diagonal and Haar W: the paper's 2-D manifold -----------------------------------
@pytest.mark.parametrize(("fam", "T", "r", "s"), [
    (gaussian(2), 6, 1.0, 0.5), (rademacher(3), 7, 0.8, 0.3), (sparse(3, 1.2), 8, 1.0, 0.7),
    (ones(2), 6, 0.9, 0.4), (uniform(1), 9, 1.1, 0.6),
])
def test_noisy_constants_in_closed_form_equal_the_tensors(fam, T, r, s):
    c = constants(fam, T, r, s)
    f = ExactField(fam, T, radius=r, noise=s, cache=False)
    assert (c.c1, c.c2) == pytest.approx(_diag_constants(f), rel=1e-12)


@pytest.mark.parametrize(("fam", "T", "r"), [
    (gaussian(2), 6, 1.0), (rademacher(3), 7, 0.8), (sparse(3, 1.2), 8, 1.0), (ones(2), 6, 0.9),
    (uniform(4), 5, 1.0), (gaussian(1), 6, 1.0),
])
def test_haar_constants_in_closed_form_equal_the_weingarten_tensors(fam, T, r):
    c = haar_constants(fam, T, r)
    f = ExactField(fam, T, radius=r, rotation="haar", cache=False)
    assert (c.c1, c.c2) == pytest.approx(_diag_constants(f), rel=1e-12)


@pytest.mark.parametrize(("rotation", "noise"), [("diagonal", 0.3), ("haar", 0.0)])
def test_the_diagonal_manifold_stays_invariant(rotation, noise):
    f = ExactField(gaussian(3), 6, rotation=rotation, noise=noise, cache=False)
    g = f.grad(diagonal_init(3, 0.4, 0.7)).numpy()
    g[diagonal_mask(3)] = 0
    assert np.abs(g).max() < 1e-12


@pytest.mark.parametrize("s", [0.2, 0.5, 1.0])
def test_noisy_ab_star_is_the_full_flows_end_point(s):
    d, T = 2, 10
    f = ExactField(gaussian(d), T, noise=s, cache=False)
    fp, _ = flow_to_fixed_point(f, diagonal_init(d, 0.5, 0.5), steady_tol=1e-10)
    a, b = diagonal_entries(fp.theta)
    assert fp.residual < 1e-10 and np.ptp(a) < 1e-12 and np.ptp(b) < 1e-12
    assert float(a[0] * b[0]) == pytest.approx(constants(gaussian(d), T, noise=s).ab_star,
                                               abs=1e-9)


def test_noise_lowers_ab_star_and_zero_noise_is_the_paper():
    fam, T = gaussian(5), 100
    assert constants(fam, T, noise=1e-300).c1 == pytest.approx(constants(fam, T).c1, rel=1e-12)
    abs_ = [constants(fam, 30, noise=s).ab_star for s in (0.0, 0.1, 0.3, 1.0)]
    assert all(x > y for x, y in zip(abs_, abs_[1:], strict=False))


# ---- the workflows' hooks ----------------------------------------------------------------
def test_process_options_give_the_constants_of_their_process():
    c = TheoryConfig(d=2, T=8, noise=0.3).constants()
    assert c.c1 == pytest.approx(constants(gaussian(2), 8, noise=0.3).c1, rel=1e-14)
    h = TheoryConfig(d=3, T=8, rotation="haar").constants()
    assert h.c2 == pytest.approx(haar_constants(gaussian(3), 8).c2, rel=1e-14)
    with pytest.raises(NoReducedSystem, match="W\\^KQ_23") as info:
        TheoryConfig(d=2, T=8, rotation="real").constants()
    assert "\n" not in str(info.value)
    with pytest.raises(MesadynError, match="d <= 5, got d=6"):
        TheoryConfig(d=6, T=8, rotation="haar").check_exact_reach()
    TheoryConfig(d=4, T=8, rotation="real", noise=0.2).check_exact_reach()


def test_continuation_follows_the_process():
    """Continuation's parameters carry rotation and noise into the exact field they build."""
    from mesadyn.workflows.continuation import Config

    par = Config(d=2, T=6, rotation="real", noise=0.2, stop=1.1).make_parameter()
    spec = par.spec(1.1)
    assert (str(spec.rotation), spec.noise) == ("real", 0.2)


def test_gaussian_starts_can_end_off_the_manifold():
    """At d = 4 a small Gaussian start ends at a local minimum off the manifold, above the
    manifold's minimum: the diagonal start is not just a convenience here."""
    f = ExactField(gaussian(4), 8, rotation="real", cache=False)
    on, _ = flow_to_fixed_point(f, diagonal_init(4, 0.5, 0.5), steady_tol=1e-10)
    off, _ = flow_to_fixed_point(f, gaussian_init(4, 0.3, 5), steady_tol=1e-10)
    assert on.residual < 1e-10 and off.residual < 1e-10
    active = off.theta.copy()
    active[~active_mask(4)] = 0  # the inactive entries keep their random start
    assert distance(active) > 1e-2 and off.loss > on.loss + 0.1
    # its extra zero mode is the orbit of the block rotations (a declared symmetry); at the
    # diagonal start's end point the rotation tangents vanish
    H = f.hessian(torch.from_numpy(off.theta)).numpy()
    before, after = unexplained_zero_modes(H, off.theta, ZERO_RTOL)
    assert before >= 1 and after == 0
    assert np.abs(rotation_tangents(on.theta)[active_mask(4)]).max() < 1e-12
    R = rotation_tangents(off.theta)
    assert np.linalg.norm(H @ R) < 1e-10 * np.linalg.norm(H) * np.linalg.norm(R)


@pytest.mark.slow
def test_noisy_ab_star_within_the_error_bars_of_monte_carlo_flows():
    """Monte-Carlo flows (independent seeds) end at ab*(s) within 4 standard errors."""
    from mesadyn.field import FieldSpec, make_field

    d, T, s = 2, 10, 0.5
    ends = []
    for seed in range(5):
        fld = make_field(FieldSpec("mc", gaussian(d), T, samples=10_000, seed=seed, noise=s),
                         reuse=False)
        fp, _ = flow_to_fixed_point(fld, diagonal_init(d, 0.5, 0.5), steady_tol=1e-10)
        a, b = diagonal_entries(fp.theta)
        ends.append(float(np.mean(np.asarray(a) * np.asarray(b))))
    mean, se = np.mean(ends), np.std(ends, ddof=1) / np.sqrt(len(ends))
    assert abs(mean - constants(gaussian(d), T, noise=s).ab_star) <= 4 * se

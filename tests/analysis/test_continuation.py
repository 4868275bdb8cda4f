"""Continuation (mesadyn.analysis.continuation): synthetic fields with known bifurcations, the
paper's gaussian branch against Theorem 4.1, exact ∂∇L/∂p against differences, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.continuation import (
    Bifurcation,
    Gauge,
    Options,
    ParametricField,
    Problem,
    Symmetry,
    analyse_point,
    follow,
    follow_discrete,
    make_parameter,
    run_branch,
    switch_branch,
)
from mesadyn.errors import MesadynError
from mesadyn.outcome import Outcome
from mesadyn.process import gaussian, iid, sparse
from mesadyn.theory import constants

P_STAR = 0.3721  # where the synthetic bifurcations are placed


class Fold(Problem):
    """``L = x³/3 − (p − p*) x + ½ Σ c_i y_i²``: fixed points ``x = ±√(p − p*)``, a fold at p*
    (x > 0 is a minimum, x < 0 a saddle)."""

    def __init__(self) -> None:
        self.n = 3
        self.free = np.ones(3, bool)
        self.c = np.array([1.0, 2.5])

    def loss(self, th: np.ndarray, p: float) -> float:
        x, y = th[0], th[1:]
        return float(x**3 / 3 - (p - P_STAR) * x + 0.5 * self.c @ y**2)

    def grad(self, th: np.ndarray, p: float) -> np.ndarray:
        return np.concatenate([[th[0] ** 2 - (p - P_STAR)], self.c * th[1:]])

    def hessian(self, th: np.ndarray, p: float) -> np.ndarray:
        return np.diag(np.concatenate([[2 * th[0]], self.c]))

    def grad_p(self, th: np.ndarray, p: float) -> np.ndarray:
        return np.array([-1.0, 0.0, 0.0])


class Pitchfork(Problem):
    """``L = −(p − p*) x²/2 + x⁴/4 + ½ y²``: the trivial branch loses stability at p*
    where ``x = ±√(p − p*)`` emerge (supercritical pitchfork)."""

    def __init__(self) -> None:
        self.n = 2
        self.free = np.ones(2, bool)

    def loss(self, th: np.ndarray, p: float) -> float:
        x, y = th
        return float(-(p - P_STAR) * x**2 / 2 + x**4 / 4 + y**2 / 2)

    def grad(self, th: np.ndarray, p: float) -> np.ndarray:
        x, y = th
        return np.array([-(p - P_STAR) * x + x**3, y])

    def hessian(self, th: np.ndarray, p: float) -> np.ndarray:
        x, _ = th
        return np.diag([-(p - P_STAR) + 3 * x**2, 1.0])

    def grad_p(self, th: np.ndarray, p: float) -> np.ndarray:
        return np.array([-th[0], 0.0])


class Hyperbola(Problem):
    """``L = ½(u w − p)² + ½ z²`` has the scaling symmetry ``(αu, w/α)`` (generator
    diag(1, −1, 0)): every point of ``u w = p`` is critical, so ∇²L is singular everywhere on
    the branch, like the paper's orbit ``(αP, A/α)``."""

    def __init__(self) -> None:
        self.n = 3
        self.free = np.ones(3, bool)
        self.symmetries = (Symmetry("scaling", np.array([1.0, -1.0, 0.0])),)

    def loss(self, th: np.ndarray, p: float) -> float:
        u, w, z = th
        return float(0.5 * (u * w - p) ** 2 + 0.5 * z**2)

    def grad(self, th: np.ndarray, p: float) -> np.ndarray:
        u, w, z = th
        r = u * w - p
        return np.array([r * w, r * u, z])

    def hessian(self, th: np.ndarray, p: float) -> np.ndarray:
        u, w, _ = th
        r = u * w - p
        return np.array([[w * w, r + u * w, 0], [r + u * w, u * u, 0], [0, 0, 1.0]])

    def grad_p(self, th: np.ndarray, p: float) -> np.ndarray:
        u, w, _ = th
        return np.array([-w, -u, 0.0])


class Ring(Problem):
    """``L = ¼(x² + y² − p)² + ½ z²``: a circle of minima (rotation symmetry, an antisymmetric
    generator: no conserved quantity, so the slice gauge)."""

    def __init__(self) -> None:
        self.n = 3
        self.free = np.ones(3, bool)
        S = np.zeros((3, 3))
        S[0, 1], S[1, 0] = -1.0, 1.0
        self.symmetries = (Symmetry("rotation", S),)

    def loss(self, th: np.ndarray, p: float) -> float:
        x, y, z = th
        return float(0.25 * (x * x + y * y - p) ** 2 + 0.5 * z * z)

    def grad(self, th: np.ndarray, p: float) -> np.ndarray:
        x, y, z = th
        r = x * x + y * y - p
        return np.array([r * x, r * y, z])

    def hessian(self, th: np.ndarray, p: float) -> np.ndarray:
        x, y, _ = th
        r = x * x + y * y - p
        return np.array([[r + 2 * x * x, 2 * x * y, 0], [2 * x * y, r + 2 * y * y, 0],
                         [0, 0, 1.0]])

    def grad_p(self, th: np.ndarray, p: float) -> np.ndarray:
        return -np.array([th[0], th[1], 0.0])


def fd_grad_p(pb: Problem, th: np.ndarray, p: float, h: float = 1e-6) -> np.ndarray:
    return (pb.grad(th, p + h) - pb.grad(th, p - h)) / (2 * h)


@pytest.mark.parametrize("pb", [Fold(), Pitchfork(), Hyperbola(), Ring()])
def test_synthetic_derivatives(pb: Problem) -> None:
    """The hand-written derivatives of the test problems agree with differences."""
    rng = np.random.default_rng(3)
    th, p = rng.standard_normal(pb.n), 0.7
    np.testing.assert_allclose(pb.grad_p(th, p), fd_grad_p(pb, th, p), atol=1e-8)
    h = 1e-6
    H = np.stack([(pb.grad(th + h * e, p) - pb.grad(th - h * e, p)) / (2 * h)
                  for e in np.eye(pb.n)], axis=1)
    np.testing.assert_allclose(pb.hessian(th, p), H, atol=1e-7)


def test_fold_located_and_branch_turns() -> None:
    pb = Fold()
    p0 = P_STAR + 1.0
    th0 = np.array([1.0, 0.0, 0.0])  # the minimum x = +1
    br = run_branch(pb, th0, p0, P_STAR - 1.0, Options(ds=0.05, ds_max=0.1),
                    lo=P_STAR - 1.0, hi=p0)
    assert br.status is Outcome.LEFT_RANGE  # around the fold and back out through p0
    assert [s.kind for s in br.specials] == [Bifurcation.FOLD]
    sp = br.specials[0]
    assert abs(sp.p - P_STAR) <= 1e-8
    assert abs(sp.theta[0]) <= 1e-4  # x = 0 at the fold
    assert abs(sp.fold_test) > 0.5
    # stable (x > 0) before the fold, unstable (x < 0) after it; the last point is x = −1
    assert br.points[0].stable and not br.points[-1].stable
    assert br.points[-1].p == p0 and abs(br.points[-1].theta[0] + 1.0) <= 1e-10
    for pt in br.points:
        assert abs(pt.theta[0] ** 2 - (pt.p - P_STAR)) <= 1e-10


def test_pitchfork_located_classified_and_switched() -> None:
    pb = Pitchfork()
    lo, hi = P_STAR - 0.5, P_STAR + 0.7
    opt = Options(ds=0.05, ds_max=0.1)
    br = run_branch(pb, np.zeros(2), lo, hi, opt, lo=lo, hi=hi)
    assert br.status is Outcome.REACHED_END and br.points[-1].p == hi
    assert [s.kind for s in br.specials] == [Bifurcation.PITCHFORK]
    sp = br.specials[0]
    assert abs(sp.p - P_STAR) <= 1e-8
    assert abs(sp.null_vector[0]) == pytest.approx(1.0)
    assert br.points[0].stable and not br.points[-1].stable
    for direction in (1, -1):
        new = switch_branch(pb, sp, hi, opt, lo=lo, hi=hi, direction=direction,
                            gauge_theta=np.zeros(2))
        assert new.status is Outcome.REACHED_END, new.message
        xs = np.array([pt.theta[0] for pt in new.points])
        ps = np.array([pt.p for pt in new.points])
        assert np.all(np.sign(xs) == direction)
        np.testing.assert_allclose(xs**2, ps - P_STAR, atol=1e-10)
        assert all(pt.stable for pt in new.points)  # supercritical: the new branch is stable


def test_transcritical_classified() -> None:
    """``L = −(p − p*) x²/2 + x³/3``: branches x = 0 and x = p − p* exchange stability."""

    class Trans(Pitchfork):
        def loss(self, th: np.ndarray, p: float) -> float:
            x, y = th
            return float(-(p - P_STAR) * x**2 / 2 + x**3 / 3 + y**2 / 2)

        def grad(self, th: np.ndarray, p: float) -> np.ndarray:
            x, y = th
            return np.array([-(p - P_STAR) * x + x**2, y])

        def hessian(self, th: np.ndarray, p: float) -> np.ndarray:
            return np.diag([-(p - P_STAR) + 2 * th[0], 1.0])

    pb = Trans()
    lo, hi = P_STAR - 0.5, P_STAR + 0.5
    opt = Options(ds=0.05, ds_max=0.1)
    br = run_branch(pb, np.zeros(2), lo, hi, opt, lo=lo, hi=hi)
    assert [s.kind for s in br.specials] == [Bifurcation.TRANSCRITICAL]
    assert abs(br.specials[0].p - P_STAR) <= 1e-8
    new = switch_branch(pb, br.specials[0], hi, opt, lo=lo, hi=hi, direction=1,
                        gauge_theta=np.zeros(2))
    for pt in new.points:
        assert abs(pt.theta[0] - (pt.p - P_STAR)) <= 1e-10


@pytest.mark.parametrize("gauge", [Gauge.INVARIANT, Gauge.SLICE])
def test_symmetric_branch_followed(gauge: Gauge) -> None:
    """A continuum of critical points at every p: the bordered system stays regular."""
    pb = Hyperbola()
    th0 = np.array([1.0, 1.0, 0.0])
    br = run_branch(pb, th0, 1.0, 3.0, Options(ds=0.05, ds_max=0.05, gauge=gauge), lo=1.0,
                    hi=3.0)
    assert br.status is Outcome.REACHED_END, br.message
    assert len(br.points) > 20 and not br.specials
    for pt in br.points:
        u, w, _ = pt.theta
        assert abs(u * w - pt.p) <= 1e-11
        # the Hessian is singular there (the orbit), the non-symmetry spectrum is not
        assert abs(np.linalg.det(pb.hessian(pt.theta, pt.p))) <= 1e-9
        assert pt.eigenvalues.size == 2 and np.all(pt.eigenvalues < 0)
        if gauge is Gauge.INVARIANT:  # u² − w² is conserved: the balanced branch u = w = √p
            assert abs(u - w) <= 1e-11 and abs(u - math.sqrt(pt.p)) <= 1e-11


def test_without_the_symmetry_the_system_is_singular() -> None:
    pb = Hyperbola()
    pb.symmetries = ()
    br = run_branch(pb, np.array([1.0, 1.0, 0.0]), 1.0, 3.0, Options(), lo=1.0, hi=3.0)
    assert br.status is Outcome.SINGULAR


def test_rotation_symmetry_slice_gauge() -> None:
    pb = Ring()
    opt = Options(ds=0.05, ds_max=0.05, gauge=Gauge.SLICE)
    br = run_branch(pb, np.array([0.6, 0.8, 0.0]), 1.0, 2.0, opt, lo=1.0, hi=2.0)
    assert br.status is Outcome.REACHED_END, br.message
    for pt in br.points:
        assert abs(pt.theta[0] ** 2 + pt.theta[1] ** 2 - pt.p) <= 1e-11
    # the invariant gauge holds what is conserved and cuts a generator that conserves nothing
    # (antisymmetric) by the same slice: the same branch, point for point
    inv = run_branch(pb, np.array([0.6, 0.8, 0.0]), 1.0, 2.0,
                     Options(ds=0.05, ds_max=0.05), lo=1.0, hi=2.0)
    assert inv.status is Outcome.REACHED_END, inv.message
    assert len(inv.points) == len(br.points)
    for a, b in zip(inv.points, br.points, strict=True):
        np.testing.assert_array_equal(a.theta, b.theta)


def test_lagrange_weights_reproduce_polynomials() -> None:
    """Values and derivatives of a random degree-6 polynomial from 7 Chebyshev nodes, at,
    near and between the nodes, against numpy's polynomial evaluation."""
    from mesadyn.analysis.continuation import lagrange_weights

    rng = np.random.default_rng(5)
    coef = rng.standard_normal(7)
    poly = np.polynomial.Polynomial(coef)
    nodes = 1.5 + 1.5 * np.cos((2 * np.arange(7) + 1) * np.pi / 14)
    for p in [0.1, 1.0, nodes[2], nodes[2] + 1e-13, 2.9]:
        assert abs(lagrange_weights(nodes, p) @ poly(nodes) - poly(p)) <= 1e-12
        assert abs(lagrange_weights(nodes, p, derivative=True) @ poly(nodes)
                   - poly.deriv()(p)) <= 1e-10


# ---- the paper's fields ---------------------------------------------------------------------
def test_exact_parameter_derivative_matches_differences() -> None:
    """∂∇L/∂p from the polynomial structure against central differences of fields built at
    p ± h (σ, c, m4), and the combined ∇L against the field built at p."""
    from mesadyn.field import ExactField

    rng = np.random.default_rng(0)
    for name, fam, p in (("sigma", gaussian(2, 1.0), 1.3), ("scale", sparse(2, 1.0), 0.8),
                         ("m4", gaussian(2, 1.0), 2.2), ("m2", gaussian(2, 1.0), 1.1)):
        par = make_parameter(name, fam, 6)
        pb = ParametricField(par, 0.7 * p, 1.4 * p)
        th = 0.4 * rng.standard_normal(pb.n)
        h = 1e-4 * p
        fd = (ExactField(par.family_at(p + h), 6, cache=False).grad(torch.as_tensor(th))
              - ExactField(par.family_at(p - h), 6, cache=False).grad(torch.as_tensor(th)))
        fd = fd.numpy() / (2 * h)
        exact = pb.grad_p(th, p)
        assert np.abs(exact - fd).max() <= 1e-6 * np.abs(fd).max(), name
        direct = ExactField(par.family_at(p), 6, cache=False).grad(torch.as_tensor(th)).numpy()
        assert np.abs(pb.grad(th, p) - direct).max() <= 1e-12 * np.abs(direct).max(), name


def test_gaussian_sigma_reproduces_theorem_41() -> None:
    """Continuing the balanced point in σ: ab = ab*(σ) (Theorem 4.1) at every point, each a
    fixed point of the field built at its σ to 1e-10, at least 200 points."""
    d, T = 2, 8
    par = make_parameter("sigma", gaussian(d, 1.0), T)
    span = 1.5
    res = follow(par, 0.5, 2.0, options=Options(ds=span / 199, ds_max=span / 199))
    br = res.branches[0]
    assert br.status is Outcome.REACHED_END and len(br.points) >= 200
    assert not br.specials and len(res.branches) == 1
    pb = ParametricField(par, 0.5, 2.0)
    inv0 = None
    for pt in br.points:
        an = analyse_point(pb, pt.theta, pt.p)
        # Theorem 4.1 from the moment table, not from mesadyn.theory
        s = pt.p
        k1, k2, k3 = 3 * s**4, 15 * s**6, 3 * (d - 1) * s**6
        star = k1 / (k2 + k3 * math.fsum(1 / k for k in range(1, T - 1)) / (T - 2))
        assert np.abs(an.ab - star).max() <= 1e-10 * star
        assert an.residual <= 1e-10
        assert an.offdiag_mass <= 1e-20 and an.n_unstable == 0
        assert an.zero_modes["unexplained"] == 0
        inv0 = an.invariant if inv0 is None else inv0
        assert abs(an.invariant - inv0) <= 1e-12
    assert br.points[-1].p == 2.0


def test_sparse_per_coordinate_symmetries_and_unused_entries() -> None:
    """Sparse data decouple the coordinates: d scaling symmetries and unused entries of A.
    The full system is degenerate there (the (W^KQ_33, W^PV_13) pairs are quartic zero modes,
    which ``classify`` reports as higher order), so the full continuation stops as singular;
    on the diagonal (Theorem 4.3's mask) the branch follows ab*(c) = c2/c1 (κ3 = 0)."""
    from mesadyn.analysis.spectrum import classify
    from mesadyn.model import diagonal_mask

    d, T = 2, 6
    par = make_parameter("scale", sparse(d, 1.0), T)
    pb = ParametricField(par, 0.8, 1.5)
    assert len(pb.symmetries) == d
    assert pb.free.sum() < 6 * d * d  # the cross-coordinate entries of A are never reached
    res = follow(par, 0.8, 1.5, options=Options(ds=0.05, ds_max=0.05), problem=pb)
    assert res.branches[0].status is Outcome.SINGULAR
    th = res.branches[0].points[0].theta
    f = pb.field(0.8)
    zm = classify(f.hessian(torch.as_tensor(th)).numpy(), th, field=f).to_dict()["zero_modes"]
    assert zm["higher_order"] == d  # type: ignore[index]
    masked = follow(par, 0.8, 1.5, options=Options(ds=0.05, ds_max=0.05),
                    mask=diagonal_mask(d))
    br = masked.branches[0]
    assert br.status is Outcome.REACHED_END, br.message
    pbm = ParametricField(par, 0.8, 1.5)
    for pt in br.points:
        star = constants(sparse(d, pt.p), T).ab_star
        an = analyse_point(pbm, pt.theta, pt.p)
        assert np.abs(an.ab - star).max() <= 1e-10 * star and an.residual <= 1e-10


def test_radius_follows_the_generalised_reduced_constants() -> None:
    """r of W = r·diag(λ) (not a polynomial parameter: fields built at each r, ∂∇L/∂r by
    central differences): the balanced branch keeps ab = c2(r)/c1(r) of the generalised
    reduced system (mesadyn.theory, closed form) at every point."""
    d, T = 2, 6
    par = make_parameter("radius", gaussian(d, 1.0), T)
    assert par.powers is None
    res = follow(par, 1.0, 0.8, options=Options(ds=0.05, ds_max=0.05))
    br = res.branches[0]
    assert br.status is Outcome.REACHED_END, br.message
    assert br.points[-1].p == 0.8 and len(br.points) >= 5
    pb = ParametricField(par, 0.8, 1.0)
    for pt in br.points:
        star = constants(gaussian(d, 1.0), T, radius=pt.p).ab_star
        an = analyse_point(pb, pt.theta, pt.p)
        assert np.abs(an.ab - star).max() <= 1e-10 * star and an.residual <= 1e-10


def test_discrete_T_follows_theorem_41() -> None:
    from mesadyn.model import ab

    d = 2
    par = make_parameter("T", gaussian(d, 1.0), 4)
    res = follow_discrete(par, [4, 5, 6, 8])
    br = res.branches[0]
    assert br.status is Outcome.REACHED_END and [pt.p for pt in br.points] == [4, 5, 6, 8]
    for pt in br.points:
        star = constants(gaussian(d, 1.0), int(pt.p)).ab_star
        assert np.abs(ab(torch.as_tensor(pt.theta)).numpy() - star).max() <= 1e-10 * star


# ---- bad input --------------------------------------------------------------------------------
def test_bad_input_is_one_line() -> None:
    fam = gaussian(2, 1.0)
    with pytest.raises(MesadynError, match="unknown parameter 'kurtosis'"):
        make_parameter("kurtosis", fam, 6)
    with pytest.raises(MesadynError, match="scale applies to the sparse family"):
        make_parameter("scale", fam, 6)
    par = make_parameter("sigma", fam, 6)
    with pytest.raises(MesadynError, match=r"stop=-0.5 is outside the domain of sigma"):
        follow(par, 1.0, -0.5)
    m4 = make_parameter("m4", fam, 6)  # m4 in (m2², √(m6 m2)) = (1, √15)
    with pytest.raises(MesadynError, match="outside the domain of m4"):
        follow(m4, 3.0, 4.0)
    from mesadyn.model import diagonal_init

    far = diagonal_init(2, 2.0, 0.3).numpy()
    with pytest.raises(MesadynError, match="not near a fixed point") as info:
        follow(par, 1.0, 1.2, theta0=far)
    assert "\n" not in str(info.value)
    with pytest.raises(MesadynError, match="origin"):
        follow(par, 1.0, 1.2, theta0=np.zeros(18 * 4))
    with pytest.raises(MesadynError):
        iid(2, 1.0, 0.5, 3.0)


# ---- the result as a Dataset, parameter domains -------------------------------------------------
def test_continuation_dataset_round_trip() -> None:
    """``to_dataset``/``from_dataset`` give back every point, its driver state and analysis,
    and the same Dataset again; stability counts are recomputed with ZERO_RTOL."""
    import xarray as xr

    from mesadyn.analysis.continuation import Continuation, count_unstable
    from mesadyn.tolerances import ZERO_RTOL

    par = make_parameter("sigma", gaussian(2, 1.0), 6)
    seen: list[float] = []
    cont = follow(par, 0.9, 1.0, options=Options(ds=0.05, ds_max=0.05), analyse=True,
                  progress=seen.append)
    br = cont.branches[0]
    assert br.status is Outcome.REACHED_END and len(cont.analyses[0]) == len(br.points)
    assert seen == pytest.approx([abs(pt.p - 0.9) for pt in br.points], abs=1e-15)
    ds = cont.to_dataset()
    assert ds.attrs["parameter"] == "sigma" and ds.attrs["n_free"] == cont.n_free
    back = Continuation.from_dataset(ds, par)
    (b,) = back.branches
    assert b.status is Outcome.REACHED_END and (b.steps, b.rejected) == (br.steps, br.rejected)
    for pt, q, an, bn in zip(br.points, b.points, cont.analyses[0], back.analyses[0],
                             strict=True):
        np.testing.assert_array_equal(q.theta, pt.theta)
        np.testing.assert_array_equal(q.tangent, pt.tangent)
        assert (q.p, q.ds, q.iterations, q.n_unstable) == (pt.p, pt.ds, pt.iterations,
                                                           pt.n_unstable)
        assert bn.loss == an.loss and bn.zero_modes == an.zero_modes
        mu = q.eigenvalues  # the stability rule, written out
        assert q.n_unstable == int((mu > ZERO_RTOL * np.abs(mu).max()).sum())
    assert count_unstable(np.array([-1.0, 1e-9, 5e-9])) == 0  # both below 1e-8 · max|μ| = 1e-8
    assert count_unstable(np.array([-1.0, 2e-8, 0.5])) == 2
    xr.testing.assert_identical(back.to_dataset(), ds)
    with pytest.raises(MesadynError, match="lacks tangent, special_p"):
        Continuation.from_dataset(ds.drop_vars(["tangent", "special_p"]), par)
    with pytest.raises(MesadynError, match="runs sigma, not m4"):
        Continuation.from_dataset(ds, make_parameter("m4", gaussian(2, 1.0), 6))
    with pytest.raises(MesadynError, match="malformed"):
        Continuation.from_dataset(ds.assign(branch_status=("branch", ["sideways"])), par)
    with pytest.raises(MesadynError, match="to resume runs sigma from 0.9 to 1"):
        follow(par, 0.9, 1.1, resume=back)


def test_moment_domains_hold_only_moment_sequences() -> None:
    """m4 = m2² means x² is constant, which needs m6 = m2³: with gaussian m6 = 15 the end is
    open (no distribution has m2 = m4 = 1, m6 = 15); rademacher's m4 is pinned at 1."""
    from mesadyn.process import rademacher

    m4 = make_parameter("m4", gaussian(2, 1.0), 6).domain()
    assert not m4.contains(1.0) and m4.contains(1.0 + 1e-9) and not m4.contains(math.sqrt(15))
    pinned = make_parameter("m4", rademacher(2), 6)
    assert pinned.domain().contains(1.0) and not pinned.domain().contains(1.0 + 1e-9)
    with pytest.raises(MesadynError, match=r"m4 of rademacher is pinned at 1 by its other "):
        pinned.check(1.5, "stop")
    assert make_parameter("radius", gaussian(2, 1.0), 6, radius=0.9).value() == 0.9


def test_a_wide_range_combines_nodes_near_each_p() -> None:
    """Over σ ∈ [0.5, 100] (L grows like σ⁶) one set of Chebyshev nodes across the range put
    the combined gradient 6e-8 off the field's own at σ = 0.5, far above the corrector's 1e-11,
    and the continuation failed at its start.  Windows of a factor 2 give every p the rounding
    of the field built there (relative 1e-11 or better, at points off the branch)."""
    from mesadyn.analysis.continuation import ParametricField

    par = make_parameter("sigma", gaussian(2, 1.0), 6)
    pb = ParametricField(par, 0.5, 100.0)
    assert pb.windowed
    rng = np.random.default_rng(0)
    for p in (0.5, 0.7, 3.0, 10.0, 30.0, 100.0):
        th = par.balanced_point(p) * (1 + 0.01 * rng.standard_normal(72))
        g = pb.grad(th, p)
        g0 = pb.field(p).grad(torch.as_tensor(th)).numpy()
        assert np.abs(g - g0).max() <= 1e-11 * np.abs(g0).max(), p
    assert not ParametricField(par, 0.8, 1.5).windowed  # a narrow range keeps one set

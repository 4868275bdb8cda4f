"""Section 3.1: families, their exact moments (vs sample moments within SEs), and sequences."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mesadyn.errors import MesadynError
from mesadyn.process import (
    FAMILIES,
    FamilyName,
    NoExactMoments,
    NoReducedSystem,
    family,
    fixed,
    gaussian,
    hankel_atoms,
    iid,
    make_generator,
    mixture,
    moments,
    ones,
    rademacher,
    sample,
    sample_lambdas,
    sample_sequences,
    sample_transitions,
    sampled,
    sequences,
    shifted,
    sparse,
    uniform,
)

N = 50_000


def _mean_se(v: np.ndarray) -> tuple[float, float]:
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v)))


FAMS = [gaussian(4, 0.7), sparse(4, 1.3), rademacher(4), uniform(4), iid(4, 1.0, 3.0, 15.0)]


@pytest.mark.parametrize("fam", FAMS[:4], ids=lambda f: f.name)
def test_kappas_match_sample_moments(fam):
    x = fam.sample(N, make_generator(11), "cpu").numpy()
    j = 0
    checks = {
        "kappa1": (x[:, j] ** 4, fam.kappa1),
        "kappa2": (x[:, j] ** 6, fam.kappa2),
        "kappa3": ((x[:, j] ** 2)[:, None] * x[:, 1:] ** 4).sum(1),
        "m2": (x[:, j] ** 2, fam.second_moment),
        "norm": ((x**2).sum(1), fam.mean_sq_norm),
    }
    checks["kappa3"] = (checks["kappa3"], fam.kappa3)
    for name, (vals, exact) in checks.items():
        mean, se = _mean_se(vals)
        assert abs(mean - exact) <= 4 * se + 1e-12, (name, mean, se, exact)


def test_kappa_table_from_integrals():
    """The DESIGN table's entries recomputed by quadrature / enumeration (not from the code)."""
    s, d = 1.7, 5
    g = gaussian(d, s)
    # Gauss-Hermite (probabilists') quadrature is exact for these polynomial moments
    z, w = np.polynomial.hermite_e.hermegauss(12)
    w = w / w.sum()
    mom = [float((w * (s * z) ** k).sum()) for k in (2, 4, 6)]
    assert g.kappa1 == pytest.approx(mom[1], rel=1e-9)
    assert g.kappa2 == pytest.approx(mom[2], rel=1e-9)
    assert g.kappa3 == pytest.approx((d - 1) * mom[0] * mom[1], rel=1e-9)
    u = uniform(d)
    z, w = np.polynomial.legendre.leggauss(8)
    umom = [float((0.5 * w * z**k).sum()) for k in (2, 4, 6)]
    assert (u.second_moment, u.kappa1, u.kappa2) == pytest.approx(umom, rel=1e-12)
    assert u.kappa3 == pytest.approx((d - 1) * umom[0] * umom[1], rel=1e-12)
    # sparse: enumerate the 2d equally likely vectors ±c e_i
    c = 0.5
    vecs = np.concatenate([c * np.eye(d), -c * np.eye(d)])
    sp = sparse(d, c)
    assert sp.kappa1 == pytest.approx(np.mean(vecs[:, 0] ** 4), rel=1e-12)
    assert sp.kappa2 == pytest.approx(np.mean(vecs[:, 0] ** 6), rel=1e-12)
    k3 = np.mean((vecs[:, :1] ** 2 * vecs[:, 1:] ** 4).sum(1))
    assert sp.kappa3 == pytest.approx(k3, abs=1e-15)
    r = rademacher(d)
    assert (r.kappa1, r.kappa2, r.kappa3) == (1.0, 1.0, d - 1)


COUNTS = np.array([
    [0, 0, 0, 0], [2, 0, 0, 0], [1, 1, 0, 0], [4, 0, 0, 0], [2, 2, 0, 0], [3, 1, 0, 0],
    [6, 0, 0, 0], [2, 4, 0, 0], [2, 2, 2, 0], [1, 0, 0, 0], [3, 0, 0, 0], [2, 1, 1, 0],
])


@pytest.mark.parametrize("fam", FAMS[:4], ids=lambda f: f.name)
def test_joint_moments_match_samples(fam):
    x = fam.sample(N, make_generator(12), "cpu").numpy()
    exact = fam.moment(COUNTS)
    for row, e in zip(COUNTS, exact, strict=True):
        vals = np.prod(x ** row[None, :], axis=1)
        mean, se = _mean_se(vals)
        assert abs(mean - e) <= 4 * se + 1e-12, (row, mean, se, e)


def test_fixed_family_moments_are_products():
    f = fixed([1.0, -2.0, 0.5])
    assert f.moment(np.array([[1, 2, 3]]))[0] == pytest.approx(1.0 * 4.0 * 0.125)
    o = ones(3)
    assert (o.kappa1, o.kappa2, o.kappa3) == (1.0, 1.0, 2.0)
    x = o.sample(5, make_generator(0), "cpu")
    assert torch.equal(x, torch.ones(5, 3, dtype=torch.float64))
    with pytest.raises(MesadynError, match="c·1_d"):
        _ = f.kappa1


def test_lambdas_uniform_on_torus():
    lam = sample_lambdas(N, 2, make_generator(3), "cpu")
    assert lam.dtype == torch.complex128
    assert torch.allclose(lam.abs(), torch.ones_like(lam.real), atol=1e-14)
    for n in (1, 2, 3):
        z = (lam[:, 0] ** n).numpy()
        for part in (z.real, z.imag):
            mean, se = _mean_se(part)
            assert abs(mean) <= 4 * se
    # the two coordinates are independent: E[λ_1 conj(λ_2)] = 0
    z = (lam[:, 0] * lam[:, 1].conj()).numpy()
    assert abs(z.real.mean()) <= 4 * z.real.std() / math.sqrt(N)


def test_sequences_follow_the_recursion():
    fam = gaussian(3, 1.0)
    x1, lam = sample(fam, 10, 7, make_generator(5), "cpu")
    x = sequences(x1, lam, 7)
    assert x.shape == (10, 7, 3) and x.dtype == torch.complex128
    assert torch.allclose(x[:, 0], x1.to(torch.complex128))
    for t in range(6):
        assert torch.allclose(x[:, t + 1], lam * x[:, t], atol=1e-13)


def test_seeded_sampling_is_reproducible():
    fam = gaussian(3, 1.0)
    a = sample(fam, 20, 5, make_generator(9), "cpu")
    b = sample(fam, 20, 5, make_generator(9), "cpu")
    c = sample(fam, 20, 5, make_generator(10), "cpu")
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_sparse_samples_are_signed_basis_vectors():
    x = sparse(5, 2.0).sample(1000, make_generator(1), "cpu")
    assert ((x != 0).sum(1) == 1).all()
    assert set(x[x != 0].abs().unique().tolist()) == {2.0}


@pytest.mark.parametrize("name", FAMILIES)
def test_family_by_name(name):
    f = family(name, 3, sigma=2.0, scale=0.5)
    assert f.name == name and f.d == 3


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: family("cauchy", 3), "cauchy"),
        (lambda: gaussian(3, 0.0), "sigma=0.0"),
        (lambda: gaussian(3, -1.0), "sigma=-1.0"),
        (lambda: gaussian(0, 1.0), "d=0"),
        (lambda: sparse(2, float("nan")), "scale"),
        (lambda: iid(2, 1.0, 0.5, 1.0), "not those of a distribution"),
        (lambda: fixed([1.0, float("inf")]), "finite"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(MesadynError, match=match):
        call()


# ---- families as types ----------------------------------------------------------------------
def test_families_are_hashable_by_value():
    assert gaussian(3, 0.5) == gaussian(3, 0.5) and hash(gaussian(3, 0.5)) == hash(gaussian(3, 0.5))
    assert gaussian(3, 0.5) != gaussian(3, 0.6) and gaussian(3, 0.5) != gaussian(4, 0.5)
    assert rademacher(3) == rademacher(3) and rademacher(3) != iid(3, 1.0, 1.0, 1.0)
    assert sparse(2, 1.5) == sparse(2, 1.5) and ones(3) == fixed([1.0] * 3, name="ones")
    assert len({gaussian(2), gaussian(2), sparse(2), ones(2), uniform(2)}) == 4

    def draw(n, gen, device):
        return torch.zeros(n, 2, dtype=torch.float64)

    def other(n, gen, device):
        return torch.zeros(n, 2, dtype=torch.float64)

    # a custom sampler's identity is part of the value
    assert iid(2, 1.0, 3.0, 15.0, sampler=draw) == iid(2, 1.0, 3.0, 15.0, sampler=draw)
    assert iid(2, 1.0, 3.0, 15.0, sampler=draw) != iid(2, 1.0, 3.0, 15.0, sampler=other)
    assert sampled(2, draw) == sampled(2, draw) != sampled(2, other)
    assert hash(sampled(2, draw)) == hash(sampled(2, draw))


def test_describe_keeps_its_layout():
    """The JSON description keys caches on disk and the runs' provenance: the paper's families
    keep exactly the keys (and order) they had before families became types."""
    assert list(gaussian(3, 2.0).describe()) == ["family", "kind", "d", "sigma", "m2", "m4", "m6"]
    assert gaussian(3, 2.0).describe()["kind"] == "iid"
    assert gaussian(3, 2.0).describe()["m6"] == 15 * 2.0**6
    assert list(rademacher(2).describe()) == ["family", "kind", "d", "m2", "m4", "m6"]
    assert sparse(2, 0.5).describe() == {"family": "sparse", "kind": "sparse", "d": 2,
                                         "scale": 0.5}
    assert ones(2).describe() == {"family": "ones", "kind": "fixed", "d": 2,
                                  "vector": [1.0, 1.0]}
    assert gaussian(3, 2.0).params == {"sigma": 2.0} and sparse(2, 0.5).params == {"scale": 0.5}


def test_capabilities_are_declared():
    fam = sampled(2, lambda n, g, dev: torch.zeros(n, 2, dtype=torch.float64))
    assert not fam.exact_moments and not fam.assumption_41
    with pytest.raises(NoExactMoments, match="no exact moments"):
        fam.moment(np.zeros((1, 2), dtype=int))
    assert all(f.exact_moments for f in FAMS)
    assert [f.assumption_41 for f in (gaussian(2), sparse(2), ones(2))] == [True, True, False]
    # partitions admitted: zero-mean iid even blocks, sparse one even block, fixed all
    assert gaussian(3).admits((0, 0, 1, 1, 2, 2)) and not gaussian(3).admits((0, 0, 0, 1, 1, 2))
    assert sparse(3).admits((0,) * 6) and not sparse(3).admits((0, 0, 0, 0, 1, 1))
    assert ones(3).admits((0, 1, 2, 0, 1, 1))
    with pytest.raises(NoReducedSystem, match="c·1_d"):
        fixed([1.0, 2.0]).kappas()


# ---- new initial-token families (issue 13) ---------------------------------------------------
NEW_FAMS = [
    shifted(3, 0.7, 0.6),
    shifted(3, -0.3, 1.1),
    moments(3, [0.2, 1.0, 0.5, 2.5, 1.5, 8.0]),
    moments(3, [[0.0, 1.0, 0.0, 2.0, 0.0, 5.0], [0.3, 0.6, 0.1, 0.7, 0.1, 1.0],
                [-0.5, 1.0, -1.0, 2.0, -2.5, 5.0]]),
    mixture([(0.3, ones(3)), (0.7, gaussian(3, 0.8))]),
    mixture([(0.2, sparse(3, 1.5)), (0.5, uniform(3)), (0.3, shifted(3, 0.5, 0.5))]),
]
ALL_COUNTS = np.array([c for c in itertools.product(range(7), repeat=3) if sum(c) <= 6])


@pytest.mark.parametrize("fam", NEW_FAMS, ids=[f"{f.name}-{i}" for i, f in enumerate(NEW_FAMS)])
def test_new_families_joint_moments_match_samples(fam):
    """Every joint moment of order <= 6 (84 of them at d = 3) within 4.5 SE of the sample
    mean (Bonferroni-ish for 84 checks)."""
    x = fam.sample(200_000, make_generator(21), "cpu").numpy()
    exact = fam.moment(ALL_COUNTS)
    for row, e in zip(ALL_COUNTS, exact, strict=True):
        vals = np.prod(x ** row[None, :], axis=1)
        mean, se = _mean_se(vals)
        assert abs(mean - e) <= 4.5 * se + 1e-12, (row, mean, se, e)
    assert fam.mean_sq_norm == pytest.approx(float((x**2).sum(1).mean()), rel=0.02)


def test_gaussian_raw_moments_by_quadrature():
    mu, s = -0.7, 1.3
    z, w = np.polynomial.hermite_e.hermegauss(8)
    w = w / w.sum()
    ref = [float((w * (mu + s * z) ** k).sum()) for k in range(1, 7)]
    assert shifted(2, mu, s).raw_moments == pytest.approx(ref, rel=1e-13)
    np.testing.assert_array_equal(shifted(3, 0.0, s).moment(ALL_COUNTS),
                                  gaussian(3, s).moment(ALL_COUNTS))


def test_hankel_atoms_reproduce_the_moments():
    for mom in ([0.0, 1.0, 0.0, 3.0, 0.0, 15.0], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
                [0.2, 1.0, 0.5, 2.5, 1.5, 8.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]):
        nodes, w = hankel_atoms(mom)
        got = [sum(wi * x**k for x, wi in zip(nodes, w, strict=True)) for k in range(1, 7)]
        assert got == pytest.approx(mom, rel=1e-9, abs=1e-12)
        assert all(wi > 0 for wi in w) and sum(w) == pytest.approx(1.0)
    assert len(hankel_atoms([1.0] * 6)[0]) == 1  # the point mass at 1
    assert len(hankel_atoms([0.5] * 6)[0]) == 2  # Bernoulli(1/2)


@pytest.mark.parametrize(("mom", "match"), [
    ([0.0, 1.0, 0.0, 0.5, 0.0, 1.0], "eigenvalue"),  # E[x⁴] < E[x²]²
    ([0.0, -1.0, 0.0, 1.0, 0.0, 1.0], "negative"),
    ([0.0, 1.0, 0.0, 1.0, 0.0, 2.0], "rank 2"),  # ±1 forces E[x⁶] = 1
    ([2.0, 1.0, 0.0, 1.0, 0.0, 1.0], "eigenvalue"),  # E[x]² > E[x²]
    ([0.0, 0.0, 0.0, 0.0, 0.0, 1.0], "forces x = 0"),
])
def test_moments_of_no_distribution_are_refused(mom, match):
    with pytest.raises(MesadynError, match=match) as info:
        moments(2, mom)
    assert "not those of a distribution" in str(info.value) and "\n" not in str(info.value)


def test_family_from_option_values():
    assert family("shifted", 3, sigma=0.5, mu=0.2) == shifted(3, 0.2, 0.5)
    assert family("moments", 2, moments="0,1,0,3,0,15") == moments(2, [0, 1, 0, 3, 0, 15])
    per = family("moments", 2, moments="0,1,0,3,0,15; 0,1,0,1,0,1")
    assert per == moments(2, [[0, 1, 0, 3, 0, 15], [0, 1, 0, 1, 0, 1]])
    mix = family("mixture", 3, mixture="0.3:ones,0.7:gaussian", sigma=2.0)
    assert mix == mixture([(0.3, ones(3)), (0.7, gaussian(3, 2.0))])
    mix2 = family("mixture", 2, mixture="0.5:gaussian(sigma=0.5),0.5:shifted(mu=1;sigma=0.1)")
    assert mix2 == mixture([(0.5, gaussian(2, 0.5)), (0.5, shifted(2, 1.0, 0.1))])
    for name in FamilyName:
        kw = {"moments": "0,1,0,3,0,15"} if name == "moments" else {}
        if name == "mixture":
            kw = {"mixture": "1:uniform"}
        f = family(name, 3, sigma=2.0, scale=0.5, mu=0.0, **kw)
        assert f.d == 3 and isinstance(f.describe()["kind"], str)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: shifted(3, 0.0, -1.0), "sigma=-1.0"),
    (lambda: shifted(3, float("nan"), 1.0), "mu"),
    (lambda: mixture([(1.2, ones(2)), (-0.2, gaussian(2))]), "p=1.2"),
    (lambda: mixture([(0.5, ones(2)), (0.4, gaussian(2))]), "sum to 1"),
    (lambda: mixture([(0.5, ones(2)), (0.5, gaussian(3))]), "share d"),
    (lambda: family("mixture", 2, mixture="0.5:ones,0.5:cauchy"), "cauchy"),
    (lambda: family("mixture", 2, mixture="half:ones"), "'half'"),
    (lambda: family("mixture", 2, mixture="1:gaussian(tau=2)"), "'tau'"),
    (lambda: family("mixture", 2), "components"),
    (lambda: family("gaussian", 2, mu=0.5), "mu=0.5"),
    (lambda: family("moments", 2), "needs its moments"),
    (lambda: family("moments", 2, moments="0,1,0,3"), "6 numbers"),
    (lambda: moments(3, np.ones((2, 6))), r"\(3, 6\)"),
    (lambda: sample(gaussian(2), 4, 5, make_generator(0), "cpu", radius=0.0), "radius=0.0"),
])
def test_bad_new_input_raises(call, match):
    with pytest.raises(MesadynError, match=match):
        call()


def test_radius_sequences():
    fam = gaussian(2, 1.0)
    x1, lam = sample(fam, 50, 6, make_generator(4), "cpu", radius=0.7)
    assert torch.allclose(lam.abs(), torch.full((50, 2), 0.7, dtype=torch.float64))
    x = sequences(x1, lam, 6)
    for t in range(5):
        assert torch.allclose(x[:, t + 1], lam * x[:, t], atol=1e-13)
    # r = 1 draws the same numbers as before the radius existed
    a = sample(fam, 20, 5, make_generator(9), "cpu")
    b = sample(fam, 20, 5, make_generator(9), "cpu", radius=1.0)
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))


def test_single_component_mixture_samples_like_its_component():
    a = mixture([(1.0, gaussian(3, 0.7))]).sample(100, make_generator(3), "cpu")
    assert torch.equal(a, gaussian(3, 0.7).sample(100, make_generator(3), "cpu"))


# ---- processes beyond diagonal W (sampled only) ------------------------------------------------
def test_real_rotations_keep_sequences_real_and_block_norms():
    fam = gaussian(4, 1.0)
    x = sample_sequences(fam, 200, 6, make_generator(1), "cpu", rotation="real")
    assert x.imag.abs().max().item() == 0.0
    blocks = x.real.reshape(200, 6, 2, 2).square().sum(-1)  # ‖(x_{2k}, x_{2k+1})‖² per block
    assert torch.allclose(blocks, blocks[:, :1].expand_as(blocks), rtol=1e-12)
    W = sample_transitions(20_000, 4, make_generator(2), "cpu", rotation="real", radius=0.5)
    assert torch.allclose(W.real[:, 0, 0] ** 2 + W.real[:, 1, 0] ** 2,
                          torch.full((20_000,), 0.25, dtype=torch.float64))
    for v in (W.real[:, 0, 0].numpy(), W.real[:, 1, 0].numpy()):  # cos, sin of a uniform angle
        mean, se = _mean_se(v)
        assert abs(mean) <= 4 * se
        mean, se = _mean_se(v**2)
        assert abs(mean - 0.125) <= 4 * se


def test_haar_transitions_are_unitary_and_isotropic():
    W = sample_transitions(20_000, 3, make_generator(3), "cpu", rotation="haar")
    eye = torch.eye(3, dtype=torch.complex128)
    assert torch.allclose(W @ W.conj().transpose(1, 2), eye.expand_as(W), atol=1e-12)
    for i, j in ((0, 0), (1, 2)):  # E|W_ij|² = 1/d, E W_ij = 0, E[W_ij²] = 0 (Haar invariance)
        z = W[:, i, j].numpy()
        mean, se = _mean_se(np.abs(z) ** 2)
        assert abs(mean - 1 / 3) <= 4 * se
        for part in (z.real, z.imag, (z * z).real):
            mean, se = _mean_se(part)
            assert abs(mean) <= 4 * se
    x = sample_sequences(gaussian(3), 50, 5, make_generator(4), "cpu", rotation="haar")
    norms = x.abs().square().sum(-1)
    assert torch.allclose(norms, norms[:, :1].expand_as(norms), rtol=1e-12)


def test_noise_adds_its_variance_each_step():
    """x_1 = 0: x_t = Σ_{s<t} W^{t−1−s} ε_s, so E|x_{t,k}|² = (t−1) s² for unitary W."""
    s = 0.3
    x = sample_sequences(fixed([0.0, 0.0]), 40_000, 5, make_generator(5), "cpu", noise=s)
    for t in range(5):
        mean, se = _mean_se((x[:, t, 0].abs() ** 2).numpy())
        assert abs(mean - t * s * s) <= 4 * se + 1e-15
    # diagonal and noiseless: the same draws as sample + sequences
    x1, lam = sample(gaussian(2), 10, 4, make_generator(6), "cpu", radius=0.8)
    y = sample_sequences(gaussian(2), 10, 4, make_generator(6), "cpu", radius=0.8)
    assert torch.equal(y, sequences(x1, lam, 4))


@pytest.mark.parametrize(("call", "match"), [
    (lambda: sample_transitions(2, 3, make_generator(0), "cpu", rotation="real"), "d=3"),
    (lambda: sample_transitions(2, 2, make_generator(0), "cpu", rotation="spin"), "'spin'"),
    (lambda: sample_sequences(gaussian(2), 2, 3, make_generator(0), "cpu", noise=-1.0),
     "noise=-1.0"),
])
def test_bad_process_input(call, match):
    with pytest.raises(MesadynError, match=match):
        call()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.just(0.0), st.floats(1e-3, 3), st.floats(-3, -1e-3)),
                          st.floats(0.05, 1.0)), min_size=1, max_size=6))
def test_moments_of_any_discrete_distribution_are_accepted(atoms):
    """Moments of a random discrete distribution pass the Hankel check and the sampler's
    atoms reproduce them; raising E[x⁴] below E[x²]² (impossible) is refused."""
    x = np.array([a for a, _ in atoms])
    w = np.array([p for _, p in atoms])
    w = w / w.sum()
    mom = [float((w * x**k).sum()) for k in range(1, 7)]
    scale = max(1.0, max(abs(v) for v in mom))
    try:
        nodes, wt = hankel_atoms(mom)
    except MesadynError:
        # only near-degenerate inputs (atoms closer than rounding can resolve) may be refused
        H = np.array([[[1.0, *mom][i + j] for j in range(4)] for i in range(4)])
        assert np.linalg.eigvalsh(H).min() < 1e-8 * scale
        return
    got = [sum(p * v**k for v, p in zip(nodes, wt, strict=True)) for k in range(1, 7)]
    assert got == pytest.approx(mom, rel=1e-6, abs=1e-6 * scale)
    m2 = mom[1]
    if m2 > 1e-3:
        bad = list(mom)
        bad[3] = 0.5 * m2 * m2  # E[x⁴] >= E[x²]² (Jensen)
        with pytest.raises(MesadynError, match="not those of a distribution"):
            hankel_atoms(bad)

"""The families of Section 3.1 (mesadyn/process/families.py, constructors.py): their exact
moments against sample moments within standard errors, the κ table by quadrature, values as
types (hashing, descriptions, declared capabilities)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.process import (
    NoExactMoments,
    NoReducedSystem,
    family,
    fixed,
    gaussian,
    iid,
    make_generator,
    ones,
    rademacher,
    sampled,
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


def test_sparse_samples_are_signed_basis_vectors():
    x = sparse(5, 2.0).sample(1000, make_generator(1), "cpu")
    assert ((x != 0).sum(1) == 1).all()
    assert set(x[x != 0].abs().unique().tolist()) == {2.0}


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


def test_sparse_takes_the_configs_name_for_its_scale():
    """``sparse(d, scale=...)`` as every Config and --scale say; ``c=`` is deprecated."""
    import warnings

    from mesadyn.process import sparse

    assert sparse(3, scale=0.5).describe() == sparse(3, 0.5).describe()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = sparse(3, c=0.5)
    assert old.describe() == sparse(3, scale=0.5).describe()
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)

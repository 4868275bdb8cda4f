"""Data models beyond the paper (issue 13): the radius r and the new initial-token families.

Each exact field is checked against independent computations through the model's general
path (``model.sequence_loss`` on explicit sequences, which assumes nothing about |λ|):

- the radius-weighted counts against brute-force enumeration of (t, i, i');
- exact L, ∇L against an exact quadrature (λ on the 3T-th roots of unity times r, x_1 on a
  rule exact to degree 6: Gauss–Hermite shifted by μ, the moment family's own atoms, the
  union of the components' rules for a mixture);
- exact L, ∇L within 4 batch-means standard errors of a Monte-Carlo estimate;
- r = 1, μ = 0 and single-component mixtures reproduce the paper's fields to 1e-12.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from mesadyn.field import ExactField
from mesadyn.field import _moments as M
from mesadyn.model import active_mask, gaussian_init, sequence_loss
from mesadyn.process import (
    IID,
    Fixed,
    Mixture,
    Moments,
    Shifted,
    Sparse,
    gaussian,
    make_generator,
    mixture,
    moments,
    ones,
    rademacher,
    sample,
    sequences,
    shifted,
    sparse,
    uniform,
)


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("MESADYN_CACHE_DIR", str(tmp_path / "cache"))


# ---- radius-weighted counts ---------------------------------------------------------------
@pytest.mark.parametrize("radius", [0.5, 0.9, 1.25])
@pytest.mark.parametrize("T", [3, 6])
def test_radius_weights_match_brute_force(radius, T):
    rng = np.random.default_rng(int(100 * radius) + T)
    for which, S in (("G", 6), ("C", 4)):
        W = M.weights(T, which, radius=radius)
        parts, hs = M.set_partitions(S), M._h_patterns(S)
        picks = [(p, h) for p in range(len(parts)) for h in range(len(hs))
                 if which == "G" or not hs[h][0]]
        if len(picks) > 500:
            picks = [picks[k] for k in rng.choice(len(picks), 500, replace=False)]
        for p, h in picks:
            ref = M.brute_weight(T, which, parts[p], tuple(int(b) for b in hs[h]), radius)
            assert W[p, h] == pytest.approx(ref, rel=1e-12, abs=1e-300), (which, p, h)


def test_radius_one_weights_are_the_counts():
    for which in ("G", "C"):
        np.testing.assert_array_equal(M.weights(7, which, radius=1.0), M.weights(7, which))


# ---- independent references -----------------------------------------------------------------
def _x_rule(fam, d):
    """Nodes (N, d) and weights (N,) integrating every polynomial of degree <= 6 exactly."""
    if isinstance(fam, Fixed):
        return np.asarray([fam.vector]), np.ones(1)
    if isinstance(fam, Sparse):
        nodes = np.concatenate([fam.scale * np.eye(d), -fam.scale * np.eye(d)])
        return nodes, np.full(2 * d, 1 / (2 * d))
    if isinstance(fam, Mixture):
        rules = [(_x_rule(f, d), p) for p, f in fam.components]
        return (np.concatenate([n for (n, _), _ in rules]),
                np.concatenate([p * w for (_, w), p in rules]))
    if isinstance(fam, Moments):  # per coordinate: its own atoms (exact moments)
        draw = fam.sampler
        per = [(np.asarray(n), np.asarray(w)) for n, w in zip(draw.nodes, draw.weights,
                                                               strict=True)]
        nodes = np.array(list(itertools.product(*[n for n, _ in per])))
        weights = np.prod(np.array(list(itertools.product(*[w for _, w in per]))), axis=1)
        return nodes, weights
    if isinstance(fam, Shifted):
        z, w1 = np.polynomial.hermite_e.hermegauss(4)
        x1, w1 = fam.mu + fam.sigma * z, w1 / w1.sum()
    elif isinstance(fam, IID) and fam.name == "gaussian":
        z, w1 = np.polynomial.hermite_e.hermegauss(4)
        x1, w1 = fam.params["sigma"] * z, w1 / w1.sum()
    elif isinstance(fam, IID) and fam.name == "rademacher":
        x1, w1 = np.array([-1.0, 1.0]), np.array([0.5, 0.5])
    elif isinstance(fam, IID) and fam.name == "uniform":
        x1, w1 = np.polynomial.legendre.leggauss(4)
        w1 = w1 / 2
    else:
        raise AssertionError(fam)
    nodes = np.array(list(itertools.product(x1, repeat=d)))
    weights = np.prod(np.array(list(itertools.product(w1, repeat=d))), axis=1)
    return nodes, weights


def _quadrature(fam, T, theta, radius=1.0):
    """Exact (L, ∇L) through the general model path: λ on the N-th roots of unity (N = 3T is
    above every |net exponent|), times r; x_1 on an exact rule."""
    d = fam.d
    N = 3 * T
    roots = radius * np.exp(2j * np.pi * np.arange(N) / N)
    lam = np.array(list(itertools.product(roots, repeat=d)))
    xs, wx = _x_rule(fam, d)
    x1 = torch.as_tensor(np.repeat(xs, len(lam), axis=0), dtype=torch.float64)
    lam_t = torch.as_tensor(np.tile(lam, (len(xs), 1)), dtype=torch.complex128)
    w = torch.as_tensor(np.repeat(wx, len(lam)) / len(lam), dtype=torch.float64)
    x = sequences(x1, lam_t, T)
    th = theta.clone().requires_grad_(True)
    L = (w * sequence_loss(th, x)).sum()
    (g,) = torch.autograd.grad(L, th)
    return L.detach(), g


def _monte_carlo(fam, T, theta, radius=1.0, n=32768, batches=128, seed=5):
    """Batch means of (L, ∇L) over sequences drawn by :func:`mesadyn.process.sample`."""
    x1, lam = sample(fam, n, T, make_generator(seed), "cpu", radius=radius)
    x = sequences(x1, lam, T)
    Ls, gs = [], []
    for xb in x.chunk(batches):
        th = theta.clone().requires_grad_(True)
        L = sequence_loss(th, xb).mean()
        (g,) = torch.autograd.grad(L, th)
        Ls.append(L.item())
        gs.append(g)
    Ls, G = np.array(Ls), torch.stack(gs).numpy()
    k = len(Ls)
    return (Ls.mean(), Ls.std(ddof=1) / np.sqrt(k), G.mean(0), G.std(0, ddof=1) / np.sqrt(k))


NEW = {
    "shifted": lambda d: shifted(d, 0.6, 0.8),
    "shifted-negative": lambda d: shifted(d, -0.4, 1.1),
    "moments-skewed": lambda d: moments(d, [0.2, 1.0, 0.5, 2.5, 1.5, 8.0]),
    "moments-per-coordinate": lambda d: moments(d, [[0.0, 1.0, 0.0, 2.0, 0.0, 5.0],
                                                    [0.3, 0.6, 0.1, 0.7, 0.1, 1.0],
                                                    [-0.5, 1.0, -1.0, 2.0, -2.5, 5.0]][:d]),
    "mixture-ones-gaussian": lambda d: mixture([(0.3, ones(d)), (0.7, gaussian(d, 0.9))]),
    "mixture-sparse-uniform": lambda d: mixture([(0.4, sparse(d, 1.2)), (0.6, uniform(d))]),
}


@pytest.mark.parametrize("name,d,T,radius", [
    ("shifted", 2, 4, 1.0), ("shifted", 1, 6, 0.8), ("shifted-negative", 2, 3, 1.2),
    ("moments-skewed", 2, 4, 1.0), ("moments-per-coordinate", 2, 5, 0.9),
    ("mixture-ones-gaussian", 2, 4, 1.0), ("mixture-sparse-uniform", 2, 4, 0.7),
    ("gaussian", 2, 5, 0.5), ("ones", 2, 4, 0.8), ("sparse", 2, 5, 1.1),
])
def test_exact_matches_exact_quadrature(name, d, T, radius):
    make = NEW.get(name) or {"gaussian": lambda d: gaussian(d, 0.9), "ones": ones,
                             "sparse": lambda d: sparse(d, 1.3)}[name]
    fam = make(d)
    field = ExactField(fam, T, radius=radius)
    for seed in (1, 2):
        theta = gaussian_init(d, 0.6, seed)
        L, g = field.loss_and_grad(theta)
        Lq, gq = _quadrature(fam, T, theta, radius)
        assert L.item() == pytest.approx(Lq.item(), rel=1e-11)
        assert torch.allclose(g, gq, rtol=1e-10, atol=1e-11 * gq.abs().max().item())


@pytest.mark.parametrize("name,d,T,radius", [
    ("shifted", 2, 5, 1.0), ("shifted", 3, 4, 0.9), ("moments-skewed", 3, 6, 1.0),
    ("moments-per-coordinate", 3, 4, 0.8), ("mixture-ones-gaussian", 2, 6, 0.5),
    ("mixture-sparse-uniform", 3, 5, 1.0), ("shifted-negative", 1, 10, 0.95),
])
def test_exact_within_4_se_of_monte_carlo(name, d, T, radius):
    fam = NEW[name](d)
    field = ExactField(fam, T, radius=radius)
    theta = gaussian_init(d, 0.4, 7 + d + T)
    L, g = field.loss_and_grad(theta)
    Lm, Lse, gm, gse = _monte_carlo(fam, T, theta, radius)
    assert abs(L.item() - Lm) <= 4 * Lse, (L.item(), Lm, Lse)
    act = active_mask(d)
    z = np.abs(g.numpy()[act] - gm[act]) / np.maximum(gse[act], 1e-300)
    noisy = gse[act] > 1e-12 * (1 + np.abs(gm[act]))
    assert z[noisy].max() <= 4, (name, z[noisy].max())
    assert np.allclose(g.numpy()[act][~noisy], gm[act][~noisy], rtol=1e-9, atol=1e-12)


# ---- the paper's fields are reproduced ------------------------------------------------------
@pytest.mark.parametrize("d,T", [(2, 5), (3, 10)])
def test_special_cases_reproduce_the_paper(d, T):
    theta = gaussian_init(d, 0.5, 3)
    cases = [
        (gaussian(d, 0.8), shifted(d, 0.0, 0.8)),
        (gaussian(d, 0.8), ExactField(gaussian(d, 0.8), T, radius=1.0)),
        (ones(d), mixture([(1.0, ones(d))])),
        (sparse(d, 1.3), mixture([(1.0, sparse(d, 1.3)), (0.0, ones(d))])),
        (rademacher(d), moments(d, [0.0, 1.0, 0.0, 1.0, 0.0, 1.0])),
        (uniform(d), moments(d, [0.0, 1 / 3, 0.0, 1 / 5, 0.0, 1 / 7])),
    ]
    for ref, other in cases:
        L0, g0 = ExactField(ref, T).loss_and_grad(theta)
        f = other if isinstance(other, ExactField) else ExactField(other, T)
        L1, g1 = f.loss_and_grad(theta)
        assert L1.item() == pytest.approx(L0.item(), rel=1e-12)
        assert torch.allclose(g1, g0, rtol=1e-12, atol=1e-12 * g0.abs().max().item())


def test_radius_changes_the_cache_key_and_describe(tmp_path):
    a = ExactField(gaussian(2), 5, cache_dir=tmp_path)
    b = ExactField(gaussian(2), 5, cache_dir=tmp_path, radius=0.5)
    assert a.cache_path != b.cache_path and b.cache_status.startswith("built")
    assert "radius" not in a.describe() and b.describe()["radius"] == 0.5
    assert ExactField(gaussian(2), 5, cache_dir=tmp_path, radius=0.5).cache_status == "hit"


def test_exact_field_range_is_refused_before_counting(monkeypatch):
    from mesadyn.errors import MesadynError

    def no_weights(*a, **k):
        raise AssertionError("weights must not run")

    monkeypatch.setattr(M, "weights", no_weights)
    with pytest.raises(MesadynError, match=r"T <= 100000, got T=100000000000000000000"):
        ExactField(gaussian(2), 10**20)
    with pytest.raises(MesadynError, match="radius=2.0 with T=200 overflows"):
        ExactField(gaussian(2), 200, radius=2.0)
    with pytest.raises(MesadynError, match="radius"):
        ExactField(gaussian(2), 5, radius=0.0)

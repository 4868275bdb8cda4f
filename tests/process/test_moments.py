"""The families given by moment sequences and mixtures (mesadyn/process/moments.py,
mixture.py): every joint moment of order <= 6 against the sample mean, the Gaussian raw moments
by quadrature, and the Hankel atoms of any moment sequence that a distribution has."""

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
    gaussian,
    hankel_atoms,
    make_generator,
    mixture,
    moments,
    ones,
    shifted,
    sparse,
    uniform,
)


def _mean_se(v: np.ndarray) -> tuple[float, float]:
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v)))


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


def test_single_component_mixture_samples_like_its_component():
    a = mixture([(1.0, gaussian(3, 0.7))]).sample(100, make_generator(3), "cpu")
    assert torch.equal(a, gaussian(3, 0.7).sample(100, make_generator(3), "cpu"))


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

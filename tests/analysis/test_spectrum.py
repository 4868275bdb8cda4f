"""Spectra of the flow's Jacobian −∇²L: reduced closed form, full Hessian, mode classification."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.analysis.fixedpoint import balanced_point, symmetry_direction
from mesadyn.analysis.spectrum import (
    block_weights,
    classify,
    fd_hessian,
    reduced_spectrum,
    reduced_spectrum_analytic,
)
from mesadyn.field.exact import ExactField
from mesadyn.model import active_mask, gaussian_init
from mesadyn.process import gaussian, ones, rademacher, sparse
from mesadyn.reduced import ReducedSystem
from mesadyn.theory import constants


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MESADYN_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("fam", [gaussian(5, 0.5), gaussian(5, 2.0), sparse(5, 1.0), ones(5)],
                         ids=["gauss0.5", "gauss2", "sparse", "ones"])
def test_reduced_spectrum_analytic_equals_numeric(fam):
    system = ReducedSystem.from_family(fam, 100)
    rng = np.random.default_rng(0)
    for a, b in rng.normal(size=(20, 2)):
        num = reduced_spectrum(system, a, b)
        ana = reduced_spectrum_analytic(system, a, b)
        assert np.allclose(num, ana, rtol=0, atol=1e-10 * max(1.0, np.abs(num).max()))
    # on the hyperbola ab = c2/c1: {−c1(a² + b²), 0}
    for a in (0.1, 0.5, 1.0, 3.0, -2.0):
        b = system.ab_star / a
        num = reduced_spectrum(system, a, b)
        expect = np.sort([-system.c1 * (a * a + b * b), 0.0])
        assert np.abs(num - expect).max() <= 1e-10 * max(1.0, abs(expect[0]))
    # at the origin saddle: {−c2, +c2}
    assert np.abs(reduced_spectrum(system, 0.0, 0.0) - [-system.c2, system.c2]).max() <= 1e-10


@pytest.mark.parametrize("fam", [gaussian(2, 0.8), ones(2), sparse(2, 1.3)],
                         ids=["gaussian", "ones", "sparse"])
def test_full_hessian_equals_finite_differences_of_exact_gradient(fam):
    field = ExactField(fam, 6)
    theta = gaussian_init(2, 0.4, seed=3).numpy()
    H = field.hessian(torch.as_tensor(theta)).numpy()
    H_fd = fd_hessian(field, theta, h=1e-5)
    act = active_mask(2)
    scale = np.abs(H).max()
    assert np.abs(H - H_fd).max() <= 1e-7 * scale
    assert np.abs(H[~act]).max() == 0.0 and np.abs(H[:, ~act]).max() == 0.0


def test_gaussian_fixed_point_zero_modes_are_symmetry_plus_inactive():
    d, T = 3, 10
    fam = gaussian(d, 1.0)
    field = ExactField(fam, T)
    theta = balanced_point(fam, T)
    H = field.hessian(torch.as_tensor(theta)).numpy()
    sp = classify(H, theta, field=field)
    assert sp.n_unstable == 0 and sp.stable
    assert sp.n_inactive == 18 * d * d - 6 * d * d
    assert sp.n_symmetry == 1
    assert sp.n_zero == sp.n_inactive + 1
    assert sp.n_unexplained == 0 and sp.n_unused == 0 and sp.n_degenerate == 0
    # the gap: zero modes at rounding level, non-zero modes far above the threshold
    assert sp.zero_gap[0] < 1e-12 < 1e-6 < sp.zero_gap[1]
    # the reduced mode −c1(a² + b²) (= −2 c2 at a = b) is in the full spectrum
    c = constants(fam, T)
    mu = -c.c1 * 2 * c.ab_star
    assert np.abs(sp.eigenvalues - mu).min() <= 1e-9 * abs(mu)


def test_rademacher_same_classification():
    fam = rademacher(2)
    field = ExactField(fam, 5)
    theta = balanced_point(fam, 5)
    sp = classify(field.hessian(torch.as_tensor(theta)).numpy(), theta, field=field)
    assert (sp.n_unstable, sp.n_symmetry, sp.n_unexplained) == (0, 1, 0)
    assert sp.n_zero == 48 + 1


def test_sparse_extra_zero_modes_are_explained():
    """Sparse x_1 = ±c e_i decouples the coordinates: A's cross-coordinate entries are unused
    (4d(d−1)), every coordinate has its own scaling symmetry (d − 1 beyond the global one),
    and one quartic direction per coordinate ((W^KQ_33)_jj with (W^PV_13)_jj)."""
    d, T = 2, 5
    fam = sparse(d, 1.0)
    field = ExactField(fam, T)
    theta = balanced_point(fam, T)
    sp = classify(field.hessian(torch.as_tensor(theta)).numpy(), theta, field=field)
    assert sp.n_unused == 4 * d * (d - 1)
    assert sp.n_symmetry == 1 and sp.n_coordinate_symmetry == d - 1
    assert sp.n_degenerate == d and all(abs(p - 4) < 0.1 for p in sp.degenerate_orders)
    assert sp.n_unexplained == 0 and sp.n_unstable == 0
    assert sp.n_zero == 12 * d * d + sp.n_unused + 1 + (d - 1) + d


def test_ones_masked_point_has_one_unstable_direction_in_the_offdiagonals():
    d, T = 3, 10
    fam = ones(d)
    field = ExactField(fam, T)
    theta = balanced_point(fam, T)
    sp = classify(field.hessian(torch.as_tensor(theta)).numpy(), theta)
    assert sp.n_unstable >= 1
    top = sp.leading()[-1]
    assert top["mode"] == "unstable"
    assert set(top["blocks"]) <= {"W_KQ_32", "W_PV_12"}
    # not a fixed point: the symmetry direction is not a zero mode there
    assert sp.n_symmetry == 0 and sp.symmetry_residual > 1e-3


def test_block_weights_partition_the_norm():
    v = np.random.default_rng(1).normal(size=(18 * 4, 3))
    w = block_weights(v, 2)
    assert np.allclose(sum(w.values()), 1.0)
    s = symmetry_direction(gaussian_init(2, 1.0, 2).numpy())[:, None]
    ws = block_weights(s, 2)
    assert sum(ws[b][0] for b in ("W_KQ_11", "W_PV_11", "W_PV_21", "W_KQ_12")) == 0.0

"""Shared fixtures: small seeded problems that every test module can use."""

from __future__ import annotations

import pytest
import torch

from mesadyn.process import gaussian, make_generator, sample


@pytest.fixture
def gen() -> torch.Generator:
    """A seeded CPU generator (seed 1234)."""
    return make_generator(1234)


@pytest.fixture
def small_gaussian():
    """``(family, x1, lam)``: 64 gaussian(σ=0.8) draws, d=3, from seed 7."""
    fam = gaussian(3, 0.8)
    x1, lam = sample(fam, 64, 8, make_generator(7), "cpu")
    return fam, x1, lam


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """One intra-op thread per test process: on 2 shared cores (and under pytest-xdist) extra
    OpenMP threads only spin against each other and make small problems many times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

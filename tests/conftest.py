"""Shared fixtures: small seeded problems that every test module can use."""

from __future__ import annotations

import pytest
import torch

from mesadyn.process import gaussian, make_generator, sample

#: Every device a device-parametrised test runs on: the CPU always, CUDA when there is one
#: (skipped with the reason otherwise: the same code runs in the "cpu" case).
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(
        not torch.cuda.is_available(), reason="CUDA is not available on this machine (torch "
        f"{torch.__version__}); the same code runs on the CPU in the 'cpu' cases")),
]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    """A torch device name, ``"cpu"`` and (when present) ``"cuda"``."""
    return str(request.param)


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


@pytest.fixture
def interrupt_after():
    """A factory of progress callbacks that raise KeyboardInterrupt on their n-th call (an
    interrupted run, for the resume tests)."""

    def make(n: int):
        calls: list[float] = []

        def progress(x: float) -> None:
            calls.append(x)
            if len(calls) == n:
                raise KeyboardInterrupt

        return progress

    return make

"""The full flow on a device (issue 16, item 2): θ, the state and ``−∇L`` stay on the device.

Every test runs on the CPU with the same code that runs on CUDA (the device is a parameter of
``integrate`` and ``FieldProblem``); the CUDA cases are skipped, with the reason, when this
machine has no CUDA.

- torchdiffeq: every θ the field receives is on the device, and during the solve nothing is
  converted to numpy or copied to the host except the points the driver records (exactly one
  per accepted step), while the field is evaluated ≥ 6 times per step — so a host round trip
  per evaluation could not pass; the steady-state monitor reads the state on the device;
- scipy is a host solver and does round-trip at every evaluation (its documented contract);
- ``device=`` defaults to the field's own device, and gives bit for bit the default CPU path;
- a CUDA run agrees with the CPU run to 1e-12 (skipped without CUDA).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField, Field, FiniteDifferenceHessian
from mesadyn.flow import FieldProblem, FlowOptions, drive, integrate, resolve_solver
from mesadyn.flow._driver import stepper_for
from mesadyn.flow._problem import field_device
from mesadyn.model import diagonal_init, free_mask, gaussian_init
from mesadyn.process import gaussian

HAS_CUDA = torch.cuda.is_available()
CUDA_SKIP = pytest.mark.skipif(
    not HAS_CUDA, reason=f"CUDA is not available on this machine (torch {torch.__version__}); "
    "the same code runs on the CPU in the 'cpu' cases")


class Recording(Field):
    """``base`` unchanged, recording the device of every θ it is evaluated at."""

    name = "recording"
    has_exact_hessian = True

    def __init__(self, base: Field) -> None:
        self.base = base
        self.family = base.family
        self.T = base.T
        self.devices: list[torch.device] = []

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        self.devices.append(theta.device)
        return self.base.loss(theta)

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.devices.append(theta.device)
        return self.base.loss_and_grad(theta)

    def hessian(self, theta: torch.Tensor) -> torch.Tensor:
        self.devices.append(theta.device)
        return self.base.hessian(theta)


@pytest.fixture(scope="module")
def base_field(tmp_path_factory: pytest.TempPathFactory) -> ExactField:
    """The exact field with torch contractions (on the CPU: no numpy inside an evaluation)."""
    return ExactField(gaussian(2, 0.9), 6, contractions="torch",
                      cache_dir=tmp_path_factory.mktemp("exact-cache"))


def _theta0() -> torch.Tensor:
    return diagonal_init(2, 0.4, 0.6) + gaussian_init(2, 0.05, seed=2)


def _count_host_copies(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count ``Tensor.numpy``, ``Tensor.cpu`` and ``torch.from_numpy`` calls from now on."""
    calls: Counter[str] = Counter()
    numpy, cpu, from_numpy = torch.Tensor.numpy, torch.Tensor.cpu, torch.from_numpy

    def counted_numpy(self: torch.Tensor, *args: Any, **kwargs: Any) -> np.ndarray:
        calls["numpy"] += 1
        return numpy(self, *args, **kwargs)

    def counted_cpu(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        calls["cpu"] += 1
        return cpu(self, *args, **kwargs)

    def counted_from_numpy(a: np.ndarray) -> torch.Tensor:
        calls["from_numpy"] += 1
        return from_numpy(a)

    monkeypatch.setattr(torch.Tensor, "numpy", counted_numpy)
    monkeypatch.setattr(torch.Tensor, "cpu", counted_cpu)
    monkeypatch.setattr(torch, "from_numpy", counted_from_numpy)
    return calls


def test_torchdiffeq_solve_stays_on_the_device(device: str, base_field: ExactField,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    dev_field = (base_field if device == "cpu" else
                 ExactField(gaussian(2, 0.9), 6, device=device, contractions="torch"))
    field = Recording(dev_field)
    prob = FieldProblem(field, _theta0(), free_mask(None, 2), device=device)
    assert prob.device == torch.device(device) and prob.theta0.device == prob.device
    options = FlowOptions(t_end=0.2, rtol=1e-6, atol=1e-8, steady_tol=1e-300)
    calls = _count_host_copies(monkeypatch)
    raw = drive(stepper_for(prob, resolve_solver("torchdiffeq:dopri5"), options), prob,
                options)
    counts = dict(calls)
    monkeypatch.undo()
    assert str(raw.status) == "t_end" and raw.n_accepted >= 5
    assert prob.nfev >= 3 * raw.n_accepted and prob.n_monitor == raw.n_accepted
    assert len(field.devices) == prob.nfev + prob.n_monitor
    assert set(field.devices) == {torch.device(device)}
    # the recorded points only: one per accepted step (the last one as the end point)
    assert len(raw.t) == raw.n_accepted + 1
    assert counts.get("numpy", 0) == raw.n_accepted
    assert counts.get("cpu", 0) == raw.n_accepted
    assert counts.get("from_numpy", 0) == 0


def test_scipy_round_trips_every_evaluation(base_field: ExactField,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented contrast: a host solver copies y to the device and f(y) back per call."""
    prob = FieldProblem(Recording(base_field), _theta0(), free_mask(None, 2), device="cpu")
    options = FlowOptions(t_end=0.2, rtol=1e-6, atol=1e-8, steady_tol=0.0)
    calls = _count_host_copies(monkeypatch)
    raw = drive(stepper_for(prob, resolve_solver("scipy:RK45"), options), prob, options)
    counts = dict(calls)
    monkeypatch.undo()
    assert str(raw.status) == "t_end"
    assert counts["from_numpy"] >= prob.nfev and counts["numpy"] >= prob.nfev


@pytest.mark.parametrize("solver", ["torchdiffeq:dopri5", "scipy:LSODA"])
def test_device_argument_is_the_default_path_bit_for_bit(solver: str,
                                                         base_field: ExactField) -> None:
    theta0 = _theta0()
    runs = [integrate(base_field, theta0, t_end=0.2, solver=solver, rtol=1e-6, atol=1e-8,
                      n_save=7, **kw)
            for kw in ({}, {"device": "cpu"}, {"device": torch.device("cpu")})]
    for r in runs[1:]:
        assert np.array_equal(r.t, runs[0].t) and np.array_equal(r.theta, runs[0].theta)
        assert np.array_equal(r.loss, runs[0].loss)
        assert r.solver_stats.nfev == runs[0].solver_stats.nfev


def test_the_default_device_is_the_field_s(base_field: ExactField) -> None:
    assert field_device(base_field) == base_field.device == torch.device("cpu")
    fd = FiniteDifferenceHessian(base_field)
    assert field_device(fd) is base_field.device
    assert field_device(Recording(base_field)) == torch.device("cpu")  # declares none
    prob = FieldProblem(fd, _theta0(), free_mask(None, 2))
    assert prob.device == torch.device("cpu") and prob.y0_torch().device == prob.device
    np.testing.assert_array_equal(prob.y0_torch().numpy(), prob.y0)


def test_cuda_without_cuda_is_one_line(base_field: ExactField,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(MesadynError) as err:
        integrate(base_field, _theta0(), t_end=0.1, solver="dopri5", device="cuda")
    msg = str(err.value)
    assert msg.startswith("device 'cuda' requested but CUDA is not available")
    assert "\n" not in msg


@CUDA_SKIP
@pytest.mark.parametrize("solver", ["torchdiffeq:dopri5", "scipy:LSODA"])
def test_cuda_flow_matches_the_cpu(solver: str, base_field: ExactField) -> None:
    """The exact field on CUDA, integrated on CUDA, against the same field on the CPU."""
    cuda = ExactField(gaussian(2, 0.9), 6, device="cuda")
    assert field_device(cuda).type == "cuda"
    theta0 = _theta0()
    ref, run = (integrate(f, theta0, t_end=0.5, solver=solver, n_save=9, steady_tol=None)
                for f in (base_field, cuda))
    assert str(ref.status) == str(run.status) == "t_end"
    assert run.solver_stats.n_accepted == ref.solver_stats.n_accepted
    scale = float(np.abs(ref.theta).max())
    assert float(np.abs(run.theta - ref.theta).max()) <= 1e-12 * scale
    assert float(np.abs(run.loss - ref.loss).max()) <= 1e-12 * float(np.abs(ref.loss).max())

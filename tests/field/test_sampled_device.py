"""The Monte-Carlo and finite fields on a device (issue 16, item 1): the same checks as the exact
field's (``tests/field/test_exact_device.py``), from :mod:`mesadyn.field._device`.

Every test runs on the CPU; the CUDA cases are skipped, with the reason, when this machine has no
CUDA, and the refusals run everywhere with ``torch.cuda`` faked:

- a device this machine does not have is a one-line MesadynError, before anything is drawn;
- draws plus one chunk of the direct path that would not fit the device's free memory
  (``torch.cuda.mem_get_info``) are refused before anything is drawn, with the estimate;
- a field whose form (polynomial build, cached batches) would not fit is refused before the
  draws are moved or a chunk is built;
- the estimate bounds what a field really holds (the draws and its cached
  :class:`~mesadyn.field._ar_kernels.ARBatch` es, measured);
- on every device the field gives the CPU field's loss and gradient (float64).
"""

from __future__ import annotations

import pytest
import torch

import mesadyn.field.montecarlo as mc_mod
from mesadyn.errors import MesadynError
from mesadyn.field import (
    FieldSpec,
    FiniteField,
    FiniteSequenceField,
    MonteCarloField,
    MonteCarloSequenceField,
    make_field,
)
from mesadyn.field._ar_kernels import ARBatch
from mesadyn.field._device import check_device, check_fits, fmt_bytes
from mesadyn.field._forms import Form, default_chunk, device_bytes, sequence_bytes
from mesadyn.field._sampled import CACHE_BYTES, SampledField, check_draws_fit
from mesadyn.model import diagonal_init
from mesadyn.process import gaussian, make_generator, sample


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch):
    """torch.cuda faked as one device with ``free`` bytes (set by the test: ``free[0] = n``)."""
    free = [10 * 2**20]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free[0], 80 * 2**30))
    return free


class _Draws(SampledField):
    """A sampled field over given draws (the base class's checks, without drawing)."""

    name = "test"

    def options(self) -> dict[str, object]:
        return {}


def test_no_device_is_the_cpu_even_where_cuda_is_present(fake_cuda: list[int]) -> None:
    """One device policy (mesadyn.device): ``device=None`` is the CPU for every sampled kind,
    not CUDA when torch sees it (``auto`` asks for that), as for the exact field."""
    fam = gaussian(2)
    fields = [FiniteField(fam, 5, 8), MonteCarloField(fam, 5, samples=64, batches=4),
              FiniteSequenceField(fam, 5, 8, 1, rotation="haar"),
              MonteCarloSequenceField(fam, 5, samples=64, batches=4, noise=0.1)]
    fields += [make_field(FieldSpec(kind, fam, 5, **kw), reuse=False)
               for kind, kw in (("finite", {"m": 8}), ("mc", {"samples": 64, "batches": 4}))]
    for f in fields:
        assert f.device == torch.device("cpu"), type(f).__name__


def test_cuda_without_cuda_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_sample(*args: object, **kwargs: object) -> None:
        raise AssertionError("drew samples for a device this machine does not have")

    monkeypatch.setattr(mc_mod, "sample", no_sample)
    for make in (lambda: MonteCarloField(gaussian(2), 5, samples=64, device="cuda"),
                 lambda: make_field(FieldSpec("mc", gaussian(2), 5, samples=64, device="cuda"),
                                    reuse=False),
                 lambda: check_draws_fit(2, 64, device="cuda:0")):
        with pytest.raises(MesadynError) as err:
            make()
        msg = str(err.value)
        assert "CUDA is not available" in msg and "\n" not in msg
        assert msg.startswith("device 'cuda") and "--device cpu" in msg


def test_draws_refused_before_sampling(fake_cuda: list[int],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The draws and one direct-path chunk (the least a field needs) against the free memory,
    before anything is drawn; the message gives both numbers."""

    def no_sample(*args: object, **kwargs: object) -> None:
        raise AssertionError("drew samples although they do not fit the device")

    monkeypatch.setattr(mc_mod, "sample", no_sample)
    d, T, n = 4, 50, 200_000
    need = 24 * n * d + 2 * sequence_bytes(d, T) * default_chunk(d, T, n)
    fake_cuda[0] = need - 1
    with pytest.raises(MesadynError) as err:
        MonteCarloField(gaussian(d), T, samples=n, device="cuda")
    msg = str(err.value)
    assert "\n" not in msg and "(estimate)" in msg and "mem_get_info" in msg
    assert fmt_bytes(need) in msg and fmt_bytes(need - 1) in msg and f"{n} samples" in msg


def test_field_refused_before_moving_the_draws(fake_cuda: list[int],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A field whose estimate exceeds the free memory is refused before its draws are moved to
    the device or a chunk is built; a polynomial build is part of the estimate."""
    fam, T, m = gaussian(3), 12, 500
    x1, lam = sample(fam, m, T, make_generator(3), "cpu")
    direct = device_bytes(3, T, m, chunk=default_chunk(3, T, m), form=Form.DIRECT,
                          cached=False)
    poly = device_bytes(3, T, m, chunk=default_chunk(3, T, m), form=Form.POLYNOMIAL,
                        cached=False)
    assert poly > direct

    def no_move(self: torch.Tensor, *args: object, **kwargs: object) -> None:
        raise AssertionError("moved a tensor although the field does not fit the device")

    monkeypatch.setattr(torch.Tensor, "to", no_move)
    for form, need in ((Form.DIRECT, direct), (Form.POLYNOMIAL, poly)):
        fake_cuda[0] = need - 1
        with pytest.raises(MesadynError) as err:
            _Draws(fam, T, x1, lam, device="cuda", form=form)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"the test field for gaussian d=3 T={T}")
        assert f"{form} form" in msg and fmt_bytes(need) in msg and "(estimate)" in msg


def test_auto_form_and_cache_follow_the_free_memory(fake_cuda: list[int],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Off the CPU the cost model's budget is the device's free memory, and the batches are
    cached only if they fit beside the rest: with little memory the field still builds
    (direct form, uncached) rather than being refused."""
    fam, T, m = gaussian(3), 12, 2000
    x1, lam = sample(fam, m, T, make_generator(4), "cpu")
    cpu = _Draws(fam, T, x1, lam)
    assert cpu.form is Form.POLYNOMIAL and cpu._batches == []
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: self)  # no CUDA to move to
    direct = device_bytes(3, T, m, chunk=cpu.chunk, form=Form.DIRECT, cached=False)
    fake_cuda[0] = direct + 1
    f = _Draws(fam, T, x1, lam, device="cuda")
    assert f.form is Form.DIRECT and f._batches is None and f.device_estimate == direct
    fake_cuda[0] = 2**40
    f = _Draws(fam, T, x1, lam, device="cuda")
    assert f.form is Form.POLYNOMIAL and f._batches == []


@pytest.mark.parametrize("kind", ["mc", "finite"])
def test_estimate_covers_what_the_field_holds(kind: str, device: str) -> None:
    """Measured independently: the draws and every cached ARBatch after a full evaluation
    (direct form), plus the batch of one more chunk, are within the estimate; the per-sequence
    bound covers the largest layout, the prefix Grams ``(T−2)·d²`` and two ``(T−2)·d`` complex
    arrays a sequence."""
    fam, T, m = gaussian(3), 15, 3000
    f = (MonteCarloField(fam, T, samples=m, seed=2, device=device, form="direct") if kind == "mc"
         else FiniteField(fam, T, m, seed=2, device=device, form="direct"))
    assert f.device == torch.device(device) and f._batches == []
    f.loss_and_grad(diagonal_init(3, 0.3, 0.4).to(device))
    held = f.memory_bytes()  # draws + cached batches, from the tensors themselves
    one = ARBatch(f.x1[:f.chunk], f.lam[:f.chunk], T).nbytes()
    assert held == 24 * m * 3 + sum(b.nbytes() for b in f._batches or [])
    assert held + one <= f.device_estimate
    assert f.device_estimate == device_bytes(3, T, m, chunk=f.chunk, form=Form.DIRECT,
                                             cached=True)
    assert sequence_bytes(3, T) >= 16 * (T - 2) * (3 * 3 + 2 * 3)
    assert m * sequence_bytes(3, T) <= CACHE_BYTES


@pytest.mark.parametrize("kind", ["mc", "finite"])
def test_same_values_on_every_device(kind: str, device: str) -> None:
    """float64 on the device; loss and gradient those of the CPU field on the same draws."""
    fam, T = gaussian(2, 0.9), 8
    opts = {"samples": 256} if kind == "mc" else {"m": 256}
    ref = make_field(FieldSpec(kind, fam, T, seed=5, device="cpu", **opts), reuse=False)
    dev = make_field(FieldSpec(kind, fam, T, seed=5, device=device, **opts), reuse=False)
    theta = diagonal_init(2, 0.4, 0.7) + 0.01
    L0, g0 = ref.loss_and_grad(theta)
    L1, g1 = dev.loss_and_grad(theta.to(device))
    assert g1.dtype == torch.float64 and g1.device == torch.device(device)
    assert abs(float(L1) - float(L0)) <= 1e-12 * abs(float(L0))
    assert float((g1.cpu() - g0).abs().max()) <= 1e-12 * float(g0.abs().max())


def test_check_fits_and_names() -> None:
    """The shared helpers: the CPU is never refused by check_fits (its limit is the host
    budget each field checks); check_device takes its names from the one device policy
    (mesadyn.device.resolve_device): None is the CPU, a malformed name is one line."""
    check_fits(2**62, torch.device("cpu"), "anything", "never")
    assert check_device(None) == check_device("cpu") == torch.device("cpu")
    for bad in ("gpu", "meta", "mps"):
        with pytest.raises(MesadynError, match=f"unknown device '{bad}'") as err:
            check_device(bad)
        assert "\n" not in str(err.value)
    assert [fmt_bytes(x) for x in (512, 1536, 3 * 2**30)] == ["512.0 B", "1.5 KiB", "3.0 GiB"]

"""The ``device`` option of the workflows that evaluate a field (issue 16, item 1):
:mod:`mesadyn.workflows._device` in integrate, stability, portrait and continuation.

Every device code path runs here on the CPU with the device as a parameter; the CUDA cases are
skipped, with the reason, when this machine has no CUDA.  ``auto`` and ``cuda`` are resolved
with ``torch.cuda.is_available`` faked both ways, so the resolution is tested on any machine.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.workflows import continuation, integrate, portrait, stability
from mesadyn.workflows._device import Device, DeviceOptions, resolve_device

HAS_CUDA = torch.cuda.is_available()
NOT_HERE = pytest.mark.skipif(HAS_CUDA, reason="auto is CUDA on this machine")

#: The smallest useful config of each workflow (d=2, T=5).
SMALL: dict[str, tuple[Any, dict[str, Any]]] = {
    "integrate": (integrate, {"d": 2, "T": 5, "t_end": 0.5}),
    "stability": (stability, {"d": 2, "T": 5, "pl": False}),
    "portrait": (portrait, {"d": 2, "T": 5, "full_flow": True, "init": ("0.5,0.6",),
                            "flow_t_end": 2.0}),
    "continuation": (continuation, {"d": 2, "T": 4, "parameter": "T", "stop": 6, "points": 3}),
}


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_resolution_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [resolve_device(d) for d in ("auto", "cpu", Device.AUTO)] == ["cpu"] * 3
    with pytest.raises(MesadynError) as err:
        resolve_device("cuda")
    msg = str(err.value)
    assert "\n" not in msg and "'cuda'" in msg and "CUDA is not available" in msg
    with pytest.raises(MesadynError, match="unknown device 'gpu'; choose cpu, auto, cuda"):
        resolve_device("gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert [resolve_device(d) for d in ("auto", "cpu", "cuda")] == ["cuda", "cpu", "cuda"]


def test_cpu_never_asks_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default resolves without torch (``--help`` and the closed forms import none)."""

    def asked() -> bool:
        raise AssertionError("torch.cuda was asked about the cpu device")

    monkeypatch.setattr(torch.cuda, "is_available", asked)
    assert resolve_device("cpu") == "cpu"
    assert DeviceOptions(d=2, T=5).torch_device == "cpu"


@pytest.mark.parametrize("name", list(SMALL))
def test_every_config_takes_the_device(name: str, no_cuda: None, tmp_path) -> None:
    module, small = SMALL[name]
    kw = small | ({"out": str(tmp_path / "p.png")} if name == "portrait" else {})
    cfg = module.Config(**kw)
    assert issubclass(module.Config, DeviceOptions)
    assert cfg.device == Device.CPU == "cpu" and cfg.torch_device == "cpu"
    field = {f.name: f for f in dataclasses.fields(module.Config)}["device"]
    assert field.kw_only  # appended after every positional field, never shifting them
    assert module.Config(**kw, device="auto").torch_device == "cpu"
    with pytest.raises(MesadynError) as err:  # refused on construction, before any work
        module.Config(**kw, device="cuda")
    assert "\n" not in str(err.value) and "'cuda'" in str(err.value)
    with pytest.raises(MesadynError, match="'gpu'"):
        module.Config(**kw, device="gpu")


def _without_timing(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_timing(v) for k, v in obj.items() if k not in ("wall_s", "out")}
    if isinstance(obj, list):
        return [_without_timing(v) for v in obj]
    return obj


@NOT_HERE
@pytest.mark.parametrize(("name", "extra"), [
    ("integrate", {}), ("integrate", {"field": "mc", "samples": 200}), ("stability", {}),
    ("continuation", {}),
])
def test_auto_is_the_cpu_here(name: str, extra: dict[str, Any]) -> None:
    """On this machine auto resolves to the CPU and gives the cpu run's result exactly."""
    module, small = SMALL[name]
    runs = [module.run(module.Config(**small, **extra, device=d)).to_dict()
            for d in ("cpu", "auto")]
    assert _without_timing(runs[0]) == _without_timing(runs[1])


@pytest.mark.parametrize("field", ["exact", "mc", "finite"])
def test_integrate_runs_on_the_device(device: str, field: str) -> None:
    """The full flow's field is built on the device (float64 there) and gives the CPU's end
    point: to rounding for the exact field (torch contractions off the CPU, scipy on it), and
    to 1e-9 relative for the sampled ones (the same draws, seeded on the CPU or the device;
    on CUDA a different generator, so compared only on the CPU)."""
    from mesadyn.field import make_field

    extra: dict[str, Any] = {"exact": {}, "mc": {"samples": 200}, "finite": {"m": 50}}[field]
    cfg = integrate.Config(**SMALL["integrate"][1], field=field, **extra, device=device)
    f = make_field(integrate._spec(cfg))
    assert f.device == torch.device(device)
    res = integrate.run(cfg)
    ref = integrate.run(dataclasses.replace(cfg, device="cpu"))
    assert res.status == ref.status
    if field == "exact" or device == "cpu":
        assert res.loss == pytest.approx(ref.loss, rel=1e-9, abs=1e-12)
        assert res.ab == pytest.approx(ref.ab, rel=1e-9)


def test_portrait_overlays_on_the_device(device: str, tmp_path) -> None:
    """The full-flow overlay's field of every kind is built on the device; the GD overlay
    runs there (mesadyn.train takes the device)."""
    cfg = portrait.Config(**SMALL["portrait"][1], out=str(tmp_path / "p.png"), gd_m=20,
                          gd_steps=2, device=device)
    fam = cfg.family()
    for kind in ("exact", "mc", "finite"):
        f = portrait._field(dataclasses.replace(cfg, field=kind), fam)
        assert f.device == torch.device(device), kind
    (run,) = portrait.gd_runs(cfg, fam)
    assert run.config["device"] == device


def test_continuation_fields_on_the_device(device: str) -> None:
    """Each exact field of the continuation is built on the device, through the parameter's
    own spec: the same loss and gradient as the parameter's field on the CPU."""
    from mesadyn.model import diagonal_init

    cfg = continuation.Config(**SMALL["continuation"][1])
    par = cfg.make_parameter()
    problem = continuation._parametric_field(par, 4, 6, None, device)
    theta = diagonal_init(2, 0.5, 0.6) + 0.01
    for p in (4, 5, 6):
        f, ref = problem.field(p), par.build(p)
        assert f.device == torch.device(device)
        L, g = f.loss_and_grad(theta.to(device))
        L0, g0 = ref.loss_and_grad(theta)
        assert float(L) == pytest.approx(float(L0), rel=1e-12)
        assert float((g.cpu() - g0).abs().max()) <= 1e-12 * float(g0.abs().max())


def test_continuation_resumes_on_another_device(tmp_path, no_cuda: None, interrupt_after,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint records the device the run used: an interrupted cpu run resumes with
    auto where auto means the CPU (and with other points it is still refused)."""
    monkeypatch.setattr(continuation, "CHECKPOINT_SECONDS", 0.0)
    out = tmp_path / "c.nc"
    cfg = continuation.Config(d=2, T=5, start=0.95, stop=1.05, points=4, out=str(out))
    with pytest.raises(KeyboardInterrupt):
        continuation.run(cfg, progress=interrupt_after(2))
    assert continuation.checkpoint_path(out).is_file()
    with pytest.raises(MesadynError, match="other options"):
        continuation.run(dataclasses.replace(cfg, points=5, device="auto", resume=True))
    res = continuation.run(dataclasses.replace(cfg, device="auto", resume=True))
    assert res.resumed and res.to_dict()["n_points"] >= 3

"""Where a field's tensors live: checking a torch device and its free memory before a build.

Every field (exact, Monte-Carlo, finite) names its device through :func:`check_device` (a
device this machine does not have is a one-line :class:`~mesadyn.errors.MesadynError`, never a
torch error) and, before allocating anything large on a device other than the CPU, compares its
estimate with the device's free memory (:func:`check_fits`); the CPU's limit is the host
memory budget, which each field checks against its own estimates
(:func:`~mesadyn.field.memory_budget`).  Tested on the CPU with ``torch.cuda`` faked
(``tests/field/test_exact_device.py``, ``tests/field/test_sampled_device.py``).
"""

from __future__ import annotations

import torch

from ..errors import MesadynError
from ._memory import memory_budget


def check_device(device: torch.device | str | None) -> torch.device:
    """The torch device ``device`` names (``None`` = CPU), if this machine has it.

    Raises:
        MesadynError: a malformed name, CUDA asked for without CUDA (or an index beyond the
            visible devices), or another device torch cannot allocate on.
    """
    try:
        dev = torch.device(device) if device is not None else torch.device("cpu")
    except (RuntimeError, TypeError) as exc:
        raise MesadynError(f"device must be a torch device such as 'cpu' or 'cuda:0', got "
                           f"{device!r} ({exc})") from None
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise MesadynError(
                f"CUDA is not available (torch {torch.__version__} sees no CUDA device), so "
                f"device={str(dev)!r} cannot be used; use device='cpu'")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise MesadynError(f"device={str(dev)!r} does not exist: {count} CUDA device(s) "
                               "visible")
        return dev
    if dev.type == "meta":
        raise MesadynError("device 'meta' holds no values, so a field cannot run there; use "
                           "device='cpu'")
    try:
        torch.empty(0, device=dev)
    except (RuntimeError, AssertionError) as exc:
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
        raise MesadynError(f"device {str(dev)!r} is not available ({why}); use device='cpu'"
                           ) from None
    return dev


def device_free_bytes(device: torch.device) -> tuple[int, str]:
    """Free memory on ``device`` and where the number comes from: ``torch.cuda.mem_get_info``
    on CUDA, :func:`~mesadyn.field.memory_budget` (the host's budget) otherwise."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free), f"free on {device} (torch.cuda.mem_get_info)"
    budget = memory_budget()
    return budget.bytes, budget.source


def fmt_bytes(n: float) -> str:
    """``n`` bytes in B, KiB, MiB, GiB or TiB, one decimal."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def check_fits(need: int, device: torch.device, what: str, advice: str) -> None:
    """Refuse ``what``, estimated at ``need`` bytes on ``device``, if the device (not the CPU,
    whose limit is the host budget) has less free memory; called before anything is allocated.

    Raises:
        MesadynError: one line, ``"{what} needs about {need} on {device} (estimate), more than
            the {free} free ...; {advice}"``.
    """
    if device.type == "cpu":
        return
    free, where = device_free_bytes(device)
    if need > free:
        raise MesadynError(f"{what} needs about {fmt_bytes(need)} on {device} (estimate), more "
                           f"than the {fmt_bytes(free)} {where}; {advice}")

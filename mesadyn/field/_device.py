"""Where a field's tensors live: the torch device of the one device policy and its free memory.

Every field (exact, Monte-Carlo, finite, the sequence fields) names its device through
:func:`check_device`, which takes the name's meaning from :func:`mesadyn.device.resolve_device`
(``None`` is the CPU, for every kind; a device this machine does not have is a one-line
:class:`~mesadyn.errors.MesadynError`, never a torch error) and, before allocating anything
large on a device other than the CPU, compares its estimate with the device's free memory
(:func:`check_fits`); the CPU's limit is the host memory budget, which each field checks
against its own estimates (:func:`~mesadyn.field.memory_budget`).  Tested on the CPU with
``torch.cuda`` faked (``tests/field/test_exact_device.py``, ``tests/field/test_sampled_device.py``).
"""

from __future__ import annotations

import torch

from ..device import Device, resolve_device
from ..errors import MesadynError
from ._memory import memory_budget


def check_device(device: Device | torch.device | str | None) -> torch.device:
    """The torch device ``device`` names under the one device policy
    (:func:`mesadyn.device.resolve_device`): ``None`` and ``"cpu"`` are the CPU, ``"auto"`` CUDA
    when present, ``"cuda"``/``"cuda:N"`` that device.

    Raises:
        MesadynError: an unknown name, or CUDA asked for without CUDA (or an index beyond the
            visible devices); one line naming the value.
    """
    return torch.device(resolve_device(device))


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

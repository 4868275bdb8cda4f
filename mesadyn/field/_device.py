"""Where a field's tensors live: the torch device of the one device policy and its free memory.

Every field (exact, Monte-Carlo, finite, the sequence fields) names its device through
:func:`check_device`, which takes the name's meaning from :func:`mesadyn.device.resolve_device`
(``None`` is the CPU, for every kind; a device this machine does not have is a one-line
:class:`~mesadyn.errors.MesadynError`, never a torch error) and, before allocating anything
large on a device other than the CPU, compares its estimate with the device's free memory
(:func:`check_fits`, through the one size guard :func:`mesadyn.budget.check`); the CPU's limit
is the host memory budget, which each field checks against its own estimates
(:func:`~mesadyn.field.memory_budget`).  Tested on the CPU with
``torch.cuda`` faked (``tests/field/test_exact_device.py``, ``tests/field/test_sampled_device.py``).
"""

from __future__ import annotations

import torch

from ..budget import Estimate, check, device_free
from ..budget import fmt_bytes as fmt_bytes
from ..device import Device, resolve_device
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
    on CUDA (:func:`mesadyn.budget.device_free`), :func:`~mesadyn.field.memory_budget` (the
    host's budget) otherwise."""
    free = device_free(str(device))
    if free is None:
        free = memory_budget()
    return free.bytes, free.source


def check_fits(need: int, device: torch.device, what: str, advice: str) -> None:
    """Refuse ``what``, estimated at ``need`` bytes on ``device``, if the device (not the CPU,
    whose limit is the host budget) has less free memory; called before anything is allocated.

    Raises:
        MesadynError: one line, ``"{what} needs about {need} on {device} (estimate), more than
            the {free} free ...; {advice}"``.
    """
    if device.type == "cpu":
        return
    check(Estimate(what, 0, int(need), str(device), advice=advice))

"""The ``device`` option of the workflows that evaluate a field (``--device`` on the CLI).

A workflow whose ``Config`` evaluates L, ∇L or ∇²L inherits :class:`DeviceOptions` (the
process options plus ``device``) and builds its field with
``config.field_spec(kind, device=config.torch_device, ...)``.  ``device`` is ``cpu`` (the
default: results identical to the last digit on every machine), ``cuda`` or ``auto`` (CUDA if
torch sees it, else the CPU); every device computes in float64.  ``cuda`` on a machine without
CUDA is refused when the ``Config`` is built (one-line :class:`~mesadyn.errors.MesadynError`,
exit code 2); torch is imported only to resolve ``auto`` or ``cuda``, so the ``cpu`` default
and ``--help`` do not import it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..errors import MesadynError
from ._common import ProcessOptions, choice, set_fields

__all__ = ["Device", "DeviceOptions", "resolve_device"]


class Device(enum.StrEnum):
    """Where a field's tensors live and its contractions run."""

    AUTO = "auto"
    """CUDA when torch sees a CUDA device, else the CPU."""
    CPU = "cpu"
    CUDA = "cuda"


def resolve_device(device: Device | str) -> str:
    """The torch device name ``device`` stands for: ``"cpu"`` or ``"cuda"``.

    Raises:
        MesadynError: an unknown choice, or ``cuda`` on a machine where torch sees no CUDA
            device (one line, naming the value).
    """
    dev = choice("device", device, Device)
    if dev is Device.CPU:
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if dev is Device.CUDA:
        raise MesadynError(f"device 'cuda' requested but CUDA is not available (torch "
                           f"{torch.__version__} sees no CUDA device); use --device cpu or auto")
    return "cpu"


@dataclass(frozen=True)
class DeviceOptions(ProcessOptions):
    """The process options and ``device`` (:class:`Device`; keyword-only, default ``cpu``):
    where the workflow's field lives.  ``cuda`` without CUDA fails on construction."""

    device: str = field(default=Device.CPU.value, kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        device = choice("device", self.device, Device)
        if device is Device.CUDA:
            resolve_device(device)  # refuse it now, before any work
        set_fields(self, device=device)

    @property
    def torch_device(self) -> str:
        """The torch device this config runs on (``auto`` resolved now): ``"cpu"`` or
        ``"cuda"``."""
        return resolve_device(self.device)

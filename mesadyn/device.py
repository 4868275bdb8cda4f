"""The one device policy of mesadyn: where a field's tensors live, decided in one place.

Every field, workflow and command takes a device through :func:`resolve_device`:

- ``None`` and ``"cpu"`` are the CPU, the **default everywhere** (every field kind, GD,
  ``reproduce``): the numbers of a CPU run are the same on every machine with the same build;
- ``"auto"`` is CUDA when torch sees a CUDA device, else the CPU;
- ``"cuda"`` (or ``"cuda:N"``) is that CUDA device, refused with one line when it is absent.

The result is a canonical device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``), resolved once:
a :class:`~mesadyn.field.FieldSpec` holds it, and nothing downstream re-decides it.  torch is
imported only to resolve ``auto`` and CUDA names, so the CPU default costs no import.
:func:`make_generator` gives the seeded generator of a device (the draws of a seed are the
same on every call).
"""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING

from .errors import MesadynError

if TYPE_CHECKING:
    import torch

__all__ = ["DEFAULT_DEVICE", "Device", "make_generator", "resolve_device"]


class Device(enum.StrEnum):
    """The device choices of ``--device`` (the values are the CLI's strings)."""

    CPU = "cpu"
    """The CPU: the default; identical numbers on every machine."""
    AUTO = "auto"
    """CUDA when torch sees a CUDA device, else the CPU."""
    CUDA = "cuda"
    """The (first) CUDA device; an error where there is none."""


#: The default of every field, workflow and command.
DEFAULT_DEVICE = Device.CPU

_NAME = re.compile(r"^(cpu|cuda)(:(\d+))?$")


def resolve_device(device: Device | str | torch.device | None = None) -> str:
    """The canonical device ``device`` names, checked on this machine.

    ## Arguments
    - `device`: ``None`` or ``"cpu"`` (the CPU), ``"auto"``, ``"cuda"``, ``"cuda:N"``, or a
      ``torch.device`` of those types.

    ## Returns
    ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    ## Raises
    `MesadynError`: an unknown name, or CUDA asked for where torch sees none (or an index
    beyond the visible devices); one line naming the value.
    """
    if device is None:
        return "cpu"
    text = str(device).strip().lower()
    if text == Device.AUTO:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    match = _NAME.match(text)
    if match is None:
        raise MesadynError(f"unknown device {str(device)!r}; choose cpu, auto, cuda or cuda:N")
    if match.group(1) == "cpu":
        if match.group(2):
            raise MesadynError(f"unknown device {str(device)!r}; the CPU is 'cpu'")
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        raise MesadynError(f"device {text!r} requested but CUDA is not available (torch "
                           f"{torch.__version__} sees no CUDA device); use --device cpu or auto")
    if match.group(3) is not None:
        count = torch.cuda.device_count()
        if int(match.group(3)) >= count:
            raise MesadynError(f"device {text!r} does not exist: {count} CUDA device(s) visible")
    return text


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A seeded torch generator on ``device``: the same seed gives the same samples.

    ## Arguments
    - `seed`: the seed (an integer).
    - `device`: a device torch can build a generator on (a resolved name, or a
      ``torch.device``); the CPU by default.
    """
    import torch

    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(seed))
    return gen

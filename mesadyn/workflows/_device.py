"""Old home of :class:`DeviceOptions` (now :mod:`mesadyn.workflows._run`) and the device
choices (now :mod:`mesadyn.device`); kept only while the workflows move to the run contract."""

from ..device import Device as Device
from ..device import resolve_device as resolve_device
from ._run import DeviceOptions as DeviceOptions

__all__ = ["Device", "DeviceOptions", "resolve_device"]

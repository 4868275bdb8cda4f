"""The one exception type that user-facing code raises for bad input."""

from __future__ import annotations

import math


class MesadynError(ValueError):
    """Bad input or a run that cannot go on; the CLI prints it on one line and exits 2."""


def check_int(name: str, value: object, minimum: int) -> int:
    """Return ``value`` as an int >= ``minimum`` or raise naming the bad value."""
    if isinstance(value, bool) or not isinstance(value, (int,)) and not (
        isinstance(value, float) and value.is_integer()
    ):
        raise MesadynError(f"{name} must be an integer >= {minimum}, got {value!r}")
    ivalue = int(value)  # type: ignore[arg-type]
    if ivalue < minimum:
        raise MesadynError(f"{name} must be >= {minimum}, got {name}={ivalue}")
    return ivalue


def check_positive(name: str, value: object) -> float:
    """Return ``value`` as a finite float > 0 or raise naming the bad value."""
    try:
        fvalue = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise MesadynError(f"{name} must be a positive number, got {value!r}") from None
    if not math.isfinite(fvalue) or fvalue <= 0:
        raise MesadynError(f"{name} must be finite and > 0, got {name}={value!r}")
    return fvalue


def check_finite(name: str, value: object) -> float:
    """Return ``value`` as a finite float or raise naming the bad value."""
    try:
        fvalue = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise MesadynError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(fvalue):
        raise MesadynError(f"{name} must be finite, got {name}={value!r}")
    return fvalue

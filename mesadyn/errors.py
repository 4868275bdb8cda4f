"""The exceptions user-facing code raises, and the exit codes the CLI maps them to.

- 0: success.
- 1: the run completed with failures (a failed claim, a failed sweep point, a flow that did not
  converge when convergence was asked for): :class:`RunFailed`; also an unexpected internal
  error (reported on one line, traceback with ``--debug``).
- 2: bad input (an option, a spec, a file), refused before any work: :class:`MesadynError`.
- 130: interrupted (Ctrl-C / SIGINT): ``KeyboardInterrupt``; partial results kept as documented.

See ``docs/reliability.md``.
"""

from __future__ import annotations

import enum
import math
import numbers
from typing import TypeVar

_E = TypeVar("_E", bound=enum.StrEnum)


class ExitCode(enum.IntEnum):
    """The exit codes of the ``mesadyn`` command (one table, ``docs/reliability.md``)."""

    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    INTERRUPTED = 130


class MesadynError(ValueError):
    """Bad input or a run that cannot go on; the CLI prints it on one line and exits 2."""


class RunFailed(RuntimeError):
    """A run that completed but whose outcome is a failure; the CLI exits 1.

    A command raises it *after* it has written its output (tables, ``--json``), with a one-line
    message saying what failed (e.g. ``"2 of 30 claims FAILED: thm4.1, prop4.2"``); the CLI
    prints ``mesadyn: <message>`` on stderr.  Library code returns failure as data (a status in
    the result); only the CLI layer turns it into this exception.
    """

    exit_code = ExitCode.FAILED


def _is_bool(value: object) -> bool:
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy"
                                       and kind.__name__ in ("bool", "bool_"))


def check_int(name: str, value: object, minimum: int) -> int:
    """Return ``value`` as an int >= ``minimum`` or raise naming the bad value.

    Any integral number is taken (Python ints, numpy integers, integral floats such as
    ``1e3``); booleans, strings and fractions are refused."""
    if _is_bool(value):
        raise MesadynError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if isinstance(value, numbers.Integral):
        ivalue = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        ivalue = int(float(value))
    else:
        raise MesadynError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if ivalue < minimum:
        raise MesadynError(f"{name} must be >= {minimum}, got {name}={ivalue}")
    return ivalue


def check_positive(name: str, value: object) -> float:
    """Return ``value`` as a finite float > 0 or raise naming the bad value (a boolean is not a
    number)."""
    if _is_bool(value):
        raise MesadynError(f"{name} must be a positive number, got {value!r}")
    try:
        fvalue = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise MesadynError(f"{name} must be a positive number, got {value!r}") from None
    if not math.isfinite(fvalue) or fvalue <= 0:
        raise MesadynError(f"{name} must be finite and > 0, got {name}={value!r}")
    return fvalue


def check_finite(name: str, value: object) -> float:
    """Return ``value`` as a finite float or raise naming the bad value (a boolean is not a
    number)."""
    if _is_bool(value):
        raise MesadynError(f"{name} must be a number, got {value!r}")
    try:
        fvalue = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise MesadynError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(fvalue):
        raise MesadynError(f"{name} must be finite, got {name}={value!r}")
    return fvalue


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` as a bool, or raise naming it: only ``True``/``False`` (and numpy's
    booleans) are booleans; a string such as ``"no"`` is refused, never read as true."""
    if not _is_bool(value):
        raise MesadynError(f"{name} must be true or false, got {value!r}")
    return bool(value)


def check_choice(name: str, value: object, enum_type: type[_E]) -> _E:
    """Return ``value`` as a member of ``enum_type``, or raise naming it and the choices."""
    try:
        return enum_type(value if isinstance(value, str) else repr(value))
    except ValueError:
        names = ", ".join(m.value for m in enum_type)
        raise MesadynError(f"unknown {name} {value!r}; choose {names}") from None

"""A sweep spec's option values checked against the target's ``Config``: its fields' names
(:func:`canonical`: ``--sigma-w``, ``sigma-w`` and ``sigma_w`` are one option), their types read
from the annotations (:func:`config_options`) and each value against its type (:func:`coerce`:
an int is accepted for a float, nothing else is converted)."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MesadynError

__all__ = ["Option", "canonical", "coerce", "config_options"]


@dataclass(frozen=True)
class Option:
    """One option of a target: its name, Python type (``int``, ``float``, ``bool``, ``str``, or
    ``None`` for anything), default, and whether it must be given."""

    name: str
    kind: type | None
    default: Any
    required: bool


def config_options(config: type) -> dict[str, Option]:
    """The options of a workflow: the fields of its ``Config`` with types and defaults."""
    try:
        hints = typing.get_type_hints(config, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable hints: fall back to the defaults' types
        hints = {}
    out: dict[str, Option] = {}
    for f in dataclasses.fields(config):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            required, default = False, f.default
        elif f.default_factory is not dataclasses.MISSING:
            required, default = False, f.default_factory()
        else:
            required, default = True, None
        kind = _annotation_kind(hints.get(f.name, f.type))
        if kind is None and not required and isinstance(default, (bool, int, float, str)):
            kind = type(default)
        out[f.name] = Option(f.name, kind, default, required)
    return out


def _annotation_kind(ann: Any) -> type | None:
    """int/float/bool/str for simple annotations (``X | None`` counts as X), else None."""
    if ann in (int, float, bool, str):
        return ann
    if ann is Path:
        return str
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _annotation_kind(typing.get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return _annotation_kind(args[0])
    return None


def canonical(name: str, sig: dict[str, Option] | None) -> str:
    """The ``Config`` field a CLI-style option name means (``--sigma-w`` → ``sigma_w``); for
    opted-in code (``sig`` is ``None``) the name made an identifier."""
    key = name.lstrip("-").replace("-", "_")
    if sig is None:
        if not key.isidentifier():
            raise MesadynError(f"spec: option name {name!r} is not a valid name")
        return key
    if key in sig:
        return key
    lower = {n.lower(): n for n in sig}
    if key.lower() in lower:
        return lower[key.lower()]
    valid = ", ".join(sorted(n.replace("_", "-") for n in sig))
    raise MesadynError(f"spec: unknown option {name!r} for this workflow; valid options: {valid}")


def coerce(name: str, value: Any, opt: Option | None, where: str) -> Any:
    """``value`` checked against the option's type (an int is accepted for a float and made
    one); a value of another type, or an int beyond 64 bits, is refused naming it."""
    if opt is None or opt.kind is None:
        return value
    kind = opt.kind
    bad = False
    if kind is bool:
        bad = not isinstance(value, bool)
    elif kind is int:
        bad = isinstance(value, bool) or not isinstance(value, int)
    elif kind is float:
        bad = isinstance(value, bool) or not isinstance(value, (int, float))
        if not bad:
            value = float(value)
    elif kind is str:
        bad = not isinstance(value, str)
    if bad:
        raise MesadynError(
            f"spec: {where} {name}: value {value!r} is a {type(value).__name__}, "
            f"but {name} takes a {kind.__name__}"
        )
    if kind is int and not -(2**63) <= value < 2**63:  # the run files store int64 columns
        raise MesadynError(f"spec: {where} {name}: value {value!r} does not fit a 64-bit integer")
    return value

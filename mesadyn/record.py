"""Results as data: :class:`Record`, a frozen dataclass whose ``to_dict()`` is derived from its
fields, and the field markers that shape that dict.

Every result of mesadyn (a flow, a fixed point, a workflow's ``Result``) is a ``Record``: its
``--json`` object is its fields, in order, by name, with values made plain (:func:`plain`:
records become dicts, enums their strings, numpy values Python numbers and lists).  A field
declares how it enters the dict, never a hand-written ``to_dict``:

- :func:`hidden` — not in the dict (a trajectory object, a back-reference to the config);
- :func:`omitted_if` — left out when it equals a value (``None`` for optional outputs);
- :func:`flattened` — a nested record's keys merged into this dict (one ``SolverStats``
  schema shared by every flow, its keys at the top level of ``integrate --json``);
- :func:`renamed` — entered under another key.

``Record.DERIVED`` names properties appended after the fields (a verdict computed from them).
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from dataclasses import MISSING, Field
from pathlib import PurePath
from typing import Any, ClassVar

__all__ = ["Record", "flattened", "hidden", "omitted_if", "plain", "renamed"]

_HIDDEN, _OMIT, _FLATTEN, _KEY = ("mesadyn_hidden", "mesadyn_omit_if", "mesadyn_flatten",
                                  "mesadyn_key")


def hidden(default: Any = None) -> Any:
    """A field that is not part of ``to_dict()`` (nor of equality or the repr)."""
    return dataclasses.field(default=default, repr=False, compare=False,
                             metadata={_HIDDEN: True})


def omitted_if(value: Any = None, *, default: Any = MISSING) -> Any:
    """A field left out of ``to_dict()`` when it equals ``value`` (default ``None``); its own
    default is ``value`` unless ``default`` is given."""
    return dataclasses.field(default=value if default is MISSING else default,
                             metadata={_OMIT: (value,)})


def flattened(*, default: Any = MISSING, default_factory: Any = MISSING) -> Any:
    """A record- or dict-valued field whose keys are merged into the parent's ``to_dict()``."""
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={_FLATTEN: True})


def renamed(key: str, *, default: Any = MISSING) -> Any:
    """A field entered in ``to_dict()`` under ``key``."""
    return dataclasses.field(default=default, metadata={_KEY: key})


def plain(value: Any) -> Any:
    """``value`` as plain JSON-ready Python: a :class:`Record` as its ``to_dict()``, an enum as
    its value, numpy scalars and arrays as numbers and lists, tuples as lists, paths as
    strings, dicts with string keys (recursively).

    ## Raises
    `TypeError`: a value with no plain form (a programming error: declare it :func:`hidden`).
    """
    if value is None or isinstance(value, bool | int | float | str) and not isinstance(
            value, enum.Enum):
        return value
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k.value if isinstance(k, enum.Enum) else k): plain(v)
                for k, v in value.items()}
    if isinstance(value, PurePath):
        return str(value)
    np = sys.modules.get("numpy")  # no array exists unless numpy was imported
    if np is not None:
        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, np.generic):
            return value.item()
    raise TypeError(f"no plain form for {type(value).__qualname__}; mark the field hidden()")


class Record:
    """A dataclass whose ``to_dict()`` is its fields (see the module docstring).

    Subclasses are ``@dataclass(frozen=True)``; they set :attr:`DERIVED` to append computed
    properties and mark fields with :func:`hidden`, :func:`omitted_if`, :func:`flattened` or
    :func:`renamed`.
    """

    #: Properties appended to ``to_dict()`` after the fields, in order.
    DERIVED: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of this record: fields in order (shaped by their markers), then
        :attr:`DERIVED`."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            _enter(out, f, getattr(self, f.name))
        for name in self.DERIVED:
            out[name] = plain(getattr(self, name))
        return out


def _enter(out: dict[str, Any], f: Field[Any], value: Any) -> None:
    meta = f.metadata
    if meta.get(_HIDDEN):
        return
    omit = meta.get(_OMIT)
    if omit is not None and _equal(value, omit[0]):
        return
    if meta.get(_FLATTEN):
        if value is not None:
            out.update(plain(value))
        return
    out[meta.get(_KEY, f.name)] = plain(value)


def _equal(value: Any, other: Any) -> bool:
    if other is None or value is None:
        return value is other
    try:
        return bool(value == other)
    except (TypeError, ValueError):  # an array compared elementwise
        return False

"""Sweep specs: a TOML file naming a command and the axes to sweep over its options.

A spec looks like::

    command = "integrate --reduced"   # a mesadyn command (+ flags), or "package.module:function"
    mode = "product"                  # or "zip" (all axes the same length, taken together)

    [options]                         # fixed options of every point
    x1 = "gaussian"
    sigma = 1.0

    [axes]                            # one dimension of the merged Dataset per axis
    T = [3, 4, 5, 10, 100]            # a list ...
    d = { start = 1, stop = 5 }       # ... or a range: start, stop (inclusive), step (default 1)
    a0 = { start = 0.1, stop = 2.0, num = 5 }           # num evenly spaced values
    sigma_w = { start = 1e-3, stop = 1e-1, num = 3, log = true }   # geometric spacing

Option names are the CLI's (``sigma-w``, ``--sigma-w`` and ``sigma_w`` are the same option).
The whole spec is checked against the command's ``compute()`` signature before any work:
unknown options (the valid ones are listed), empty axes, and values of the wrong type are
errors naming the offending value.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import itertools
import json
import math
import string
import tomllib
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import MesadynError

#: The mesadyn commands a sweep can run (each a module ``mesadyn.cli.<name>`` with compute()).
COMMANDS = ("integrate", "stability", "train", "theory")
MODES = ("product", "zip")
TOP_LEVEL_KEYS = ("command", "mode", "options", "axes", "name", "description")
RANGE_KEYS = ("start", "stop", "step", "num", "log")


@dataclass(frozen=True)
class Option:
    """One parameter of a command's ``compute()``: its name, Python type and default."""

    name: str
    kind: type | None  # int, float, bool, str, or None (anything)
    default: Any
    required: bool


@dataclass
class Spec:
    """A validated sweep spec: the command, fixed options, axes (name -> values), mode."""

    command: str
    target: str
    options: dict[str, Any]
    axes: dict[str, list[Any]]
    mode: str
    signature: dict[str, Option] = field(repr=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    name: str = ""
    description: str = ""

    # ---- the points ---------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the merged Dataset's axis dimensions (one ``point`` dim for zip)."""
        if self.mode == "zip":
            return (len(next(iter(self.axes.values()))),)
        return tuple(len(v) for v in self.axes.values())

    @property
    def dims(self) -> tuple[str, ...]:
        """The merged Dataset's dimensions: the axes (product) or ``("point",)`` (zip)."""
        return ("point",) if self.mode == "zip" else tuple(self.axes)

    def coords(self) -> list[dict[str, Any]]:
        """The axis values of every point, in C order of :attr:`shape`."""
        names = list(self.axes)
        if self.mode == "zip":
            combos = zip(*self.axes.values(), strict=True)
        else:
            combos = itertools.product(*self.axes.values())
        return [dict(zip(names, combo, strict=True)) for combo in combos]

    def point_options(self, coords: dict[str, Any]) -> dict[str, Any]:
        """The full keyword arguments of one point: defaults, then fixed options, then axes.

        A fixed string option with ``{name}`` fields is formatted with the point's options,
        e.g. ``out = "runs/traj/T{T}_d{d}.nc"`` gives every point its own file.
        """
        out = {n: o.default for n, o in self.signature.items() if not o.required}
        out.update(self.options)
        out.update(coords)
        for name in self.templates:
            out[name] = self.options[name].format(**out)
        return out

    @property
    def templates(self) -> list[str]:
        """Fixed string options that are templates (contain ``{``)."""
        return [k for k, v in self.options.items() if isinstance(v, str) and "{" in v]

    def points(self) -> list[Point]:
        """Every point of the sweep, with its options and content hash."""
        pts = []
        for index, coords in enumerate(self.coords()):
            opts = self.point_options(coords)
            pts.append(Point(index, coords, opts, point_hash(self.target, opts)))
        return pts

    @property
    def hash(self) -> str:
        """Hash of everything that determines the results (command, options, axes, mode)."""
        return _hash({"target": self.target, "options": self.options, "axes": self.axes,
                      "mode": self.mode})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able description (stored with the merged Dataset)."""
        return {"command": self.command, "target": self.target, "mode": self.mode,
                "options": self.options, "axes": self.axes, "name": self.name,
                "description": self.description}


@dataclass(frozen=True)
class Point:
    """One point: its position, axis values, full options and hash."""

    index: int
    coords: dict[str, Any]
    options: dict[str, Any]
    hash: str

    def label(self) -> str:
        """``T=3, d=1`` — the axis values, for messages."""
        return ", ".join(f"{k}={_short(v)}" for k, v in self.coords.items())


def _short(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _hash(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, allow_nan=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def point_hash(target: str, options: dict[str, Any]) -> str:
    """Content hash of one point: the command target and every option value (16 hex)."""
    return _hash({"target": target, "options": options})


# ---- commands and their signatures -------------------------------------------------
def resolve_command(command: str) -> tuple[str, Callable[..., dict], dict[str, Any]]:
    """``(target, compute, flags)`` for a command string.

    ``"integrate --reduced"`` is ``mesadyn.cli.integrate:compute`` with ``reduced=True``;
    ``"package.module:function"`` sweeps any function returning a dict.
    """
    if not isinstance(command, str) or not command.strip():
        raise MesadynError(f"spec: command must be a non-empty string, got {command!r}")
    words = command.split()
    head, flags = words[0], words[1:]
    if ":" in head:
        target = head
    elif head in COMMANDS:
        target = f"mesadyn.cli.{head}:compute"
    else:
        raise MesadynError(
            f"spec: unknown command {head!r}; choose one of {', '.join(COMMANDS)} "
            "or give package.module:function"
        )
    module_name, _, func_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise MesadynError(
                f"spec: command {head!r} is not available (no module {module_name!r})"
            ) from None
        raise
    func = getattr(module, func_name, None)
    if not callable(func):
        raise MesadynError(f"spec: {module_name!r} has no function {func_name!r}")
    return target, func, _parse_flags(head, flags)


def _parse_flags(head: str, words: list[str]) -> dict[str, Any]:
    """``--reduced`` -> {reduced: True}; ``--name=value`` / ``--name value`` -> TOML-typed value."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("--"):
            raise MesadynError(f"spec: command {head!r}: expected an --option, got {w!r}")
        name, eq, value = w[2:].partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("--"):
            value, eq = words[i + 1], "="
            i += 1
        if not eq:
            out[name] = True
        elif name.startswith("no-") and not value:
            out[name[3:]] = False
        else:
            try:
                out[name] = tomllib.loads(f"v = {value}")["v"]
            except tomllib.TOMLDecodeError:
                out[name] = value
        i += 1
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


def signature(func: Callable[..., Any]) -> dict[str, Option]:
    """The options of ``func`` (a command's compute()) from its signature and type hints."""
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable hints: fall back to the defaults' types
        hints = {}
    out: dict[str, Option] = {}
    for p in inspect.signature(func).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        required = p.default is inspect.Parameter.empty
        default = None if required else p.default
        kind = _annotation_kind(hints.get(p.name, p.annotation))
        if kind is None and not required and isinstance(default, (bool, int, float, str)):
            kind = type(default)
        out[p.name] = Option(p.name, kind, default, required)
    return out


def _canonical(name: str, sig: dict[str, Option]) -> str:
    """Map a CLI-style option name onto the compute() parameter (``--sigma-w`` -> sigma_w)."""
    key = name.lstrip("-").replace("-", "_")
    if key in sig:
        return key
    lower = {n.lower(): n for n in sig}
    if key.lower() in lower:
        return lower[key.lower()]
    valid = ", ".join(sorted(n.replace("_", "-") for n in sig))
    raise MesadynError(f"spec: unknown option {name!r} for this command; valid options: {valid}")


def coerce(name: str, value: Any, opt: Option, where: str) -> Any:
    """``value`` checked against the option's type (ints are accepted for floats)."""
    kind = opt.kind
    if kind is None:
        return value
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
    return value


def expand_axis(name: str, value: Any) -> list[Any]:
    """An axis given as a list, or as a range table ``{start, stop[, step | num[, log]]}``."""
    if isinstance(value, list):
        values = value
    elif isinstance(value, dict):
        unknown = sorted(set(value) - set(RANGE_KEYS))
        if unknown:
            raise MesadynError(
                f"spec: axis {name}: unknown range key(s) {', '.join(unknown)}; "
                f"valid: {', '.join(RANGE_KEYS)}"
            )
        if "start" not in value or "stop" not in value:
            raise MesadynError(f"spec: axis {name}: a range needs start and stop, got {value!r}")
        values = _range(name, value)
    else:
        raise MesadynError(
            f"spec: axis {name} must be a list or a range table, got {value!r}"
        )
    if not values:
        raise MesadynError(f"spec: axis {name} is empty")
    for v in values:
        if isinstance(v, (list, dict)):
            raise MesadynError(f"spec: axis {name}: values must be scalars, got {v!r}")
        if isinstance(v, float) and not math.isfinite(v):
            raise MesadynError(f"spec: axis {name}: values must be finite, got {v!r}")
    if len({json.dumps(v) for v in values}) != len(values):
        raise MesadynError(f"spec: axis {name} repeats a value: {values!r}")
    return values


def _range(name: str, r: dict[str, Any]) -> list[Any]:
    start, stop = r["start"], r["stop"]
    for key in ("start", "stop"):
        if isinstance(r[key], bool) or not isinstance(r[key], (int, float)):
            raise MesadynError(f"spec: axis {name}: range {key} must be a number, got {r[key]!r}")
    if "step" in r and "num" in r:
        raise MesadynError(f"spec: axis {name}: give step or num, not both")
    if "num" in r:
        num = r["num"]
        if isinstance(num, bool) or not isinstance(num, int) or num < 0:
            raise MesadynError(f"spec: axis {name}: num must be an integer >= 0, got {num!r}")
        if r.get("log", False):
            if start <= 0 or stop <= 0:
                raise MesadynError(
                    f"spec: axis {name}: a log range needs start, stop > 0, got {start}, {stop}"
                )
            if num == 1:
                return [float(start)]
            ratio = (stop / start) ** (1.0 / (num - 1))
            return [float(start * ratio**k) if k < num - 1 else float(stop) for k in range(num)]
        if num == 1:
            return [float(start)]
        h = (stop - start) / (num - 1)
        return [float(start + k * h) if k < num - 1 else float(stop) for k in range(num)]
    if r.get("log", False):
        raise MesadynError(f"spec: axis {name}: log = true needs num, not step")
    step = r.get("step", 1)
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step == 0:
        raise MesadynError(f"spec: axis {name}: step must be a non-zero number, got {step!r}")
    n = math.floor((stop - start) / step + 1e-9) + 1
    if n <= 0:
        return []
    if all(isinstance(x, int) for x in (start, stop, step)):
        return [start + k * step for k in range(n)]
    return [float(start + k * step) for k in range(n)]


def parse_spec(raw: dict[str, Any], overrides: dict[str, Any] | None = None) -> Spec:
    """Validate a spec (the parsed TOML table) against its command's ``compute()``.

    ``overrides`` are fixed options given on the command line (they win over ``[options]``).
    Every error raises :class:`MesadynError` before any point runs.
    """
    if not isinstance(raw, dict):
        raise MesadynError(f"spec must be a table, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise MesadynError(
            f"spec: unknown key(s) {', '.join(unknown)}; valid: {', '.join(TOP_LEVEL_KEYS)}"
        )
    if "command" not in raw:
        raise MesadynError("spec: missing 'command' (e.g. command = \"integrate --reduced\")")
    target, func, flags = resolve_command(raw["command"])
    sig = signature(func)

    mode = raw.get("mode", "product")
    if mode not in MODES:
        raise MesadynError(f"spec: mode must be one of {', '.join(MODES)}, got {mode!r}")

    fixed_raw = raw.get("options", {})
    if not isinstance(fixed_raw, dict):
        raise MesadynError(f"spec: [options] must be a table, got {fixed_raw!r}")
    axes_raw = raw.get("axes", {})
    if not isinstance(axes_raw, dict):
        raise MesadynError(f"spec: [axes] must be a table, got {axes_raw!r}")
    if not axes_raw:
        raise MesadynError("spec: no [axes]; give at least one axis, e.g. T = [3, 10, 100]")

    options: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for where, table in (("command flag", flags), ("option", fixed_raw),
                         ("command-line option", overrides or {})):
        for name, value in table.items():
            key = _canonical(name, sig)
            if key in options and where != "command-line option" and sources[key] != where:
                raise MesadynError(
                    f"spec: option {name} is set both as a {sources[key]} and as an {where}"
                )
            if isinstance(value, (list, dict)):
                raise MesadynError(
                    f"spec: option {name} = {value!r} is not a scalar; sweep it under [axes]"
                )
            options[key] = coerce(name, value, sig[key], where)
            sources[key] = where

    axes: dict[str, list[Any]] = {}
    for name, value in axes_raw.items():
        key = _canonical(name, sig)
        if key in axes:
            raise MesadynError(f"spec: axis {name} is given twice")
        if key in options:
            raise MesadynError(
                f"spec: {name} is both a fixed {sources[key]} and an axis; keep one"
            )
        axes[key] = [coerce(name, v, sig[key], "axis") for v in expand_axis(name, value)]

    missing = [n for n, o in sig.items() if o.required and n not in options and n not in axes]
    if missing:
        raise MesadynError(f"spec: the command needs option(s) {', '.join(missing)}")
    if mode == "zip":
        lengths = {k: len(v) for k, v in axes.items()}
        if len(set(lengths.values())) > 1:
            desc = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise MesadynError(f"spec: mode = \"zip\" needs axes of equal length, got {desc}")
    for key, value in options.items():
        if isinstance(value, str) and "{" in value:
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
            except ValueError as exc:
                raise MesadynError(
                    f"spec: option {key} = {value!r} is a bad template: {exc}"
                ) from None
            bad = [f for f in fields if f not in sig or f == key]
            if bad:
                raise MesadynError(
                    f"spec: option {key} = {value!r} uses {{{bad[0]}}}, which is not another "
                    "option of this command"
                )
    if "point" in axes and mode == "zip":
        raise MesadynError("spec: an axis called 'point' clashes with the zip dimension")
    for key in ("name", "description"):
        if not isinstance(raw.get(key, ""), str):
            raise MesadynError(f"spec: {key} must be a string, got {raw[key]!r}")
    return Spec(command=" ".join(raw["command"].split()), target=target, options=options,
                axes=axes, mode=mode, signature=sig, raw=raw, name=raw.get("name", ""),
                description=raw.get("description", ""))


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> Spec:
    """Read and validate a TOML spec file."""
    path = Path(path)
    if not path.is_file():
        raise MesadynError(f"spec file not found: {str(path)!r}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise MesadynError(f"spec {str(path)!r} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise MesadynError(f"spec {str(path)!r} is not UTF-8 text") from None
    return parse_spec(raw, overrides)

"""Sweep specs: a TOML file naming a mesadyn workflow and the axes to sweep over its options.

A spec looks like::

    workflow = "integrate"            # one of mesadyn's workflows (mesadyn.workflows.WORKFLOWS)
    mode = "product"                  # or "zip" (all axes the same length, taken together)

    [options]                         # fixed options of every point (the workflow's Config)
    reduced = true
    x1 = "gaussian"
    sigma = 1.0

    [axes]                            # one dimension of the merged Dataset per axis
    T = [3, 4, 5, 10, 100]            # a list ...
    d = { start = 1, stop = 5 }       # ... or a range: start, stop (inclusive), step (default 1)
    a0 = { start = 0.1, stop = 2.0, num = 5 }           # num evenly spaced values
    sigma_w = { start = 1e-3, stop = 1e-1, num = 3, log = true }   # geometric spacing

``command = "integrate --reduced"`` is the older spelling of ``workflow`` (flags become options).
Option names are the CLI's (``sigma-w``, ``--sigma-w`` and ``sigma_w`` are the same option).
The whole spec is checked against the workflow's ``Config`` before any work: unknown options
(the valid ones are listed), empty axes, values of the wrong type, and every point's ``Config``
(bad values) are errors naming the offending value.

**A spec is data, not code.**  By default it can only name mesadyn's own workflows.  A spec
naming any other Python function (``command = "package.module:function"``) is refused unless the
caller opts in with ``allow_code=True`` (``mesadyn sweep --allow-code``): that runs the named
code with the spec's options on every worker, so only use it with specs you wrote.  Even then
nothing from the spec is imported or run while it is validated; its options are passed as given.
Output paths (the options ``out`` and ``plot``, and every templated string option) must be
relative paths that stay inside the sweep's output folder; they are resolved under it.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import math
import string
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import MesadynError

MODES = ("product", "zip")
TOP_LEVEL_KEYS = ("workflow", "command", "mode", "options", "axes", "name", "description")
RANGE_KEYS = ("start", "stop", "step", "num", "log")
#: Options that name an output file of a workflow: kept inside the sweep's output folder.
OUTPUT_OPTIONS = ("out", "plot")
#: No sweep may have more points than this (the points, records and merged Dataset are held in
#: memory); a bigger spec is refused while it is validated, before anything is expanded.
MAX_POINTS = 2_000_000
#: Every point's Config is validated up front when the sweep has at most this many points
#: (else the first and the last point only; the others are validated when they run).
VALIDATE_ALL = 20_000
#: Target prefix of mesadyn's own workflows (``workflow:integrate``).
WORKFLOW_PREFIX = "workflow:"


def workflow_names() -> tuple[str, ...]:
    """The workflows a spec may name (``mesadyn.workflows.WORKFLOWS`` with a module present)."""
    import importlib.util

    from ..workflows import WORKFLOWS

    return tuple(name for name in WORKFLOWS
                 if importlib.util.find_spec(f"mesadyn.workflows.{name}") is not None)


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
    signature: dict[str, Option] | None = field(repr=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    name: str = ""
    description: str = ""
    #: True when the target is a Python function outside mesadyn (parsed with allow_code).
    allow_code: bool = False

    @property
    def is_workflow(self) -> bool:
        """Whether the target is one of mesadyn's workflows (else opted-in code)."""
        return self.target.startswith(WORKFLOW_PREFIX)

    @property
    def size(self) -> int:
        """The number of points (computed from the axes, nothing expanded)."""
        return math.prod(self.shape)

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
        sig = self.signature or {}
        out = {n: o.default for n, o in sig.items() if not o.required}
        out.update(self.options)
        out.update(coords)
        for name in self.templates:
            out[name] = self.options[name].format(**out)
        for name in self.output_options:
            check_inside(name, out[name])
        return out

    @property
    def output_options(self) -> list[str]:
        """Options holding output paths: ``out``/``plot`` (workflows) and every template."""
        names = [k for k in self.templates]
        if self.is_workflow:
            names += [k for k in OUTPUT_OPTIONS
                      if k not in names and (k in self.options or k in self.axes)]
        return names

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
                "description": self.description, "allow_code": self.allow_code}


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


# ---- targets and their options ----------------------------------------------------------
def check_inside(name: str, value: Any) -> None:
    """Refuse an output path that is absolute or climbs out of the sweep's folder."""
    if value is None:
        return
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise MesadynError(f"spec: {name} must be a relative file path, got {value!r}")
    p = PurePosixPath(value.replace("\\", "/"))
    if p.is_absolute() or value.startswith("~") or (len(value) > 1 and value[1] == ":"):
        raise MesadynError(
            f"spec: {name} = {value!r} must be a path relative to the sweep's --out folder"
        )
    if ".." in p.parts:
        raise MesadynError(f"spec: {name} = {value!r} climbs out of the sweep's --out folder")


def _check_code_target(head: str) -> str:
    """``package.module:function`` checked as text only (nothing is imported)."""
    module_name, _, func_name = head.partition(":")
    parts = module_name.split(".")
    if not all(part.isidentifier() for part in parts) or not func_name.isidentifier():
        raise MesadynError(
            f"spec: command {head!r} must look like package.module:function"
        )
    return head


def resolve_command(command: str, *, allow_code: bool = False,
                    ) -> tuple[str, dict[str, Option] | None, dict[str, Any]]:
    """``(target, options, flags)`` for a spec's ``workflow``/``command`` string.

    ``"integrate --reduced"`` is the workflow ``mesadyn.workflows.integrate`` with
    ``reduced=True``; its options are the fields of its ``Config``.  ``"package.module:function"``
    is refused unless ``allow_code``; then its options are unknown (``None``) and nothing is
    imported here.
    """
    if not isinstance(command, str) or not command.strip():
        raise MesadynError(f"spec: workflow must be a non-empty string, got {command!r}")
    words = command.split()
    head, flags = words[0], words[1:]
    if ":" in head:
        if not allow_code:
            raise MesadynError(
                f"spec: {head!r} names a Python function; a sweep runs only mesadyn's workflows "
                f"({', '.join(workflow_names())}) unless --allow-code is given (it runs that "
                "code on every worker: only for specs you trust)"
            )
        return _check_code_target(head), None, _parse_flags(head, flags)
    names = workflow_names()
    if head not in names:
        raise MesadynError(
            f"spec: unknown workflow {head!r}; choose one of {', '.join(names)}"
        )
    return f"{WORKFLOW_PREFIX}{head}", config_options(head), _parse_flags(head, flags)


def config_options(workflow: str) -> dict[str, Option]:
    """The options of a mesadyn workflow: the fields of its ``Config`` with types and defaults."""
    import dataclasses

    module = importlib.import_module(f"mesadyn.workflows.{workflow}")
    config = module.Config
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


def _canonical(name: str, sig: dict[str, Option] | None) -> str:
    """Map a CLI-style option name onto the Config field (``--sigma-w`` -> sigma_w)."""
    key = name.lstrip("-").replace("-", "_")
    if sig is None:  # opted-in code: names are passed as given (made identifiers)
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
    """``value`` checked against the option's type (ints are accepted for floats)."""
    if opt is None:
        return value
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
    if kind is int and not -(2**63) <= value < 2**63:  # the run files store int64 columns
        raise MesadynError(f"spec: {where} {name}: value {value!r} does not fit a 64-bit integer")
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


def _check_length(name: str, n: int) -> None:
    if n > MAX_POINTS:
        raise MesadynError(
            f"spec: axis {name} has {n:.3g} values; a sweep may have at most {MAX_POINTS:.3g} "
            "points (split it into several sweeps)"
        )


def _range(name: str, r: dict[str, Any]) -> list[Any]:
    start, stop = r["start"], r["stop"]
    for key in ("start", "stop"):
        if isinstance(r[key], bool) or not isinstance(r[key], (int, float)):
            raise MesadynError(f"spec: axis {name}: range {key} must be a number, got {r[key]!r}")
        if not math.isfinite(r[key]):
            raise MesadynError(f"spec: axis {name}: range {key} must be finite, got {r[key]!r}")
    if "step" in r and "num" in r:
        raise MesadynError(f"spec: axis {name}: give step or num, not both")
    if "num" in r:
        num = r["num"]
        if isinstance(num, bool) or not isinstance(num, int) or num < 0:
            raise MesadynError(f"spec: axis {name}: num must be an integer >= 0, got {num!r}")
        _check_length(name, num)
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
    if (isinstance(step, bool) or not isinstance(step, (int, float)) or step == 0
            or not math.isfinite(step)):
        raise MesadynError(f"spec: axis {name}: step must be a non-zero number, got {step!r}")
    ratio = (stop - start) / step
    if not math.isfinite(ratio):
        raise MesadynError(f"spec: axis {name}: range {start}..{stop} by {step} is too long")
    n = math.floor(ratio + 1e-9) + 1
    if n <= 0:
        return []
    _check_length(name, n)
    if all(isinstance(x, int) for x in (start, stop, step)):
        return [start + k * step for k in range(n)]
    return [float(start + k * step) for k in range(n)]


def parse_spec(raw: dict[str, Any], overrides: dict[str, Any] | None = None, *,
               allow_code: bool = False) -> Spec:
    """Validate a spec (the parsed TOML table) against its workflow's ``Config``.

    ``overrides`` are fixed options given on the command line (they win over ``[options]``).
    ``allow_code`` lets the spec name any Python function (``package.module:function``); it is
    still not imported here.  Every error raises :class:`MesadynError` before any point runs.
    """
    if not isinstance(raw, dict):
        raise MesadynError(f"spec must be a table, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise MesadynError(
            f"spec: unknown key(s) {', '.join(unknown)}; valid: {', '.join(TOP_LEVEL_KEYS)}"
        )
    if "workflow" in raw and "command" in raw:
        raise MesadynError("spec: give workflow or command (its older name), not both")
    if "workflow" not in raw and "command" not in raw:
        raise MesadynError("spec: missing 'workflow' (e.g. workflow = \"integrate\")")
    command = raw.get("workflow", raw.get("command"))
    target, sig, flags = resolve_command(command, allow_code=allow_code)

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
            options[key] = coerce(name, value, None if sig is None else sig[key], where)
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
        if isinstance(value, list):
            _check_length(name, len(value))
        axes[key] = [coerce(name, v, None if sig is None else sig[key], "axis")
                     for v in expand_axis(name, value)]
    size = math.prod(len(v) for v in axes.values()) if mode == "product" else max(
        len(v) for v in axes.values())
    if size > MAX_POINTS:
        raise MesadynError(
            f"spec: {size:.3g} points; a sweep may have at most {MAX_POINTS:.3g} points "
            "(split it into several sweeps)"
        )

    sig_items = {} if sig is None else sig
    missing = [n for n, o in sig_items.items()
               if o.required and n not in options and n not in axes]
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
            known = set(sig_items) if sig is not None else set(options) | set(axes)
            bad = [f for f in fields if f not in known or f == key]
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
    for key in OUTPUT_OPTIONS if sig is not None else ():
        if key in options and not (isinstance(options[key], str) and "{" in options[key]):
            check_inside(key, options[key])
        for v in axes.get(key, []):
            check_inside(key, v)
    spec = Spec(command=" ".join(command.split()), target=target, options=options,
                axes=axes, mode=mode, signature=sig, raw=raw, name=raw.get("name", ""),
                description=raw.get("description", ""), allow_code=sig is None)
    if spec.is_workflow:
        _validate_configs(spec)
    return spec


def _validate_configs(spec: Spec) -> None:
    """Build every point's ``Config`` (at most :data:`VALIDATE_ALL`; else the first and last):
    a bad value is an error naming the point, before any work."""
    module = importlib.import_module(f"mesadyn.workflows.{spec.target[len(WORKFLOW_PREFIX):]}")
    coords = spec.coords() if spec.size <= VALIDATE_ALL else _ends(spec)
    seen: set[str] = set()
    for c in coords:
        opts = spec.point_options(c)
        key = json.dumps(opts, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        try:
            module.Config(**opts)
        except MesadynError as exc:
            label = ", ".join(f"{k}={_short(v)}" for k, v in c.items())
            raise MesadynError(f"spec: point {label}: {exc}") from None
        except TypeError as exc:  # a Config field the spec cannot set
            raise MesadynError(f"spec: {' '.join(str(exc).split())}") from None


def _ends(spec: Spec) -> list[dict[str, Any]]:
    """The first and last points' axis values (without expanding the grid)."""
    names = list(spec.axes)  # index 0 / -1 of every axis is the first / last point either mode
    return [dict(zip(names, [v[i] for v in spec.axes.values()], strict=True)) for i in (0, -1)]


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None, *,
              allow_code: bool = False) -> Spec:
    """Read and validate a TOML spec file (see :func:`parse_spec`)."""
    path = Path(path)
    if not path.exists():
        raise MesadynError(f"spec file not found: {str(path)!r}")
    if not path.is_file():
        raise MesadynError(f"spec {str(path)!r} is not a regular file")
    if path.stat().st_size > 1 << 20:
        raise MesadynError(f"spec {str(path)!r} is larger than 1 MiB; is it a spec?")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise MesadynError(f"spec {str(path)!r} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise MesadynError(f"spec {str(path)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise MesadynError(f"cannot read spec {str(path)!r}: {exc.strerror or exc}") from None
    return parse_spec(raw, overrides, allow_code=allow_code)

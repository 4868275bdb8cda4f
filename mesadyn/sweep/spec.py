"""Sweep specs: a TOML file naming a mesadyn workflow and the axes to sweep over its options.

A spec looks like::

    workflow = "integrate"            # a workflow of mesadyn.workflows.REGISTRY
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
(the valid ones are listed), empty axes, values of the wrong type
(:mod:`mesadyn.sweep._coerce`), and every point's ``Config`` (bad values) are errors naming
the offending value.

**A spec is data, not code.**  By default it can only name mesadyn's workflows
(:mod:`mesadyn.sweep._targets`).  A spec naming any other Python function
(``command = "package.module:function"``) is refused unless the caller opts in with
``allow_code=True`` (``mesadyn sweep --allow-code``): that runs the named code with the spec's
options on every worker, so only use it with specs you wrote.  Even then nothing from the spec
is imported or run while it is validated; its options are passed as given.  Output paths (the
options ``out`` and ``plot``, and every templated string option) must be relative paths that
stay inside the sweep's output folder; they are resolved under it.  A template's fields take a
format of at most :data:`MAX_FIELD_WIDTH` characters (``{T:03d}``, ``{sigma:.3g}``).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import string
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import MesadynError
from ._coerce import Option, canonical, coerce
from ._targets import WORKFLOW_PREFIX, build_config, options_hash, point_hash, resolve_command

__all__ = ["MAX_FIELD_WIDTH", "MAX_POINTS", "Point", "Spec", "check_inside", "expand_axis",
           "load_spec", "parse_spec"]

MODES = ("product", "zip")
TOP_LEVEL_KEYS = ("workflow", "command", "mode", "options", "axes", "name", "description")
RANGE_KEYS = ("start", "stop", "step", "num", "log")
#: Options that name an output file of a workflow: kept inside the sweep's output folder.
OUTPUT_OPTIONS = ("out", "plot")
#: No sweep may have more points than this (the points, records and merged Dataset are held in
#: memory); a bigger spec is refused while it is validated, before anything is expanded.
MAX_POINTS = 2_000_000
#: Every point's Config is validated while the spec is read when the sweep has at most this
#: many points (else the first and the last; the others when the sweep starts, before any
#: point runs).
VALIDATE_ALL = 20_000
#: The largest width or precision a template field may ask for (``{T:>255}``): a file name
#: holds at most 255 bytes, and a bigger one would build the string before any check.
MAX_FIELD_WIDTH = 255


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
    _points: list[Point] | None = field(default=None, init=False, repr=False, compare=False)

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
        combos: Iterator[tuple[Any, ...]]
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
        """Every point of the sweep, with its options and identity (:func:`point_hash`: a
        workflow point's is its validated ``Config``'s hash).

        ## Raises
        `MesadynError`: points that do not fit in memory (:func:`mesadyn.budget.sweep`), a
        point whose ``Config`` refuses a value (named).
        """
        if self._points is None:
            from ..budget import check, sweep

            check(sweep(self.size))  # before a point is expanded
            pts = []
            for index, coords in enumerate(self.coords()):
                opts = self.point_options(coords)
                config = (build_config(self.target, opts, _label(coords)) if self.is_workflow
                          else None)
                pts.append(Point(index, coords, opts, point_hash(self.target, opts, config)))
            self._points = pts
        return list(self._points)

    @property
    def hash(self) -> str:
        """Hash of everything that determines the results (command, options, axes, mode)."""
        return options_hash({"target": self.target, "options": self.options,
                             "axes": self.axes, "mode": self.mode})

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
        return _label(self.coords)


def _label(coords: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_short(v)}" for k, v in coords.items())


def _short(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


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
    command: Any = raw.get("workflow", raw.get("command"))
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
            key = canonical(name, sig)
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
        key = canonical(name, sig)
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
    known = set(sig_items) if sig is not None else set(options) | set(axes)
    for key, value in options.items():
        if isinstance(value, str) and "{" in value:
            _check_template(key, value, known)
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


def _check_template(key: str, value: str, known: set[str]) -> None:
    """A template's fields are other options, each with a format of bounded size."""
    try:
        parts = [(f, fmt) for _, f, fmt, _ in string.Formatter().parse(value) if f is not None]
    except ValueError as exc:
        raise MesadynError(f"spec: option {key} = {value!r} is a bad template: {exc}") from None
    for name, fmt in parts:
        if name not in known or name == key:
            raise MesadynError(f"spec: option {key} = {value!r} uses {{{name}}}, which is not "
                               "another option of this command")
        if fmt and "{" in fmt:
            raise MesadynError(f"spec: option {key} = {value!r}: the format of {{{name}}} may "
                               "not hold another field")
        widths = [int(n) for n in re.findall(r"\d+", fmt or "")]
        if widths and max(widths) > MAX_FIELD_WIDTH:
            raise MesadynError(
                f"spec: option {key} = {value!r}: the format {fmt!r} of {{{name}}} asks for "
                f"{max(widths)} characters; at most {MAX_FIELD_WIDTH}")


def _validate_configs(spec: Spec) -> None:
    """Build every point's ``Config`` (at most :data:`VALIDATE_ALL` points; else the first and
    the last, and the others when the sweep starts): a bad value is an error naming the
    point, before any work."""
    if spec.size <= VALIDATE_ALL:
        spec.points()
        return
    for c in _ends(spec):
        build_config(spec.target, spec.point_options(c), _label(c))


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

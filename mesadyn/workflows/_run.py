"""The run contract: what every workflow provides and what it may rely on.

A *workflow* is one module of :mod:`mesadyn.workflows` that turns a validated ``Config`` into a
``Result``.  In the manner of scipy's ``OdeSolver`` and of :class:`mesadyn.flow.Stepper`, this
is what a workflow must do:

1. Define ``Config``, a frozen dataclass subclassing :class:`RunOptions` (or
   :class:`DeviceOptions` when it evaluates a field), with a class attribute ``COMMAND`` (its
   name in :data:`mesadyn.workflows.REGISTRY`).  Every option that can change a number is a
   field; ``__post_init__`` validates each (a :class:`~mesadyn.errors.MesadynError` naming the
   value) and stores the validated value with :func:`set_fields`.  Options that change no
   number (where output goes, a confirmation) are marked ``metadata=NOT_RECORDED``.
2. Define ``Result``, a frozen dataclass subclassing :class:`RunResult`: ``status`` (an
   :class:`~mesadyn.outcome.Outcome`), ``message``, and its numbers as fields.  ``to_dict()``
   (the ``--json`` object) is derived from the fields (:class:`mesadyn.record.Record`);
   arrays too large for JSON are :func:`~mesadyn.record.hidden` and enter the run file
   through :meth:`RunResult.to_dataset`.
3. Define ``run(config, progress=None) -> Result``: it never raises for a run that started
   and failed (failure is the ``status``), calls ``progress`` (:data:`ProgressCallback`) as
   it advances, and ends with ``return write_run(config, result)``, which writes
   ``config.out`` when it is given.

What a workflow may rely on:

- the process options of :class:`~mesadyn.workflows.ProcessOptions` are validated, and
  ``config.family()``, ``config.constants()`` and ``config.field_spec(kind, ...)`` build the
  paper's objects from them;
- ``config.device`` is checked when the config is built and resolved once by
  :func:`mesadyn.device.resolve_device` (:attr:`DeviceOptions.torch_device`);
- the run file (:func:`write_run`) records :meth:`RunOptions.run_config` — every recorded
  field, as JSON — with the seed and the package version, atomically, next to the result
  (``result`` attribute, the ``--json`` object) and the result's arrays;
  :meth:`RunOptions.from_run` rebuilds the config from that file alone
  (``mesadyn rerun FILE``);
- :func:`stored_run` is the one reuse rule for run files and checkpoints: a stored run is
  reused exactly when its recorded configuration, format and package version equal this
  run's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from ..errors import MesadynError
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import Record
from ._common import ProcessOptions, set_fields

if TYPE_CHECKING:
    import xarray as xr

    from ..models import Model

__all__ = ["CONFIG_FORMAT", "FIGURE_SUFFIXES", "NOT_RECORDED", "POINT_RUNS", "DeviceOptions",
           "ProgressCallback", "RunOptions", "RunRecord", "RunResult", "config_mismatch",
           "load_point", "read_record", "stored_run", "write_run"]

#: Suffixes of the figures a workflow writes as its output (their provenance is embedded in
#: the file's metadata: :func:`mesadyn.plots.read_provenance`).
FIGURE_SUFFIXES = (".pdf", ".svg", ".png")

#: Version of the run-file ``config`` attribute: 2 records every recorded field of the
#: ``Config`` (derived from the dataclass); files without it predate that and cannot be rerun.
CONFIG_FORMAT = 2
#: Field metadata of options that change no number (output paths, confirmations, resuming):
#: left out of :meth:`RunOptions.run_config` and of every hash.
NOT_RECORDED: Mapping[str, bool] = {"mesadyn_not_recorded": True}


def _recorded(f: dataclasses.Field[Any]) -> bool:
    return f.init and not f.metadata.get("mesadyn_not_recorded", False)


def _tuples(value: Any) -> Any:
    """JSON lists back as tuples (a frozen config holds tuples), recursively."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


@dataclass(frozen=True)
class RunOptions(ProcessOptions):
    """The options every workflow shares: the process (:class:`ProcessOptions`) and ``out``,
    the run file (``.nc``, keyword-only).

    ``run_config()``, ``config_hash()`` and ``from_run()`` are derived from the dataclass
    fields, so every recorded option is in the run file as JSON and a run file rebuilds its
    configuration alone.
    """

    # COMMAND (ProcessOptions): the workflow's name in :data:`mesadyn.workflows.REGISTRY`,
    # the run file's ``kind``.
    #: Suffixes ``out`` may end in (case-insensitive).
    OUT_SUFFIXES: ClassVar[tuple[str, ...]] = (".nc", ".nc4", ".netcdf")

    out: str | None = dataclasses.field(default=None, kw_only=True, metadata=NOT_RECORDED)

    def __post_init__(self) -> None:
        super().__post_init__()
        out = self.out
        if isinstance(out, os.PathLike):
            out = os.fspath(out)
        if out is not None:
            if not isinstance(out, str) or not out.strip():
                raise MesadynError(f"out must be a file path, got {self.out!r}")
            if not out.lower().endswith(self.OUT_SUFFIXES):
                kinds = ("netCDF run files" if self.OUT_SUFFIXES == RunOptions.OUT_SUFFIXES
                         else "files")
                raise MesadynError(f"out: {self.COMMAND or 'this workflow'} writes {kinds}: give "
                                   f"a path ending in {', '.join(self.OUT_SUFFIXES)}, got {out!r}")
        set_fields(self, out=out)

    # ---- provenance, derived from the fields ---------------------------------------------
    def run_config(self) -> dict[str, Any]:
        """What a run file records: ``command``, ``config_format`` and every recorded field
        (plain JSON values: enums as strings, tuples as lists)."""
        from ..record import plain

        values = {f.name: plain(getattr(self, f.name))
                  for f in dataclasses.fields(self) if _recorded(f)}
        return {"command": self.COMMAND, "config_format": CONFIG_FORMAT, **values}

    def config_hash(self, *extra: object) -> str:
        """16 hex digits of SHA-256 over :meth:`run_config`, the package version and
        ``extra``: the key of every cache and reuse test built on this configuration."""
        from ..io import to_json, version

        key = to_json({"config": self.run_config(), "version": version(), "extra": list(extra)})
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    @classmethod
    def recorded_fields(cls) -> tuple[str, ...]:
        """The names of the recorded fields, in order."""
        return tuple(f.name for f in dataclasses.fields(cls) if _recorded(f))

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **changes: Any) -> Self:
        """The ``Config`` a :meth:`run_config` dict describes, with ``changes`` applied
        (e.g. ``out=...``).

        ## Raises
        `MesadynError`: a config of another command or format, or keys this ``Config`` does
        not have (named), or a value it refuses.
        """
        values = dict(config)
        command = values.pop("command", None)
        fmt = values.pop("config_format", None)
        if fmt != CONFIG_FORMAT:
            raise MesadynError(
                f"the configuration has format {fmt!r}, not {CONFIG_FORMAT}: it was written "
                "before run files recorded every option; run the command again to rerun it")
        if command != cls.COMMAND:
            raise MesadynError(f"the configuration is of command {command!r}, not "
                               f"{cls.COMMAND!r}")
        unknown = sorted(set(values) - set(cls.recorded_fields()))
        if unknown:
            raise MesadynError(f"the configuration has options {cls.COMMAND} does not take: "
                               f"{', '.join(unknown)}")
        # a change replaces the recorded value (rerun --device on a DeviceOptions run)
        return cls(**{**{k: _tuples(v) for k, v in values.items()}, **changes})

    @classmethod
    def from_run(cls, path: str | os.PathLike[str], **changes: Any) -> Self:
        """The ``Config`` that wrote the run file ``path``, rebuilt from the file alone
        (``out`` is not recorded: pass ``out=...`` among ``changes`` to write again).

        ## Raises
        `MesadynError`: an unreadable or foreign file, a run of another command, or a file
        written before run files recorded every option.
        """
        record = read_record(path)
        if record.kind != cls.COMMAND:
            raise MesadynError(f"{os.fspath(path)!r} holds a {record.kind!r} run, expected a "
                               f"{cls.COMMAND!r} run")
        try:
            return cls.from_config(record.config, **changes)
        except MesadynError as exc:
            raise MesadynError(f"run file {os.fspath(path)!r}: {exc}") from None


@dataclass(frozen=True)
class DeviceOptions(RunOptions):
    """The run options and ``device`` (:class:`mesadyn.device.Device`; keyword-only, default
    ``cpu``): where the workflow's field lives.  ``cuda`` without CUDA fails on construction;
    ``auto`` is resolved when the field is built (:attr:`torch_device`)."""

    device: str = dataclasses.field(default="cpu", kw_only=True)

    def __post_init__(self) -> None:
        from ..device import Device, resolve_device

        super().__post_init__()
        text = str(self.device).strip().lower()
        if text != Device.AUTO:
            resolve_device(text)  # refuse an unknown or absent device now, before any work
        set_fields(self, device=text)

    @property
    def torch_device(self) -> str:
        """The device this config runs on (:func:`mesadyn.device.resolve_device`)."""
        from ..device import resolve_device

        return resolve_device(self.device)

    def sampled_spec(self, kind: Any, *, samples: int | None = None, m: int | None = None,
                     seed: int | None = None) -> Any:
        """The one way to build the field of this config: the
        :class:`~mesadyn.field.FieldSpec` of its process for ``kind`` on its device, with
        ``samples`` draws for ``mc`` and ``m`` sequences for ``finite`` drawn from ``seed``
        (default ``config.seed``); the exact kind takes neither (an option the kind does not
        take is dropped here, never passed on).

        ## Raises
        `MesadynError`: an unknown kind, a bad option, or a process beyond the exact kind's
        reach (named).
        """
        from ..field import FieldKind

        k = FieldKind(kind)
        options: dict[str, Any] = {"device": self.torch_device}
        draws = self.seed if seed is None else seed
        if k is FieldKind.MC:
            options |= {"samples": samples, "seed": draws}
        elif k is FieldKind.FINITE:
            options |= {"m": m, "seed": draws}
        return self.field_spec(k, **options)

    def run_config(self) -> dict[str, Any]:
        """As :meth:`RunOptions.run_config`, with ``device`` the device the run uses
        (``auto`` resolved): a checkpoint written on the CPU is reused by a run whose ``auto``
        means the CPU, never by one on CUDA (its numbers differ in the last digits)."""
        return {**super().run_config(), "device": self.torch_device}


@dataclass(frozen=True, kw_only=True)
class RunResult(Record):
    """What every workflow's ``Result`` is: a :class:`~mesadyn.record.Record` with an
    :class:`~mesadyn.outcome.Outcome` ``status`` and its ``message`` (keyword-only fields,
    after the subclass's own).

    ``ok`` and ``exit_code`` follow from ``status``; :meth:`to_dataset` is what the run file
    holds besides the ``--json`` object (the arrays; none by default).
    """

    status: Outcome
    message: str = ""

    @property
    def ok(self) -> bool:
        """Whether the run succeeded (``status.ok``)."""
        return Outcome(self.status).ok

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this result: 0 on success, 1 otherwise."""
        return int(Outcome(self.status).exit_code)

    def to_dataset(self) -> xr.Dataset:
        """The arrays of the run file (an empty Dataset unless the result has arrays)."""
        import xarray as xr

        return xr.Dataset()


R = TypeVar("R", bound="RunResult")


def write_run(config: RunOptions, result: R) -> R:
    """Write ``result`` to ``config.out`` (when given) and return it.

    The file holds :meth:`RunResult.to_dataset`, the ``--json`` object as the ``result``
    attribute and :meth:`RunOptions.run_config` as ``config``, with the seed and the package
    version, written atomically (:func:`mesadyn.io.save_run`).  An ``out`` ending in one of
    :data:`FIGURE_SUFFIXES` is the figure of a :class:`~mesadyn.workflows._figure.FigureResult`,
    written with the same provenance embedded in its metadata
    (:func:`~mesadyn.workflows._figure.write_figure`).
    """
    if config.out is None:
        return result
    if config.out.lower().endswith(FIGURE_SUFFIXES):
        from ._figure import write_figure

        return write_figure(config, result)
    from ..io import save_run, to_json

    ds = result.to_dataset()
    ds.attrs["result"] = to_json(result.to_dict())
    ds.attrs["status"] = str(result.status)
    ds.attrs["message"] = result.message
    save_run(ds, config.out, kind=config.COMMAND, config=config.run_config(), seed=config.seed)
    return result


def config_mismatch(stored: Mapping[str, Any], config: RunOptions) -> str | None:
    """``None`` when a stored run config equals ``config.run_config()``; else the first
    difference, as ``"key: stored → now"`` (for the message that refuses or recomputes)."""
    want = config.run_config()
    for key in sorted(set(stored) | set(want)):
        if stored.get(key, "<absent>") != want.get(key, "<absent>"):
            return f"{key}: {stored.get(key, '<absent>')!r} → {want.get(key, '<absent>')!r}"
    return None


def stored_run(path: str | os.PathLike[str], config: RunOptions) -> xr.Dataset | None:
    """The one reuse rule: the run file (or checkpoint) at ``path`` if it holds this run.

    ## Returns
    The stored Dataset when ``path`` is a run file of ``config.COMMAND`` written by this
    package version with exactly ``config.run_config()``; ``None`` when there is no file there.

    ## Raises
    `MesadynError`: the file is unreadable or foreign, or holds another configuration or
    version (the message names the first difference), so the caller decides: recompute and
    overwrite, or refuse.
    """
    from pathlib import Path

    from ..io import load_run, run_config, version

    p = Path(path)
    if not p.exists():
        return None
    ds = load_run(p, kind=config.COMMAND)
    if ds.attrs.get("mesadyn_version") != version():
        raise MesadynError(f"{os.fspath(path)!r} was written by mesadyn "
                           f"{ds.attrs.get('mesadyn_version')}, not {version()}")
    diff = config_mismatch(run_config(ds), config)
    if diff is not None:
        raise MesadynError(f"{os.fspath(path)!r} holds a run with other options ({diff})")
    return ds


@dataclass(frozen=True)
class RunRecord:
    """What a run file says about its run: the workflow (``kind``), the recorded
    ``config``, the stored ``result`` (the ``--json`` object; None in files written before
    results were stored) and, for a netCDF run file, its ``dataset``."""

    path: str
    kind: str
    config: dict[str, Any]
    result: dict[str, Any] | None
    dataset: xr.Dataset | None = None


def read_record(path: str | os.PathLike[str]) -> RunRecord:
    """The one validated reader of run files: a netCDF run file (:func:`mesadyn.io.load_run`)
    or a figure whose metadata holds its provenance (:data:`FIGURE_SUFFIXES`,
    :func:`mesadyn.plots.read_provenance`).

    ## Raises
    `MesadynError`: a missing, unreadable or foreign file, or one whose ``config`` or
    ``result`` is not a JSON object (one line naming the file).
    """
    import json

    p = os.fspath(path)
    if p.lower().endswith(FIGURE_SUFFIXES):
        from ..plots import read_provenance

        prov = read_provenance(p)
        kind, config, result, ds = prov.get("kind"), prov.get("config"), prov.get("result"), None
    else:
        from ..io import load_run

        ds = load_run(p)
        kind = ds.attrs.get("kind")
        try:
            config = json.loads(ds.attrs["config"])
            result = json.loads(ds.attrs["result"]) if "result" in ds.attrs else None
        except (TypeError, ValueError):
            raise MesadynError(f"run file {p!r}: its config or result is not JSON") from None
    if not isinstance(kind, str) or not isinstance(config, dict) or not (
            result is None or isinstance(result, dict)):
        raise MesadynError(f"run file {p!r}: malformed provenance (kind, config, result)")
    return RunRecord(p, kind, config, result, ds)


#: The run files that hold one point θ, and which of their rows it is: ``kind -> what`` (the
#: last row of their ``theta``).  Every other kind (an ensemble's one end point per trajectory,
#: a continuation's branches, ...) is refused as a point, never read as one.
POINT_RUNS: dict[str, str] = {
    "integrate": "the full flow's end point (the last row of θ(τ))",
    "stability": "the last analysed point",
    "train": "the last GD iterate",
}


def load_point(path: str | os.PathLike[str], d: int, model: Model | None = None) -> Any:
    """A flat θ (length 18d², or ``model``'s :meth:`~mesadyn.models.Model.n_params`) from a
    ``.npy`` file or a run file: ``--point`` of ``stability`` and ``continue``.

    A run file is read by :func:`read_record` and must be one of :data:`POINT_RUNS` (the last
    row of its ``theta`` is the point); the values are checked by
    :func:`mesadyn.analysis.stability.check_point`.

    ## Raises
    `MesadynError`: a missing or unreadable file, another suffix, a run of a kind that holds no
    single point (an ensemble, a continuation, ...), a non-numeric array, the wrong shape, or
    non-finite entries (the message names the file and the problem).
    """
    from pathlib import Path

    import numpy as np

    from ..analysis.stability import check_point
    from ..io import NETCDF_SUFFIXES, load_npy

    p = Path(path)
    where = repr(str(p))
    if not p.is_file():
        raise MesadynError(f"point file not found: {where}")
    if p.suffix.lower() == ".npy":
        return check_point(load_npy(p), d, where, model)
    if p.suffix.lower() not in NETCDF_SUFFIXES:
        raise MesadynError(f"--point must be a .npy or .nc file, got {where}")
    record = read_record(p)
    if record.kind not in POINT_RUNS:
        raise MesadynError(
            f"{where} holds a run of {record.kind!r}, which is not one point; --point takes a "
            f".npy array or a run file of {', '.join(repr(k) for k in POINT_RUNS)}")
    ds = record.dataset
    if ds is None or "theta" not in ds:
        raise MesadynError(f"{where} ({record.kind} run) has no variable 'theta'")
    arr = np.asarray(ds["theta"].values)
    if arr.ndim == 2 and arr.shape[0] >= 1:
        arr = arr[-1]
    return check_point(arr, d, f"{where} ({POINT_RUNS[record.kind]})", model)

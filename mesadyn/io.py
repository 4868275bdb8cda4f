"""Runs on disk: xarray Datasets in netCDF (h5netcdf), written atomically, with provenance.

Every run file carries the attributes ``mesadyn_version``, ``kind`` (what wrote it),
``config`` (the full configuration as JSON), ``seed`` and ``created``.  Files are written to
a temporary name in the target folder and renamed into place, so an interrupted write never
leaves a half-written file.  Nothing is ever unpickled.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .errors import MesadynError

ENGINE = "h5netcdf"


def version() -> str:
    """The installed mesadyn version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _v

    try:
        return _v("mesadyn")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def to_json(obj: Any) -> str:
    """JSON text for configs and summaries (numpy scalars and arrays become plain values)."""
    return json.dumps(_jsonable(obj), sort_keys=True)


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename).

    The file gets the usual permissions (0666 less the umask), not mkstemp's 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write text atomically (UTF-8)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def save_run(ds: xr.Dataset, path: str | os.PathLike[str], *, kind: str,
             config: dict[str, Any], seed: int | None = None) -> Path:
    """Save ``ds`` to ``path`` (netCDF) atomically with its provenance attributes."""
    path = Path(path)
    if path.suffix not in (".nc", ".nc4", ".netcdf"):
        raise MesadynError(f"run files are netCDF: give a path ending in .nc, got {str(path)!r}")
    ds = ds.copy()
    ds.attrs.update(
        mesadyn_version=version(),
        kind=kind,
        config=to_json(config),
        seed=-1 if seed is None else int(seed),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        ds.to_netcdf(tmp, engine=ENGINE, invalid_netcdf=True)
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_run(path: str | os.PathLike[str], kind: str | None = None) -> xr.Dataset:
    """Load a run saved by :func:`save_run`; a missing, unreadable or foreign file is an error.

    With ``kind`` given, the file must have been written by that kind of run.
    """
    path = Path(path)
    if not path.is_file():
        raise MesadynError(f"run file not found: {str(path)!r}")
    try:
        with xr.open_dataset(path, engine=ENGINE) as ds:
            ds = ds.load()
    except Exception as exc:  # noqa: BLE001 - any reader failure means unreadable
        raise MesadynError(f"cannot read run file {str(path)!r}: {type(exc).__name__}") from None
    if "mesadyn_version" not in ds.attrs or "config" not in ds.attrs:
        raise MesadynError(f"{str(path)!r} is not a mesadyn run file (no provenance attributes)")
    if kind is not None and ds.attrs.get("kind") != kind:
        raise MesadynError(
            f"{str(path)!r} holds a {ds.attrs.get('kind')!r} run, expected a {kind!r} run"
        )
    return ds


def run_config(ds: xr.Dataset) -> dict[str, Any]:
    """The configuration stored with a run."""
    return json.loads(ds.attrs["config"])

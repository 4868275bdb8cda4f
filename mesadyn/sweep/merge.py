"""Merging point records into one xarray Dataset with the sweep's axes as dimensions.

Product sweeps get one dimension per axis (coordinates = the axis values); zip sweeps get one
dimension ``point`` with every axis as a coordinate along it.  Every scalar of a point's result
becomes a variable over those dimensions (nested dicts are flattened with ``.``); numeric lists
get extra dimensions ``<name>_dim0, …`` (padded with NaN where a point's list is shorter, e.g.
a list over the d coordinates in a sweep over d).  Missing values (failed
points) are NaN for numbers and ``""`` for strings.  Bookkeeping variables: ``point_status``
(the record's :class:`~mesadyn.outcome.Outcome`: ``ok``, ``failed`` for a point that raised, a
workflow's failing outcome such as ``max_steps`` whose result is kept; ``missing`` without a
record), ``point_error``, ``point_wall_s``, ``point_hash``.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..io import save_run, to_json
from ..outcome import Outcome
from .records import MISSING, outcome_of
from .spec import Spec

DATASET = "sweep"


def _flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        name = f"{prefix}{k}".replace("/", "_")
        if isinstance(v, dict):
            out.update(_flatten(v, name + "."))
        else:
            out[name] = v
    return out


def _number(value: Any) -> float:
    """A float from a stored number; ``None`` (a non-finite value in strict JSON) is NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def _column(values: list[Any]) -> tuple[np.ndarray | None, str]:
    """A 1-D (or N-D for lists) array of one variable over all points, or None if ragged."""
    present = [v for v in values if v is not None]
    if not present:
        return None, "no values"
    if all(isinstance(v, bool) for v in present):
        if len(present) == len(values):
            return np.array(values, dtype=bool), ""
        return np.array([np.nan if v is None else float(v) for v in values]), ""
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        if len(present) == len(values):
            return np.array(values, dtype=np.int64), ""
        return np.array([np.nan if v is None else float(v) for v in values]), ""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return np.array([np.nan if v is None else float(v) for v in values]), ""
    if all(isinstance(v, str) for v in present):
        return np.array(["" if v is None else v for v in values], dtype=object), ""
    if all(isinstance(v, list) for v in present):
        try:
            arrays = [np.asarray(v, dtype=np.float64) for v in present]
        except (TypeError, ValueError):
            return None, "non-numeric lists"
        ndims = {a.ndim for a in arrays}
        if len(ndims) != 1:
            return None, "lists of different nesting depths"
        shape = tuple(int(n) for n in np.max([a.shape for a in arrays], axis=0))
        out = np.full((len(values), *shape), np.nan)
        it = iter(arrays)
        for i, v in enumerate(values):
            if v is not None:
                a = next(it)
                where: tuple[int | slice, ...] = (i, *(slice(0, n) for n in a.shape))
                out[where] = a
        return out, ""
    return None, "mixed types"


def merge_records(spec: Spec, records: dict[str, dict[str, Any]]) -> xr.Dataset:
    """The Dataset of a sweep from its point records (keyed by point hash)."""
    points = spec.points()
    shape, dims = spec.shape, spec.dims
    n = len(points)
    recs = [records.get(p.hash) for p in points]
    status = np.array([r.get("status", Outcome.FAILED.value) if r else MISSING for r in recs],
                      dtype=object)
    error = np.array([(r.get("error", "") if r else "not run") for r in recs], dtype=object)
    wall = np.array([_number(r.get("wall_s")) if r else math.nan for r in recs])
    flat = [_flatten(r["result"]) if r and isinstance(r.get("result"), dict) else {}
            for r in recs]

    if spec.mode == "zip":
        coords: dict[str, Any] = {"point": np.arange(n)}
        for name, values in spec.axes.items():
            coords[name] = ("point", np.asarray(values, dtype=object if
                                                 isinstance(values[0], str) else None))
    else:
        coords = {name: np.asarray(values, dtype=object if isinstance(values[0], str) else None)
                  for name, values in spec.axes.items()}

    data: dict[str, Any] = {
        "point_status": (dims, status.reshape(shape)),
        "point_error": (dims, error.reshape(shape)),
        "point_wall_s": (dims, wall.reshape(shape)),
        "point_hash": (dims, np.array([p.hash for p in points], dtype=object).reshape(shape)),
    }
    skipped: dict[str, str] = {}
    keys: list[str] = []
    for f in flat:
        keys.extend(k for k in f if k not in keys)
    for key in keys:
        values = [f.get(key) for f in flat]
        name = key
        if key in spec.axes:  # an echo of the axis value: drop it when it agrees
            echo = [p.coords[key] for p in points]
            if all(v is None or v == e for v, e in zip(values, echo, strict=True)):
                continue
            name = f"{key}_result"
        if name in data or name in coords:
            name = f"result_{name}"
        col, why = _column(values)
        if col is None:
            skipped[key] = why
            continue
        extra = tuple(f"{name}_dim{i}" for i in range(col.ndim - 1))
        data[name] = (dims + extra, col.reshape(shape + col.shape[1:]))
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(
        command=spec.command, target=spec.target, mode=spec.mode, spec_hash=spec.hash,
        spec=to_json(spec.to_dict()), n_points=n,
        n_failed=int(sum(s == MISSING or not outcome_of(s).ok for s in status)),
        skipped_variables=to_json(skipped),
    )
    return ds


def write_dataset(ds: xr.Dataset, out: Path, spec: Spec, fmt: str = "netcdf") -> Path:
    """Save the merged Dataset atomically as ``out/sweep.nc`` (or ``out/sweep.zarr``)."""
    if fmt == "netcdf":
        return save_run(ds, out / f"{DATASET}.nc", kind="sweep", config=spec.to_dict())
    target = out / f"{DATASET}.zarr"
    tmp = Path(tempfile.mkdtemp(prefix=f".{DATASET}.zarr.", dir=out))
    try:
        ds.attrs.update(kind="sweep", config=to_json(spec.to_dict()))
        ds.to_zarr(tmp / "store.zarr", mode="w")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp / "store.zarr", target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_sweep(out: str | os.PathLike[str]) -> xr.Dataset:
    """Load the merged Dataset of a sweep folder (netCDF)."""
    from ..io import load_run

    return load_run(Path(out) / f"{DATASET}.nc", kind="sweep")

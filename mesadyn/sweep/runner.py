"""Running a sweep on Dask: one task per point, each point stored atomically as it finishes.

Layout of an output folder ``DIR``::

    DIR/sweep.json            manifest: the spec, its hash, the hash of every point
    DIR/points/<hash>.json    one record per finished point (options, result or error, timing)
    DIR/sweep.nc              the merged Dataset (see :mod:`mesadyn.sweep.merge`)

A point's hash covers the command and *all* its options (defaults included), so re-running a
spec skips every point already stored, and a changed spec re-uses exactly the points whose
options did not change; the others are reported as stale (kept on disk unless pruned, never
merged).  A failing point records its error and the sweep goes on; failed points are retried on
the next run unless ``retry_failed=False``.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import MesadynError
from ..io import atomic_write_text, to_json, version
from .spec import Point, Spec

MANIFEST = "sweep.json"
POINTS = "points"


# ---- on the worker -----------------------------------------------------------------
@functools.cache
def _resolve(target: str) -> Callable[..., Any]:
    """The compute() function of a target, imported once per worker process."""
    module_name, _, func_name = target.partition(":")
    return getattr(importlib.import_module(module_name), func_name)


def run_point(target: str, options: dict[str, Any], point_hash: str) -> dict[str, Any]:
    """Run one point and return its record; exceptions become a failure record.

    The result must be a dict of JSON-able values; it is round-tripped through JSON here so
    that what is stored, merged and returned is exactly the same.
    """
    record: dict[str, Any] = {
        "hash": point_hash, "target": target, "options": options,
        "host": socket.gethostname(), "pid": os.getpid(), "mesadyn_version": version(),
        "started": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }
    t0 = time.perf_counter()
    try:
        func = _resolve(target)  # imported once per process; not part of the point's time
        t1 = time.perf_counter()
        record["import_s"] = t1 - t0
        t0 = t1
        result = func(**options)
        if not isinstance(result, dict):
            raise TypeError(f"{target} returned a {type(result).__name__}, not a dict")
        record["result"] = json.loads(to_json(result))
        record["status"] = "ok"
    except Exception as exc:  # noqa: BLE001 - a failing point must not stop the sweep
        record["status"] = "failed"
        record["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        record["traceback"] = traceback.format_exc(limit=8)
    record["wall_s"] = time.perf_counter() - t0
    from .shared import stats

    record["shared_cache"] = stats()
    return record


# ---- the summary ---------------------------------------------------------------------
@dataclass
class SweepResult:
    """What a sweep did: counts, failed and stale points, the merged Dataset's path."""

    out: Path
    dataset: Path | None
    n_points: int
    computed: int
    skipped: int
    failed: list[dict[str, Any]]
    stale: list[dict[str, Any]]
    spec_changed: bool
    wall_s: float
    compute_s: float
    workers: int
    scheduler: str
    records: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON summary (``mesadyn sweep --json``)."""
        return {
            "out": str(self.out), "dataset": None if self.dataset is None else str(self.dataset),
            "n_points": self.n_points, "computed": self.computed, "skipped": self.skipped,
            "n_failed": len(self.failed), "failed": self.failed, "n_stale": len(self.stale),
            "stale": self.stale, "spec_changed": self.spec_changed, "wall_s": self.wall_s,
            "compute_s": self.compute_s, "workers": self.workers, "scheduler": self.scheduler,
        }


# ---- on disk -------------------------------------------------------------------------
def point_path(out: Path, point_hash: str) -> Path:
    """Where a point's record lives."""
    return out / POINTS / f"{point_hash}.json"


def read_records(out: Path) -> dict[str, dict[str, Any]]:
    """Every stored point record in ``out`` (unreadable files are ignored and redone)."""
    records: dict[str, dict[str, Any]] = {}
    folder = out / POINTS
    if not folder.is_dir():
        return records
    for path in sorted(folder.glob("*.json")):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("hash") == path.stem:
            records[path.stem] = rec
    return records


def _describe_stale(rec: dict[str, Any], spec: Spec, current: dict[str, Point]) -> dict[str, Any]:
    """Name a stale point by its axis values and say what changed."""
    opts = rec.get("options", {})
    coords = {k: opts.get(k) for k in spec.axes}
    same = [p for p in current.values() if p.coords == coords]
    if same:
        new = same[0].options
        keys = sorted(set(opts) | set(new))
        changed = {k: [opts.get(k), new.get(k)] for k in keys if opts.get(k) != new.get(k)}
        why = "options changed: " + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in
                                             changed.items())
    else:
        changed = {}
        why = "no longer in the spec"
    label = ", ".join(f"{k}={v}" for k, v in coords.items())
    return {"hash": rec["hash"], "point": label, "options": opts, "changed": changed,
            "reason": why}


def _failure(point: Point, rec: dict[str, Any]) -> dict[str, Any]:
    return {"hash": point.hash, "point": point.label(), "error": rec.get("error", "")}


# ---- executors -----------------------------------------------------------------------
class _Inline:
    """Run points one after another in this process (``workers=0``; for debugging)."""

    name = "inline"
    n_workers = 1

    def map(self, tasks: list[tuple[str, dict[str, Any], str]]):
        for task in tasks:
            yield run_point(*task)

    def close(self) -> None:
        pass


class _Dask:
    """A Dask distributed client on a new local cluster or an existing scheduler."""

    def __init__(self, workers: int | None, scheduler: str | None, timeout: float,
                 client: Any = None) -> None:
        import logging

        from distributed import Client, LocalCluster

        self.cluster = None
        self.own_client = client is None
        if client is not None:
            self.client = client
            self.name = str(getattr(client, "scheduler", None) and client.scheduler.address)
            self.n_workers = len(client.scheduler_info().get("workers", {}))
        elif scheduler:
            if "://" not in scheduler and ":" not in scheduler:
                raise MesadynError(
                    f"--scheduler must be an address like tcp://HOST:PORT, got {scheduler!r}"
                )
            try:
                self.client = Client(scheduler, timeout=f"{timeout}s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise MesadynError(
                    f"cannot reach the Dask scheduler at {scheduler!r} within {timeout:g} s "
                    f"({type(exc).__name__}); is it running and reachable?"
                ) from None
            self.name = scheduler
            self.n_workers = len(self.client.scheduler_info().get("workers", {}))
        else:
            n = workers if workers is not None else (os.cpu_count() or 1)
            self.cluster = LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                silence_logs=logging.ERROR,
            )
            self.client = Client(self.cluster)
            self.name = "local"
            self.n_workers = n

    def map(self, tasks: list[tuple[str, dict[str, Any], str]]):
        from distributed import as_completed

        futures = {
            self.client.submit(run_point, *task, key=f"mesadyn-point-{task[2]}", pure=False): task
            for task in tasks
        }
        try:
            # results arrive in batches with the completion events (no round trip per point)
            for fut, value in as_completed(futures, with_results=True, raise_errors=False):
                task = futures[fut]
                if isinstance(value, dict) and value.get("hash") == task[2]:
                    yield value
                else:  # the task itself died (worker killed, out of memory, ...)
                    exc = value if isinstance(value, BaseException) else fut.exception()
                    yield {
                        "hash": task[2], "target": task[0], "options": task[1],
                        "status": "failed", "wall_s": float("nan"),
                        "error": f"{type(exc).__name__}: {' '.join(str(exc).split())}",
                    }
                fut.release()
        finally:
            for fut in futures:
                if not fut.done():
                    fut.cancel()

    def close(self) -> None:
        if not self.own_client:
            return
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


# ---- the sweep -----------------------------------------------------------------------
def run_sweep(
    spec: Spec,
    out: str | os.PathLike[str],
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    connect_timeout: float = 5.0,
    retry_failed: bool = True,
    prune_stale: bool = False,
    fmt: str = "netcdf",
    show_progress: bool = False,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    client: Any = None,
) -> SweepResult:
    """Run every point of ``spec`` not already stored in ``out``, then merge them all.

    ``workers=None`` uses every core on a local Dask cluster; ``workers=0`` runs points
    inline in this process; ``scheduler`` connects to an existing Dask scheduler instead;
    ``client`` uses an existing ``distributed.Client`` (left open).
    """
    from .merge import merge_records, write_dataset

    t_start = time.perf_counter()
    if fmt not in ("netcdf", "zarr"):
        raise MesadynError(f"--format must be netcdf or zarr, got {fmt!r}")
    if fmt == "zarr":
        try:
            import zarr  # noqa: F401
        except ImportError:
            raise MesadynError("--format zarr needs the zarr package; use netcdf") from None
    if workers is not None and (isinstance(workers, bool) or workers < 0):
        raise MesadynError(f"--workers must be >= 0, got {workers!r}")
    if sum(x is not None and x is not False for x in (workers, scheduler, client)) > 1:
        raise MesadynError("give one of --workers, --scheduler (or a client), not several")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise MesadynError(f"--out must be a folder, got the file {str(out)!r}")
    manifest_path = out / MANIFEST
    previous: dict[str, Any] = {}
    if manifest_path.is_file():
        try:
            previous = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError:
            previous = {}
    elif out.is_dir() and any(out.iterdir()):
        raise MesadynError(f"--out {str(out)!r} is a non-empty folder that holds no sweep")

    points = spec.points()
    current = {p.hash: p for p in points}
    stored = read_records(out)
    stale = [_describe_stale(rec, spec, current) for h, rec in stored.items() if h not in current]
    if prune_stale:
        for s in stale:
            point_path(out, s["hash"]).unlink(missing_ok=True)
    spec_changed = bool(previous) and previous.get("spec_hash") != spec.hash

    def done(p: Point) -> bool:
        rec = stored.get(p.hash)
        return rec is not None and (rec.get("status") == "ok" or not retry_failed)

    pending = [p for p in points if not done(p)]
    executor: _Inline | _Dask | None = None
    if pending:  # connect (or fail) before anything is written
        if workers == 0:
            executor = _Inline()
        else:
            executor = _Dask(workers, scheduler, connect_timeout, client)
    try:
        atomic_write_text(manifest_path, to_json({
            "spec": spec.to_dict(), "spec_hash": spec.hash, "mesadyn_version": version(),
            "points": [{"hash": p.hash, "coords": p.coords} for p in points],
        }))
    except BaseException:
        if executor is not None:
            executor.close()
        raise

    records = {h: stored[h] for h in current if h in stored}
    executor_name, n_workers = "none", 0
    if executor is not None:
        executor_name, n_workers = executor.name, executor.n_workers
        try:
            from ..progress import progress

            with progress(show_progress) as bar:
                task = bar.add_task(f"sweep {spec.command}", total=len(pending))
                for rec in executor.map([(spec.target, p.options, p.hash) for p in pending]):
                    atomic_write_text(point_path(out, rec["hash"]), to_json(rec))
                    records[rec["hash"]] = rec
                    if on_record is not None:
                        on_record(rec)
                    bar.advance(task)
        finally:
            executor.close()

    failed = [_failure(p, records[p.hash]) for p in points
              if records.get(p.hash, {}).get("status") != "ok"]
    ds = merge_records(spec, records)
    dataset = write_dataset(ds, out, spec, fmt)
    computed_here = [records[p.hash] for p in pending if p.hash in records]
    return SweepResult(
        out=out, dataset=dataset, n_points=len(points), computed=len(computed_here),
        skipped=len(points) - len(pending), failed=failed, stale=stale,
        spec_changed=spec_changed, wall_s=time.perf_counter() - t_start,
        compute_s=float(sum(r.get("wall_s", 0.0) or 0.0 for r in computed_here
                            if r.get("wall_s") == r.get("wall_s"))),
        workers=n_workers, scheduler=executor_name,
        records={p.hash: records[p.hash] for p in points if p.hash in records},
    )

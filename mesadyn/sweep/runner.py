"""Running a sweep on Dask: one task per point, each point stored atomically as it finishes.

Layout of an output folder ``DIR``::

    DIR/sweep.json            manifest: the spec, its hash, the hash of every point
    DIR/points/<hash>.json    one record per finished point (options, result or error, timing)
    DIR/sweep.nc              the merged Dataset (see :mod:`mesadyn.sweep.merge`)

A point's hash is its validated ``Config``'s (:func:`mesadyn.sweep._targets.point_hash`: every
option, defaults included, and the package version), so re-running a spec skips every point
already stored, and a changed spec (or another mesadyn version) re-uses exactly the points
whose configuration did not change; the others are reported as stale (kept on disk unless
pruned, never merged).  A point's ``status`` is an :class:`~mesadyn.outcome.Outcome`: ``ok``
when its workflow succeeded, the workflow's own outcome when it failed (``max_steps``,
``saddle``, …; its result is kept), ``failed`` when it raised (with its error); the sweep goes
on, and failed points are retried on the next run unless ``retry_failed=False``.  A point
record that cannot be read or is malformed is reported (``corrupt``), moved aside to
``<hash>.json.corrupt`` (``.corrupt-1``, … when that name is taken) and the point is
recomputed; temporary files of killed writers are removed.  An interrupted sweep keeps every
point already stored: running it again resumes.

Local clusters (:func:`local_cluster`) bind no fixed port: the scheduler's HTTP server (the
dashboard's) listens on a free one, so two sweeps (or two test processes) can run side by side.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import MesadynError
from ..io import atomic_write_text, check_writable_dir, clean_stale_tmp, to_json, version
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import hidden
from ..workflows import RunResult
from ._targets import WORKFLOW_PREFIX, workflow_module
from .records import POINTS, outcome_of, point_path, scan_records
from .spec import Point, Spec

MANIFEST = "sweep.json"
#: A sweep with more pending points than this needs an explicit go-ahead when a time budget is
#: set (``mesadyn sweep`` without ``--yes``), before anything runs.
CONFIRM_POINTS = 100_000
#: Default time budget of ``mesadyn sweep`` without ``--yes`` (seconds of estimated wall time).
DEFAULT_BUDGET_S = 60.0

#: One task: (target, options, point hash, output folder, output options).
Task = tuple[str, dict[str, Any], str, str | None, tuple[str, ...]]


# ---- on the worker -----------------------------------------------------------------
@functools.cache
def _resolve(target: str) -> Callable[..., tuple[dict[str, Any], Outcome, str]]:
    """The function a target names, imported once per worker process; it returns the point's
    result dict, its outcome and message.

    ``workflow:<name>`` is ``mesadyn.workflows.<name>``: ``run(Config(**options))`` (its
    ``to_dict()``, ``status`` and ``message``); anything else is an opted-in
    ``package.module:function`` returning a dict (``ok``; see :mod:`mesadyn.sweep.spec`).
    """
    if target.startswith(WORKFLOW_PREFIX):
        module = workflow_module(target)

        def run_workflow(**options: Any) -> tuple[dict[str, Any], Outcome, str]:
            result = module.run(module.Config(**options))
            if isinstance(result, RunResult):
                return result.to_dict(), outcome_of(result.status), result.message
            return result.to_dict(), Outcome.OK, ""

        return run_workflow
    module_name, _, func_name = target.partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    if not callable(func):
        raise TypeError(f"{target} is not a function")

    def run_code(**options: Any) -> tuple[dict[str, Any], Outcome, str]:
        result = func(**options)
        if not isinstance(result, dict):
            raise TypeError(f"{target} returned a {type(result).__name__}, not a dict")
        return result, Outcome.OK, ""

    return run_code


def _resolve_outputs(options: dict[str, Any], out_dir: str | None,
                     outputs: tuple[str, ...]) -> dict[str, Any]:
    """Output paths resolved under the sweep's folder (their parent folders created)."""
    if out_dir is None or not outputs:
        return options
    resolved = dict(options)
    for name in outputs:
        value = options.get(name)
        if isinstance(value, str) and value:
            path = Path(out_dir) / value
            path.parent.mkdir(parents=True, exist_ok=True)
            resolved[name] = str(path)
    return resolved


def run_point(target: str, options: dict[str, Any], point_hash: str,
              out_dir: str | None = None, outputs: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run one point and return its record; exceptions become a failure record.

    ``status`` is ``ok`` for a success, the workflow's failing :class:`~mesadyn.outcome.Outcome`
    (with its ``message`` as ``error``; the result kept) or ``failed`` for a point that raised
    (``error``: ``Type: message``, and a short traceback).  The result must be a dict of
    JSON-able values; it is round-tripped through strict JSON here so that what is stored,
    merged and returned is exactly the same.  Output options (``outputs``) are resolved under
    ``out_dir``; the record keeps them as the spec gave them.  What the target prints (to
    ``sys.stdout``, at import or while it runs) goes to stderr, so ``--json`` stdout holds the
    sweep's object alone.
    """
    record: dict[str, Any] = {
        "hash": point_hash, "target": target, "options": options,
        "host": socket.gethostname(), "pid": os.getpid(), "mesadyn_version": version(),
        "started": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }
    t0 = time.perf_counter()
    try:
        # what the target prints goes to stderr: stdout is the sweep's own (its --json object)
        with contextlib.redirect_stdout(sys.stderr):
            func = _resolve(target)  # imported once per process; not part of the point's time
            t1 = time.perf_counter()
            record["import_s"] = t1 - t0
            t0 = t1
            result, outcome, message = func(**_resolve_outputs(options, out_dir, outputs))
        record["result"] = json.loads(to_json(result))
        record["status"] = (Outcome.OK if outcome.ok else outcome).value
        if not outcome.ok:
            record["error"] = message or outcome.description
    except Exception as exc:  # noqa: BLE001 - a failing point must not stop the sweep
        record.pop("result", None)
        record["status"] = Outcome.FAILED.value
        record["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        record["traceback"] = traceback.format_exc(limit=8)
    record["wall_s"] = time.perf_counter() - t0
    if "mesadyn.field" in sys.modules:  # fields are reused per process: record hits/misses
        from ..field import cache_stats

        record["field_cache"] = dict(cache_stats())
    return record


# ---- the summary ---------------------------------------------------------------------
@dataclass(frozen=True)
class SweepResult(RunResult):
    """What a sweep did: counts, failed and stale points, the merged Dataset's path
    (``to_dict()`` is ``mesadyn sweep --json``).

    `status`: the points' outcomes combined (:meth:`~mesadyn.outcome.Outcome.combine`; ``ok``
    when every point succeeded), `message`: what failed.  `records` (not in ``to_dict()``):
    every point's record, by hash.
    """

    DERIVED = ("n_failed", "n_stale", "n_corrupt")

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
    records: dict[str, dict[str, Any]] = hidden(None)
    corrupt: list[dict[str, Any]] = field(default_factory=list)

    @property
    def n_failed(self) -> int:
        """Points whose record is not a success."""
        return len(self.failed)

    @property
    def n_stale(self) -> int:
        """Stored points the spec no longer has."""
        return len(self.stale)

    @property
    def n_corrupt(self) -> int:
        """Stored point files that were not records (moved aside, recomputed)."""
        return len(self.corrupt)


def _describe_stale(rec: dict[str, Any], spec: Spec, current: dict[str, Point]) -> dict[str, Any]:
    """Name a stale point by its axis values and say what changed."""
    opts = rec["options"]
    coords = {k: opts.get(k) for k in spec.axes}
    same = [p for p in current.values() if p.coords == coords]
    if same:
        new = same[0].options
        keys = sorted(set(opts) | set(new))
        changed = {k: [opts.get(k), new.get(k)] for k in keys if opts.get(k) != new.get(k)}
        why = "options changed: " + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in
                                             changed.items())
        if not changed:  # the same options: another version, or an older sweep's hash
            made = rec.get("mesadyn_version")
            why = (f"written by mesadyn {made}, this is {version()}" if made != version()
                   else "stored under another point hash (recomputed)")
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

    def map(self, tasks: list[Task]) -> Iterator[dict[str, Any]]:
        for task in tasks:
            yield run_point(*task)

    def close(self) -> None:
        pass


def local_cluster(n_workers: int, *, silence_logs: int = logging.ERROR, **options: Any) -> Any:
    """A ``distributed.LocalCluster`` of ``n_workers`` single-threaded worker processes that
    binds no fixed port: its scheduler's HTTP server (the dashboard's, ``:8787`` by default —
    ``dashboard_address=None`` still binds it) listens on a free port.  ``options`` go to
    ``LocalCluster``."""
    from distributed import LocalCluster

    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                        dashboard_address=":0", silence_logs=silence_logs, **options)


class _Dask:
    """A Dask distributed client on a new local cluster or an existing scheduler."""

    def __init__(self, workers: int | None, scheduler: str | None, timeout: float,
                 client: Any = None) -> None:
        from distributed import Client

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
            self.cluster = local_cluster(n)
            self.client = Client(self.cluster)
            self.name = "local"
            self.n_workers = n

    def map(self, tasks: list[Task]) -> Iterator[dict[str, Any]]:
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
                        "status": Outcome.FAILED.value, "wall_s": float("nan"),
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
    progress: ProgressCallback | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    client: Any = None,
    budget_s: float | None = None,
) -> SweepResult:
    """Run every point of ``spec`` not already stored in ``out``, then merge them all.

    ``workers=None`` uses every core on a local Dask cluster; ``workers=0`` runs points
    inline in this process; ``scheduler`` connects to an existing Dask scheduler instead;
    ``client`` uses an existing ``distributed.Client`` (left open); ``progress`` is called
    with the number of pending points done (the CLI draws the bar).

    With ``budget_s`` set (``mesadyn sweep`` without ``--yes``), a sweep of more than
    :data:`CONFIRM_POINTS` pending points is refused before anything runs, and otherwise the
    first pending point is run here as a probe: when its time × the remaining points / workers
    exceeds ``budget_s`` the sweep stops with that estimate (the probe's record is kept).

    ## Raises
    - `MesadynError`: bad arguments, an unusable ``out``, an unreachable scheduler, or (with
      ``budget_s``) a sweep estimated to take longer — all before any point but the probe runs.
    - `KeyboardInterrupt`: passed on; every point finished so far is stored (resume by running
      the same sweep again).
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
    if not spec.is_workflow and not spec.allow_code:
        raise MesadynError(f"sweep target {spec.target!r} is not a mesadyn workflow; "
                           "parse the spec with allow_code=True to run it")
    out = Path(out)
    check_writable_dir(out)
    if out.exists() and not out.is_dir():  # pragma: no cover - check_writable_dir refuses it
        raise MesadynError(f"--out must be a folder, got the file {str(out)!r}")
    manifest_path = out / MANIFEST
    previous: dict[str, Any] = {}
    if manifest_path.is_file():
        try:
            loaded = json.loads(manifest_path.read_text(encoding="utf-8"))
            previous = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            previous = {}
    elif out.is_dir() and any(p.name != POINTS for p in out.iterdir()
                              if not p.name.startswith(".")):
        raise MesadynError(f"--out {str(out)!r} is a non-empty folder that holds no sweep")
    for folder in (out, out / POINTS):
        clean_stale_tmp(folder)

    points = spec.points()
    current = {p.hash: p for p in points}
    stored, corrupt = scan_records(out)
    stale = [_describe_stale(rec, spec, current) for h, rec in stored.items() if h not in current]
    if prune_stale:
        for s in stale:
            point_path(out, s["hash"]).unlink(missing_ok=True)
    spec_changed = bool(previous) and previous.get("spec_hash") != spec.hash

    def done(p: Point) -> bool:
        rec = stored.get(p.hash)
        return rec is not None and (outcome_of(rec["status"]).ok or not retry_failed)

    pending = [p for p in points if not done(p)]
    if budget_s is not None and len(pending) > CONFIRM_POINTS:
        raise MesadynError(
            f"the sweep has {len(pending)} points to run (more than {CONFIRM_POINTS}); "
            "pass --yes to go ahead"
        )
    executor: _Inline | _Dask | None = None
    if pending:  # connect (or fail) before anything is written
        if workers == 0:
            executor = _Inline()
        else:
            executor = _Dask(workers, scheduler, connect_timeout, client)
    records = {h: stored[h] for h in current if h in stored}
    outputs = tuple(spec.output_options)

    def task(p: Point) -> Task:
        return (spec.target, p.options, p.hash, str(out.resolve()), outputs)

    def store(rec: dict[str, Any]) -> None:
        atomic_write_text(point_path(out, rec["hash"]), to_json(rec))
        records[rec["hash"]] = rec
        if on_record is not None:
            on_record(rec)

    executor_name, n_workers = "none", 0
    try:
        atomic_write_text(manifest_path, to_json({
            "spec": spec.to_dict(), "spec_hash": spec.hash, "mesadyn_version": version(),
            "points": [{"hash": p.hash, "coords": p.coords} for p in points],
        }))
        if executor is not None:
            executor_name, n_workers = executor.name, executor.n_workers
            todo = pending
            if budget_s is not None and len(pending) > 1:
                probe = run_point(*task(pending[0]))  # here, timed: the cost estimate
                store(probe)
                todo = pending[1:]
                estimate = float(probe.get("wall_s") or 0.0) * len(todo) / max(1, n_workers)
                if estimate > budget_s:
                    raise MesadynError(
                        f"the sweep would take about {_duration(estimate)} ({len(todo)} more "
                        f"points; the first took {_duration(probe['wall_s'])}, "
                        f"{max(1, n_workers)} workers); pass --yes to go ahead "
                        "(the first point is stored)"
                    )
            n_done = len(pending) - len(todo)
            if progress is not None:
                progress(float(n_done))
            for rec in executor.map([task(p) for p in todo]):
                store(rec)
                n_done += 1
                if progress is not None:
                    progress(float(n_done))
    finally:
        if executor is not None:
            executor.close()

    outcomes = [outcome_of(records[p.hash]["status"]) if p.hash in records else Outcome.FAILED
                for p in points]
    failed = [_failure(p, records.get(p.hash, {"error": "not run"}))
              for p, o in zip(points, outcomes, strict=True) if not o.ok]
    ds = merge_records(spec, records)
    dataset = write_dataset(ds, out, spec, fmt)
    computed_here = [records[p.hash] for p in pending if p.hash in records]
    n_bad = len(failed)
    return SweepResult(
        status=Outcome.combine(outcomes),
        message=(f"{n_bad} of {len(points)} sweep points failed" if n_bad
                 else f"{len(points)} sweep points ok"),
        out=out, dataset=dataset, n_points=len(points), computed=len(computed_here),
        skipped=len(points) - len(pending), failed=failed, stale=stale,
        spec_changed=spec_changed, wall_s=time.perf_counter() - t_start,
        compute_s=float(sum(r.get("wall_s", 0.0) or 0.0 for r in computed_here
                            if r.get("wall_s") == r.get("wall_s"))),
        workers=n_workers, scheduler=executor_name,
        records={p.hash: records[p.hash] for p in points if p.hash in records},
        corrupt=corrupt,
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"

"""What the claims, figures and report of ``mesadyn reproduce`` share: the :class:`Context`
that finds a run on disk or computes it through its workflow.

The modules of this package depend on each other one way only::

    studies -> context -> rows -> claims -> outcome -> figures -> report -> runner

Every run is a workflow ``Config`` (:meth:`~mesadyn.reproduce.studies.FlowRun.workflow_config`,
:meth:`~mesadyn.reproduce.studies.GDRun.workflow_config`): an exact flow is computed by
:func:`mesadyn.workflows.integrate.run`, the GD runs that share a training set by one
:func:`mesadyn.workflows.train.run_batch`, and each writes its own run file.  Layout of
``OUT``::

    runs/<run>-<hash>.nc        one workflow run file (netCDF: config, seed, version; atomic)
    claims/<claim>-<hash>.json  one claim's rows (atomic)
    figures/<study>.png         the figures (atomic)
    cache/                      the exact field's moment tensors (rebuilt on demand)
    report.md, report.html      the report (atomic); results.json, every number in it

A run file's name carries its configuration's hash (:meth:`~mesadyn.workflows.RunOptions.
config_hash`: every recorded option and the package version) and the file is reused exactly
when :func:`mesadyn.workflows.stored_run` accepts it, so a changed configuration or version
recomputes and a re-run after an interruption continues where it stopped.  A run file that
cannot be read, or holds another run, is reported (:attr:`Context.repaired`) and recomputed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import MesadynError
from ..workflows import FLOW_COST, gd_cost, integrate, stored_run, train
from .studies import FlowRun, GDRun

if TYPE_CHECKING:
    import xarray as xr

Run = GDRun | FlowRun
#: The workflow configuration of a run.
WorkflowConfig = integrate.Config | train.Config
#: The environment variable that names the exact field's moment cache
#: (:func:`mesadyn.field.make_field`); :func:`moment_cache` points it at ``OUT/cache``.
MOMENT_CACHE_ENV = "MESADYN_CACHE_DIR"


@contextmanager
def moment_cache(out: Path) -> Iterator[Path]:
    """Keep the exact field's moment tensors in ``out/cache`` (a self-contained output folder)
    while the context is open, for this process and the worker processes it starts; the
    variable's previous value is restored on exit."""
    before = os.environ.get(MOMENT_CACHE_ENV)
    os.environ[MOMENT_CACHE_ENV] = str(out / "cache")
    try:
        yield out / "cache"
    finally:
        if before is None:
            os.environ.pop(MOMENT_CACHE_ENV, None)
        else:
            os.environ[MOMENT_CACHE_ENV] = before


def compute(config: WorkflowConfig) -> None:
    """One run through its workflow (:func:`mesadyn.workflows.integrate.run` or
    :func:`mesadyn.workflows.train.run`), which writes ``config.out``."""
    if isinstance(config, train.Config):
        train.run(config)
    else:
        integrate.run(config)


def compute_gd_batch(configs: list[train.Config]) -> None:
    """GD runs that share one training set (equal :meth:`~mesadyn.workflows.train.Config.
    training_set`), stepped together by :func:`mesadyn.workflows.train.run_batch`: the numbers
    of one :func:`~mesadyn.workflows.train.run` per config, each written to its ``out``."""
    train.run_batch(configs)


def cost(config: WorkflowConfig) -> float:
    """A run's relative CPU cost, for the schedule only: :func:`mesadyn.workflows._cost.gd_cost`
    for GD, :data:`~mesadyn.workflows._cost.FLOW_COST` for an exact flow."""
    if isinstance(config, train.Config):
        return gd_cost(config.T, config.m, config.steps,
                       single_coordinate=config.family().single_coordinate)
    return float(FLOW_COST)


def _quiet_interrupt() -> None:
    """A worker's initializer: Ctrl-C (SIGINT, sent to the whole process group) ends the worker
    at once and silently — the parent reports the interrupt, once; a worker that raised
    KeyboardInterrupt while waiting for a task would print a traceback of its own.  Its run
    file is written atomically, so at most a temporary file is left (cleaned at the next run)."""
    import signal

    signal.signal(signal.SIGINT, lambda _signum, _frame: os._exit(130))


def _run_in_worker(config: WorkflowConfig) -> float:
    """One run (:func:`compute`) in a worker process of :meth:`Context.compute_parallel`, with
    one torch thread (the workers already fill the cores); its wall time."""
    import torch

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    compute(config)
    return time.perf_counter() - t0


# ---- the run context -------------------------------------------------------------------
@dataclass
class Context:
    """What a claim or a figure needs: the output folder, the settings, the runs.

    ``device`` is where GD steps (a resolved device, :func:`mesadyn.device.resolve_device`);
    the exact flows run on the CPU.  ``failed`` maps a run (or figure) that could not be
    computed to its error; ``repaired`` maps a file that could not be read (and was
    recomputed) to the reason.
    """

    out: Path
    quick: bool
    seed: int
    device: str = "cpu"
    failed: dict[str, str] = field(default_factory=dict)
    repaired: dict[str, str] = field(default_factory=dict)
    _configs: dict[Run, WorkflowConfig] = field(default_factory=dict, repr=False)
    _cache: dict[str, xr.Dataset] = field(default_factory=dict, repr=False)

    def _bare(self, run: Run, out: str | None = None) -> WorkflowConfig:
        if isinstance(run, GDRun):
            return run.workflow_config(self.seed, self.device, out)
        return run.workflow_config(self.seed, out)

    def config(self, run: Run) -> WorkflowConfig:
        """The run's workflow ``Config``, writing ``OUT/runs/<name>-<config_hash>.nc``."""
        hit = self._configs.get(run)
        if hit is None:
            name = f"{run.name}-{self._bare(run).config_hash()}.nc"
            hit = self._configs[run] = self._bare(run, str(self.out / "runs" / name))
        return hit

    def run_path(self, run: Run) -> Path:
        """The run file of ``run`` (:meth:`config`'s ``out``)."""
        return Path(str(self.config(run).out))

    def has(self, run: Run) -> bool:
        """Whether the run's file is on disk (it is checked when it is loaded)."""
        return self.run_path(run).is_file()

    def _stored(self, run: Run) -> xr.Dataset | None:
        """The run's file when it holds this run (:func:`~mesadyn.workflows.stored_run`);
        one that cannot be read or holds another run is reported in :attr:`repaired` and
        removed (``None``)."""
        path = self.run_path(run)
        try:
            return stored_run(path, self.config(run))
        except MesadynError as exc:
            self.repaired[str(path.relative_to(self.out))] = str(exc)
            path.unlink(missing_ok=True)
            return None

    def load(self, run: Run) -> xr.Dataset:
        """The run's dataset: from its run file if there, else computed now (:func:`compute`).

        ## Raises
        `MesadynError`: the run failed before (:attr:`failed`) or wrote no run file; or what
        its workflow raises.
        """
        path = self.run_path(run)
        key = str(path)
        if key in self._cache:
            return self._cache[key]
        if run.name in self.failed:
            raise MesadynError(f"run {run.name} failed: {self.failed[run.name]}")
        ds = self._stored(run)
        if ds is None:
            compute(self.config(run))
            ds = stored_run(path, self.config(run))
            if ds is None:
                raise MesadynError(f"run {run.name} wrote no run file {key!r}")
        self._cache[key] = ds
        return ds

    def compute_batch(self, runs: list[GDRun]) -> None:
        """Compute the GD runs of one training set that are not on disk yet, together
        (:func:`compute_gd_batch`).  A batch that raises marks each of its runs failed
        (:attr:`failed`)."""
        todo = [r for r in runs if not self.has(r) and r.name not in self.failed]
        if not todo:
            return
        configs = [self.config(r) for r in todo]
        try:
            compute_gd_batch([c for c in configs if isinstance(c, train.Config)])
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - recorded; dependent claims show ERROR
            for r in todo:
                self.failed[r.name] = f"{type(exc).__name__}: {exc}"

    def compute_parallel(self, runs: list[Run], jobs: int,
                         done: Callable[[Run], None] | None = None) -> None:
        """Compute the runs not on disk yet in ``jobs`` worker processes (one torch thread
        each), one run per task, the costliest first (:func:`cost`, longest-processing-time
        order, so the workers end together); each worker writes its run file, and ``done`` is
        called with each run as it ends.  The runs are independent, so the workers never wait
        for each other (threads inside one small-matrix GD step scale worse).  GD runs that
        share a training set each build it: a second or two against minutes of steps, and
        each run's numbers are those of :func:`mesadyn.workflows.train.run` (tested), as in a
        batch.  A run that raises is marked failed (:attr:`failed`); with ``jobs`` <= 1
        nothing is done here."""
        import concurrent.futures as cf
        import multiprocessing as mp

        todo = sorted((r for r in runs if not self.has(r) and r.name not in self.failed),
                      key=lambda r: cost(self.config(r)), reverse=True)
        if jobs <= 1 or not todo:
            return
        workers = min(jobs, len(todo))
        # spawn, not fork: a forked child of a process that ran OpenMP regions can hang
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                    initializer=_quiet_interrupt) as pool:
            futures = {pool.submit(_run_in_worker, self.config(r)): r for r in todo}
            for fut in cf.as_completed(futures):
                r = futures[fut]
                try:
                    fut.result()
                except (KeyboardInterrupt, SystemExit):
                    raise
                except Exception as exc:  # noqa: BLE001 - recorded; claims show ERROR
                    self.failed[r.name] = f"{type(exc).__name__}: {exc}"
                if done is not None:
                    done(r)

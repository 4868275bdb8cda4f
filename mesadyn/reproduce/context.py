"""What the claims, figures and report of ``mesadyn reproduce`` share: computing one run, and
the :class:`Context` that finds a run on disk or computes it.

The modules of this package depend on each other one way only::

    studies -> context -> claims -> figures -> report -> runner

Layout of ``OUT``::

    runs/<run>-<hash>.nc        one GD run or exact flow (netCDF, provenance, atomic)
    claims/<claim>-<hash>.json  one claim's rows (atomic)
    figures/<study>.png         the figures (atomic)
    report.md, report.html      the report (atomic); results.json, every number in it

A file name carries a hash of its configuration, the seed, the package version and
:data:`SCHEMA`, so a changed configuration or version recomputes and a re-run after an
interruption continues where it stopped.  A run file that cannot be read is reported
(:attr:`Context.repaired`) and recomputed.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..errors import MesadynError
from ..field import Field, FieldSpec, make_field
from ..io import load_run, save_run, to_json, version
from ..process import Family
from ..reduced import ReducedSystem
from .studies import FlowRun, GDRun

if TYPE_CHECKING:
    import xarray as xr

#: Version of the on-disk layout; part of every file's hash.  2: full flows by
#: :func:`mesadyn.flow.default_solver` (LSODA) instead of dopri5.
SCHEMA = 2
Run = GDRun | FlowRun
#: Test context lengths of the in-context panels (Proposition 4.1, Theorem 4.2).
T_TE = (3, 5, 10, 20, 50, 100, 200)
#: Tolerances of the full flows (the flow tolerances of the claims refer to these).
FLOW_RTOL, FLOW_ATOL = 1e-10, 1e-12
#: Flows settle to ``|ab − ab*| <= SETTLE_REL · ab*`` (closed form), then run 3× that long.
SETTLE_REL = 1e-9


def config_hash(config: dict[str, Any], seed: int | None) -> str:
    """12 hex digits of SHA-256 over the configuration, seed, version and schema."""
    key = to_json({"config": config, "seed": seed, "version": version(), "schema": SCHEMA})
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def family_of(name: str, param: float | None, d: int) -> Family:
    """The process family of a run: σ for gaussian, c for sparse, no parameter otherwise."""
    from ..process import family

    if name == "gaussian":
        return family(name, d, sigma=float(param))  # type: ignore[arg-type]
    if name == "sparse":
        return family(name, d, scale=float(param))  # type: ignore[arg-type]
    return family(name, d)


def theta0_of(init: tuple[Any, ...], d: int, seed: int) -> torch.Tensor:
    """θ_0 of a run: Assumption 3.1 ``("diagonal", a0, b0)`` or ``("gaussian", σ_w)``."""
    from ..model import diagonal_init, gaussian_init

    if init[0] == "diagonal":
        return diagonal_init(d, float(init[1]), float(init[2]))
    if init[0] == "gaussian":
        return gaussian_init(d, float(init[1]), seed)
    raise MesadynError(f"unknown init {init!r}")


def exact_field(fam: Family, T: int, out: Path | None = None) -> Field:
    """The exact field (:func:`mesadyn.field.make_field`), its moment cache in ``OUT/cache``
    (self-contained output) when ``out`` is given."""
    return make_field(FieldSpec("exact", fam, T),
                      cache_dir=None if out is None else Path(out) / "cache")


def settle_time(fam: Family, T: int, a0: float, b0: float, rel: float = SETTLE_REL) -> float:
    """Reduced-flow time (Lemma 5.2) until ``|ab − ab*| <= rel·ab*``, from the closed form
    (:meth:`ReducedSystem.settle_time`)."""
    return ReducedSystem.from_family(fam, T).settle_time(a0, b0, rel, measure="ab")


def flow_t_end(run: FlowRun) -> float:
    """Integration horizon: 3× the reduced settle time (Theorem 4.3 system for ones), at least
    ``1/c2`` (a flow starting on the minimum still gets a non-empty horizon); ×20 for ones
    without the mask, whose off-diagonal directions are slower (Proposition 4.2)."""
    from ..theory import constants

    fam = family_of(run.family, run.param, run.d)
    a0, b0 = float(run.init[1]), float(run.init[2])
    t_end = max(3.0 * settle_time(fam, run.T, a0, b0), 1.0 / constants(fam, run.T).c2)
    if run.family == "ones" and run.mask == "none":
        t_end *= 20.0
    return t_end


# ---- computing one run ---------------------------------------------------------------
def resolve_device(name: str) -> str:
    """The torch device of the GD runs: ``auto`` (CUDA when available, else the CPU), ``cpu``
    or ``cuda``.  The exact flows run on the CPU (the exact field's closed forms are numpy).

    ## Raises
    `MesadynError`: an unknown name, or ``cuda`` where CUDA is not available.
    """
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise MesadynError(f"unknown device {name!r}; choose auto, cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise MesadynError("device 'cuda' requested but CUDA is not available here")
    return name


def batch_key(run: GDRun) -> tuple[Any, ...]:
    """What GD runs must share to be stepped together on one training set
    (:func:`mesadyn.train.train_batch`): everything but the init."""
    return (run.family, run.param, run.T, run.m, run.steps, run.eval_every, run.mask, run.d)


def compute_gd(run: GDRun, seed: int, device: str = "cpu") -> xr.Dataset:
    """The paper's GD (:func:`mesadyn.train.train`) plus the in-context curve of its end point."""
    (ds,) = compute_gd_batch([run], seed, device)
    return ds


def compute_gd_batch(runs: list[GDRun], seed: int, device: str = "cpu") -> list[xr.Dataset]:
    """GD runs that share a training set (equal :func:`batch_key`), stepped together by
    :func:`mesadyn.train.train_batch`: the same numbers as one :func:`mesadyn.train.train` call
    per run (tested bit for bit), with the draws, prefix Grams and test sets built once.

    ## Returns
    One dataset per run, in order: the GD trace plus the in-context curve (Proposition 4.1,
    Theorem 4.2) of the run's end point on a fresh test set of 2 000 draws.  ``device``
    (a resolved torch device name) is where GD steps; the draws are made there from the seed.

    ## Raises
    `MesadynError`: the runs do not share one :func:`batch_key`.
    """
    from ..analysis.incontext import context_curve, draw_test_set
    from ..train import train_batch

    if not runs or len({batch_key(r) for r in runs}) != 1:
        raise MesadynError("compute_gd_batch needs GD runs that share one training set")
    r0 = runs[0]
    fam = family_of(r0.family, r0.param, r0.d)
    results = train_batch(fam, r0.T, [theta0_of(r.init, r.d, seed) for r in runs], m=r0.m,
                          steps=r0.steps, seed=seed, m_test=max(2000, min(r0.m, 10_000)),
                          mask=r0.mask, eval_every=r0.eval_every, device=device)
    x1, lam = draw_test_set(fam, 2000, seed + 7919)
    out = []
    for res in results:
        ds = res.to_dataset()
        curve = context_curve(torch.as_tensor(res.final_theta), x1, lam, T_TE)
        ds = ds.assign_coords(T_te=np.asarray(T_TE))
        for k in ("mse", "mse_se", "baseline", "ratio", "ratio_se"):
            ds[f"ctx_{k}"] = ("T_te", np.asarray(getattr(curve, k), dtype=np.float64))
        out.append(ds)
    return out


#: A flow's cost in :func:`run_cost`'s units: at most about two CPU seconds (0.4–2 measured),
#: some fourteen GD steps at the paper's m = 10⁴, T = 100 (0.13–0.15 CPU-s each with the fused
#: kernel, ``benchmarks/bench_gd_step.py``).
FLOW_COST = 14 * 10_000 * 100


#: A sparse sequence's cost in :func:`run_cost`'s units (a dense one costs T): its closed sum
#: over t (:class:`mesadyn.model.ARBatch`) makes a GD step at d = 5, T = 100, m = 10⁴ take 0.029
#: CPU-s against 0.125 for gaussian draws through the fused kernel, i.e. ≈ 23/100.
SPARSE_SEQUENCE_COST = 23


def run_cost(run: Run) -> float:
    """A run's relative CPU cost, for scheduling only (never for results): ``(steps + 1)·m·T``
    for GD (:data:`SPARSE_SEQUENCE_COST` in place of T where the family's draws have one nonzero
    entry, :attr:`~mesadyn.process.Family.single_coordinate`: Example 4.1's sparse), and
    :data:`FLOW_COST` for a flow."""
    if isinstance(run, FlowRun):
        return FLOW_COST
    single = family_of(run.family, run.param, run.d).single_coordinate
    per_sequence = SPARSE_SEQUENCE_COST if single else run.T
    return (run.steps + 1) * run.m * per_sequence


def _run_in_worker(run: Run, seed: int, device: str,
                   out: Path) -> tuple[xr.Dataset, float]:
    """One run (:func:`compute_gd` or :func:`compute_flow`) in a worker process of
    :meth:`Context.compute_parallel`, with one torch thread (the workers already fill the
    cores), and its wall time."""
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    ds = compute_gd(run, seed, device) if isinstance(run, GDRun) else compute_flow(run, seed, out)
    return ds, time.perf_counter() - t0


def compute_flow(run: FlowRun, seed: int, out: Path | None = None) -> xr.Dataset:
    """The exact gradient flow (all 18d² parameters) to :func:`flow_t_end`, by the full-flow
    solver of :func:`mesadyn.flow.default_solver`."""
    from ..flow import default_solver, integrate

    fam = family_of(run.family, run.param, run.d)
    t_end = flow_t_end(run)
    res = integrate(exact_field(fam, run.T, out), theta0_of(run.init, run.d, seed),
                    t_end=t_end, solver=default_solver(reduced=False), rtol=FLOW_RTOL,
                    atol=FLOW_ATOL, n_save=400, mask=run.mask)
    ds = res.to_dataset()
    ds.attrs["t_end"] = t_end
    ds.attrs["status"] = str(res.status)
    return ds


# ---- the run context -------------------------------------------------------------------
@dataclass
class Context:
    """What a claim or a figure needs: the output folder, the settings, the runs.

    ``failed`` maps a run (or figure) that could not be computed to its error; ``repaired``
    maps a file that could not be read (and was recomputed) to the reason.
    """

    out: Path
    quick: bool
    seed: int
    device: str = "cpu"  # where GD runs (resolved by resolve_device)
    tick: Callable[[str], None] = lambda _s: None
    _cache: dict[str, xr.Dataset] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    repaired: dict[str, str] = field(default_factory=dict)

    def run_path(self, run: Run) -> Path:
        seed = self.seed if isinstance(run, GDRun) or run.init[0] == "gaussian" else None
        return self.out / "runs" / f"{run.name}-{config_hash(run.config(), seed)}.nc"

    def has(self, run: Run) -> bool:
        return self.run_path(run).is_file()

    def load(self, run: Run) -> xr.Dataset:
        """The run's dataset: from disk if done, else computed now and saved atomically."""
        path = self.run_path(run)
        key = str(path)
        if key in self._cache:
            return self._cache[key]
        if run.name in self.failed:
            raise MesadynError(f"run {run.name} failed: {self.failed[run.name]}")
        if path.is_file():
            try:
                ds = load_run(path, kind=f"reproduce-{run.config()['kind']}")
                self._cache[key] = ds
                return ds
            except MesadynError as exc:
                self.repaired[str(path.relative_to(self.out))] = str(exc)
                path.unlink(missing_ok=True)  # unreadable: recompute
        self.tick(f"{run.name}")
        t0 = time.perf_counter()
        if isinstance(run, GDRun):
            ds = compute_gd(run, self.seed, self.device)
        else:
            ds = compute_flow(run, self.seed, self.out)
        return self.store(run, ds, time.perf_counter() - t0)

    def store(self, run: Run, ds: xr.Dataset, wall: float) -> xr.Dataset:
        """Save a computed run atomically (its file name by :meth:`run_path`) and keep it."""
        path = self.run_path(run)
        ds.attrs["reproduce_wall_s"] = wall
        self.timings[run.name] = wall
        save_run(ds, path, kind=f"reproduce-{run.config()['kind']}", config=run.config(),
                 seed=self.seed)
        ds = load_run(path)
        self._cache[str(path)] = ds
        return ds

    def compute_batch(self, runs: list[GDRun]) -> None:
        """Compute the GD runs of one training set that are not on disk yet, together
        (:func:`compute_gd_batch`), and store each as soon as the batch ends.  A batch that
        raises marks each of its runs failed (:attr:`failed`)."""
        todo = [r for r in runs if not self.has(r) and r.name not in self.failed]
        if not todo:
            return
        self.tick(f"{todo[0].name} (+{len(todo) - 1} sharing its training set)")
        t0 = time.perf_counter()
        try:
            datasets = compute_gd_batch(todo, self.seed, self.device)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - recorded; dependent claims show ERROR
            for r in todo:
                self.failed[r.name] = f"{type(exc).__name__}: {exc}"
            return
        wall = (time.perf_counter() - t0) / len(todo)
        for r, ds in zip(todo, datasets, strict=True):
            self.store(r, ds, wall)

    def compute_parallel(self, runs: list[Run], jobs: int) -> None:
        """Compute the runs not on disk yet in ``jobs`` worker processes (one torch thread
        each), one run per task, the costliest first (:func:`run_cost`, longest-processing-time
        order, so the workers end together), storing each run as it ends.  The runs are
        independent, so the workers never wait for each other (threads inside one
        small-matrix GD step scale worse).  GD runs that share a training set each build it:
        a second or two against minutes of steps, and each run's numbers are those of
        :func:`mesadyn.train.train` (tested), as in a batch.  A run that raises is marked
        failed (:attr:`failed`); with ``jobs`` <= 1 nothing is done here."""
        import concurrent.futures as cf
        import multiprocessing as mp

        todo = sorted((r for r in runs if not self.has(r) and r.name not in self.failed),
                      key=run_cost, reverse=True)
        if jobs <= 1 or not todo:
            return
        workers = min(jobs, len(todo))
        self.tick(f"{len(todo)} runs in {workers} processes")
        # spawn, not fork: a forked child of a process that ran OpenMP regions can hang
        with cf.ProcessPoolExecutor(max_workers=workers,
                                    mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(_run_in_worker, r, self.seed, self.device, self.out): r
                       for r in todo}
            for fut in cf.as_completed(futures):
                r = futures[fut]
                try:
                    ds, wall = fut.result()
                except (KeyboardInterrupt, SystemExit):
                    raise
                except Exception as exc:  # noqa: BLE001 - recorded; claims show ERROR
                    self.failed[r.name] = f"{type(exc).__name__}: {exc}"
                    continue
                self.store(r, ds, wall)
                self.tick(r.name)

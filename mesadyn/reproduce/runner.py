"""Run the studies and claims of ``mesadyn reproduce``: resumable and atomic.

:func:`plan` lists what a run does, in order; :func:`run` does it, calling its ``progress``
callback (:data:`mesadyn.progress.ProgressCallback`) with the number of tasks done (the CLI
draws the bar).  The output folder's layout and the resumption rule are in
:mod:`mesadyn.reproduce.context`.  Every file is written to a temporary name and renamed, so
Ctrl-C never leaves a half-written file; temporary files left by a writer that was killed
outright (SIGKILL) are removed on the next run.  A claim record (``claims/*.json``) or a run
file that cannot be read is reported (:attr:`ReproduceResult.repaired`) and recomputed, never
fatal.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..device import resolve_device
from ..errors import MesadynError, check_int
from ..io import atomic_write_text, check_writable_dir, clean_stale_tmp, to_json
from ..progress import ProgressCallback
from ..workflows import check_seed, train
from .claims import CLAIMS
from .context import Context, Run, moment_cache
from .figures import draw_study
from .outcome import CLAIM_COLUMNS, ReproduceResult
from .report import write_report
from .rows import ClaimStatus, claim_hash, claim_hash_config, run_claim
from .studies import GDRun, Study, all_studies

#: Sub-folders of ``OUT`` whose stale temporary files are removed at the start of a run.
SUBFOLDERS = ("runs", "claims", "figures")


#: A training set of at least this many (sequence, t) pairs, m·T, makes :func:`default_jobs`
#: use worker processes: minutes of GD each, against a worker's few seconds of start-up.
PARALLEL_MIN_ROWS = 200_000


def default_jobs(batches: list[list[GDRun]], device: str) -> int:
    """Worker processes for the runs still to compute, given the GD runs among them grouped
    by training set: the cores (``os.cpu_count()``, at most one per GD run) on the CPU when
    at least two GD runs are there and one training set is large
    (``m·T >= PARALLEL_MIN_ROWS``; GD steps are ~90% of a full run), else 1 (a quick run's
    seconds of work, or one GPU)."""
    import os

    n_runs = sum(len(b) for b in batches)
    if device != "cpu" or n_runs < 2:
        return 1
    if max(b[0].m * b[0].T for b in batches) < PARALLEL_MIN_ROWS:
        return 1
    return max(1, min(os.cpu_count() or 1, n_runs))


# ---- selection ---------------------------------------------------------------------------
def select(only: str | None, quick: bool,
           m: int | None = None) -> tuple[list[Study], list[str]]:
    """The studies and claim ids selected by ``--only`` (a claim id or a study name)."""
    studies = all_studies(quick, m)
    if only is None:
        return list(studies.values()), list(CLAIMS)
    if only in CLAIMS:
        return [], [only]
    if only in studies:
        return [studies[only]], []
    if only in all_studies(False):
        raise MesadynError(f"study {only!r} is not part of --quick; run it without --quick")
    known = ", ".join([*CLAIMS, *studies])
    raise MesadynError(f"unknown --only {only!r}; choose one of: {known}")


@dataclass(frozen=True)
class Plan:
    """What :func:`run` does, in order: the ``runs`` of the selected ``studies`` and claims
    (the exact flows first, then GD by training-set size, so early results appear early), the
    claims (``claim_ids``), one figure per study, and the report."""

    studies: tuple[Study, ...]
    claim_ids: tuple[str, ...]
    runs: tuple[Run, ...]

    @property
    def tasks(self) -> list[str]:
        """One label per task, in the order :func:`run` counts them done."""
        return [*(r.name for r in self.runs), *self.claim_ids,
                *(f"figure {st.name}" for st in self.studies), "report"]


def plan(*, quick: bool = False, only: str | None = None, m: int | None = None) -> Plan:
    """The tasks of ``run(out, quick=quick, only=only, m=m)`` (see :func:`run`).

    ## Raises
    `MesadynError`: an unknown ``only``, or an ``m`` below 2.
    """
    if m is not None:
        m = check_int("m", m, 2)
    studies, claim_ids = select(only, quick, m)
    runs: dict[str, Run] = {}
    for st in studies:
        for r in st.runs():
            runs.setdefault(r.name, r)
    for cid in claim_ids:
        for r in CLAIMS[cid].runs(quick):
            runs.setdefault(r.name, r)
    order = sorted(runs.values(), key=lambda r: (isinstance(r, GDRun), getattr(r, "m", 0) * r.T))
    return Plan(tuple(studies), tuple(claim_ids), tuple(order))


def read_claim_record(path: Path) -> list[dict[str, Any]]:
    """The rows of a claim record written by :func:`run`.

    ## Raises
    `MesadynError`: the file is not JSON, or not ``{"rows": [rows with every claim column
    and a known status]}`` (then it is recomputed).
    """
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MesadynError(f"unreadable claim record: {type(exc).__name__}") from None
    rows = obj.get("rows") if isinstance(obj, dict) else None
    if not isinstance(rows, list) or not rows or not all(
            isinstance(r, dict) and set(CLAIM_COLUMNS) <= set(r)
            and r["status"] in set(ClaimStatus) for r in rows):
        raise MesadynError("malformed claim record (no valid 'rows')")
    return rows


def run(out: str | Path, *, quick: bool = False, seed: int = 1, only: str | None = None,
        m: int | None = None, device: str | None = "cpu", jobs: int | None = None,
        progress: ProgressCallback | None = None) -> ReproduceResult:
    """Run the selected studies and claims into ``out`` and write the report.

    ## Arguments
    - `out`: the output folder (created; checked writable before any work).
    - `quick`: the small configuration of :func:`~mesadyn.reproduce.studies.all_studies`.
    - `seed`: the seed of every random draw; `only`: one claim id or study name.
    - `m`: overrides the training-set size of every GD run (the paper's is 10 000).
    - `device`: where the GD runs step (:func:`mesadyn.device.resolve_device`: ``cpu``, the
      default, ``auto``, ``cuda``); the exact flows run on the CPU.
    - `jobs`: worker processes computing runs at once (:func:`default_jobs` when None: every
      core for large training sets on the CPU, else 1; one process steps the GD runs of a
      training set together).  Each worker steps with one torch thread, so its numbers may
      differ from a multi-threaded one-process run's in the last digits.
    - `progress`: called with the number of tasks done (of ``len(plan(...).tasks)``; 0 once
      the options are checked).

    ## Returns
    The :class:`ReproduceResult`; ``result.ok`` (``all_pass``) is False when a claim row did
    not PASS or a run or figure failed.

    ## Raises
    `MesadynError`: bad options or an unusable output folder (before any work).
    """
    seed = check_seed(seed)  # the generators' range, as every command: before any work
    todo_plan = plan(quick=quick, only=only, m=m)
    device = resolve_device(device)
    if jobs is not None:
        jobs = check_int("jobs", jobs, 1)
    out = check_writable_dir(out)
    (out / "runs").mkdir(parents=True, exist_ok=True)  # the workflows write their run files
    cleaned = [str(p.relative_to(out)) for sub in ("", *SUBFOLDERS)
               for p in clean_stale_tmp(out / sub)]
    t0 = time.perf_counter()
    ctx = Context(out, quick, seed, device)
    counted: set[str] = set()

    def advance(task: str) -> None:
        counted.add(task)
        if progress is not None:
            progress(float(len(counted)))

    if progress is not None:
        progress(0.0)
    studies, claim_ids, order = todo_plan.studies, todo_plan.claim_ids, todo_plan.runs
    computed: list[str] = []
    with moment_cache(out):
        # the GD runs that share a training set are computed together (one batched run)
        batches: dict[tuple[Any, ...], list[GDRun]] = {}
        for r in order:
            if isinstance(r, GDRun):
                batches.setdefault(_training_set(ctx, r), []).append(r)
        missing = {r.name for r in order if not ctx.has(r)}
        todo = [b for b in batches.values() if any(r.name in missing for r in b)]
        n_jobs = default_jobs(todo, device) if jobs is None else jobs
        if n_jobs > 1:  # every missing run first, in parallel processes
            ctx.compute_parallel([r for r in order if r.name in missing], n_jobs,
                                 done=lambda r: advance(r.name))
        for r in order:
            if r.name in missing:
                computed.append(r.name)
                if isinstance(r, GDRun):
                    ctx.compute_batch(batches[_training_set(ctx, r)])  # no-op once done
            try:
                ctx.load(r)
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - recorded; dependent claims show ERROR
                ctx.failed[r.name] = f"{type(exc).__name__}: {exc}"
            advance(r.name)
        claim_rows: list[dict[str, Any]] = []
        for cid in claim_ids:
            claim_rows += _claim(cid, ctx, computed)
            advance(cid)
        figures: list[str] = []
        for st in studies:
            figures += _figures(st, ctx)
            advance(f"figure {st.name}")
        result = ReproduceResult.of(out, claim_rows, figures, len(order), computed,
                                    time.perf_counter() - t0, ctx.failed, ctx.repaired,
                                    cleaned)
        write_report(result, list(studies), ctx)  # Table 1 evaluates exact Hessians
    advance("report")
    return result


def _training_set(ctx: Context, run: GDRun) -> tuple[Any, ...]:
    """The training set of a GD run (:meth:`mesadyn.workflows.train.Config.training_set`)."""
    config = ctx.config(run)
    assert isinstance(config, train.Config)
    return config.training_set()


def _claim(cid: str, ctx: Context, computed: list[str]) -> list[dict[str, Any]]:
    """The rows of claim ``cid``: from its record if readable, else computed and recorded."""
    spec = CLAIMS[cid]
    cfg = claim_hash_config(spec, ctx)
    path = ctx.out / "claims" / f"{cid}-{claim_hash(cfg)}.json"
    rows = None
    if path.is_file():
        try:
            rows = read_claim_record(path)
        except MesadynError as exc:
            ctx.repaired[str(path.relative_to(ctx.out))] = str(exc)
        if rows is not None and any(r["status"] == ClaimStatus.ERROR for r in rows):
            rows = None  # could not be computed last time: try again, never reuse an ERROR
    if rows is None:
        computed.append(cid)
        rows = run_claim(spec, ctx)
        atomic_write_text(path, to_json({"config": cfg, "rows": rows}))
    return rows


def _figures(st: Study, ctx: Context) -> list[str]:
    """The study's figure files (none when it failed: recorded in :attr:`Context.failed`)."""
    try:
        return draw_study(st, ctx)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - recorded, shown in the report
        ctx.failed[f"figure {st.name}"] = f"{type(exc).__name__}: {exc}"
        return []

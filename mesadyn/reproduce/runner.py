"""Run the studies and claims of ``mesadyn reproduce``: resumable, atomic, with a progress bar.

The output folder's layout and the resumption rule are in :mod:`mesadyn.reproduce.context`.
Every file is written to a temporary name and renamed, so Ctrl-C never leaves a half-written
file; temporary files left by a writer that was killed outright (SIGKILL) are removed on the
next run.  A claim record (``claims/*.json``) or a run file that cannot be read is reported
(:attr:`Outcome.repaired`) and recomputed, never fatal.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..errors import MesadynError, check_int
from ..io import atomic_write_text, check_writable_dir, clean_stale_tmp, to_json
from .claims import CLAIMS, ClaimStatus, claim_hash_config, run_claim
from .context import Context, Run, batch_key, config_hash, resolve_device
from .figures import draw_study
from .outcome import CLAIM_COLUMNS, Outcome
from .report import write_report
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
        m: int | None = None, show_progress: bool = True, device: str = "auto",
        jobs: int | None = None) -> Outcome:
    """Run the selected studies and claims into ``out`` and write the report.

    ## Arguments
    - `out`: the output folder (created; checked writable before any work).
    - `quick`: the small configuration of :func:`~mesadyn.reproduce.studies.all_studies`.
    - `seed`: the seed of every random draw; `only`: one claim id or study name.
    - `m`: overrides the training-set size of every GD run (the paper's is 10 000).
    - `show_progress`: draw a progress bar on stderr.
    - `device`: where the GD runs step (``auto``, ``cpu``, ``cuda``); the flows use the CPU.
    - `jobs`: worker processes computing runs at once (:func:`default_jobs` when None: every
      core for large training sets on the CPU, else 1; one process steps the GD runs of a
      training set together).  Each worker steps with one torch thread, so its numbers may
      differ from a multi-threaded one-process run's in the last digits.

    ## Returns
    The :class:`Outcome`; ``outcome.all_pass`` is False when a claim row did not PASS.

    ## Raises
    `MesadynError`: bad options or an unusable output folder (before any work).
    """
    from ..progress import progress

    seed = check_int("seed", seed, 0)
    if m is not None:
        m = check_int("m", m, 2)
    studies, claim_ids = select(only, quick, m)
    device = resolve_device(device)
    if jobs is not None:
        jobs = check_int("jobs", jobs, 1)
    out = check_writable_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    cleaned = [str(p.relative_to(out)) for sub in ("", *SUBFOLDERS)
               for p in clean_stale_tmp(out / sub)]
    t0 = time.perf_counter()
    ctx = Context(out, quick, seed, device)
    runs: dict[str, Run] = {}
    for st in studies:
        for r in st.runs():
            runs.setdefault(r.name, r)
    for cid in claim_ids:
        for r in CLAIMS[cid].runs(quick):
            runs.setdefault(r.name, r)
    computed: list[str] = []
    n_tasks = len(runs) + len(claim_ids) + len(studies) + 1
    with progress(show_progress) as bar:
        task = bar.add_task("reproduce", total=n_tasks)

        def tick(label: str) -> None:
            bar.update(task, description=f"reproduce: {label}")

        ctx.tick = tick
        # cheap (flow) runs first, then GD ordered by size, so early results appear early;
        # the GD runs that share a training set are computed together (one batched run)
        order = sorted(runs.values(), key=lambda r: (isinstance(r, GDRun),
                                                      getattr(r, "m", 0) * r.T))
        batches: dict[tuple[Any, ...], list[GDRun]] = {}
        for r in order:
            if isinstance(r, GDRun):
                batches.setdefault(batch_key(r), []).append(r)
        missing = {r.name for r in order if not ctx.has(r)}
        todo = [b for b in batches.values() if any(r.name in missing for r in b)]
        n_jobs = default_jobs(todo, device) if jobs is None else jobs
        if n_jobs > 1:  # every missing run first, in parallel processes
            ctx.compute_parallel([r for r in order if r.name in missing], n_jobs)
        for r in order:
            if r.name in missing:
                computed.append(r.name)
                if isinstance(r, GDRun):
                    ctx.compute_batch(batches[batch_key(r)])  # no-op once the batch is done
            try:
                ctx.load(r)
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - recorded; dependent claims show ERROR
                ctx.failed[r.name] = f"{type(exc).__name__}: {exc}"
            bar.advance(task)
        claim_rows = [row for cid in claim_ids for row in _claim(cid, ctx, computed, bar, task)]
        figures = _figures(studies, ctx, bar, task)
        tick("report")
        outcome = Outcome(out, claim_rows, figures, len(runs), computed,
                          time.perf_counter() - t0, dict(ctx.failed), dict(ctx.repaired),
                          cleaned)
        write_report(outcome, studies, ctx)
        bar.advance(task)
    return outcome


def _claim(cid: str, ctx: Context, computed: list[str], bar: Any,
           task: Any) -> list[dict[str, Any]]:
    """The rows of claim ``cid``: from its record if readable, else computed and recorded."""
    ctx.tick(cid)
    spec = CLAIMS[cid]
    cfg = claim_hash_config(spec, ctx)
    path = ctx.out / "claims" / f"{cid}-{config_hash(cfg, ctx.seed)}.json"
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
    bar.advance(task)
    return rows


def _figures(studies: list[Study], ctx: Context, bar: Any, task: Any) -> list[str]:
    figures: list[str] = []
    for st in studies:
        ctx.tick(f"figure {st.name}")
        try:
            figures.extend(draw_study(st, ctx))
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - recorded, shown in the report
            ctx.failed[f"figure {st.name}"] = f"{type(exc).__name__}: {exc}"
        bar.advance(task)
    return figures

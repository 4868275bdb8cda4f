"""``mesadyn reproduce``: options -> :func:`mesadyn.reproduce.run` -> a summary line or
``--json``.  A claim row that does not PASS (or a run that failed) exits 1, after the output
(the result's outcome, :func:`mesadyn.cli._common.finish`).

It takes ``--seed`` and ``--json`` of the common options; the process options (``--x1 --sigma
--scale --d --T``) do not apply: the paper's studies fix them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import Json, Seed, console, finish, messages, progress_callback

Quick = Annotated[bool, typer.Option("--quick", help="Small sizes for CI (under 2 minutes).")]
Out = Annotated[Path, typer.Option("--out", help="Output folder (runs, figures, report).")]
TrainM = Annotated[int | None, typer.Option(
    "--m", help="Training sequences of every GD run (paper: 10000; default: see docs).")]
Only = Annotated[str | None, typer.Option(
    "--only", help="One claim (thm4.1, cor4.1, ...) or one study (fig1, ...) only.")]

Device = Annotated[str, typer.Option(
    "--device", help="Where GD runs: cpu (the default), auto (CUDA if available) or cuda; "
    "the exact flows use the CPU.")]
Jobs = Annotated[int | None, typer.Option(
    "--jobs", help="Worker processes computing runs at once, one run per task, costliest "
    "first (default: every core when the training sets are large and GD runs on the CPU, "
    "else 1).")]


def reproduce(
    out: Out = Path("reproduce-out"),
    quick: Quick = False,
    only: Only = None,
    seed: Seed = 1,
    m: TrainM = None,
    device: Device = "cpu",
    jobs: Jobs = None,
    json: Json = False,
) -> None:
    """Re-derive the paper's results; write OUT/report.md and OUT/report.html.

    Finished runs are kept in OUT/runs and reused, so an interrupted run continues.
    """
    from ..reproduce import plan, run

    tasks = plan(quick=quick, only=only, m=m).tasks

    def describe(done: float) -> str:
        return f"reproduce: {tasks[min(int(done), len(tasks) - 1)]}"

    with progress_callback(not json, describe, total=len(tasks)) as bar:
        res = run(out, quick=quick, seed=seed, only=only, m=m, device=device, jobs=jobs,
                  progress=bar)
    for name, why in res.repaired.items():
        messages.print(f"mesadyn: recomputed {name} ({why})", markup=False)

    def render(_obj: dict[str, Any]) -> None:
        console.print(f"{res.message}; report: {res.out / 'report.md'} (and report.html)")

    finish(res, json=json, render=render)


def register(app: typer.Typer) -> None:
    app.command("reproduce")(reproduce)

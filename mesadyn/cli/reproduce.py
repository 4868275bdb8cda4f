"""``mesadyn reproduce``: options -> :func:`mesadyn.reproduce.run` -> a summary line or
``--json``.  A claim row that does not PASS (or a run that failed) exits 1, after the output.

It takes ``--seed`` and ``--json`` of the common options; the process options (``--x1 --sigma
--scale --d --T``) do not apply: the paper's studies fix them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import RunFailed
from ._common import Json, Seed, console, emit_json

Quick = Annotated[bool, typer.Option("--quick", help="Small sizes for CI (under 2 minutes).")]
Out = Annotated[Path, typer.Option("--out", help="Output folder (runs, figures, report).")]
TrainM = Annotated[int | None, typer.Option(
    "--m", help="Training sequences of every GD run (paper: 10000; default: see docs).")]
Only = Annotated[str | None, typer.Option(
    "--only", help="One claim (thm4.1, cor4.1, ...) or one study (fig1, ...) only.")]

Device = Annotated[str, typer.Option(
    "--device", help="Where GD runs: auto (CUDA if available), cpu or cuda; flows use the CPU.")]
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
    device: Device = "auto",
    jobs: Jobs = None,
    json: Json = False,
) -> None:
    """Re-derive the paper's results; write OUT/report.md and OUT/report.html.

    Finished runs are kept in OUT/runs and reused, so an interrupted run continues.
    """
    from ..reproduce import run

    res = run(out, quick=quick, seed=seed, only=only, m=m, show_progress=not json,
              device=device, jobs=jobs)
    for name, why in res.repaired.items():
        console.print(f"mesadyn: recomputed {name} ({why})")
    if json:
        emit_json(res.to_dict())
    else:
        n_pass = sum(c["status"] == "PASS" for c in res.claims)
        console.print(f"{n_pass}/{len(res.claims)} claim rows PASS; report: "
                      f"{res.out / 'report.md'} (and report.html)")
    if not res.all_pass:
        bad = res.not_passed
        what = [f"{len(bad)} claim(s) did not PASS: {', '.join(bad)}"] if bad else []
        what += [f"{len(res.failed)} run(s) or figure(s) failed"] if res.failed else []
        raise RunFailed("; ".join(what))


def register(app: typer.Typer) -> None:
    app.command("reproduce")(reproduce)

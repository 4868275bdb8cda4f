"""``mesadyn reproduce``: run every study of the paper and write a claim-by-claim report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import Json, Seed, console, emit_json

Quick = Annotated[bool, typer.Option("--quick", help="Small sizes for CI (under 2 minutes).")]
Out = Annotated[Path, typer.Option("--out", help="Output folder (runs, figures, report).")]
TrainM = Annotated[int | None, typer.Option(
    "--m", help="Training sequences of every GD run (paper: 10000; default: see docs).")]
Only = Annotated[str | None, typer.Option(
    "--only", help="One claim (thm4.1, cor4.1, ...) or one study (fig1, ...) only.")]


def compute(out: str | Path = "reproduce-out", quick: bool = False, only: str | None = None,
            seed: int = 1, m: int | None = None,
            show_progress: bool = False) -> dict[str, object]:
    """The JSON result of ``mesadyn reproduce`` (claims table, paths, timing)."""
    from ..reproduce.runner import run

    return run(out, quick=quick, seed=seed, only=only, m=m,
               show_progress=show_progress).summary()


def reproduce(
    out: Out = Path("reproduce-out"),
    quick: Quick = False,
    only: Only = None,
    seed: Seed = 1,
    m: TrainM = None,
    json: Json = False,
) -> None:
    """Re-derive the paper's results; write OUT/report.md and OUT/report.html.

    Finished runs are kept in OUT/runs and reused, so an interrupted run continues.
    """
    res = compute(out, quick=quick, only=only, seed=seed, m=m, show_progress=not json)
    if json:
        emit_json(res)
    else:
        n_pass = sum(c["status"] == "PASS" for c in res["claims"])  # type: ignore[union-attr]
        console.print(f"{n_pass}/{len(res['claims'])} claim rows PASS; report: "  # type: ignore[arg-type]
                      f"{Path(str(res['out'])) / 'report.md'} (and report.html)")
    if not res["all_pass"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("reproduce")(reproduce)

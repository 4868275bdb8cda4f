"""``mesadyn rerun FILE``: rebuild a run file's configuration from the file alone, run it again
and compare the numbers (:func:`mesadyn.workflows.rerun`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ._common import Json, console, finish, table

Path_ = Annotated[str, typer.Argument(help="A run file written by a mesadyn command (--out).")]
Out = Annotated[str | None, typer.Option("--out", help="Write the rerun's own run file here.")]
Rtol = Annotated[float, typer.Option(
    "--rtol", help="Relative tolerance of the comparison (results; solver-path counts and "
    "timings are reported, not compared).")]


Dev = Annotated[str | None, typer.Option(
    "--device", help="Rerun on this device (cpu, auto, cuda) instead of the recorded one.")]


def rerun(path: Path_, out: Out = None, rtol: Rtol = 1e-10, device: Dev = None,
          json: Json = False) -> None:
    """Rerun a run file from its own configuration and compare its numbers with the stored ones.

    Exit 0 when every number agrees within --rtol, 1 otherwise (the differences are listed).
    """
    from ..workflows import rerun as run

    res = run(path, out=out, rtol=rtol, device=device)

    def render(obj: dict[str, Any]) -> None:
        rows: list[tuple[str, Any]] = [("run file", res.path), ("workflow", res.kind),
                                       ("rtol", res.rtol), ("verdict", res.message)]
        rows += [(f"difference {i + 1}", d) for i, d in enumerate(res.differences[:20])]
        console.print(table(f"mesadyn rerun — {res.kind}", rows))

    finish(res, json=json, render=render)


def register(app: typer.Typer) -> None:
    app.command("rerun")(rerun)

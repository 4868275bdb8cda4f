"""Options and output helpers shared by every ``mesadyn`` command (the CLI contract).

Every command takes ``--x1 --sigma --scale --d --T --seed --json`` and the data models of
DESIGN.md §6: ``--mu --moments --mixture --radius --rotation --noise`` (defaults: the paper).
``--json`` prints exactly one JSON object on stdout; everything else (tables, progress bars)
goes to stderr or is suppressed, so scripts can parse stdout.  The work itself is done by
:mod:`mesadyn.workflows`; a command module only maps options onto a workflow's ``Config`` and
renders its ``Result``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..progress import ProgressCallback, progress

X1 = Annotated[
    str,
    typer.Option("--x1", help="Initial-token family: gaussian, sparse, ones, rademacher, uniform, "
                 "shifted (--mu, --sigma), moments (--moments), mixture (--mixture)."),
]
Sigma = Annotated[float, typer.Option("--sigma", help="σ of the gaussian family.")]
Scale = Annotated[float, typer.Option("--scale", help="c of the sparse family (Example 4.1).")]
Dim = Annotated[int, typer.Option("--d", help="Dimension d of the tokens.")]
Length = Annotated[int, typer.Option("--T", help="Training sequence length T (>= 3).")]
Seed = Annotated[int, typer.Option("--seed", help="Random seed.")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
A0 = Annotated[float, typer.Option("--a0", help="Diagonal init: W^KQ_32 = a0 I (Assumption 3.1).")]
B0 = Annotated[float, typer.Option("--b0", help="Diagonal init: W^PV_12 = b0 I (Assumption 3.1).")]
Init = Annotated[str, typer.Option("--init", help="Initialisation: diagonal or gaussian.")]
Mu = Annotated[float, typer.Option("--mu", help="Token mean μ of the shifted family: "
                                  "x_1 = μ·1_d + σ·g.")]
Moments = Annotated[str | None, typer.Option(
    "--moments", help="E[x^1..x^6] of the moments family: 'm1,...,m6', ';' between "
    "per-coordinate sequences.")]
Mixture = Annotated[str | None, typer.Option(
    "--mixture", help="Components of the mixture family, e.g. '0.3:ones,0.7:gaussian' or "
    "'0.5:gaussian(sigma=0.5),0.5:gaussian(sigma=2)'.")]
Radius = Annotated[float, typer.Option(
    "--radius", help="r of W = r·diag(λ): r < 1 contracting, r = 1 the paper.")]
Rotation = Annotated[str, typer.Option(
    "--rotation", help="W: diagonal (the paper), real (2x2 blocks, d even) or haar; real and "
    "haar are Monte-Carlo only.")]
Noise = Annotated[float, typer.Option(
    "--noise", help="Scale s of AR noise x_{t+1} = W x_t + ε_t (Monte-Carlo only).")]
SigmaW = Annotated[float, typer.Option("--sigma-w", help="σ_w of the gaussian initialisation.")]

#: Human-readable output goes to stderr so that ``--json`` stdout stays clean.
console = Console(stderr=True)


def emit_json(obj: dict[str, Any]) -> None:
    """Print exactly one JSON object on stdout."""
    from ..io import to_json

    sys.stdout.write(to_json(obj) + "\n")
    sys.stdout.flush()


def table(title: str, rows: list[tuple[str, Any]]) -> Table:
    """A two-column rich table of (quantity, value)."""
    t = Table(title=title, show_header=True, header_style="bold")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for k, v in rows:
        t.add_row(k, _fmt(v))
    return t


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.10g}"
    return str(v)


@contextmanager
def progress_callback(enabled: bool, describe: Callable[[float], str],
                      total: float | None = None) -> Iterator[ProgressCallback]:
    """A workflow progress callback drawing a bar on stderr from its first call on.

    The bar appears only once the work has started, so an error raised while a workflow checks
    its input prints that error alone.  ``describe(x)`` labels the bar at position ``x``; with
    a ``total`` the bar also shows ``x`` of ``total``.
    """
    with ExitStack() as stack:
        state: dict[str, Any] = {}

        def update(x: float) -> None:
            if not enabled:
                return
            if "bar" not in state:
                state["bar"] = stack.enter_context(progress(True))
                state["task"] = state["bar"].add_task(describe(x), total=total)
            state["bar"].update(state["task"], description=describe(x),
                                completed=x if total is not None else None)

        yield update


__all__ = ["A0", "B0", "X1", "Dim", "Init", "Json", "Length", "Mixture", "Moments", "Mu",
           "Noise", "Radius", "Rotation", "Scale", "Seed", "Sigma", "SigmaW", "console",
           "emit_json", "progress", "progress_callback", "table"]

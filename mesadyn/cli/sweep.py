"""``mesadyn sweep SPEC.toml --out DIR``: run a workflow over a grid of options on Dask.

Exit codes: the summary's outcome (:attr:`mesadyn.sweep.SweepResult.exit_code`): 0 every point
ok, 1 some point failed (the others are stored and merged); 2 a bad spec or option, an unusable
``--out``, or a sweep estimated to take more than a minute without ``--yes``; 130 interrupted
(finished points are stored; the same command resumes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import RunFailed
from ._common import Json, console, emit_json, messages, output_written, progress_callback

if TYPE_CHECKING:
    from ..sweep import SweepResult


def compute(spec: str, out: str, workers: int | None = None, scheduler: str | None = None,
            connect_timeout: float = 5.0, fmt: str = "netcdf", retry_failed: bool = True,
            prune_stale: bool = False, progress: bool = False,
            overrides: dict[str, Any] | None = None, allow_code: bool = False,
            yes: bool = False) -> SweepResult:
    """The summary of ``mesadyn sweep`` (the spec and ``--out`` are checked before work)."""
    from ..errors import check_positive
    from ..io import check_writable_dir
    from ..sweep import load_spec, run_sweep
    from ..sweep.runner import DEFAULT_BUDGET_S

    connect_timeout = check_positive("--connect-timeout", connect_timeout)
    check_writable_dir(out)
    parsed = load_spec(spec, overrides, allow_code=allow_code)
    with progress_callback(progress, lambda _x: f"sweep {parsed.command}",
                           total=parsed.size) as bar:
        result = run_sweep(parsed, out, workers=workers, scheduler=scheduler,
                           connect_timeout=connect_timeout, retry_failed=retry_failed,
                           prune_stale=prune_stale, fmt=fmt, progress=bar,
                           budget_s=None if yes else DEFAULT_BUDGET_S)
    return result


def _report(out: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title=f"mesadyn sweep — {out['out']}", show_header=True, header_style="bold")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    rows = [
        ("points", out["n_points"]),
        ("computed now", out["computed"]),
        ("already done (skipped)", out["skipped"]),
        ("failed", out["n_failed"]),
        ("stale (not merged)", out["n_stale"]),
        ("corrupt records (recomputed)", out["n_corrupt"]),
        ("scheduler", f"{out['scheduler']} ({out['workers']} workers)"),
        ("wall time [s]", f"{out['wall_s']:.3f}"),
        ("compute time of new points [s]", f"{out['compute_s']:.3f}"),
        ("dataset", out["dataset"]),
    ]
    for k, v in rows:
        t.add_row(k, str(v))
    console.print(t)
    if out["spec_changed"]:
        messages.print("[yellow]The spec changed since the last run in this folder.[/yellow]")
    for s in out["stale"]:
        messages.print(f"[yellow]stale[/yellow] {s['point']} ({s['hash']}): {s['reason']}")
    for f in out["failed"]:
        messages.print(f"[red]failed[/red] {f['point']} ({f['hash']}): {f['error']}")
    for c in out["corrupt"]:
        messages.print(f"[yellow]corrupt[/yellow] {c['file']}: {c['reason']} (recomputed)")


def sweep(
    spec: Annotated[str, typer.Argument(help="The sweep spec (TOML): workflow, options, axes.")],
    out: Annotated[str, typer.Option("--out", help="Output folder (resumable).")],
    workers: Annotated[
        int | None,
        typer.Option("--workers", help="Local Dask workers (default: all cores; 0: inline)."),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", help="Address of an existing Dask scheduler (tcp://H:P)."),
    ] = None,
    connect_timeout: Annotated[
        float, typer.Option("--connect-timeout", help="Seconds to wait for --scheduler.")
    ] = 5.0,
    fmt: Annotated[str, typer.Option("--format", help="Merged output: netcdf or zarr.")] = (
        "netcdf"
    ),
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed/--keep-failed", help="Re-run failed points.")
    ] = True,
    prune_stale: Annotated[
        bool, typer.Option("--prune-stale", help="Delete stored points the spec no longer has.")
    ] = False,
    x1: Annotated[str | None, typer.Option("--x1", help="Override the spec's x1.")] = None,
    sigma: Annotated[float | None, typer.Option("--sigma", help="Override sigma.")] = None,
    scale: Annotated[float | None, typer.Option("--scale", help="Override scale.")] = None,
    d: Annotated[int | None, typer.Option("--d", help="Override d.")] = None,
    T: Annotated[int | None, typer.Option("--T", help="Override T.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Override seed.")] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Go ahead even if the sweep is estimated to take "
                                         "more than a minute or has over 100 000 points.")
    ] = False,
    allow_code: Annotated[
        bool, typer.Option("--allow-code", help="DANGER: let the spec name any Python function "
                                                "(package.module:function) and run it. Only "
                                                "for specs you trust.")
    ] = False,
    json: Json = False,
) -> None:
    """Run a workflow over the grid of a TOML spec; merge into DIR/sweep.nc (see docs/sweep.md).

    Exits 1 when some point failed (the others are stored and merged), 130 when interrupted
    (finished points are kept: the same command resumes).
    """
    given = {"x1": x1, "sigma": sigma, "scale": scale, "d": d, "T": T, "seed": seed}
    overrides = {k: v for k, v in given.items() if v is not None}
    try:
        result = compute(spec, out, workers=workers, scheduler=scheduler,
                         connect_timeout=connect_timeout, fmt=fmt, retry_failed=retry_failed,
                         prune_stale=prune_stale, progress=not json, overrides=overrides,
                         allow_code=allow_code, yes=yes)
    except KeyboardInterrupt:
        messages.print(f"mesadyn sweep: interrupted; finished points are stored in {out!r}: "
                      "run the same command to resume", soft_wrap=True, highlight=False,
                      markup=False)
        raise
    summary = result.to_dict()
    if json:
        emit_json(summary)
    else:
        output_written()
        _report(summary)
    if result.exit_code:
        raise RunFailed(f"{result.message} (stored in {summary['out']}; --retry-failed re-runs "
                        "them)")


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)

"""``mesadyn continue``: follow a fixed point through a data parameter (pseudo-arclength).

A thin skin over :mod:`mesadyn.workflows.continuation` (``continue`` is a Python keyword, hence
the module name).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ._common import (
    Device,
    Json,
    ProcessArgs,
    console,
    finish,
    process_options,
    progress_callback,
    table,
)

Parameter = Annotated[str, typer.Option(
    "--parameter", help="What varies: sigma, scale, m2, m4, m6, mu, weight, radius, noise, T.")]
Start = Annotated[float | None, typer.Option(
    "--start", help="Start of the range (default: the family's own value).")]
Stop = Annotated[float, typer.Option("--stop", help="End of the range.")]
Points = Annotated[int, typer.Option(
    "--points", help="At least this many points on a branch monotone in p.")]
Point = Annotated[str | None, typer.Option(
    "--point", help="Start θ from a .npy (flat, the model's length: 18d² for the paper's) or "
                    "run .nc (default: the balanced point; for --model deep the end of its "
                    "flow from the layered diagonal init).")]
MaskOpt = Annotated[str, typer.Option("--mask", help="Free entries: none or diagonal.")]
GaugeOpt = Annotated[str, typer.Option(
    "--gauge", help="Phase condition: invariant (hold ‖A‖²−‖P‖², or each layer's; slices for "
                    "symmetries that conserve nothing) or slice.")]
Switch = Annotated[bool, typer.Option(
    "--switch/--no-switch", help="Follow branches emerging at branch points.")]
Tol = Annotated[float, typer.Option("--tol", help="Newton tolerance on max|∇L|.")]
Out = Annotated[str | None, typer.Option("--out", help="Run file (.nc) with every branch.")]
Resume = Annotated[bool, typer.Option(
    "--resume", help="Continue the checkpoint of an interrupted run (same options, --out).")]
Yes = Annotated[bool, typer.Option(
    "--yes", help="Run a --model continuation even if it is expected to exceed 1 min.")]


@process_options()
def continue_(
    stop: Stop,
    process: ProcessArgs,
    parameter: Parameter = "sigma",
    start: Start = None,
    points: Points = 200,
    point: Point = None,
    mask: MaskOpt = "none",
    gauge: GaugeOpt = "invariant",
    switch: Switch = True,
    tol: Tol = 1e-11,
    out: Out = None,
    resume: Resume = False,
    device: Device = "cpu",
    yes: Yes = False,
    json: Json = False,
) -> None:
    """Follow a fixed point through a data parameter; locate folds and branch points.

    Continues ∇L(θ; p) = 0 from p = --start to --stop transverse to the model's continuous
    symmetries, with the spectrum of −∇²L at every point (zero modes classified as in
    `stability`).  --model deep --layers k runs on its exact field by quadrature.
    """
    from ..workflows import continuation as wf

    config = wf.Config(**process, parameter=parameter, start=start, stop=stop, points=points,
                       point=point, mask=mask, gauge=gauge, switch=switch, tol=tol, out=out,
                       resume=resume, device=device, force=yes)
    assert config.start is not None and config.stop is not None
    span = abs(config.stop - config.start)
    with progress_callback(not json, lambda pct: f"continuing {parameter} (% of the range)",
                           total=100.0) as bar:
        res = wf.run(config, progress=lambda x: bar(round(100.0 * min(x / span, 1.0), 1)))
    # the primary branch's outcome decides the exit code (a failing one: exit 1, after output)
    finish(res, json=json, render=_summary, saved=config.out)


def _summary(r: dict[str, Any]) -> None:
    model = f", model {r['model']} (layers {r['layers']})" if "model" in r else ""
    title = (f"mesadyn continue — {r['family']}, d={r['d']}, T={r['T']}{model}, "
             f"{r['parameter']} {r['start']:g} → {r['stop']:g} (gauge {r['gauge']}, "
             f"mask {r['mask']})")
    rows: list[tuple[str, Any]] = [
        ("status", r["status"]), ("points", r["n_points"]), ("branches", r["n_branches"]),
        ("free coordinates / symmetries", f"{r['n_free']} / {r['n_symmetries']}"),
        ("max|∇L| over all points", r["max_residual"]), ("wall (s)", r["wall_s"])]
    if "source" in r:
        rows.insert(1, ("start", r["source"]))
    for b in r["branches"]:
        rows.append((f"branch {b['index']}",
                     f"{b['status']}: {b['n_points']} points, p {b['p_first']:.6g} → "
                     f"{b['p_last']:.6g}, ab {b['ab_first']:.6g} → {b['ab_last']:.6g}, "
                     f"{b['stable_points']} stable / {b['unstable_points']} unstable"))
    for s in r["specials"]:
        rows.append((f"{s['kind']} (branch {s['branch']})",
                     f"p = {s['p']:.12g}, ab = {s.get('ab', float('nan')):.6g}"))
    if r["out"]:
        rows.append(("run file", r["out"]))
    console.print(table(title, rows))


def register(app: typer.Typer) -> None:
    app.command("continue")(continue_)

"""``mesadyn portrait``: the phase portrait of the reduced flow (Lemma 5.2), written to a figure
that carries its own provenance (``mesadyn rerun portrait.pdf`` redraws it).

A thin skin over :mod:`mesadyn.workflows.portrait`: options → ``Config`` → ``run`` → a table
on stdout or ``--json``; notes and progress on stderr.  A full-flow overlay that stopped early
exits 1 after the output.
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
    messages,
    process_options,
    progress_callback,
    table,
)

Out = Annotated[str, typer.Option(
    "--out", help="Output figure; the suffix picks .pdf, .svg or .png. It carries the "
    "configuration and the result in its metadata (mesadyn rerun FILE redraws it).")]
InitPt = Annotated[list[str] | None, typer.Option(
    "--init", help="Diagonal init a0,b0 (repeatable; default the paper's three).")]
Window = Annotated[float | None, typer.Option(
    "--window", help="Half-width L of the drawn box [-L, L]² (default: fit the inits).")]
Density = Annotated[float, typer.Option("--density", help="Streamline density.")]
FullFlow = Annotated[bool, typer.Option(
    "--full-flow", help="Overlay the full gradient flow, projected on the mean diagonals.")]
FieldKind = Annotated[str, typer.Option(
    "--field", help="Field of the full flow: exact, mc or finite.")]
FlowTEnd = Annotated[float | None, typer.Option(
    "--flow-t-end", help="τ horizon of the full flow (default: the full flow's horizon from the "
    "reduced system's settling time).")]
Gd = Annotated[bool, typer.Option("--gd", help="Overlay finite-sample GD iterates (train).")]
GdRun = Annotated[list[str] | None, typer.Option(
    "--gd-run", help="Overlay the GD iterates of a saved train run (.nc; repeatable).")]
GdM = Annotated[int, typer.Option("--gd-m", help="Training sequences for --gd.")]
GdSteps = Annotated[int, typer.Option("--gd-steps", help="GD steps for --gd.")]
GdLr = Annotated[float | None, typer.Option("--gd-lr", help="GD step size (default Table 1).")]
InsetAb = Annotated[bool, typer.Option(
    "--inset-ab", help="Add the ab(τ) panel with theory (always on with --full-flow).")]
InsetPl = Annotated[bool, typer.Option("--inset-pl", help="Add the PL-ratio panel (Lemma 5.4).")]
Width = Annotated[str, typer.Option("--width", help="one, two (column widths) or inches.")]
Dpi = Annotated[int, typer.Option("--dpi", help="Resolution of PNG output (20..1200).")]
Yes = Annotated[bool, typer.Option(
    "--yes", help="Run mc/finite full-flow overlays even if expected to exceed 1 min.")]


@process_options()
def portrait_cmd(
    process: ProcessArgs,
    out: Out = "portrait.pdf",
    init: InitPt = None,
    window: Window = None,
    density: Density = 1.2,
    full_flow: FullFlow = False,
    field: FieldKind = "exact",
    flow_t_end: FlowTEnd = None,
    gd: Gd = False,
    gd_run: GdRun = None,
    gd_m: GdM = 1000,
    gd_steps: GdSteps = 200,
    gd_lr: GdLr = None,
    inset_ab: InsetAb = False,
    inset_pl: InsetPl = False,
    width: Width = "auto",
    dpi: Dpi = 200,
    yes: Yes = False,
    device: Device = "cpu",
    json: Json = False,
) -> None:
    """Phase portrait of the reduced flow in the (a, b) plane (Lemmas 5.2, 5.3).

    Streamlines, nullclines, the fixed hyperbola ab = c2/c1, the saddle and its manifolds,
    basins, level sets of a² − b², and trajectories from --init; optional full-flow and GD
    overlays and ab(τ) / PL panels.
    """
    from ..workflows import portrait as wf

    config = wf.Config(**process, out=out,
                       init=tuple(wf.parse_init(p) for p in init) if init else None,
                       window=window, density=density,
                       full_flow=full_flow, field=field, flow_t_end=flow_t_end, gd=gd,
                       gd_run=tuple(gd_run) if gd_run else None, gd_m=gd_m, gd_steps=gd_steps,
                       gd_lr=gd_lr, inset_ab=inset_ab, inset_pl=inset_pl, width=width, dpi=dpi,
                       force=yes, device=device)
    with progress_callback(not json, lambda tau: f"full flow τ={tau:.4g}") as on_step:
        res = wf.run(config, progress=on_step)
    for note in res.notes:
        messages.print(f"note: {note}", soft_wrap=True)

    def render(obj: dict[str, Any]) -> None:
        rows: list[tuple[str, Any]] = [
            ("file", obj.get("out")), ("c1", obj["c1"]), ("c2", obj["c2"]),
            ("ab* = c2/c1", obj["ab_star"]), ("κ1/κ2 (T→∞)", obj["ab_limit"]),
            ("window", ", ".join(f"{v:.3g}" for v in obj["window"]))]
        for k, e in enumerate(obj.get("full_flow", ())):
            rows.append((f"full flow {k} end (a, b, ab)",
                         f"{e['a_end']:.5g}, {e['b_end']:.5g}, {e['ab_end']:.5g} "
                         f"({e['status']})"))
        rows += [("status", obj["status"]), ("wall s", obj["wall_s"])]
        console.print(table(f"mesadyn portrait — {obj['family']}, d={obj['d']}, T={obj['T']}",
                            rows))

    finish(res, json=json, render=render)


def register(app: typer.Typer) -> None:
    app.command("portrait")(portrait_cmd)

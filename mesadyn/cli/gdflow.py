"""``mesadyn gdflow``: gradient descent against the gradient flow and its modified flow.

Thin: options → :class:`mesadyn.workflows.gdflow.Config` → ``run`` → a rich table on stdout or
``--json``; ``--out`` writes the run file (``mesadyn rerun FILE``).  Bad input (an unknown
family, a step size Table 1 lacks, steps < 1, an implicit solver, fewer than two spread sizes)
is one line and exit code 2.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ._common import (
    A0,
    B0,
    Atol,
    Device,
    Init,
    Json,
    Out,
    ProcessArgs,
    Rtol,
    SigmaW,
    console,
    finish,
    process_options,
    table,
)
from ._common import progress_callback as _progress

Lr = Annotated[float | None, typer.Option("--lr", help="GD step size η (default: Table 1).")]
Steps = Annotated[int, typer.Option("--steps", help="GD steps; the flows run to τ = steps·η.")]
Mask = Annotated[str, typer.Option(
    "--mask", help="none, or diagonal: move only diag(W^KQ_32), diag(W^PV_12) (Theorem 4.3).")]
M = Annotated[int, typer.Option(
    "--m", help="Training sequences of the finite-sample comparison (0: skip it).")]
SpreadM = Annotated[str, typer.Option(
    "--spread-m", help="Training-set sizes of the end-point spread study, comma-separated "
    "(empty: skip it).")]
SpreadSeeds = Annotated[int, typer.Option(
    "--spread-seeds", help="Training sets (seeds seed..seed+S−1) per size (>= 3).")]
Solver = Annotated[str, typer.Option(
    "--solver", help="Explicit solver of the flows (e.g. scipy:DOP853, torchdiffeq:dopri8).")]
Yes = Annotated[bool, typer.Option(
    "--yes", help="Run a --model comparison even if it is expected to exceed 1 min.")]


def _gap_rows(name: str, comp: dict[str, Any]) -> list[tuple[str, object]]:
    return [
        (f"{name}: max ‖θ_k − θ(kη)‖ (flow)", comp["gap_flow"]["max_abs"]),
        (f"{name}: max relative gap (flow)", comp["gap_flow"]["max_rel"]),
        (f"{name}: max |ΔL| (flow)", comp["gap_flow"]["max_loss"]),
        (f"{name}: max ‖θ_k − θ̃(kη)‖ (modified flow)", comp["gap_modified"]["max_abs"]),
        (f"{name}: max |ΔL| (modified flow)", comp["gap_modified"]["max_loss"]),
        (f"{name}: gap ratio flow / modified", comp["ratio"]),
        (f"{name}: max η·λ_max(∇²L) along GD", comp["eta_lambda_max"]),
    ]


@process_options(d=3, T=20)
def gdflow(
    process: ProcessArgs,
    lr: Lr = None, steps: Steps = 200, init: Init = "diagonal", a0: A0 = 0.1, b0: B0 = 0.1,
    sigma_w: SigmaW = 0.01, mask: Mask = "none", m: M = 1000, spread_m: SpreadM = "",
    spread_seeds: SpreadSeeds = 8, solver: Solver = "scipy:DOP853", rtol: Rtol = 1e-11,
    atol: Atol = 1e-13, out: Out = None, device: Device = "cpu", yes: Yes = False,
    json: Json = False,
) -> None:
    """Gradient descent against the gradient flow at τ = kη, and against the first-order
    modified flow dθ/dτ = −∇L − (η/2)∇²L∇L (backward error analysis), on the exact and the
    finite-sample loss; optionally the spread of GD end points over training sets against m."""
    from ..workflows import gdflow as wf

    config = wf.Config(**process, lr=lr, steps=steps, init=init, a0=a0, b0=b0,
                       sigma_w=sigma_w, mask=mask, m=m, spread_m=spread_m,
                       spread_seeds=spread_seeds, solver=solver, rtol=rtol, atol=atol,
                       out=out, device=device, force=yes)
    with _progress(not json, lambda x: f"gdflow: {100 * x:.0f}%", total=1.0) as bar:
        res = wf.run(config, progress=bar)

    def render(obj: dict[str, Any]) -> None:
        rows: list[tuple[str, object]] = [("η (lr)", obj["lr"]), ("steps", obj["steps"]),
                                          ("τ_end = steps·η", obj["tau_end"])]
        rows += _gap_rows("exact", obj["exact"])
        if obj["finite"] is not None:
            rows += _gap_rows(f"finite m={obj['finite']['m']}", obj["finite"])
        if obj["spread"] is not None:
            fit = obj["spread"]["fit"]
            rows += [(f"spread of GD end points, m={m_}", s)
                     for m_, s in zip(obj["spread"]["m"], obj["spread"]["spread"], strict=True)]
            rows += [("spread ∝ m^slope: slope", fit["slope"]),
                     ("slope standard error", fit["slope_se_scaled"])]
        rows.append(("CPU s", obj["cpu_s"]))
        model = (f", {obj['model']} ({obj['layers']} layers)" if obj.get("model") else "")
        console.print(table(f"mesadyn gdflow — {obj['family']}, d={obj['d']}, T={obj['T']}"
                            f"{model}", rows))

    finish(res, json=json, render=render)


def register(app: typer.Typer) -> None:
    app.command("gdflow")(gdflow)

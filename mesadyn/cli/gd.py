"""``mesadyn gd``: gradient descent at a finite step size as a map — its regime, its invariants
and its stability limit (:mod:`mesadyn.workflows.gd`).

Thin: options → :class:`mesadyn.workflows.gd.Config` → ``run`` → a table on stdout or
``--json``; ``--out`` writes the run file.  Bad input (η <= 0 or not finite, a step size
Table 1 lacks, steps < 1) is one line and exit code 2; a divergent run is a result (exit 0),
unless ``--converge`` asked for a minimum (exit 1).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ._common import (
    A0,
    B0,
    Device,
    Init,
    Json,
    Out,
    ProcessArgs,
    SigmaW,
    console,
    finish,
    process_options,
    progress_callback,
    table,
)

Eta = Annotated[float | None, typer.Option("--eta", help="GD step size η (default: Table 1).")]
Steps = Annotated[int, typer.Option("--steps", help="GD steps.")]
Mask = Annotated[str, typer.Option(
    "--mask", help="none, or diagonal: move only diag(W^KQ_32), diag(W^PV_12) (Theorem 4.3).")]
Field = Annotated[str, typer.Option("--field", help="The loss GD descends: exact, mc, finite.")]
Samples = Annotated[int, typer.Option("--samples", help="Monte-Carlo draws (--field mc).")]
M = Annotated[int, typer.Option("--m", help="Training sequences (--field finite).")]
Reduced = Annotated[bool, typer.Option(
    "--reduced", help="The reduced 2-D map of Lemma 5.3 (closed form) instead of the field.")]
SharpEvery = Annotated[int, typer.Option(
    "--sharpness-every", help="Evaluate λ_max(∇²L) every this many steps (0: never).")]
Blowup = Annotated[float, typer.Option(
    "--blowup", help="Divergence threshold, a multiple of max(L(θ_0), L(0)).")]
Converge = Annotated[bool, typer.Option(
    "--converge", help="Fail (exit 1) unless GD settles at a minimum.")]


@process_options(d=3, T=20)
def gd(
    process: ProcessArgs,
    eta: Eta = None,
    steps: Steps = 200,
    init: Init = "diagonal",
    a0: A0 = 0.1,
    b0: B0 = 0.1,
    sigma_w: SigmaW = 0.01,
    mask: Mask = "none",
    field: Field = "exact",
    samples: Samples = 100_000,
    m: M = 1000,
    reduced: Reduced = False,
    sharpness_every: SharpEvery = 10,
    blowup: Blowup = 1e6,
    converge: Converge = False,
    out: Out = None,
    device: Device = "cpu",
    json: Json = False,
) -> None:
    """Gradient descent as a map: regime, invariant drift, sharpness, stability limit."""
    from ..workflows import gd as wf

    config = wf.Config(**process, eta=eta, steps=steps, init=init, a0=a0, b0=b0,
                       sigma_w=sigma_w, mask=mask, field=field, samples=samples, m=m,
                       reduced=reduced, sharpness_every=sharpness_every, blowup=blowup,
                       converge=converge, out=out, device=device)
    with progress_callback(not json, lambda k: "GD", total=config.steps) as on_step:
        res = wf.run(config, progress=on_step)

    def render(obj: dict[str, Any]) -> None:
        keys = ("regime", "eta", "steps", "diverged_step", "loss", "ab", "ab_star",
                "delta_ab_start", "delta_ab_end", "invariant_drift", "invariant_drift_error",
                "offdiag_end", "eta_lambda_max_start", "eta_lambda_max_end", "critical_step",
                "reduced_critical_step", "top_mode_diagonal")
        rows = [(k, obj[k]) for k in keys if obj.get(k) is not None]
        console.print(table(f"mesadyn gd — {res.family}, d={res.d}, T={res.T}, "
                            f"{res.field}", rows))
        console.print(res.message)

    finish(res, json=json, render=render, saved=out)


def register(app: typer.Typer) -> None:
    app.command("gd")(gd)

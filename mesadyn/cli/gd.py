"""``mesadyn gd``: gradient descent at a finite step size as a map — its regime, its invariants
and its stability limit; with ``--limits`` the stability limits over the minimiser set, with
``--period K`` a period-K orbit (with ``--eta-min/--eta-max``: the flip and the period-2
branch), with ``--central-flow`` the central flow, with ``--landing`` where GD lands
(:mod:`mesadyn.workflows.gd`).

Thin: options → :class:`mesadyn.workflows.gd.Config` → ``run`` → a table on stdout or
``--json``; ``--out`` writes the run file.  Bad input (η <= 0 or not finite, a step size
Table 1 lacks, steps < 1, period < 1, an empty η range, two modes at once) is one line and
exit code 2; a divergent run is a result (exit 0), unless ``--converge`` asked for a minimum
(exit 1); a Newton search or a branch that fails is exit 1.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..errors import MesadynError
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
Limits = Annotated[bool, typer.Option(
    "--limits", help="Stability limits over the minimiser set (critical steps, deciding mode, "
    "stable part for --eta).")]
Period = Annotated[int | None, typer.Option(
    "--period", help="Find a period-K orbit by Newton on G^K(θ) − θ (with --eta-min/--eta-max: "
    "the flip and the period-2 branch).")]
Central = Annotated[bool, typer.Option(
    "--central-flow", help="GD against its central flow and its modified flow.")]
Landing = Annotated[bool, typer.Option(
    "--landing", help="Where GD lands on the minimiser set for --n-eta step sizes in "
    "[--eta-min, --eta-max].")]
EtaMin = Annotated[float | None, typer.Option("--eta-min", help="Smallest η of the range.")]
EtaMax = Annotated[float | None, typer.Option("--eta-max", help="Largest η of the range.")]
NEta = Annotated[int, typer.Option("--n-eta", help="Step sizes of --landing (log-spaced).")]

_RUN_KEYS = ("regime", "eta", "steps", "diverged_step", "loss", "ab", "ab_star",
             "delta_ab_start", "delta_ab_end", "invariant_drift", "invariant_drift_error",
             "offdiag_end", "eta_lambda_max_start", "eta_lambda_max_end", "critical_step",
             "reduced_critical_step", "top_mode_diagonal")


def _mode(limits: bool, period: int | None, central: bool, landing: bool) -> str:
    chosen = [name for name, on in (("limits", limits), ("orbit", period is not None),
                                    ("central", central), ("landing", landing)) if on]
    if len(chosen) > 1:
        raise MesadynError(f"give one of --limits, --period, --central-flow, --landing; got "
                           f"{', '.join(chosen)}")
    return chosen[0] if chosen else "run"


def _rows(obj: dict[str, Any]) -> list[tuple[str, Any]]:
    mode = obj["mode"]
    if mode == "run":
        return [(k, obj[k]) for k in _RUN_KEYS if obj.get(k) is not None]
    if mode == "limits":
        lim = obj["limits"]
        base, flat = lim["base"], lim["flattest"]
        rows = [("λ_max at the minimiser", base["lambda_max"]),
                ("critical step 2/λ_max", base["critical_step"]),
                ("reduced critical step", base["reduced_critical_step"]),
                ("top mode", base["top_mode"]), ("flattest point α", flat["alpha"]),
                ("largest stable step η_max", flat["eta_max"]),
                ("reduced η_max = 1/c2", lim["reduced_eta_max"]),
                ("stable part (α)", lim["stable_alpha"]),
                ("reduced stable part (α)", lim["reduced_stable_alpha"])]
        return [(k, v) for k, v in rows if v is not None]
    if mode == "orbit" and "orbit" in obj:
        o = obj["orbit"]
        return [(k, o[k]) for k in ("period", "eta", "residual", "amplitude", "minimal_period",
                                    "stable", "iterations")]
    if mode == "orbit" and "flip" in obj:
        f, b = obj["flip"], obj["branch"]
        return [("flip η", f["eta"]), ("multiplier at the flip", f["multiplier"]),
                ("flip mode balance", f["mode_balance"]), ("branch points", b["points"]),
                ("branch η range", f"{b['eta_start']:.6g} … {b['eta_end']:.6g}"),
                ("max |G²(θ) − θ|", b["max_residual"])]
    if mode == "central" and "central" in obj:
        c = obj["central"]
        return [(k, c[k]) for k in ("edge_steps", "central_loss_gap_mean",
                                    "modified_loss_gap_mean", "flow_loss_gap_mean",
                                    "central_theta_gap_end", "modified_theta_gap_end",
                                    "gd_sharpness_end", "central_sharpness_end")]
    if mode == "landing":
        land = obj["landing"]
        key = "delta" if "delta" in land else "landed"
        return [(f"η={e:.4g}", v) for e, v in zip(land["eta"], land[key], strict=True)]
    return []


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
    limits: Limits = False,
    period: Period = None,
    central_flow: Central = False,
    landing: Landing = False,
    eta_min: EtaMin = None,
    eta_max: EtaMax = None,
    n_eta: NEta = 8,
    out: Out = None,
    device: Device = "cpu",
    json: Json = False,
) -> None:
    """Gradient descent as a map: regime, invariant drift, sharpness, stability limits,
    cycles, central flow, landing point."""
    from ..workflows import gd as wf

    mode = _mode(limits, period, central_flow, landing)
    if (eta_min is None) != (eta_max is None):
        raise MesadynError("give both --eta-min and --eta-max, or neither")
    eta_range = None if eta_min is None or eta_max is None else (eta_min, eta_max)
    config = wf.Config(**process, mode=mode, eta=eta, steps=steps, init=init, a0=a0, b0=b0,
                       sigma_w=sigma_w, mask=mask, field=field, samples=samples, m=m,
                       reduced=reduced, sharpness_every=sharpness_every, blowup=blowup,
                       converge=converge, period=2 if period is None else period,
                       eta_range=eta_range, n_eta=n_eta, out=out, device=device)
    with progress_callback(not json, lambda k: "GD", total=config.steps) as on_step:
        res = wf.run(config, progress=on_step)

    def render(obj: dict[str, Any]) -> None:
        console.print(table(f"mesadyn gd ({res.mode}) — {res.family}, d={res.d}, T={res.T}, "
                            f"{res.field}", _rows(obj)))
        console.print(res.message)

    finish(res, json=json, render=render, saved=out)


def register(app: typer.Typer) -> None:
    app.command("gd")(gd)

"""``mesadyn integrate``: the gradient flow, reduced (Lemma 5.2, in closed form) or full (Eq. 2).

A thin skin over :mod:`mesadyn.workflows.integrate`: options → ``Config`` → ``run`` → a table
on stderr or ``--json`` on stdout.  A flow that stops at ``max_steps`` or fails exits 1 after
its output (and its partial run file) are written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
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
    model_render,
    process_options,
    progress_callback,
    table,
)

Reduced = Annotated[bool, typer.Option("--reduced", help="Integrate the 2-D system of Lemma 5.2.")]
Solver = Annotated[str, typer.Option("--solver", help="auto (default: the closed form for "
                                     "--reduced, LSODA with the exact Jacobian for the stiff "
                                     "full flow), closed_form, "
                                     "dopri5, dopri8, bosh3, "
                                     "adaptive_heun | Tsit5, Dopri5, Dopri8, Kvaerno5 (jax "
                                     "extra) | RK45, DOP853, Radau, LSODA; or backend:name.")]
TEnd = Annotated[float | None, typer.Option(
    "--t-end", help="Final flow time τ (default: from the closed-form settling time).")]
FieldKind = Annotated[str, typer.Option("--field", help="Full-flow field: exact, mc or finite.")]
Samples = Annotated[int, typer.Option("--samples", help="Monte-Carlo sequences (--field mc).")]
M = Annotated[int, typer.Option("--m", help="Dataset size (--field finite).")]
Mask = Annotated[str, typer.Option("--mask", help="none, or diagonal (Theorem 4.3's clipping).")]
SteadyTol = Annotated[float, typer.Option(
    "--steady-tol", help="Stop when max|∇L| < this (0 disables).")]
MaxSteps = Annotated[int, typer.Option("--max-steps", help="Maximum accepted steps.")]
NSave = Annotated[int, typer.Option("--n-save", help="Saved points along the trajectory.")]
Repeats = Annotated[int, typer.Option(
    "--repeats", help="Run the mc/finite flow on K independent sample sets (seeds seed.."
    "seed+K−1) and report its end point with standard errors and 95% intervals (K >= 2).")]
Yes = Annotated[bool, typer.Option(
    "--yes", help="Run a Monte-Carlo/finite full flow even if it is expected to exceed 1 min.")]


@process_options()
def integrate(
    process: ProcessArgs,
    reduced: Reduced = False,
    a0: A0 = 0.5,
    b0: B0 = 1.5,
    solver: Solver = "auto",
    rtol: Rtol = 1e-10,
    atol: Atol = 1e-12,
    t_end: TEnd = None,
    field: FieldKind = "exact",
    samples: Samples = 100_000,
    m: M = 10_000,
    mask: Mask = "none",
    init: Init = "diagonal",
    sigma_w: SigmaW = 0.01,
    steady_tol: SteadyTol = 1e-9,
    max_steps: MaxSteps = 100_000,
    n_save: NSave = 200,
    out: Out = None,
    yes: Yes = False,
    repeats: Repeats = 1,
    device: Device = "cpu",
    json: Json = False,
) -> None:
    """Integrate the gradient flow dθ/dτ = −∇L(θ) (full or reduced).

    --reduced integrates Lemma 5.2's 2-D system and compares it with the closed form; without
    it the whole θ follows the exact, Monte-Carlo or finite-sample field.
    """
    from ..workflows import integrate as wf

    config = wf.Config(**process, reduced=reduced,
                       a0=a0, b0=b0, solver=solver, rtol=rtol, atol=atol, t_end=t_end,
                       field=field, samples=samples, m=m, mask=mask, init=init,
                       sigma_w=sigma_w, steady_tol=steady_tol, max_steps=max_steps,
                       n_save=n_save, out=out, force=yes, repeats=repeats,
                       device=device)
    with progress_callback(not json, lambda tau: f"integrating τ={tau:.4g}") as on_step, \
            progress_callback(not json, lambda x: "building the sampled field",
                              total=1.0) as on_build:
        res = wf.run(config, progress=on_step, build_progress=on_build)
    render = (_repeated_summary if isinstance(res, wf.RepeatedResult)
              else model_steady_render("integrate") if isinstance(res, wf.ModelFlowResult)
              else _summary)
    finish(res, json=json, render=render, saved=out)

def model_steady_render(command: str) -> Callable[[dict[str, Any]], None]:
    """The table of a model's result (:func:`._common.model_render`), then what Newton did
    after the flow and the end point's curvature across the symmetry orbits, when present."""
    base = model_render(command)

    def render(r: dict[str, Any]) -> None:
        base(r)
        rows: list[tuple[str, object]] = []
        newton = r.get("newton")
        if isinstance(newton, dict):
            rows += [("Newton steps", newton["iterations"]),
                     ("Newton max|∇L|", " -> ".join(f"{x:.3g}" for x in newton["residuals"])),
                     ("Newton Hessians / gradients",
                      f"{newton['hessians']} / {newton['gradients']}"),
                     ("Newton damped steps", newton["damped"])]
        curv = r.get("curvature")
        if isinstance(curv, dict):
            rows += [("curvature", curv["kind"]),
                     ("curvature λ_min .. λ_max",
                      f"{curv['lambda_min']:.6g} .. {curv['lambda_max']:.6g}"),
                     ("symmetry directions projected out", curv["n_symmetry"]),
                     ("flat directions unexplained", curv["n_flat"])]
        if rows:
            console.print(table("the end point: Newton and curvature", rows))

    return render


def _repeated_summary(r: dict[str, Any]) -> None:
    rows: list[tuple[str, object]] = [("status", f"{r['status']} ({r['message']})")]
    for name, q in r["quantities"].items():
        exact = "—" if q["exact"] is None else f"{q['exact']:.8g}"
        covers = {True: "yes", False: "no", None: "—"}[q["exact_in_ci95"]]
        rows.append((name, f"{q['mean']:.8g} ± {q['se']:.2g}  95% [{q['ci95'][0]:.6g}, "
                           f"{q['ci95'][1]:.6g}]  exact {exact} (in interval: {covers})"))
    console.print(table(
        f"mesadyn integrate --repeats {r['repeats']} — {r['family']}, d={r['d']}, T={r['T']}, "
        f"field={r['field']} ({r['draws']} draws, seeds {r['seeds'][0]}..{r['seeds'][-1]})",
        rows + [("wall (s)", r["wall_s"])]))


def _summary(r: dict[str, Any]) -> None:
    steps = ("accepted / rejected", f"{r['n_accepted']} / {r['n_rejected']}"
             if r["n_rejected"] is not None else "n/a (not exposed by the solver)")
    head = [("solver", f"{r['solver']} ({r['backend']})"), ("status", r["status"]),
            ("τ final", r["t_final"])]
    tail = [("nfev / njev", f"{r['nfev']} / {r['njev']}"), steps, ("wall (s)", r["wall_s"])]
    if "closed_form_max_error" in r:
        title = (f"mesadyn integrate --reduced — {r['family']}, d={r['d']}, T={r['T']} "
                 f"({r['constants']})")
        if "c" in r:  # real rotations: the 3-D manifold (a, c, b) and its minima k*
            rows = [("a", r["a"]), ("c", r["c"]), ("b", r["b"]), ("ab", r["ab"]),
                    ("cb", r["cb"]), ("k* = (ab*, cb*) (this T)",
                                      f"({r['ab_theory']:.10g}, {r['cb_theory']:.10g})"),
                    ("ab* (T→∞)", r["ab_limit"]),
                    ("distance to the level set's limit", r["limit_error"]),
                    ("invariant drift |a²+c²−b²−Δ|", r["invariant_drift"])]
        else:
            rows = [("a", r["a"]), ("b", r["b"]), ("ab", r["ab"]),
                    ("ab* (theory, this T)", r["ab_theory"]),
                    ("ab (T→∞, paper's figures)", r["ab_limit"]),
                    ("|ab − ab*|", abs(r["ab"] - r["ab_theory"])),
                    ("closed-form max error", r["closed_form_max_error"]),
                    ("invariant drift |a²−b²−Δ|", r["invariant_drift"])]
    else:
        title = (f"mesadyn integrate — {r['family']}, d={r['d']}, T={r['T']}, field={r['field']}"
                 f", mask={r['mask']}, init={r['init']}")
        ab_vals = np.asarray(r["ab"])
        rows = [("loss L", r["loss"]), ("max|∇L|", r["grad_norm"]),
                ("ab per coordinate (min..max)", f"{ab_vals.min():.10g} .. {ab_vals.max():.10g}"),
                ("ab* (theory, this T)", r["ab_theory"]),
                ("ab (T→∞, paper's figures)", r["ab_limit"]),
                ("invariant drift ‖A‖²−‖P‖²", r["invariant_drift"]),
                ("full vs reduced max deviation", r["reduced_max_deviation"]),
                ("off-structure max |θ|", r["off_structure_max"]),
                ("stiffness ratio (end)", r["stiffness_ratio"])]
    console.print(table(title, head + rows + tail))
    console.print(r["message"])


def register(app: typer.Typer) -> None:
    app.command("integrate")(integrate)

"""``mesadyn ensemble``: many full-flow trajectories in one batched solve.

Thin: options → :class:`mesadyn.workflows.ensemble.Config` → ``run`` → a rich table or
``--json``.  ``--sigma-w`` takes a comma-separated list: several values run one ensemble per
value (:func:`mesadyn.sweep.sweep_sigma`; run files ``OUT-sigma_w<v>.nc``; the ``--json`` is
then ``{"sigma_w": [...], "runs": [...], ...}``).  The exit code is the result's
(:attr:`~mesadyn.workflows.RunResult.exit_code`): 1 after the output when a trajectory failed.
Bad input (n < 1, σ_w <= 0, an unreadable init file, a grid with no points, a device this
machine lacks) is one line and exit code 2.

``--model deep --layers k`` or ``--model softmax`` runs the ensemble of that model
(:mod:`mesadyn.workflows._model_ensemble`) on ``--field`` (exact for a polynomial model; mc or
finite for every model) by ``--solver``; its table lists the distinct fixed points the
converged rows reached and the rows' outcomes.  ``--yes`` runs it when it is expected to
exceed a minute.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated

import typer

from ._common import (
    Atol,
    Json,
    ProcessArgs,
    Rtol,
    console,
    finish,
    process_options,
    table,
)
from ._common import progress_callback as _progress

if TYPE_CHECKING:
    from ..workflows.ensemble import BasinResult, ModelEnsembleResult

N = Annotated[int, typer.Option("--n", help="Trajectories (Gaussian init).")]
SigmaWs = Annotated[str, typer.Option(
    "--sigma-w", help="σ_w of the Gaussian init; a comma-separated list (1e-2,1e-4) runs one "
                      "ensemble per value.")]
Method = Annotated[str, typer.Option(
    "--method", help="Batched stepper: dopri5 (explicit, the default) or rodas4 (Rosenbrock with "
                     "the exact Hessian; pays at loose tolerances).")]
Chunk = Annotated[int | None, typer.Option(
    "--chunk", help="Rows per batched solve (--model: rows per checkpoint); the run file is "
                    "written after each (resumable). Default: 200 (--model: 10).")]
Device = Annotated[str, typer.Option(
    "--device", help="Where the exact field is evaluated: cpu, cuda, cuda:N, or auto (CUDA if "
                     "available).")]
EnsInit = Annotated[str, typer.Option("--init", help="Starts: gaussian, grid or file.")]
GridA = Annotated[str, typer.Option("--grid-a", help="Grid init: a0 values, comma-separated.")]
GridB = Annotated[str, typer.Option("--grid-b", help="Grid init: b0 values, comma-separated.")]
Perturb = Annotated[float, typer.Option(
    "--perturb", help="Grid init: σ of a random perturbation of every active entry.")]
InitFile = Annotated[str | None, typer.Option(
    "--init-file", help="File init: a .npy of shape (N, 18d²) (--model: the model's θ length).")]
TEnd = Annotated[float | None, typer.Option("--t-end", help="Horizon τ (default: automatic).")]
SteadyTol = Annotated[float, typer.Option(
    "--steady-tol", help="A trajectory stops when max|∇L| < this.")]
MaxSteps = Annotated[int, typer.Option("--max-steps", help="Maximum accepted steps per row.")]
NSave = Annotated[int, typer.Option(
    "--n-save", help="Store every trajectory in the run file at N common log-spaced times "
                     "(0: none; else >= 2), each row's end point after them.")]
Out = Annotated[str | None, typer.Option("--out", help="Run file (.nc) with every trajectory.")]
Force = Annotated[bool, typer.Option("--force", help="Recompute even if --out holds this run.")]
FieldKind = Annotated[str, typer.Option(
    "--field", help="--model: its field, exact (a polynomial model), mc or finite.")]
Samples = Annotated[int, typer.Option("--samples", help="--model: Monte-Carlo sequences "
                                                        "(--field mc).")]
M = Annotated[int, typer.Option("--m", help="--model: dataset size (--field finite).")]
Solver = Annotated[str, typer.Option(
    "--solver", help="--model: the rows' solver, auto (BDF with the exact Hessian), BDF, "
                     "Radau, LSODA, RK45 or DOP853.")]
Yes = Annotated[bool, typer.Option(
    "--yes", help="--model: run even if the ensemble is expected to exceed 1 min.")]


@process_options(d=3, T=20)
def ensemble(
    process: ProcessArgs,
    init: EnsInit = "gaussian", n: N = 100, sigma_w: SigmaWs = "0.01",
    grid_a: GridA = "", grid_b: GridB = "", perturb: Perturb = 0.0,
    init_file: InitFile = None, t_end: TEnd = None, rtol: Rtol = 1e-10, atol: Atol = 1e-12,
    steady_tol: SteadyTol = 1e-8, max_steps: MaxSteps = 100_000, method: Method = "dopri5",
    chunk: Chunk = None, device: Device = "cpu", n_save: NSave = 0, field: FieldKind = "exact",
    samples: Samples = 100_000, m: M = 10_000, solver: Solver = "auto", out: Out = None,
    force: Force = False, yes: Yes = False, json: Json = False,
) -> None:
    """Integrate an ensemble of full flows; basin fractions (Wilson 95%) and escape times
    (--model: the fixed points reached, with their fractions)."""
    from ..sweep import sigma_values, sweep_sigma
    from ..workflows import RunResult
    from ..workflows import ensemble as wf

    values = sigma_values(sigma_w)
    config = wf.Config(**process, init=init, n=n,
                       sigma_w=values[0], grid_a=grid_a, grid_b=grid_b, perturb=perturb,
                       init_file=init_file, t_end=t_end, rtol=rtol, atol=atol,
                       steady_tol=steady_tol, max_steps=max_steps, method=method, chunk=chunk,
                       device=device, n_save=n_save, field=field, samples=samples, m=m,
                       solver=solver, out=out, recompute=force, force=yes)
    total = wf.n_starts(config) * len(values)
    with _progress(not json, lambda x: "ensemble: rows done", total=total) as bar:
        res: RunResult
        if len(values) == 1:
            one = wf.run(config, progress=bar)
            res, runs = one, [one]
        else:
            swept = sweep_sigma(config, values, progress=bar)
            res, runs = swept, list(swept.runs)
    def render(obj: dict[str, object]) -> None:
        for one in runs:
            if isinstance(one, wf.ModelEnsembleResult):
                _render_model(one)
            else:
                _render(one, manifold=config.rotation == "real")

    finish(res, json=json, render=render)


def _render(res: BasinResult, *, manifold: bool = False) -> None:
    """The table of one ensemble; ``manifold``: real rotations, whose rows are classified
    against the 3-D manifold's minima (``ab_star`` is k*_1 there)."""
    star = "k*_1 (the 3-D rotation manifold)" if manifold else "ab* (Theorem 4.1/4.3)"
    rows: list[tuple[str, object]] = [
        (f"{k} (95% Wilson)", f"{v['count']}/{v['n']} = {v['fraction']:.3f} "
                              f"[{v['low']:.3f}, {v['high']:.3f}]")
        for k, v in res.fractions.items()]
    rows += [(star, res.ab_star), ("λ_top at the saddle", res.lambda_top),
             ("escape τ median (measured)", res.escape["measured_median"]),
             ("escape τ median (predicted)", res.escape["predicted_median"]),
             ("escape median relative error", res.escape["median_relative_error"]),
             ("max off-structure (converged)", res.off_structure_max_converged),
             ("inert entries (flat loss) / their max", f"{res.n_inert} / {res.off_inert_max:.3g}"),
             ("branch rows displaced along a flat valley", res.n_flat),
             ("max |ab − ab*| (converged)", res.ab_max_error_converged),
             ("solver", res.solver["solver"]), ("wall (s)", res.solver["wall_s"]),
             ("rows from the run file", f"{res.rows_reused}/{res.n}"),
             ("status", f"{res.status} ({res.message})")]
    sw = "" if res.sigma_w is None else f", σ_w={res.sigma_w:g}"
    console.print(table(f"mesadyn ensemble — {res.family}, d={res.d}, T={res.T}, "
                        f"n={res.n}, init={res.init}{sw}", rows))


def _render_model(res: ModelEnsembleResult) -> None:
    """The tables of a model's ensemble: the fixed points found (loss, Σ_l a_l b_l, fraction
    with its 95% Wilson interval) and the rows' outcomes and checks."""
    from rich.table import Table

    title = (f"mesadyn ensemble — {res.model}, {res.layers} layer(s), {res.family}, "
             f"d={res.d}, T={res.T}, n={res.n}, init={res.init}"
             + ("" if res.sigma_w is None else f", σ_w={res.sigma_w:g}"))
    pts = Table(title="fixed points reached (grouped by loss)", show_header=True,
                header_style="bold")
    for name in ("fixed point", "loss", "Σ_l a_l b_l", "rows (95% Wilson)", "max|∇L|",
                 "smallest curvature"):
        pts.add_column(name, justify="left" if name == "fixed point" else "right")
    for p in res.fixed_points:
        ab = ("—" if p.ab_min is None or p.ab_max is None
              else f"{p.ab_min:.6g}" if math.isclose(p.ab_min, p.ab_max, rel_tol=1e-6)
              else f"{p.ab_min:.6g} … {p.ab_max:.6g}")
        pts.add_row(p.label, f"{p.loss:.10g}", ab,
                    f"{p.count}/{p.n} = {p.fraction:.3f} [{p.low:.3f}, {p.high:.3f}]",
                    f"{p.grad_max:.3g}", f"{p.lambda_min:.3g}")
    console.print(pts)
    rows: list[tuple[str, object]] = [
        (f"{k} (95% Wilson)", f"{v['count']}/{v['n']} = {v['fraction']:.3f} "
                              f"[{v['low']:.3f}, {v['high']:.3f}]")
        for k, v in res.fractions.items() if not k.startswith("fixed_point_")]
    rows += [("fixed points grouped by loss within", f"{res.loss_rtol:g}·max(1, |L|)"),
             ("field", res.field.get("method", res.field.get("field"))),
             ("rows continued past a saddle", res.n_continued),
             ("rows in the fixed subspace", res.n_subspace),
             ("max invariant drift", res.invariant_drift_max),
             ("max inactive entry (never moved)", res.off_inactive_max),
             ("t_end", res.t_end), ("solver", res.solver["solver"]),
             ("wall (s)", res.solver["wall_s"]),
             ("rows from the run file", f"{res.rows_reused}/{res.n}"),
             ("status", f"{res.status} ({res.message})")]
    console.print(table(title, rows))


def register(app: typer.Typer) -> None:
    app.command("ensemble")(ensemble)

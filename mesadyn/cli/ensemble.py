"""``mesadyn ensemble``: many full-flow trajectories in one batched solve.

Thin: options → :class:`mesadyn.workflows.ensemble.Config` → ``run`` → a rich table or
``--json``.  ``--sigma-w`` takes a comma-separated list: several values run one ensemble per
value (:func:`mesadyn.sweep.sweep_sigma`; run files ``OUT-sigma_w<v>.nc``; the ``--json`` is
then ``{"sigma_w": [...], "runs": [...], ...}``).  The exit code is the result's
(:attr:`~mesadyn.workflows.RunResult.exit_code`): 1 after the output when a trajectory failed.
Bad input (n < 1, σ_w <= 0, an unreadable init file, a grid with no points, a device this
machine lacks) is one line and exit code 2.
"""

from __future__ import annotations

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
    from ..workflows.ensemble import Result

N = Annotated[int, typer.Option("--n", help="Trajectories (Gaussian init).")]
SigmaWs = Annotated[str, typer.Option(
    "--sigma-w", help="σ_w of the Gaussian init; a comma-separated list (1e-2,1e-4) runs one "
                      "ensemble per value.")]
Method = Annotated[str, typer.Option(
    "--method", help="Batched stepper: dopri5 (explicit, the default) or rodas4 (Rosenbrock with "
                     "the exact Hessian; pays at loose tolerances).")]
Chunk = Annotated[int, typer.Option(
    "--chunk", help="Rows per batched solve; the run file is written after each (resumable).")]
Device = Annotated[str, typer.Option(
    "--device", help="Where the exact field is evaluated: cpu, cuda, cuda:N, or auto (CUDA if "
                     "available).")]
EnsInit = Annotated[str, typer.Option("--init", help="Starts: gaussian, grid or file.")]
GridA = Annotated[str, typer.Option("--grid-a", help="Grid init: a0 values, comma-separated.")]
GridB = Annotated[str, typer.Option("--grid-b", help="Grid init: b0 values, comma-separated.")]
Perturb = Annotated[float, typer.Option(
    "--perturb", help="Grid init: σ of a random perturbation of every active entry.")]
InitFile = Annotated[str | None, typer.Option(
    "--init-file", help="File init: a .npy of shape (N, 18d²).")]
TEnd = Annotated[float | None, typer.Option("--t-end", help="Horizon τ (default: automatic).")]
SteadyTol = Annotated[float, typer.Option(
    "--steady-tol", help="A trajectory stops when max|∇L| < this.")]
MaxSteps = Annotated[int, typer.Option("--max-steps", help="Maximum accepted steps per row.")]
NSave = Annotated[int, typer.Option(
    "--n-save", help="Store every trajectory in the run file at N common log-spaced times "
                     "(0: none; else >= 2), each row's end point after them.")]
Out = Annotated[str | None, typer.Option("--out", help="Run file (.nc) with every trajectory.")]
Force = Annotated[bool, typer.Option("--force", help="Recompute even if --out holds this run.")]


@process_options(d=3, T=20)
def ensemble(
    process: ProcessArgs,
    init: EnsInit = "gaussian", n: N = 100, sigma_w: SigmaWs = "0.01",
    grid_a: GridA = "", grid_b: GridB = "", perturb: Perturb = 0.0,
    init_file: InitFile = None, t_end: TEnd = None, rtol: Rtol = 1e-10, atol: Atol = 1e-12,
    steady_tol: SteadyTol = 1e-8, max_steps: MaxSteps = 100_000, method: Method = "dopri5",
    chunk: Chunk = 200, device: Device = "cpu", n_save: NSave = 0, out: Out = None,
    force: Force = False, json: Json = False,
) -> None:
    """Integrate an ensemble of full flows; basin fractions (Wilson 95%) and escape times."""
    from ..sweep import sigma_values, sweep_sigma
    from ..workflows import RunResult
    from ..workflows import ensemble as wf

    values = sigma_values(sigma_w)
    config = wf.Config(**process, init=init, n=n,
                       sigma_w=values[0], grid_a=grid_a, grid_b=grid_b, perturb=perturb,
                       init_file=init_file, t_end=t_end, rtol=rtol, atol=atol,
                       steady_tol=steady_tol, max_steps=max_steps, method=method, chunk=chunk,
                       device=device, n_save=n_save, out=out, force=force)
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
            _render(one, manifold=config.rotation == "real")

    finish(res, json=json, render=render)


def _render(res: Result, *, manifold: bool = False) -> None:
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


def register(app: typer.Typer) -> None:
    app.command("ensemble")(ensemble)

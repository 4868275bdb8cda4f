"""``mesadyn stability``: options -> :class:`mesadyn.workflows.stability.Config` -> ``run`` ->
rich tables on stdout or ``--json``.  The analysis itself is :mod:`mesadyn.workflows.stability`;
a point that is not a fixed point, or a flow that ends at a saddle, is a completed run that
failed (exit 1, after the output); ``--out`` writes the run file (``mesadyn rerun FILE``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..tolerances import ZERO_RTOL
from ._common import (
    Device,
    Json,
    Out,
    ProcessArgs,
    console,
    finish,
    process_options,
    table,
)
from .integrate import model_steady_render

if TYPE_CHECKING:
    from rich.table import Table

FieldOpt = Annotated[str, typer.Option("--field", help="Field: exact (default), mc, or finite "
                                          "(the finite-sample loss the paper's GD descends).")]
Samples = Annotated[int, typer.Option("--samples", help="Monte-Carlo samples (--field mc).")]
MOpt = Annotated[int, typer.Option("--m", help="Training sequences (--field finite), drawn "
                                   "with --seed.")]
PointOpt = Annotated[
    str | None, typer.Option("--point", help="Start point θ from a .npy (flat, the model's "
                                             "length: 18d² for the paper's) or run .nc.")
]
A0Opt = Annotated[float | None, typer.Option("--a0", help="Find the point by the flow from "
                                             "the diagonal init W^KQ_32 = a0 I ...")]
B0Opt = Annotated[float | None, typer.Option("--b0", help="... and W^PV_12 = b0 I.")]
TEnd = Annotated[float, typer.Option("--t-end", help="Longest flow time.")]
ZeroRtol = Annotated[float, typer.Option("--zero-rtol",
                                         help="Zero-mode threshold, relative to max |eigenvalue|.")]
PlOpt = Annotated[bool, typer.Option("--pl/--no-pl", help="PL diagnostics along a trajectory.")]
PlotOpt = Annotated[str | None, typer.Option("--plot", help="Write the spectra to FILE "
                                             "(.pdf, .png or .svg).")]


@process_options()
def stability(
    process: ProcessArgs,
    a0: A0Opt = None,
    b0: B0Opt = None,
    field: FieldOpt = "exact",
    samples: Samples = 4000,
    m: MOpt = 10_000,
    point: PointOpt = None,
    t_end: TEnd = 1e4,
    zero_rtol: ZeroRtol = ZERO_RTOL,
    pl: PlOpt = True,
    plot: PlotOpt = None,
    out: Out = None,
    device: Device = "cpu",
    json: Json = False,
) -> None:
    """Fixed points, spectra of −∇²L, the PL rate; for --x1 ones, Proposition 4.2."""
    from ..workflows import stability as wf

    config = wf.Config(**process, a0=a0, b0=b0,
                       field=field, samples=samples, m=m, point=point, t_end=t_end,
                       zero_rtol=zero_rtol, pl=pl, plot=plot, out=out, device=device)
    res = wf.run(config)
    finish(res, json=json, render=_print if isinstance(res, wf.Result)
           else model_steady_render("stability"), saved=out)


def _vector(values: list[float]) -> str:
    return "[" + ", ".join(f"{x:.10g}" for x in values) + "]"


def _print(out: dict[str, Any]) -> None:
    if "failure" in out:
        f = out["failure"]
        console.print(table(f"mesadyn stability — {out['family']}, d={out['d']}, T={out['T']}: "
                            f"FAILED ({f['stage']})", [
            ("point", out["source"]),
            ("max|∇L| over the free coordinates / tolerance",
             f"{f['residual']:.6g} / {f['tolerance']:.3g}"),
            ("Newton iterations", f["newton_iterations"]),
            ("flow", "—" if f["flow"] is None else
             f"τ = {f['flow']['t']:.4g} ({f['flow']['status']})"),
        ]))
        if "fixed_point" not in out:
            return
    fp = out["fixed_point"]
    ones = "released" in out or out.get("failure", {}).get("stage") == "released dense point"
    title = (f"mesadyn stability — {out['family']}, d={out['d']}, T={out['T']}: "
             + ("1. masked fixed point (Theorem 4.3)" if ones else "fixed point"))
    zm, red = fp["zero_modes"], fp["reduced"]
    console.print(table(title, [
        ("point", out["source"]),
        ("ab (mean) / ab* theory", f"{fp['ab']:.12g} / {fp['ab_theory']:.12g}"),
        ("loss", fp["loss"]),
        (f"Newton residual ({fp['newton_over']})", fp["newton_residual"]),
        ("max|∇L| (grad_norm)", fp["grad_norm"]),
        ("max|∇L| off diag W^KQ_32, W^PV_12", fp["offdiag_grad_norm"]),
        ("  of which off-diagonal of W^KQ_32, W^PV_12", fp["offdiag_32_12_grad_norm"]),
        ("  of which other active blocks", fp["rest_grad_norm"]),
        ("fixed point of the full flow", fp["grad_norm"] < 1e-9),
        ("modes: zero / stable / unstable",
         f"{fp['n_zero']} / {fp['n_stable']} / {fp['n_unstable']}"),
        ("zero modes: inactive + symmetry", f"{zm['inactive']} + {zm['symmetry']}"),
        ("zero modes: unused / coordinate sym. / higher-order / unexplained",
         f"{zm['unused']} / {zm['coordinate_symmetry']} / {zm['higher_order']} / "
         f"{zm['unexplained']}"),
        ("zero gap |μ|/max|μ|: largest zero, smallest non-zero",
         f"{fp['zero_gap'][0]:.2e}, {fp['zero_gap'][1]:.2e}"),
        ("‖H·(P,−A)‖ (symmetry direction)", fp["symmetry_residual"]),
        ("stiffness ratio", fp["stiffness"]),
        ("transverse spectrum: unstable / max eigenvalue",
         f"{fp['transverse']['n_unstable']} / {fp['transverse']['max_eigenvalue']:.6g}"),
        ("reduced spectrum numeric", _vector(red["eigenvalues_numeric"])),
        ("reduced spectrum analytic", _vector(red["eigenvalues_analytic"])),
        (("3-D manifold Jacobian eigenvalues vs the full ones" if "g12" in red else
          "−c1(a²+b²) vs nearest full eigenvalue"),
         (f"{_vector(red['manifold_eigenvalues'])} vs "
          f"{_vector(red['nearest_full_eigenvalues'])}" if "g12" in red else
          f"{red['mu_hyperbola']:.10g} vs {red['nearest_full_eigenvalue']:.10g}")),
        ("stable (no unstable direction)", fp["stable"]),
    ]))
    console.print(_leading_table("leading modes", fp["leading"]))
    if "released" in out:
        _print_released(out["fixed_point"], out["released"])
    if "pl" in out:
        p = out["pl"]
        console.print(table("PL diagnostics (Lemma 5.4)", [
            ("trajectory", p["trajectory"]),
            ("‖∇L‖²/(L−L*) first / last", f"{p['ratio_first']:.8g} / {p['ratio_last']:.8g}"),
            ("Lemma 5.4 2c1(a²+b²) first / last",
             f"{p['lemma_first']:.8g} / {p['lemma_last']:.8g}"),
            ("max relative deviation from Lemma 5.4", p["max_rel_dev_from_lemma"]),
            ("measured rate of L − L*", p["measured_rate"]),
            ("linearised rate 2|μ| (dominant late mode)", p["linearised_rate"]),
            ("Lemma 5.4 at the end point 2c1(a*²+b*²)", p["lemma_rate"]),
        ]))
    if "monte_carlo" in out:
        m = out["monte_carlo"]
        console.print(table("Monte-Carlo gradient at the point (batch-means SE)", [
            ("samples / batches", f"{m['samples']} / {m['batches']}"),
            ("loss ± SE", f"{m['loss']:.8g} ± {m['loss_se']:.2g}"),
            ("max|∇L| / largest SE", f"{m['grad_max']:.3g} / {m['grad_se_max']:.3g}"),
            ("max |∇L_i| / SE_i over active entries", m["max_z"]),
            ("Hessian", m["hessian"]),
        ]))
    if "plot" in out:
        console.print(f"wrote {out['plot']}")


def _print_released(fp: dict[str, Any], r: dict[str, Any]) -> None:
    g = r["one_step_gd"]
    console.print(table("3.–4. full flow from it → dense fixed point (Prop. 4.2, App. B.5)", [
        ("flow", f"τ = {r['flow']['t']:.4g} ({r['flow']['status']}, {r['flow']['backend']})"),
        ("loss: masked → dense (drop)",
         f"{fp['loss']:.10g} → {r['loss']:.10g} ({r['loss_drop']:.6g})"),
        ("max|∇L| at the dense point", r["grad_norm"]),
        ("modes: zero / unstable", f"{r['n_zero']} / {r['n_unstable']}"),
        ("zero modes: inactive + symmetry + unexplained",
         f"{r['zero_modes']['inactive']} + {r['zero_modes']['symmetry']} + "
         f"{r['zero_modes']['unexplained']}"),
        ("stiffness ratio", r["stiffness"]),
        ("stable", r["stable"]),
        ("W1 = W^KQ_32: diag / off-diag mean",
         f"{g['W1_diag_mean']:.6g} / {g['W1_offdiag_mean']:.6g}"),
        ("W2 = W^PV_12: diag / off-diag mean",
         f"{g['W2_diag_mean']:.6g} / {g['W2_offdiag_mean']:.6g}"),
        ("‖W1 − (tr W1/d) I‖/‖W1‖", g["W1_identity_distance"]),
        ("‖W2 − (tr W2/d) I‖/‖W2‖", g["W2_identity_distance"]),
        ("max|entry| of W^KQ_22, _23, _33, W^PV_13", g["other_active_blocks_max"]),
    ]))
    console.print(_matrix_table("W1 = W^KQ_32", r["W_KQ_32"]))
    console.print(_matrix_table("W2 = W^PV_12", r["W_PV_12"]))
    console.print(
        "ŷ_t = (1/ρ_t) Σ_i W2 x_i x_{i−1}^* W1 x_t: one step of GD on the OLS problem "
        "preconditioned by W1, W2 — not vanilla GD (W1, W2 are not multiples of I)."
    )


def _leading_table(title: str, modes: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    t = Table(title=title, header_style="bold")
    for col in ("mode", "eigenvalue of −∇²L", "dominant blocks (share of ‖v‖²)"):
        t.add_column(col)
    for m in modes:
        blocks = ", ".join(f"{k} {v:.2f}" for k, v in m["blocks"].items())
        t.add_row(m["mode"], f"{m['eigenvalue']:.8g}", blocks)
    return t


def _matrix_table(title: str, W: list[list[float]]) -> Table:
    from rich.table import Table

    t = Table(title=title, show_header=False)
    for _ in W[0]:
        t.add_column(justify="right")
    for row in W:
        t.add_row(*(f"{x:.5f}" for x in row))
    return t


def register(app: typer.Typer) -> None:
    app.command("stability")(stability)

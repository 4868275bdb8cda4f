"""``mesadyn integrate``: the gradient flow, reduced (Lemma 5.2, in closed form) or full (Eq. 2).

``--reduced`` integrates the 2-D system numerically and compares it with the closed form;
without it the whole θ follows ``dθ/dτ = −∇L`` for the exact, Monte-Carlo or finite-sample
field, and a diagonal start is compared with the closed-form reduced trajectory.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
import typer

from ..errors import MesadynError
from ._common import (
    A0,
    B0,
    X1,
    Dim,
    Init,
    Json,
    Length,
    Scale,
    Seed,
    Sigma,
    SigmaW,
    console,
    emit_json,
    progress,
    table,
)

Reduced = Annotated[bool, typer.Option("--reduced", help="Integrate the 2-D system of Lemma 5.2.")]
Solver = Annotated[str, typer.Option("--solver", help="auto (default: dopri5 for --reduced, "
                                     "LSODA with the exact Jacobian for the stiff full flow), "
                                     "dopri5, dopri8, bosh3, "
                                     "adaptive_heun | Tsit5, Dopri5, Dopri8, Kvaerno5 (jax "
                                     "extra) | RK45, DOP853, Radau, LSODA.")]
Rtol = Annotated[float, typer.Option("--rtol", help="Relative tolerance.")]
Atol = Annotated[float, typer.Option("--atol", help="Absolute tolerance.")]
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
Out = Annotated[str | None, typer.Option("--out", help="Write the trajectory to this .nc file.")]


def _auto_t_end(system: Any, a0: float, b0: float) -> float:
    """A horizon well past settling: 3× the closed-form time to come within 1e-12, >= 50/c2."""
    t = system.time_to_reach(a0, b0, 1e-12 * max(1.0, math.hypot(a0, b0)))
    return max(3.0 * t, 50.0 / system.c2)


def compute_reduced(x1: str = "gaussian", sigma: float = 1.0, scale: float = 1.0, d: int = 5,
                    T: int = 100, seed: int = 1, a0: float = 0.5, b0: float = 1.5,
                    solver: str = "dopri5", rtol: float = 1e-10, atol: float = 1e-12,
                    t_end: float | None = None, max_steps: int = 100_000, n_save: int = 200,
                    out: str | None = None, on_step: Any = None) -> dict[str, object]:
    """The JSON result of ``mesadyn integrate --reduced``."""
    from ..flow import integrate_reduced
    from ..reduced import ReducedSystem
    from ..theory import constants
    from ._common import make_family

    fam = make_family(x1, d, sigma, scale)
    c = constants(fam, T)
    system = ReducedSystem(c.c1, c.c2)
    horizon = _auto_t_end(system, a0, b0) if t_end is None else t_end
    res = integrate_reduced(system, a0, b0, t_end=horizon, solver=solver, rtol=rtol, atol=atol,
                            max_steps=max_steps, n_save=n_save, progress=on_step)
    a_lim, b_lim = system.limit(a0, b0)
    result: dict[str, object] = {
        "family": fam.name, "d": fam.d, "T": c.T, "c1": c.c1, "c2": c.c2,
        "a0": a0, "b0": b0,
        "a": float(res.a[-1]), "b": float(res.b[-1]), "ab": float(res.ab[-1]),
        "ab_theory": c.ab_star, "ab_limit": c.ab_limit,
        "a_limit": a_lim, "b_limit": b_lim,
        "invariant_drift": res.invariant_drift(),
        "closed_form_max_error": res.closed_form_max_error(),
        "t_end": horizon, "t_final": float(res.t[-1]),
        "constants": "Lemma 5.3" if fam.assumption_41 else "Lemma A.5 (masked)",
        **res.stats(),
    }
    if out is not None:
        from ..io import save_run

        save_run(res.to_dataset(), out, kind="integrate-reduced",
                 config={"command": "integrate", "reduced": True, **_config(locals())},
                 seed=seed)
        result["out"] = out
    return result


def _config(loc: dict[str, Any]) -> dict[str, Any]:
    keep = ("x1", "sigma", "scale", "d", "T", "seed", "a0", "b0", "solver", "rtol", "atol",
            "t_end", "max_steps", "n_save", "field", "samples", "m", "mask", "init", "sigma_w",
            "steady_tol")
    return {k: loc[k] for k in keep if k in loc}


def compute(x1: str = "gaussian", sigma: float = 1.0, scale: float = 1.0, d: int = 5,
            T: int = 100, seed: int = 1, reduced: bool = False, a0: float = 0.5,
            b0: float = 1.5, solver: str = "auto", rtol: float = 1e-10, atol: float = 1e-12,
            t_end: float | None = None, field: str = "exact", samples: int = 100_000,
            m: int = 10_000, mask: str = "none", init: str = "diagonal", sigma_w: float = 0.01,
            steady_tol: float = 1e-9, max_steps: int = 100_000, n_save: int = 200,
            out: str | None = None, on_step: Any = None) -> dict[str, object]:
    """The JSON result of ``mesadyn integrate`` (also used by ``mesadyn sweep``).

    ``solver="auto"`` is dopri5 for the reduced system and LSODA (given the exact Jacobian
    −∇²L) for the full flow: the full flow is stiff (stiffness ratio ≈ 7.7e3 at d=5, T=100),
    and explicit dopri5 stalls at max|∇L| ≈ 2e-7 at rtol 1e-10, above the steady-state test.
    """
    if solver == "auto":
        solver = "dopri5" if reduced else "LSODA"
    if reduced:
        return compute_reduced(x1, sigma, scale, d, T, seed, a0, b0, solver, rtol, atol, t_end,
                               max_steps, n_save, out, on_step)
    import torch

    from ..flow import integrate, resolve_mask, resolve_solver
    from ..model import ab as ab_of
    from ..model import diagonal_mask, unpack
    from ..reduced import ReducedSystem
    from ..sweep.shared import shared_field
    from ..theory import constants
    from ._common import make_family, make_init

    resolve_solver(solver)  # a bad name fails before any field is built
    fam = make_family(x1, d, sigma, scale)
    theta0 = make_init(init, d, a0, b0, sigma_w, seed)
    mask_arr = resolve_mask(mask, d)
    try:
        c = constants(fam, T)
        system: ReducedSystem | None = ReducedSystem(c.c1, c.c2)
    except MesadynError:
        c, system = None, None
    if t_end is None:
        if system is None:
            raise MesadynError(f"family {fam.name!r} has no reduced system; give --t-end")
        if init == "diagonal":
            horizon = _auto_t_end(system, a0, b0)
        else:  # escape from near the saddle at the origin takes ~ log(1/σ_w)/c2
            horizon = _auto_t_end(system, sigma_w, sigma_w) * max(1.0, math.log(1 / sigma_w))
        if not (fam.assumption_41 or mask == "diagonal"):
            horizon *= 20.0  # leaves the diagonal structure: slower directions (Prop. 4.2)
    else:
        horizon = t_end
    kw: dict[str, Any] = {"exact": {}, "mc": {"samples": samples, "seed": seed},
                          "finite": {"m": m, "seed": seed}}.get(field, {})
    # built once per process for the same (field, family, T): sweeps reuse it across points
    f = shared_field(field, fam, T, **kw)
    res = integrate(f, theta0, t_end=horizon, solver=solver, rtol=rtol, atol=atol,
                    n_save=n_save, max_steps=max_steps, mask=mask_arr, steady_tol=steady_tol,
                    progress=on_step)
    final = torch.from_numpy(res.final.copy())
    W_KQ, W_PV = unpack(final)
    ab_vals = ab_of(final).numpy()
    # full against reduced: (mean diag W^KQ_32, mean diag W^PV_12) vs the closed form
    deviation = None
    off_structure = None
    if init == "diagonal":
        diag = diagonal_mask(d)
        off_structure = float(np.max(np.abs(res.theta[:, ~diag])))
        if system is not None:
            th = torch.from_numpy(res.theta)
            n = 9 * d * d
            kq = th[:, :n].reshape(-1, 3 * d, 3 * d)[:, 2 * d:, d:2 * d]
            pv = th[:, n:].reshape(-1, 3 * d, 3 * d)[:, :d, d:2 * d]
            a_full = torch.diagonal(kq, dim1=1, dim2=2).mean(1).numpy()
            b_full = torch.diagonal(pv, dim1=1, dim2=2).mean(1).numpy()
            a_red, b_red = system.solution(a0, b0, res.t)
            deviation = float(np.max(np.hypot(a_full - a_red, b_full - b_red)))
    result: dict[str, object] = {
        "family": fam.name, "d": d, "T": T, "field": field, "mask": mask, "init": init,
        "W_KQ": W_KQ.numpy().tolist(), "W_PV": W_PV.numpy().tolist(),
        "ab": ab_vals.tolist(), "ab_mean": float(ab_vals.mean()),
        "ab_theory": None if c is None else c.ab_star,
        "ab_limit": None if c is None else c.ab_limit,
        "loss": float(res.loss[-1]), "grad_norm": float(res.grad_max[-1]),
        "converged": res.converged, "invariant_drift": res.invariant_drift(),
        "reduced_max_deviation": deviation, "off_structure_max": off_structure,
        "reduced_constants": None if c is None else (
            "Lemma 5.3" if fam.assumption_41 else "Lemma A.5"),
        "t_end": horizon, "t_final": float(res.t[-1]), "steady_tol": steady_tol,
        **res.stats(),
    }
    if out is not None:
        from ..io import save_run

        ds = res.to_dataset()
        ds.attrs["field_config"] = str(f.describe())
        save_run(ds, out, kind="integrate", config={"command": "integrate", **_config(locals())},
                 seed=seed)
        result["out"] = out
    return result


def integrate(
    x1: X1 = "gaussian",
    sigma: Sigma = 1.0,
    scale: Scale = 1.0,
    d: Dim = 5,
    T: Length = 100,
    seed: Seed = 1,
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
    json: Json = False,
) -> None:
    """Integrate the gradient flow: reduced (closed form vs solver) or full (exact/mc/finite)."""
    opts = dict(x1=x1, sigma=sigma, scale=scale, d=d, T=T, seed=seed, reduced=reduced, a0=a0,
                b0=b0, solver=solver, rtol=rtol, atol=atol, t_end=t_end, field=field,
                samples=samples, m=m, mask=mask, init=init, sigma_w=sigma_w,
                steady_tol=steady_tol, max_steps=max_steps, n_save=n_save, out=out)
    with progress(enabled=not json) as bar:
        task = bar.add_task("integrating", total=None)

        def on_step(tau: float) -> None:
            bar.update(task, description=f"integrating τ={tau:.4g}")

        result = compute(**opts, on_step=on_step)
    if json:
        emit_json(result)
    else:
        _summary(result)
    if result["status"] in ("max_steps", "failed"):
        saved = f"; partial result saved to {out}" if out else ""
        raise MesadynError(f"integration stopped early: {result['message']}{saved}")


def _summary(r: dict[str, Any]) -> None:
    if "closed_form_max_error" in r:
        title = (f"mesadyn integrate --reduced — {r['family']}, d={r['d']}, T={r['T']} "
                 f"({r['constants']})")
        rows = [("solver", f"{r['solver']} ({r['backend']})"), ("status", r["status"]),
                ("τ final", r["t_final"]), ("a", r["a"]), ("b", r["b"]), ("ab", r["ab"]),
                ("ab* (theory, this T)", r["ab_theory"]), ("ab (T→∞, paper's figures)",
                                                          r["ab_limit"]),
                ("|ab − ab*|", abs(r["ab"] - r["ab_theory"])),
                ("closed-form max error", r["closed_form_max_error"]),
                ("invariant drift |a²−b²−Δ|", r["invariant_drift"]),
                ("nfev / njev", f"{r['nfev']} / {r['njev']}"),
                ("accepted / rejected", f"{r['n_accepted']} / {r['n_rejected']}"),
                ("wall (s)", r["wall_s"])]
    else:
        title = (f"mesadyn integrate — {r['family']}, d={r['d']}, T={r['T']}, field={r['field']}"
                 f", mask={r['mask']}, init={r['init']}")
        ab_vals = np.asarray(r["ab"])
        rows = [("solver", f"{r['solver']} ({r['backend']})"), ("status", r["status"]),
                ("τ final", r["t_final"]), ("loss L", r["loss"]),
                ("max|∇L|", r["grad_norm"]),
                ("ab per coordinate (min..max)", f"{ab_vals.min():.10g} .. {ab_vals.max():.10g}"),
                ("ab* (theory, this T)", r["ab_theory"]),
                ("ab (T→∞, paper's figures)", r["ab_limit"]),
                ("invariant drift ‖A‖²−‖P‖²", r["invariant_drift"]),
                ("full vs reduced max deviation", r["reduced_max_deviation"]),
                ("off-structure max |θ|", r["off_structure_max"]),
                ("stiffness ratio (end)", r["stiffness_ratio"]),
                ("nfev / njev", f"{r['nfev']} / {r['njev']}"),
                ("accepted / rejected", f"{r['n_accepted']} / {r['n_rejected']}"),
                ("wall (s)", r["wall_s"])]
    rows = [(k, "n/a (not exposed by the solver)" if v == f"{r['n_accepted']} / None" else v)
            for k, v in rows]
    console.print(table(title, rows))
    console.print(r["message"])


def register(app: typer.Typer) -> None:
    app.command("integrate")(integrate)

"""Study: gradient descent at the paper's step sizes as a map — which of the paper's runs are
in which regime, how close each is to its full-space stability limit, and whether ab → c2/c1
and Corollary 4.1's mesa-optimizer hold for GD as they do for the flow.

1. The paper's runs (Table 1's seven step sizes × the three diagonal inits, and the Gaussian
   inits σ_w ∈ {0.001, 0.01, 0.1} of Figs. 5–6) on the exact field at d = 5, T = 100:
   η·λ_max(∇²L) at the start and its largest value over the 200 steps (full space, exact
   Hessian), the regime of the 200 steps, the regime GD reaches when run on (the reduced map,
   which is GD from a diagonal init exactly), the landing point's critical step and the
   orbit's largest stable step against η, and ab against c2/c1 with Corollary 4.1's error.
2. The stability limits of each family's minimiser set: the balanced point's full-space and
   reduced critical steps, the flattest point and which mode decides; verified by GD itself
   (the onset of instability, bisected) for gaussian σ = 1.
3. The flip at the flattest point and the period-2 branch (d = 3, T = 20 and d = 5, T = 100).
4. Phase diagrams: the reduced map in its universal coordinates (η c2, a√(c1/c2), b√(c1/c2)),
   and the full space at d = 3 over (η, σ_w) from the Gaussian init and (η, a0 = b0).
5. Where GD lands: the reduced map for the three inits over η (against the flow, the modified
   flow and the stability bound), and the full space from a Gaussian init at d = 3.
6. The central flow at the paper's size (d = 5, T = 100, Gaussian init σ_w = 0.01) past the
   flattest point's limit, where GD stays at the edge of stability.

Writes ``OUT/summary.json`` and the figures ``OUT/*.pdf`` (+ ``.png``).  ``--quick`` runs at
d = 3, T = 20 with small grids (a few CPU-minutes); the full study takes about twenty.

Run: ``python studies/large_step_gd.py --out DIR [--quick]``
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

#: The rows of Table 1: (label, x1, process options).
TABLE1_ROWS: tuple[tuple[str, str, dict[str, float]], ...] = (
    ("gaussian σ=0.5", "gaussian", {"sigma": 0.5}),
    ("gaussian σ=1", "gaussian", {"sigma": 1.0}),
    ("gaussian σ=2", "gaussian", {"sigma": 2.0}),
    ("sparse c=0.5", "sparse", {"scale": 0.5}),
    ("sparse c=1", "sparse", {"scale": 1.0}),
    ("sparse c=2", "sparse", {"scale": 2.0}),
    ("ones", "ones", {}),
)
DIAGONAL_INITS = ((0.1, 0.1), (0.5, 1.5), (2.0, 2.0))
SIGMA_WS = (0.001, 0.01, 0.1)
#: Figs. 5 (gaussian σ = 1) and 6 (sparse c = 1, 2) start from the Gaussian inits.
GAUSSIAN_INIT_ROWS = ("gaussian σ=1", "sparse c=1", "sparse c=2")


def _family(x1: str, d: int, kw: dict[str, float]) -> Any:
    from mesadyn.process import family

    return family(x1, d, sigma=kw.get("sigma", 1.0), scale=kw.get("scale", 1.0))


def paper_runs(d: int, T: int, steps: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Sections 1 and 2: every paper run, and each family's stability limits."""
    import torch

    from mesadyn.analysis.fixedpoint import balanced_point, flow_to_fixed_point
    from mesadyn.analysis.gd_batch import reduced_regimes
    from mesadyn.analysis.gd_landing import reduced_landing
    from mesadyn.analysis.gd_limits import flattest_point, point_limit
    from mesadyn.analysis.gd_regime import classify, descend
    from mesadyn.analysis.mesa import mesa_check
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import diagonal_entries, diagonal_init, gaussian_init
    from mesadyn.process import make_generator, sample, sequences
    from mesadyn.theory import constants
    from mesadyn.train import table1_lr

    rows, limits = [], {}
    for label, x1, kw in TABLE1_ROWS:
        fam = _family(x1, d, kw)
        f = make_field(FieldSpec("exact", fam, T))
        eta = table1_lr(fam)
        c = constants(fam, T)
        dense = x1 == "ones"  # Proposition 4.2: the flow leaves the diagonal
        starts = [("diagonal", a0, b0, diagonal_init(d, a0, b0).numpy())
                  for a0, b0 in DIAGONAL_INITS]
        if label in GAUSSIAN_INIT_ROWS:
            starts += [("gaussian", sw, None, gaussian_init(d, sw, seed=1).numpy())
                       for sw in SIGMA_WS]
        base = (flow_to_fixed_point(f, starts[0][3])[0].theta if dense
                else balanced_point(fam, T))
        flat = flattest_point(f, base, c1=None if dense else c.c1)
        bal = point_limit(f, base, c1=None if dense else c.c1)
        limits[label] = {"eta": eta, "point": "dense (Prop. 4.2)" if dense else "balanced",
                         "lambda_max": bal.lambda_max, "critical_step": bal.critical_step,
                         "reduced_critical_step": bal.reduced_critical_step,
                         "top_mode": bal.top_mode, "top_mode_blocks": bal.top_mode_blocks,
                         "flattest_alpha": flat.alpha, "eta_max": flat.eta_max,
                         "reduced_eta_max": None if dense else 1 / c.c2,
                         "eta_over_eta_max": eta / flat.eta_max}
        x1s, lam = sample(fam, 200, 2, make_generator(7, "cpu"), "cpu")
        xs = sequences(x1s, lam, T)
        diag_starts = [(p, q) for kind, p, q, _ in starts if kind == "diagonal"]
        asym = reduced_regimes(eta, [p for p, _ in diag_starts], [q for _, q in diag_starts],
                               c.c1, c.c2, 20_000).regimes()
        for kind, p, q, th0 in starts:
            tr = descend(f, th0, eta, steps, sharpness_every=10)
            regime, why = classify(tr, f)
            es = tr.eta_sharpness[np.isfinite(tr.eta_sharpness)]
            row: dict[str, Any] = {
                "family": label, "init": kind, "a0": p if kind == "diagonal" else None,
                "b0": q, "sigma_w": p if kind == "gaussian" else None, "eta": eta,
                "eta_lambda_start": float(es[0]), "eta_lambda_max": float(es.max()),
                "regime_200": str(regime), "why": why, "loss_rose": bool(
                    np.any(np.diff(tr.loss) > 1e-12 * np.abs(tr.loss[:-1]))),
                "ab_200": float(tr.ab[-1]), "ab_star": c.ab_star}
            if kind == "diagonal" and not dense:  # GD from a diagonal init is the reduced map
                land = reduced_landing(p, q, [eta], c.c1, c.c2, modified=False)
                row["regime_asymptotic"] = asym[diag_starts.index((p, q))].value
                if land.converged[0]:
                    a, b = land.a[0], land.b[0]
                    lim_th = diagonal_init(d, a, b).numpy()
                    row |= {"landing_steps": land.steps[0], "ab_limit": land.ab[0],
                            "delta_limit": land.delta[0], "delta0": land.delta0}
                else:
                    lim_th = None
            else:  # the flow's limit from this start: the minimiser GD converges to
                lim_th = flow_to_fixed_point(f, th0)[0].theta
                row["regime_asymptotic"] = None
            if lim_th is not None:
                pt = point_limit(f, lim_th)
                mesa = mesa_check(torch.from_numpy(lim_th), xs)
                row |= {"negative_coordinates": int((diagonal_entries(lim_th)[0] < 0).sum()),
                        "limit_critical_step": pt.critical_step,
                        "eta_over_limit_critical": eta / pt.critical_step,
                        "limit_top_mode": pt.top_mode, "mesa_rel_err": mesa.max_rel_err,
                        "ab_limit_over_star": mesa.ab / c.ab_star}
            rows.append(row)
            print(f"{label:>15} {kind:>8} {p!s:>6} {q!s:>5}: ηλ {row['eta_lambda_start']:.3f}"
                  f"→max {row['eta_lambda_max']:.3f}, 200 steps: {row['regime_200']}, "
                  f"then {row['regime_asymptotic']}, η/η*(limit) "
                  f"{row.get('eta_over_limit_critical', math.nan):.4f}", flush=True)
    return rows, limits


def onset_checks(d: int, T: int) -> list[dict[str, float]]:
    """Section 2's check by GD itself (gaussian σ = 1)."""
    from mesadyn.analysis.fixedpoint import balanced_point
    from mesadyn.analysis.gd_limits import flattest_point, orbit_theta, point_limit
    from mesadyn.analysis.gd_map import onset_of_instability
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.process import gaussian

    fam = gaussian(d, 1.0)
    f = make_field(FieldSpec("exact", fam, T))
    fp = balanced_point(fam, T)
    out = []
    for name, alpha in (("balanced", 1.0), ("flattest", flattest_point(f, fp).alpha)):
        th = orbit_theta(fp, alpha)
        t0 = time.process_time()
        observed, predicted = onset_of_instability(f, th, rtol=1e-7)
        out.append({"point": name, "alpha": alpha, "predicted": predicted,
                    "observed": observed, "relative_error": observed / predicted - 1,
                    "cpu_s": time.process_time() - t0,
                    "top_mode": point_limit(f, th).top_mode})
    return out


def orbits(dims: list[tuple[int, int]]) -> dict[str, Any]:
    """Section 3: the flip and the period-2 branch, full space and reduced."""
    from mesadyn.analysis import gd_orbits as O
    from mesadyn.analysis.fixedpoint import balanced_point
    from mesadyn.analysis.gd_limits import flattest_point, orbit_theta
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    out: dict[str, Any] = {}
    for d, T in dims:
        fam = gaussian(d, 1.0)
        f = make_field(FieldSpec("exact", fam, T))
        fp = balanced_point(fam, T)
        flat = flattest_point(f, fp)
        gd = O.FieldMap(f, orbit_theta(fp, flat.alpha))
        flip = O.flip_point(gd, gd.coords(gd.base), (0.5 * flat.eta_max, 1.5 * flat.eta_max))
        br = O.follow_period2(gd, flip, 1.3 * flip.eta)
        c = constants(fam, T)
        rflip = O.flip_point(O.ReducedMap(c.c1, c.c2), O.ReducedMap(c.c1, c.c2).balanced(),
                             (0.5 / c.c2, 2 / c.c2))
        rbr = O.follow_period2(O.ReducedMap(c.c1, c.c2), rflip, 1.3 * rflip.eta)
        unstable = br.eta[~br.stable]
        out[f"d={d},T={T}"] = {
            "flip_eta": flip.eta, "eta_max_flattest": flat.eta_max,
            "flip_mode_balance": flip.mode_balance, "branch_points": br.points,
            "branch_status": str(br.status), "max_residual": br.max_residual,
            "stable_until": float(unstable.min()) / flip.eta if unstable.size else None,
            "reduced_flip_eta": rflip.eta, "reduced_flip_times_c2": rflip.eta * c.c2,
            "reduced_max_residual": rbr.max_residual, "branch": br, "reduced_branch": rbr}
        print(f"flip d={d},T={T}: η={flip.eta:.12g} (2/λ_max {flat.eta_max:.12g}), branch "
              f"{br.points} points, max|G²θ−θ| {br.max_residual:.1e}; reduced η c2 = "
              f"{rflip.eta * c.c2:.15f}", flush=True)
    return out


def phase(out: Path, quick: bool, marks_red: list[Any], marks_slice: list[Any],
          marks_full: dict[str, list[Any]]) -> dict[str, Any]:
    """Section 4: the phase diagrams (figures and the regime counts)."""
    from mesadyn.analysis.fixedpoint import balanced_point
    from mesadyn.analysis.gd_batch import field_regimes, reduced_regimes
    from mesadyn.analysis.gd_limits import point_limit
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import diagonal_init, gaussian_init
    from mesadyn.plots import save
    from mesadyn.plots.gd_phase import phase_diagram
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    n = 80 if quick else 300
    steps_red = 1000 if quick else 4000
    c = constants(gaussian(3, 1.0), 20)  # any (c1, c2): the coordinates are universal
    k = np.geomspace(3e-3, 3.0, n)
    x = np.geomspace(1e-2, 30.0, n)
    u = 1.0 / math.sqrt(c.c1 / c.c2)  # a = x · u
    diag = reduced_regimes(k[:, None] / c.c2, x[None, :] * u, x[None, :] * u, c.c1, c.c2,
                           steps_red).code.reshape(n, n)
    panels = [{"x": k, "y": x, "codes": diag, "logx": True, "logy": True, "marks": marks_red,
               "xlabel": r"$\eta c_2$", "ylabel": r"$a_0\sqrt{c_1/c_2} = b_0\sqrt{c_1/c_2}$",
               "title": r"(a) $a_0 = b_0$"}]
    for i, kk in enumerate((0.03, 0.6, 1.2, 1.5)):
        ab = np.linspace(-3.0, 12.0, n) if i == 0 else np.linspace(-4.0, 4.0, n)
        codes = reduced_regimes(kk / c.c2, ab[:, None] * u, ab[None, :] * u, c.c1, c.c2,
                                steps_red).code.reshape(n, n)
        panels.append({"x": ab, "y": ab, "codes": codes, "xlabel": r"$a_0\sqrt{c_1/c_2}$",
                       "marks": marks_slice if i == 0 else [],
                       "ylabel": r"$b_0\sqrt{c_1/c_2}$" if i == 0 else "",
                       "title": f"({'bcde'[i]}) $\\eta c_2 = {kk:g}$"})
    fig, _ = phase_diagram(panels, title="reduced map (Lemma 5.3), regimes after "
                           f"{steps_red} steps", aspect=0.26)
    for ext in ("pdf", "png"):
        save(fig, out / f"phase-reduced.{ext}")
    # the full space at d = 3, T = 20
    fam = gaussian(3, 1.0)
    f = make_field(FieldSpec("exact", fam, 20))
    lam_bal = point_limit(f, balanced_point(fam, 20)).lambda_max
    ne, ny = (20, 12) if quick else (40, 25)
    steps = 300 if quick else 1000
    ratio = np.geomspace(3e-3, 2.5, ne)
    sw = np.geomspace(1e-3, 0.3, ny)
    th = np.stack([gaussian_init(3, s, seed=1).numpy() for _ in ratio for s in sw])
    eta = np.repeat(2 * ratio / lam_bal, ny)
    t0 = time.perf_counter()
    g = field_regimes(f, th, eta, steps).code.reshape(ne, ny)
    wall_g = time.perf_counter() - t0
    s_star = math.sqrt(c.ab_star)
    y = np.geomspace(0.05, 12.0, ny)
    pert = 1e-6 * gaussian_init(3, 1.0, seed=2).numpy()
    th = np.stack([diagonal_init(3, v * s_star, v * s_star).numpy() + pert
                   for _ in ratio for v in y])
    dg = field_regimes(f, th, eta, steps).code.reshape(ne, ny)
    fig, _ = phase_diagram([
        {"x": ratio, "y": sw, "codes": g, "logx": True, "logy": True,
         "marks": marks_full["gaussian"],
         "xlabel": r"$\eta/\eta^*_{\rm balanced}$", "ylabel": r"$\sigma_w$",
         "title": "(a) Gaussian init"},
        {"x": ratio, "y": y, "codes": dg, "logx": True, "logy": True,
         "marks": marks_full["diagonal"],
         "xlabel": r"$\eta/\eta^*_{\rm balanced}$",
         "ylabel": r"$a_0/\sqrt{ab^*} = b_0/\sqrt{ab^*}$",
         "title": r"(b) $a_0 = b_0$ (+$10^{-6}$ noise)"}],
        title=f"full space, exact field, d = 3, T = 20, {steps} steps")
    for ext in ("pdf", "png"):
        save(fig, out / f"phase-full.{ext}")
    return {"reduced_points": int(diag.size + 4 * n * n), "reduced_steps": steps_red,
            "full_runs": int(g.size + dg.size), "full_steps": steps,
            "full_wall_s_gaussian_batch": wall_g, "lambda_balanced_d3": lam_bal}


def landing(out: Path, d: int, T: int) -> dict[str, Any]:
    """Section 5: where GD lands."""
    from mesadyn.analysis.fixedpoint import balanced_point
    from mesadyn.analysis.gd_landing import field_landing, reduced_landing
    from mesadyn.analysis.gd_limits import point_limit
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import gaussian_init
    from mesadyn.plots import save
    from mesadyn.plots.gd_phase import landing_figure
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    c = constants(gaussian(d, 1.0), T)
    etas = np.geomspace(1e-3, 1.05, 25) / c.c2
    lands = {f"({a0:g}, {b0:g})": reduced_landing(a0, b0, etas, c.c1, c.c2)
             for a0, b0 in DIAGONAL_INITS + ((0.3, 1.0), (1.0, 0.4))}
    fig, _ = landing_figure(lands, title=f"reduced map, gaussian σ=1, d={d}, T={T}")
    for ext in ("pdf", "png"):
        save(fig, out / f"landing.{ext}")
    fam = gaussian(3, 1.0)
    f = make_field(FieldSpec("exact", fam, 20))
    lam = point_limit(f, balanced_point(fam, 20)).lambda_max
    full = field_landing(f, gaussian_init(3, 0.01, seed=1).numpy(),
                         [2 * r / lam for r in (0.05, 0.3, 0.8, 1.1)], max_steps=60_000)
    return {"reduced": {k: v.to_dict() for k, v in lands.items()},
            "full_d3_gaussian_init": {"eta_over_eta_star": [0.05, 0.3, 0.8, 1.1],
                                      **full.to_dict()}}


def central(out: Path, d: int, T: int, steps: int) -> dict[str, Any]:
    """Section 6: the central flow past the flattest point's limit."""
    from mesadyn.analysis.central_flow import compare_central
    from mesadyn.analysis.fixedpoint import balanced_point
    from mesadyn.analysis.gd_limits import flattest_point
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import gaussian_init
    from mesadyn.plots import save
    from mesadyn.plots.gd_phase import central_flow_figure
    from mesadyn.process import gaussian

    fam = gaussian(d, 1.0)
    f = make_field(FieldSpec("exact", fam, T))
    eta_max = flattest_point(f, balanced_point(fam, T)).eta_max
    res = {}
    for factor in (1.05, 0.95):
        t0 = time.process_time()
        cmp = compare_central(f, gaussian_init(d, 0.01, seed=1).numpy(), factor * eta_max,
                              steps)
        res[f"{factor:g}·eta_max"] = {**cmp.to_dict(), "eta_max": eta_max,
                                      "cpu_s": time.process_time() - t0}
        fig, _ = central_flow_figure(cmp, title=f"gaussian σ=1, d={d}, T={T}, Gaussian init "
                                     f"σ_w=0.01, η = {factor:g}·η_max = {factor * eta_max:.4g}")
        for ext in ("pdf", "png"):
            save(fig, out / f"central-flow-{factor:g}.{ext}")
        print(f"central flow at {factor}·η_max: loss gap {cmp.central_loss_gap_mean:.4f} "
              f"(modified {cmp.modified_loss_gap_mean:.4f}), θ gap at the end "
              f"{cmp.central_theta_gap_end:.4f} (modified {cmp.modified_theta_gap_end:.4f})",
              flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)

    from mesadyn.analysis.fixedpoint import balanced_point
    from mesadyn.analysis.gd_limits import point_limit, stability_limits
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.io import to_json
    from mesadyn.plots import save
    from mesadyn.plots.gd_phase import Mark, period2_figure, stability_figure
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    d, T = (3, 20) if args.quick else (5, 100)
    start = time.process_time()
    summary: dict[str, Any] = {"d": d, "T": T, "steps": 200}
    rows, limits = paper_runs(d, T, 200)
    summary["paper_runs"], summary["limits"] = rows, limits
    summary["onset"] = onset_checks(d, T)
    orb = orbits([(3, 20)] if args.quick else [(3, 20), (5, 100)])
    summary["orbits"] = {k: {kk: vv for kk, vv in v.items() if "branch" not in kk or
                             kk == "branch_points" or kk == "branch_status"}
                         for k, v in orb.items()}
    fig, _ = period2_figure({f"full space {k}": v["branch"] for k, v in orb.items()}
                            | {"reduced map, d=3,T=20": orb["d=3,T=20"]["reduced_branch"]},
                            title="period-2 branches from the flip, gaussian σ=1")
    for ext in ("pdf", "png"):
        save(fig, out / f"period2.{ext}")
    # the paper's runs on the phase diagrams
    marks_red: list[Mark] = []
    marks_slice: list[Mark] = []
    marks_full: dict[str, list[Mark]] = {"gaussian": [], "diagonal": []}
    for r in rows:
        fam_row = next(x for x in TABLE1_ROWS if x[0] == r["family"])
        fam = _family(fam_row[1], d, fam_row[2])
        c = constants(fam, T)
        lam = limits[r["family"]]["lambda_max"]
        if r["init"] == "diagonal" and r["family"] != "ones":
            shape = {(0.1, 0.1): "o", (0.5, 1.5): "^", (2.0, 2.0): "s"}[(r["a0"], r["b0"])]
            label = f"Table 1, ({r['a0']:g}, {r['b0']:g})"
            u = math.sqrt(c.c1 / c.c2)
            if r["a0"] == r["b0"]:
                marks_red.append(Mark(r["eta"] * c.c2, r["a0"] * u, label, shape))
                marks_full["diagonal"].append(Mark(r["eta"] * lam / 2,
                                                   r["a0"] / math.sqrt(c.ab_star), label, shape))
            marks_slice.append(Mark(r["a0"] * u, r["b0"] * u, label, shape))
        elif r["init"] == "gaussian" and r["family"] == "gaussian σ=1":
            marks_full["gaussian"].append(Mark(r["eta"] * lam / 2, r["sigma_w"],
                                               "Table 1, Gaussian init (Fig. 5)", "D"))
    summary["phase"] = phase(out, args.quick, marks_red, marks_slice, marks_full)
    # the stability limits of gaussian σ = 1 along the hyperbola
    fam = gaussian(d, 1.0)
    f = make_field(FieldSpec("exact", fam, T))
    fp = balanced_point(fam, T)
    eta_show = 0.95 * limits["gaussian σ=1"]["eta_max"]
    lim = stability_limits(f, fp, eta=eta_show, constants=constants(fam, T))
    summary["stability_gaussian1"] = lim.to_dict()
    fig, _ = stability_figure(lim, title=f"gaussian σ=1, d={d}, T={T}: critical steps along "
                              "the hyperbola")
    for ext in ("pdf", "png"):
        save(fig, out / f"stability.{ext}")
    summary["landing"] = landing(out, d, T)
    summary["central"] = central(out, d, T, 150 if args.quick else 300)
    summary["balanced_lambda_max"] = point_limit(f, fp).lambda_max
    summary["cpu_s"] = time.process_time() - start
    (out / "summary.json").write_text(to_json(summary))
    print(f"wrote {out / 'summary.json'} and the figures; {summary['cpu_s']:.0f} CPU-s",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Sampled fields: the polynomial form (empirical Ĝ, Ĉ) against the direct prefix-sum path.

For each (d, T, N) given it times, on a Gaussian Monte-Carlo field (seed 1) at a dense
θ: the direct path's loss+gradient (median of ``--repeats`` after a warm-up that also builds the
cached prefix Grams) and full Hessian (measured, or 6d² HVPs extrapolated from one HVP when
``--max-direct-hessian-s`` would be exceeded), the polynomial's build (measured on all N draws,
or on ``--build-subset`` draws and scaled by N: the build is one pass over the draws, linear in
N), and the polynomial's loss+gradient and Hessian.  It also prints the cost model's predictions
(:func:`mesadyn.field._sampled.choose_form`) so they can be compared, and the agreement of the
two forms.  ``--flow`` runs the Monte-Carlo flow at d = 3, T = 20, N = 10⁵ with LSODA and the
polynomial's exact Hessian to max|∇L̂| < 1e-9.

    OMP_NUM_THREADS=2 python benchmarks/bench_sampled.py [--sizes 2,10,20000 3,20,100000 ...]
        [--repeats 3] [--build-subset 1000] [--flow] [--json out.json]

The machine's load average is printed with the table: on a shared machine every time scales.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

import torch


def median_time(fn: Callable[[], object], repeats: int, warm: bool = True) -> float:
    if warm:
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench_size(d: int, T: int, N: int, repeats: int, build_subset: int | None,
               max_direct_hessian_s: float) -> dict[str, object]:
    from mesadyn.field import MonteCarloField
    from mesadyn.field._empirical import EmpiricalPolynomial, build_moments
    from mesadyn.field._sampled import choose_form
    from mesadyn.model import diagonal_init, gaussian_init
    from mesadyn.process import gaussian

    fam = gaussian(d, 1.0)
    t0 = time.perf_counter()
    f = MonteCarloField(fam, T, samples=N, seed=1, batches=32, device="cpu", form="direct")
    draw_s = time.perf_counter() - t0
    theta = diagonal_init(d, 0.5, 1.5) + gaussian_init(d, 0.05, seed=2)
    v = torch.randn(theta.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    row: dict[str, object] = {"d": d, "T": T, "N": N, "draw_s": draw_s}
    t0 = time.perf_counter()
    L_d, g_d = f.direct_loss_and_grad(theta)
    row["direct_first_lg_s"] = time.perf_counter() - t0
    row["direct_lg_s"] = median_time(lambda: f.direct_loss_and_grad(theta), repeats, warm=False)
    hvp_s = median_time(lambda: f.direct_hvp(theta, v), 1, warm=False)
    row["direct_hvp_s"] = hvp_s
    n_act = 6 * d * d
    if hvp_s * n_act <= max_direct_hessian_s:
        t0 = time.perf_counter()
        H_d = f.direct_hessian(theta)
        row["direct_hessian_s"] = time.perf_counter() - t0
        row["direct_hessian_measured"] = True
    else:
        H_d = None
        row["direct_hessian_s"] = hvp_s * n_act
        row["direct_hessian_measured"] = False
    # the polynomial form
    sub = N if build_subset is None or build_subset >= N else build_subset
    t0 = time.perf_counter()
    mom = build_moments(f.x1[:sub], f.lam[:sub], T)
    build = time.perf_counter() - t0
    row["build_s"] = build * N / sub
    row["build_measured_on"] = sub
    if sub == N:
        t0 = time.perf_counter()
        poly = EmpiricalPolynomial(fam, T, mom)
        row["wrap_s"] = time.perf_counter() - t0
        row["poly_lg_s"] = median_time(lambda: poly.loss_and_grad(theta), max(repeats, 5))
        row["poly_hvp_s"] = median_time(lambda: poly.hvp(theta, v), max(repeats, 5))
        row["poly_hessian_s"] = median_time(lambda: poly.hessian(theta), repeats)
        L_p, g_p = poly.loss_and_grad(theta)
        row["rel_loss"] = float(abs(L_p - L_d) / abs(L_d))
        row["rel_grad"] = float((g_p - g_d).abs().max() / g_d.abs().max())
        if H_d is not None:
            H_p = poly.hessian(theta)
            row["rel_hessian"] = float((H_p - H_d).abs().max() / H_d.abs().max())
    else:  # evaluation cost does not depend on N: time it on the subset's tensors
        poly = EmpiricalPolynomial(fam, T, mom)
        row["poly_lg_s"] = median_time(lambda: poly.loss_and_grad(theta), max(repeats, 5))
        row["poly_hvp_s"] = median_time(lambda: poly.hvp(theta, v), max(repeats, 5))
        row["poly_hessian_s"] = median_time(lambda: poly.hessian(theta), repeats)
    c = choose_form(d, T, N)
    row.update(model_form=str(c.form), model_direct_lg_s=c.direct_eval_s,
               model_build_s=c.build_s, model_poly_lg_s=c.poly_eval_s)
    return row


def bench_flow(d: int = 3, T: int = 20, N: int = 100_000) -> dict[str, object]:
    from mesadyn.field import MonteCarloField
    from mesadyn.flow import integrate
    from mesadyn.model import diagonal_init
    from mesadyn.process import gaussian
    from mesadyn.reduced import ReducedSystem

    fam = gaussian(d, 1.0)
    t0 = time.perf_counter()
    f = MonteCarloField(fam, T, samples=N, seed=1, batches=32, device="cpu")
    f.build()
    build = time.perf_counter() - t0
    a0, b0 = 0.5, 1.5
    # the sampled fixed point is off the diagonal structure: its slow directions need far more
    # than the reduced horizon; the run stops at max|∇L̂| < 1e-9 (LSODA's steps grow freely)
    horizon = 1e4 * ReducedSystem.from_family(fam, T).horizon(a0, b0)
    t0 = time.perf_counter()
    res = integrate(f, diagonal_init(d, a0, b0), t_end=horizon, solver="scipy:LSODA",
                    rtol=1e-10, atol=1e-12, steady_tol=1e-9)
    wall = time.perf_counter() - t0
    _, g = f.loss_and_grad(torch.as_tensor(res.theta[-1]))
    return {"d": d, "T": T, "N": N, "form": str(f.form), "draw_and_build_s": build,
            "flow_s": wall, "total_s": build + wall, "status": str(res.status),
            "t_end": float(res.t[-1]), "horizon": horizon, "nfev": res.nfev, "njev": res.njev,
            "grad_max": float(g.abs().max())}


def bench_spread(Ns: list[int], K: int, d: int = 2, T: int = 6) -> list[dict[str, object]]:
    """The Monte-Carlo flow's end point ab (mean over coordinates)
    over K independent sample sets per N, against the exact ab* (Theorem 4.1).  The spread
    should shrink like 1/√N and the bias like 1/N."""
    import math

    from mesadyn.field import MonteCarloField
    from mesadyn.flow import integrate
    from mesadyn.model import ab, diagonal_init
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    fam = gaussian(d, 1.0)
    ab_star = constants(fam, T).ab_star
    out = []
    for N in Ns:
        ends = []
        t0 = time.perf_counter()
        for k in range(K):
            f = MonteCarloField(fam, T, samples=N, seed=1000 + k, batches=4, device="cpu")
            res = integrate(f, diagonal_init(d, 0.5, 1.5), t_end=1e6, solver="scipy:LSODA",
                            rtol=1e-10, atol=1e-12, steady_tol=1e-9)
            ends.append(float(ab(torch.as_tensor(res.theta[-1])).mean()))
        mean = statistics.fmean(ends)
        sd = statistics.stdev(ends)
        se = sd / math.sqrt(K)
        out.append({"N": N, "K": K, "ab_star": ab_star, "mean_ab": mean, "bias": mean - ab_star,
                    "bias_se": se, "sd": sd, "sd_sqrtN": sd * math.sqrt(N),
                    "ci95": [mean - 1.96 * se, mean + 1.96 * se],
                    "covers": abs(mean - ab_star) <= 1.96 * se,
                    "wall_s": time.perf_counter() - t0})
        print(json.dumps(out[-1]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="*", default=["2,10,20000", "3,20,100000", "5,100,10000"],
                    help="d,T,N triples")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build-subset", type=int, default=None,
                    help="build on this many draws and scale by N (the build is linear in N)")
    ap.add_argument("--max-direct-hessian-s", type=float, default=120.0,
                    help="measure the direct Hessian only if 6d² HVPs are predicted below this")
    ap.add_argument("--flow", action="store_true", help="also run the MC flow d=3, T=20, N=1e5")
    ap.add_argument("--no-sizes", action="store_true", help="skip the table (e.g. only --flow)")
    ap.add_argument("--spread", nargs="*", type=int, default=None,
                    help="sample sizes N for the end-point spread/bias study (d=2, T=6)")
    ap.add_argument("--spread-k", type=int, default=12, help="sample sets per N")
    ap.add_argument("--json", default=None, help="write the rows to this file")
    args = ap.parse_args()
    out: dict[str, object] = {
        "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
        "loadavg_before": os.getloadavg(), "torch": torch.__version__}
    rows = []
    if not args.no_sizes:
        for spec in args.sizes:
            d, T, N = (int(x) for x in spec.split(","))
            rows.append(bench_size(d, T, N, args.repeats, args.build_subset,
                                   args.max_direct_hessian_s))
            print(json.dumps(rows[-1]), flush=True)
    out["rows"] = rows
    if args.flow:
        out["flow"] = bench_flow()
        print(json.dumps(out["flow"]), flush=True)
    if args.spread:
        out["spread"] = bench_spread(args.spread, args.spread_k)
    out["loadavg_after"] = os.getloadavg()
    print(f"\nthreads={out['threads']} load average before/after: "
          f"{out['loadavg_before']} / {out['loadavg_after']}")
    if rows:
        print("\n| d | T | N | direct L+∇L s | direct Hessian s | build s | poly L+∇L s "
              "| poly Hessian s | break-even evals | model form |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            gain = float(r["direct_lg_s"]) - float(r["poly_lg_s"])  # type: ignore[arg-type]
            be = float(r["build_s"]) / gain if gain > 0 else float("inf")  # type: ignore[arg-type]
            hess = f"{r['direct_hessian_s']:.3g}" + (
                "" if r["direct_hessian_measured"] else " (est.)")
            build = f"{r['build_s']:.3g}" + ("" if r["build_measured_on"] == r["N"] else
                                            f" (from {r['build_measured_on']} draws)")
            print(f"| {r['d']} | {r['T']} | {r['N']} | {r['direct_lg_s']:.3g} | {hess} | "
                  f"{build} | {r['poly_lg_s']:.3g} | {r['poly_hessian_s']:.3g} | {be:.3g} | "
                  f"{r['model_form']} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()

"""Study: how far is the paper's gradient descent from the gradient flow it
approximates, and how much of the gap does the first-order modified flow of backward error
analysis, dθ/dτ = −∇L − (η/2)∇²L∇L, close?

1. Every Table 1 step size on the exact field (population GD) at the paper's d = 5, T = 100,
   200 steps from the diagonal init a0 = b0 = 0.1: max_k ‖θ_k − θ(kη)‖, the same against the
   modified flow, their ratio, and η·λ_max(∇²L) along GD — the expansion parameter of
   backward error analysis (``mesadyn.workflows.gdflow``).
2. gaussian σ = 1 at the paper's two other inits (0.5, 1.5), (2, 2).
3. The orders in η (gaussian σ = 1, exact): η ∈ {2, 1, ½, ¼}·η₁ at the fixed horizon
   τ = 200·η₁ — the flow gap should scale like η, the modified-flow gap like η².
4. The solver's share: the gaps at rtol 1e-11 against rtol 1e-13.
5. The finite-sample field (one training set of m sequences, the paper's GD) for gaussian
   σ = 1, and the spread of GD end points over training sets against m, with the fitted slope
   (−1/2 expected), at d = 5, T = 100 and d = 3, T = 20 (m ∈ {100, 300, 1000, 3000}, 8 seeds
   each).

Writes ``OUT/summary.json`` and ``OUT/gd-vs-flow.pdf`` (+ ``.png``).  ``--quick`` runs
everything at d = 3, T = 20 with fewer seeds (a smoke test, about 30 CPU-s); the full study
takes about 15 CPU-minutes, most of it building the d = 5, T = 100 training sets.

Run: ``python studies/gd_vs_flow.py --out DIR [--seeds 8] [--quick]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

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


def _line(label: str, block: dict[str, Any]) -> str:
    return (f"{label:>28}: η={block['lr']:.0e} gap(flow)={block['gap_flow']['max_abs']:.3e} "
            f"(rel {block['gap_flow']['max_rel']:.2e}, ΔL {block['gap_flow']['max_loss']:.2e})"
            f"  gap(modified)={block['gap_modified']['max_abs']:.3e} "
            f"(ΔL {block['gap_modified']['max_loss']:.2e})  ratio={block['ratio']:.1f}  "
            f"ηλ_max start {block['eta_lambda_start']:.3f}, max {block['eta_lambda_max']:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)

    import numpy as np

    from mesadyn.analysis.gd_flow import compare_gd_flow
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.io import to_json
    from mesadyn.model import diagonal_init
    from mesadyn.plots import save
    from mesadyn.plots.gdflow import gd_vs_flow
    from mesadyn.process import gaussian
    from mesadyn.workflows import gdflow as wf

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    d, T = (3, 20) if args.quick else (5, 100)
    seeds = 4 if args.quick else args.seeds
    start = time.process_time()
    summary: dict[str, Any] = {"d": d, "T": T, "steps": 200, "init": [0.1, 0.1]}

    # 1. Table 1 on the exact field
    rows = []
    for label, x1, kw in TABLE1_ROWS:
        res = wf.run(wf.Config(x1=x1, d=d, T=T, m=0, **kw))
        rows.append({"case": label, **res.exact})
        print(_line(label, res.exact), flush=True)
    summary["table1_exact"] = rows

    # 2. the paper's other inits
    inits = []
    for a0, b0 in ((0.5, 1.5), (2.0, 2.0)):
        res = wf.run(wf.Config(d=d, T=T, m=0, a0=a0, b0=b0))
        inits.append({"a0": a0, "b0": b0, **res.exact})
        print(_line(f"gaussian σ=1, init ({a0}, {b0})", res.exact), flush=True)
    summary["inits_exact"] = inits

    # 3. orders in η at a fixed horizon, 4. the solver's share
    field = make_field(FieldSpec("exact", gaussian(d, 1.0), T))
    theta0 = diagonal_init(d, 0.1, 0.1)
    eta1 = 1e-4
    scan = []
    for f in (2.0, 1.0, 0.5, 0.25):
        comp = compare_gd_flow(field, theta0, f * eta1, round(200 / f))
        scan.append({"lr": f * eta1, "steps": round(200 / f), "gap_flow": comp.gap_flow.max_abs,
                     "gap_modified": comp.gap_modified.max_abs, "ratio": comp.ratio})
        print(f"η = {f:g}·η₁: gap(flow) {comp.gap_flow.max_abs:.4e}, gap(modified) "
              f"{comp.gap_modified.max_abs:.4e}, ratio {comp.ratio:.1f}", flush=True)
    le = np.log([s["lr"] for s in scan])
    order_flow = float(np.polyfit(le, np.log([s["gap_flow"] for s in scan]), 1)[0])
    order_mod = float(np.polyfit(le, np.log([s["gap_modified"] for s in scan]), 1)[0])
    print(f"orders in η: flow gap {order_flow:.3f} (1 expected), modified gap {order_mod:.3f} "
          "(2 expected)", flush=True)
    summary["eta_scan"] = {"tau": 200 * eta1, "rows": scan, "order_flow": order_flow,
                           "order_modified": order_mod}
    tight = compare_gd_flow(field, theta0, eta1, 200, rtol=1e-13, atol=1e-15)
    base = next(s for s in scan if s["lr"] == eta1)
    tol = {"rtol": 1e-13, "gap_flow": tight.gap_flow.max_abs,
           "gap_modified": tight.gap_modified.max_abs,
           "change_flow": abs(tight.gap_flow.max_abs - base["gap_flow"]),
           "change_modified": abs(tight.gap_modified.max_abs - base["gap_modified"])}
    summary["tolerance_check"] = tol
    print(f"rtol 1e-11 → 1e-13 changes the gaps by {tol['change_flow']:.2e} (flow) and "
          f"{tol['change_modified']:.2e} (modified)", flush=True)

    # 5. the finite field and the end-point spread
    spreads: dict[str, Any] = {}
    sizes = (100, 300, 1000, 3000) if not args.quick else (100, 300)
    paper = wf.run(wf.Config(d=d, T=T, m=args.m, spread_m=sizes, spread_seeds=seeds),
                   progress=None)
    assert paper.finite is not None and paper.spread is not None
    print(_line(f"finite m={args.m}, d={d}, T={T}", paper.finite), flush=True)
    spreads[f"d={d}, T={T}"] = paper.spread
    summary["finite"] = paper.finite
    summary["spread"] = {f"d={d},T={T}": paper.spread}
    fit = paper.spread["fit"]
    print(f"spread d={d}, T={T}: {paper.spread['spread']} → slope {fit['slope']:.3f} ± "
          f"{fit['slope_se_scaled']:.3f}", flush=True)
    if not args.quick:
        small = wf.run(wf.Config(d=3, T=20, m=0, spread_m=(100, 300, 1000, 3000),
                                 spread_seeds=seeds))
        assert small.spread is not None
        spreads["d=3, T=20"] = small.spread
        summary["spread"]["d=3,T=20"] = small.spread
        fit = small.spread["fit"]
        print(f"spread d=3, T=20: {small.spread['spread']} → slope {fit['slope']:.3f} ± "
              f"{fit['slope_se_scaled']:.3f}", flush=True)

    summary["cpu_s"] = time.process_time() - start
    (out / "summary.json").write_text(to_json(summary))
    fig, _ = gd_vs_flow(
        {"exact": paper.comparisons["exact"], f"finite m={args.m}": paper.comparisons["finite"]},
        ratios=[(f"{r['case']} (ηλ≤{r['eta_lambda_max']:.2f})", r["ratio"]) for r in rows]
        + [(f"σ=1, init ({r['a0']:g}, {r['b0']:g}) (ηλ≤{r['eta_lambda_max']:.2f})", r["ratio"])
           for r in inits],
        spreads=spreads)
    save(fig, out / "gd-vs-flow.pdf")
    save(fig, out / "gd-vs-flow.png")
    print(f"wrote {out / 'summary.json'} and {out / 'gd-vs-flow.pdf'}; "
          f"{summary['cpu_s']:.0f} CPU-s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Study: from the paper's Gaussian init, where does the full flow go, and how long
does it sit at the saddle θ = 0?  For gaussian, sparse and ones, against σ_w.

For each family, one ensemble of N Gaussian starts (every entry N(0, σ_w²)) per σ_w
(``mesadyn.sweep.sweep_sigma``: batched solves to max|∇L| < steady_tol, in
resumable chunks).  Written to ``OUT``: ``summary.json`` (per family and σ_w the outcome
fractions — Theorem 4.1/4.3's branches, the dense branch, not converged — with 95% Wilson
intervals, the measured and predicted escape times, λ_top at the saddle, and for converged rows
max|ab − ab*|, the largest gradient-reachable off-diagonal entry and the inert entries' size),
the run files ``<family>-sigma_w<v>.nc`` (rerunning continues or reuses them), and the figures:
``<family>-fractions.pdf`` (outcome fractions against σ_w), ``<family>-<σ_w>-basins.pdf`` and
``<family>-<σ_w>-escape.pdf`` (PNG copies with ``--png``).

Run: ``python studies/ensemble_gaussian_init.py --out DIR [--n 200] [--d 3] [--T 20]
[--sigma-w 1e-2,1e-4,1e-6] [--steady-tol gaussian:1e-10,sparse:1e-8,ones:1e-8]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def _per_family(text: str, families: list[str]) -> dict[str, float]:
    """``"1e-8"`` (all) or ``"gaussian:1e-10,ones:1e-8"`` (others: 1e-8)."""
    if ":" not in text:
        return {f: float(text) for f in families}
    given = {k: float(v) for k, v in (p.split(":") for p in text.split(","))}
    return {f: given.get(f, 1e-8) for f in families}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--d", type=int, default=3)
    ap.add_argument("--T", type=int, default=20)
    ap.add_argument("--sigma-w", default="1e-2,1e-4,1e-6")
    ap.add_argument("--families", default="gaussian,sparse,ones")
    ap.add_argument("--steady-tol", default="gaussian:1e-10,sparse:1e-8,ones:1e-8",
                    help="one value, or family:value pairs")
    ap.add_argument("--t-end", type=float, default=None, help="horizon (default: automatic)")
    ap.add_argument("--chunk", type=int, default=200)
    ap.add_argument("--png", action="store_true", help="also write PNG copies of the figures")
    args = ap.parse_args(argv)

    from mesadyn.io import to_json
    from mesadyn.plots import save
    from mesadyn.plots.ensemble import basins, escape_histogram, fractions_vs_sigma
    from mesadyn.sweep import sweep_sigma
    from mesadyn.workflows import ensemble as wf

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    families = args.families.split(",")
    steady = _per_family(args.steady_tol, families)
    exts = ("pdf", "png") if args.png else ("pdf",)
    summary = []
    for fam in families:
        cfg = wf.Config(x1=fam, d=args.d, T=args.T, n=args.n, steady_tol=steady[fam],
                        t_end=args.t_end, chunk=args.chunk, out=str(out / f"{fam}.nc"))
        cpu = time.process_time()
        sweep = sweep_sigma(cfg, args.sigma_w)
        cpu = time.process_time() - cpu
        for sw, res in zip(sweep.sigma_w, sweep.runs, strict=True):
            stem = f"{fam}-{sw:g}"
            summary.append({"family": fam, "sigma_w": sw, **res.to_dict()})
            for ext in exts:
                save(basins(res.rows, res.ab_star)[0], out / f"{stem}-basins.{ext}")
                save(escape_histogram(res.rows)[0], out / f"{stem}-escape.{ext}")
            fr = {k: round(v["fraction"], 3) for k, v in res.fractions.items() if v["count"]}
            print(f"{stem}: {fr}; escape median {res.escape['measured_median']} (predicted "
                  f"{res.escape['predicted_median']}); λ_top {res.lambda_top:.6g}; "
                  f"max off-structure (converged) {res.off_structure_max_converged}; "
                  f"inert {res.n_inert} entries, max {res.off_inert_max:.3g}")
        for ext in exts:
            save(fractions_vs_sigma(sweep.sigma_w, sweep.fractions(),
                                    title=f"{fam}, d = {args.d}, T = {args.T}, "
                                          f"N = {args.n} per $\\sigma_w$")[0],
                 out / f"{fam}-fractions.{ext}")
        print(f"{fam}: {cpu:.1f} CPU s")
    (out / "summary.json").write_text(to_json({"runs": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

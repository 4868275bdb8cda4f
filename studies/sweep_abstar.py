"""Study: ab* from the full exact gradient flow against Theorem 4.1, over T and d (gaussian).

    python studies/sweep_abstar.py [--out runs/sweep_abstar] [--workers N] [--T 3,5,10] [--d 1,2]

Runs the sweep of ``studies/sweep_abstar.toml`` (``mesadyn integrate`` on the exact field,
from the diagonal init, to a steady state) with ``mesadyn.sweep`` — resumable: re-running skips
the points already done — then compares, at every (T, d):

* the flow's per-coordinate ``ab = diag(W^KQ_32) ⊙ diag(W^PV_12)`` at its end point (mean and
  spread over the d coordinates),
* Theorem 4.1's ``ab* = κ1 / (κ2 + κ3 H_{T−2}/(T−2))``, computed here from the moments of the
  gaussian family independently of the flow (κ1 = 3σ⁴, κ2 = 15σ⁶, κ3 = 3(d−1)σ⁶),
* the paper's T → ∞ value ``κ1/κ2 = 1/(5σ²)`` that its figures draw.

Writes ``OUT/sweep_abstar.png`` (ab against T per d, with both predictions; the relative error
of the flow against Theorem 4.1), ``OUT/sweep_abstar.md`` (the table) and
``OUT/sweep_abstar.json``.  Exits 1 if a point failed or a relative error exceeds ``--tol``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPEC = HERE / "sweep_abstar.toml"


def theorem_41(d: int, T: int, sigma: float) -> float:
    """Theorem 4.1 for gaussian(σ), from the moment table (not from mesadyn.theory)."""
    k1, k2, k3 = 3 * sigma**4, 15 * sigma**6, 3 * (d - 1) * sigma**6
    H = math.fsum(1.0 / k for k in range(1, T - 1))
    return k1 / (k2 + k3 * H / (T - 2))


def analyse(ds, sigma: float) -> list[dict]:
    """One row per (T, d): the flow's ab (mean, spread), Theorem 4.1, the T→∞ value."""
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    rows = []
    for T in ds["T"].values.tolist():
        for d in ds["d"].values.tolist():
            at = ds.sel(T=T, d=d)
            star = theorem_41(d, T, sigma)
            # the package's own formula must agree with the one written out above
            pkg = constants(gaussian(d, sigma), T).ab_star
            assert abs(pkg - star) <= 1e-14 * star, (T, d, pkg, star)
            row = {"T": T, "d": d, "status": str(at["point_status"].item()),
                   "ab_theorem_41": star, "ab_limit": 1 / (5 * sigma**2)}
            if row["status"] == "ok":
                ab = np.asarray(at["ab"].values, dtype=float)[:d]
                row.update(ab_mean=float(ab.mean()), ab_spread=float(ab.max() - ab.min()),
                           rel_error=float(np.max(np.abs(ab - star)) / star),
                           wall_s=float(at["point_wall_s"].item()))
                for key in ("grad_norm", "loss", "nfev", "converged"):
                    if key in at:
                        row[key] = at[key].item()
            else:
                row["error"] = str(at["point_error"].item())
            rows.append(row)
    return rows


def figure(rows: list[dict], sigma: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ds_ = sorted({r["d"] for r in rows})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(ds_)))
    Tgrid = np.unique(np.geomspace(3, max(r["T"] for r in rows), 200).astype(int))
    for c, d in zip(colors, ds_, strict=True):
        sub = [r for r in rows if r["d"] == d]
        ok = [r for r in sub if r["status"] == "ok"]
        ax1.plot(Tgrid, [theorem_41(d, int(T), sigma) for T in Tgrid], color=c, lw=1)
        ax1.plot([r["T"] for r in ok], [r["ab_mean"] for r in ok], "o", color=c, ms=4,
                 label=f"d = {d}")
        ax2.plot([r["T"] for r in ok], [max(r["rel_error"], 1e-17) for r in ok], "o-",
                 color=c, ms=4, lw=1, label=f"d = {d}")
    ax1.axhline(1 / (5 * sigma**2), color="k", ls="--", lw=1,
                label="T → ∞: κ1/κ2 = 1/(5σ²) (paper's figures)")
    ax1.set_xscale("log")
    ax1.set_xlabel("training length T")
    ax1.set_ylabel("ab at the end of the flow")
    ax1.set_title("full exact flow (dots) vs Theorem 4.1 (lines)")
    ax1.legend(fontsize=8)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("training length T")
    ax2.set_ylabel("max_j |ab_j − ab*| / ab*")
    ax2.set_title("relative error against Theorem 4.1")
    ax2.legend(fontsize=8)
    fig.suptitle(f"gaussian σ = {sigma:g}: ab* from the full exact gradient flow")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def table(rows: list[dict]) -> str:
    lines = ["| T | d | flow ab (mean) | spread over j | Theorem 4.1 ab* | rel. error | "
             "T→∞ 1/(5σ²) | max abs ∇L | converged | point time [s] |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['T']} | {r['d']} | failed: {r.get('error', '')} | | "
                         f"{r['ab_theorem_41']:.12g} | | {r['ab_limit']:.6g} | | | |")
            continue
        lines.append(f"| {r['T']} | {r['d']} | {r['ab_mean']:.12g} | {r['ab_spread']:.2e} | "
                     f"{r['ab_theorem_41']:.12g} | {r['rel_error']:.2e} | {r['ab_limit']:.6g} | "
                     f"{r.get('grad_norm', float('nan')):.1e} | {r.get('converged', '')} | "
                     f"{r['wall_s']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from mesadyn.errors import MesadynError
    from mesadyn.io import atomic_write_text, to_json
    from mesadyn.sweep import load_sweep, parse_spec, run_sweep

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/sweep_abstar")
    ap.add_argument("--spec", default=str(SPEC))
    ap.add_argument("--workers", type=int, default=None, help="default: all cores")
    ap.add_argument("--scheduler", default=None)
    ap.add_argument("--T", default=None, help="comma-separated subset of T (quick runs)")
    ap.add_argument("--d", default=None, help="comma-separated subset of d (quick runs)")
    ap.add_argument("--tol", type=float, default=1e-6, help="max allowed relative error")
    args = ap.parse_args(argv)

    raw = tomllib.loads(Path(args.spec).read_text(encoding="utf-8"))
    for axis in ("T", "d"):
        subset = getattr(args, axis)
        if subset:
            raw["axes"][axis] = [int(v) for v in subset.split(",")]
    try:
        spec = parse_spec(raw)
        from mesadyn.cli import progress_bar

        with progress_bar(f"sweep {spec.command}", total=spec.size) as bar:
            res = run_sweep(spec, args.out, workers=args.workers, scheduler=args.scheduler,
                            progress=bar)
    except MesadynError as exc:
        print(f"sweep_abstar: error: {exc}", file=sys.stderr)
        return 2
    sigma = float(spec.options.get("sigma", 1.0))
    rows = analyse(load_sweep(args.out), sigma)
    out = Path(args.out)
    figure(rows, sigma, out / "sweep_abstar.png")
    atomic_write_text(out / "sweep_abstar.md", table(rows))
    ok = [r for r in rows if r["status"] == "ok"]
    worst = max((r["rel_error"] for r in ok), default=float("nan"))
    summary = {"sweep": res.to_dict(), "max_rel_error": worst, "tol": args.tol,
               "n_ok": len(ok), "n_failed": len(rows) - len(ok), "rows": rows}
    atomic_write_text(out / "sweep_abstar.json", to_json(summary))
    print(table(rows))
    print(json.dumps({k: summary[k] for k in ("max_rel_error", "tol", "n_ok", "n_failed")}))
    print(f"sweep wall {res.wall_s:.1f} s, compute {res.compute_s:.1f} s, "
          f"{res.computed} computed, {res.skipped} reused, {res.workers} workers")
    return 0 if ok and len(ok) == len(rows) and worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())

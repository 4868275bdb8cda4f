"""Benchmark of ``mesadyn continue``: 200 points of the gaussian σ-branch.

d = 3, T = 20, the balanced point of Theorem 4.1 continued in σ from 0.5 towards 2 until 200
points are accepted (``max_steps = 199``), with everything the command does at each point:
the corrector (exact Hessian, exact ∂∇L/∂p from the σ² / σ⁴ / σ⁶ structure), the tangent, the
non-symmetry spectrum, and the analysis (the field built at that σ for the residual, the loss,
ab, the off-diagonal mass, the invariant, the full spectrum of −∇²L classified as ``mesadyn
stability`` does).  Target: under 60 s on 2 cores.  The load average before and after is
printed, because the machine this runs on may be shared.

    OMP_NUM_THREADS=1 python benchmarks/bench_continuation.py [--points 200] [--d 3] [--T 20]
    [--json out.json]

Prints the wall time (total, and the part spent in the per-point analysis), the points per
second, the largest max|∇L| and the largest |ab − ab*(σ)|/ab* over the points.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=200)
    ap.add_argument("--d", type=int, default=3)
    ap.add_argument("--T", type=int, default=20)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    import numpy as np
    import torch

    from mesadyn.process import gaussian
    from mesadyn.theory import constants
    from mesadyn.workflows import continuation as wf

    load_before = os.getloadavg()
    cfg = wf.Config(x1="gaussian", d=a.d, T=a.T, parameter="sigma", start=0.5, stop=2.0,
                    points=a.points, max_steps=a.points - 1, switch=False)
    in_callback = [0.0]
    # the per-point analysis runs inside follow() (mesadyn.analysis.continuation._follow)
    import mesadyn.analysis.continuation._follow as cont

    original = cont.analyse_point

    def timed(*args: object, **kw: object) -> cont.PointAnalysis:
        t = time.perf_counter()
        out = original(*args, **kw)  # type: ignore[arg-type]
        in_callback[0] += time.perf_counter() - t
        return out

    cont.analyse_point = timed
    t0 = time.perf_counter()
    res = wf.run(cfg)
    wall = time.perf_counter() - t0
    cont.analyse_point = original
    load_after = os.getloadavg()
    b = res.branches[0]
    star = np.array([constants(gaussian(a.d, s), a.T).ab_star for s in b.p])
    rel = float(np.max(np.abs(b.ab - star[:, None]) / star[:, None]))
    row = {
        "d": a.d, "T": a.T, "points": int(b.p.size), "sigma_last": float(b.p[-1]),
        "wall_s": round(wall, 2), "analysis_s": round(in_callback[0], 2),
        "corrector_s": round(wall - in_callback[0], 2),
        "points_per_s": round(b.p.size / wall, 2), "max_residual": float(b.residual.max()),
        "max_ab_rel_error": rel, "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after], "cpus": os.cpu_count(),
        "torch": torch.__version__, "python": platform.python_version(),
        "target_s": 60.0, "pass": bool(wall < 60.0 and b.p.size >= a.points),
    }
    print(f"continuation d={a.d} T={a.T}: {row['points']} points (σ 0.5 → "
          f"{row['sigma_last']:.4g}) in {wall:.1f} s (corrector {row['corrector_s']} s, "
          f"analysis {row['analysis_s']} s); max|∇L| {row['max_residual']:.2e}; "
          f"max |ab − ab*|/ab* {rel:.2e}")
    print(f"load average before {row['load_before']}, after {row['load_after']} "
          f"on {row['cpus']} cores; target < 60 s: {'PASS' if row['pass'] else 'FAIL'}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(row, fh, indent=1)
    return 0 if row["pass"] and math.isfinite(rel) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Time GD as a map, batched: (1) N GD runs of S steps on the exact field in one batched
call each step, every run classified (:func:`mesadyn.analysis.gd_batch.field_regimes`); (2) a
reduced-map phase diagram of n³ (η, a0, b0) points
(:func:`mesadyn.analysis.gd_batch.reduced_regimes`, numpy, in chunks).

The targets (on 2 cores): 1000 runs of 200 steps at d = 3, T = 20 under 60 s, and
10⁶ reduced points under 60 s.  Prints a table with the machine (CPU model, cores, torch
threads, versions), the settings, the wall and CPU seconds and the regime counts.

    python benchmarks/bench_gd_map.py [--runs 1000 --steps 200 --d 3 --T 20]
                                      [--grid 100 --reduced-steps 200] [--threads N]
                                      [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import torch
from _machine import cpu_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--d", type=int, default=3)
    ap.add_argument("--T", type=int, default=20)
    ap.add_argument("--grid", type=int, default=100, help="n: the reduced grid is n³ points")
    ap.add_argument("--reduced-steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    import math

    from mesadyn.analysis.fixedpoint import balanced_point
    from mesadyn.analysis.gd_batch import field_regimes, reduced_regimes
    from mesadyn.analysis.gd_limits import point_limit
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.model import diagonal_init, gaussian_init
    from mesadyn.process import gaussian
    from mesadyn.theory import constants

    fam = gaussian(args.d, 1.0)
    f = make_field(FieldSpec("exact", fam, args.T))
    c = constants(fam, args.T)
    eta_star = point_limit(f, balanced_point(fam, args.T)).critical_step
    # the runs: η from 0.05 to 2 η*(balanced), half from a0 = b0 ∈ [0.05, 3]·√ab* (+1e-6
    # noise), half from Gaussian inits σ_w ∈ [1e-3, 0.3]
    rng = np.random.default_rng(0)
    n = args.runs
    eta = eta_star * np.geomspace(0.05, 2.0, n)
    s = math.sqrt(c.ab_star)
    half = n // 2
    th = np.empty((n, f.n_params))
    for i in range(half):
        v = s * 10 ** rng.uniform(math.log10(0.05), math.log10(3.0))
        th[i] = diagonal_init(args.d, v, v).numpy() + 1e-6 * rng.normal(size=f.n_params)
    for i in range(half, n):
        th[i] = gaussian_init(args.d, 10 ** rng.uniform(-3, math.log10(0.3)), seed=i).numpy()
    field_regimes(f, th[:8], eta[:8], 5)  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    batch = field_regimes(f, th, eta, args.steps)
    wall_f, cpu_f = time.perf_counter() - t0, time.process_time() - c0

    g = args.grid
    k = np.geomspace(3e-3, 3.0, g) / c.c2
    u = math.sqrt(c.c2 / c.c1)
    x = np.linspace(-4.0, 4.0, g) * u
    t0, c0 = time.perf_counter(), time.process_time()
    red = reduced_regimes(k[:, None, None], x[None, :, None], x[None, None, :], c.c1, c.c2,
                          args.reduced_steps)
    wall_r, cpu_r = time.perf_counter() - t0, time.process_time() - c0

    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "torch_threads":
               torch.get_num_threads(), "torch": torch.__version__, "numpy": np.__version__,
               "python": platform.python_version()}
    rows = [
        {"benchmark": f"field GD: {n} runs × {args.steps} steps, d={args.d}, T={args.T}",
         "wall_s": wall_f, "cpu_s": cpu_f, "target_s": 60.0, "counts": batch.counts},
        {"benchmark": f"reduced phase diagram: {g}³ = {red.runs} points × "
         f"{args.reduced_steps} steps", "wall_s": wall_r, "cpu_s": cpu_r, "target_s": 60.0,
         "counts": red.counts},
    ]
    print("machine: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    print(f"{'benchmark':<62} {'wall s':>8} {'CPU s':>8} {'target':>7}")
    for r in rows:
        print(f"{r['benchmark']:<62} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} "
              f"{r['target_s']:>6.0f}s")
        print(f"{'':<4}regimes: " + ", ".join(f"{k} {v}" for k, v in r["counts"].items()))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "settings": vars(args), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()

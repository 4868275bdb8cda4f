"""Benchmark: N trajectories of the exact full flow in one batched solve (issue 15).

Gaussian init (every entry N(0, σ_w²), seeds 1..N), gaussian σ=1, d=3, T=20, each row run to
max|∇L| < 1e-8 (or t_end) by :func:`mesadyn.flow.integrate_batch` (batched Dormand–Prince 5(4),
per-row error control and stopping).  The one-by-one baseline times ``--baseline`` rows with
``integrate(..., solver="scipy:RK45")`` (the same stepping rules) and with ``scipy:LSODA``
(the automatic full-flow solver), and extrapolates per row.  Prints wall and CPU seconds and the
load average: the machine may be shared.

    python benchmarks/bench_ensemble.py [--n 1000] [--sigma-w 0.01] [--baseline 10]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--d", type=int, default=3)
    ap.add_argument("--T", type=int, default=20)
    ap.add_argument("--sigma-w", type=float, default=0.01)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--t-end", type=float, default=50.0)
    ap.add_argument("--baseline", type=int, default=10)
    args = ap.parse_args()

    import torch

    from mesadyn.field import FieldSpec, make_field
    from mesadyn.flow import integrate, integrate_batch
    from mesadyn.model import gaussian_init
    from mesadyn.process import gaussian

    torch.set_num_threads(1)
    field = make_field(FieldSpec("exact", gaussian(args.d, 1.0), args.T))
    th0 = torch.stack([gaussian_init(args.d, args.sigma_w, 1 + k) for k in range(args.n)])
    kw = dict(t_end=args.t_end, rtol=1e-10, atol=1e-12 * min(1.0, args.sigma_w),
              steady_tol=args.tol)
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} CPUs; d={args.d}, T={args.T}, σ_w={args.sigma_w}, N={args.n}, "
          f"target max|∇L| < {args.tol:g}, t_end={args.t_end}")
    c0, w0 = time.process_time(), time.perf_counter()
    res = integrate_batch(field, th0.numpy(), **kw)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(f"batched: {wall:.2f} s wall, {cpu:.2f} s CPU; statuses {res.counts()}; "
          f"max|∇L| at the end {res.grad_max.max():.2e}; steps per row median "
          f"{int(np.median(res.n_accepted))}, max {int(res.n_accepted.max())}; batched calls "
          f"{res.n_calls}; rows evaluated {res.nfev}")
    for solver in ("scipy:RK45", "scipy:LSODA"):
        k = min(args.baseline, args.n)
        c0, w0 = time.process_time(), time.perf_counter()
        ends = [integrate(field, th0[i], solver=solver, compute_stiffness=False, **kw)
                for i in range(k)]
        wall1, cpu1 = time.perf_counter() - w0, time.process_time() - c0
        gap = max(float(np.max(np.abs(e.final - res.theta[i]))) for i, e in enumerate(ends))
        print(f"one-by-one {solver}: {k} rows {wall1:.2f} s wall, {cpu1:.2f} s CPU → "
              f"{wall1 / k * args.n:.1f} s wall for N={args.n} (extrapolated); speed-up of "
              f"the batch {wall1 / k * args.n / wall:.1f}× wall, {cpu1 / k * args.n / cpu:.1f}× "
              f"CPU; max end-point gap to the batch {gap:.2e}")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

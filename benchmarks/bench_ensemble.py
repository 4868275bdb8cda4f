"""Benchmark: N trajectories of the exact full flow in one batched solve.

Gaussian init (every entry N(0, σ_w²), seeds 1..N), gaussian σ=1, d=3, T=20, each row run to
max|∇L| < 1e-8 (or t_end) by :func:`mesadyn.flow.integrate_batch` with ``--method``:
``rodas4`` (batched Rosenbrock, exact Hessian, one batched LU per step; default tolerances
rtol 1e-6, atol 1e-8·min(1, σ_w)) or ``dopri5`` (batched Dormand–Prince; rtol 1e-10,
atol 1e-12·min(1, σ_w)).  The one-by-one baselines time ``--baseline`` rows (a) as N = 1
calls of the same batched method and tolerances, (b) with ``integrate(..., solver=
"scipy:RK45")`` and (c) ``scipy:LSODA`` (the automatic full-flow solver) at rtol 1e-10,
atol 1e-12·min(1, σ_w), and extrapolates per row; the end-point gaps to the batch are printed.
Prints wall and CPU seconds (``time.process_time``) and the load average: the machine may be
shared, so CPU seconds are the comparable number.

    python benchmarks/bench_ensemble.py [--n 1000] [--method rodas4] [--sigma-w 0.01]
        [--rtol R] [--atol A] [--baseline 5] [--no-scipy]
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
    ap.add_argument("--method", choices=["rodas4", "dopri5"], default="rodas4")
    ap.add_argument("--rtol", type=float, default=None)
    ap.add_argument("--atol", type=float, default=None)
    ap.add_argument("--baseline", type=int, default=5)
    ap.add_argument("--no-scipy", action="store_true",
                    help="skip the one-by-one scipy:RK45 / scipy:LSODA baselines")
    args = ap.parse_args()

    import torch

    from mesadyn.field import FieldSpec, make_field
    from mesadyn.flow import BatchMethod, integrate, integrate_batch
    from mesadyn.model import gaussian_init
    from mesadyn.process import gaussian

    torch.set_num_threads(1)
    method = BatchMethod(args.method)
    small = min(1.0, args.sigma_w)
    rodas = method is BatchMethod.RODAS4
    rtol = args.rtol if args.rtol is not None else (1e-6 if rodas else 1e-10)
    atol = args.atol if args.atol is not None else (1e-8 if rodas else 1e-12) * small
    field = make_field(FieldSpec("exact", gaussian(args.d, 1.0), args.T))
    th0 = torch.stack([gaussian_init(args.d, args.sigma_w, 1 + k) for k in range(args.n)])
    kw = dict(t_end=args.t_end, rtol=rtol, atol=atol, steady_tol=args.tol)
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} CPUs; d={args.d}, T={args.T}, σ_w={args.sigma_w}, N={args.n}, "
          f"target max|∇L| < {args.tol:g}, t_end={args.t_end}; method {method.value}, "
          f"rtol={rtol:g}, atol={atol:g}")
    c0, w0 = time.process_time(), time.perf_counter()
    res = integrate_batch(field, th0.numpy(), method=method, **kw)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(f"batched {method.value}: {wall:.2f} s wall, {cpu:.2f} s CPU; statuses "
          f"{res.counts()}; max|∇L| at the end {res.grad_max.max():.2e}; steps per row median "
          f"{int(np.median(res.n_accepted))}, max {int(res.n_accepted.max())}; rejected per row "
          f"{res.n_rejected.mean():.2f}; batched calls {res.n_calls}; rows evaluated "
          f"{res.nfev}; Hessian rows {res.njev}")
    k = min(args.baseline, args.n)
    if k < 1:  # --baseline 0: the batch alone
        print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        return
    c0, w0 = time.process_time(), time.perf_counter()
    ones = [integrate_batch(field, th0[i:i + 1].numpy(), method=method, **kw) for i in range(k)]
    wall1, cpu1 = time.perf_counter() - w0, time.process_time() - c0
    gap = max(float(np.max(np.abs(o.theta[0] - res.theta[i]))) for i, o in enumerate(ones))
    print(f"one-by-one {method.value} (N = 1 calls): {k} rows {wall1:.2f} s wall, {cpu1:.2f} s "
          f"CPU → {cpu1 / k * args.n:.1f} s CPU for N={args.n} (extrapolated); speed-up of the "
          f"batch {wall1 / k * args.n / wall:.1f}× wall, {cpu1 / k * args.n / cpu:.1f}× CPU; "
          f"max end-point gap to the batch {gap:.2e}")
    if args.no_scipy:
        return
    ref = dict(kw, rtol=1e-10, atol=1e-12 * small)
    for solver in ("scipy:RK45", "scipy:LSODA"):
        c0, w0 = time.process_time(), time.perf_counter()
        ends = [integrate(field, th0[i], solver=solver, compute_stiffness=False, **ref)
                for i in range(k)]
        wall1, cpu1 = time.perf_counter() - w0, time.process_time() - c0
        gap = max(float(np.max(np.abs(e.final - res.theta[i]))) for i, e in enumerate(ends))
        print(f"one-by-one {solver} (rtol 1e-10): {k} rows {wall1:.2f} s wall, {cpu1:.2f} s "
              f"CPU → {cpu1 / k * args.n:.1f} s CPU for N={args.n} (extrapolated); speed-up "
              f"of the batch {wall1 / k * args.n / wall:.1f}× wall, "
              f"{cpu1 / k * args.n / cpu:.1f}× CPU; max end-point gap to the batch {gap:.2e}")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

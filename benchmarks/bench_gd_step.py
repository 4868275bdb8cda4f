"""Time one full-batch GD step (forward + backward of Eq. 2's finite-sample loss) on the CPU.

The paper's setting by default: d = 5, T = 100, m = 10 000 sequences.  Prints a table with the
machine (CPU model, cores, torch threads, torch version), the settings and the seconds per step
(median of ``--repeats`` after one warm-up call, which also builds the cached θ-independent
data: the closed form's ``W_t``, ``K`` per sequence); the default path is the fused kernel
(numba).  ``--batched`` also times torch's batched kernel on the same draws (the path every
device other than the CPU takes); ``--before`` also times the prefix-Gram path (every sequence
through the stored ``G'_t``, which the closed form replaces); ``--general`` also times the
general O(n·T·d²) ``model.predict`` path.

    python benchmarks/bench_gd_step.py [--d 5 --T 100 --m 10000 --repeats 5 --threads N --before]
                                       [--batched]
                                       [--family gaussian|ones|sparse] [--json out.json]

``--json`` also writes the machine, the settings and the rows to a file (what
``benchmarks/run_all.py`` reads).  The target is at most 0.2 s per step on 2 cores; a
re-implementation that recomputes every prefix, as the paper's public code does, takes about
15 s per step on such a machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch
from _machine import cpu_model


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    """Median wall seconds, min wall seconds, median CPU seconds (all threads) per call."""
    fn()  # warm-up (builds caches)
    times, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times), min(times), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--m", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--family", choices=("gaussian", "ones", "sparse"), default="gaussian",
                    help="the draws of x_1 (sparse: Example 4.1, the closed sum over t)")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument("--form", choices=("direct", "polynomial"), default="direct",
                    help="the sampled field's form (train uses direct)")
    ap.add_argument("--general", action="store_true", help="also time model.predict's path")
    ap.add_argument("--batched", action="store_true",
                    help="also time the batched kernel (torch's products) on the same draws")
    ap.add_argument("--chunk", type=int, default=None, help="sequences per chunk")
    ap.add_argument("--before", action="store_true",
                    help="also time the prefix-Gram path (every sequence through the stored "
                         "G'_t)")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from mesadyn import model
    from mesadyn.field import FiniteField
    from mesadyn.field._ar_kernels import ARBatch, Kernel
    from mesadyn.model import diagonal_init, gaussian_init, sequence_loss
    from mesadyn.process import Family, gaussian, ones, sequences, sparse

    makers: dict[str, Callable[[int], Family]] = {"gaussian": gaussian, "ones": ones,
                                                  "sparse": sparse}
    fam = makers[args.family](args.d)
    # direct form, as mesadyn.train uses it (the polynomial form's build does not pay back
    # over a GD run; ``--form polynomial`` times the built polynomial's step instead)
    field = FiniteField(fam, args.T, args.m, seed=1, device="cpu", chunk=args.chunk or None,
                        form=args.form)
    theta = diagonal_init(args.d, 0.1, 0.1) + gaussian_init(args.d, 1e-3, seed=2)
    rows = [("default kernel (FiniteField.loss_and_grad)",
             *timed(lambda: field.loss_and_grad(theta), args.repeats))]
    if args.before:
        # the prefix-Gram path for every sequence: a fresh field, so that its cached ARBatch
        # chunks are built with the threshold raised
        near_one = model.NEAR_ONE
        model.NEAR_ONE = float("inf")
        try:
            before = FiniteField(fam, args.T, args.m, seed=1, device="cpu",
                                 chunk=args.chunk or None, form=args.form)
            rows.append(("  prefix-Gram path (G'_t stored)",
                         *timed(lambda: before.loss_and_grad(theta), args.repeats)))
        finally:
            model.NEAR_ONE = near_one
    if args.batched:
        # the same draws and chunks through torch's batched products (Kernel.batched: the path
        # every device other than the CPU takes)
        c = field.chunk
        parts = [ARBatch(field.x1[lo : lo + c], field.lam[lo : lo + c], args.T,
                         kernel=Kernel.batched) for lo in range(0, args.m, c)]

        def batched() -> None:
            th = theta.clone().requires_grad_(True)
            for b in parts:
                torch.autograd.grad(b.sequence_loss(th).sum() / args.m, th)

        rows.append(("  batched kernel (torch bmm, same chunks)",
                     *timed(batched, args.repeats)))
    if args.general:
        x = sequences(field.x1, field.lam, args.T)
        chunk = 1000

        def general() -> None:
            th = theta.clone().requires_grad_(True)
            for lo in range(0, args.m, chunk):
                part = sequence_loss(th, x[lo : lo + chunk]).sum() / args.m
                part.backward()

        rows.append(("general path (model.predict, chunked)", *timed(general, args.repeats)))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print("machine")
    print(f"  cpu            {cpu_model()}")
    print(f"  cores          {os.cpu_count()}")
    print(f"  torch threads  {torch.get_num_threads()}")
    print(f"  torch          {torch.__version__}")
    print(f"  python         {platform.python_version()}")
    print(f"  load average   {load:.2f}  (other processes compete for the cores if > 0)")
    print("settings")
    print(f"  {args.family} x_1  d={args.d}  T={args.T}  m={args.m}  float64/complex128  "
          f"repeats={args.repeats}")
    print(f"  chunk={field.chunk} sequences  form={field.form}")
    print()
    print(f"{'one GD step (forward + backward)':<44} {'median s':>10} {'min s':>10} "
          f"{'CPU s':>10}")
    for name, med, best, cpu in rows:
        print(f"{name:<44} {med:>10.3f} {best:>10.3f} {cpu:>10.3f}")
    print("(wall s is inflated when the load average exceeds the core count; CPU s is the")
    print(" processor time summed over threads, a contention-robust measure of the work)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cpu": cpu_model(), "cores": os.cpu_count(),
                       "torch_threads": torch.get_num_threads(), "load_1m": load,
                       "settings": {"family": args.family, "d": args.d, "T": args.T,
                                    "m": args.m, "repeats": args.repeats,
                                    "chunk": field.chunk, "form": str(field.form)},
                       "rows": [{"family": args.family, "path": name.strip(),
                                 "threads": torch.get_num_threads(), "median_s": med,
                                 "min_s": best, "cpu_s": cpu}
                                for name, med, best, cpu in rows]}, fh, indent=1)


if __name__ == "__main__":
    main()

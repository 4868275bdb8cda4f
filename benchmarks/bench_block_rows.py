"""Choose ``BLOCK_ROWS`` (``mesadyn/field/_ar_autograd.py``): CPU seconds of one GD step's
loss+gradient (Eq. 2, torch's batched closed-form kernel) for several block sizes, measured in
alternating rounds in one process, so that a machine whose speed drifts affects every size
alike.

    python benchmarks/bench_block_rows.py [--rows 12544 4704 3136 1568] [--rounds 10] [--threads 1]
        [--json out.json]

The paper's setting by default (gaussian x_1, d = 5, T = 100, m = 10 000).  Prints the machine,
the settings and, per block size, the minimum, lower quartile and median over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[12_544, 4704, 3136, 1568])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--m", type=int, default=10_000)
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from mesadyn.field import FiniteField
    from mesadyn.field import _ar_autograd as model  # owns BLOCK_ROWS
    from mesadyn.field._ar_kernels import ARBatch, Kernel
    from mesadyn.model import diagonal_init, gaussian_init
    from mesadyn.process import gaussian

    field = FiniteField(gaussian(args.d), args.T, args.m, seed=1, device="cpu", form="direct")
    theta = diagonal_init(args.d, 0.1, 0.1) + gaussian_init(args.d, 1e-3, seed=2)
    # the batched kernel on the field's draws and chunks (the CPU's default, the fused kernel,
    # does not block its work this way)
    c = field.chunk
    parts = [ARBatch(field.x1[lo : lo + c], field.lam[lo : lo + c], args.T,
                     kernel=Kernel.batched) for lo in range(0, args.m, c)]

    def loss_and_grad() -> None:
        th = theta.clone().requires_grad_(True)
        for b in parts:
            torch.autograd.grad(b.sequence_loss(th).sum() / args.m, th)

    saved = model.BLOCK_ROWS
    cpu: dict[int, list[float]] = {r: [] for r in args.rows}
    try:
        for _ in range(args.rounds):
            for rows in args.rows:
                model.BLOCK_ROWS = rows
                loss_and_grad()  # warm-up at this size
                c0 = time.process_time()
                loss_and_grad()
                cpu[rows].append(time.process_time() - c0)
    finally:
        model.BLOCK_ROWS = saved
    load = os.getloadavg()[0]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {args.threads} thread(s), load average {load:.2f}")
    print(f"settings: gaussian x_1, d={args.d}, T={args.T}, m={args.m}, {args.rounds} rounds "
          f"(default BLOCK_ROWS = {saved})")
    print(f"{'BLOCK_ROWS':>10} {'sequences':>10} {'min CPU s':>10} {'q25':>8} {'median':>8}")
    table = []
    for rows in args.rows:
        v = sorted(cpu[rows])
        table.append({"block_rows": rows, "sequences": max(1, rows // (args.T - 2)),
                      "min_cpu_s": v[0], "q25_cpu_s": v[len(v) // 4],
                      "median_cpu_s": statistics.median(v), "default": rows == saved})
        print(f"{rows:>10} {max(1, rows // (args.T - 2)):>10} {v[0]:>10.3f} "
              f"{v[len(v) // 4]:>8.3f} {statistics.median(v):>8.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": args.threads, "load_1m": load, "rounds": args.rounds,
                       "settings": {"d": args.d, "T": args.T, "m": args.m},
                       "rows": table}, fh, indent=1)


if __name__ == "__main__":
    main()

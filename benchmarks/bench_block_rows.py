"""Choose ``mesadyn.model.BLOCK_ROWS``: CPU seconds of one GD step's loss+gradient (Eq. 2, the
closed-form kernel) for several block sizes, measured in alternating rounds in one process, so
that a machine whose speed drifts affects every size alike.

    python benchmarks/bench_block_rows.py [--rows 12544 4704 3136 1568] [--rounds 10] [--threads 1]

The paper's setting by default (gaussian x_1, d = 5, T = 100, m = 10 000).  Prints the machine,
the settings and, per block size, the minimum, lower quartile and median over the rounds.
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from mesadyn import model
    from mesadyn.field import FiniteField
    from mesadyn.model import diagonal_init, gaussian_init
    from mesadyn.process import gaussian

    field = FiniteField(gaussian(args.d), args.T, args.m, seed=1, device="cpu", form="direct")
    theta = diagonal_init(args.d, 0.1, 0.1) + gaussian_init(args.d, 1e-3, seed=2)
    saved = model.BLOCK_ROWS
    cpu: dict[int, list[float]] = {r: [] for r in args.rows}
    try:
        for _ in range(args.rounds):
            for rows in args.rows:
                model.BLOCK_ROWS = rows
                field.loss_and_grad(theta)  # warm-up at this size
                c0 = time.process_time()
                field.loss_and_grad(theta)
                cpu[rows].append(time.process_time() - c0)
    finally:
        model.BLOCK_ROWS = saved
    load = os.getloadavg()[0]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {args.threads} thread(s), load average {load:.2f}")
    print(f"settings: gaussian x_1, d={args.d}, T={args.T}, m={args.m}, {args.rounds} rounds "
          f"(default BLOCK_ROWS = {saved})")
    print(f"{'BLOCK_ROWS':>10} {'sequences':>10} {'min CPU s':>10} {'q25':>8} {'median':>8}")
    for rows in args.rows:
        v = sorted(cpu[rows])
        print(f"{rows:>10} {max(1, rows // (args.T - 2)):>10} {v[0]:>10.3f} "
              f"{v[len(v) // 4]:>8.3f} {statistics.median(v):>8.3f}")


if __name__ == "__main__":
    main()

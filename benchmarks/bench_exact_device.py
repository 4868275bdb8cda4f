"""Benchmark of the exact field's contractions: scipy against torch, by threads.

For each d (default 5 and 12, T = 100, gaussian) and each thread count (default 1 and 2), a
child process with ``OMP_NUM_THREADS = MKL_NUM_THREADS = OPENBLAS_NUM_THREADS = k`` and
``torch.set_num_threads(k)`` times

* the kernel every evaluation starts with, ``K = G·a`` (an (n⁴ × n²) sparse matrix times a
  vector), in each representation considered: scipy CSR (the CPU default), torch CSR (the
  ``contractions="torch"`` path), torch COO (``torch.sparse.mm``), the gather/``index_add``
  of the differentiable loss and, where G fits in 256 MiB dense, a dense matrix–vector product;
* ``ExactField.loss_and_grad`` and ``ExactField.hessian`` with ``contractions="scipy"`` (the
  CPU default, single-threaded sparse products) and ``contractions="torch"``.

Each row gives the median wall milliseconds per call over blocks of calls and the CPU
milliseconds per call (``time.process_time``, all threads of the child).  The machine is
shared, so the table starts with the machine, torch's parallel backend and the load average
(before and after): compare CPU ms when the load is high.

    python benchmarks/bench_exact_device.py                        # d 5 12, threads 1 2
    python benchmarks/bench_exact_device.py --d 5 --threads 1 2 4 --family ones
    python benchmarks/bench_exact_device.py --wait-policy PASSIVE   # idle OpenMP threads sleep
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
import torch
from _machine import cpu_model

from mesadyn.field import ExactField
from mesadyn.model import diagonal_init, gaussian_init
from mesadyn.process import gaussian, ones, sparse

FAMILIES = {"gaussian": gaussian, "ones": ones, "sparse": sparse}
#: Dense G is timed only when it takes at most this many bytes.
DENSE_LIMIT = 256 * 2**20


def point(d: int) -> torch.Tensor:
    """Assumption 3.1 (a, b) = (0.5, 0.5) plus N(0, 0.1²) on every entry (a dense θ)."""
    return diagonal_init(d, 0.5, 0.5) + gaussian_init(d, 0.1, seed=1)


def clock(fn: Callable[[], object], budget_s: float, blocks: int = 5) -> tuple[float, float]:
    """(median wall ms per call over ``blocks`` blocks, CPU ms per call over all of them)."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-6)
    per_block = max(1, int(budget_s / blocks / once))
    walls = []
    c0 = time.process_time()
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(per_block):
            fn()
        walls.append((time.perf_counter() - t0) / per_block)
    cpu = (time.process_time() - c0) / (blocks * per_block)
    return 1e3 * statistics.median(walls), 1e3 * cpu


def child(family: str, d: int, T: int, threads: int, budget_s: float) -> list[dict[str, object]]:
    """The rows of one (d, threads) setting, timed in this process."""
    torch.set_num_threads(threads)
    fam = FAMILIES[family](d)
    ref = ExactField(fam, T)
    tor = ExactField(fam, T, contractions="torch")
    theta = point(d)
    n2 = ref._n ** 2
    a = theta[ref._iA].clone()
    anp = a.numpy()
    rows: list[dict[str, object]] = []

    def row(what: str, path: str, fn: Callable[[], object], budget: float = budget_s) -> None:
        wall, cpu = clock(fn, budget)
        rows.append({"d": d, "threads": threads, "what": what, "path": path,
                     "wall_ms": wall, "cpu_ms": cpu, "nnz": ref.nnz})

    coo = torch.sparse_coo_tensor(torch.stack([ref._iqa, ref._ia2]), ref._val,
                                  size=(n2 * n2, n2)).coalesce()
    row("K = G·a", "scipy CSR (CPU default)", lambda: ref._G1 @ anp)
    row("K = G·a", "torch CSR", lambda: tor._G1t @ a)
    row("K = G·a", "torch COO sparse.mm", lambda: torch.sparse.mm(coo, a[:, None]))
    row("K = G·a", "torch gather+index_add", lambda: ref._K(a))
    if n2 * n2 * n2 * 8 <= DENSE_LIMIT:
        dense = coo.to_dense()
        row("K = G·a", "torch dense mv", lambda: dense @ a)
        del dense
    else:
        rows.append({"d": d, "threads": threads, "what": "K = G·a", "path": "torch dense mv",
                     "wall_ms": None, "cpu_ms": None, "nnz": ref.nnz,
                     "note": f"dense G {n2**3 * 8 / 2**30:.1f} GiB, not timed"})
    row("loss_and_grad", "scipy (CPU default)", lambda: ref.loss_and_grad(theta))
    row("loss_and_grad", "torch", lambda: tor.loss_and_grad(theta))
    row("hessian", "scipy (CPU default)", lambda: ref.hessian(theta), 2 * budget_s)
    row("hessian", "torch", lambda: tor.hessian(theta), 2 * budget_s)
    # the two paths agree (the table is about speed, not a change of numbers)
    L0, g0 = ref.loss_and_grad(theta)
    L1, g1 = tor.loss_and_grad(theta)
    H0, H1 = ref.hessian(theta), tor.hessian(theta)
    agree = max(abs(float(L1 - L0)) / abs(float(L0)),
                float((g1 - g0).abs().max() / g0.abs().max()),
                float((H1 - H0).abs().max() / H0.abs().max()))
    for r in rows:
        r["max_rel_diff"] = agree
    return rows


def machine() -> str:
    model = cpu_model()
    backend = "MKL" if torch.backends.mkl.is_available() else "no MKL"
    return (f"{model}, {os.cpu_count()} logical CPUs; python {platform.python_version()}, "
            f"torch {torch.__version__} ({backend}, {torch.get_num_threads()} threads by "
            f"default), numpy {np.__version__}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d", type=int, nargs="+", default=[5, 12])
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--family", choices=sorted(FAMILIES), default="gaussian")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--budget", type=float, default=0.4,
                    help="seconds of timing per row (default 0.4)")
    ap.add_argument("--wait-policy", choices=["ACTIVE", "PASSIVE"],
                    help="OMP_WAIT_POLICY of the children (default: OpenMP's own)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    ap.add_argument("--child", nargs=3, type=int, metavar=("D", "T", "THREADS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        d, T, k = args.child
        print(json.dumps(child(args.family, d, T, k, args.budget)))
        return 0

    load0 = os.getloadavg()
    rows: list[dict[str, object]] = []
    for d in args.d:
        ExactField(FAMILIES[args.family](d), args.T)  # fill the disk cache outside the timing
        for k in args.threads:
            env = {**os.environ, "OMP_NUM_THREADS": str(k), "MKL_NUM_THREADS": str(k),
                   "OPENBLAS_NUM_THREADS": str(k)}
            if args.wait_policy:
                env["OMP_WAIT_POLICY"] = args.wait_policy
            out = subprocess.run(
                [sys.executable, __file__, "--family", args.family, "--budget",
                 str(args.budget), "--child", str(d), str(args.T), str(k)],
                env=env, check=True, capture_output=True, text=True)
            rows += json.loads(out.stdout.strip().splitlines()[-1])
    load1 = os.getloadavg()

    print(f"# exact field contractions: {args.family}, T = {args.T}")
    print(f"machine: {machine()}")
    print(f"load average (1, 5, 15 min): before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print("command: python " + " ".join([os.path.relpath(__file__)] + sys.argv[1:]))
    print(f"OMP_WAIT_POLICY: {args.wait_policy or os.environ.get('OMP_WAIT_POLICY', 'unset')}")
    print()
    print("| d | nnz(G) | threads | what | path | wall ms | CPU ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        wall = "—" if r["wall_ms"] is None else f"{r['wall_ms']:.3f}"
        cpu = r.get("note", "—") if r["cpu_ms"] is None else f"{r['cpu_ms']:.3f}"
        print(f"| {r['d']} | {r['nnz']} | {r['threads']} | {r['what']} | {r['path']} | "
              f"{wall} | {cpu} |")
    worst = max(float(str(r["max_rel_diff"])) for r in rows)
    print(f"\nlargest relative difference torch vs scipy (L, ∇L, ∇²L): {worst:.1e}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load_before": load0, "load_after": load1, "machine": machine(),
                       "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

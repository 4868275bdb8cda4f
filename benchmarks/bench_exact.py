"""Benchmark of the exact population field.

For each family and d ∈ {2, 3, 5, 8, 12}, T ∈ {10, 100, 1000}: the build time of the moment
tensors (no cache), the time to load them from the disk cache, the peak memory of the build
(``tracemalloc``, which sees every numpy allocation of the build), the stored entries and
bytes, and the median time of one ``loss_and_grad``.  At d = 5 it also times a Monte-Carlo
estimate of ∇L to 1% relative standard error (‖se‖₂ / ‖∇L‖₂, batch means) at the same point:
a pilot run (2048 samples; 1024 at T = 1000) gives the samples needed (se ∝ 1/√N); that many
samples are then run and timed when they are at most ``--mc-cap`` and the pilot predicts at
most ``--mc-cap-seconds``, otherwise the time is extrapolated linearly (marked).

    python benchmarks/bench_exact.py                 # the full table (minutes)
    python benchmarks/bench_exact.py --quick         # d ∈ {2, 3, 5}, T ∈ {10, 100}
    python benchmarks/bench_exact.py --json out.json # also write the rows as JSON
    python benchmarks/bench_exact.py --families gaussian,ones,shifted,moments,mixture \\
        --d 5 --T 100 --no-mc [--radius 0.9]        # the data models beyond the paper
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

import torch

from mesadyn.field import ExactField, MonteCarloField
from mesadyn.model import diagonal_init, gaussian_init
from mesadyn.process import (
    gaussian,
    mixture,
    moments,
    ones,
    rademacher,
    shifted,
    sparse,
    uniform,
)

FAMILIES = {"gaussian": gaussian, "sparse": sparse, "rademacher": rademacher,
            "uniform": uniform, "ones": ones,
            # data models beyond the paper
            "shifted": lambda d: shifted(d, 0.5, 1.0),
            "moments": lambda d: moments(d, [0.2, 1.0, 0.5, 2.5, 1.5, 8.0]),
            "mixture": lambda d: mixture([(0.3, ones(d)), (0.7, gaussian(d))])}
#: The families of the default table (the paper's); the others on request (--families).
PAPER = ["gaussian", "sparse", "rademacher", "uniform", "ones"]


def point(d: int) -> torch.Tensor:
    """A generic point: Assumption 3.1 (a, b) = (0.5, 0.5) plus N(0, 0.1²) on every entry."""
    return diagonal_init(d, 0.5, 0.5) + gaussian_init(d, 0.1, seed=1)


def time_loss_and_grad(field: ExactField, theta: torch.Tensor, repeat: int = 30) -> float:
    field.loss_and_grad(theta)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        field.loss_and_grad(theta)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def rel_se(est) -> float:
    return float(est.grad_se.norm() / est.grad.norm())


def mc_to_one_percent(fam, T: int, theta: torch.Tensor, cap: int,
                      cap_seconds: float) -> dict[str, object]:
    """Seconds a Monte-Carlo estimate of ∇L needs to reach 1% relative standard error."""
    pilot = 2048 if T <= 100 else 1024
    t0 = time.perf_counter()
    est = MonteCarloField(fam, T, samples=pilot, seed=5, batches=32,
                          device="cpu").estimate(theta)
    t_pilot = time.perf_counter() - t0
    r = rel_se(est)
    need = max(pilot, int(pilot * (r / 0.01) ** 2) + 1)
    if need <= cap and t_pilot * need / pilot <= cap_seconds:
        t0 = time.perf_counter()
        est = MonteCarloField(fam, T, samples=need, seed=6, batches=32,
                              device="cpu").estimate(theta)
        return {"mc_samples": need, "mc_seconds": time.perf_counter() - t0,
                "mc_rel_se": rel_se(est), "mc_measured": True}
    return {"mc_samples": need, "mc_seconds": t_pilot * need / pilot,
            "mc_rel_se": 0.01, "mc_measured": False}


def run(ds: list[int], Ts: list[int], families: list[str], mc_cap: int,
        max_d_fixed: int, mc_cap_seconds: float = 60.0, radius: float = 1.0,
        mc: bool = True) -> list[dict[str, object]]:
    rows = []
    cache_dir = tempfile.mkdtemp(prefix="mesadyn-bench-")
    for name in families:
        for d in ds:
            if name in ("ones", "shifted", "moments", "mixture") and d > max_d_fixed:
                continue
            fam = FAMILIES[name](d)
            for T in Ts:
                tracemalloc.start()
                t0 = time.perf_counter()
                field = ExactField(fam, T, cache_dir=cache_dir, radius=radius)
                build = time.perf_counter() - t0
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                t0 = time.perf_counter()
                hit = ExactField(fam, T, cache_dir=cache_dir, radius=radius)
                load = time.perf_counter() - t0
                assert hit.cache_status == "hit", hit.cache_status
                theta = point(d)
                row: dict[str, object] = {
                    "family": name if radius == 1 else f"{name} r={radius:g}", "d": d, "T": T,
                    "build_s": build, "load_s": load,
                    "peak_MiB": peak / 2**20, "estimate_MiB": field.memory_estimate / 2**20,
                    "nnz": field.nnz, "stored_MiB": field.nbytes / 2**20,
                    "loss_grad_ms": 1e3 * time_loss_and_grad(field, theta),
                }
                if d == 5 and mc and radius == 1:
                    row.update(mc_to_one_percent(fam, T, theta, mc_cap, mc_cap_seconds))
                    row["speedup"] = row["mc_seconds"] / (row["loss_grad_ms"] / 1e3)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                del field, hit
    return rows


def markdown(rows: list[dict[str, object]]) -> str:
    head = ("| family | d | T | build s | cache load s | peak MiB | nnz(G) | stored MiB "
            "| loss+grad ms | MC to 1% s (samples) | exact speed-up |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        mc = sp = ""
        if "mc_seconds" in r:
            mark = "" if r["mc_measured"] else " extrapolated"
            mc = f"{r['mc_seconds']:.2f} ({r['mc_samples']}{mark})"
            sp = f"{r['speedup']:.0f}×"
        lines.append(
            f"| {r['family']} | {r['d']} | {r['T']} | {r['build_s']:.2f} | {r['load_s']:.3f} "
            f"| {r['peak_MiB']:.1f} | {r['nnz']} | {r['stored_MiB']:.1f} "
            f"| {r['loss_grad_ms']:.3f} | {mc} | {sp} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="d in {2,3,5}, T in {10,100}")
    ap.add_argument("--families", default=",".join(PAPER),
                    help=f"comma-separated, from {', '.join(FAMILIES)}")
    ap.add_argument("--d", default=None, help="comma-separated d values (overrides --quick)")
    ap.add_argument("--T", default=None, help="comma-separated T values (overrides --quick)")
    ap.add_argument("--radius", type=float, default=1.0, help="r of W = r diag(λ)")
    ap.add_argument("--no-mc", action="store_true", help="skip the Monte-Carlo timing")
    ap.add_argument("--mc-cap", type=int, default=200_000,
                    help="largest Monte-Carlo run actually timed (else extrapolated)")
    ap.add_argument("--mc-cap-seconds", type=float, default=60.0,
                    help="time a Monte-Carlo run only if the pilot predicts at most this")
    ap.add_argument("--max-d-fixed", type=int, default=12)
    ap.add_argument("--json", default=None, help="write the rows to this JSON file")
    args = ap.parse_args()
    ds = [2, 3, 5] if args.quick else [2, 3, 5, 8, 12]
    Ts = [10, 100] if args.quick else [10, 100, 1000]
    if args.d:
        ds = [int(v) for v in args.d.split(",")]
    if args.T:
        Ts = [int(v) for v in args.T.split(",")]
    print(f"torch threads: {torch.get_num_threads()}, cpus: {os.cpu_count()}", file=sys.stderr)
    rows = run(ds, Ts, args.families.split(","), args.mc_cap, args.max_d_fixed,
               args.mc_cap_seconds, radius=args.radius, mc=not args.no_mc)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()

"""Benchmark of the exact fields beyond the paper: real rotations, noisy AR, Haar W.

For each process and size: the build time of the moment tensors (no disk cache), the time to
load them from the cache, the stored entries, and the median time of one ``loss_and_grad``,
against the Monte-Carlo path at equal accuracy: a Monte-Carlo estimate of ∇L
(:class:`~mesadyn.field.MonteCarloSequenceField`, batch means) to 1% relative standard error
(‖se‖₂ / ‖∇L‖₂) at the same point.  A pilot (2048 sequences) gives the samples needed
(se ∝ 1/√N); that many are run and timed when the pilot predicts at most ``--mc-cap-seconds``,
otherwise the time is extrapolated linearly (marked).  The exact field's own error is rounding
(1e-13 relative, tests/field/test_exact_models.py); Monte-Carlo would need ~10²² times the
1% samples to match it.

    python benchmarks/bench_exact_models.py            # the table (a few minutes on 2 cores)
    python benchmarks/bench_exact_models.py --quick    # the small sizes only
    python benchmarks/bench_exact_models.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
from _machine import cpu_model

from mesadyn.field import ExactField, MonteCarloSequenceField
from mesadyn.model import diagonal_init, gaussian_init
from mesadyn.process import gaussian

#: (label, rotation, noise) of the processes timed.
PROCESSES = [("real", "real", 0.0), ("noise s=0.3", "diagonal", 0.3),
             ("real, noise s=0.3", "real", 0.3), ("haar", "haar", 0.0)]
SIZES = [(4, 20), (6, 100)]


def machine() -> str:
    model = cpu_model()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (f"{model}, {os.cpu_count()} logical CPUs, load {load[0]:.2f}; python "
            f"{platform.python_version()}, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), numpy {np.__version__}")


def point(d: int) -> torch.Tensor:
    """Assumption 3.1's (0.5, 0.5) plus N(0, 0.1²) on every entry (as bench_exact.py)."""
    return diagonal_init(d, 0.5, 0.5) + gaussian_init(d, 0.1, seed=1)


def median_seconds(fn, repeat: int = 20) -> float:  # type: ignore[no-untyped-def]
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def mc_to_one_percent(d: int, T: int, rotation: str, noise: float, theta: torch.Tensor,
                      cap_seconds: float) -> dict[str, object]:
    """Seconds (sampling, building and estimating included) for 1% relative se of ∇L."""
    pilot = 2048

    def run(samples: int, seed: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        f = MonteCarloSequenceField(gaussian(d), T, samples=samples, seed=seed, batches=32,
                                    rotation=rotation, noise=noise, device="cpu")
        est = f.estimate(theta)
        return time.perf_counter() - t0, float(est.grad_se.norm() / est.grad.norm())

    t_pilot, r = run(pilot, 5)
    need = max(pilot, int(pilot * (r / 0.01) ** 2) + 1)
    if t_pilot * need / pilot <= cap_seconds:
        t, r2 = run(need, 6)
        return {"mc_samples": need, "mc_seconds": t, "mc_rel_se": r2, "mc_measured": True}
    return {"mc_samples": need, "mc_seconds": t_pilot * need / pilot, "mc_rel_se": 0.01,
            "mc_measured": False}


def run(sizes: list[tuple[int, int]], cap_seconds: float, mc: bool) -> list[dict[str, object]]:
    rows = []
    cache = tempfile.mkdtemp(prefix="mesadyn-bench-models-")
    for label, rotation, noise in PROCESSES:
        for d, T in sizes:
            if rotation == "haar" and d > 5:
                continue  # beyond the exact Haar field's reach
            fam = gaussian(d)
            t0 = time.perf_counter()
            field = ExactField(fam, T, cache_dir=cache, rotation=rotation, noise=noise)
            build = time.perf_counter() - t0
            t0 = time.perf_counter()
            hit = ExactField(fam, T, cache_dir=cache, rotation=rotation, noise=noise)
            load = time.perf_counter() - t0
            assert hit.cache_status == "hit", hit.cache_status
            theta = point(d)
            row: dict[str, object] = {
                "process": label, "d": d, "T": T, "build_s": build, "load_s": load,
                "nnz": field.nnz, "stored_MiB": field.nbytes / 2**20,
                "loss_grad_ms": 1e3 * median_seconds(lambda f=field, th=theta:
                                                     f.loss_and_grad(th))}
            if mc:
                row.update(mc_to_one_percent(d, T, rotation, noise, theta, cap_seconds))
                row["speedup_vs_build"] = row["mc_seconds"] / (build + row["loss_grad_ms"] / 1e3)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def markdown(rows: list[dict[str, object]]) -> str:
    lines = ["| process | d | T | build s | cache load s | nnz(G) | stored MiB | loss+grad ms "
             "| MC to 1% s (samples) | exact (build + 1 eval) vs MC |", "|" + "---|" * 10]
    for r in rows:
        mc = sp = ""
        if "mc_seconds" in r:
            mark = "" if r["mc_measured"] else " extrapolated"
            mc = f"{r['mc_seconds']:.2f} ({r['mc_samples']}{mark})"
            sp = f"{r['speedup_vs_build']:.0f}×"
        lines.append(f"| {r['process']} | {r['d']} | {r['T']} | {r['build_s']:.2f} "
                     f"| {r['load_s']:.3f} | {r['nnz']} | {r['stored_MiB']:.1f} "
                     f"| {r['loss_grad_ms']:.3f} | {mc} | {sp} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="d = 4, T = 20 only")
    ap.add_argument("--no-mc", action="store_true", help="skip the Monte-Carlo timing")
    ap.add_argument("--mc-cap-seconds", type=float, default=60.0,
                    help="time a Monte-Carlo run only if the pilot predicts at most this")
    ap.add_argument("--json", default=None, help="write the rows to this JSON file")
    args = ap.parse_args()
    sizes = SIZES[:1] if args.quick else SIZES
    print(f"machine: {machine()}")
    print(f"settings: gaussian tokens σ = 1; θ = diagonal_init(d, 0.5, 0.5) + N(0, 0.1²); "
          f"loss+grad median of 20 (scipy contractions); Monte-Carlo: 32 batches, pilot 2048, "
          f"timed up to {args.mc_cap_seconds:g} s")
    rows = run(sizes, args.mc_cap_seconds, not args.no_mc)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()

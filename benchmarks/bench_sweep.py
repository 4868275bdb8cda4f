"""Scaling of ``mesadyn sweep``: the same sweep on 1 and 2 Dask workers, and per-point overhead.

    python benchmarks/bench_sweep.py [--points 8] [--overhead-points 200] [--json]

* **Scaling.**  ``--points`` points of ``mesadyn stability`` (exact field, d = 2, T = 10, a
  flow from a diagonal init to the fixed point, then its Hessian) run on a LocalCluster of 1 and
  then 2 single-threaded workers.  Workers are warmed up first (imports, one point each), so
  the timed sweep measures the steady state; cluster start-up is reported apart.
  ``speed-up = wall(1 worker) / wall(2 workers)``.
* **Overhead per point.**  ``--overhead-points`` points of ``mesadyn theory`` (microseconds of
  work each) on 1 worker: ``(sweep wall − Σ point compute) / points`` is what the machinery
  costs per point (scheduling, transfer, one atomic JSON write); merging and writing the
  netCDF is included.  The inline executor (``--workers 0``, no Dask) is shown for comparison.

Timings depend on the machine and on what else runs on it; report them with the core count.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path


def _spec(points: int):
    from mesadyn.sweep import parse_spec

    a0 = [round(0.2 + 0.05 * k, 4) for k in range(points)]
    return parse_spec({"command": "stability",
                       "options": {"x1": "gaussian", "d": 2, "T": 10, "b0": 0.5, "pl": False},
                       "axes": {"a0": a0}})


def _overhead_spec(points: int):
    from mesadyn.sweep import parse_spec

    return parse_spec({"command": "theory",
                       "axes": {"T": {"start": 3, "stop": 2 + points}}})


def _cluster(n: int):
    from distributed import Client

    from mesadyn.sweep import local_cluster

    t0 = time.perf_counter()
    cluster = local_cluster(n, silence_logs=logging.ERROR)
    client = Client(cluster)
    return cluster, client, time.perf_counter() - t0


def _warm(client, spec) -> float:
    """Import the command and run one point on every worker (not timed in the sweep)."""
    from mesadyn.sweep.runner import run_point

    t0 = time.perf_counter()
    p = spec.points()[0]
    for w in client.scheduler_info()["workers"]:
        client.submit(run_point, spec.target, p.options, p.hash, workers=[w], pure=False,
                      allow_other_workers=False).result()
    return time.perf_counter() - t0


def run(points: int, overhead_points: int) -> dict:
    from mesadyn.sweep import run_sweep

    out: dict = {"cores": os.cpu_count(), "points": points, "overhead_points": overhead_points}
    spec, ospec = _spec(points), _overhead_spec(overhead_points)
    with tempfile.TemporaryDirectory() as tmp:
        walls = {}
        for n in (1, 2):
            cluster, client, start_s = _cluster(n)
            try:
                warm_s = _warm(client, spec)
                res = run_sweep(spec, Path(tmp) / f"scale{n}", client=client)
                assert res.computed == points and not res.failed, res.failed
                walls[n] = res.wall_s
                out[f"workers_{n}"] = {"cluster_start_s": start_s, "warmup_s": warm_s,
                                       "wall_s": res.wall_s, "compute_s": res.compute_s,
                                       "per_point_s": res.wall_s / points}
                if n == 1:
                    _warm(client, ospec)
                    o = run_sweep(ospec, Path(tmp) / "overhead", client=client)
                    assert o.computed == overhead_points and not o.failed
                    out["overhead_per_point_s"] = (o.wall_s - o.compute_s) / overhead_points
                    out["overhead_sweep_wall_s"] = o.wall_s
            finally:
                client.close()
                cluster.close()
        out["speedup_2_vs_1"] = walls[1] / walls[2]
        t0 = time.perf_counter()
        inline = run_sweep(ospec, Path(tmp) / "inline", workers=0)
        out["inline_overhead_per_point_s"] = ((time.perf_counter() - t0 - inline.compute_s)
                                              / overhead_points)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--overhead-points", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = run(args.points, args.overhead_points)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(f"cores: {res['cores']}")
    print(f"{'workers':>8} {'start [s]':>10} {'warm-up [s]':>12} {'sweep wall [s]':>15} "
          f"{'Σ compute [s]':>14} {'per point [s]':>14}")
    for n in (1, 2):
        r = res[f"workers_{n}"]
        print(f"{n:>8} {r['cluster_start_s']:>10.2f} {r['warmup_s']:>12.2f} {r['wall_s']:>15.2f} "
              f"{r['compute_s']:>14.2f} {r['per_point_s']:>14.3f}")
    print(f"speed-up 2 vs 1 workers: {res['speedup_2_vs_1']:.2f}x ({res['points']} stability "
          "points)")
    print(f"overhead per point (Dask, 1 worker, {res['overhead_points']} theory points): "
          f"{1e3 * res['overhead_per_point_s']:.2f} ms")
    inline_ms = 1e3 * res["inline_overhead_per_point_s"]
    print(f"overhead per point (inline, no Dask): {inline_ms:.2f} ms")


if __name__ == "__main__":
    main()

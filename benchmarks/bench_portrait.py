"""Benchmark: wall time of a phase portrait at the default resolution (target: under 10 s).

Run: ``python benchmarks/bench_portrait.py [--repeat 3] [--json out.json]``.  Prints one JSON
object per case (``--json`` also writes them to a file, as a list under ``"rows"``)
with the median over repeats of the build time (all layers drawn, layout frozen), the render
time per format, and the wall and CPU time of build + PNG.  Timings on a shared machine are
inflated by contention.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from mesadyn.plots import portrait, render
from mesadyn.process import Family, gaussian, ones


def bench(name: str, fam: Family, T: int, repeat: int, **kw: Any) -> dict[str, object]:
    build: list[float] = []
    cpu: list[float] = []
    rend: dict[str, list[float]] = {f: [] for f in ("png", "pdf", "svg")}
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fig, _ = portrait(fam, T, **kw)
        render(fig, "png")
        cpu.append(time.process_time() - c0)
        build.append(time.perf_counter() - t0)
        for f in rend:
            t0 = time.perf_counter()
            render(fig, f)
            rend[f].append(time.perf_counter() - t0)
    out: dict[str, object] = {"case": name, "build_s": statistics.median(build)}
    out.update({f"render_{f}_s": statistics.median(v) for f, v in rend.items()})
    out["build_s"] = out["build_s"] - out["render_png_s"]  # type: ignore[operator]
    out["total_png_s"] = statistics.median(build)
    out["total_png_cpu_s"] = statistics.median(cpu)  # CPU time: robust to a busy machine
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = p.parse_args()
    cases = [
        ("gaussian σ=0.5 d=5 T=100, default", gaussian(5, 0.5), 100, {}),
        ("gaussian, with ab and PL panels", gaussian(5, 0.5), 100,
         {"inset_ab": True, "inset_pl": True}),
        ("ones d=5 T=100, default", ones(5), 100, {}),
    ]
    rows = []
    for name, fam, T, kw in cases:
        rows.append(bench(name, fam, T, args.repeat, **kw))
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"repeat": args.repeat, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()

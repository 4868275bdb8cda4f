"""Benchmark: how long whole ``mesadyn`` processes take to start and finish (issue 11, item 8).

Run: ``python benchmarks/bench_startup.py [--repeat 7] [--json]``.

Each case is a fresh interpreter (``python -m mesadyn.cli ...`` would hide the console-script
shim, so the installed ``mesadyn`` script is run as a user runs it), timed from spawn to exit;
the table gives the median and the minimum wall time over ``--repeat`` runs and the median CPU
time (user + system of the child process: steadier than wall time on a loaded machine), next to
``python -c pass`` on the same machine for scale, and the modules each case imported (torch,
jax, xarray, matplotlib) so that a regression in lazy imports is visible even on a loaded machine.

Targets (2 cores): ``mesadyn --help``, ``mesadyn theory`` and ``mesadyn integrate --reduced``
under 0.5 s each; ``mesadyn portrait`` (default) under 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("torch", "jax", "xarray", "matplotlib", "scipy", "dask")

#: (label, argv after the program, target seconds or None)
CASES: tuple[tuple[str, list[str], float | None], ...] = (
    ("python -c pass", [], None),
    ("mesadyn --help", ["--help"], 0.5),
    ("mesadyn theory", ["theory"], 0.5),
    ("mesadyn integrate --reduced", ["integrate", "--reduced"], 0.5),
    ("mesadyn portrait", ["portrait", "--out", "{tmp}/portrait.pdf"], 2.0),
)

_PROBE = (
    "import sys, runpy; sys.argv = ['mesadyn'] + {args!r}\n"
    "from mesadyn.cli import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "heavy = sorted(m for m in {heavy!r} if m in sys.modules)\n"
    "sys.stderr.write('HEAVY=' + ','.join(heavy) + '\\n')\n"
)


def _machine() -> dict[str, object]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_1m": round(load[0], 2),
    }


def _cpu_children() -> float:
    """User + system seconds of every finished child so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _time(cmd: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) of ``repeat`` runs of ``cmd``."""
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = _cpu_children(), time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu_children() - c0)
    return walls, cpus


def _heavy_imports(args: list[str]) -> str:
    """The heavy modules a run imports (a separate, untimed probe run)."""
    probe = _PROBE.format(args=args, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=False)
    for line in out.stderr.splitlines():
        if line.startswith("HEAVY="):
            return line[len("HEAVY="):] or "-"
    return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    exe = shutil.which("mesadyn")
    if exe is None:
        sys.exit("the mesadyn console script is not on PATH (pip install -e .)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, argv, target in CASES:
            argv = [a.format(tmp=tmp) for a in argv]
            cmd = [sys.executable, "-c", "pass"] if not argv else [exe, *argv]
            t, cpu = _time(cmd, args.repeat)
            rows.append({
                "case": label, "median_s": statistics.median(t), "min_s": min(t),
                "cpu_median_s": statistics.median(cpu),
                "target_s": target,
                "meets": None if target is None else statistics.median(t) < target,
                "heavy_imports": "-" if not argv else _heavy_imports(argv),
            })
            Path(tmp, "portrait.pdf").unlink(missing_ok=True)
    report = {"machine": _machine(), "repeat": args.repeat, "cases": rows}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"machine: {report['machine']}  repeat: {args.repeat}")
    print(f"{'case':32s} {'median s':>9s} {'min s':>7s} {'cpu s':>6s} {'target':>7s}  "
          "heavy imports")
    for r in rows:
        target = "" if r["target_s"] is None else f"< {r['target_s']:g}"
        print(f"{r['case']:32s} {r['median_s']:9.3f} {r['min_s']:7.3f} "
              f"{r['cpu_median_s']:6.2f} {target:>7s}  "
              f"{r['heavy_imports']}")


if __name__ == "__main__":
    main()

"""Benchmark: how long whole ``mesadyn`` processes take to start and finish.

Run: ``python benchmarks/bench_startup.py [--repeat 7] [--top 8] [--json]``.

Each case is a fresh interpreter (``python -m mesadyn.cli ...`` would hide the console-script
shim, so the installed ``mesadyn`` script is run as a user runs it), timed from spawn to exit;
the table gives the median and the minimum wall time over ``--repeat`` runs and the median CPU
time (user + system of the child process: steadier than wall time on a loaded machine), next to
``python -c pass`` on the same machine for scale, and the modules each case imported (torch,
jax, xarray, matplotlib) so that a regression in lazy imports is visible even on a loaded machine.
Every child runs with bytecode caching on, in a private cache (``PYTHONPYCACHEPREFIX``, filled by
one untimed warm-up run per case), as an installed package runs: with
``PYTHONDONTWRITEBYTECODE=1`` every process would compile mesadyn's sources again.
A separate, untimed ``python -X importtime`` run of each case gives what it imports: the
``--top`` costliest imports by cumulative time (the packages first imported at the top level of
the command, their own imports included) and the cumulative time of a fixed list of libraries
(numpy, typer, pydantic, rich, torch, scipy, xarray, matplotlib).

Targets (2 cores, whole processes): ``mesadyn --help`` under 0.5 s, ``mesadyn theory`` under
0.3 s, ``mesadyn integrate --reduced`` (the closed form) under 0.5 s and ``mesadyn portrait``
(default) under 2 s.
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
from typing import Any

HEAVY = ("torch", "jax", "xarray", "matplotlib", "scipy", "dask")
#: Libraries whose cumulative import time each case reports (0 when not imported).
LIBRARIES = ("numpy", "typer", "pydantic", "rich", "torch", "scipy", "xarray", "matplotlib")

#: (label, argv after the program, target seconds or None)
CASES: tuple[tuple[str, list[str], float | None], ...] = (
    ("python -c pass", [], None),
    ("mesadyn --help", ["--help"], 0.5),
    ("mesadyn theory", ["theory"], 0.3),
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


#: The children's environment: bytecode caching on, in a cache of their own (set in main).
ENV: dict[str, str] = dict(os.environ)


def _child_env(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def _time(cmd: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) of ``repeat`` runs of ``cmd`` (after one untimed warm-up
    run that fills the bytecode cache)."""
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=ENV)
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = _cpu_children(), time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                       env=ENV)
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu_children() - c0)
    return walls, cpus


def _heavy_imports(args: list[str]) -> str:
    """The heavy modules a run imports (a separate, untimed probe run)."""
    probe = _PROBE.format(args=args, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=False, env=ENV)
    for line in out.stderr.splitlines():
        if line.startswith("HEAVY="):
            return line[len("HEAVY="):] or "-"
    return "?"


def parse_importtime(stderr: str) -> list[tuple[int, float, str]]:
    """``(depth, cumulative ms, module)`` of each line of ``python -X importtime``'s report
    (depth 0: imported by the command itself; each level of indentation one deeper)."""
    rows = []
    for line in stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(parts) != 3:
            continue
        try:
            cum_us = int(parts[1])
        except ValueError:  # the header line
            continue
        name = parts[2]
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        rows.append((depth, cum_us / 1000, name.strip()))
    return rows


def import_summary(args: list[str], top: int) -> dict[str, Any]:
    """What a case imports (a separate, untimed ``-X importtime`` run): the ``top`` costliest
    imports at depth 0 or 1 by cumulative ms, and the cumulative ms of :data:`LIBRARIES`."""
    probe = _PROBE.format(args=args, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], capture_output=True,
                         text=True, check=False, env=ENV)
    rows = parse_importtime(out.stderr)
    shallow = sorted((r for r in rows if r[0] <= 1), key=lambda r: -r[1])[:top]
    first = {name: cum for _, cum, name in reversed(rows)}
    return {"top": [{"module": name, "depth": depth, "cumulative_ms": round(cum, 1)}
                    for depth, cum, name in shallow],
            "libraries_ms": {lib: round(first.get(lib, 0.0), 1) for lib in LIBRARIES}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--top", type=int, default=8, help="imports listed per case")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    exe = shutil.which("mesadyn")
    if exe is None:
        sys.exit("the mesadyn console script is not on PATH (pip install -e .)")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ENV.clear()
        ENV.update(_child_env(str(Path(tmp, "pycache"))))
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
                "imports": None if not argv else import_summary(argv, args.top),
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
        goal = "" if r["target_s"] is None else f"< {r['target_s']:g}"
        print(f"{r['case']:32s} {r['median_s']:9.3f} {r['min_s']:7.3f} "
              f"{r['cpu_median_s']:6.2f} {goal:>7s}  "
              f"{r['heavy_imports']}")
    print("\nwhat each case imports (python -X importtime, cumulative ms; depth 0 = imported by "
          "the command itself)")
    for r in rows:
        imp = r["imports"]
        if not imp:
            continue
        libs = ", ".join(f"{k} {v:.0f}" for k, v in imp["libraries_ms"].items() if v)
        print(f"{r['case']}:  libraries: {libs or '-'}")
        for e in imp["top"]:
            print(f"    {'  ' * e['depth']}{e['module']:40s} {e['cumulative_ms']:8.1f}")


if __name__ == "__main__":
    main()

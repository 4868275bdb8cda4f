"""The machine a benchmark runs on, as its tables print it (shared by the ``bench_*.py``
scripts, which run with this folder on ``sys.path``)."""

from __future__ import annotations

import platform


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"

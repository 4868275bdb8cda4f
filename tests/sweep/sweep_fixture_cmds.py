"""Point functions for the sweep tests (importable by Dask workers via sys.path / PYTHONPATH).

``counted`` appends one JSON line per computation to ``log`` so the tests can count exactly
which points were computed, by which process.
"""

from __future__ import annotations

import json
import os
import time


def counted(x: int = 0, y: float = 1.0, log: str = "", delay: float = 0.0,
            fail_on: int = -1, tag: str = "a") -> dict[str, object]:
    """Simple arithmetic of (x, y); raises at ``x == fail_on``; logs every call."""
    time.sleep(delay)
    if x == fail_on:
        raise ValueError(f"injected failure at x={x}")
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps({"pid": os.getpid(), "x": x, "y": y}) + "\n").encode())
        finally:
            os.close(fd)
    return {"prod": x * y, "sum": x + y, "label": f"{tag}{x}", "even": x % 2 == 0,
            "vec": [x, y, x * y], "nested": {"sq": x * x}, "x": x,
            "ragged": [float(k) for k in range(x)]}


def not_a_dict(x: int = 0) -> list[int]:
    """Returns a list, which a sweep must record as a failure."""
    return [x]


def die(x: int = 0) -> dict[str, int]:
    """Kills its worker process at x == 1 (as an out-of-memory kill would)."""
    if x == 1:
        os._exit(1)
    return {"x2": 2 * x}


def chatty(x: int = 0) -> dict[str, object]:
    """A target that prints while it runs (as user code does)."""
    print(f"chatty: computing x={x}")
    return {"x2": x * x}

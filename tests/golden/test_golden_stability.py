"""Golden test: ``mesadyn stability --json`` gives the numbers of mesadyn 0.1, to the last digit.

``tests/golden/data/stability_{gaussian,ones}.json`` are the 0.1 CLI's output, captured before
the analysis moved into :mod:`mesadyn.workflows.stability`.  Every key must be there and every
number identical (``==`` on floats), except wall-clock timings.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from mesadyn.cli import main

DATA = Path(__file__).parent / "data"
#: Keys whose values are wall-clock times, not results.
TIMING_KEYS = frozenset({"wall_s"})


def differences(got: Any, want: Any, path: str = "") -> list[str]:
    """Every place where ``got`` and ``want`` differ (keys, lengths, values; NaN == NaN)."""
    if isinstance(got, dict) and isinstance(want, dict):
        out = [f"{path}: keys only in one: {sorted(set(got) ^ set(want))}"] \
            if set(got) != set(want) else []
        for k in sorted(set(got) & set(want)):
            if k not in TIMING_KEYS:
                out += differences(got[k], want[k], f"{path}.{k}")
        return out
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            return [f"{path}: length {len(got)} != {len(want)}"]
        return [x for i, (g, w) in enumerate(zip(got, want, strict=True))
                for x in differences(g, w, f"{path}[{i}]")]
    both_nan = isinstance(got, float) and isinstance(want, float) and math.isnan(got) \
        and math.isnan(want)
    if got != want and not both_nan or type(got) is not type(want):
        return [f"{path}: {got!r} != {want!r}"]
    return []


def test_differences_sees_the_last_digit():
    assert differences({"a": [1.0, 2.0]}, {"a": [1.0, 2.0000000000000004]}) == \
        [".a[1]: 2.0 != 2.0000000000000004"]
    assert differences({"a": 1, "wall_s": 2.0}, {"a": 1, "wall_s": 3.0}) == []
    assert differences({"a": 1}, {"b": 1})


@pytest.mark.parametrize("x1", ["gaussian", "ones"])
def test_stability_json_is_unchanged(x1, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("MESADYN_CACHE_DIR", str(tmp_path / "cache"))
    code = main(["stability", "--x1", x1, "--d", "3", "--T", "20", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    got = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    want = json.loads((DATA / f"stability_{x1}.json").read_text())
    assert differences(got, want) == []

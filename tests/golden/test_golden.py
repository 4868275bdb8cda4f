"""Golden outputs: the ``--json`` object of each workflow's command is the one mesadyn 0.1 gave.

The stored objects (``data/*.json``) were made by mesadyn 0.1 with exactly the arguments below.
Every key must be present and every number identical to the last digit; only timing keys
(``wall_s``) and output paths (``out``) may differ.  Each case runs in-process through the CLI
entry point ``mesadyn.cli.main`` and takes at most a few seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mesadyn.cli import main

DATA = Path(__file__).parent / "data"
#: Keys whose values legitimately change from run to run.
VOLATILE = frozenset({"wall_s", "out"})

CASES: dict[str, str] = {
    "theory_gaussian": "theory --x1 gaussian --sigma 1",
    "theory_ones": "theory --x1 ones --d 3 --T 20",
    "integrate_reduced": "integrate --reduced --x1 gaussian --a0 0.5 --b0 1.5",
    "integrate_full_gaussian": "integrate --x1 gaussian --d 3 --T 20 --a0 0.5 --b0 1.5",
    "integrate_full_ones": "integrate --x1 ones --d 3 --T 20 --a0 0.5 --b0 1.5",
    "portrait": "portrait --x1 gaussian --out {tmp}/p.pdf",
    "train": "train --x1 gaussian --d 3 --T 10 --m 200 --steps 5 --a0 0.1 --b0 0.1",
}


def _cli_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, Any]:
    try:
        main([*args, "--json"])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def _same(got: Any, want: Any, where: str) -> None:
    """Equal keys, equal types of container, and numbers equal to the last bit."""
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        assert set(got) == set(want), f"{where}: keys differ: {set(got) ^ set(want)}"
        for k in want:
            if k not in VOLATILE:
                _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{i}]")
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    want = json.loads((DATA / f"{name}.json").read_text())
    got = _cli_json(capsys, CASES[name].format(tmp=tmp_path).split())
    _same(got, want, name)
    if "out" in want and want["out"] is not None:
        assert Path(got["out"]).is_file()


def test_golden_checker_can_fail() -> None:
    """The comparison is strict: one ulp, a missing key or an int for a float all fail."""
    import math

    with pytest.raises(AssertionError):
        _same({"x": math.nextafter(0.5, 1.0)}, {"x": 0.5}, "x")
    with pytest.raises(AssertionError):
        _same({"x": 1}, {"x": 1.0}, "x")
    with pytest.raises(AssertionError):
        _same({"x": 1.0}, {"x": 1.0, "y": None}, "x")
    _same({"x": [1.0, None], "wall_s": 3.0}, {"x": [1.0, None], "wall_s": 1.0}, "x")

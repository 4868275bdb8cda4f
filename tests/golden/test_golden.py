"""Golden outputs: the ``--json`` object of each workflow's command is the one mesadyn 0.1 gave.

The stored objects (``data/*.json``) were made by mesadyn 0.1 with exactly the arguments below.
Every key must be present and every number identical to the last digit (``train``: within
:data:`RTOL`, see there); only timing keys (``wall_s``) and output paths (``out``) may
differ.  Each case runs in-process through the CLI entry point ``mesadyn.cli.main`` and takes
at most a few seconds.
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
#: Cases compared within a relative tolerance instead of to the last bit.  ``train`` runs the
#: fused CPU kernel (numba, mesadyn 0.2), whose sums over t are vectorized to the CPU's width
#: and so round in the machine's own order: 3 of its numbers are 1–2 ulps from 0.1's on AMD
#: EPYC (AVX2), and a machine with wider vectors may differ in a few more.  1e-13 is ~500 ulps.
RTOL = {"train": 1e-13}

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


def _same(got: Any, want: Any, where: str, rtol: float = 0.0) -> None:
    """Equal keys, equal types of container, and numbers equal to the last bit (floats within
    ``rtol`` relative when it is given)."""
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        assert set(got) == set(want), f"{where}: keys differ: {set(got) ^ set(want)}"
        for k in want:
            if k not in VOLATILE:
                _same(got[k], want[k], f"{where}.{k}", rtol)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{i}]", rtol)
    elif rtol and type(want) is float:
        assert type(got) is float and abs(got - want) <= rtol * abs(want), \
            f"{where}: {got!r} != {want!r} (rtol {rtol})"
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    want = json.loads((DATA / f"{name}.json").read_text())
    got = _cli_json(capsys, CASES[name].format(tmp=tmp_path).split())
    _same(got, want, name, RTOL.get(name, 0.0))
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
    with pytest.raises(AssertionError):  # the tolerance is relative and strict
        _same({"x": 0.5 * (1 + 2e-13)}, {"x": 0.5}, "x", 1e-13)
    with pytest.raises(AssertionError):
        _same({"x": 1}, {"x": 1.0}, "x", 1e-13)
    _same({"x": 0.5 * (1 + 5e-14), "n": 3}, {"x": 0.5, "n": 3}, "x", 1e-13)
